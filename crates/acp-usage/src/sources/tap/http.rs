//! What the tap's HTTP side shares: the state every connection holds ([`State`]), the body
//! type, the client to the upstreams, and the helpers for headers and the tap's own answers.
//! `proxy.rs`, `call.rs`, `ws.rs` and `ws_usage.rs` build on it; it names none of them, so the
//! tap's modules form no loop.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

use super::flights::Flights;
use super::limits;
use super::point::Alternate;
use super::{Route, TapCall};

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(super) type Body = BoxBody<Bytes, BoxError>;

/// What every connection shares.
#[derive(Debug)]
pub(super) struct State {
    pub secret: String,
    pub routes: Vec<Route>,
    pub session_headers: Vec<String>,
    pub alternates: Vec<Alternate>,
    /// The notices a program the agent starts may ask for, each with whether it was said.
    pub notices: Vec<(super::Notice, std::sync::atomic::AtomicBool)>,
    pub client: Upstream,
    pub calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
    /// Subscription windows read from responses.
    pub limits: limits::Sender,
    pub notify: std::sync::Arc<tokio::sync::Notify>,
    /// The model calls under way.
    pub flights: Flights,
}

/// Where the route table sends a request: what `proxy.rs` reads from its path and hands to the
/// HTTP forwarding or to `ws.rs`'s tunnel, which both name the route and upstream in log lines
/// and error bodies.
#[derive(Debug)]
pub(super) struct Routed<'a> {
    /// The route's name, from the path.
    pub route: &'a str,
    /// The upstream's base URL: the route's, or an alternate's that a request header selects.
    pub upstream_base: &'a str,
    /// The path after the route, with its leading slash.
    pub rest: String,
    /// The upstream URL: base, rest and the request's query.
    pub url: String,
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

/// The head of the agent's answer: the upstream's status and its forwardable headers, whose
/// subscription windows are read on the way.
pub(super) fn answer_head(
    state: &State,
    session_header: Option<String>,
    upstream: &reqwest::Response,
) -> hyper::http::response::Builder {
    limits::observe_headers(&state.limits, &state.notify, session_header, upstream.headers());
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
