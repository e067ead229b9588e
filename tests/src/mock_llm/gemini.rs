//! Gemini: `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, `:generateContent` and
//! `:countTokens`.
//!
//! Gemini CLI's non-streaming `generateContent` calls are checks (next speaker, loop detection,
//! model routing) that want JSON text matching `generationConfig.responseJsonSchema`; the mock
//! answers with a harmless value of that schema (the user speaks next, no loop).

use serde_json::{Map, Value, json};

use super::http::{Request, Response};
use super::record::{CallKind, Provider};
use super::script::{Step, ToolCall};
use super::{Reply, Route};

pub(crate) fn route(request: &Request, body: &Value) -> Option<Route> {
    if request.method != "POST" {
        return None;
    }
    let rest = request.path().split("/models/").nth(1)?;
    let (model, method) = rest.rsplit_once(':')?;
    let tools = declared_tools(body);
    let kind = match method {
        "countTokens" => CallKind::CountTokens,
        "streamGenerateContent" | "generateContent" if !tools.is_empty() => CallKind::Main,
        "streamGenerateContent" | "generateContent" => CallKind::Auxiliary,
        _ => return None,
    };
    Some(Route {
        provider: Provider::Gemini,
        kind,
        model: Some(model.to_owned()),
        streamed: method == "streamGenerateContent",
        declared_tools: tools,
    })
}

fn function_declarations(body: &Value) -> impl Iterator<Item = &Value> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().flat_map(|tool| {
        tool["functionDeclarations"].as_array().map(Vec::as_slice).unwrap_or_default()
    })
}

fn declared_tools(body: &Value) -> Vec<String> {
    function_declarations(body)
        .filter_map(|decl| decl["name"].as_str().map(str::to_owned))
        .collect()
}

pub(crate) fn respond(
    route: &Route,
    request: &Request,
    body: &Value,
    step: Option<&Step>,
    id: &str,
) -> Reply {
    let Some(step) = step else {
        return Reply {
            response: Response::ok(json!({"totalTokens": request.body.len() / 4})),
            native_usage: None,
            tool_call: None,
        };
    };
    let model = route.model.clone().unwrap_or_else(|| "gemini-mock".to_owned());
    let usage = step.usage.gemini_json();
    let tool_call = step.tool.as_ref().and_then(|tool| pick_tool(tool, body));
    let config = &body["generationConfig"];
    let schema = config.get("responseJsonSchema").or_else(|| config.get("responseSchema"));
    let text = match (route.kind, schema) {
        (CallKind::Auxiliary, Some(schema)) => value_for_schema(schema).to_string(),
        (CallKind::Auxiliary, None) if config["responseMimeType"] == "application/json" => {
            "{}".to_owned()
        }
        _ => step.text.clone(),
    };
    let response_id = format!("mock_{id}");

    let mut parts = Vec::new();
    if let Some(thinking) = &step.thinking {
        parts.push(json!({"text": thinking, "thought": true}));
    }
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    if let Some(tool) = &tool_call {
        parts.push(json!({"functionCall": {"name": tool["name"], "args": tool["args"]}}));
    }
    let chunk = |parts: Vec<Value>, usage: Value, finished: bool| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if finished {
            candidate["finishReason"] = json!("STOP");
        }
        json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
               "responseId": response_id})
    };
    if !route.streamed {
        let reply = chunk(parts, usage.clone(), true);
        return Reply { response: Response::ok(reply), native_usage: Some(usage), tool_call };
    }
    // Like the real stream: an opening chunk with the prompt count only, then the content with
    // the complete usage.
    let opening_usage =
        json!({"promptTokenCount": step.usage.input, "totalTokenCount": step.usage.input});
    let events = vec![
        (None, chunk(vec![json!({"text": ""})], opening_usage, false)),
        (None, chunk(parts, usage.clone(), true)),
    ];
    Reply { response: Response::Sse(events), native_usage: Some(usage), tool_call }
}

/// Gemini CLI's read-only tools, which run without a permission prompt, best first.
const HARMLESS: &[&str] = &["list_directory", "glob", "read_file"];

fn pick_tool(tool: &ToolCall, body: &Value) -> Option<Value> {
    if let (Some(name), Some(args)) = (&tool.name, &tool.args) {
        return Some(json!({"name": name, "args": args}));
    }
    for harmless in HARMLESS {
        if tool.name.as_deref().is_some_and(|wanted| wanted != *harmless) {
            continue;
        }
        let Some(decl) = function_declarations(body).find(|decl| decl["name"] == *harmless) else {
            continue;
        };
        // Parameter names changed between releases (`path` → `dir_path`); read them from the
        // declaration rather than guessing.
        let schema = decl.get("parametersJsonSchema").or_else(|| decl.get("parameters"));
        let has =
            |name: &str| schema.is_some_and(|schema| schema["properties"].get(name).is_some());
        let args = match *harmless {
            "list_directory" if has("dir_path") => json!({"dir_path": "."}),
            "list_directory" => json!({"path": "."}),
            "glob" => json!({"pattern": "*"}),
            _ if has("file_path") => json!({"file_path": "README.md"}),
            _ => json!({"absolute_path": "README.md"}),
        };
        return Some(json!({"name": harmless, "args": tool.args.clone().unwrap_or(args)}));
    }
    eprintln!("mock-llm: no harmless Gemini tool declared; answering without a tool call");
    None
}

/// A small value that satisfies `schema`, preferring answers that end the turn: `"user"` when the
/// schema asks who speaks next, `false` and zero elsewhere.
pub(crate) fn value_for_schema(schema: &Value) -> Value {
    if let Some(options) = schema["enum"].as_array() {
        let user = options.iter().find(|option| *option == "user");
        return user.or(options.first()).cloned().unwrap_or(Value::Null);
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.to_ascii_lowercase(),
        Value::Array(kinds) => {
            kinds.first().and_then(Value::as_str).unwrap_or("string").to_ascii_lowercase()
        }
        _ if schema.get("properties").is_some() => "object".to_owned(),
        _ => "string".to_owned(),
    };
    match kind.as_str() {
        "object" => {
            let mut object = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (name, property) in properties {
                    object.insert(name.clone(), value_for_schema(property));
                }
            }
            Value::Object(object)
        }
        "array" => json!([]),
        "boolean" => json!(false),
        "integer" | "number" => json!(0),
        "null" => Value::Null,
        _ => json!("Mock reasoning."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_speaker_schema() {
        let schema = json!({"type": "object", "properties": {
            "reasoning": {"type": "string"},
            "next_speaker": {"type": "string", "enum": ["user", "model"]},
        }, "required": ["reasoning", "next_speaker"]});
        let value = value_for_schema(&schema);
        assert_eq!(value["next_speaker"], "user");
        assert!(value["reasoning"].is_string());
    }
}
