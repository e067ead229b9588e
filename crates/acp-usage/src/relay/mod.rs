//! The relay: spawn the agent, forward lines both ways, observe them, and add usage.
//!
//! ```text
//! editor stdin --[editor pump: read, observe, write]--> agent stdin
//! agent stdout --[agent pump:  read, write, observe]--> editor stdout
//!                      \____ Core (Observer, taps) ____/        main loop: exit, signals,
//!                                                              transcripts, held results
//! ```
//! Each direction is one task that reads a large buffer, splits it into lines in place
//! ([`lines::Framer`]) and writes what it forwards straight from that buffer: one read and one
//! write per batch of lines, no copy, allocation or thread hand-off per line. The agent pump
//! writes every line acp-usage does not own first and observes it after
//! ([`observer::Observer::owns`]); only the lines it owns (responses to tracked requests, the
//! agent's `usage_update`) are observed before they are written, with what is added around them.
//! The observer is shared under one lock taken once per batch. Nothing queues between reading
//! and writing: a slow editor stops the agent pump's writes, so it stops reading, the agent's
//! stdout pipe fills and the agent waits, instead of memory growing.
//!
//! A prompt result may be held until the session's transcript catches up: the agent pump hands
//! the line to the main loop and waits (reading nothing more from the agent, so order is kept);
//! the main loop releases it when the transcript arrives or the wait runs out.
//!
//! Long agent lines are streamed: a line still arriving after [`STREAM_FROM`] bytes whose first
//! bytes say that acp-usage forwards it unchanged ([`envelope::prefix`]: a request or
//! notification of a method other than `session/update`, or a `session/update` of a kind it
//! does not own, e.g. `agent_message_chunk`, `tool_call_update`) is written on as it arrives,
//! chunk by chunk, and observed once it ended from its prefix and the length of the rest
//! ([`Observer::account_streamed`]). Nothing else is written while it streams, so neither a
//! held result nor an injected line can come out inside it. Other lines (responses, owned
//! updates, a line whose `method` comes after its long part) are held whole, as before.
//!
//! The line limit (`--max-line-mib`) bounds what must be held: a held line over it is dropped
//! with a warning (if it is still arriving, as soon as it passes the limit); a streamed line
//! costs no memory and cannot be unsent once begun, so it is forwarded whatever its length
//! (logged when over the limit). Lines from the editor are always held (requests must be read
//! whole to be tracked).
//!
//! `--record` and `--validate` see the lines through [`Taps`]: a copy of each line as it is
//! forwarded, handed over with `try_send`, so neither can ever hold the relay up. They need
//! whole lines, so with either of them no line is streamed (every line is held, up to the limit).
//!
//! The relay runs on a current-thread runtime: both pumps and the main loop share one thread
//! that waits on the poller itself, so a line crossing the relay costs no thread wake-up.

pub mod agent;
pub mod content;
pub mod emit;
pub mod envelope;
pub mod follow;
mod io;
pub mod json;
pub mod lines;
pub mod live_validate;
pub mod observer;
mod options;
pub mod splice;
mod taps;

use std::ops::Range;
use std::process::{ExitCode, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use jsonrpsee_types::ErrorObjectOwned;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use crate::agents::Profile;
use crate::record::{Dir, Recorder};
use crate::sources::transcripts::Worker;
use envelope::Envelope;
use io::{Batches, Sink};
use lines::{Framer, Piece};
use live_validate::Live;
use observer::{Observer, Outcome};
pub use options::{AgentUsage, Options, RelayOptions, Transcripts};
pub use taps::Taps;

/// Bytes read at a time from either side: a batch of lines. A line still arriving when the
/// buffer is full makes it grow, up to the line limit.
const READ_BUFFER: usize = 256 * 1024;
/// JSON-RPC "internal error", used to answer requests the agent can no longer answer.
const INTERNAL_ERROR: i32 = -32603;

/// Runs the relay on this process's stdin/stdout until the agent exits or the editor goes away.
pub fn run(args: RelayOptions) -> anyhow::Result<ExitCode> {
    let opts = Options::resolve(&args)?;
    // Created before anything starts, so a bad path is a clear error and not a silent gap.
    let recorder = args.record.as_deref().map(Recorder::create).transpose()?;
    let validator = if args.validate { Some(Live::start()?) } else { None };
    let taps = Taps::new(recorder, validator);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let res = rt.block_on(async {
        // Inside the runtime: the fds are registered with its poller.
        relay_tapped(lines::stdin(), lines::stdout(), opts, taps).await
    });
    // The stdin reader may still sit in a blocking read on an editor that keeps its side open;
    // don't wait for it.
    rt.shutdown_background();
    res.map(ExitCode::from)
}

/// Relays between an editor (`editor_in`/`editor_out`) and the agent `opts.argv`; returns the
/// exit code to end with (the agent's).
pub async fn relay<I, O>(editor_in: I, editor_out: O, opts: Options) -> anyhow::Result<u8>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    relay_tapped(editor_in, editor_out, opts, Taps::default()).await
}

/// What both pumps and the main loop share: one lock, taken once per batch of lines.
#[derive(Debug)]
struct Core {
    observer: Observer,
    taps: Taps,
    worker: Option<Worker>,
    /// The ledger's writer thread (`None`: no ledger).
    ledger: Option<crate::sinks::ledger::Sink>,
    /// The calls the LLM-API tap saw, when it runs.
    tap_rx: Option<mpsc::UnboundedReceiver<crate::sources::tap::TapCall>>,
}

impl Core {
    /// Counts the calls the tap has read. Called before the agent's lines are observed: the
    /// tap reports a call before the agent has its last bytes, so a turn's calls are all in
    /// by the time its result is.
    fn drain_tap(&mut self) {
        let mut any = false;
        if let Some(rx) = &mut self.tap_rx {
            while let Ok(call) = rx.try_recv() {
                self.observer.tap_call(call);
                any = true;
            }
        }
        if any {
            self.save_learned();
        }
    }

    /// Hands the observer's transcript commands to the worker.
    fn send_commands(&mut self) {
        let commands = self.observer.take_commands();
        if let Some(w) = &self.worker {
            for c in commands {
                w.send(c);
            }
        }
    }

    /// Hands what the observer settled to the ledger's writer thread, off the relay's path.
    fn save_learned(&mut self) {
        let writes = self.observer.take_writes();
        if let Some(sink) = &self.ledger {
            for w in writes {
                sink.send(w);
            }
        }
    }
}

type Shared = Arc<Mutex<Core>>;

fn lock(core: &Shared) -> MutexGuard<'_, Core> {
    // A panic elsewhere while holding the lock leaves the observer as it was; keep relaying.
    core.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the pumps tell the main loop.
#[derive(Debug)]
enum Event {
    /// The editor closed its side (the agent's stdin is being closed).
    EditorClosed,
    /// The agent's stdout ended.
    AgentClosed,
    /// An agent line waits for its session's transcript.
    Held(Held),
}

/// [`relay`], with every line that is sent on also copied to `taps`.
pub async fn relay_tapped<I, O>(
    editor_in: I,
    editor_out: O,
    mut opts: Options,
    taps: Taps,
) -> anyhow::Result<u8>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let mut argv = opts.argv.clone();
    let tapped = if opts.settings.tap {
        let profile = opts
            .settings
            .forced_profile
            .unwrap_or_else(|| Profile::detect_before_start(&opts.settings.command));
        crate::sources::tap::start_for_agent(crate::agents::point_from_process(profile))
    } else {
        None
    };
    opts.settings.tap = tapped.is_some();
    let (tap_env, tap_rx, tap_notify) = match tapped {
        Some(t) => {
            argv.extend(t.args);
            (t.env, Some(t.calls), t.notify)
        }
        None => (Vec::new(), None, Arc::new(tokio::sync::Notify::new())),
    };
    let (mut agent, pipes) = agent::spawn_with(&argv, &tap_env)?;
    // Larger pipes to and from the agent: fewer wake-ups of either side per long line.
    lines::grow_pipe(std::os::fd::AsRawFd::as_raw_fd(&pipes.stdout));
    lines::grow_pipe(std::os::fd::AsRawFd::as_raw_fd(&pipes.stdin));
    let observer = Observer::new(opts.settings.clone());
    tracing::info!(agent = ?opts.argv, pgid = agent.pgid, profile = observer.profile().name(), "agent started");

    // The transcript worker, and an agent line held until the session's transcript caught up.
    let (tr_tx, mut tr_rx) = mpsc::unbounded_channel();
    let worker = match &opts.transcripts {
        Some(locs) => match Worker::start(locs.clone(), tr_tx) {
            Ok(w) => Some(w),
            Err(err) => {
                tracing::warn!("cannot start the transcript reader ({err}); using the ACP numbers");
                None
            }
        },
        None => None,
    };
    // The OTLP exporter: its own thread and timer; the relay never waits for it.
    let exporter = match (&opts.otlp, &opts.ledger) {
        (Some(cfg), Some(ledger)) => {
            Some(crate::sinks::otlp::Handle::start(cfg.clone(), ledger.clone()))
        }
        _ => None,
    };
    let core: Shared = Arc::new(Mutex::new(Core {
        observer,
        taps,
        worker,
        ledger: opts.ledger.clone().map(crate::sinks::ledger::Sink::start),
        tap_rx,
    }));
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<Event>();
    // Answers acp-usage gives the editor itself (a prompt refused for a spent budget): the
    // agent pump owns the editor's side, and writes them between the agent's lines.
    let (answer_tx, answer_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let editor_pump = tokio::spawn(editor_pump(
        editor_in,
        pipes.stdin,
        core.clone(),
        opts.max_line,
        ev_tx.clone(),
        answer_tx,
    ));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let agent_pump = tokio::spawn(agent_pump(
        pipes.stdout,
        editor_out,
        core.clone(),
        opts.max_line,
        opts.transcript_wait,
        ev_tx,
        stop_rx,
        answer_rx,
    ));

    let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut editor_closed_at: Option<tokio::time::Instant> = None;
    let mut agent_stdout_open = true;
    let mut status: Option<ExitStatus> = None;
    // Once the agent has exited, its stdout gets a short while to drain (a grandchild may hold
    // it open forever).
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    let mut held: Option<Held> = None;
    let mut holds = HoldStats::default();
    loop {
        if status.is_some() && !agent_stdout_open {
            break;
        }
        let grace_deadline = editor_closed_at.map(|t| t + opts.grace);
        let deadline = match (grace_deadline, drain_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            Some(ev) = ev_rx.recv() => match ev {
                Event::EditorClosed => {
                    tracing::info!("the editor closed its side; closing the agent's stdin");
                    editor_closed_at = Some(tokio::time::Instant::now());
                }
                Event::AgentClosed => agent_stdout_open = false,
                Event::Held(h) => {
                    let mut c = lock(&core);
                    // The transcript may have caught up while the line was on its way here.
                    if c.observer.hold_ready(&h.session) {
                        release(h, false, &mut c, &mut holds);
                    } else {
                        held = Some(h);
                    }
                }
            },
            res = &mut agent.exited, if status.is_none() => {
                let st = res.ok().and_then(Result::ok).context("waiting for the agent")?;
                tracing::info!("the agent exited with {}", agent::describe(st));
                status = Some(st);
                drain_deadline = Some(tokio::time::Instant::now() + Duration::from_millis(500));
            }
            _ = sleep_until(deadline), if deadline.is_some() => {
                if status.is_none() {
                    tracing::info!("the agent did not exit within {:?} of the editor closing; ending its process group", opts.grace);
                    let st = agent::end_group(&mut agent, Duration::from_millis(500)).await?;
                    status = Some(st);
                }
                if drain_deadline.is_some_and(|d| d <= tokio::time::Instant::now()) || editor_closed_at.is_some() {
                    agent_stdout_open = false;
                }
            }
            _ = tap_notify.notified() => lock(&core).drain_tap(),
            Some(update) = tr_rx.recv() => {
                let mut c = lock(&core);
                c.observer.transcript_update(update);
                if let Some(h) = held.take_if(|h| c.observer.hold_ready(&h.session)) {
                    release(h, false, &mut c, &mut holds);
                }
                c.send_commands();
            }
            _ = sleep_until(held.as_ref().map(|h| h.deadline)), if held.is_some() => {
                let h = held.take().expect("guarded");
                release(h, true, &mut lock(&core), &mut holds);
            }
            _ = sigint.recv() => agent.signal_group(libc::SIGINT),
            _ = sigterm.recv() => agent.signal_group(libc::SIGTERM),
        }
    }
    // Grandchildren may outlive the agent; the group goes with it.
    agent.signal_group(libc::SIGKILL);
    if let Some(h) = held.take() {
        // The agent is gone: what was held goes on as it is.
        release(h, true, &mut lock(&core), &mut holds);
    }
    holds.log();
    let status = status.expect("loop ends with a status");
    // What the agent wrote before it went still reaches the editor: the pump stops at its next
    // read, never within a batch.
    let _ = stop_tx.send(());
    let mut out = agent_pump.await.context("the agent pump")?;

    // Requests the agent will never answer get an error, so the editor does not hang.
    let answers: Vec<String> = {
        let mut c = lock(&core);
        let ids = c.observer.pending_ids();
        ids.into_iter()
            .map(|id| {
                let err = ErrorObjectOwned::owned(
                    INTERNAL_ERROR,
                    format!("the agent exited ({}) before answering", agent::describe(status)),
                    None::<()>,
                );
                let msg = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
                    serde_json::to_string(&err).expect("error object serialises")
                );
                c.taps.line(Dir::Injected, msg.as_bytes(), false);
                msg
            })
            .collect()
    };
    for msg in answers {
        out.line(msg.as_bytes()).await;
    }
    out.finish().await;
    let taps = {
        let mut c = lock(&core);
        let counters = c.observer.counters;
        tracing::info!(
            not_objects = counters.not_objects,
            other_methods = counters.other_methods,
            extensions = counters.extensions,
            untracked_responses = counters.untracked_responses,
            "passed through without reading"
        );
        c.save_learned();
        std::mem::take(&mut c.taps)
    };
    // The editor pump may sit in a read on an editor that keeps its side open.
    editor_pump.abort();
    taps.finish().await;
    // The ledger's last writes (the last turn, the sessions no longer open here) are done
    // before the process ends; a ledger stuck behind another process's lock is not waited for
    // longer than this.
    let ledger = lock(&core).ledger.take();
    if let Some(sink) = ledger {
        let _ = tokio::task::spawn_blocking(move || sink.finish(Duration::from_secs(5))).await;
    }
    // A last export of what the run recorded, within the exit grace; what does not make it stays
    // in the ledger for the next run (or `acp-usage export --otlp`).
    if let Some(exporter) = exporter {
        let deadline = std::time::Instant::now() + opts.grace.min(Duration::from_secs(5));
        let _ = tokio::task::spawn_blocking(move || exporter.finish(deadline)).await;
    }
    Ok(agent::exit_code(status))
}

/// An agent line waiting for its session's transcript.
#[derive(Debug)]
struct Held {
    line: Vec<u8>,
    session: String,
    since: tokio::time::Instant,
    deadline: tokio::time::Instant,
    /// Where the agent pump waits for what to write in the line's place.
    resume: oneshot::Sender<Outcome>,
}

/// How long results waited for transcripts.
#[derive(Debug, Default)]
struct HoldStats {
    count: u64,
    timed_out: u64,
    total: Duration,
    max: Duration,
}

impl HoldStats {
    fn log(&self) {
        if self.count > 0 {
            tracing::info!(
                held = self.count,
                timed_out = self.timed_out,
                mean_ms = self.total.as_secs_f64() * 1e3 / self.count as f64,
                max_ms = self.max.as_secs_f64() * 1e3,
                "results held for the agent's transcript"
            );
        }
    }
}

/// Lets a held line go on, with whatever the observer now adds to it.
fn release(h: Held, timed_out: bool, core: &mut Core, stats: &mut HoldStats) {
    let waited = h.since.elapsed();
    stats.count += 1;
    stats.timed_out += u64::from(timed_out);
    stats.total += waited;
    stats.max = stats.max.max(waited);
    tracing::debug!(
        session = h.session,
        waited_ms = waited.as_secs_f64() * 1e3,
        timed_out,
        "held result released"
    );
    core.observer.release(&h.session, timed_out);
    let out = core.observer.from_agent_released(&h.line);
    core.save_learned();
    core.send_commands();
    // The pump is gone only if it panicked; then nothing reaches the editor anyway.
    let _ = h.resume.send(out);
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Editor to agent: each line is observed (a request must be tracked before the agent can
/// answer it), then the batch is written.
async fn editor_pump<R, W>(
    mut input: R,
    agent_in: W,
    core: Shared,
    max: usize,
    events: mpsc::UnboundedSender<Event>,
    answers: mpsc::UnboundedSender<Vec<u8>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut batches = Batches::new(max);
    let mut pieces = Vec::new();
    let mut sink = Sink { out: agent_in, peer: "agent", failed: false, open_line: false };
    loop {
        let (eof, taken) = batches.read(&mut input, &mut pieces).await;
        let buf = &batches.buf;
        let mut runs: Vec<Range<usize>> = Vec::new();
        {
            let mut c = lock(&core);
            for p in pieces.drain(..) {
                match p {
                    Piece::Line { range, newline } => {
                        let line = &buf[range.clone()];
                        c.taps.line(Dir::EditorToAgent, line, false);
                        match c.observer.from_editor(line) {
                            None => {
                                extend_run(&mut runs, range.start..range.end + usize::from(newline))
                            }
                            Some(answer) => {
                                // Not for the agent: answered here.
                                c.taps.line(Dir::Injected, &answer, false);
                                let _ = answers.send(answer);
                            }
                        }
                    }
                    Piece::TooLong(n) => {
                        tracing::warn!(
                            bytes = n,
                            limit = max,
                            "dropped an over-long line from the editor"
                        );
                    }
                }
            }
            c.send_commands();
        }
        for r in runs {
            sink.write(&buf[r]).await;
        }
        sink.flush().await;
        batches.consumed(taken);
        if eof {
            let _ = events.send(Event::EditorClosed);
            sink.finish().await;
            return;
        }
    }
}

/// Appends a line's bytes to the runs to write, merging it with the previous run when they
/// touch (consecutive forwarded lines are one write).
fn extend_run(runs: &mut Vec<Range<usize>>, r: Range<usize>) {
    match runs.last_mut() {
        Some(last) if last.end == r.start => last.end = r.end,
        _ => runs.push(r),
    }
}

/// Agent to editor. Per batch: the lines acp-usage does not own are written first, straight
/// from the read buffer, then observed; a line it owns is handled in order, with what it adds.
// The pump's inputs are each a separate channel or stream it selects on.
#[allow(clippy::too_many_arguments)]
async fn agent_pump<R, W>(
    mut input: R,
    editor_out: W,
    core: Shared,
    max: usize,
    hold_wait: Duration,
    events: mpsc::UnboundedSender<Event>,
    mut stop: oneshot::Receiver<()>,
    mut answers: mpsc::UnboundedReceiver<Vec<u8>>,
) -> Sink<W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Taps get whole lines, so with a tap every line is held whole (see [`Streamed`]).
    let streaming = !lock(&core).taps.active();
    let mut batches = Batches::new(max);
    if streaming {
        batches.framer = Framer::deferring(max);
    }
    let mut pieces = Vec::new();
    let mut sink = Sink { out: editor_out, peer: "editor", failed: false, open_line: false };
    // The line being streamed on as it arrives, and whether the line still arriving was found
    // to need holding whole.
    let mut streamed: Option<Streamed> = None;
    let mut judged = false;
    loop {
        // Told to stop (the agent is gone, and its stdout may be held open by a grandchild):
        // what is already in the pipe is still read, the stop only ends a read that waits.
        let eof = tokio::select! {
            biased;
            eof = batches.fill(&mut input) => eof,
            _ = &mut stop => return sink,
            // Between the agent's lines only: never inside one being streamed on.
            Some(answer) = answers.recv(), if streamed.is_none() => {
                sink.line(&answer).await;
                sink.flush().await;
                continue;
            }
        };
        if let Some(st) = &mut streamed {
            // The buffer holds only what followed the line's last part.
            let buf = &batches.buf;
            let end = memchr::memchr(b'\n', buf);
            let upto = end.map_or(buf.len(), |i| i + 1);
            sink.write(&buf[..upto]).await;
            st.add(&buf[..end.unwrap_or(buf.len())]);
            if end.is_some() || eof {
                sink.flush().await;
                let st = streamed.take().expect("streaming");
                st.account(&core, max);
            }
            batches.consumed(upto);
            if streamed.is_some() {
                continue;
            }
        }
        let mut taken = batches.split(eof, &mut pieces);
        let buf = &batches.buf;
        let mut at = 0;
        while at < pieces.len() {
            // Lines up to the next owned one: forwarded as they are, then observed.
            let mut unowned: Vec<(Range<usize>, Option<Envelope<'_>>)> = Vec::new();
            let mut runs: Vec<Range<usize>> = Vec::new();
            let mut owned = None;
            {
                let c = lock(&core);
                while at < pieces.len() {
                    let p = &pieces[at];
                    at += 1;
                    match p {
                        Piece::Line { range, newline } => {
                            let env = Envelope::parse(&buf[range.clone()]);
                            if c.observer.owns(env.as_ref()) {
                                owned = Some((range.clone(), *newline, env));
                                break;
                            }
                            extend_run(&mut runs, range.start..range.end + usize::from(*newline));
                            unowned.push((range.clone(), env));
                        }
                        Piece::TooLong(n) => {
                            tracing::warn!(
                                bytes = n,
                                limit = max,
                                "dropped an over-long line from the agent"
                            );
                        }
                    }
                }
            }
            for r in runs {
                sink.write(&buf[r]).await;
            }
            if !unowned.is_empty() {
                sink.flush().await;
            }
            let owned = {
                let mut c = lock(&core);
                c.drain_tap();
                for (range, env) in unowned {
                    let line = &buf[range];
                    c.taps.line(Dir::AgentToEditor, line, false);
                    c.observer.account(line, env);
                }
                let owned = owned.map(|(range, newline, env)| {
                    let out = c.observer.from_agent_parsed(&buf[range.clone()], env);
                    c.save_learned();
                    (range, newline, out)
                });
                c.send_commands();
                owned
            };
            let Some((range, newline, out)) = owned else { break };
            let line = &buf[range];
            let out = match out.hold {
                Some(session) => {
                    // Everything after this line waits with it, so the editor sees the agent's
                    // lines in their order; nothing more is read from the agent meanwhile.
                    let (resume, resumed) = oneshot::channel();
                    let now = tokio::time::Instant::now();
                    let h = Held {
                        line: line.to_vec(),
                        session,
                        since: now,
                        deadline: now + hold_wait,
                        resume,
                    };
                    if events.send(Event::Held(h)).is_err() {
                        return sink;
                    }
                    match resumed.await {
                        Ok(out) => out,
                        Err(_) => return sink,
                    }
                }
                None => out,
            };
            write_outcome(&mut sink, &core, out, line, newline).await;
        }
        pieces.clear();
        if streaming && !eof {
            // The line still arriving: streamed on from here if its first bytes say that it is
            // forwarded as it is; else held whole, up to the limit.
            let partial = &batches.buf[taken..];
            judged &= taken == 0;
            let over = partial.len() > max;
            if partial.len() >= STREAM_FROM.min(max) && (!judged || over) {
                match envelope::prefix(partial) {
                    Some((what, at)) => {
                        sink.write(partial).await;
                        let mut st = Streamed { what, bytes: 0, text: 0 };
                        st.bytes = at as u64;
                        st.add(&partial[at..]);
                        streamed = Some(st);
                        judged = false;
                        batches.framer.restart();
                        taken = batches.buf.len();
                    }
                    None if over => {
                        batches.framer.drop_partial(partial.len());
                        judged = false;
                        taken = batches.buf.len();
                    }
                    None => judged = true,
                }
            }
        }
        sink.flush().await;
        batches.consumed(taken);
        if eof {
            let _ = events.send(Event::AgentClosed);
            return sink;
        }
    }
}

/// A line still arriving at this length is streamed on from then on when acp-usage does not
/// own it (or at the line limit, when that is lower). Shorter lines are held whole: they cost
/// little, and their observation is exact.
pub const STREAM_FROM: usize = READ_BUFFER / 2;

/// An agent line being written on as it arrives, because its first bytes said acp-usage
/// forwards it unchanged ([`envelope::prefix`]). Nothing of it is held: its length is not
/// bounded by the line limit (which bounds what must be held), and it is observed once it
/// ended, from its prefix and the length of the rest ([`Observer::account_streamed`]). With a
/// tap (`--record`, `--validate`), lines are held whole as before, so taps see every line.
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

/// Writes an owned agent line with what the observer adds before and after it.
async fn write_outcome<W: AsyncWrite + Unpin>(
    sink: &mut Sink<W>,
    core: &Shared,
    out: Outcome,
    line: &[u8],
    newline: bool,
) {
    {
        let mut c = lock(core);
        for extra in &out.before {
            c.taps.line(Dir::Injected, extra, false);
        }
        match &out.replace {
            Some(new) => c.taps.line(Dir::AgentToEditor, new, true),
            None => c.taps.line(Dir::AgentToEditor, line, false),
        }
        for extra in &out.after {
            c.taps.line(Dir::Injected, extra, false);
        }
    }
    for extra in &out.before {
        sink.line(extra).await;
    }
    match &out.replace {
        Some(new) => sink.line(new).await,
        None => {
            sink.write(line).await;
            if newline {
                sink.write(b"\n").await;
            }
        }
    }
    for extra in &out.after {
        sink.line(extra).await;
    }
    sink.flush().await;
}
