//! The pumps' reading and writing: a read buffer framed into lines in place ([`Batches`]) and a
//! writer that gives up quietly on a peer that is gone ([`PeerWriter`]).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::READ_BUFFER;
use super::lines::{Framer, Piece};

/// One side's writer: after a write error it logs once and discards what follows, so the relay
/// never blocks on a peer that is gone.
#[derive(Debug)]
pub(super) struct PeerWriter<W> {
    pub(super) out: W,
    pub(super) peer: &'static str,
    pub(super) failed: bool,
    /// The last byte written was not a `\n`: the agent's last line came without one.
    pub(super) open_line: bool,
}

impl<W: AsyncWrite + Unpin> PeerWriter<W> {
    pub(super) async fn write(&mut self, bytes: &[u8]) {
        if self.failed || bytes.is_empty() {
            return;
        }
        self.open_line = bytes.last() != Some(&b'\n');
        if let Err(err) = self.out.write_all(bytes).await {
            self.fail(err);
        }
    }

    /// A line acp-usage wrote, with its terminator; after a peer's line that came without
    /// one (the agent died mid-line), that line is ended first so this one stays whole.
    pub(super) async fn line(&mut self, bytes: &[u8]) {
        // One write per line: the peer never sees half of one, and it is one system call.
        let mut whole = Vec::with_capacity(bytes.len() + 2);
        if self.open_line {
            whole.push(b'\n');
        }
        whole.extend_from_slice(bytes);
        whole.push(b'\n');
        self.write(&whole).await;
    }

    /// Writes what is buffered; called once per batch (a no-op on the raw fds).
    pub(super) async fn flush(&mut self) {
        if !self.failed
            && let Err(err) = self.out.flush().await
        {
            self.fail(err);
        }
    }

    pub(super) async fn finish(&mut self) {
        self.flush().await;
        let _ = self.out.shutdown().await;
    }

    fn fail(&mut self, err: std::io::Error) {
        tracing::info!("cannot write to the {} ({err}); discarding what follows", self.peer);
        self.failed = true;
    }
}

/// A read buffer and the framing of what it holds.
#[derive(Debug)]
pub(super) struct Batches {
    /// What was read and not yet handled (its length is what is filled; reads go to the spare
    /// capacity, so a buffer grown for a long line costs memory only for what it holds).
    pub(super) buf: Vec<u8>,
    pub(super) framer: Framer,
    max: usize,
}

impl Batches {
    pub(super) fn new(max: usize) -> Batches {
        Batches { buf: Vec::with_capacity(READ_BUFFER), framer: Framer::new(max), max }
    }

    /// Reads once and splits what is there into `pieces`; returns whether the input ended and
    /// how many bytes the pieces took. Call [`Batches::consumed`] with that count once the
    /// pieces are handled.
    pub(super) async fn read<R: AsyncRead + Unpin>(
        &mut self,
        input: &mut R,
        pieces: &mut Vec<Piece>,
    ) -> (bool, usize) {
        let eof = self.fill(input).await;
        (eof, self.split(eof, pieces))
    }

    /// Reads once into the buffer; returns whether the input ended.
    pub(super) async fn fill<R: AsyncRead + Unpin>(&mut self, input: &mut R) -> bool {
        if self.buf.capacity() - self.buf.len() < READ_BUFFER / 4 {
            // A line longer than the buffer: grow towards the limit (beyond it the framer
            // drops the line and the buffer empties).
            let more = self.buf.len().max(READ_BUFFER).min(self.max + 1);
            self.buf.reserve(more);
        }
        match input.read_buf(&mut self.buf).await {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => {
                tracing::debug!("read error: {err}");
                true
            }
        }
    }

    /// Splits what the buffer holds into `pieces`; returns how many bytes they took.
    pub(super) fn split(&mut self, eof: bool, pieces: &mut Vec<Piece>) -> usize {
        self.framer.split(&self.buf, eof, pieces)
    }

    /// The first `taken` bytes were handled.
    pub(super) fn consumed(&mut self, taken: usize) {
        self.buf.drain(..taken);
        if self.buf.capacity() > READ_BUFFER && self.buf.len() <= READ_BUFFER / 2 {
            // A long line went through: give its memory back.
            self.buf.shrink_to(READ_BUFFER);
        }
    }
}
