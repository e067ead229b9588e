//! The LLM-API tap in process (`acp_usage::sources::tap::Tap`), against upstreams the tests
//! control: the mock LLM, and raw HTTP/1.1 upstreams that send exactly the bytes a test writes,
//! when it says so. Talked to over raw TCP, so malformed requests reach it as written.
//!
//! What each test proves: the tap listens on loopback only; it forwards nothing without the
//! exact secret and is no open proxy (absolute-form targets, CONNECT, the `Host` header); it
//! forwards requests unchanged; an upstream it cannot reach is a 502 and counts nothing; SSE
//! reaches the client as the upstream sends it, byte for byte; compressed bodies pass compressed
//! while the usage is read from a decoded copy; a cut stream counts what was billed before the
//! cut, an error without usage counts nothing; calls that are not model calls pass uncounted.
//!
//! "Nothing counted" is shown without waiting for something not to happen: after the request in
//! question, a model call on the same connection must be the next call the tap reports (the tap
//! reports a response at the latest when it is done with it, before it reads the next request).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use acp_usage::sources::tap::{Notice, Route, Tap, TapCall, TapConfig};
use acp_usage_tests::mock_llm::{CallKind, MockLlm, Script};
use acp_usage_tests::raw_http::{
    PATIENCE, RawClient, RawUpstream, Response, response_head, response_with_body,
};
use serde_json::json;
use tokio::io::AsyncWriteExt;

/// A tap started for a test, with where its calls arrive.
pub(crate) struct Rig {
    pub tap: Tap,
    pub secret: String,
    calls: tokio::sync::mpsc::UnboundedReceiver<TapCall>,
    /// The subscription windows the tap read.
    limits: tokio::sync::mpsc::UnboundedReceiver<acp_usage::sources::tap::limits::Observed>,
}

impl Rig {
    /// Starts a tap with `routes` (name, upstream URL).
    pub fn start(routes: &[(&str, String)]) -> Rig {
        Rig::start_with(routes, Vec::new())
    }

    /// [`Rig::start`] with `notices` a program the agent starts may ask for.
    pub fn start_with(routes: &[(&str, String)], notices: Vec<Notice>) -> Rig {
        let routes = routes
            .iter()
            .map(|(name, upstream)| Route { name: (*name).to_owned(), upstream: upstream.clone() })
            .collect();
        let config = TapConfig {
            routes,
            session_headers: vec!["x-claude-code-session-id".to_owned()],
            alternates: Vec::new(),
            notices,
        };
        let (tx, calls) = tokio::sync::mpsc::unbounded_channel();
        let (limits_tx, limits) = tokio::sync::mpsc::unbounded_channel();
        let notify = Arc::new(tokio::sync::Notify::new());
        let tap = Tap::start(config, tx, limits_tx, notify).expect("the tap starts");
        // http://127.0.0.1:PORT/<secret>/<route>
        let base = tap.base_url("r");
        let secret = base.rsplit('/').nth(1).expect("a secret in the base URL").to_owned();
        Rig { tap, secret, calls, limits }
    }

    /// The tap's path for `rest` on `route`.
    pub fn path(&self, route: &str, rest: &str) -> String {
        format!("/{}/{route}{rest}", self.secret)
    }

    pub async fn client(&self) -> RawClient {
        RawClient::connect(self.tap.addr).await.expect("connect to the tap")
    }

    /// The next subscription windows the tap reports.
    pub async fn next_limits(&mut self) -> acp_usage::sources::tap::limits::Observed {
        match tokio::time::timeout(PATIENCE, self.limits.recv()).await {
            Ok(Some(observed)) => observed,
            Ok(None) => panic!("the tap's limits channel closed"),
            Err(_) => panic!("the tap reported no window within {PATIENCE:?}"),
        }
    }

    /// The next call the tap reports.
    pub async fn next_call(&mut self) -> TapCall {
        match tokio::time::timeout(PATIENCE, self.calls.recv()).await {
            Ok(Some(call)) => call,
            Ok(None) => panic!("the tap's call channel closed"),
            Err(_) => panic!("the tap reported no call within {PATIENCE:?}"),
        }
    }
}

/// A request: `method target`, a `host`, `headers` and a `content-length` body.
pub(crate) fn request(method: &str, target: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    request
}

/// An Anthropic Messages model call that declares a tool (a main call for the mock).
pub(crate) fn model_call(target: &str, stream: bool) -> Vec<u8> {
    let body = json!({
        "model": "claude-test-1", "max_tokens": 64, "stream": stream,
        "tools": [{"name": "Read", "description": "Reads a file",
                   "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}],
    });
    request(
        "POST",
        target,
        &["content-type: application/json", "x-api-key: sk-ant-test-key"],
        body.to_string().as_bytes(),
    )
}

fn event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// `message_start` with the prompt side and a provisional output.
pub(crate) fn message_start(
    id: &str,
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
) -> String {
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": "claude-test-1",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_write, "output_tokens": output},
        }}),
    )
}

/// The text block and the end of a stream whose final output count is `output`.
pub(crate) fn stream_rest(text: &str, output: u64) -> Vec<String> {
    vec![
        event("ping", json!({"type": "ping"})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": text}}),
        ),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                   "usage": {"output_tokens": output}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
}

/// The tap's own refusal or failure (not something an upstream said).
fn is_tap_error(response: &Response) -> bool {
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap_or_default();
    body["error"]["type"] == "acp_usage_tap_error"
}

/// Sends a model call to the mock (route `mock`) on `client`'s connection and checks that it is
/// the next call the tap reports: a call counted for what went before on this connection would
/// have come first.
async fn expect_next_is_marker(rig: &mut Rig, client: &mut RawClient, mock: &MockLlm, what: &str) {
    let mark = mock.mark();
    let response = client
        .exchange(&model_call(&rig.path("mock", "/v1/messages"), false))
        .await
        .expect("the marker call");
    assert_eq!(response.head.status, 200, "the marker call failed: {}", response.text());
    let served = mock.calls_since(mark);
    assert_eq!(served.len(), 1, "the marker call should reach the mock once: {served:#?}");
    let call = rig.next_call().await;
    let marker = format!("msg_mock_{}", served[0].response_id);
    assert_eq!(
        call.id.as_deref(),
        Some(marker.as_str()),
        "{what} was counted, or its call came out of order: {call:#?}"
    );
}

/// The host's own IPv4 addresses other than loopback.
fn outward_addresses() -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list that stays valid until freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return found;
    }
    let mut node = list;
    while !node.is_null() {
        // SAFETY: `node` is an element of the list getifaddrs returned, not yet freed; an
        // AF_INET address is a sockaddr_in.
        unsafe {
            let addr = (*node).ifa_addr;
            if !addr.is_null() && i32::from((*addr).sa_family) == libc::AF_INET {
                let sin = &*(addr as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() {
                    found.push(ip);
                }
            }
            node = (*node).ifa_next;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[tokio::test]
async fn tap_listens_on_loopback_only() {
    let rig = Rig::start(&[]);
    let port = rig.tap.addr.port();
    assert_eq!(rig.tap.addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    let base = rig.tap.base_url("anthropic");
    assert!(base.starts_with(&format!("http://127.0.0.1:{port}/")), "{base}");
    // Bound to 127.0.0.1, not to every interface: the host's other addresses do not reach it.
    let outward = outward_addresses();
    for ip in &outward {
        let reached = tokio::time::timeout(
            PATIENCE,
            tokio::net::TcpStream::connect(SocketAddr::new(IpAddr::V4(*ip), port)),
        )
        .await;
        assert!(
            !matches!(reached, Ok(Ok(_))),
            "the tap accepts connections on {ip}:{port}, not only on loopback"
        );
    }
    if outward.is_empty() {
        eprintln!("no non-loopback address on this host: only the bound address was checked");
    }
}

#[tokio::test]
async fn tap_refuses_requests_without_the_exact_secret() {
    let ok = response_with_body(200, &["content-type: application/json"], b"{\"forwarded\":1}");
    let upstream = RawUpstream::answering(ok).await.expect("an upstream");
    let rig = Rig::start(&[("r", upstream.url())]);
    let s = rig.secret.clone();
    assert_eq!(s.len(), 48, "the secret should be 192 bits in hex: {s}");
    let mut wrong = s.clone();
    let last = if wrong.ends_with('0') { "1" } else { "0" };
    wrong.replace_range(47.., last);
    let mut cases = vec![
        ("no secret", "GET", "/r/v1/models".to_owned()),
        ("no secret, a model call", "POST", "/r/v1/messages".to_owned()),
        ("a wrong secret", "GET", format!("/{wrong}/r/v1/models")),
        ("a wrong secret, a model call", "POST", format!("/{wrong}/r/v1/messages")),
        ("the secret but its last character", "GET", format!("/{}/r/v1/models", &s[..47])),
        ("half the secret", "GET", format!("/{}/r/v1/models", &s[..24])),
        ("the secret and one more character", "GET", format!("/{s}0/r/v1/models")),
        ("the secret run into the route", "GET", format!("/{s}r/v1/models")),
        ("the secret after another segment", "GET", format!("/r/{s}/v1/models")),
        ("the secret in the query", "GET", format!("/r/v1/models?secret={s}")),
        ("an empty path", "GET", "/".to_owned()),
        ("the asterisk form", "OPTIONS", "*".to_owned()),
    ];
    if s.to_uppercase() != s {
        cases.push((
            "the secret in upper case",
            "GET",
            format!("/{}/r/v1/models", s.to_uppercase()),
        ));
    }
    for (what, method, target) in &cases {
        let mut client = rig.client().await;
        let body: &[u8] = if *method == "POST" { b"{\"model\":\"claude-test-1\"}" } else { b"" };
        let response =
            client.exchange(&request(method, target, &[], body)).await.expect("a response");
        assert!(
            (400..500).contains(&response.head.status) && is_tap_error(&response),
            "{what} ({method} {target}): expected the tap's own 4xx, got {} {}",
            response.head.status,
            response.text()
        );
    }
    assert_eq!(upstream.accepted(), 0, "a request without the exact secret reached the upstream");
    // The exact secret opens the route: a forwarded request above would have been seen.
    let mut client = rig.client().await;
    let response =
        client.exchange(&request("GET", &rig.path("r", "/v1/models"), &[], b"")).await.unwrap();
    assert_eq!((response.head.status, response.text().as_str()), (200, "{\"forwarded\":1}"));
    assert_eq!(upstream.accepted(), 1);
}

/// A notice (`/<secret>/.notice/<name>`, what codex-acp's Codex asks for when acp-usage cannot
/// find it) is the tap's own: answered `204` as often as asked (the relay logs it once), `404`
/// for a name the pointing did not give, refused without the secret, and never forwarded.
#[tokio::test]
async fn tap_answers_notices_itself() {
    let ok = response_with_body(200, &["content-type: application/json"], b"{\"forwarded\":1}");
    let upstream = RawUpstream::answering(ok).await.expect("an upstream");
    let notice = Notice { name: "codex-app-server".into(), text: "not found".into() };
    let rig = Rig::start_with(&[("r", upstream.url())], vec![notice]);
    let asked = rig.path(".notice", "/codex-app-server");
    for _ in 0..2 {
        let mut client = rig.client().await;
        let response = client.exchange(&request("POST", &asked, &[], b"")).await.unwrap();
        assert_eq!(response.head.status, 204, "{}", response.text());
    }
    let cases = [
        ("another name", rig.path(".notice", "/other")),
        ("no name", rig.path(".notice", "")),
        ("no secret", "/.notice/codex-app-server".to_owned()),
    ];
    for (what, target) in cases {
        let mut client = rig.client().await;
        let response = client.exchange(&request("POST", &target, &[], b"")).await.unwrap();
        assert!(
            (400..500).contains(&response.head.status) && is_tap_error(&response),
            "{what} ({target}): expected the tap's own 4xx, got {} {}",
            response.head.status,
            response.text()
        );
    }
    assert_eq!(upstream.accepted(), 0, "a notice reached the upstream");
}

#[tokio::test]
async fn tap_is_no_open_proxy() {
    let ok = response_with_body(200, &["content-type: application/json"], b"{\"forwarded\":1}");
    let upstream = RawUpstream::answering(ok).await.expect("an upstream");
    let rig = Rig::start(&[("r", upstream.url())]);
    let (up, tap, s) = (upstream.addr, rig.tap.addr, &rig.secret);
    let cases = [
        (
            "an absolute-form target at the upstream",
            format!("GET http://{up}/{s}/r/v1/models HTTP/1.1\r\nhost: {up}\r\n\r\n"),
        ),
        (
            "an absolute-form model call at the upstream",
            format!(
                "POST http://{up}/v1/messages HTTP/1.1\r\nhost: {up}\r\n\
                 content-length: 2\r\n\r\n{{}}"
            ),
        ),
        (
            "an absolute-form target at the tap itself",
            format!("GET http://{tap}/{s}/r/v1/models HTTP/1.1\r\nhost: {tap}\r\n\r\n"),
        ),
        ("CONNECT to the upstream", format!("CONNECT {up} HTTP/1.1\r\nhost: {up}\r\n\r\n")),
        (
            // A route's upgrade under the secret is tunnelled to the route's upstream (tap_ws);
            // without the secret it is refused like any request.
            "a WebSocket upgrade without the secret (a tunnel once accepted)",
            format!(
                "GET /r/v1/responses HTTP/1.1\r\nhost: {tap}\r\nconnection: Upgrade\r\n\
                 upgrade: websocket\r\nsec-websocket-version: 13\r\n\
                 sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            ),
        ),
        (
            "CONNECT to a name",
            "CONNECT api.anthropic.com:443 HTTP/1.1\r\nhost: api.anthropic.com:443\r\n\r\n"
                .to_owned(),
        ),
    ];
    for (what, raw) in &cases {
        let mut client = rig.client().await;
        let response = client.exchange(raw.as_bytes()).await.expect("a response");
        assert!(
            (400..500).contains(&response.head.status) && is_tap_error(&response),
            "{what}: expected the tap's own 4xx, got {} {}",
            response.head.status,
            response.text()
        );
    }
    assert_eq!(upstream.accepted(), 0, "the tap forwarded a proxy request");
}

#[tokio::test]
async fn tap_routes_by_its_table_not_by_the_host_header() {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let rig = Rig::start(&[("r", upstream.url())]);
    let mut client = rig.client().await;
    let target = rig.path("r", "/v1/models?limit=5");
    let raw = format!("GET {target} HTTP/1.1\r\nHost: evil.example\r\naccept: */*\r\n\r\n");
    client.send(raw.as_bytes()).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the route's upstream");
    let seen = &arrival.request;
    assert_eq!(seen.header("host"), Some(upstream.addr.to_string().as_str()), "{}", seen.head);
    assert!(!seen.head.contains("evil.example"), "the client's Host went upstream: {}", seen.head);
    assert_eq!(seen.target, "/v1/models?limit=5");
    let listing = b"{\"data\":[]}";
    let answer = response_with_body(200, &["content-type: application/json"], listing);
    arrival.stream.write_all(&answer).await.unwrap();
    let response = client.response().await.unwrap();
    assert_eq!((response.head.status, response.body.as_slice()), (200, listing.as_slice()));

    // A route the table does not have: 404, and nothing goes anywhere.
    let response = client
        .exchange(&request("GET", &rig.path("nope", "/v1/models"), &["Host: evil.example"], b""))
        .await
        .unwrap();
    assert!(response.head.status == 404 && is_tap_error(&response), "{response:?}");
    assert_eq!(upstream.accepted(), 1);
}

#[tokio::test]
async fn tap_forwards_requests_unchanged() {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    // A route with a base path, as a gateway's would be.
    let mut rig = Rig::start(&[("r", format!("{}/base/v1", upstream.url()))]);
    let body = json!({
        "model": "claude-test-1", "max_tokens": 64, "stream": false,
        "system": [{"type": "text", "text": "You are a test."}],
        "messages": [{"role": "user", "content": "Héllo, \"world\" \u{1F600}"}],
    })
    .to_string();
    let headers: &[(&str, &[&str])] = &[
        ("x-api-key", &["sk-ant-test-key"]),
        ("authorization", &["Bearer oat-test-token"]),
        ("anthropic-version", &["2023-06-01"]),
        ("anthropic-beta", &["one-2025-01-01", "two-2025-02-02"]),
        ("x-claude-code-session-id", &["sess-42"]),
        ("x-custom-thing", &["Mixed Case, value; q=1"]),
        ("content-type", &["application/json"]),
        ("user-agent", &["test-agent/1.0"]),
    ];
    let lines: Vec<String> = headers
        .iter()
        .flat_map(|(name, values)| values.iter().map(move |v| format!("{name}: {v}")))
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let target = rig.path("r", "/messages?beta=true&trace=a%2Fb");
    let mut client = rig.client().await;
    client.send(&request("POST", &target, &lines, body.as_bytes())).await.unwrap();

    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");
    let seen = &arrival.request;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.target, "/base/v1/messages?beta=true&trace=a%2Fb");
    for (name, values) in headers {
        assert_eq!(seen.header_all(name), *values, "header {name} changed: {}", seen.head);
    }
    assert_eq!(seen.body, body.as_bytes(), "the body changed");

    let reply = json!({
        "id": "msg_fwd_1", "type": "message", "role": "assistant", "model": "claude-test-1",
        "content": [{"type": "text", "text": "Hi."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 11, "cache_read_input_tokens": 300, "output_tokens": 4},
    })
    .to_string();
    let answer = response_with_body(
        200,
        &["content-type: application/json", "request-id: req_fwd_1", "x-upstream-thing: kept"],
        reply.as_bytes(),
    );
    arrival.stream.write_all(&answer).await.unwrap();
    let response = client.response().await.unwrap();
    assert_eq!(response.head.status, 200);
    assert_eq!(response.body, reply.as_bytes(), "the response body changed");
    assert_eq!(response.head.header("request-id"), Some("req_fwd_1"));
    assert_eq!(response.head.header("x-upstream-thing"), Some("kept"));

    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_fwd_1"));
    assert!(call.complete && !call.estimated, "{call:#?}");
    assert_eq!((call.record.input, call.record.cache_read, call.record.output), (311, 300, 4));
    assert_eq!(call.request.model.as_deref(), Some("claude-test-1"));
    assert_eq!(call.session_header.as_deref(), Some("sess-42"));
    assert_eq!(&call.body[..], body.as_bytes());
}

#[tokio::test]
async fn tap_answers_502_when_the_upstream_cannot_be_reached_and_counts_nothing() {
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    // A port nothing listens on.
    let down = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap();
    let mut hangup = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[
        ("down", format!("http://{down}")),
        ("hangup", hangup.url()),
        ("mock", mock.url()),
    ]);
    let mut client = rig.client().await;

    let response =
        client.exchange(&model_call(&rig.path("down", "/v1/messages"), true)).await.unwrap();
    assert_eq!(response.head.status, 502, "{}", response.text());
    assert!(is_tap_error(&response), "{}", response.text());
    assert!(response.text().contains("could not be reached"), "{}", response.text());
    assert_eq!(response.head.header("content-type"), Some("application/json"));
    expect_next_is_marker(&mut rig, &mut client, &mock, "a call to an upstream that is down").await;

    // An upstream that takes the request and hangs up without a word.
    client.send(&model_call(&rig.path("hangup", "/v1/messages"), true)).await.unwrap();
    drop(hangup.arrival().await.expect("the request reached the upstream"));
    let response = client.response().await.unwrap();
    assert_eq!(response.head.status, 502, "{}", response.text());
    assert!(is_tap_error(&response) && response.text().contains("could not be reached"));
    expect_next_is_marker(&mut rig, &mut client, &mock, "a call the upstream hung up on").await;
}

#[tokio::test]
async fn tap_streams_sse_as_the_upstream_sends_it() {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[("r", upstream.url())]);
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");

    let first = message_start("msg_sse_1", 31, 2000, 500, 1);
    let rest = stream_rest("Hello there.", 77);
    let whole: String = std::iter::once(first.clone()).chain(rest.iter().cloned()).collect();
    let first_len = first.len();
    let (go, held) = tokio::sync::oneshot::channel::<()>();
    let head = response_head(200, &["content-type: text/event-stream", "connection: close"]);
    let sender = tokio::spawn(async move {
        let stream = &mut arrival.stream;
        stream.write_all(&head).await?;
        stream.write_all(first.as_bytes()).await?;
        // The rest only once the client has the first event: a tap that buffers never gets it.
        if held.await.is_err() {
            return Ok(());
        }
        for event in rest {
            stream.write_all(event.as_bytes()).await?;
        }
        stream.shutdown().await
    });

    let head = client.head().await.expect("the response head");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    let mut got = Vec::new();
    while got.len() < first_len {
        match client.piece().await {
            Ok(Some(piece)) => got.extend(piece),
            other => panic!(
                "the first event did not reach the client while the upstream held the rest \
                 (the tap buffers?): {other:?}"
            ),
        }
    }
    assert_eq!(got, &whole.as_bytes()[..first_len], "more than the upstream had sent");
    go.send(()).unwrap();
    while let Some(piece) = client.piece().await.expect("the rest of the stream") {
        got.extend(piece);
    }
    assert_eq!(String::from_utf8_lossy(&got), whole, "the stream changed on its way");
    sender.await.unwrap().expect("the upstream wrote its stream");

    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_sse_1"));
    assert!(call.complete, "{call:#?}");
    let r = &call.record;
    assert_eq!((r.input, r.cache_read, r.cache_write_5m, r.output), (2531, 2000, 500, 77));
}

#[tokio::test]
async fn tap_passes_compressed_bodies_through_and_reads_a_decoded_copy() {
    use std::io::Write as _;
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[("r", upstream.url())]);
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");

    let plain: String = std::iter::once(message_start("msg_gz_1", 12, 4096, 0, 1))
        .chain(stream_rest(&"All compressed. ".repeat(40), 123))
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let length = format!("content-length: {}", gz.len());
    let head =
        response_head(200, &["content-type: text/event-stream", "content-encoding: gzip", &length]);
    arrival.stream.write_all(&head).await.unwrap();
    // In two pieces, split inside the compressed stream.
    let (a, b) = gz.split_at(gz.len() / 2);
    arrival.stream.write_all(a).await.unwrap();
    arrival.stream.flush().await.unwrap();
    arrival.stream.write_all(b).await.unwrap();

    let response = client.response().await.unwrap();
    assert_eq!(response.head.status, 200);
    assert_eq!(response.head.header("content-encoding"), Some("gzip"));
    assert!(!response.cut);
    assert_eq!(response.body, gz, "the compressed body did not reach the client as sent");
    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_gz_1"));
    assert!(call.complete, "{call:#?}");
    assert_eq!((call.record.input, call.record.cache_read, call.record.output), (4108, 4096, 123));
}

#[tokio::test]
async fn tap_counts_what_a_cut_stream_billed_and_nothing_for_an_error() {
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[("r", upstream.url()), ("mock", mock.url())]);

    // A 500 without usage: passed on as it is, counted as nothing.
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");
    let error =
        br#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;
    // `connection: close`: the upstream reads one request per connection.
    let headers = ["content-type: application/json", "x-should-retry: true", "connection: close"];
    let answer = response_with_body(500, &headers, error);
    arrival.stream.write_all(&answer).await.unwrap();
    let response = client.response().await.unwrap();
    assert_eq!(response.head.status, 500);
    assert_eq!(response.body, error.as_slice(), "the error body changed");
    assert_eq!(response.head.header("x-should-retry"), Some("true"));
    assert!(!is_tap_error(&response));
    expect_next_is_marker(&mut rig, &mut client, &mock, "a 500 without usage").await;

    // A stream cut after message_start: what message_start billed counts, marked incomplete,
    // and the client sees the stream break off rather than end.
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");
    let sent = message_start("msg_cut_1", 1234, 0, 0, 1) + &stream_rest("Cut", 9)[1..3].concat();
    let head =
        response_head(200, &["content-type: text/event-stream", "transfer-encoding: chunked"]);
    arrival.stream.write_all(&head).await.unwrap();
    let chunk = format!("{:x}\r\n{sent}\r\n", sent.len());
    arrival.stream.write_all(chunk.as_bytes()).await.unwrap();
    let head = client.head().await.unwrap();
    assert_eq!(head.status, 200);
    let mut got = Vec::new();
    while got.len() < sent.len() {
        got.extend(client.piece().await.unwrap().expect("the stream went on"));
    }
    drop(arrival);
    let end = loop {
        match client.piece().await {
            Ok(Some(piece)) => got.extend(piece),
            other => break other,
        }
    };
    assert!(end.is_err(), "the client saw a clean end of a stream that was cut: {end:?}");
    assert_eq!(got, sent.as_bytes());
    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_cut_1"));
    assert!(!call.complete, "a cut stream's usage is not final: {call:#?}");
    assert_eq!((call.record.input, call.record.output), (1234, 1), "{call:#?}");
}

#[tokio::test]
async fn tap_passes_calls_that_are_not_model_calls_and_counts_none() {
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let mock_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, mock.port()));
    let mut rig = Rig::start(&[("mock", mock.url())]);
    let count =
        json!({"model": "claude-test-1", "messages": [{"role": "user", "content": "Count me."}]})
            .to_string();
    let cases = [
        ("token counting", "POST", "/v1/messages/count_tokens", count.as_bytes()),
        ("the model list", "GET", "/v1/models", b"".as_slice()),
    ];
    let mut client = rig.client().await;
    for (what, method, path, body) in cases {
        let headers = ["content-type: application/json", "x-api-key: sk-ant-test-key"];
        let through = client
            .exchange(&request(method, &rig.path("mock", path), &headers, body))
            .await
            .unwrap();
        let mut direct = RawClient::connect(mock_addr).await.unwrap();
        let direct = direct.exchange(&request(method, path, &headers, body)).await.unwrap();
        assert_eq!(through.head.status, 200, "{what}: {}", through.text());
        assert_eq!(through.head.status, direct.head.status, "{what}");
        assert_eq!(through.text(), direct.text(), "{what}: the response changed");
        assert_eq!(through.head.header("content-type"), direct.head.header("content-type"));
    }
    let kinds: Vec<CallKind> = mock.calls().iter().map(|c| c.kind).collect();
    use CallKind::{CountTokens, Listing};
    assert_eq!(kinds, [CountTokens, CountTokens, Listing, Listing]);
    expect_next_is_marker(&mut rig, &mut client, &mock, "token counting or the model list").await;
}

#[tokio::test]
async fn tap_does_not_count_usage_in_responses_to_other_calls() {
    // A body with usage in every API's shape: any reader would count it, so only the tap's
    // telling model calls from the rest keeps these calls out.
    let stated = json!({
        "id": "not_a_model_call", "object": "response", "type": "message", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "x"}}],
        "usage": {"input_tokens": 500, "output_tokens": 20, "prompt_tokens": 500,
                  "completion_tokens": 20, "total_tokens": 520},
        "usageMetadata": {"promptTokenCount": 500, "candidatesTokenCount": 20},
    })
    .to_string();
    let headers = ["content-type: application/json", "connection: close"];
    let answer = response_with_body(200, &headers, stated.as_bytes());
    let mut upstream = RawUpstream::answering(answer).await.expect("an upstream");
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let mut rig = Rig::start(&[("r", upstream.url()), ("mock", mock.url())]);
    let body = br#"{"model":"m","input":"x","messages":[{"role":"user","content":"x"}]}"#;
    let cases = [
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/v1/responses/input_tokens"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1beta/models/gemini-2.5-pro:countTokens"),
        ("GET", "/v1/responses/resp_123"),
        ("GET", "/v1/messages"),
        ("POST", "/v1/threads/thread_1/messages"),
    ];
    let mut client = rig.client().await;
    for (method, path) in cases {
        let with_body: &[u8] = if method == "POST" { body } else { b"" };
        let request = request(method, &rig.path("r", path), &[], with_body);
        let response = client.exchange(&request).await.unwrap();
        assert_eq!(response.head.status, 200, "{method} {path}: {}", response.text());
        assert_eq!(response.text(), stated, "{method} {path}: the response changed");
        let arrival = upstream.arrival().await.expect("the request reached the upstream");
        assert_eq!(arrival.request.target, path);
    }
    expect_next_is_marker(&mut rig, &mut client, &mock, "a call that is not a model call").await;
}

#[tokio::test]
async fn tap_reads_subscription_windows_from_headers_and_quota_answers() {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[("r", upstream.url())]);
    let mut client = rig.client().await;

    // A model call whose response states Anthropic's unified 5-hour window.
    client.send(&model_call(&rig.path("r", "/v1/messages"), false)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");
    let body = json!({"id": "msg_l", "type": "message", "model": "claude-test-1",
                      "usage": {"input_tokens": 5, "output_tokens": 1}})
    .to_string();
    let mut reply = response_head(
        200,
        &[
            "content-type: application/json",
            "anthropic-ratelimit-unified-5h-utilization: 0.42",
            "anthropic-ratelimit-unified-5h-reset: 1795701600",
            "connection: close",
            &format!("content-length: {}", body.len()),
        ],
    );
    reply.extend_from_slice(body.as_bytes());
    arrival.stream.write_all(&reply).await.unwrap();
    let got = client.response().await.expect("the response");
    assert_eq!(got.head.header("anthropic-ratelimit-unified-5h-utilization"), Some("0.42"));
    let limits = rig.next_limits().await.limits;
    assert_eq!((limits[0].window.as_str(), limits[0].used_percent), ("five_hour", 42.0));
    assert_eq!(limits[0].resets_at, Some(1_795_701_600));
    rig.next_call().await;

    // Code Assist's quota answer: not a model call, read whole, passed on unchanged.
    let quota = json!({"buckets": [{"modelId": "gemini-2.5-pro", "remainingFraction": 0.3,
                                    "remainingAmount": "30", "resetTime": "2026-11-27T00:00:00Z"}]})
    .to_string();
    let target = rig.path("r", "/v1internal:retrieveUserQuota");
    let mut client = rig.client().await;
    client
        .send(&request(
            "POST",
            &target,
            &["content-type: application/json"],
            b"{\"project\":\"p\"}",
        ))
        .await
        .unwrap();
    let mut arrival = upstream.arrival().await.expect("the quota request reached the upstream");
    let mut reply = response_head(
        200,
        &["content-type: application/json", &format!("content-length: {}", quota.len())],
    );
    reply.extend_from_slice(quota.as_bytes());
    arrival.stream.write_all(&reply).await.unwrap();
    let got = client.response().await.expect("the quota response");
    assert_eq!(got.text(), quota, "the answer changed on its way");
    let limits = rig.next_limits().await.limits;
    assert_eq!(
        (limits[0].provider.as_str(), limits[0].window.as_str()),
        ("google", "gemini-2.5-pro")
    );
    assert!((limits[0].used_percent - 70.0).abs() < 1e-9, "{limits:?}");
}

#[tokio::test]
async fn tap_counts_what_was_billed_before_the_agent_aborted() {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let mut rig = Rig::start(&[("r", upstream.url())]);

    // The agent hangs up after message_start (a cancelled turn): the input it stated counts,
    // marked incomplete.
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the request reached the upstream");
    let first = message_start("msg_abort_1", 4321, 1000, 0, 1);
    let head =
        response_head(200, &["content-type: text/event-stream", "transfer-encoding: chunked"]);
    arrival.stream.write_all(&head).await.unwrap();
    let chunk = format!("{:x}\r\n{first}\r\n", first.len());
    arrival.stream.write_all(chunk.as_bytes()).await.unwrap();
    assert_eq!(client.head().await.unwrap().status, 200);
    let mut got = Vec::new();
    while got.len() < first.len() {
        got.extend(client.piece().await.unwrap().expect("the stream went on"));
    }
    drop(client);
    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_abort_1"));
    assert!(!call.complete, "an aborted call's usage is not final: {call:#?}");
    assert_eq!((call.record.input, call.record.cache_read), (5321, 1000), "{call:#?}");

    // Aborted before any usage arrived: nothing is counted. The next call the tap reports is
    // the one that follows.
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let mut arrival = upstream.arrival().await.expect("the second request reached the upstream");
    arrival.stream.write_all(&head_again()).await.unwrap();
    assert_eq!(client.head().await.unwrap().status, 200);
    drop(client);
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), false)).await.unwrap();
    let mut marker = upstream.arrival().await.expect("the marker reached the upstream");
    let body = json!({"id": "msg_after_abort", "type": "message", "model": "claude-test-1",
                      "usage": {"input_tokens": 3, "output_tokens": 1}})
    .to_string();
    let mut reply = response_head(
        200,
        &["content-type: application/json", &format!("content-length: {}", body.len())],
    );
    reply.extend_from_slice(body.as_bytes());
    marker.stream.write_all(&reply).await.unwrap();
    client.response().await.expect("the marker's response");
    let next = rig.next_call().await;
    assert_eq!(next.id.as_deref(), Some("msg_after_abort"), "a call without usage was counted");
    drop(arrival);
}

fn head_again() -> Vec<u8> {
    response_head(200, &["content-type: text/event-stream", "transfer-encoding: chunked"])
}
