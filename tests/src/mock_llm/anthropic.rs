//! Anthropic Messages: `POST /v1/messages[?beta=true]` (SSE or JSON) and `/v1/messages/count_tokens`.

use serde_json::{Value, json};

use super::http::{Request, Response};
use super::record::{CallKind, Provider};
use super::script::Step;
use super::{Reply, Route};

pub(crate) fn route(request: &Request, body: &Value) -> Option<Route> {
    let path = request.path();
    let kind = if path.ends_with("/v1/messages/count_tokens") {
        CallKind::CountTokens
    } else if path.ends_with("/v1/messages") {
        // Claude Code's main loop always declares its tools; title and classifier calls do not.
        // Its prompt suggestion after a turn declares them too (to share the prompt cache) and
        // is told apart by its instructions; pi's cache warming re-sends the last request, tools
        // and all, with `max_tokens: 1`.
        match declared_tools(body).is_empty()
            || is_prompt_suggestion(body)
            || is_cache_warming(body)
        {
            true => CallKind::Auxiliary,
            false => CallKind::Main,
        }
    } else {
        return None;
    };
    if request.method != "POST" {
        return None;
    }
    Some(Route {
        provider: Provider::Anthropic,
        kind,
        model: body["model"].as_str().map(str::to_owned),
        streamed: body["stream"].as_bool().unwrap_or(false),
        declared_tools: declared_tools(body),
    })
}

/// Claude Code 2.1's prompt suggestion: the last user message asks for the predicted next prompt.
fn is_prompt_suggestion(body: &Value) -> bool {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else { return false };
    let text = match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => return false,
    };
    text.contains("Reply with ONLY the suggestion")
}

/// pi's cache warming: the last request re-sent with `max_tokens: 1` to keep the provider's
/// prompt cache alive (no main loop asks for a single token).
fn is_cache_warming(body: &Value) -> bool {
    body["max_tokens"].as_u64() == Some(1)
}

fn declared_tools(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect()
}

pub(crate) fn respond(
    route: &Route,
    request: &Request,
    body: &Value,
    step: Option<&Step>,
    id: &str,
) -> Reply {
    let Some(step) = step else {
        // count_tokens: a rough count is all Claude Code wants here.
        let input_tokens = request.body.len() / 4;
        return Reply {
            response: Response::ok(json!({"input_tokens": input_tokens})),
            native_usage: None,
            tool_call: None,
        };
    };
    let model = route.model.clone().unwrap_or_else(|| "claude-mock".to_owned());
    let tool_call = step.tool.as_ref().and_then(|tool| pick_tool(tool, &route.declared_tools));
    let message_id = format!("msg_mock_{id}");
    let usage = step.usage.anthropic_json();
    let stop_reason = if tool_call.is_some() { "tool_use" } else { "end_turn" };

    let mut content = Vec::new();
    if let Some(thinking) = &step.thinking {
        content
            .push(json!({"type": "thinking", "thinking": thinking, "signature": "mock-signature"}));
    }
    // Structured-output auxiliary calls (topic and title checks) get a value of their schema.
    // Claude Code's auto-mode safety classifier grades an action and stops at `</severity>`:
    // the lowest grade lets the action run.
    let classifier = body["stop_sequences"]
        .as_array()
        .is_some_and(|stops| stops.iter().any(|s| s.as_str() == Some("</severity>")));
    let text = match (route.kind, body["output_format"].get("schema")) {
        (CallKind::Auxiliary, Some(schema)) => super::gemini::value_for_schema(schema).to_string(),
        (CallKind::Auxiliary, None) if classifier => "<severity>0".to_owned(),
        _ => step.text.clone(),
    };
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    if let Some(tool) = &tool_call {
        content.push(json!({
            "type": "tool_use", "id": format!("toolu_mock_{id}"), "name": tool["name"], "input": tool["args"],
        }));
    }

    if !route.streamed {
        let message = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
        });
        return Reply { response: Response::ok(message), native_usage: Some(usage), tool_call };
    }

    // message_start carries the prompt counters and a provisional output of 1, as the real API
    // does; the final output count arrives in message_delta.
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(step.usage.output.min(1));
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": start_usage,
        }}),
    )];
    for (index, block) in content.iter().enumerate() {
        events.extend(block_events(index, block));
    }
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": step.usage.output}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Reply { response: Response::Sse(events), native_usage: Some(usage), tool_call }
}

fn event(name: &str, data: Value) -> (Option<String>, Value) {
    (Some(name.to_owned()), data)
}

/// The start/delta/stop events of one content block.
fn block_events(index: usize, block: &Value) -> Vec<(Option<String>, Value)> {
    let (start, deltas) = match block["type"].as_str() {
        Some("thinking") => (
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            vec![
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                json!({"type": "signature_delta", "signature": block["signature"]}),
            ],
        ),
        Some("tool_use") => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            vec![json!({"type": "input_json_delta", "partial_json": block["input"].to_string()})],
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": block["text"]})],
        ),
    };
    let mut events = vec![event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": start}),
    )];
    for delta in deltas {
        events.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }
    events.push(event("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    events
}

/// Harmless read-only tools, best first, with arguments that work in any directory: Claude
/// Code's (no permission prompt), then Copilot CLI's `glob` and cline's `read_files` (relative
/// to the session's directory).
const HARMLESS: &[(&str, &str)] = &[
    ("Read", r#"{"file_path":"README.md"}"#),
    ("Glob", r#"{"pattern":"*"}"#),
    ("LS", r#"{"path":"."}"#),
    ("glob", r#"{"pattern":"*"}"#),
    ("read_files", r#"{"files":[{"path":"README.md"}]}"#),
];

fn pick_tool(tool: &super::script::ToolCall, declared: &[String]) -> Option<Value> {
    if let (Some(name), Some(args)) = (&tool.name, &tool.args) {
        return Some(json!({"name": name, "args": args}));
    }
    for (harmless, args) in HARMLESS {
        let wanted = tool.name.as_deref().unwrap_or(harmless);
        if wanted != *harmless {
            continue;
        }
        // With client fs capabilities claude-agent-acp renames tools to `mcp__acp__<Name>`.
        let found = declared
            .iter()
            .find(|name| *name == harmless || name.ends_with(&format!("__{harmless}")));
        if let Some(name) = found {
            let args: Value = serde_json::from_str(args).unwrap_or_default();
            return Some(json!({"name": name, "args": tool.args.clone().unwrap_or(args)}));
        }
    }
    eprintln!(
        "mock-llm: no harmless Anthropic tool among {declared:?}; answering without a tool call"
    );
    None
}
