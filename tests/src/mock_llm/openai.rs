//! OpenAI Responses: `POST /v1/responses` (SSE or JSON), plus `GET /v1/models`.

use serde_json::{Value, json};

use super::http::{Request, Response};
use super::record::{CallKind, Provider};
use super::script::{Step, ToolCall, Usage};
use super::{Reply, Route};

/// What a warm-up bills: its input only (a prompt's worth, as OpenAI's answer to Codex's
/// `generate: false`).
pub(crate) const WARMUP_USAGE: Usage = Usage {
    input: 10_786,
    cache_read: 0,
    cache_write_5m: 0,
    cache_write_1h: 0,
    output: 0,
    thought: 0,
    anthropic_cache_split: false,
};

pub(crate) fn route(request: &Request, body: &Value) -> Option<Route> {
    let path = request.path();
    let kind = match (request.method.as_str(), path) {
        // Codex's warm-up over the WebSocket: the prompt is processed, nothing generated.
        ("POST", path) if path.ends_with("/responses") && body["generate"] == false => {
            CallKind::Warmup
        }
        ("POST", path) if path.ends_with("/responses") => {
            // Codex's turns declare tools; title generation (codex-acp TS) does not.
            match declared_tools(body).is_empty() {
                true => CallKind::Auxiliary,
                false => CallKind::Main,
            }
        }
        ("GET", path) if path.ends_with("/v1/models") || path.ends_with("/models") => {
            CallKind::Listing
        }
        _ => return None,
    };
    Some(Route {
        provider: Provider::OpenAi,
        kind,
        model: body["model"].as_str().map(str::to_owned),
        streamed: body["stream"].as_bool().unwrap_or(false),
        declared_tools: declared_tools(body),
    })
}

/// Function tools by name; built-in tools (`local_shell`, `web_search`, ...) by type.
fn declared_tools(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .filter_map(|tool| {
            tool["name"].as_str().or_else(|| tool["type"].as_str()).map(str::to_owned)
        })
        .collect()
}

pub(crate) fn respond(
    route: &Route,
    _request: &Request,
    body: &Value,
    step: Option<&Step>,
    id: &str,
) -> Reply {
    let Some(step) = step else {
        // Chat Completions clients read OpenAI's `data` and may want a model to pick; Codex reads
        // its own `models` field, and an empty one keeps its built-in presets.
        let listing = json!({"object": "list", "models": [], "data": [
            {"id": "gpt-mock", "object": "model", "created": 1_795_310_000, "owned_by": "mock"},
        ]});
        return Reply { response: Response::ok(listing), native_usage: None, tool_call: None };
    };
    let model = route.model.clone().unwrap_or_else(|| "gpt-mock".to_owned());
    let tool_call = step.tool.as_ref().and_then(|tool| pick_tool(tool, &route.declared_tools));
    let usage = step.usage.openai_json();
    let response_id = format!("resp_mock_{id}");

    let mut items = Vec::new();
    if let Some(thinking) = &step.thinking {
        items.push(json!({
            "type": "reasoning", "id": format!("rs_mock_{id}"),
            "summary": [{"type": "summary_text", "text": thinking}],
        }));
    }
    // Structured-output auxiliary calls get a value of their schema.
    let text = match (route.kind, body["text"]["format"].get("schema")) {
        (CallKind::Auxiliary, Some(schema)) => super::gemini::value_for_schema(schema).to_string(),
        _ => step.text.clone(),
    };
    if !text.is_empty() {
        items.push(json!({
            "type": "message", "id": format!("msg_mock_{id}"), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    if let Some(tool) = &tool_call {
        items.push(json!({
            "type": "function_call", "id": format!("fc_mock_{id}"), "call_id": format!("call_mock_{id}"),
            "name": tool["name"], "arguments": tool["args"].to_string(), "status": "completed",
        }));
    }
    let completed = json!({
        "id": response_id, "object": "response", "created_at": 1_795_310_000, "status": "completed",
        "model": model, "output": items, "usage": usage,
    });
    if !route.streamed {
        return Reply { response: Response::ok(completed), native_usage: Some(usage), tool_call };
    }

    let mut events = vec![json!({"type": "response.created", "response": {
        "id": response_id, "object": "response", "created_at": 1_795_310_000, "status": "in_progress",
        "model": model, "output": [],
    }})];
    for (index, item) in items.iter().enumerate() {
        events.extend(item_events(index, item));
    }
    events.push(json!({"type": "response.completed", "response": completed}));
    let events = events
        .into_iter()
        .enumerate()
        .map(|(n, mut data)| {
            data["sequence_number"] = json!(n);
            (data["type"].as_str().map(str::to_owned), data)
        })
        .collect();
    Reply { response: Response::Sse(events), native_usage: Some(usage), tool_call }
}

/// `output_item.added`, the item's deltas, `output_item.done`.
fn item_events(index: usize, item: &Value) -> Vec<Value> {
    let item_id = item["id"].clone();
    let mut added = item.clone();
    let mut deltas = Vec::new();
    match item["type"].as_str() {
        Some("message") => {
            added["status"] = json!("in_progress");
            added["content"] = json!([]);
            let text = &item["content"][0]["text"];
            deltas.push(json!({"type": "response.output_text.delta", "item_id": item_id,
                "output_index": index, "content_index": 0, "delta": text}));
            deltas.push(json!({"type": "response.output_text.done", "item_id": item_id,
                "output_index": index, "content_index": 0, "text": text}));
        }
        Some("function_call") => {
            added["status"] = json!("in_progress");
            added["arguments"] = json!("");
            deltas
                .push(json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                "output_index": index, "delta": item["arguments"]}));
            deltas
                .push(json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                "output_index": index, "arguments": item["arguments"]}));
        }
        Some("reasoning") => {
            added["summary"] = json!([]);
            let text = &item["summary"][0]["text"];
            deltas
                .push(json!({"type": "response.reasoning_summary_text.delta", "item_id": item_id,
                "output_index": index, "summary_index": 0, "delta": text}));
        }
        _ => {}
    }
    let mut events =
        vec![json!({"type": "response.output_item.added", "output_index": index, "item": added})];
    events.extend(deltas);
    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    events
}

/// Harmless tools Codex declares, best first. `update_plan` needs no sandbox or approval (it
/// only yields a `plan` update); the shell tools' names depend on the model family, and without
/// bubblewrap Codex's Linux sandbox fails them (the call still completes, with an error output).
const HARMLESS: &[(&str, &str)] = &[
    ("update_plan", r#"{"plan":[{"step":"Look around","status":"completed"}]}"#),
    ("shell", r#"{"command":["echo","hi"]}"#),
    ("shell_command", r#"{"command":"echo hi"}"#),
    ("exec_command", r#"{"cmd":"echo hi"}"#),
];

fn pick_tool(tool: &ToolCall, declared: &[String]) -> Option<Value> {
    if let (Some(name), Some(args)) = (&tool.name, &tool.args) {
        return Some(json!({"name": name, "args": args}));
    }
    for (harmless, args) in HARMLESS {
        if tool.name.as_deref().is_some_and(|wanted| wanted != *harmless) {
            continue;
        }
        if declared.iter().any(|name| name == harmless) {
            let args: Value = serde_json::from_str(args).unwrap_or_default();
            return Some(json!({"name": harmless, "args": tool.args.clone().unwrap_or(args)}));
        }
    }
    eprintln!(
        "mock-llm: no harmless OpenAI tool among {declared:?}; answering without a tool call"
    );
    None
}
