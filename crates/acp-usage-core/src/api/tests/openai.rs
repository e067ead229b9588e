//! OpenAI Responses and Chat Completions responses.

use serde_json::{Value, json};

use super::*;
use crate::estimate::{self, Family};

fn responses_request() -> RequestInfo {
    let body = json!({"model": "gpt-5.2-codex", "instructions": "You are Codex.", "input": [],
        "tools": [{"type": "function", "name": "update_plan"}], "stream": true});
    RequestInfo::read(Api::OpenAiResponses, "/v1/responses", body.to_string().as_bytes())
}

/// The mock's usage (`Usage::openai_json`): 5000 in of which 4096 cached, 40 out of which 16
/// reasoning.
fn responses_usage() -> Value {
    json!({"input_tokens": 5000, "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 16}, "total_tokens": 5040})
}

/// The mock's Responses stream (`mock_llm/openai.rs`): named events, sequence numbers.
fn responses_stream(terminal: &str, usage: Value) -> Vec<Value> {
    let message = json!({"type": "message", "id": "msg_mock_1", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello from mock.", "annotations": []}]});
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": "resp_mock_1", "object": "response",
            "created_at": 1_795_310_000, "status": "in_progress", "model": "gpt-5.2-codex", "output": []}}),
        json!({"type": "response.in_progress", "response": {"id": "resp_mock_1", "object": "response",
            "status": "in_progress", "model": "gpt-5.2-codex", "output": [], "usage": null}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message",
            "id": "msg_mock_1", "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_mock_1", "output_index": 0,
            "content_index": 0, "delta": "Hello from mock."}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": message}),
        json!({"type": terminal, "response": {"id": "resp_mock_1", "object": "response",
            "status": "completed", "model": "gpt-5.2-codex", "output": [message], "usage": usage}}),
    ];
    for (n, event) in events.iter_mut().enumerate() {
        event["sequence_number"] = json!(n);
    }
    events
}

#[test]
fn responses_streams() {
    let expected = Observed {
        record: with_model(TokenRecord::from_openai(5000, 4096, 40, 16), "gpt-5.2-codex"),
        id: Some("resp_mock_1".into()),
        complete: true,
        estimated: false,
    };
    for terminal in ["response.completed", "response.incomplete"] {
        let events = responses_stream(terminal, responses_usage());
        // Named as OpenAI and the mock send them, and unnamed as some compatible servers do.
        for body in [sse(&typed(&events), "\n"), sse(&unnamed(&events), "\r\n")] {
            let (offset, observed) = read_all_ways(
                Api::OpenAiResponses,
                Some("text/event-stream"),
                &responses_request(),
                &body,
                200,
            );
            assert_eq!(offset, Some(end_of_event(&body, &format!("\"{terminal}\""))));
            assert_eq!(observed.as_ref(), Some(&expected));
        }
    }
    // Failed without usage: final, but nothing to count.
    let body = sse(&typed(&responses_stream("response.failed", Value::Null)), "\n");
    let (offset, observed) =
        read_all_ways(Api::OpenAiResponses, None, &responses_request(), &body, 200);
    assert!(offset.is_some());
    assert_eq!(observed, None);
    // Cut before the terminal event: the Responses API states usage nowhere else.
    let body = sse(&typed(&responses_stream("response.completed", responses_usage())), "\n");
    let cut = end_of_event(&body, "response.output_item.done") + 1;
    let (offset, observed) =
        read_all_ways(Api::OpenAiResponses, None, &responses_request(), &body[..cut], 200);
    assert_eq!((offset, observed), (None, None));
}

#[test]
fn responses_read_the_billed_service_tier() {
    // Asked for priority (Codex's fast mode) and got it: the terminal response says so.
    let mut events = responses_stream("response.completed", responses_usage());
    events[0]["response"]["service_tier"] = json!("priority");
    events[5]["response"]["service_tier"] = json!("priority");
    let body = sse(&typed(&events), "\n");
    let (_, observed) = read_all_ways(Api::OpenAiResponses, None, &responses_request(), &body, 200);
    let record = observed.expect("usage").record;
    assert!(record.modifiers.priority, "{record:?}");
    assert_eq!(record.modifiers.names(), ["priority"]);
    // Asked for it, not granted: the terminal response's tier is the one billed.
    events[5]["response"]["service_tier"] = json!("default");
    let body = sse(&typed(&events), "\n");
    let (_, observed) = read_all_ways(Api::OpenAiResponses, None, &responses_request(), &body, 200);
    assert!(observed.expect("usage").record.modifiers.is_empty());
}

#[test]
fn responses_json_bodies() {
    let body = json!({"id": "resp_2", "object": "response", "status": "completed", "model": "gpt-5-mini",
        "output": [], "usage": {"input_tokens": 2600, "input_tokens_details": {"cached_tokens": 2000,
        "cache_write_tokens": 400}, "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}}});
    let (offset, observed) = read_all_ways(
        Api::OpenAiResponses,
        Some("application/json"),
        &responses_request(),
        body.to_string().as_bytes(),
        200,
    );
    assert_eq!(offset, Some(body.to_string().len() - 1));
    let expected = TokenRecord::from_inclusive(2600, 2000, 400, 10, 0);
    assert_eq!(
        observed.map(|o| (o.record, o.id, o.complete)),
        Some((with_model(expected, "gpt-5-mini"), Some("resp_2".into()), true))
    );
    // Codex's remote compaction: billed, no model in the body.
    let compact = json!({"id": "resp_001", "object": "response.compaction", "created_at": 1_764_967_971,
        "output": [{"id": "cmp_001", "type": "compaction", "encrypted_content": "gAAA"}],
        "usage": {"input_tokens": 139, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 438,
        "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 577}});
    let (_, observed) = read_all_ways(
        Api::OpenAiResponses,
        None,
        &responses_request(),
        compact.to_string().as_bytes(),
        200,
    );
    let expected = TokenRecord::from_openai(139, 0, 438, 64);
    assert_eq!(observed.map(|o| o.record), Some(with_model(expected, "gpt-5.2-codex")));
    // Errors.
    let error = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    let (_, observed) = read_all_ways(
        Api::OpenAiResponses,
        None,
        &responses_request(),
        error.to_string().as_bytes(),
        429,
    );
    assert_eq!(observed, None);
}

fn chat_request(stream: bool, include_usage: bool) -> RequestInfo {
    let mut body = json!({"model": "gpt-mock", "stream": stream,
        "messages": [{"role": "system", "content": "You are Qwen Code."}, {"role": "user", "content": "List files."}],
        "tools": [{"type": "function", "function": {"name": "glob"}}]});
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    RequestInfo::read(Api::OpenAiChat, "/v1/chat/completions", body.to_string().as_bytes())
}

/// The mock's usage (`Usage::chat_json`).
fn chat_usage() -> Value {
    json!({"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540,
        "prompt_tokens_details": {"cached_tokens": 256}, "completion_tokens_details": {"reasoning_tokens": 16}})
}

const ARGS: &str = "{\"pattern\":\"*\"}";

/// The mock's Chat stream (`mock_llm/chat.rs`): reasoning and text word by word, a tool call
/// with its arguments in pieces of 8, the finish chunk, and with `include_usage` the usage chunk.
fn chat_stream(include_usage: bool) -> Vec<Value> {
    let mut deltas: Vec<Value> =
        "Let me look.".split_inclusive(' ').map(|w| json!({"reasoning_content": w})).collect();
    deltas.extend("Hello from mock.".split_inclusive(' ').map(|w| json!({"content": w})));
    deltas.push(json!({"tool_calls": [{"index": 0, "id": "call_mock_1", "type": "function",
        "function": {"name": "glob", "arguments": ""}}]}));
    let pieces: Vec<String> =
        ARGS.chars().collect::<Vec<_>>().chunks(8).map(|c| c.iter().collect()).collect();
    deltas.extend(
        pieces.iter().map(|p| json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})),
    );
    deltas[0]["role"] = json!("assistant");
    let chunk = |choices: Value| {
        let mut chunk = json!({"id": "chatcmpl-mock_1", "object": "chat.completion.chunk",
            "created": 1_795_310_000, "model": "gpt-mock", "choices": choices});
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
    let mut events: Vec<Value> =
        deltas.into_iter().map(|d| chunk(choice(d, Value::Null))).collect();
    events.push(chunk(choice(json!({}), json!("tool_calls"))));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = chat_usage();
        events.push(last);
    }
    events.push(json!("[DONE]"));
    events
}

#[test]
fn chat_stream_with_usage() {
    let body = sse(&unnamed(&chat_stream(true)), "\n");
    let (offset, observed) = read_all_ways(
        Api::OpenAiChat,
        Some("text/event-stream"),
        &chat_request(true, true),
        &body,
        200,
    );
    // Final at the usage chunk, before `[DONE]`.
    assert_eq!(offset, Some(end_of_event(&body, "\"choices\":[]")));
    assert_eq!(
        observed,
        Some(Observed {
            record: with_model(TokenRecord::from_openai(500, 256, 40, 16), "gpt-mock"),
            id: Some("chatcmpl-mock_1".into()),
            complete: true,
            estimated: false,
        })
    );
}

#[test]
fn chat_stream_without_usage_is_estimated() {
    let request = chat_request(true, false);
    assert!(!request.include_usage);
    let body = sse(&unnamed(&chat_stream(false)), "\n");
    let (offset, observed) = read_all_ways(Api::OpenAiChat, None, &request, &body, 200);
    assert_eq!(offset, Some(body.len() - 1));
    let family = Family::OpenAi;
    let thought = estimate::count("Let me look.", family);
    let output = estimate::count(&format!("Hello from mock.glob{ARGS}"), family) + thought;
    let input = estimate::by_bytes(request.prompt_bytes as u64, family);
    let expected = TokenRecord { input, output, thought, ..TokenRecord::default() };
    assert!(input > 0 && thought > 0 && output > thought);
    assert_eq!(
        observed,
        Some(Observed {
            record: with_model(expected.clone(), "gpt-mock"),
            id: Some("chatcmpl-mock_1".into()),
            complete: true,
            estimated: true,
        })
    );
    // Cut before the finish: estimated from what came, not complete.
    let cut = end_of_event(&body, "Hello ") + 1;
    let (offset, observed) = read_all_ways(Api::OpenAiChat, None, &request, &body[..cut], 200);
    assert_eq!(offset, None);
    let observed = observed.expect("an estimate");
    assert!(observed.estimated && !observed.complete);
    assert_eq!(observed.record.thought, thought);
    assert!(observed.record.output < output);
    // A stream that asked for usage but was cut before it is estimated too.
    let body = sse(&unnamed(&chat_stream(true)), "\n");
    let cut = end_of_event(&body, "\"tool_calls\"}") + 1;
    let (_, observed) =
        read_all_ways(Api::OpenAiChat, None, &chat_request(true, true), &body[..cut], 200);
    assert!(observed.is_some_and(|o| o.estimated && !o.complete && o.record.output == output));
    // Nothing streamed, or an error: nothing.
    let (_, observed) = read_all_ways(Api::OpenAiChat, None, &request, b"data: [DONE]\n\n", 200);
    assert_eq!(observed, None);
    let error = sse(
        &unnamed(&[json!({"error": {"message": "Provider returned error", "code": 502}})]),
        "\n",
    );
    let (_, observed) = read_all_ways(Api::OpenAiChat, None, &request, &error, 200);
    assert_eq!(observed, None);
    let (_, observed) = read_all_ways(Api::OpenAiChat, None, &request, &body[..cut], 500);
    assert_eq!(observed, None);
}

#[test]
fn chat_json_completion() {
    let completion = json!({"id": "chatcmpl-mock_2", "object": "chat.completion", "created": 1_795_310_000,
        "model": "qwen3-coder-plus", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Title"},
        "logprobs": null, "finish_reason": "stop"}], "usage": chat_usage()});
    let body = completion.to_string();
    let (offset, observed) = read_all_ways(
        Api::OpenAiChat,
        Some("application/json"),
        &chat_request(false, false),
        body.as_bytes(),
        200,
    );
    assert_eq!(offset, Some(body.len() - 1));
    let expected = TokenRecord::from_openai(500, 256, 40, 16);
    assert_eq!(
        observed.map(|o| (o.record, o.complete, o.estimated)),
        Some((with_model(expected, "qwen3-coder-plus"), true, false))
    );
    let error = json!({"error": {"message": "Invalid model", "type": "invalid_request_error"}});
    let (_, observed) = read_all_ways(
        Api::OpenAiChat,
        None,
        &chat_request(false, false),
        error.to_string().as_bytes(),
        400,
    );
    assert_eq!(observed, None);
}

#[test]
fn chat_usage_from_compatible_servers() {
    let request = chat_request(true, false);
    let read = |chunks: &[Value]| {
        let body = sse(&unnamed(chunks), "\n");
        read_all_ways(Api::OpenAiChat, None, &request, &body, 200)
    };
    let finish = |usage_at: &str, usage: Value| {
        let mut chunk = json!({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        match usage_at {
            "choice" => chunk["choices"][0]["usage"] = usage,
            "x_groq" => chunk["x_groq"] = json!({"usage": usage}),
            _ => chunk["usage"] = usage,
        }
        chunk
    };
    // Moonshot (usage in the choice), Groq, DeepSeek's cache fields, OpenRouter's cost.
    let plain = json!({"prompt_tokens": 100, "completion_tokens": 5});
    for at in ["choice", "x_groq", "top"] {
        let (offset, observed) = read(&[finish(at, plain.clone()), json!("[DONE]")]);
        assert!(offset.is_some());
        assert_eq!(
            observed.map(|o| (o.record.input, o.record.output, o.estimated)),
            Some((100, 5, false))
        );
    }
    let deepseek = json!({"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 60,
        "prompt_cache_miss_tokens": 40});
    let (_, observed) = read(&[finish("top", deepseek)]);
    assert_eq!(observed.map(|o| o.record.cache_read), Some(60));
    let openrouter = json!({"prompt_tokens": 100, "completion_tokens": 5, "cost": 0.00042,
        "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 30}});
    let (_, observed) = read(&[finish("top", openrouter)]);
    let record = observed.expect("usage").record;
    assert_eq!(
        (record.cache_read, record.cache_write_5m, record.stated_cost),
        (10, 30, Some(0.00042))
    );
    // vLLM's continuous usage: every chunk has one; final when the choice finishes.
    let running = |n: u64, finish: Value| {
        json!({"id": "c2", "model": "m", "choices": [{"index": 0,
        "delta": {"content": "x"}, "finish_reason": finish}], "usage": {"prompt_tokens": 10, "completion_tokens": n}})
    };
    let chunks = [
        running(1, Value::Null),
        running(2, Value::Null),
        running(3, json!("length")),
        json!("[DONE]"),
    ];
    let body = sse(&unnamed(&chunks), "\n");
    let (offset, observed) = read_all_ways(Api::OpenAiChat, None, &request, &body, 200);
    assert_eq!(offset, Some(end_of_event(&body, "\"length\"")));
    assert_eq!(observed.map(|o| o.record.output), Some(3));
}
