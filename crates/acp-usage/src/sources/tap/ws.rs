//! The tap's WebSocket tunnel (Codex's Responses transport): the upgrade request goes to the
//! route's upstream with its headers unchanged (but `Host`), the upstream's answer comes back
//! as it is, and after a 101 the bytes are copied both ways unchanged, each chunk written as
//! soon as it is read, while `ws_usage.rs` reads the usage from a copy.
//!
//! Without the tunnel the tap would have to decline the upgrade (426), and Codex would then
//! talk HTTP for the whole session: acp-usage would change how the agent talks to its
//! provider. The upstream connection is made here rather than through reqwest (which does not
//! hand over an upgraded connection): plain TCP, or TLS with the roots reqwest uses
//! (`rustls-native-certs`: the system's, `SSL_CERT_FILE`, `SSL_CERT_DIR`). An upstream that an
//! `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` of the environment would apply to is not tunnelled
//! through that proxy (no CONNECT here): such an upgrade is still declined with 426, and the
//! agent uses HTTP through reqwest, which honours the proxy.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::rustls;

use super::frames::Deflate;
use super::http::{self, Body, BoxError, Routed, State, own_response};
use super::limits;
use super::ws_usage::Observer;

/// How long connecting to the upstream may take (reqwest's `connect_timeout` on HTTP).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The copy buffer: a chunk is written on as soon as it is read, whatever its size.
const CHUNK: usize = 16 * 1024;

/// Whether a request asks to upgrade to a WebSocket.
pub(super) fn is_websocket(headers: &HeaderMap) -> bool {
    headers.get_all(header::UPGRADE).iter().any(|value| {
        value
            .to_str()
            .is_ok_and(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case("websocket")))
    })
}

/// Where the upgrade goes: the route's upstream URL with the request's path and query.
struct Target {
    https: bool,
    /// As in the URL (an IPv6 address in brackets).
    host: String,
    port: u16,
    /// `Host` for the upstream: the authority without userinfo.
    authority: String,
    path_and_query: String,
}

impl Target {
    fn parse(url: &str) -> Option<Target> {
        let uri: Uri = url.parse().ok()?;
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let authority = uri.authority()?;
        let host = authority.host().to_owned();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host_header = match authority.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
        Some(Target { https, host, port, authority: host_header, path_and_query })
    }
}

/// Forwards an upgrade request (see the module documentation) to the upstream URL the request
/// maps to, as for HTTP (`to.url`).
pub(super) async fn tunnel(
    state: Arc<State>,
    mut req: Request<Incoming>,
    to: &Routed<'_>,
) -> Result<Response<Body>, Response<Body>> {
    let route = to.route;
    let target = upgrade_target(to)?;
    tracing::debug!(route, path = %to.rest, "tap: a WebSocket upgrade");
    let session_header = http::session_header(&state, req.headers());
    state.limits.request(req.headers());
    let agent_side = hyper::upgrade::on(&mut req);

    let mut sender = open(&target, to).await?;
    let upstream_req = upgrade_request(&req, &target)?;
    let unreachable = |e: hyper::Error| {
        http::unreachable(route, to.upstream_base, &e.to_string(), StatusCode::BAD_GATEWAY)
    };
    let mut upstream = sender.send_request(upstream_req).await.map_err(unreachable)?;

    if upstream.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(refused(route, upstream));
    }

    limits::observe_headers(
        &state.limits,
        &state.notify,
        session_header.clone(),
        upstream.headers(),
    );
    let extensions = upstream.headers().get_all(header::SEC_WEBSOCKET_EXTENSIONS);
    let observer = match Deflate::negotiated(extensions.iter().filter_map(|v| v.to_str().ok())) {
        Ok(deflate) => Observer::new(state.clone(), route.to_owned(), session_header, deflate),
        Err(what) => {
            tracing::debug!(route, "tap: a WebSocket with {what}: its usage is not read");
            Observer::stopped(state.clone(), route.to_owned())
        }
    };
    let mut resp = Response::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *resp.headers_mut() = upstream.headers().clone();
    let upstream_side = hyper::upgrade::on(&mut upstream);
    // Under way until the tunnel's last call is reported: the relay's last count waits for it.
    let flight = state.flights.start();
    tokio::spawn(async move {
        match tokio::try_join!(agent_side, upstream_side) {
            Ok((agent, upstream)) => {
                pump(TokioIo::new(agent), TokioIo::new(upstream), observer).await
            }
            Err(e) => tracing::debug!("tap: a WebSocket upgrade did not complete: {e}"),
        }
        drop(flight);
    });
    Ok(resp)
}

/// The upstream the upgrade goes to, or the refusal: a URL the tap cannot connect to, or one an
/// environment proxy would apply to (the tap makes no CONNECT; declined, the agent uses HTTP,
/// through reqwest, which honours the proxy).
#[allow(
    clippy::result_large_err,
    reason = "the error is the answer the agent gets, as `forward` returns it"
)]
fn upgrade_target(to: &Routed<'_>) -> Result<Target, Response<Body>> {
    let Some(target) = Target::parse(&to.url) else {
        return Err(own_response(StatusCode::BAD_GATEWAY, "the route's upstream is not a URL"));
    };
    if proxied(target.https, &target.host) {
        let route = to.route;
        tracing::debug!(route, "tap: a WebSocket upgrade declined (426): a proxy would apply");
        return Err(own_response(
            StatusCode::UPGRADE_REQUIRED,
            "the tap does not tunnel WebSockets through a proxy",
        ));
    }
    Ok(target)
}

/// An HTTP/1.1 connection to the upstream, its driver spawned (with upgrades, so that the
/// connection can be taken over after a 101); an unreachable upstream's answer otherwise.
async fn open(
    target: &Target,
    to: &Routed<'_>,
) -> Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>, Response<Body>> {
    let stream = match connect(target).await {
        Ok(stream) => stream,
        Err((cause, status)) => {
            return Err(http::unreachable(to.route, to.upstream_base, &cause, status));
        }
    };
    let (sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| {
                http::unreachable(
                    to.route,
                    to.upstream_base,
                    &e.to_string(),
                    StatusCode::BAD_GATEWAY,
                )
            })?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!("tap: a WebSocket's upstream connection ended: {e}");
        }
    });
    Ok(sender)
}

/// The upgrade request as the upstream gets it: the agent's method and headers, the target's
/// path and query, and its own `Host` (the agent's names the tap).
#[allow(
    clippy::result_large_err,
    reason = "the error is the answer the agent gets, as `forward` returns it"
)]
fn upgrade_request(
    req: &Request<Incoming>,
    target: &Target,
) -> Result<Request<Empty<Bytes>>, Response<Body>> {
    let mut upstream_req = Request::builder()
        .method(req.method().clone())
        .uri(target.path_and_query.as_str())
        .version(hyper::Version::HTTP_11)
        .body(Empty::new())
        .map_err(|_| own_response(StatusCode::BAD_REQUEST, "the upgrade request is malformed"))?;
    let headers = upstream_req.headers_mut();
    for (name, value) in req.headers() {
        if name != header::HOST {
            headers.append(name.clone(), value.clone());
        }
    }
    let host = HeaderValue::from_str(&target.authority)
        .map_err(|_| own_response(StatusCode::BAD_GATEWAY, "the route's upstream is not a URL"))?;
    headers.insert(header::HOST, host);
    Ok(upstream_req)
}

/// An upgrade the upstream refused (401, 426, ...): its answer handed on like any other HTTP
/// response.
fn refused(route: &str, upstream: Response<Incoming>) -> Response<Body> {
    tracing::debug!(
        route,
        status = upstream.status().as_u16(),
        "tap: a WebSocket upgrade refused upstream"
    );
    let mut resp = Response::builder().status(upstream.status()).version(hyper::Version::HTTP_11);
    if let Some(h) = resp.headers_mut() {
        *h = http::forwardable(upstream.headers());
    }
    let body = upstream.into_body().map_err(|e| Box::new(e) as BoxError).boxed();
    resp.body(body).unwrap_or_else(|_| {
        own_response(StatusCode::BAD_GATEWAY, "the upstream's response was malformed")
    })
}

/// Copies both ways until both ends have closed (or either breaks), showing every chunk to
/// the observer before it is written on: as on HTTP, a call is reported before the bytes that
/// complete it reach the agent.
async fn pump<A, U>(agent: A, upstream: U, observer: Observer)
where
    A: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    // Both copies run on this one task: the lock is never contended, only shared.
    let observer = Mutex::new(observer);
    let observe =
        |f: &dyn Fn(&mut Observer)| f(&mut observer.lock().unwrap_or_else(|p| p.into_inner()));
    let (mut agent_read, mut agent_write) = tokio::io::split(agent);
    let (mut up_read, mut up_write) = tokio::io::split(upstream);
    let to_upstream =
        copy(&mut agent_read, &mut up_write, |chunk| observe(&|o| o.client_bytes(chunk)));
    let to_agent =
        copy(&mut up_read, &mut agent_write, |chunk| observe(&|o| o.server_bytes(chunk)));
    tokio::pin!(to_upstream, to_agent);
    let ended = tokio::select! {
        r = &mut to_upstream => r.and(Ok(true)),
        r = &mut to_agent => r.and(Ok(false)),
    };
    // One side closed cleanly: the other still says what it has to say (a close frame's
    // answer). A broken side ends both.
    let rest = match ended {
        Ok(true) => to_agent.await,
        Ok(false) => to_upstream.await,
        Err(e) => Err(e),
    };
    if let Err(e) = rest {
        tracing::debug!("tap: a WebSocket tunnel broke: {e}");
    }
    observe(&|o| o.closed());
}

/// Copies `from` to `to` chunk by chunk, each flushed at once; shuts `to` down at the end.
async fn copy<R, W>(from: &mut R, to: &mut W, seen: impl Fn(&[u8])) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        seen(&buf[..n]);
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
    }
}

/// The upstream connection: TCP, with TLS for https.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

async fn connect(target: &Target) -> Result<Box<dyn Io>, (String, StatusCode)> {
    let address = format!("{}:{}", target.host, target.port);
    let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address))
        .await
    {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err((e.to_string(), StatusCode::BAD_GATEWAY)),
        Err(_) => return Err(("connecting timed out".to_owned(), StatusCode::GATEWAY_TIMEOUT)),
    };
    let _ = tcp.set_nodelay(true);
    if !target.https {
        return Ok(Box::new(tcp));
    }
    let config = tls_config().map_err(|e| (e, StatusCode::BAD_GATEWAY))?;
    let host = target.host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let name = rustls::pki_types::ServerName::try_from(host)
        .map_err(|e| (e.to_string(), StatusCode::BAD_GATEWAY))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp)).await {
        Ok(Ok(tls)) => Ok(Box::new(tls)),
        Ok(Err(e)) => Err((e.to_string(), StatusCode::BAD_GATEWAY)),
        Err(_) => Err(("the TLS handshake timed out".to_owned(), StatusCode::GATEWAY_TIMEOUT)),
    }
}

/// The TLS client configuration, made once: the roots reqwest's `tls_built_in_native_certs`
/// loads (the system's store; `SSL_CERT_FILE` and `SSL_CERT_DIR` when set), HTTP/1.1 only.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let loaded = rustls_native_certs::load_native_certs();
            for e in &loaded.errors {
                tracing::debug!("tap: a root certificate store could not be read: {e}");
            }
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(loaded.certs);
            if roots.is_empty() {
                return Err("no root certificates were found".to_owned());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}

/// Whether a proxy from the environment would carry a request to `host` (the variables
/// reqwest reads: `HTTPS_PROXY`/`HTTP_PROXY`, `ALL_PROXY`, lowercase too, less `NO_PROXY`).
fn proxied(https: bool, host: &str) -> bool {
    proxied_with(https, host, &|name| std::env::var(name).ok())
}

fn proxied_with(https: bool, host: &str, var: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let scheme = if https { ["HTTPS_PROXY", "https_proxy"] } else { ["HTTP_PROXY", "http_proxy"] };
    let proxy = scheme.iter().chain(&["ALL_PROXY", "all_proxy"]).find_map(|name| set(name));
    if proxy.is_none() {
        return false;
    }
    let no_proxy = set("NO_PROXY").or_else(|| set("no_proxy")).unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    !no_proxy.split(',').map(|entry| entry.trim().to_ascii_lowercase()).any(|entry| {
        let domain = entry.trim_start_matches("*.").trim_start_matches('.');
        entry == "*"
            || (!domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}"))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_keep_the_path_and_query_and_name_the_upstream_host() {
        let t = Target::parse("https://api.openai.com/v1/responses?x=1").unwrap();
        assert!(t.https && t.port == 443 && t.authority == "api.openai.com");
        assert_eq!(t.path_and_query, "/v1/responses?x=1");
        let t = Target::parse("http://127.0.0.1:8080/v1/responses").unwrap();
        assert!(!t.https && t.port == 8080 && t.authority == "127.0.0.1:8080");
        assert!(Target::parse("ftp://example.com/").is_none());
    }

    #[test]
    fn only_websocket_upgrades_are_tunnelled() {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        assert!(is_websocket(&h));
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert!(!is_websocket(&h));
    }

    #[test]
    fn a_proxy_applies_unless_no_proxy_names_the_host() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert!(!proxied_with(true, "api.openai.com", &env(&[])));
        let proxy =
            env(&[("HTTPS_PROXY", "http://proxy:3128"), ("NO_PROXY", "localhost,.internal")]);
        assert!(proxied_with(true, "api.openai.com", &proxy));
        assert!(!proxied_with(false, "api.openai.com", &proxy));
        assert!(!proxied_with(true, "gw.internal", &proxy));
        assert!(!proxied_with(true, "localhost", &proxy));
        assert!(proxied_with(false, "x", &env(&[("all_proxy", "socks5://p"), ("no_proxy", "y")])));
        assert!(!proxied_with(true, "x", &env(&[("HTTPS_PROXY", "p"), ("NO_PROXY", "*")])));
    }
}
