//! A body that is not a model call's, passed on unchanged while a reader looks at a copy
//! ([`Watched`], with a [`Reader`] such as `limits::QuotaRead`). It names no other module of
//! the tap, so the readers it serves can sit above it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;

/// What reads a copy of a body that is not a model call's while it passes on unchanged: a
/// quota answer (`limits::QuotaRead`). A model call's answer is read by its own task
/// (`call.rs`), which outlives an agent that hangs up.
pub(super) trait Reader {
    /// The next chunk, as it goes on to the agent.
    fn chunk(&mut self, chunk: &[u8]);
    /// The body ended (`broken`: it broke off, or the agent hung up before its end). Called
    /// once more when the stream is dropped; a reader acts on the first call only.
    fn end(&mut self, broken: bool);
}

/// The upstream's body, with a reader of its copy.
pub(super) struct Watched<S, R: Reader> {
    inner: S,
    reader: Option<R>,
}

impl<S, R: Reader> Watched<S, R> {
    pub fn new(inner: S, reader: Option<R>) -> Watched<S, R> {
        Watched { inner, reader }
    }
}

impl<S, E, R> Stream for Watched<S, R>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    R: Reader + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        if let Some(r) = &mut this.reader {
            match &polled {
                Poll::Ready(Some(Ok(chunk))) => r.chunk(chunk),
                Poll::Ready(Some(Err(_))) => r.end(true),
                Poll::Ready(None) => r.end(false),
                Poll::Pending => {}
            }
        }
        polled
    }
}

impl<S, R: Reader> Drop for Watched<S, R> {
    fn drop(&mut self) {
        // Dropped before its end was seen: the agent hung up (the provider still billed what
        // it had sent), or the server sent a body of known length and stopped polling.
        if let Some(r) = &mut self.reader {
            r.end(false);
        }
    }
}
