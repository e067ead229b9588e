//! The mock over real sockets: routing, script order, auxiliary calls, the wire formats.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use super::{CallKind, MockLlm, Script, Step, Usage};

/// Sends one request and returns (status line, headers, body) once the mock closes.
fn send(
    mock: &MockLlm,
    method: &str,
    target: &str,
    body: &str,
    chunked: bool,
) -> (String, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n");
    if chunked {
        let (first, second) = body.split_at(body.len() / 2);
        request.push_str("transfer-encoding: chunked\r\n\r\n");
        for part in [first, second] {
            request.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
        }
        request.push_str("0\r\n\r\n");
    } else {
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    }
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_owned(), headers.to_lowercase(), body.to_owned())
}

/// The `data:` payloads of an SSE body.
fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        // Chat Completions ends its stream with a sentinel that is not JSON.
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn script() -> Script {
    Script::new(vec![
        Step::tool("first", Usage::anthropic_split(10, 100, 50, 1000, 20)),
        Step::text("second", Usage::openai(500, 400, 30, 10)),
    ])
}

#[test]
fn anthropic_stream_tool_use_then_script_order() {
    let mock = MockLlm::start(script()).unwrap();
    let request = json!({"model": "claude-test", "stream": true, "max_tokens": 10,
        "tools": [{"name": "Bash"}, {"name": "Read"}], "messages": []});
    let (status, headers, body) =
        send(&mock, "POST", "/v1/messages?beta=true", &request.to_string(), false);
    assert!(status.contains("200"), "{status}");
    assert!(headers.contains("request-id: req_mock_"), "{headers}");
    assert!(headers.contains("text/event-stream"));
    let events = sse_data(&body);
    assert_eq!(events[0]["message"]["model"], "claude-test");
    assert_eq!(events[0]["message"]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"], 50);
    let tool = events.iter().find(|event| event["content_block"]["type"] == "tool_use").unwrap();
    assert_eq!(tool["content_block"]["name"], "Read");
    let delta = events.iter().find(|event| event["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 20);

    // An auxiliary call (no tools) and count_tokens leave the script alone.
    send(
        &mock,
        "POST",
        "/v1/messages",
        &json!({"model": "claude-haiku", "messages": []}).to_string(),
        false,
    );
    send(&mock, "POST", "/v1/messages/count_tokens", &json!({"model": "m"}).to_string(), false);
    // pi's cache warming: tools declared, one token asked for.
    let warming = json!({"model": "claude-test", "max_tokens": 1, "tools": [{"name": "read"}],
        "messages": []});
    send(&mock, "POST", "/v1/messages", &warming.to_string(), false);
    // The second main call, non-streaming, over the Responses API, with a chunked body.
    let request =
        json!({"model": "gpt-test", "tools": [{"type": "function", "name": "shell"}], "input": []});
    let (_, _, body) = send(&mock, "POST", "/v1/responses", &request.to_string(), true);
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["output"][0]["content"][0]["text"], "second");
    assert_eq!(response["usage"]["input_tokens_details"]["cached_tokens"], 400);
    assert_eq!(response["usage"]["total_tokens"], 530);

    let calls = mock.calls();
    let kinds: Vec<CallKind> = calls.iter().map(|call| call.kind).collect();
    assert_eq!(
        kinds,
        [
            CallKind::Main,
            CallKind::Auxiliary,
            CallKind::CountTokens,
            CallKind::Auxiliary,
            CallKind::Main
        ]
    );
    assert_eq!(calls[0].script_step, Some(0));
    assert_eq!(calls[4].script_step, Some(1));
    assert!(calls[1].usage.is_some() && calls[2].usage.is_none());
    assert_eq!(mock.steps_left(), 0);
    assert_eq!(super::sum_usage(&mock.main_since(0)).input, 1160 + 500);
}

#[test]
fn openai_stream_function_call_and_default_reply() {
    let mock = MockLlm::start(Script::new(vec![Step::tool("plan", Usage::openai(100, 0, 10, 0))]))
        .unwrap();
    let request = json!({"model": "gpt-5.2-codex", "stream": true,
        "tools": [{"type": "function", "name": "exec_command"}, {"type": "function", "name": "update_plan"}]});
    let (_, headers, body) = send(&mock, "POST", "/v1/responses", &request.to_string(), false);
    assert!(headers.contains("text/event-stream"));
    assert!(body.contains("event: response.completed\n"));
    let events = sse_data(&body);
    let done: Vec<&Value> =
        events.iter().filter(|event| event["type"] == "response.output_item.done").collect();
    assert_eq!(done.last().unwrap()["item"]["name"], "update_plan");
    assert_eq!(events.last().unwrap()["response"]["usage"]["output_tokens"], 10);
    // The script is used up: the default reply.
    let (_, _, body) = send(&mock, "POST", "/v1/responses", &request.to_string(), false);
    assert!(body.contains("Hello from mock."));
    let (status, _, body) = send(&mock, "GET", "/v1/models", "", false);
    let listing: Value = serde_json::from_str(&body).unwrap();
    assert!(status.contains("200"), "{status}");
    // Codex's own field stays empty (its presets apply); OpenAI's `data` names a model.
    assert_eq!(listing["models"], json!([]));
    assert_eq!(listing["data"][0]["object"], "model");
}

#[test]
fn gemini_stream_checks_and_unknown_paths() {
    let mock =
        MockLlm::start(Script::new(vec![Step::tool("look", Usage::gemini(800, 600, 9, 24))]))
            .unwrap();
    let request = json!({"contents": [], "tools": [{"functionDeclarations": [
        {"name": "list_directory", "parametersJsonSchema": {"properties": {"dir_path": {}}}}]}]});
    let target = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
    let (_, _, body) = send(&mock, "POST", target, &request.to_string(), false);
    let chunks = sse_data(&body);
    let last = chunks.last().unwrap();
    assert_eq!(last["usageMetadata"]["totalTokenCount"], 833);
    assert_eq!(last["usageMetadata"]["thoughtsTokenCount"], 24);
    assert_eq!(
        last["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]["dir_path"],
        "."
    );

    let check = json!({"contents": [], "generationConfig": {"responseJsonSchema": {"type": "object",
        "properties": {"reasoning": {"type": "string"}, "next_speaker": {"type": "string", "enum": ["model", "user"]}}}}});
    let (_, _, body) = send(
        &mock,
        "POST",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &check.to_string(),
        false,
    );
    let response: Value = serde_json::from_str(&body).unwrap();
    let text = response["candidates"][0]["content"]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap()["next_speaker"], "user");

    let (status, _, _) = send(&mock, "POST", "/v1/unknown", "{}", false);
    assert!(status.contains("404"));
    let calls = mock.calls();
    assert_eq!(calls[0].model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!(calls[1].kind, CallKind::Auxiliary);
    assert_eq!(mock.unhandled_since(0).len(), 1);
}

/// The chunks of a Chat Completions stream, after checking it ends with `data: [DONE]`.
fn chat_chunks(body: &str) -> Vec<Value> {
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let chunks = sse_data(body);
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert!(chunk["id"].as_str().unwrap().starts_with("chatcmpl-"));
    }
    chunks
}

/// The concatenated `delta[field]` strings of the stream, and of its tool call's arguments.
fn chat_delta_text(chunks: &[Value], field: &str) -> String {
    let delta = |chunk: &Value| chunk["choices"][0]["delta"].clone();
    let text = |value: &Value| value.as_str().unwrap_or("").to_owned();
    match field {
        "arguments" => chunks
            .iter()
            .map(|chunk| text(&delta(chunk)["tool_calls"][0]["function"]["arguments"]))
            .collect(),
        field => chunks.iter().map(|chunk| text(&delta(chunk)[field])).collect(),
    }
}

fn chat_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "write_file", "parameters": {}}},
        {"type": "function", "function": {"name": "glob", "parameters": {"type": "object",
            "required": ["pattern"], "properties": {"pattern": {"type": "string"}}}}},
    ])
}

#[test]
fn chat_stream_usage_only_when_asked() {
    let first = Usage::chat(1200, 1000, 40, 16);
    let second = Usage::chat(1300, 1200, 5, 0);
    let mock = MockLlm::start(Script::new(vec![
        Step::tool("Let me look.", first).with_thinking("Looking around first."),
        Step::text("Done.", second),
    ]))
    .unwrap();
    let request = json!({"model": "qwen-test", "stream": true, "messages": [],
        "stream_options": {"include_usage": true}, "tools": chat_tools()});
    let (status, headers, body) =
        send(&mock, "POST", "/v1/chat/completions", &request.to_string(), false);
    assert!(status.contains("200") && headers.contains("text/event-stream"), "{status}");
    let chunks = chat_chunks(&body);
    assert!(chunks.iter().all(|chunk| chunk["model"] == "qwen-test"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chat_delta_text(&chunks, "reasoning_content"), "Looking around first.");
    assert_eq!(chat_delta_text(&chunks, "content"), "Let me look.");
    let opening = chunks
        .iter()
        .find_map(|chunk| chunk["choices"][0]["delta"]["tool_calls"][0].get("id"))
        .unwrap();
    assert!(opening.as_str().unwrap().starts_with("call_"));
    let arguments: Value = serde_json::from_str(&chat_delta_text(&chunks, "arguments")).unwrap();
    assert_eq!(arguments, json!({"pattern": "*"}));
    // The finish reason, then the usage alone; every chunk before it says `"usage": null`.
    let (usage_chunk, rest) = chunks.split_last().unwrap();
    assert_eq!(rest.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
    assert!(rest.iter().all(|chunk| chunk["usage"].is_null() && chunk.get("usage").is_some()));
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"], first.chat_json());
    assert_eq!(usage_chunk["usage"]["prompt_tokens"], 1200);
    assert_eq!(usage_chunk["usage"]["completion_tokens_details"]["reasoning_tokens"], 16);

    // No `include_usage`: nothing on the wire, yet the call is billed.
    let request =
        json!({"model": "qwen-test", "stream": true, "messages": [], "tools": chat_tools()});
    let (_, _, body) = send(&mock, "POST", "/chat/completions", &request.to_string(), false);
    let chunks = chat_chunks(&body);
    assert!(chunks.iter().all(|chunk| chunk.get("usage").is_none()));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(chat_delta_text(&chunks, "content"), "Done.");

    let calls = mock.calls();
    assert!(calls.iter().all(|call| call.provider == super::Provider::OpenAiChat));
    assert_eq!(calls[0].native_usage, Some(first.chat_json()));
    assert_eq!(calls[0].tool_call, Some(json!({"name": "glob", "args": {"pattern": "*"}})));
    assert_eq!((calls[1].usage, calls[1].native_usage.clone()), (Some(second), None));
    assert_eq!(super::sum_usage(&mock.main_since(0)), first + second);
    assert!(super::summary(&calls[1]).contains("(not sent)"));
}

#[test]
fn chat_non_streamed_tool_call_and_usage() {
    let usage = Usage::chat(900, 0, 30, 0);
    let mock = MockLlm::start(Script::new(vec![Step::tool("", usage)])).unwrap();
    let request = json!({"model": "kimi-test", "messages": [], "tools": chat_tools()});
    let (_, headers, body) =
        send(&mock, "POST", "/v1/chat/completions", &request.to_string(), true);
    assert!(headers.contains("application/json"));
    let completion: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["model"], "kimi-test");
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "glob");
    let arguments = call["function"]["arguments"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(arguments).unwrap()["pattern"], "*");
    assert_eq!(completion["usage"], usage.chat_json());
    assert_eq!(completion["usage"]["total_tokens"], 930);
    let calls = mock.calls();
    assert_eq!((calls[0].kind, calls[0].usage), (CallKind::Main, Some(usage)));
    assert_eq!(calls[0].native_usage, Some(usage.chat_json()));
}

#[test]
fn chat_auxiliary_titles_and_schema_queries() {
    let mock = MockLlm::start(script()).unwrap();
    let ask = |extra: Value| {
        let mut request = json!({"model": "aux", "messages": [{"role": "user", "content": "hi"}]});
        request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (_, _, body) = send(&mock, "POST", "/v1/chat/completions", &request.to_string(), false);
        serde_json::from_str::<Value>(&body).unwrap()["choices"][0]["message"].clone()
    };
    assert_eq!(ask(json!({}))["content"], "Mock title");
    let json_object = ask(json!({"response_format": {"type": "json_object"}}));
    let title: Value = serde_json::from_str(json_object["content"].as_str().unwrap()).unwrap();
    assert_eq!(title, json!({"title": "Mock title"}));
    let json_schema = ask(json!({"response_format": {"type": "json_schema", "json_schema": {
        "name": "title", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}));
    let title: Value = serde_json::from_str(json_schema["content"].as_str().unwrap()).unwrap();
    assert!(title["title"].is_string());
    // qwen-code's generateJson: one forced `respond_in_schema` tool.
    let schema = json!({"type": "object", "properties": {"reasoning": {"type": "string"},
        "next_speaker": {"type": "string", "enum": ["model", "user"]}}});
    let check = ask(json!({"tools": [{"type": "function", "function": {
        "name": "respond_in_schema", "parameters": schema}}], "tool_choice": "required"}));
    let arguments = check["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(arguments).unwrap()["next_speaker"], "user");

    assert_eq!(mock.steps_left(), 2);
    let calls = mock.calls();
    assert!(calls.iter().all(|call| call.kind == CallKind::Auxiliary));
    assert!(calls.iter().all(|call| call.usage == Some(Script::default_auxiliary())));
    assert!(
        calls.iter().all(|call| call.native_usage == Some(Script::default_auxiliary().chat_json()))
    );
}

#[test]
fn chat_mistral_flavour_usage_always_and_whole_tool_calls() {
    let first = Usage::chat(6000, 4096, 30, 0);
    let second = Usage::chat(7000, 5120, 25, 0);
    let mock = MockLlm::start(Script::new(vec![
        Step::tool("Reading.", first),
        Step::text("Read it.", second),
    ]))
    .unwrap();
    assert_eq!(mock.mistral_url(), format!("{}/mistral/v1", mock.url()));
    // The mistralai SDK sends no `stream_options`.
    let request = json!({"model": "mistral-vibe-cli-latest", "stream": true, "messages": [], "tools": chat_tools()});
    let (status, _, body) =
        send(&mock, "POST", "/mistral/v1/chat/completions", &request.to_string(), false);
    assert!(status.contains("200"), "{status}");
    let chunks = chat_chunks(&body);
    assert_eq!(chat_delta_text(&chunks, "content"), "Reading.");
    // The tool call comes whole in one delta: id, name and every argument.
    let calls: Vec<&Value> =
        chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"].get("tool_calls")).collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "glob");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"pattern": "*"}));
    // The usage on the finishing chunk, which is the last; none before it.
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(last["usage"], first.chat_json());
    assert!(rest.iter().all(|chunk| chunk.get("usage").is_none()));

    // Asked for or not, the same shape.
    let request = json!({"model": "mistral-vibe-cli-latest", "stream": true, "messages": [],
        "stream_options": {"include_usage": true}, "tools": chat_tools()});
    let (_, _, body) =
        send(&mock, "POST", "/mistral/v1/chat/completions", &request.to_string(), false);
    let chunks = chat_chunks(&body);
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(
        (&last["choices"][0]["finish_reason"], &last["usage"]),
        (&json!("stop"), &second.chat_json())
    );
    assert!(rest.iter().all(|chunk| chunk.get("usage").is_none()));

    // A title (no tools) on the same flavour: billed and sent too.
    let request = json!({"model": "mistral-vibe-cli-latest", "stream": true, "messages": []});
    let (_, _, body) =
        send(&mock, "POST", "/mistral/v1/chat/completions", &request.to_string(), false);
    let chunks = chat_chunks(&body);
    assert_eq!(chunks.last().unwrap()["usage"], Script::default_auxiliary().chat_json());

    let calls = mock.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|call| call.provider == super::Provider::OpenAiChat));
    assert_eq!((calls[0].kind, calls[0].usage), (CallKind::Main, Some(first)));
    assert_eq!(calls[0].native_usage, Some(first.chat_json()));
    assert_eq!(calls[0].tool_call, Some(json!({"name": "glob", "args": {"pattern": "*"}})));
    assert_eq!(calls[1].native_usage, Some(second.chat_json()));
    assert_eq!(calls[2].kind, CallKind::Auxiliary);
    assert_eq!(calls[2].native_usage, Some(Script::default_auxiliary().chat_json()));
    assert_eq!(
        super::sum_usage(&mock.billed_since(0)),
        first + second + Script::default_auxiliary()
    );
    assert!(calls.iter().all(|call| !super::summary(call).contains("(not sent)")));

    // The plain path keeps OpenAI's behaviour: no usage unless asked, tool calls in pieces.
    let mock = MockLlm::start(Script::new(vec![Step::tool("", first)])).unwrap();
    let request = json!({"model": "m", "stream": true, "messages": [], "tools": chat_tools()});
    let (_, _, body) = send(&mock, "POST", "/v1/chat/completions", &request.to_string(), false);
    let chunks = chat_chunks(&body);
    assert!(chunks.iter().all(|chunk| chunk.get("usage").is_none()));
    let pieces =
        chunks.iter().filter(|chunk| chunk["choices"][0]["delta"].get("tool_calls").is_some());
    assert!(pieces.count() > 1);
}

/// Codex signed in with ChatGPT sends its Responses requests zstd-compressed: the mock reads
/// them like plain ones, and keeps the credentials for the tests without ever showing them.
#[test]
fn zstd_requests_are_read_and_credentials_kept_out_of_sight() {
    let mock = MockLlm::start(script()).unwrap();
    let body = json!({"model": "gpt-5.2-codex", "stream": true,
                      "tools": [{"type": "function", "name": "update_plan"}]});
    let compressed = ruzstd::encoding::compress_to_vec(
        body.to_string().as_bytes(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let mut stream = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-encoding: zstd\r\nauthorization: Bearer secret-token-123\r\n\
         chatgpt-account-id: acct-1\r\ncontent-length: {}\r\n\r\n",
        compressed.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&compressed).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let calls = mock.calls();
    assert_eq!(calls[0].kind, CallKind::Main);
    assert_eq!(calls[0].model.as_deref(), Some("gpt-5.2-codex"));
    let received = mock.received();
    assert_eq!(received[0].credential("authorization"), Some("Bearer secret-token-123"));
    assert_eq!(received[0].credential("chatgpt-account-id"), Some("acct-1"));
    assert!(!format!("{received:?}").contains("secret-token"));
    assert!(!serde_json::to_string(&calls[0]).unwrap().contains("secret-token"));
}
