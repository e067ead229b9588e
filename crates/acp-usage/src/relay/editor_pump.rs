//! Editor to agent: each line is observed (a request must be tracked before the agent can
//! answer it), then the batch is written. A request acp-usage answers itself (a prompt a spent
//! budget refuses, its own `/usage`) is not forwarded; whatever acp-usage writes the editor
//! for a line (that answer, or lines that go with a forwarded one) goes to the agent pump,
//! which owns the editor's side.

use std::ops::Range;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::io::{Batches, PeerWriter};
use super::lines::Piece;
use super::{Event, Pump, extend_run, lock};
use crate::record::Dir;

/// The editor pump: reads the editor's stdin, writes the agent's stdin.
#[derive(Debug)]
pub(super) struct EditorPump<R, W> {
    input: R,
    out: PeerWriter<W>,
    pump: Pump,
    /// Where the answers acp-usage gives itself go (to the agent pump).
    answers: mpsc::UnboundedSender<Vec<u8>>,
}

impl<R, W> EditorPump<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    pub(super) fn new(
        input: R,
        agent_in: W,
        pump: Pump,
        answers: mpsc::UnboundedSender<Vec<u8>>,
    ) -> EditorPump<R, W> {
        let out = PeerWriter { out: agent_in, peer: "agent", failed: false, open_line: false };
        EditorPump { input, out, pump, answers }
    }

    /// Runs until the editor closes its side; then closes the agent's stdin.
    pub(super) async fn run(mut self) {
        let mut batches = Batches::new(self.pump.max);
        let mut pieces = Vec::new();
        loop {
            let (eof, taken) = batches.read(&mut self.input, &mut pieces).await;
            self.pump.wait_for_ledger(&batches.buf, &pieces).await;
            let runs = self.observe(&batches.buf, &mut pieces);
            for r in runs {
                self.out.write(&batches.buf[r]).await;
            }
            self.out.flush().await;
            batches.consumed(taken);
            if eof {
                let _ = self.pump.events.send(Event::EditorClosed);
                self.out.finish().await;
                return;
            }
        }
    }

    /// Observes a batch's lines under one lock; returns the runs of bytes to forward.
    fn observe(&self, buf: &[u8], pieces: &mut Vec<Piece>) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        let mut c = lock(&self.pump.core);
        for p in pieces.drain(..) {
            match p {
                Piece::Line { range, newline } => {
                    let line = &buf[range.clone()];
                    c.copies.line(Dir::EditorToAgent, line, false);
                    let out = c.observer.from_editor(line);
                    if out.forward {
                        extend_run(&mut runs, range.start..range.end + usize::from(newline));
                    }
                    for extra in out.to_editor {
                        c.copies.line(Dir::Injected, &extra, false);
                        let _ = self.answers.send(extra);
                    }
                }
                Piece::TooLong(n) => {
                    tracing::warn!(
                        bytes = n,
                        limit = self.pump.max,
                        "dropped an over-long line from the editor"
                    );
                }
            }
        }
        c.send_commands();
        runs
    }
}
