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
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::decode::Decoder;
use super::http::{
    Body, BoxError, Routed, State, answer_head, forwardable, header_str, own_response, send_failed,
    session_header,
};
use super::watch::Pending;
use super::watched::Watched;
use super::{call, limits, now_ms, point, ws};

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

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(match forward(state, req).await {
        Ok(resp) => resp,
        Err(resp) => resp,
    })
}

/// Serves one request: routed, then tunnelled (a WebSocket), declined (another upgrade), or
/// forwarded over HTTP, as a model call whose usage is read or as anything else passed on.
async fn forward(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Response<Body>> {
    // Under way from the moment its head is read: the relay's last count waits for a model
    // call's report (the rest are let go when their answer is handed on).
    let flight = state.flights.start();
    let path = req.uri().path().to_owned();
    let to = route(&state, &req, &path)?;
    // Codex's built-in provider talks over a WebSocket: tunnelled to the same upstream.
    if ws::is_websocket(req.headers()) {
        return ws::tunnel(state.clone(), req, &to).await;
    }
    // Any other protocol upgrade is declined with 426 (the client then stays on HTTP).
    if req.headers().get(header::UPGRADE).is_some() {
        tracing::debug!(route = to.route, "tap: a protocol upgrade declined (426)");
        return Err(own_response(
            StatusCode::UPGRADE_REQUIRED,
            "the tap tunnels WebSockets and plain HTTP only",
        ));
    }
    let method = req.method().clone();
    let api = api::classify(method.as_str(), &to.rest);
    tracing::debug!(%method, route = to.route, path = %to.rest, model_call = api.is_some(), "tap: request");

    let (parts, body) = req.into_parts();
    let session_header = session_header(&state, &parts.headers);
    state.limits.request(&parts.headers);
    let body = read_body(body).await?;
    let started_ms = now_ms();
    let Some(client) = state.client.get().await else {
        return Err(own_response(StatusCode::BAD_GATEWAY, "acp-usage's tap has no HTTP client"));
    };
    let outgoing =
        client.request(method, &to.url).headers(forwardable(&parts.headers)).body(body.clone());
    if let Some(api) = api {
        // A compressed request (Codex can send zstd) is read decoded; it goes out as it came.
        let plain = decoded(&parts.headers, body);
        let request = RequestInfo::read(api, &to.rest, &plain);
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
        return Ok(call::forward(call::Outgoing {
            state: state.clone(),
            request: outgoing,
            pending,
            route: to.route.to_owned(),
            upstream_base: to.upstream_base.to_owned(),
            flight,
        })
        .await);
    }
    pass_on(&state, outgoing, &to, session_header).await
}
/// Where a request goes, or the refusal it gets. No open proxy: only origin-form targets under
/// the secret are served, and the upstream comes from the route table, never from the request.
#[allow(
    clippy::result_large_err,
    reason = "the error is the answer the agent gets, as `forward` returns it"
)]
fn route<'a>(
    state: &'a State,
    req: &Request<Incoming>,
    path: &'a str,
) -> Result<Routed<'a>, Response<Body>> {
    if req.method() == Method::CONNECT {
        return Err(own_response(StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not served"));
    }
    if req.uri().scheme().is_some() || req.uri().authority().is_some() {
        return Err(own_response(StatusCode::BAD_REQUEST, "absolute-form targets are not served"));
    }
    let Some((route_name, rest)) = split_path(path, &state.secret) else {
        tracing::warn!(method = %req.method(), "tap: a request without the secret was refused");
        return Err(own_response(StatusCode::FORBIDDEN, "not a path this tap serves"));
    };
    if route_name == point::NOTICE_ROUTE {
        return Err(notice(state, rest));
    }
    let Some(route) = state.routes.iter().find(|r| r.name == route_name) else {
        return Err(own_response(StatusCode::NOT_FOUND, "no such route"));
    };
    // An alternate upstream of the route, when a header of the request selects it.
    let upstream_base = state
        .alternates
        .iter()
        .find(|a| a.route == route.name && req.headers().contains_key(a.header.as_str()))
        .map_or(route.upstream.as_str(), |a| a.upstream.as_str());
    let url = match req.uri().query() {
        Some(q) => format!("{upstream_base}{rest}?{q}"),
        None => format!("{upstream_base}{rest}"),
    };
    Ok(Routed { route: route_name, upstream_base, rest: rest.to_owned(), url })
}

/// A notice asked for (`/.notice/<name>`, see [`point::Notice`]): said once at the WARN level;
/// answered `204`, or `404` for a name the agent's pointing did not give.
fn notice(state: &State, rest: &str) -> Response<Body> {
    let name = rest.trim_start_matches('/');
    let Some((notice, said)) = state.notices.iter().find(|(n, _)| n.name == name) else {
        return own_response(StatusCode::NOT_FOUND, "no such notice");
    };
    if !said.swap(true, std::sync::atomic::Ordering::SeqCst) {
        tracing::warn!("{}", notice.text);
    }
    let mut resp = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}

/// The request body, read whole before it is forwarded: requests are sent at once and are
/// small next to the response's time, and attribution reads it.
async fn read_body(body: Incoming) -> Result<Bytes, Response<Body>> {
    match body.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => {
            tracing::debug!("tap: the agent's request body broke off: {e}");
            Err(own_response(StatusCode::BAD_REQUEST, "the request body broke off"))
        }
    }
}

/// The body as the API reads it: decoded when the request says it is compressed.
fn decoded(headers: &hyper::HeaderMap, body: Bytes) -> Bytes {
    match header_str(headers, header::CONTENT_ENCODING) {
        Some(enc) => {
            let mut d = Decoder::for_encoding(Some(&enc));
            let mut plain = d.push(&body);
            plain.extend(d.finish());
            Bytes::from(plain)
        }
        None => body,
    }
}

/// Forwards a request that is not a model call: nothing is billed, so it stays on the agent's
/// connection; only a quota endpoint's answer is read (for the subscription's windows).
async fn pass_on(
    state: &State,
    outgoing: reqwest::RequestBuilder,
    to: &Routed<'_>,
    session_header: Option<String>,
) -> Result<Response<Body>, Response<Body>> {
    let upstream = match outgoing.send().await {
        Ok(resp) => resp,
        Err(e) => return Err(send_failed(to.route, to.upstream_base, &e)),
    };
    let resp = answer_head(state, session_header.clone(), &upstream);
    let quota = limits::is_quota(&to.rest)
        .then(|| limits::QuotaRead::new(&state.limits, &state.notify, session_header));
    Ok(streamed(resp, Watched::new(upstream.bytes_stream(), quota)))
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
}
