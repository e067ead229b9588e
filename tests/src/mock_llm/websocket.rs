//! The OpenAI Responses WebSocket, as Codex's built-in provider speaks it: `GET …/responses`
//! with `Upgrade: websocket`, then one `response.create` text message per request, each
//! answered with the events an SSE stream would carry (one text frame each), from the same
//! script and recorded the same way as over HTTP.
//!
//! Opt-in per mock ([`super::MockLlm::enable_websocket`]): otherwise an upgrade is declined
//! with 426, after which Codex uses HTTP. Compression is never accepted (no extension in the
//! 101), so frames go out plain. A `generate: false` request (Codex's warm-up) gets
//! `response.created` and `response.completed` with input-only usage, recorded as a billed
//! [`super::CallKind::Warmup`] call. `previous_response_id` must name the connection's last
//! response, as OpenAI's connection-local cache requires. A step's Codex rate-limit headers
//! (`x-codex-primary-*`, `-secondary-*`) go out as the `codex.rate_limits` event the server sends
//! over the WebSocket instead, before the step's answer.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::http::{self, Request, Response};
use super::{Shared, answer};

/// RFC 6455's GUID, appended to the client's key for `Sec-WebSocket-Accept`.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The largest message the mock accepts.
const MAX_MESSAGE: u64 = 64 << 20;

/// Whether a request asks to upgrade to a WebSocket.
pub(super) fn is_upgrade(request: &Request) -> bool {
    request.header("upgrade").is_some_and(|v| v.to_ascii_lowercase().contains("websocket"))
}

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let digest = sha1_smol::Sha1::from(format!("{}{GUID}", key.trim())).digest().bytes();
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Serves an upgrade request: 426 unless enabled, else the connection until it closes.
pub(super) fn serve(stream: &TcpStream, request: &Request, shared: &Shared) -> anyhow::Result<()> {
    let enabled = shared.websocket.load(Ordering::SeqCst);
    if !enabled || request.method != "GET" || !request.path().ends_with("/responses") {
        let refusal = Response::error(426, "mock-llm: no WebSocket here; use HTTP");
        http::write_response(stream, &refusal, &[])?;
        return Ok(());
    }
    let Some(key) = request.header("sec-websocket-key") else {
        http::write_response(stream, &Response::error(400, "no Sec-WebSocket-Key"), &[])?;
        return Ok(());
    };
    let mut writer = stream;
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {}\r\nx-models-etag: mock\r\n\r\n",
        accept_key(key)
    );
    writer.write_all(head.as_bytes())?;
    writer.flush()?;
    // Codex keeps its connection open between turns.
    stream.set_read_timeout(Some(Duration::from_secs(600)))?;

    let mut last_response: Option<String> = None;
    let mut message: Option<(u8, Vec<u8>)> = None;
    loop {
        let Some(frame) = read_frame(stream)? else { return Ok(()) };
        match frame.opcode {
            1 | 2 => message = Some((frame.opcode, frame.payload)),
            0 => match &mut message {
                Some((_, data)) => data.extend(frame.payload),
                None => anyhow::bail!("a continuation frame without a message"),
            },
            8 => {
                // Echo the status code, then close.
                let code = frame.payload.get(..2).unwrap_or(&[0x03, 0xe8]).to_vec();
                write_frame(stream, 8, &code)?;
                return Ok(());
            }
            9 => write_frame(stream, 10, &frame.payload)?,
            _ => (),
        }
        if frame.fin
            && frame.opcode < 8
            && let Some((1, text)) = message.take()
        {
            respond(stream, request, shared, &text, &mut last_response)?;
        }
    }
}

/// Answers one client message.
fn respond(
    stream: &TcpStream,
    upgrade: &Request,
    shared: &Shared,
    text: &[u8],
    last_response: &mut Option<String>,
) -> io::Result<()> {
    let body: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
    if body["type"] != "response.create" {
        return Ok(());
    }
    if let Some(previous) = body["previous_response_id"].as_str()
        && last_response.as_deref() != Some(previous)
    {
        let error = json!({"type": "error", "status": 400, "error": {
            "type": "invalid_request_error", "code": "previous_response_not_found",
            "message": format!("mock-llm: no response {previous} on this connection"),
        }});
        return write_frame(stream, 1, error.to_string().as_bytes());
    }
    let request = Request {
        method: "POST".to_owned(),
        target: upgrade.target.clone(),
        headers: upgrade.headers.clone(),
        body: text.to_vec(),
    };
    let port = stream.local_addr().map_or(0, |a| a.port());
    let (reply, response_id, step_headers) = answer(request, shared, true, port);
    match reply.response {
        Response::Sse(events) => {
            if let Some(event) = rate_limits_event(&step_headers) {
                write_frame(stream, 1, event.to_string().as_bytes())?;
            }
            for (_, data) in events {
                write_frame(stream, 1, data.to_string().as_bytes())?;
            }
            *last_response = Some(format!("resp_mock_{response_id}"));
        }
        Response::Json { status, body } => {
            let error = json!({"type": "error", "status": status, "error": body["error"]});
            write_frame(stream, 1, error.to_string().as_bytes())?;
        }
    }
    Ok(())
}

/// The `codex.rate_limits` event that states what a step's `x-codex-*` headers would (the
/// server's shape: windows with `used_percent`, `window_minutes`, `reset_at`).
fn rate_limits_event(headers: &[(String, String)]) -> Option<Value> {
    let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let number = |name: &str| get(name).and_then(|v| v.parse::<f64>().ok());
    let window = |which: &str| {
        let used = number(&format!("x-codex-{which}-used-percent"))?;
        Some(json!({
            "used_percent": used,
            "window_minutes": number(&format!("x-codex-{which}-window-minutes")).map(|m| m as u64),
            "reset_at": number(&format!("x-codex-{which}-reset-at")).map(|s| s as i64),
        }))
    };
    let primary = window("primary")?;
    Some(json!({
        "type": "codex.rate_limits",
        "plan_type": "plus",
        "rate_limits": {"allowed": true, "limit_reached": false, "primary": primary,
                        "secondary": window("secondary")},
        "code_review_rate_limits": null,
    }))
}

/// One frame, unmasked.
#[derive(Debug)]
pub struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// Reads one frame (a client's are masked); `None` at the end of the stream.
pub fn read_frame(mut stream: impl Read) -> io::Result<Option<Frame>> {
    let mut head = [0u8; 2];
    match stream.read_exact(&mut head) {
        Ok(()) => (),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = match head[1] & 0x7f {
        126 => {
            let mut ext = [0u8; 2];
            stream.read_exact(&mut ext)?;
            u64::from(u16::from_be_bytes(ext))
        }
        127 => {
            let mut ext = [0u8; 8];
            stream.read_exact(&mut ext)?;
            u64::from_be_bytes(ext)
        }
        short => u64::from(short),
    };
    if len > MAX_MESSAGE {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame too large"));
    }
    let mut mask = None;
    if head[1] & 0x80 != 0 {
        let mut key = [0u8; 4];
        stream.read_exact(&mut key)?;
        mask = Some(key);
    }
    let mut payload = vec![0u8; len as usize];
    stream.read_exact(&mut payload)?;
    if let Some(key) = mask {
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= key[i % 4];
        }
    }
    Ok(Some(Frame { fin: head[0] & 0x80 != 0, opcode: head[0] & 0x0f, payload }))
}

/// Encodes one final frame; masked with `mask` (a client's) or not (a server's): the bench's
/// encoder, which its WebSocket upstream and client use.
pub use acp_usage_bench::tap::ws::frame as encode_frame;

/// Writes one unmasked final frame, flushed.
fn write_frame(mut stream: &TcpStream, opcode: u8, payload: &[u8]) -> io::Result<()> {
    stream.write_all(&encode_frame(opcode, payload, None))?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_is_rfc_6455s_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn frames_round_trip_masked_and_not() {
        for len in [0, 5, 125, 126, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for mask in [None, Some([1, 2, 3, 4])] {
                let bytes = encode_frame(1, &payload, mask);
                let frame = read_frame(bytes.as_slice()).unwrap().unwrap();
                assert!(frame.fin && frame.opcode == 1 && frame.payload == payload);
            }
        }
    }

    /// Sends a handshake to `mock`; returns the stream after the 101 and the response head.
    fn open(mock: &super::super::MockLlm) -> (TcpStream, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
        let head = "GET /v1/responses HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n";
        stream.write_all(head.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            got.push(byte[0]);
        }
        (stream, String::from_utf8(got).unwrap())
    }

    fn events_until_done(stream: &TcpStream) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let frame = read_frame(stream).unwrap().unwrap();
            let event: Value = serde_json::from_slice(&frame.payload).unwrap();
            let done = matches!(event["type"].as_str(), Some("response.completed" | "error"));
            events.push(event);
            if done {
                return events;
            }
        }
    }

    #[test]
    fn a_warmup_and_a_turn_over_the_socket() {
        use super::super::{CallKind, MockLlm, Script, Step, Usage};
        let mock =
            MockLlm::start(Script::new(vec![Step::text("Hi.", Usage::openai(900, 800, 20, 5))]))
                .unwrap();
        // Not enabled: declined, and nothing is recorded.
        let (_, head) = open(&mock);
        assert!(head.starts_with("HTTP/1.1 426"), "{head}");
        mock.enable_websocket();
        let (mut stream, head) = open(&mock);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
        let tools = json!([{"type": "function", "name": "shell"}]);
        let warmup = json!({"type": "response.create", "model": "gpt-5.2-codex", "generate": false, "tools": tools});
        stream
            .write_all(&encode_frame(1, warmup.to_string().as_bytes(), Some([1, 2, 3, 4])))
            .unwrap();
        let events = events_until_done(&stream);
        assert_eq!(events.len(), 2);
        let warm_id = events[1]["response"]["id"].as_str().unwrap().to_owned();
        assert!(warm_id.starts_with("resp_"));
        assert_eq!(events[1]["response"]["usage"]["output_tokens"], 0);
        stream.write_all(&encode_frame(9, b"p", Some([5, 6, 7, 8]))).unwrap();
        let pong = read_frame(&stream).unwrap().unwrap();
        assert!(pong.opcode == 10 && pong.payload == b"p");
        let unknown = json!({"type": "response.create", "model": "gpt-5.2-codex", "tools": tools,
            "previous_response_id": "resp_nope"});
        stream
            .write_all(&encode_frame(1, unknown.to_string().as_bytes(), Some([1, 1, 1, 1])))
            .unwrap();
        assert_eq!(events_until_done(&stream)[0]["error"]["code"], "previous_response_not_found");
        let turn = json!({"type": "response.create", "model": "gpt-5.2-codex", "tools": tools,
            "previous_response_id": warm_id});
        stream
            .write_all(&encode_frame(1, turn.to_string().as_bytes(), Some([9, 9, 9, 9])))
            .unwrap();
        let events = events_until_done(&stream);
        assert_eq!(events.last().unwrap()["response"]["usage"]["input_tokens"], 900);
        stream.write_all(&encode_frame(8, &[0x03, 0xe8], Some([0, 0, 0, 1]))).unwrap();
        assert_eq!(read_frame(&stream).unwrap().unwrap().opcode, 8);
        let calls = mock.calls();
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| c.websocket && c.kind.is_billed()));
        assert_eq!(calls[0].kind, CallKind::Warmup);
        assert_eq!(calls[1].kind, CallKind::Main);
        assert_eq!(calls[1].usage, Some(Usage::openai(900, 800, 20, 5)));
    }
}
