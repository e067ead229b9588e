//! The tap's WebSocket tunnel in process (`acp_usage::sources::tap::Tap`): a raw upstream that
//! sees exactly the bytes the tap sends shows the handshake and the frames pass unchanged both
//! ways (`Host` aside) while the usage is read from a copy; the mock's Responses WebSocket shows
//! a warm-up and a turn counted through the tunnel; a refused upgrade comes back as it was.

use acp_usage_tests::mock_llm::websocket::{accept_key, encode_frame};
use acp_usage_tests::mock_llm::{CallKind, MockLlm, Script, Step, Usage};
use acp_usage_tests::raw_http::{PATIENCE, RawUpstream, response_head};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tap_proxy::Rig;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// An upgrade request for `target`, with the headers Codex sends (and a deflate offer).
fn upgrade(target: &str) -> Vec<u8> {
    format!(
        "GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n\
         sec-websocket-extensions: permessage-deflate; client_max_window_bits\r\n\
         authorization: Bearer sk-test\r\nopenai-beta: responses_websockets=2026-02-06\r\n\
         session-id: s-1\r\n\r\n"
    )
    .into_bytes()
}

/// Reads a head (through its blank line), byte by byte so nothing after it is taken.
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> String {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        let n =
            tokio::time::timeout(PATIENCE, stream.read(&mut byte)).await.expect("a head").unwrap();
        assert_eq!(n, 1, "the connection closed mid-head: {}", String::from_utf8_lossy(&raw));
        raw.push(byte[0]);
    }
    String::from_utf8(raw).unwrap()
}

async fn read_exactly(stream: &mut (impl AsyncRead + Unpin), n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut buf)).await.expect("bytes").unwrap();
    buf
}

fn masked_text(value: serde_json::Value) -> Vec<u8> {
    encode_frame(1, value.to_string().as_bytes(), Some([0x11, 0x22, 0x33, 0x44]))
}

fn server_text(value: serde_json::Value) -> Vec<u8> {
    encode_frame(1, value.to_string().as_bytes(), None)
}

#[tokio::test]
async fn tap_tunnels_a_websocket_byte_for_byte_and_reads_its_usage() {
    let mut upstream = RawUpstream::start().await.unwrap();
    let mut rig = Rig::start(&[("openai", format!("{}/v1", upstream.url()))]);
    let mut client = TcpStream::connect(rig.tap.addr).await.unwrap();
    client.write_all(&upgrade(&rig.path("openai", "/responses?beta=1"))).await.unwrap();

    let mut arrival = upstream.arrival().await.expect("the upgrade reached the upstream");
    let request = &arrival.request;
    assert_eq!(request.method, "GET");
    assert_eq!(request.target, "/v1/responses?beta=1");
    assert_eq!(request.header("host"), Some(upstream.addr.to_string().as_str()));
    for (name, value) in [
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("sec-websocket-key", KEY),
        ("sec-websocket-version", "13"),
        ("sec-websocket-extensions", "permessage-deflate; client_max_window_bits"),
        ("authorization", "Bearer sk-test"),
        ("openai-beta", "responses_websockets=2026-02-06"),
    ] {
        assert_eq!(request.header(name), Some(value), "{}", request.head);
    }
    let accept = format!("sec-websocket-accept: {}", accept_key(KEY));
    let head = response_head(
        101,
        &[
            "upgrade: websocket",
            "connection: Upgrade",
            &accept,
            "x-codex-turn-state: t1",
            "date: x",
        ],
    );
    let up = &mut arrival.stream;
    up.write_all(&head).await.unwrap();
    let got = read_head(&mut client).await;
    assert!(got.starts_with("HTTP/1.1 101"), "{got}");
    for line in [accept.as_str(), "x-codex-turn-state: t1", "upgrade: websocket"] {
        assert!(got.to_ascii_lowercase().contains(&line.to_ascii_lowercase()), "{line} in {got}");
    }

    // Client to upstream: a warm-up, fragmented with a ping between the fragments.
    let create = json!({"type": "response.create", "model": "gpt-5.2-codex", "generate": false,
        "tools": [{"type": "function", "name": "shell"}], "input": []})
    .to_string();
    let (a, b) = create.as_bytes().split_at(20);
    let mut sent = vec![0x01, 0x80 | a.len() as u8, 1, 2, 3, 4];
    sent.extend(a.iter().enumerate().map(|(i, x)| x ^ [1, 2, 3, 4][i % 4]));
    sent.extend(encode_frame(9, b"hb", Some([5, 5, 5, 5])));
    sent.extend(encode_frame(0, b, Some([7, 7, 7, 7])));
    for piece in sent.chunks(11) {
        client.write_all(piece).await.unwrap();
    }
    assert_eq!(read_exactly(up, sent.len()).await, sent, "the client's frames changed on the way");

    // Upstream to client: the events, one frame each, a rate-limit event among them.
    let mut events = Vec::new();
    events.extend(server_text(json!({"type": "codex.rate_limits", "rate_limits": {}})));
    events.extend(server_text(json!({"type": "response.created", "response": {"id": "resp_w1"}})));
    events.extend(server_text(json!({"type": "response.completed", "response": {"id": "resp_w1",
        "model": "gpt-5.2-codex", "output": [], "usage": {"input_tokens": 4321,
        "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0}}})));
    up.write_all(&events).await.unwrap();
    assert_eq!(read_exactly(&mut client, events.len()).await, events, "the events changed");

    let call = rig.next_call().await;
    assert!(call.warmup && call.complete, "{call:#?}");
    assert_eq!(call.id.as_deref(), Some("resp_w1"));
    assert_eq!((call.record.input, call.record.output), (4321, 0));

    // A close from the client reaches the upstream, the upstream's answer the client.
    let close = encode_frame(8, &[0x03, 0xe8], Some([9, 8, 7, 6]));
    client.write_all(&close).await.unwrap();
    assert_eq!(read_exactly(up, close.len()).await, close);
    let answer = encode_frame(8, &[0x03, 0xe8], None);
    up.write_all(&answer).await.unwrap();
    up.shutdown().await.unwrap();
    assert_eq!(read_exactly(&mut client, answer.len()).await, answer);
}

#[tokio::test]
async fn tap_tunnels_the_mocks_responses_websocket() {
    let mock = MockLlm::start(Script::new(vec![Step::text("Hi.", Usage::openai(900, 800, 20, 5))]))
        .unwrap();
    mock.enable_websocket();
    let mut rig = Rig::start(&[("openai", format!("{}/v1", mock.url()))]);
    let mut client = TcpStream::connect(rig.tap.addr).await.unwrap();
    client.write_all(&upgrade(&rig.path("openai", "/responses"))).await.unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // The mock declines compression: no extension comes back.
    assert!(!head.to_ascii_lowercase().contains("sec-websocket-extensions"), "{head}");

    let tools = json!([{"type": "function", "name": "shell"}]);
    client
        .write_all(&masked_text(json!({"type": "response.create", "model": "gpt-5.2-codex",
            "generate": false, "tools": tools})))
        .await
        .unwrap();
    let warmup = rig.next_call().await;
    assert!(warmup.warmup && warmup.complete);
    let warm_id = warmup.id.clone().expect("the warm-up's id");
    client
        .write_all(&masked_text(json!({"type": "response.create", "model": "gpt-5.2-codex",
            "previous_response_id": warm_id, "tools": tools})))
        .await
        .unwrap();
    let turn = rig.next_call().await;
    assert!(!turn.warmup && turn.complete);
    let r = &turn.record;
    assert_eq!((r.input, r.cache_read, r.output, r.thought), (900, 800, 20, 5));

    let calls = mock.calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls.iter().all(|c| c.websocket), "the mock saw HTTP: {calls:#?}");
    assert_eq!((calls[0].kind, calls[1].kind), (CallKind::Warmup, CallKind::Main));
    assert_eq!(warmup.record.input, calls[0].usage.unwrap().input);
}

#[tokio::test]
async fn tap_passes_a_refused_upgrade_back_as_it_came() {
    // The mock without WebSockets answers 426; Codex then uses HTTP, as it would untapped.
    let mock = MockLlm::start(Script::default()).unwrap();
    let rig = Rig::start(&[("openai", format!("{}/v1", mock.url()))]);
    let mut client = TcpStream::connect(rig.tap.addr).await.unwrap();
    client.write_all(&upgrade(&rig.path("openai", "/responses"))).await.unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 426"), "{head}");
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
        .and_then(|n| n.trim().parse().ok())
        .expect("a content-length");
    let body = String::from_utf8(read_exactly(&mut client, length).await).unwrap();
    assert!(body.contains("mock-llm: no WebSocket here"), "not the upstream's answer: {body}");

    // An upstream that is down: the tap's own 502, as on HTTP.
    let down = Rig::start(&[("openai", "http://127.0.0.1:9/v1".to_owned())]);
    let mut client = TcpStream::connect(down.tap.addr).await.unwrap();
    client.write_all(&upgrade(&down.path("openai", "/responses"))).await.unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
}
