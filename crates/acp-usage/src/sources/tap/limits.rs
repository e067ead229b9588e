//! Subscription windows the tap reads: the rate-limit headers of every response (Anthropic's
//! `anthropic-ratelimit-unified-*`, Codex's `x-codex-*`), Codex's `codex.rate_limits` stream
//! events (HTTP and WebSocket), and Gemini Code Assist's `retrieveUserQuota` answers. Each
//! observation goes to the relay on a channel of its own; nothing here changes a byte.

use std::pin::Pin;
use std::task::{Context, Poll};

use acp_usage_core::limits::{self, Limit};
use bytes::Bytes;
use futures_util::Stream;
use hyper::HeaderMap;

use super::now_ms;
use super::proxy::State;

/// What the relay receives: the session header of the request, when the agent sends one, and
/// the windows.
pub type Observed = (Option<String>, Vec<Limit>);

/// The largest quota answer read (they are a few hundred bytes).
const QUOTA_MAX: usize = 1 << 20;

fn send(state: &State, session: Option<String>, found: Vec<Limit>) {
    if found.is_empty() {
        return;
    }
    // The relay may have ended: nobody is counting any more.
    if state.limits.send((session, found)).is_ok() {
        state.notify.notify_one();
    }
}

/// The windows a response's headers state.
pub(super) fn observe_headers(state: &State, session: Option<String>, headers: &HeaderMap) {
    let pairs = headers.iter().filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
    send(state, session, limits::from_headers(pairs, now_ms()));
}

/// The windows of one `codex.rate_limits` event (a WebSocket text message).
pub(super) fn observe_event(state: &State, session: Option<String>, json: &[u8]) {
    send(state, session, limits::from_codex_event(json, now_ms()));
}

/// Windows read out of a model call's body by its usage reader.
pub(super) fn observe_read(
    limits_tx: &tokio::sync::mpsc::UnboundedSender<Observed>,
    notify: &tokio::sync::Notify,
    session: Option<String>,
    found: Vec<Limit>,
) {
    if !found.is_empty() && limits_tx.send((session, found)).is_ok() {
        notify.notify_one();
    }
}

/// Whether a request is Code Assist's quota question.
pub(super) fn is_quota(path: &str) -> bool {
    path.ends_with(":retrieveUserQuota")
}

/// A quota answer's body, passed on unchanged while a copy is kept and read at its end.
pub(super) struct QuotaCopy<S> {
    inner: S,
    copy: Option<Vec<u8>>,
    session: Option<String>,
    limits: tokio::sync::mpsc::UnboundedSender<Observed>,
    notify: std::sync::Arc<tokio::sync::Notify>,
}

impl<S> QuotaCopy<S> {
    pub fn new(inner: S, state: &State, session: Option<String>) -> QuotaCopy<S> {
        QuotaCopy {
            inner,
            copy: Some(Vec::new()),
            session,
            limits: state.limits.clone(),
            notify: state.notify.clone(),
        }
    }
}

impl<S> QuotaCopy<S> {
    /// Reads the copy, once.
    fn read(&mut self) {
        if let Some(copy) = self.copy.take() {
            let found = limits::from_code_assist_quota(&copy, now_ms());
            observe_read(&self.limits, &self.notify, self.session.take(), found);
        }
    }
}

impl<S> Drop for QuotaCopy<S> {
    fn drop(&mut self) {
        // A body with a length is dropped once it is sent, without being polled to its end;
        // a body cut short does not parse and says nothing.
        self.read();
    }
}

impl<S, E> Stream for QuotaCopy<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(copy) = &mut this.copy {
                    if copy.len() + chunk.len() > QUOTA_MAX {
                        this.copy = None;
                    } else {
                        copy.extend_from_slice(chunk);
                    }
                }
            }
            Poll::Ready(None) => this.read(),
            Poll::Ready(Some(Err(_))) => this.copy = None,
            Poll::Pending => {}
        }
        polled
    }
}
