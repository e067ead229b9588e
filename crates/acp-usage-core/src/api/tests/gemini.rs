//! Gemini API, Vertex AI and Code Assist responses.

use serde_json::{Value, json};

use super::*;

const STREAM_PATH: &str = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";

fn request(path: &str) -> RequestInfo {
    let body = json!({"contents": [], "tools": [{"functionDeclarations": [{"name": "glob"}]}]});
    RequestInfo::read(Api::Gemini, path, body.to_string().as_bytes())
}

/// The mock's usage (`Usage::gemini_json`): 8000 in of which 6000 cached, 9 candidates and
/// 24 thoughts.
fn usage() -> Value {
    json!({"promptTokenCount": 8000, "candidatesTokenCount": 9, "totalTokenCount": 8033,
        "cachedContentTokenCount": 6000, "thoughtsTokenCount": 24})
}

/// A chunk as the mock builds it.
fn chunk(parts: Value, usage: Value, finished: bool) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if finished {
        candidate["finishReason"] = json!("STOP");
    }
    json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-pro",
        "responseId": "mock_1"})
}

/// The mock's stream: an opening chunk with the prompt count only, then the content with the
/// whole usage.
fn mock_stream() -> Vec<Value> {
    vec![
        chunk(
            json!([{"text": ""}]),
            json!({"promptTokenCount": 8000, "totalTokenCount": 8000}),
            false,
        ),
        chunk(
            json!([{"text": "Let me look.", "thought": true}, {"text": "Hello from mock."},
                   {"functionCall": {"name": "glob", "args": {"pattern": "*"}}}]),
            usage(),
            true,
        ),
    ]
}

fn expected() -> Observed {
    Observed {
        record: with_model(TokenRecord::from_gemini(8000, 6000, 9, 24), "gemini-2.5-pro"),
        id: Some("mock_1".into()),
        complete: true,
        estimated: false,
    }
}

#[test]
fn mock_and_real_streams() {
    // The mock ends events with `\n\n`, Google's servers with `\r\n\r\n`.
    for eol in ["\n", "\r\n"] {
        let body = sse(&unnamed(&mock_stream()), eol);
        let (offset, observed) = read_all_ways(
            Api::Gemini,
            Some("text/event-stream"),
            &request(STREAM_PATH),
            &body,
            200,
        );
        assert_eq!(offset, Some(end_of_event(&body, "\"STOP\"")));
        assert_eq!(observed, Some(expected()));
    }
    // Cut after the opening chunk: the prompt counts, not complete.
    let body = sse(&unnamed(&mock_stream()), "\r\n");
    let cut = end_of_event(&body, "totalTokenCount\":8000}") + 2;
    let (offset, observed) =
        read_all_ways(Api::Gemini, None, &request(STREAM_PATH), &body[..cut], 200);
    assert_eq!(offset, None);
    let observed = observed.expect("prompt usage");
    assert_eq!(
        observed.record,
        with_model(TokenRecord::from_gemini(8000, 0, 0, 0), "gemini-2.5-pro")
    );
    assert!(!observed.complete);
}

#[test]
fn tool_use_prompts_count_as_input() {
    let usage = json!({"promptTokenCount": 100, "toolUsePromptTokenCount": 50, "candidatesTokenCount": 7,
        "totalTokenCount": 157});
    let body = sse(&unnamed(&[chunk(json!([{"text": "Found it."}]), usage, true)]), "\r\n");
    let (_, observed) = read_all_ways(Api::Gemini, None, &request(STREAM_PATH), &body, 200);
    assert_eq!(observed.map(|o| (o.record.input, o.record.output)), Some((150, 7)));
}

#[test]
fn json_body_and_json_array_stream() {
    let path = "/v1beta/models/gemini-2.5-pro:generateContent";
    let body = chunk(json!([{"text": "{\"next_speaker\": \"user\"}"}]), usage(), true).to_string();
    let (offset, observed) = read_all_ways(
        Api::Gemini,
        Some("application/json; charset=UTF-8"),
        &request(path),
        body.as_bytes(),
        200,
    );
    assert_eq!(offset, Some(body.len() - 1));
    assert_eq!(observed, Some(expected()));
    // `streamGenerateContent` without `alt=sse`: one JSON array, written element by element.
    let elements: Vec<String> = mock_stream().iter().map(Value::to_string).collect();
    let body = format!("[{}\r\n,\r\n{}\r\n]", elements[0], elements[1]);
    let stream_path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent";
    let (offset, observed) = read_all_ways(
        Api::Gemini,
        Some("application/json"),
        &request(stream_path),
        body.as_bytes(),
        200,
    );
    assert_eq!(offset, Some(body.len() - 4));
    assert_eq!(observed, Some(expected()));
    // Cut inside the array: the elements that came count.
    let cut = body.len() - 20;
    let (_, observed) =
        read_all_ways(Api::Gemini, None, &request(stream_path), &body.as_bytes()[..cut], 200);
    assert_eq!(
        observed.map(|o| (o.record.input, o.record.output, o.complete)),
        Some((8000, 0, false))
    );
}

#[test]
fn code_assist_wraps_each_chunk() {
    let body = json!({"model": "gemini-2.5-flash", "project": "p",
        "request": {"contents": [], "tools": [{"functionDeclarations": [{"name": "glob"}]}]}});
    let request = RequestInfo::read(
        Api::GeminiCodeAssist,
        "/v1internal:streamGenerateContent?alt=sse",
        body.to_string().as_bytes(),
    );
    let wrapped: Vec<Value> = mock_stream()
        .into_iter()
        .map(|mut chunk| {
            // Leave the model to the request.
            if let Some(fields) = chunk.as_object_mut() {
                fields.remove("modelVersion");
            }
            json!({"response": chunk, "traceId": "trace_1"})
        })
        .collect();
    let body = sse(&unnamed(&wrapped), "\r\n");
    let (offset, observed) =
        read_all_ways(Api::GeminiCodeAssist, Some("text/event-stream"), &request, &body, 200);
    assert_eq!(offset, Some(end_of_event(&body, "\"STOP\"")));
    let mut want = expected();
    want.record.model = Some("gemini-2.5-flash".into());
    assert_eq!(observed, Some(want.clone()));
    // A data field spread over several lines reads the same.
    let multiline =
        String::from_utf8_lossy(&body).replace("\"candidates\":", "\r\ndata: \"candidates\":");
    let (_, observed) =
        read_all_ways(Api::GeminiCodeAssist, None, &request, multiline.as_bytes(), 200);
    assert_eq!(observed, Some(want.clone()));
    // The non-streaming form.
    let single = json!({"response": mock_stream()[1].clone(), "traceId": "trace_2"}).to_string();
    let (_, observed) =
        read_all_ways(Api::GeminiCodeAssist, None, &request, single.as_bytes(), 200);
    assert_eq!(observed, Some(expected()));
}

#[test]
fn errors_and_blocked_prompts() {
    let error = json!({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}});
    for body in [error.to_string(), format!("[{error}]")] {
        let (offset, observed) =
            read_all_ways(Api::Gemini, None, &request(STREAM_PATH), body.as_bytes(), 429);
        assert_eq!((offset.is_some(), observed), (true, None));
    }
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}, "modelVersion": "gemini-2.5-pro"});
    let body = sse(&unnamed(&[blocked]), "\r\n");
    let (offset, observed) = read_all_ways(Api::Gemini, None, &request(STREAM_PATH), &body, 200);
    assert!(offset.is_some());
    assert_eq!(
        observed.map(|o| (o.record.input, o.record.output, o.complete)),
        Some((12, 0, true))
    );
}
