//! Anthropic Messages responses.

use serde_json::{Value, json};

use super::*;

fn request(stream: bool) -> RequestInfo {
    let body = json!({"model": "claude-opus-4-8", "stream": stream, "messages": [], "tools": [{}]});
    RequestInfo::read(Api::AnthropicMessages, "/v1/messages?beta=true", body.to_string().as_bytes())
}

/// The mock's usage object (`Usage::anthropic_json`): 12 uncached, 9000 read, 3000 written,
/// 7 out, with the TTL split when `split`.
fn usage(split: bool) -> Value {
    let mut usage = json!({"input_tokens": 12, "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 9000, "output_tokens": 7});
    if split {
        usage["cache_creation"] =
            json!({"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000});
    }
    usage
}

/// The mock's stream: thinking, text and a tool call, as `mock_llm/anthropic.rs` sends them.
fn mock_stream(usage: &Value) -> Vec<Value> {
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "msg_mock_1", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}})];
    let blocks = [
        (
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            vec![
                json!({"type": "thinking_delta", "thinking": "Let me look."}),
                json!({"type": "signature_delta", "signature": "mock-signature"}),
            ],
        ),
        (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": "Hello from mock."})],
        ),
        (
            json!({"type": "tool_use", "id": "toolu_mock_1", "name": "Read", "input": {}}),
            vec![
                json!({"type": "input_json_delta", "partial_json": "{\"file_path\":\"README.md\"}"}),
            ],
        ),
    ];
    for (index, (start, deltas)) in blocks.into_iter().enumerate() {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
        "usage": {"output_tokens": 7}}),
    );
    events.push(json!({"type": "message_stop"}));
    events
}

#[test]
fn mock_stream_with_and_without_the_ttl_split() {
    for (split, (write_5m, write_1h)) in [(false, (3000, 0)), (true, (1000, 2000))] {
        let body = sse(&typed(&mock_stream(&usage(split))), "\n");
        let (offset, observed) = read_all_ways(
            Api::AnthropicMessages,
            Some("text/event-stream"),
            &request(true),
            &body,
            200,
        );
        assert_eq!(offset, Some(end_of_event(&body, "\"message_delta\"")));
        let expected = TokenRecord::from_anthropic(12, 9000, write_5m, write_1h, 7);
        assert_eq!(
            observed,
            Some(Observed {
                record: with_model(expected, "claude-opus-4-8"),
                id: Some("msg_mock_1".into()),
                complete: true,
                estimated: false,
            })
        );
    }
}

/// A stream as the real API sends it: CRLF line endings, pings, spaced JSON, UTF-8 text, and
/// cumulative prompt counts repeated in `message_delta`.
const REAL_STREAM: &str = "event: message_start\r\n\
data: {\"type\": \"message_start\", \"message\": {\"id\": \"msg_01XFDUDYJgAACzvnptvVoYEL\", \"type\": \"message\", \"role\": \"assistant\", \"content\": [], \"model\": \"claude-sonnet-4-5-20250929\", \"stop_reason\": null, \"stop_sequence\": null, \"usage\": {\"input_tokens\": 25, \"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 40000, \"cache_creation\": {\"ephemeral_5m_input_tokens\": 0, \"ephemeral_1h_input_tokens\": 0}, \"output_tokens\": 1, \"service_tier\": \"standard\"}}}\r\n\
\r\n\
event: ping\r\n\
data: {\"type\": \"ping\"}\r\n\
\r\n\
event: content_block_start\r\n\
data: {\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"text\", \"text\": \"\"}}\r\n\
\r\n\
event: content_block_delta\r\n\
data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"Caf\u{e9} \u{65e5}\u{672c} \u{1f600} \\\"}\\n\\n\"}}\r\n\
\r\n\
event: ping\r\n\
data: {\"type\": \"ping\"}\r\n\
\r\n\
event: content_block_stop\r\n\
data: {\"type\": \"content_block_stop\", \"index\": 0}\r\n\
\r\n\
event: message_delta\r\n\
data: {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"end_turn\", \"stop_sequence\": null}, \"usage\": {\"input_tokens\": 25, \"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 40000, \"output_tokens\": 503, \"server_tool_use\": {\"web_search_requests\": 0}}}\r\n\
\r\n\
event: message_stop\r\n\
data: {\"type\": \"message_stop\"}\r\n\
\r\n";

#[test]
fn real_stream_with_crlf_pings_and_unicode() {
    let body = REAL_STREAM.as_bytes();
    let (offset, observed) = read_all_ways(
        Api::AnthropicMessages,
        Some("text/event-stream; charset=utf-8"),
        &request(true),
        body,
        200,
    );
    assert_eq!(offset, Some(end_of_event(body, "event: message_delta")));
    let observed = observed.expect("usage");
    let expected = TokenRecord::from_anthropic(25, 40000, 0, 0, 503);
    assert_eq!(observed.record, with_model(expected, "claude-sonnet-4-5-20250929"));
    assert_eq!(observed.id.as_deref(), Some("msg_01XFDUDYJgAACzvnptvVoYEL"));
    assert!(observed.complete && !observed.estimated);
    // The same stream with bare `\n` and no content-type reads the same.
    let lf = REAL_STREAM.replace("\r\n", "\n");
    let (_, same) = read_all_ways(Api::AnthropicMessages, None, &request(true), lf.as_bytes(), 200);
    assert_eq!(same, Some(observed));
}

#[test]
fn json_body() {
    let mut message = json!({"id": "msg_mock_2", "type": "message", "role": "assistant",
        "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "{\"title\": \"}\"}"}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": usage(true)});
    let body = format!("{message}\n");
    let (offset, observed) = read_all_ways(
        Api::AnthropicMessages,
        Some("application/json"),
        &request(false),
        body.as_bytes(),
        200,
    );
    assert_eq!(offset, Some(body.len() - 2));
    let expected = TokenRecord::from_anthropic(12, 9000, 1000, 2000, 7);
    assert_eq!(observed.clone().map(|o| o.record), Some(with_model(expected, "claude-haiku-4-5")));
    assert!(observed.is_some_and(|o| o.complete));
    // Without a model the request's counts.
    if let Some(fields) = message.as_object_mut() {
        fields.remove("model");
    }
    let (_, observed) = read_all_ways(
        Api::AnthropicMessages,
        None,
        &request(false),
        message.to_string().as_bytes(),
        200,
    );
    assert_eq!(observed.and_then(|o| o.record.model).as_deref(), Some("claude-opus-4-8"));
}

#[test]
fn cut_streams_count_what_came() {
    let events = mock_stream(&usage(false));
    let body = sse(&typed(&events), "\n");
    // Cut after the text block: the prompt side and the provisional output.
    let cut = end_of_event(&body, "\"index\":1}") + 1;
    let (offset, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body[..cut], 200);
    assert_eq!(offset, None);
    let observed = observed.expect("usage from message_start");
    assert_eq!(
        observed.record,
        with_model(TokenRecord::from_anthropic(12, 9000, 3000, 0, 1), "claude-opus-4-8")
    );
    assert!(!observed.complete);
    // Cut inside message_delta's data line: the partial event says nothing.
    let delta = String::from_utf8_lossy(&body).find("\"output_tokens\":7").expect("delta");
    let (_, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body[..delta], 200);
    assert_eq!(observed.map(|o| (o.record.output, o.complete)), Some((1, false)));
    // Cut just before the blank line ending message_delta: its bytes all came.
    let end = end_of_event(&body, "\"message_delta\"");
    let (_, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body[..end], 200);
    assert_eq!(observed.map(|o| (o.record.output, o.complete)), Some((7, true)));
    // Cut before any usage: nothing.
    let (_, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body[..20], 200);
    assert_eq!(observed, None);
}

#[test]
fn errors() {
    // Overloaded mid-stream: the usage of message_start counts, not complete.
    let events = typed(&[
        json!({"type": "message_start", "message": {"id": "msg_3", "model": "claude-opus-4-8",
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 1}}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let body = sse(&events, "\n");
    let (offset, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body, 200);
    assert_eq!(offset, None);
    let observed = observed.expect("usage");
    assert_eq!(observed.record.input, 150);
    assert!(!observed.complete);
    // An error status with an error body: nothing, whatever its framing.
    let error =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    for status in [200, 400, 529] {
        let (offset, observed) = read_all_ways(
            Api::AnthropicMessages,
            Some("application/json"),
            &request(true),
            error.to_string().as_bytes(),
            status,
        );
        assert_eq!((offset.is_some(), observed), (true, None));
    }
    // A usage in an error response counts but is never complete.
    let body =
        json!({"id": "msg_4", "type": "message", "usage": {"input_tokens": 3, "output_tokens": 0}});
    let (_, observed) = read_all_ways(
        Api::AnthropicMessages,
        None,
        &request(false),
        body.to_string().as_bytes(),
        500,
    );
    assert_eq!(observed.map(|o| (o.record.input, o.complete)), Some((3, false)));
}

#[test]
fn gateway_zeros_and_late_stops() {
    // Some gateways state the prompt only at the end; a stop_reason-less delta is not final.
    let events = typed(&[
        json!({"type": "message_start", "message": {"id": "msg_5", "model": "glm-4.6",
            "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        json!({"type": "message_delta", "delta": {"stop_reason": null}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_delta", "delta": {"stop_reason": null},
            "usage": {"input_tokens": 900, "cache_read_input_tokens": 0, "output_tokens": 0}}),
        json!({"type": "message_stop"}),
    ]);
    let body = sse(&events, "\n");
    let (offset, observed) =
        read_all_ways(Api::AnthropicMessages, None, &request(true), &body, 200);
    assert_eq!(offset, Some(end_of_event(&body, "\"message_stop\"")));
    assert_eq!(
        observed.map(|o| o.record),
        Some(with_model(TokenRecord::from_anthropic(900, 0, 0, 0, 3), "glm-4.6"))
    );
}

#[test]
fn absurd_counts_are_bounded() {
    let body = json!({"type": "message", "id": "msg_6", "usage": {"input_tokens": u64::MAX,
        "cache_read_input_tokens": u64::MAX, "cache_creation_input_tokens": 1e300,
        "cache_creation": {"ephemeral_1h_input_tokens": u64::MAX}, "output_tokens": 12.0}});
    let (_, observed) = read_all_ways(
        Api::AnthropicMessages,
        None,
        &request(false),
        body.to_string().as_bytes(),
        200,
    );
    let record = observed.expect("usage").record;
    assert_eq!(record.output, 12);
    assert!(record.input >= record.cache_read + record.cache_write());
}

#[test]
fn fast_mode_and_us_only_inference_are_read_from_the_usage() {
    // Streamed: `message_start` states the speed and geo; the final delta repeats neither.
    let mut stated = usage(false);
    stated["speed"] = json!("fast");
    stated["inference_geo"] = json!("us");
    let body = sse(&typed(&mock_stream(&stated)), "\n");
    let (_, observed) = read_all_ways(
        Api::AnthropicMessages,
        Some("text/event-stream"),
        &request(true),
        &body,
        200,
    );
    let modifiers = observed.expect("usage").record.modifiers;
    assert_eq!(modifiers, crate::Modifiers { fast: true, us_only: true, priority: false });
    // A JSON body at standard speed with an empty geo: no modifier.
    let mut standard = usage(false);
    standard["speed"] = json!("standard");
    standard["inference_geo"] = json!("");
    let body = json!({"id": "msg_1", "type": "message", "model": "claude-opus-4-6",
        "content": [], "stop_reason": "end_turn", "usage": standard})
    .to_string();
    let (_, observed) = read_all_ways(
        Api::AnthropicMessages,
        Some("application/json"),
        &request(false),
        body.as_bytes(),
        200,
    );
    assert!(observed.expect("usage").record.modifiers.is_empty());
}
