//! The copy the tap reads of a model call: its usage reader ([`Watch`]), fed every chunk of the
//! upstream's body as `call.rs` hands it on (the other bodies a reader looks at pass through
//! `watched.rs`).
//!
//! The call is reported as soon as the reader has the provider's final usage, before the chunk
//! that completed it goes to the agent. The agent cannot end its turn before it has that chunk,
//! so the relay always holds a turn's calls by the time the agent's result arrives. A body that
//! ends or breaks, or that the tap stops reading after the agent hung up, reports whatever
//! usage was seen, once.

use acp_usage_core::api::{Api, RequestInfo, UsageReader};
use bytes::Bytes;

use super::decode::Decoder;
use super::limits;
use super::{TapCall, now_ms};

/// What is known of a model call when its response headers arrive.
#[derive(Debug)]
pub(super) struct Pending {
    pub api: Api,
    pub request: RequestInfo,
    pub body: Bytes,
    pub session_header: Option<String>,
    pub started_ms: i64,
    /// A warm-up (Codex's WebSocket `generate: false`), see [`TapCall::warmup`].
    pub warmup: bool,
    pub status: u16,
    pub content_type: Option<String>,
    pub encoding: Option<String>,
    pub calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
    pub limits: limits::Sender,
    pub notify: std::sync::Arc<tokio::sync::Notify>,
}

impl Pending {
    /// Starts reading the response.
    pub fn begin(self) -> Watch {
        let reader = UsageReader::new(self.api, self.content_type.as_deref(), &self.request);
        let decoder = Decoder::for_encoding(self.encoding.as_deref());
        Watch { reader: Some(reader), decoder, pending: self }
    }
}

/// A response being read.
#[derive(Debug)]
pub(super) struct Watch {
    reader: Option<UsageReader>,
    decoder: Decoder,
    pending: Pending,
}

impl Watch {
    /// Reads the next piece of the body; reports the call as soon as its usage is final.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.reader.is_none() {
            return;
        }
        // Not compressed (nearly always): the chunk is read where it is.
        let final_now = match (&mut self.reader, &mut self.decoder) {
            (Some(reader), Decoder::Identity) => reader.feed(chunk),
            (Some(reader), decoder) => reader.feed(&decoder.push(chunk)),
            (None, _) => false,
        };
        if let Some(reader) = &mut self.reader {
            let found = reader.take_limits(now_ms());
            let p = &self.pending;
            limits::observe_read(&p.limits, &p.notify, p.session_header.clone(), found);
        }
        if final_now {
            self.report();
        }
    }

    /// Whether the call has been reported (or found to have no usage): nothing more is read.
    pub fn is_done(&self) -> bool {
        self.reader.is_none()
    }

    /// The response failed with `status` (a WebSocket's error event): reports what was seen,
    /// marked incomplete.
    pub fn fail(&mut self, status: u16) {
        self.pending.status = status;
        self.report();
    }

    /// Reports the call (once): what the reader has, if it saw any usage.
    pub fn report(&mut self) {
        let Some(mut reader) = self.reader.take() else { return };
        let rest = self.decoder.finish();
        if !rest.is_empty() {
            reader.feed(&rest);
        }
        let Some(observed) = reader.finish(self.pending.status) else {
            tracing::debug!(status = self.pending.status, "tap: a response without usage");
            return;
        };
        let p = &mut self.pending;
        let call = TapCall {
            api: p.api,
            request: std::mem::take(&mut p.request),
            body: std::mem::take(&mut p.body),
            session_header: p.session_header.take(),
            record: observed.record,
            id: observed.id,
            complete: observed.complete,
            estimated: observed.estimated,
            started_ms: p.started_ms,
            ended_ms: now_ms(),
            warmup: p.warmup,
        };
        // The relay may have ended: then nobody is counting any more.
        if p.calls.send(call).is_ok() {
            p.notify.notify_one();
        }
    }
}
