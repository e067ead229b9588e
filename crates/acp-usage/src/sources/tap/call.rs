//! A model call's exchange with the upstream, on a task of its own rather than the agent's
//! connection: an agent that hangs up (it exited, or was ended with its relay) does not take
//! the provider's answer with it. The provider billed that answer; the tap reads on for a
//! moment ([`AFTER_HANGUP`]) to count it, then lets the upstream go.
//!
//! The body reaches the agent through a small channel, so a slow agent still paces the
//! upstream, and every chunk is read for usage before it is handed on: as before, a call is
//! reported before the bytes that complete it reach the agent.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use hyper::body::Frame;
use hyper::header;
use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::flights::Flight;
use super::http::{Body, BoxError, State, answer_head, header_str, own_response, send_failed};
use super::watch::Pending;

/// How long the tap goes on reading a model call's answer after the agent hung up on it: what
/// the provider had sent by then (all of it, for an answer that was done) is counted, and the
/// provider is not kept generating for an agent that is gone for longer than this.
pub(super) const AFTER_HANGUP: Duration = Duration::from_secs(1);

/// Chunks held between the upstream and an agent that reads slower than it sends.
const DEPTH: usize = 8;

/// A model call, ready to go upstream.
pub(super) struct Outgoing {
    pub state: Arc<State>,
    pub request: reqwest::RequestBuilder,
    /// Read once the answer's headers are in (status, content type and encoding set there).
    pub pending: Pending,
    /// For the error an unreachable upstream gets.
    pub route: String,
    pub upstream_base: String,
    pub flight: Flight,
}

/// Sends the call on a task of its own and answers with the upstream's response (or the tap's
/// own error) when its headers are in.
pub(super) async fn forward(call: Outgoing) -> Response<Body> {
    let (respond, response) = oneshot::channel();
    tokio::spawn(exchange(call, respond));
    response.await.unwrap_or_else(|_| {
        own_response(StatusCode::BAD_GATEWAY, "acp-usage's tap dropped the call")
    })
}

async fn exchange(call: Outgoing, mut respond: oneshot::Sender<Response<Body>>) {
    let Outgoing { state, request, mut pending, route, upstream_base, flight } = call;
    let mut hung_up: Option<Instant> = None;
    let sent = request.send();
    tokio::pin!(sent);
    let upstream = tokio::select! {
        r = &mut sent => r,
        // The agent's side is gone: its handler was dropped with its connection.
        () = respond.closed() => {
            hung_up = Some(Instant::now());
            match tokio::time::timeout(AFTER_HANGUP, sent).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::debug!("tap: the agent hung up and the upstream had not answered; let go");
                    return;
                }
            }
        }
    };
    let upstream = match upstream {
        Ok(resp) => resp,
        Err(e) => {
            let _ = respond.send(send_failed(&route, &upstream_base, &e));
            return;
        }
    };
    pending.status = upstream.status().as_u16();
    pending.content_type = header_str(upstream.headers(), header::CONTENT_TYPE);
    pending.encoding = header_str(upstream.headers(), header::CONTENT_ENCODING);
    let resp = answer_head(&state, pending.session_header.clone(), &upstream);
    let mut watch = pending.begin();

    let (chunks, rx) = mpsc::channel(DEPTH);
    let answer = resp.body(Chunks(rx).boxed()).unwrap_or_else(|_| {
        own_response(StatusCode::BAD_GATEWAY, "the upstream's response was malformed")
    });
    if respond.send(answer).is_err() && hung_up.is_none() {
        hung_up = Some(Instant::now());
    }

    let mut body = upstream.bytes_stream();
    loop {
        let next = match hung_up {
            // The agent may hang up while the upstream is quiet (a cancelled turn): noticed
            // then, not at the next chunk, which may never come.
            None => tokio::select! {
                next = body.next() => next,
                () = chunks.closed() => {
                    hung_up = Some(Instant::now());
                    continue;
                }
            },
            Some(at) => match tokio::time::timeout_at(at + AFTER_HANGUP, body.next()).await {
                Ok(next) => next,
                Err(_) => {
                    tracing::debug!("tap: the agent hung up mid-answer; what was read counts");
                    break;
                }
            },
        };
        match next {
            Some(Ok(chunk)) => {
                watch.feed(&chunk);
                if hung_up.is_none() && chunks.send(Ok(chunk)).await.is_err() {
                    hung_up = Some(Instant::now());
                }
                // Nothing more to read for an agent that is gone once the usage is final.
                if hung_up.is_some() && watch.is_done() {
                    break;
                }
            }
            Some(Err(e)) => {
                // Counted first, then the agent sees the stream break off (not end).
                watch.report();
                if hung_up.is_none() {
                    let _ = chunks.send(Err(Box::new(e) as BoxError)).await;
                }
                break;
            }
            None => break,
        }
    }
    watch.report();
    // After the report: a count of zero means the call is on the relay's channel.
    drop(flight);
}

/// The body the agent reads: the chunks the exchange hands on, in order; an error ends it
/// broken, the exchange's end ends it cleanly.
struct Chunks(mpsc::Receiver<Result<Bytes, BoxError>>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx).map(|next| next.map(|chunk| chunk.map(Frame::data)))
    }
}
