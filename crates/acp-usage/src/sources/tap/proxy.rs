//! The tap's HTTP side: a hyper server on 127.0.0.1 that checks the secret, picks the route and
//! forwards the request unchanged to the upstream through reqwest (rustls with the system's
//! roots, `SSL_CERT_FILE`/`SSL_CERT_DIR`, `HTTPS_PROXY`/`NO_PROXY`). A WebSocket upgrade goes
//! to the same upstream through `ws.rs`'s tunnel.
//!
//! It is no open proxy: a request must start with the exact secret, the upstream comes from the
//! route table and never from the request (absolute-form targets and CONNECT are refused, the
//! `Host` header is dropped), and nothing of a request but its method, route and path (no query,
//! which may hold a key) reaches a log line.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use acp_usage_core::api::{self, RequestInfo};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::decode::Decoder;
use super::watch::{Pending, Watched};
use super::{Route, TapCall, now_ms, ws};

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(super) type Body = BoxBody<Bytes, BoxError>;

/// What every connection shares.
#[derive(Debug)]
pub(super) struct State {
    pub secret: String,
    pub routes: Vec<Route>,
    pub session_headers: Vec<String>,
    pub alternates: Vec<super::Alternate>,
    pub client: Upstream,
    pub calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
    /// Subscription windows read from responses.
    pub limits: tokio::sync::mpsc::UnboundedSender<super::limits::Observed>,
    pub notify: std::sync::Arc<tokio::sync::Notify>,
    /// The model calls under way.
    pub flights: super::flights::Flights,
}

/// The client to the upstreams, made when the first request comes: reading the system's root
/// certificates takes 5 ms of CPU, which the agent starting beside the relay has a better use
/// for, and which the first model call (seconds) does not notice. Whether it can be made is told
/// before the agent is pointed at the tap (`roots::check`).
#[derive(Debug, Clone, Default)]
pub(super) struct Upstream(Arc<tokio::sync::OnceCell<Option<reqwest::Client>>>);

impl Upstream {
    /// A client made already.
    #[cfg(test)]
    pub(super) fn ready(client: reqwest::Client) -> Upstream {
        Upstream(Arc::new(tokio::sync::OnceCell::new_with(Some(Some(client)))))
    }

    /// The client, made on the first call (on a blocking thread); `None` when it could not be.
    pub(super) async fn get(&self) -> Option<reqwest::Client> {
        let made = self.0.get_or_init(|| async {
            let made = tokio::task::spawn_blocking(|| {
                // Without the system's roots HTTPS upstreams fail their handshake; plain HTTP
                // ones (a local gateway) still work.
                upstream_client(true).or_else(|e| {
                    tracing::warn!("tap: cannot load the system's root certificates ({e:#}); HTTPS upstreams will fail");
                    upstream_client(false)
                })
            });
            match made.await {
                Ok(Ok(client)) => Some(client),
                Ok(Err(e)) => {
                    tracing::error!("the tap has no HTTP client ({e:#}); its calls fail");
                    None
                }
                Err(e) => {
                    tracing::error!("the tap has no HTTP client ({e}); its calls fail");
                    None
                }
            }
        });
        made.await.clone()
    }
}

/// The client to the upstreams: no redirects followed (the agent sees them as it would),
/// proxies from the environment, the system's roots (unless `native_roots` is false).
pub(super) fn upstream_client(native_roots: bool) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_native_certs(native_roots)
        .redirect(reqwest::redirect::Policy::none())
        // Bodies pass as the upstream sent them, whatever features a build turns on.
        .no_gzip()
        .no_brotli()
        .no_deflate()
        .no_zstd()
        .connect_timeout(Duration::from_secs(30))
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(60))
        .build()?)
}

/// Accepts connections until the process ends.
pub(super) async fn serve(listener: tokio::net::TcpListener, state: Arc<State>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!("tap: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                // A WebSocket's connection is handed to `ws.rs` after its 101.
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!("tap: connection ended: {e}");
            }
        });
    }
}

/// A response of the tap's own (the request was refused or the upstream could not be reached).
pub(super) fn own_response(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "acp_usage_tap_error", "message": message},
    });
    let mut resp = Response::new(
        Full::new(Bytes::from(body.to_string())).map_err(|never| match never {}).boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Compares without stopping at the first differing byte, so the time taken says nothing of
/// how much of a guess was right.
fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given.bytes().zip(secret.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Splits `/<secret>/<route>/<rest>` into the route and the rest (with its leading slash).
fn split_path<'a>(path: &'a str, secret: &str) -> Option<(&'a str, &'a str)> {
    let path = path.strip_prefix('/')?;
    let (given, after) = path.split_once('/').unwrap_or((path, ""));
    if !same_secret(given, secret) {
        return None;
    }
    let (route, rest) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, ""),
    };
    Some((route, rest))
}

/// Hop-by-hop headers (RFC 9110 section 7.6.1) and `Host`: never forwarded either way.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

pub(super) fn forwardable(headers: &HeaderMap) -> HeaderMap {
    // Headers named in `Connection` are hop-by-hop too.
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !hop_by_hop(name) && !listed.iter().any(|l| l == name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(match forward(state, req).await {
        Ok(resp) => resp,
        Err(resp) => resp,
    })
}

async fn forward(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Response<Body>> {
    // Under way from the moment its head is read: the relay's last count waits for a model
    // call's report (the rest are let go when their answer is handed on).
    let flight = state.flights.start();
    // No open proxy: only origin-form targets under the secret are served.
    if req.method() == Method::CONNECT {
        return Err(own_response(StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not served"));
    }
    if req.uri().scheme().is_some() || req.uri().authority().is_some() {
        return Err(own_response(StatusCode::BAD_REQUEST, "absolute-form targets are not served"));
    }
    let path = req.uri().path().to_owned();
    let Some((route_name, rest)) = split_path(&path, &state.secret) else {
        tracing::warn!(method = %req.method(), "tap: a request without the secret was refused");
        return Err(own_response(StatusCode::FORBIDDEN, "not a path this tap serves"));
    };
    let Some(route) = state.routes.iter().find(|r| r.name == route_name) else {
        return Err(own_response(StatusCode::NOT_FOUND, "no such route"));
    };
    let upstream_base = state
        .alternates
        .iter()
        .find(|a| a.route == route.name && req.headers().contains_key(a.header.as_str()))
        .map_or(route.upstream.as_str(), |a| a.upstream.as_str());
    let rest = rest.to_owned();
    let query = req.uri().query().map(str::to_owned);
    let url = match &query {
        Some(q) => format!("{upstream_base}{rest}?{q}"),
        None => format!("{upstream_base}{rest}"),
    };
    // Codex's built-in provider talks over a WebSocket: tunnelled to the same upstream.
    if ws::is_websocket(req.headers()) {
        let upstream_base = upstream_base.to_owned();
        return ws::tunnel(state.clone(), req, route_name, &upstream_base, &rest, &url).await;
    }
    // Any other protocol upgrade is declined with 426 (the client then stays on HTTP).
    if req.headers().get(header::UPGRADE).is_some() {
        tracing::debug!(route = route_name, "tap: a protocol upgrade declined (426)");
        return Err(own_response(
            StatusCode::UPGRADE_REQUIRED,
            "the tap tunnels WebSockets and plain HTTP only",
        ));
    }
    let method = req.method().clone();
    let api = api::classify(method.as_str(), &rest);
    tracing::debug!(%method, route = route_name, path = %rest, model_call = api.is_some(), "tap: request");

    let (parts, body) = req.into_parts();
    let session_header = session_header(&state, &parts.headers);
    // The request body is read whole before it is forwarded: requests are sent at once and are
    // small next to the response's time, and attribution reads it.
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            tracing::debug!("tap: the agent's request body broke off: {e}");
            return Err(own_response(StatusCode::BAD_REQUEST, "the request body broke off"));
        }
    };
    let started_ms = now_ms();
    let Some(client) = state.client.get().await else {
        return Err(own_response(StatusCode::BAD_GATEWAY, "acp-usage's tap has no HTTP client"));
    };
    let outgoing =
        client.request(method, &url).headers(forwardable(&parts.headers)).body(body.clone());
    if let Some(api) = api {
        // A compressed request (Codex can send zstd) is read decoded; it goes out as it came.
        let plain = match header_str(&parts.headers, header::CONTENT_ENCODING) {
            Some(enc) => {
                let mut d = Decoder::for_encoding(Some(&enc));
                let mut plain = d.push(&body);
                plain.extend(d.finish());
                Bytes::from(plain)
            }
            None => body,
        };
        let request = RequestInfo::read(api, &rest, &plain);
        let pending = Pending {
            api,
            request,
            body: plain,
            session_header,
            started_ms,
            warmup: false,
            status: 0,
            content_type: None,
            encoding: None,
            calls: state.calls.clone(),
            limits: state.limits.clone(),
            notify: state.notify.clone(),
        };
        return Ok(super::call::forward(super::call::Outgoing {
            state: state.clone(),
            request: outgoing,
            pending,
            route: route_name.to_owned(),
            upstream_base: upstream_base.to_owned(),
            flight,
        })
        .await);
    }

    // Not a model call: nothing is billed, so it stays on the agent's connection.
    let upstream = match outgoing.send().await {
        Ok(resp) => resp,
        Err(e) => return Err(send_failed(route_name, upstream_base, &e)),
    };
    let resp = answer_head(&state, session_header.clone(), &upstream);
    let quota = super::limits::is_quota(&rest)
        .then(|| super::limits::QuotaRead::new(&state, session_header));
    Ok(streamed(resp, Watched::new(upstream.bytes_stream(), quota)))
}

/// The head of the agent's answer: the upstream's status and its forwardable headers, whose
/// subscription windows are read on the way.
pub(super) fn answer_head(
    state: &State,
    session_header: Option<String>,
    upstream: &reqwest::Response,
) -> hyper::http::response::Builder {
    super::limits::observe_headers(state, session_header, upstream.headers());
    let mut resp = Response::builder().status(upstream.status()).version(hyper::Version::HTTP_11);
    if let Some(h) = resp.headers_mut() {
        *h = forwardable(upstream.headers());
    }
    resp
}

/// The answer when sending to the upstream failed: [`unreachable`], a 504 for a timeout.
pub(super) fn send_failed(route: &str, upstream_base: &str, e: &reqwest::Error) -> Response<Body> {
    let status = if e.is_timeout() { StatusCode::GATEWAY_TIMEOUT } else { StatusCode::BAD_GATEWAY };
    unreachable(route, upstream_base, &root_cause(e), status)
}

/// The response with `stream` as its body, chunks passed on as they come.
fn streamed<S>(resp: hyper::http::response::Builder, stream: S) -> Response<Body>
where
    S: futures_util::Stream<Item = Result<Bytes, reqwest::Error>> + Send + Sync + 'static,
{
    let body = StreamBody::new(futures_util::StreamExt::map(stream, |chunk| {
        chunk.map(Frame::data).map_err(|e| Box::new(e) as BoxError)
    }));
    resp.body(BodyExt::boxed(body)).unwrap_or_else(|_| {
        own_response(StatusCode::BAD_GATEWAY, "the upstream's response was malformed")
    })
}

/// The session id a header of the request names (the agent's profile says which headers).
pub(super) fn session_header(state: &State, headers: &HeaderMap) -> Option<String> {
    state
        .session_headers
        .iter()
        .find_map(|h| headers.get(h.as_str()))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The answer when the upstream could not be reached (`status`: 502, or 504 for a timeout): as
/// close as the tap can come to what the agent would have seen, no response.
pub(super) fn unreachable(
    route: &str,
    upstream_base: &str,
    cause: &str,
    status: StatusCode,
) -> Response<Body> {
    tracing::warn!(route, "tap: the upstream could not be reached: {cause}");
    let message = format!(
        "acp-usage tap: the upstream {} could not be reached: {cause}",
        without_userinfo(upstream_base)
    );
    own_response(status, &message)
}

/// A URL without `user:password@`: error bodies reach the agent, which may show or log them.
fn without_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

pub(super) fn header_str(headers: &HeaderMap, name: HeaderName) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// The innermost error's text: reqwest's outer message hides what went wrong.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_secret_opens_a_route() {
        let s = "00ff";
        assert_eq!(
            split_path("/00ff/anthropic/v1/messages", s),
            Some(("anthropic", "/v1/messages"))
        );
        assert_eq!(split_path("/00ff/openai", s), Some(("openai", "")));
        assert_eq!(split_path("/00fe/anthropic/v1/messages", s), None);
        assert_eq!(split_path("/00ff0/anthropic", s), None);
        assert_eq!(split_path("/anthropic/v1/messages", s), None);
        assert_eq!(split_path("//00ff/anthropic", s), None);
        assert_eq!(split_path("", s), None);
    }

    #[test]
    fn error_bodies_name_the_upstream_without_credentials() {
        assert_eq!(without_userinfo("https://u:p@gw.example/v1"), "https://gw.example/v1");
        assert_eq!(without_userinfo("http://127.0.0.1:9/a@b"), "http://127.0.0.1:9/a@b");
        assert_eq!(without_userinfo("https://api.anthropic.com"), "https://api.anthropic.com");
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("127.0.0.1:1"));
        h.insert("connection", HeaderValue::from_static("keep-alive, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("x-api-key", HeaderValue::from_static("k"));
        h.append("anthropic-beta", HeaderValue::from_static("a"));
        h.append("anthropic-beta", HeaderValue::from_static("b"));
        let out = forwardable(&h);
        assert!(out.get("host").is_none() && out.get("x-private").is_none());
        assert_eq!(out.get("x-api-key").unwrap(), "k");
        assert_eq!(out.get_all("anthropic-beta").iter().count(), 2);
    }
}
