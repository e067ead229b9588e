//! Tests of the usage read from a scripted Responses WebSocket conversation.

use std::sync::Arc;

use flate2::{Compress, Compression};
use serde_json::json;

use super::*;
use crate::sources::tap::TapCall;
use crate::sources::tap::frames::tests::{deflate, frame};

const KEY: [u8; 4] = [9, 8, 7, 6];

fn state() -> (Arc<State>, tokio::sync::mpsc::UnboundedReceiver<TapCall>) {
    let (calls, rx) = tokio::sync::mpsc::unbounded_channel();
    let state = State {
        secret: "00".into(),
        routes: Vec::new(),
        session_headers: Vec::new(),
        alternates: Vec::new(),
        notices: Vec::new(),
        client: crate::sources::tap::http::Upstream::ready(
            crate::sources::tap::http::upstream_client(true).unwrap(),
        ),
        calls,
        // Windows are not what these tests look at; a send to a dropped receiver is ignored.
        limits: crate::sources::tap::limits::Sender::new(tokio::sync::mpsc::unbounded_channel().0),
        notify: Arc::new(tokio::sync::Notify::new()),
        flights: crate::sources::tap::Flights::default(),
    };
    (Arc::new(state), rx)
}

fn client_text(value: serde_json::Value) -> Vec<u8> {
    frame(true, false, 1, value.to_string().as_bytes(), Some(KEY))
}

/// A server event, deflated with the connection's one compressor (context kept).
fn server_text(compress: &mut Compress, value: serde_json::Value) -> Vec<u8> {
    frame(true, true, 1, &deflate(compress, value.to_string().as_bytes()), None)
}

fn usage(input: u64, cached: u64, output: u64) -> serde_json::Value {
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output})
}

fn completed(id: &str, usage: serde_json::Value) -> serde_json::Value {
    json!({"type": "response.completed", "response": {"id": id, "model": "gpt-5.2-codex",
        "status": "completed", "output": [], "usage": usage}})
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<TapCall>) -> Vec<TapCall> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[test]
fn warmup_then_a_turn_then_a_cut_response() {
    let (state, mut rx) = state();
    let deflate_on = Some(Deflate::default());
    let mut o = Observer::new(state, "codex-openai".into(), Some("s1".into()), deflate_on);
    let mut server = Compress::new(Compression::default(), false);
    // The client compresses too; its messages may come whole or in pieces.
    let mut client = Compress::new(Compression::default(), false);
    let warmup = json!({"type": "response.create", "model": "gpt-5.2-codex", "generate": false,
        "instructions": "You are Codex.", "input": [], "tools": [{"type": "function", "name": "x"}]});
    let bytes =
        frame(true, true, 1, &deflate(&mut client, warmup.to_string().as_bytes()), Some(KEY));
    for piece in bytes.chunks(5) {
        o.client_bytes(piece);
    }
    o.server_bytes(&server_text(
        &mut server,
        json!({"type": "response.created",
        "response": {"id": "resp_w", "status": "in_progress"}}),
    ));
    assert!(drain(&mut rx).is_empty(), "nothing before the usage is final");
    let done = server_text(&mut server, completed("resp_w", usage(10_786, 0, 0)));
    let (a, b) = done.split_at(done.len() / 2);
    o.server_bytes(a);
    o.server_bytes(b);
    let calls = drain(&mut rx);
    assert_eq!(calls.len(), 1);
    let w = &calls[0];
    assert!(w.warmup && w.complete && !w.estimated);
    assert_eq!(w.id.as_deref(), Some("resp_w"));
    assert_eq!(w.record.input, 10_786);
    assert_eq!(w.record.model.as_deref(), Some("gpt-5.2-codex"));
    assert_eq!(w.session_header.as_deref(), Some("s1"));
    assert!(w.request.has_tools && w.request.system_fingerprint.is_some());

    // A turn: deltas, a rate-limit event and a ping in between, the usage at the end.
    let turn = json!({"type": "response.create", "model": "gpt-5.2-codex",
        "previous_response_id": "resp_w", "input": [{"type": "message", "role": "user"}]});
    let bytes = frame(true, true, 1, &deflate(&mut client, turn.to_string().as_bytes()), Some(KEY));
    o.client_bytes(&bytes);
    o.server_bytes(&server_text(
        &mut server,
        json!({"type": "codex.rate_limits",
        "rate_limits": {"primary": {"used_percent": 7}}}),
    ));
    o.server_bytes(&server_text(
        &mut server,
        json!({"type": "response.output_text.delta",
        "delta": "Hi\nthere"}),
    ));
    o.server_bytes(&frame(true, false, 9, b"", None));
    o.server_bytes(&server_text(&mut server, completed("resp_t", usage(12_000, 10_000, 40))));
    let calls = drain(&mut rx);
    assert_eq!(calls.len(), 1);
    let t = &calls[0];
    assert!(!t.warmup && t.complete);
    assert_eq!(t.id.as_deref(), Some("resp_t"));
    assert_eq!((t.record.input, t.record.output), (12_000, 40));

    // A response cut by the connection's end: the usage seen, marked incomplete.
    o.client_bytes(&client_text(json!({"type": "response.create", "model": "gpt-5.2-codex"})));
    o.server_bytes(&server_text(
        &mut server,
        json!({"type": "response.in_progress",
        "response": {"id": "resp_c", "usage": usage(500, 0, 3)}}),
    ));
    assert!(drain(&mut rx).is_empty());
    o.closed();
    let calls = drain(&mut rx);
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].complete && calls[0].id.as_deref() == Some("resp_c"));
}

#[test]
fn errors_and_cuts_without_usage_report_nothing() {
    let (state, mut rx) = state();
    let mut o = Observer::new(state, "openai".into(), None, None);
    let create = client_text(json!({"type": "response.create", "model": "m"}));
    o.client_bytes(&create);
    o.server_bytes(&frame(true, false, 1, br#"{"type":"error","status":429,"error":{}}"#, None));
    o.client_bytes(&create);
    o.server_bytes(&frame(true, false, 8, &[0x03, 0xe8], None));
    o.closed();
    assert!(drain(&mut rx).is_empty());
}

#[test]
fn an_unreadable_stream_stops_the_observing() {
    let (state, mut rx) = state();
    let mut o = Observer::new(state, "openai".into(), None, None);
    o.client_bytes(&client_text(json!({"type": "response.create", "model": "m"})));
    // RSV1 without a negotiated deflate: the reader gives up, and so does the observer.
    o.server_bytes(&frame(true, true, 1, b"garbage", None));
    o.server_bytes(&frame(
        true,
        false,
        1,
        completed("r", usage(1, 0, 1)).to_string().as_bytes(),
        None,
    ));
    assert!(drain(&mut rx).is_empty());
}
