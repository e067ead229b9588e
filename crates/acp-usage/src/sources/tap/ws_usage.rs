//! The usage of a tunnelled Responses WebSocket (Codex's transport), read from copies of both
//! directions: each client `response.create` message starts a model call, and the server's
//! messages, each one Responses event (the JSON an SSE stream carries in its `data:` lines),
//! go to the same reader an HTTP response's body goes to (`watch.rs`).
//!
//! One response is in flight per connection (Codex waits for each before sending the next). A
//! connection that closes mid-response reports the usage seen, marked incomplete; anything the
//! frame readers cannot follow stops the observing, never the tunnel.

use std::borrow::Cow;
use std::sync::Arc;

use acp_usage_core::api::{Api, RequestInfo};
use bytes::Bytes;
use serde::Deserialize;

use super::frames::{Deflate, FrameReader, Message};
use super::http::State;
use super::watch::{Pending, Watch};
use super::{limits, now_ms};

/// The fields a message is told apart by; the rest is skipped unread.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    /// `response.create`: `false` for Codex's warm-up, which generates nothing.
    #[serde(default)]
    generate: Option<bool>,
    /// An `error` event's HTTP status.
    #[serde(default)]
    status: Option<u16>,
}

impl Head<'_> {
    fn read(json: &[u8]) -> Option<Head<'_>> {
        serde_json::from_slice(json).ok()
    }
}

/// What the tunnel hands every copied chunk to.
pub(super) struct Observer {
    state: Arc<State>,
    route: String,
    session_header: Option<String>,
    client: FrameReader,
    server: FrameReader,
    /// The response in flight.
    current: Option<Watch>,
    messages: Vec<Message>,
    stopped: bool,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("route", &self.route)
            .field("in_flight", &self.current.is_some())
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Observer {
    /// An observer of a connection on `route` whose 101 negotiated `deflate`.
    pub fn new(
        state: Arc<State>,
        route: String,
        session_header: Option<String>,
        deflate: Option<Deflate>,
    ) -> Observer {
        let d = deflate.unwrap_or_default();
        Observer {
            state,
            route,
            session_header,
            client: FrameReader::new(deflate.is_some(), d.client_no_context_takeover),
            server: FrameReader::new(deflate.is_some(), d.server_no_context_takeover),
            current: None,
            messages: Vec::new(),
            stopped: false,
        }
    }

    /// An observer that reads nothing (the 101 named an extension it cannot follow).
    pub fn stopped(state: Arc<State>, route: String) -> Observer {
        let mut observer = Observer::new(state, route, None, None);
        observer.stopped = true;
        observer
    }

    /// Bytes the agent sent.
    pub fn client_bytes(&mut self, chunk: &[u8]) {
        if self.stopped {
            return;
        }
        let mut messages = std::mem::take(&mut self.messages);
        self.client.push(chunk, &mut messages);
        for message in messages.drain(..) {
            if let Message::Text(text) = message {
                self.request(text);
            }
        }
        self.messages = messages;
        if self.client.is_broken() {
            self.stop();
        }
    }

    /// Bytes the upstream sent.
    pub fn server_bytes(&mut self, chunk: &[u8]) {
        if self.stopped {
            return;
        }
        let mut messages = std::mem::take(&mut self.messages);
        self.server.push(chunk, &mut messages);
        for message in messages.drain(..) {
            match message {
                Message::Text(event) => self.event(&event),
                // Codex treats a close before `response.completed` as a failed response.
                Message::Close => self.end_response(),
                Message::Binary(_) => (),
            }
        }
        self.messages = messages;
        if self.server.is_broken() {
            self.stop();
        }
    }

    /// The connection ended: a response in flight reports what was seen.
    pub fn closed(&mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.end_response();
        self.stopped = true;
    }

    fn end_response(&mut self) {
        if let Some(mut watch) = self.current.take() {
            watch.report();
        }
    }

    /// A client message: a `response.create` starts a model call.
    fn request(&mut self, text: Vec<u8>) {
        let Some(head) = Head::read(&text) else {
            tracing::debug!(route = %self.route, "tap: a WebSocket message that is not JSON");
            return;
        };
        if head.kind.as_deref() != Some("response.create") {
            return;
        }
        let warmup = head.generate == Some(false);
        // One response at a time: a new request means the last one will say no more.
        self.end_response();
        let request = RequestInfo::read(Api::OpenAiResponses, "/responses", &text);
        tracing::debug!(route = %self.route, warmup, "tap: a model call over a WebSocket");
        let pending = Pending {
            api: Api::OpenAiResponses,
            request,
            body: Bytes::from(text),
            session_header: self.session_header.clone(),
            started_ms: now_ms(),
            warmup,
            status: 200,
            content_type: Some("text/event-stream".to_owned()),
            encoding: None,
            calls: self.state.calls.clone(),
            limits: self.state.limits.clone(),
            notify: self.state.notify.clone(),
        };
        self.current = Some(pending.begin());
    }

    /// A server message: one Responses event, a rate-limit event or an error.
    fn event(&mut self, json: &[u8]) {
        let Some(head) = Head::read(json) else { return };
        let kind = head.kind.as_deref().unwrap_or("");
        match kind {
            "codex.rate_limits" => limits::observe_event(
                &self.state.limits,
                &self.state.notify,
                self.session_header.clone(),
                json,
            ),
            "error" => {
                if let Some(mut watch) = self.current.take() {
                    watch.fail(head.status.unwrap_or(500));
                }
            }
            _ => {
                let Some(watch) = &mut self.current else { return };
                // As an SSE event, its name first so that the reader skips the deltas unparsed.
                if !kind.contains(['\n', '\r']) {
                    watch.feed(b"event: ");
                    watch.feed(kind.as_bytes());
                    watch.feed(b"\n");
                }
                watch.feed(b"data: ");
                if json.contains(&b'\n') {
                    // Pretty-printed JSON: one `data:` line per line, as SSE joins them.
                    let lines: Vec<&[u8]> = json.split(|&b| b == b'\n').collect();
                    watch.feed(&lines.join(&b"\ndata: "[..]));
                } else {
                    watch.feed(json);
                }
                watch.feed(b"\n\n");
                if watch.is_done() {
                    self.current = None;
                }
            }
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        // A tunnel task that ended without saying so: what was billed is still reported.
        self.end_response();
    }
}

#[cfg(test)]
mod tests;
