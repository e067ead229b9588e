//! OpenAI Chat Completions: `POST …/chat/completions` (SSE or JSON), the API of qwen-code's
//! OpenAI-compatible provider, kimi-cli, fast-agent and cline.
//!
//! The stream follows OpenAI, not the looser compatible servers: content chunks, a chunk with the
//! `finish_reason`, then the usage in a chunk of its own with `"choices": []`, and only when the
//! request asked for it with `stream_options.include_usage`. Without that flag the call is billed
//! all the same but the agent never sees a number; the [`Call`](super::Call) then has `usage` set
//! and `native_usage: None`, which is how a test tells the two apart.
//!
//! A Mistral flavour answers requests under the path prefix `/mistral/` (an agent's base URL
//! `http://127.0.0.1:PORT/mistral/v1`): the Mistral API streams the usage on the chunk with the
//! `finish_reason`, asked or not (the `mistralai` SDK never sends `stream_options`), and each
//! tool call whole in one delta (id, name and the complete arguments), which the SDK requires.
//! Mistral Vibe talks to it.
//!
//! An OpenRouter flavour answers requests under `/api/openrouter/` (the Kilo Gateway's path under
//! its root, `KILO_API_URL`): there the request's own `usage: {"include": true}` asks for the
//! usage chunk as well, as OpenRouter honours it. The same request under any other path (a
//! gateway that ignores that flag) gets no usage. Its usage states cache writes
//! (`prompt_tokens_details.cache_write_tokens`), as OpenRouter does for Anthropic's models.
//!
//! qwen-code's `generateJson` (next-speaker checks and the like) is a side query that declares a
//! single `respond_in_schema` tool and forces it; it counts as auxiliary and is answered with a
//! call of that tool whose arguments fit the schema.

use serde_json::{Map, Value, json};

use super::gemini::value_for_schema;
use super::http::{Request, Response};
use super::record::{CallKind, Provider};
use super::script::{Step, ToolCall};
use super::{Reply, Route};

/// The tool qwen-code declares for structured side queries.
const SCHEMA_TOOL: &str = "respond_in_schema";

/// Fixed so that recorded responses compare equal between runs.
const CREATED: u64 = 1_795_310_000;

pub(crate) fn route(request: &Request, body: &Value) -> Option<Route> {
    if request.method != "POST" || !request.path().ends_with("/chat/completions") {
        return None;
    }
    let tools = declared_tools(body);
    // As for the other APIs: the agent loop always declares its tools, titles and checks do not.
    let kind = match tools.is_empty() || is_schema_query(&tools) || is_background_agent(body) {
        true => CallKind::Auxiliary,
        false => CallKind::Main,
    };
    Some(Route {
        provider: Provider::OpenAiChat,
        kind,
        model: body["model"].as_str().map(str::to_owned),
        streamed: body["stream"].as_bool().unwrap_or(false),
        declared_tools: tools,
    })
}

/// qwen-code's calls for itself that declare tools like the agent loop: its prompt suggestion
/// (`[SUGGESTION MODE` as the last user message, the main tools to share the prompt cache) and
/// its memory extraction subagent (its own system prompt and tools).
fn is_background_agent(body: &Value) -> bool {
    let Some(messages) = body["messages"].as_array() else { return false };
    let text = |m: &Value| match &m["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    };
    let last_user = messages.iter().rev().find(|m| m["role"] == "user").map(text);
    let system = messages.iter().find(|m| m["role"] == "system").map(text);
    last_user.is_some_and(|t| t.trim_start().starts_with("[SUGGESTION MODE"))
        || system.is_some_and(|t| t.contains("memory extraction subagent"))
}

fn is_schema_query(tools: &[String]) -> bool {
    matches!(tools, [only] if only == SCHEMA_TOOL)
}

/// The `function` objects of the declared tools.
fn functions(body: &Value) -> impl Iterator<Item = &Value> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().map(|tool| &tool["function"])
}

/// Function tools by name; anything else (a provider's built-in tool) by type.
fn declared_tools(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .filter_map(|tool| {
            tool["function"]["name"].as_str().or_else(|| tool["type"].as_str()).map(str::to_owned)
        })
        .collect()
}

/// The path prefix of the Mistral flavour.
pub(crate) const MISTRAL_PREFIX: &str = "/mistral/";

/// Whether the request is for the Mistral flavour.
fn is_mistral(request: &Request) -> bool {
    request.path().starts_with(MISTRAL_PREFIX)
}

/// Whether the request is for the OpenRouter flavour.
fn is_openrouter(request: &Request) -> bool {
    request.path().starts_with("/api/openrouter/")
}

pub(crate) fn respond(
    route: &Route,
    request: &Request,
    body: &Value,
    step: Option<&Step>,
    id: &str,
) -> Reply {
    let Some(step) = step else {
        // Every chat route is a model call and gets a step; this is a wiring bug.
        return Reply {
            response: Response::error(500, "mock-llm: a chat completion without a step"),
            native_usage: None,
            tool_call: None,
        };
    };
    let mistral = is_mistral(request);
    let model = route.model.clone().unwrap_or_else(|| "gpt-mock".to_owned());
    let mut usage = step.usage.chat_json();
    if is_openrouter(request) {
        // OpenRouter states an Anthropic model's cache writes beside its cache reads.
        usage["prompt_tokens_details"]["cache_write_tokens"] = step.usage.cache_write().into();
    }
    let (text, tool_call) = content(route, body, step);
    let finish_reason = if tool_call.is_some() { "tool_calls" } else { "stop" };
    let completion_id = format!("chatcmpl-mock_{id}");
    let call_id = format!("call_mock_{id}");
    let arguments = tool_call.as_ref().map(|tool| tool["args"].to_string());

    if !route.streamed {
        let mut message = json!({"role": "assistant", "content": null});
        if !text.is_empty() {
            message["content"] = json!(text);
        }
        if let Some(thinking) = &step.thinking {
            message["reasoning_content"] = json!(thinking);
        }
        if let (Some(tool), Some(arguments)) = (&tool_call, &arguments) {
            message["tool_calls"] = json!([{"id": call_id, "type": "function",
                "function": {"name": tool["name"], "arguments": arguments}}]);
        }
        let completion = json!({
            "id": completion_id, "object": "chat.completion", "created": CREATED, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": finish_reason}],
            "usage": usage,
        });
        return Reply { response: Response::ok(completion), native_usage: Some(usage), tool_call };
    }

    let mut deltas = Vec::new();
    if let Some(thinking) = &step.thinking {
        deltas.extend(words(thinking).map(|piece| json!({"reasoning_content": piece})));
    }
    deltas.extend(words(&text).map(|piece| json!({"content": piece})));
    if let (Some(tool), Some(arguments), true) = (&tool_call, &arguments, mistral) {
        // Mistral: the whole call in one delta.
        deltas.push(json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
            "function": {"name": tool["name"], "arguments": arguments}}]}));
    } else if let (Some(tool), Some(arguments)) = (&tool_call, &arguments) {
        // The name and id come first with empty arguments; the JSON string follows in pieces,
        // which clients must concatenate before parsing.
        deltas.push(json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
            "function": {"name": tool["name"], "arguments": ""}}]}));
        deltas.extend(
            pieces(arguments, 8).map(
                |piece| json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            ),
        );
    }
    if deltas.is_empty() {
        deltas.push(json!({"content": ""}));
    }
    // OpenAI names the role in the first delta only.
    deltas[0]["role"] = json!("assistant");

    let include_usage = body["stream_options"]["include_usage"] == true
        || (is_openrouter(request) && body["usage"]["include"] == true);
    let chunk = |choices: Value| {
        let mut chunk = json!({"id": completion_id, "object": "chat.completion.chunk",
            "created": CREATED, "model": model, "choices": choices});
        // With include_usage OpenAI sends `"usage": null` on every chunk before the last.
        if include_usage && !mistral {
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
    let mut events: Vec<Value> =
        deltas.into_iter().map(|delta| chunk(choice(delta, Value::Null))).collect();
    let mut finish = chunk(choice(json!({}), json!(finish_reason)));
    if mistral {
        // Mistral: the usage rides on the finishing chunk, always.
        finish["usage"] = usage.clone();
    }
    events.push(finish);
    if include_usage && !mistral {
        let mut last = chunk(json!([]));
        last["usage"] = usage.clone();
        events.push(last);
    }
    // A string is written verbatim (see `Response::Sse`): the stream's end sentinel.
    events.push(json!("[DONE]"));
    let events = events.into_iter().map(|data| (None, data)).collect();
    let native_usage = (include_usage || mistral).then_some(usage);
    Reply { response: Response::Sse(events), native_usage, tool_call }
}

/// The reply's text and tool call (`{"name", "args"}`).
fn content(route: &Route, body: &Value, step: &Step) -> (String, Option<Value>) {
    if route.kind == CallKind::Auxiliary && is_schema_query(&route.declared_tools) {
        let schema = functions(body).next().map(|function| &function["parameters"]);
        let args = schema.map(value_for_schema).unwrap_or_else(|| json!({}));
        return (String::new(), Some(json!({"name": SCHEMA_TOOL, "args": args})));
    }
    if route.kind == CallKind::Auxiliary {
        // Title generators that ask for JSON get JSON; the rest get the plain auxiliary text.
        let format = &body["response_format"];
        let text = match format["type"].as_str() {
            Some("json_schema") => match format["json_schema"].get("schema") {
                Some(schema) => value_for_schema(schema).to_string(),
                None => json!({"title": step.text}).to_string(),
            },
            Some("json_object") => json!({"title": step.text}).to_string(),
            _ => step.text.clone(),
        };
        return (text, None);
    }
    let tool_call = step.tool.as_ref().and_then(|tool| pick_tool(tool, body));
    (step.text.clone(), tool_call)
}

/// Text in word-sized pieces (each keeps its trailing space), as a model streams it.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}

/// `text` in pieces of at most `size` characters, cut on character boundaries.
fn pieces(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = rest.char_indices().nth(size).map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// Read-only tools of the Chat Completions agents, best first: qwen-code's `glob` and
/// `list_directory`, kimi-cli's `Glob`, cline's `list_files`, then the file readers (qwen-code,
/// kimi-cli `ReadFile`, fast-agent's ACP `read_text_file`). None needs a permission prompt.
const HARMLESS: &[&str] =
    &["glob", "Glob", "list_files", "list_directory", "read_file", "ReadFile", "read_text_file"];

fn pick_tool(tool: &ToolCall, body: &Value) -> Option<Value> {
    if let (Some(name), Some(args)) = (&tool.name, &tool.args) {
        return Some(json!({"name": name, "args": args}));
    }
    let wanted: Vec<&str> = match &tool.name {
        Some(name) => vec![name.as_str()],
        None => HARMLESS.to_vec(),
    };
    for harmless in wanted {
        // MCP servers' tools reach the model as `<server>__<tool>` in some agents.
        let found = functions(body).find(|function| {
            function["name"]
                .as_str()
                .is_some_and(|name| name == harmless || name.ends_with(&format!("__{harmless}")))
        });
        if let Some(function) = found {
            let args = tool.args.clone().unwrap_or_else(|| harmless_args(harmless, function));
            return Some(json!({"name": function["name"], "args": args}));
        }
    }
    let declared = declared_tools(body);
    eprintln!(
        "mock-llm: no harmless Chat Completions tool among {declared:?}; answering without a tool call"
    );
    None
}

/// Arguments for the required parameters, whatever each agent names them: the working
/// directory for listings, `README.md` for readers, `*` for patterns. Agents that insist on
/// absolute paths fail the call, which still completes (with an error result) and is harmless.
fn harmless_args(tool: &str, function: &Value) -> Value {
    let schema = &function["parameters"];
    let reads = tool.to_ascii_lowercase().contains("read");
    let mut args = Map::new();
    let required = schema["required"].as_array().map(Vec::as_slice).unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let value = match name {
            "pattern" => json!("*"),
            "path" | "file_path" | "absolute_path" | "dir_path" | "directory" if reads => {
                json!("README.md")
            }
            "path" | "dir_path" | "directory" | "absolute_path" => json!("."),
            _ => value_for_schema(&schema["properties"][name]),
        };
        args.insert(name.to_owned(), value);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_on_characters() {
        let text = "{\"a\":\"héllo wörld\"}";
        let parts: Vec<&str> = pieces(text, 4).collect();
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|part| part.chars().count() <= 4));
        assert_eq!(pieces("", 4).count(), 0);
        assert_eq!(words("Hello from mock.").collect::<Vec<_>>(), ["Hello ", "from ", "mock."]);
    }

    #[test]
    fn harmless_args_follow_the_declared_schema() {
        let body = json!({"tools": [
            {"type": "function", "function": {"name": "write_file"}},
            {"type": "function", "function": {"name": "list_files", "parameters": {
                "type": "object", "required": ["path", "recursive"],
                "properties": {"path": {"type": "string"}, "recursive": {"type": "boolean"}}}}},
            {"type": "function", "function": {"name": "read_file", "parameters": {
                "type": "object", "required": ["absolute_path"],
                "properties": {"absolute_path": {"type": "string"}}}}},
        ]});
        let picked = pick_tool(&ToolCall::auto(), &body).unwrap();
        assert_eq!(
            picked,
            json!({"name": "list_files", "args": {"path": ".", "recursive": false}})
        );
        let named = ToolCall { name: Some("read_file".into()), args: None };
        let picked = pick_tool(&named, &body).unwrap();
        assert_eq!(picked["args"], json!({"absolute_path": "README.md"}));
        let none = json!({"tools": [{"type": "function", "function": {"name": "write_file"}}]});
        assert_eq!(pick_tool(&ToolCall::auto(), &none), None);
    }
}
