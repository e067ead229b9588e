//! Agent to editor. Per batch: the lines acp-usage does not own are written first, straight
//! from the read buffer, then observed; a line it owns is handled in order, with what it adds
//! (and, for a result that waits for its session's transcript, after the main loop released
//! it). A long line whose first bytes say acp-usage forwards it unchanged is streamed on as it
//! arrives ([`Streamed`]).

use std::ops::Range;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use super::envelope::{self, Envelope};
use super::io::{Batches, PeerWriter};
use super::lines::{Framer, Piece};
use super::observer::Outcome;
use super::{Event, Held, Pump, STREAM_FROM, Shared, extend_run, lock};
use crate::record::Dir;

/// The agent pump: reads the agent's stdout, writes the editor's stdout.
#[derive(Debug)]
pub(super) struct AgentPump<R, W> {
    input: R,
    batches: Batches,
    pieces: Vec<Piece>,
    /// Told to stop (the agent is gone, and its stdout may be held open by a grandchild).
    stop: oneshot::Receiver<()>,
    /// Answers acp-usage gives the editor itself, written between the agent's lines.
    answers: mpsc::UnboundedReceiver<Vec<u8>>,
    editor: ToEditor<W>,
    /// Whether a long line may be streamed: copies (`--record`, `--validate`) need whole
    /// lines, so with them every line is held whole.
    streaming: bool,
    /// The line being streamed on as it arrives.
    streamed: Option<Streamed>,
    /// The line still arriving was found to need holding whole.
    judged: bool,
}

/// What the relay tells the agent pump besides the agent's lines.
#[derive(Debug)]
pub(super) struct Control {
    /// Told to stop (the agent is gone, and its stdout may be held open by a grandchild).
    pub(super) stop: oneshot::Receiver<()>,
    /// Answers acp-usage gives the editor itself, written between the agent's lines.
    pub(super) answers: mpsc::UnboundedReceiver<Vec<u8>>,
}

/// The editor's side of the agent pump: what it writes, and how it observes what it writes.
#[derive(Debug)]
struct ToEditor<W> {
    out: PeerWriter<W>,
    pump: Pump,
    /// Longest a result waits for its session's transcript.
    hold_wait: Duration,
}

/// What one read did.
enum Read {
    /// The buffer was filled; whether the input ended.
    Filled(bool),
    /// An answer of acp-usage's own was written instead.
    Answered,
    /// The pump was told to stop.
    Stop,
}

impl<R, W> AgentPump<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    pub(super) fn new(
        input: R,
        editor_out: W,
        pump: Pump,
        hold_wait: Duration,
        control: Control,
    ) -> AgentPump<R, W> {
        let Control { stop, answers } = control;
        let streaming = !lock(&pump.core).copies.active();
        let mut batches = Batches::new(pump.max);
        if streaming {
            batches.framer = Framer::deferring(pump.max);
        }
        let out = PeerWriter { out: editor_out, peer: "editor", failed: false, open_line: false };
        AgentPump {
            input,
            batches,
            pieces: Vec::new(),
            stop,
            answers,
            editor: ToEditor { out, pump, hold_wait },
            streaming,
            streamed: None,
            judged: false,
        }
    }

    /// Runs until the agent's stdout ends, the pump is told to stop or the main loop is gone;
    /// returns the editor's writer, for what the relay still has to say.
    pub(super) async fn run(mut self) -> PeerWriter<W> {
        loop {
            let eof = match self.read().await {
                Read::Filled(eof) => eof,
                Read::Answered => continue,
                Read::Stop => break,
            };
            if self.streamed.is_some() {
                self.editor.pump.wait_for_ledger_always().await;
                if self.stream_on(eof).await {
                    continue;
                }
            }
            let mut taken = self.batches.split(eof, &mut self.pieces);
            self.editor.pump.wait_for_ledger(&self.batches.buf, &self.pieces).await;
            let alive = self.editor.forward(&self.batches.buf, &self.pieces).await;
            if !alive {
                break;
            }
            self.pieces.clear();
            if self.streaming && !eof {
                taken = self.judge_partial(taken).await;
            }
            self.editor.out.flush().await;
            self.batches.consumed(taken);
            if eof {
                let _ = self.editor.pump.events.send(Event::AgentClosed);
                break;
            }
        }
        self.editor.out
    }

    /// Reads once, unless told to stop first (what is already in the pipe is still read: the
    /// stop only ends a read that waits) or an answer of acp-usage's own is there to write.
    async fn read(&mut self) -> Read {
        tokio::select! {
            biased;
            eof = self.batches.fill(&mut self.input) => Read::Filled(eof),
            _ = &mut self.stop => Read::Stop,
            // Between the agent's lines only: never inside one being streamed on.
            Some(answer) = self.answers.recv(), if self.streamed.is_none() => {
                self.editor.out.line(&answer).await;
                self.editor.out.flush().await;
                Read::Answered
            }
        }
    }

    /// Writes on what was read of the line being streamed (the buffer holds only what followed
    /// its last part), and observes it once it ended; whether it still streams.
    async fn stream_on(&mut self, eof: bool) -> bool {
        let buf = &self.batches.buf;
        let end = memchr::memchr(b'\n', buf);
        let upto = end.map_or(buf.len(), |i| i + 1);
        self.editor.out.write(&buf[..upto]).await;
        let st = self.streamed.as_mut().expect("streaming");
        st.add(&buf[..end.unwrap_or(buf.len())]);
        if end.is_some() || eof {
            self.editor.out.flush().await;
            let st = self.streamed.take().expect("streaming");
            st.account(&self.editor.pump.core, self.editor.pump.max);
        }
        self.batches.consumed(upto);
        self.streamed.is_some()
    }

    /// The line still arriving after the batch's `taken` bytes: streamed on from here if its
    /// first bytes say that it is forwarded as it is; else held whole, up to the limit. Returns
    /// how many bytes of the buffer are now handled.
    async fn judge_partial(&mut self, taken: usize) -> usize {
        let max = self.editor.pump.max;
        let partial = &self.batches.buf[taken..];
        self.judged &= taken == 0;
        let over = partial.len() > max;
        if partial.len() < STREAM_FROM.min(max) || (self.judged && !over) {
            return taken;
        }
        match envelope::prefix(partial) {
            Some((what, at)) => {
                self.editor.out.write(partial).await;
                let mut st = Streamed { what, bytes: at as u64, text: 0 };
                st.add(&partial[at..]);
                self.streamed = Some(st);
                self.judged = false;
                self.batches.framer.restart();
                self.batches.buf.len()
            }
            None if over => {
                self.batches.framer.drop_partial(partial.len());
                self.judged = false;
                self.batches.buf.len()
            }
            None => {
                self.judged = true;
                taken
            }
        }
    }
}

/// The lines of a batch up to the next one acp-usage owns.
struct Run<'b> {
    /// What to write as it is: the lines not owned, consecutive ones merged.
    writes: Vec<Range<usize>>,
    /// Those lines, to observe once written.
    unowned: Vec<(Range<usize>, Option<Envelope<'b>>)>,
    /// The owned line that ended the run (with whether a `\n` followed it).
    owned: Option<(Range<usize>, bool, Option<Envelope<'b>>)>,
}

impl<W: AsyncWrite + Unpin> ToEditor<W> {
    /// Forwards a batch's lines in order: up to the next owned line, written as they are and
    /// observed after; then the owned line, observed (perhaps held) and written with what
    /// acp-usage adds. `false`: the main loop is gone, and so is the relay.
    async fn forward(&mut self, buf: &[u8], pieces: &[Piece]) -> bool {
        let mut at = 0;
        while at < pieces.len() {
            let run = self.next_run(buf, pieces, &mut at);
            for r in &run.writes {
                self.out.write(&buf[r.clone()]).await;
            }
            if !run.unowned.is_empty() {
                self.out.flush().await;
            }
            let Some((range, newline, out)) = self.observe(buf, run) else { break };
            // The line as it came, terminator included: written with one call when unchanged.
            let whole = &buf[range.start..range.end + usize::from(newline)];
            let line = &buf[range];
            let Some(out) = settle(&self.pump, self.hold_wait, line, out).await else {
                return false;
            };
            self.write_outcome(out, line, whole).await;
        }
        true
    }

    /// Reads the envelopes of the lines from `at` up to the next owned one (included), under
    /// one lock.
    fn next_run<'b>(&self, buf: &'b [u8], pieces: &[Piece], at: &mut usize) -> Run<'b> {
        let mut run = Run { writes: Vec::new(), unowned: Vec::new(), owned: None };
        let c = lock(&self.pump.core);
        while *at < pieces.len() {
            let p = &pieces[*at];
            *at += 1;
            match p {
                Piece::Line { range, newline } => {
                    let env = Envelope::parse(&buf[range.clone()]);
                    if c.observer.owns(env.as_ref()) {
                        run.owned = Some((range.clone(), *newline, env));
                        break;
                    }
                    extend_run(&mut run.writes, range.start..range.end + usize::from(*newline));
                    run.unowned.push((range.clone(), env));
                }
                Piece::TooLong(n) => {
                    tracing::warn!(
                        bytes = n,
                        limit = self.pump.max,
                        "dropped an over-long line from the agent"
                    );
                }
            }
        }
        run
    }

    /// Observes a run's written lines (after the tap's calls so far), then its owned line:
    /// what to write for that one.
    fn observe(&self, buf: &[u8], run: Run<'_>) -> Option<(Range<usize>, bool, Outcome)> {
        let mut c = lock(&self.pump.core);
        c.drain_tap();
        for (range, env) in run.unowned {
            let line = &buf[range];
            c.copies.line(Dir::AgentToEditor, line, false);
            c.observer.account(line, env);
        }
        let owned = run.owned.map(|(range, newline, env)| {
            let out = c.observer.from_agent_parsed(&buf[range.clone()], env);
            c.save_learned();
            (range, newline, out)
        });
        c.send_commands();
        owned
    }

    /// Writes an owned agent line (`whole`: with its terminator, when it had one) with what
    /// the observer adds before and after it.
    async fn write_outcome(&mut self, out: Outcome, line: &[u8], whole: &[u8]) {
        {
            let mut c = lock(&self.pump.core);
            for extra in &out.before {
                c.copies.line(Dir::Injected, extra, false);
            }
            match &out.replace {
                Some(new) => c.copies.line(Dir::AgentToEditor, new, true),
                None => c.copies.line(Dir::AgentToEditor, line, false),
            }
            for extra in &out.after {
                c.copies.line(Dir::Injected, extra, false);
            }
        }
        for extra in &out.before {
            self.out.line(extra).await;
        }
        match &out.replace {
            Some(new) => self.out.line(new).await,
            None => self.out.write(whole).await,
        }
        for extra in &out.after {
            self.out.line(extra).await;
        }
        self.out.flush().await;
    }
}

/// What to write for an owned line: at once, or, when it waits for its session's
/// transcript, what the main loop releases it with. Everything after the line waits with
/// it, so the editor sees the agent's lines in their order; nothing more is read from the
/// agent meanwhile. `None`: the main loop is gone.
// Not a method: what is held across the wait must be `Sync`, and the editor's writer is not.
async fn settle(pump: &Pump, wait: Duration, line: &[u8], out: Outcome) -> Option<Outcome> {
    match out.hold {
        Some(session) => {
            let (resume, resumed) = oneshot::channel();
            let now = tokio::time::Instant::now();
            let h = Held { line: line.to_vec(), session, since: now, deadline: now + wait, resume };
            pump.events.send(Event::Held(h)).ok()?;
            resumed.await.ok()
        }
        None => Some(out),
    }
}

/// An agent line being written on as it arrives, because its first bytes said acp-usage
/// forwards it unchanged ([`envelope::prefix`]). Nothing of it is held: its length is not
/// bounded by the line limit (which bounds what must be held), and it is observed once it
/// ended, from its prefix and the length of the rest
/// ([`super::observer::Observer::account_streamed`]). With copies (`--record`, `--validate`),
/// lines are held whole as before, so the copies get every line.
#[derive(Debug)]
struct Streamed {
    what: envelope::Prefix,
    /// Bytes of the line so far.
    bytes: u64,
    /// Bytes after the prefix, less one per escape.
    text: u64,
}

impl Streamed {
    fn add(&mut self, part: &[u8]) {
        self.bytes += part.len() as u64;
        let escapes = memchr::memchr_iter(b'\\', part).count() as u64;
        self.text += part.len() as u64 - escapes;
    }

    fn account(self, core: &Shared, max: usize) {
        if self.bytes > max as u64 {
            tracing::info!(
                bytes = self.bytes,
                limit = max,
                "forwarded an agent line over the limit as it arrived (acp-usage does not change it)"
            );
        }
        let mut c = lock(core);
        c.observer.account_streamed(&self.what, self.text);
        c.send_commands();
    }
}
