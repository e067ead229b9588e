//! Google's Code Assist (Gemini CLI signed in with Google): `POST <base>/v1internal:<method>`.
//!
//! Model calls (`:streamGenerateContent?alt=sse`, `:generateContent`) carry a Gemini request
//! wrapped as `{"model", "project", "user_prompt_id", "request": {…}}`; the answer is the Gemini
//! module's, each body or stream chunk wrapped as Code Assist does: `{"response": {…},
//! "traceId": …}`. Around them, Gemini CLI sets the account up (`loadCodeAssist`, `onboardUser`
//! when there is no tier yet), asks for its quota (`retrieveUserQuota`, after auth and after
//! each model call) and its experiments and admin controls: answered with a standard tier, a
//! project and a quota bucket, none of them billed.

use serde_json::{Value, json};

use super::http::{Request, Response};
use super::record::{CallKind, Provider};
use super::script::Step;
use super::{Reply, Route, gemini};

/// The Code Assist project the mock's account has.
pub const PROJECT: &str = "mock-codeassist-project";

/// The `v1internal` method a request calls (`…/v1internal:loadCodeAssist` → `loadCodeAssist`).
fn method(request: &Request) -> Option<&str> {
    let (_, last) = request.path().rsplit_once('/')?;
    last.strip_prefix("v1internal:")
}

pub(crate) fn route(request: &Request, body: &Value) -> Option<Route> {
    let method = method(request)?;
    let inner = &body["request"];
    let tools = declared_tools(inner);
    let kind = match (request.method.as_str(), method) {
        ("POST", "streamGenerateContent" | "generateContent") if !tools.is_empty() => {
            CallKind::Main
        }
        ("POST", "streamGenerateContent" | "generateContent") => CallKind::Auxiliary,
        ("POST", "countTokens") => CallKind::CountTokens,
        // Account setup, quota, experiments, settings: answered, never billed.
        (_, method) if answer(method).is_some() => CallKind::Listing,
        _ => return None,
    };
    Some(Route {
        provider: Provider::CodeAssist,
        kind,
        model: body["model"].as_str().map(|m| m.trim_start_matches("models/").to_owned()),
        streamed: method == "streamGenerateContent",
        declared_tools: tools,
    })
}

fn declared_tools(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .flat_map(|tool| {
            tool["functionDeclarations"].as_array().map(Vec::as_slice).unwrap_or_default()
        })
        .filter_map(|decl| decl["name"].as_str().map(str::to_owned))
        .collect()
}

/// The answer to a method that is not a model call; `None` for methods the mock does not know.
fn answer(method: &str) -> Option<Value> {
    let tier = json!({"id": "standard-tier", "name": "Gemini Code Assist (mock)",
                      "hasOnboardedPreviously": true, "isDefault": true});
    let answer = match method {
        "loadCodeAssist" => json!({
            "currentTier": tier,
            "allowedTiers": [tier],
            "cloudaicompanionProject": PROJECT,
        }),
        "onboardUser" => json!({
            "done": true,
            "response": {"cloudaicompanionProject": {"id": PROJECT, "name": PROJECT}},
        }),
        // `remainingAmount` is a string (Gemini CLI `parseInt`s it); `resetTime` ISO text, in
        // the future.
        "retrieveUserQuota" => json!({"buckets": [{
            "modelId": crate::agents::GEMINI_MODEL,
            "tokenType": "REQUESTS",
            "remainingFraction": 0.75,
            "remainingAmount": "750",
            "resetTime": "2099-01-01T00:00:00Z",
        }]}),
        "listExperiments" => json!({"experimentIds": [], "flags": []}),
        "fetchAdminControls"
        | "getCodeAssistGlobalUserSetting"
        | "setCodeAssistGlobalUserSetting"
        | "recordCodeAssistMetrics" => json!({}),
        _ => return None,
    };
    Some(answer)
}

pub(crate) fn respond(
    route: &Route,
    request: &Request,
    body: &Value,
    step: Option<&Step>,
    id: &str,
) -> Reply {
    let method = method(request).unwrap_or_default();
    match route.kind {
        CallKind::CountTokens => Reply {
            response: Response::ok(json!({"totalTokens": request.body.len() / 4})),
            native_usage: None,
            tool_call: None,
        },
        CallKind::Main | CallKind::Auxiliary => {
            let reply = gemini::respond(route, request, &body["request"], step, id);
            let trace = format!("trace_mock_{id}");
            let wrap = |response: Value| json!({"response": response, "traceId": trace});
            let response = match reply.response {
                Response::Json { status, body } => Response::Json { status, body: wrap(body) },
                Response::Sse(events) => Response::Sse(
                    events.into_iter().map(|(name, data)| (name, wrap(data))).collect(),
                ),
            };
            Reply { response, ..reply }
        }
        _ => Reply {
            response: match answer(method) {
                Some(answer) => Response::ok(answer),
                None => Response::error(404, &format!("mock-llm serves no v1internal:{method}")),
            },
            native_usage: None,
            tool_call: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, body: Value) -> Request {
        Request {
            method: "POST".into(),
            target: target.into(),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn model_calls_are_wrapped_and_setup_calls_answered() {
        let body = json!({"model": "gemini-2.5-pro", "project": PROJECT, "request": {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file"}]}],
        }});
        let req = request("/v1internal:streamGenerateContent?alt=sse", body.clone());
        let found = route(&req, &body).unwrap();
        assert_eq!((found.kind, found.streamed), (CallKind::Main, true));
        assert_eq!(found.model.as_deref(), Some("gemini-2.5-pro"));
        let step = Step::text("Hi.", super::super::Usage::gemini(8000, 6000, 9, 24));
        let reply = respond(&found, &req, &body, Some(&step), "x1");
        let Response::Sse(events) = reply.response else { panic!("not a stream") };
        let last = &events.last().unwrap().1;
        assert_eq!(last["traceId"], "trace_mock_x1");
        assert_eq!(last["response"]["usageMetadata"]["totalTokenCount"], 8033);
        assert_eq!(last["response"]["candidates"][0]["finishReason"], "STOP");

        let load = request("/v1internal:loadCodeAssist", json!({}));
        let route_load = route(&load, &json!({})).unwrap();
        assert_eq!(route_load.kind, CallKind::Listing);
        let reply = respond(&route_load, &load, &json!({}), None, "x2");
        let Response::Json { body, .. } = reply.response else { panic!("not JSON") };
        assert_eq!(body["cloudaicompanionProject"], PROJECT);
        assert!(route(&request("/v1internal:unknownThing", json!({})), &json!({})).is_none());
    }
}
