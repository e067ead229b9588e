//! The relay: spawn the agent, forward lines both ways, observe them, and add usage.
//!
//! ```text
//! editor stdin --[reader task]--> Event::Editor --+                 +--> to_agent  --[writer]--> agent stdin
//!                                                 +--> main loop ---+
//! agent stdout --[reader task]--> Event::Agent ---+   (Observer)    +--> to_editor --[writer]--> editor stdout
//! ```
//! One loop owns the [`observer::Observer`], so the order of what reaches the editor is decided
//! in one place: an injected `usage_update` goes right before a prompt result or right after a
//! session response. All channels are bounded: a slow editor fills `to_editor`, the loop waits,
//! the agent's stdout pipe fills and the agent waits, instead of memory growing.
//!
//! `--record` and `--validate` see the lines through [`Taps`]: a copy of each line as it is
//! forwarded, handed over with `try_send`, so neither can ever hold the relay up.

pub mod agent;
pub mod content;
pub mod emit;
pub mod envelope;
pub mod follow;
pub mod lines;
pub mod observer;
pub mod profiles;
pub mod splice;

use std::collections::VecDeque;
use std::process::{ExitCode, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use jsonrpsee_types::ErrorObjectOwned;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::cli::{AgentUsage, RelayArgs};
use crate::record::{Dir, Recorder, Tapped};
use crate::transcripts::Worker;
use crate::validate_cmd::Live;
use lines::{Line, LineReader, Read};
use observer::{Observer, Settings};
use profiles::Profile;

/// Depth of every channel, in lines.
const CHANNEL_DEPTH: usize = 64;
/// Buffer of each reader.
const READ_BUFFER: usize = 64 * 1024;
/// JSON-RPC "internal error", used to answer requests the agent can no longer answer.
const INTERNAL_ERROR: i32 = -32603;

/// Options of one relay run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The agent command line.
    pub argv: Vec<String>,
    /// How long the agent may take to exit after the editor closed its side.
    pub grace: Duration,
    /// Longest accepted line.
    pub max_line: usize,
    /// Observer settings.
    pub settings: Settings,
    /// Where learned baselines and windows are saved (`None`: not saved).
    pub state_path: Option<std::path::PathBuf>,
    /// Where the agents' transcripts are (`None`: not read).
    pub transcripts: Option<crate::transcripts::Locations>,
    /// Longest a turn's result waits for the transcript to catch up.
    pub transcript_wait: Duration,
}

/// Runs the relay on this process's stdin/stdout until the agent exits or the editor goes away.
pub fn run(args: RelayArgs) -> anyhow::Result<ExitCode> {
    let config = crate::config::load(&args)?;
    let state_path = crate::state::path();
    let opts = Options {
        argv: args.agent.clone(),
        grace: Duration::from_millis(args.grace_ms),
        max_line: args.max_line_mib.saturating_mul(1024 * 1024).max(1024),
        settings: Settings {
            forced_profile: Profile::forced(args.profile),
            command: args.agent.clone(),
            keep_agent_usage: args.agent_usage == AgentUsage::Keep,
            catalog: config.catalog,
            default_window: config.default_window,
            learned: state_path.as_deref().map(crate::state::load).unwrap_or_default(),
            transcripts: args.transcripts == crate::cli::Transcripts::On,
        },
        state_path,
        transcripts: (args.transcripts == crate::cli::Transcripts::On)
            .then(crate::transcripts::Locations::from_process),
        transcript_wait: Duration::from_millis(args.transcript_wait_ms),
    };
    // Created before anything starts, so a bad path is a clear error and not a silent gap.
    let recorder = args.record.as_deref().map(Recorder::create).transpose()?;
    let validator = if args.validate { Some(Live::start()?) } else { None };
    let taps = Taps::new(recorder, validator);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let res = rt.block_on(relay_tapped(tokio::io::stdin(), tokio::io::stdout(), opts, taps));
    // The stdin reader may still sit in a blocking read on an editor that keeps its side open;
    // don't wait for it.
    rt.shutdown_background();
    res.map(ExitCode::from)
}

/// What the relay copies off its path: the recording and the live validator.
#[derive(Debug)]
pub struct Taps {
    recorder: Option<Recorder>,
    validator: Option<Live>,
    /// Lines tapped so far.
    seq: u64,
    start: Instant,
}

impl Default for Taps {
    fn default() -> Taps {
        Taps::new(None, None)
    }
}

impl Taps {
    /// Taps for a recording and/or live validation; both `None` costs the relay nothing.
    pub fn new(recorder: Option<Recorder>, validator: Option<Live>) -> Taps {
        Taps { recorder, validator, seq: 0, start: Instant::now() }
    }

    /// Copies one line (without its terminator) that is being sent on.
    fn line(&mut self, dir: Dir, bytes: &[u8], rewritten: bool) {
        if self.recorder.is_none() && self.validator.is_none() {
            return;
        }
        self.seq += 1;
        let t = self.start.elapsed().as_micros() as f64 / 1e6;
        // One copy, shared by both consumers.
        let line = Tapped { seq: self.seq, t, dir, rewritten, bytes: Arc::from(bytes) };
        if let Some(r) = &mut self.recorder {
            r.offer(&line);
        }
        if let Some(v) = &mut self.validator {
            v.offer(&line);
        }
    }

    /// Waits for both to finish what they were given, and logs their summaries.
    async fn finish(self) {
        if let Some(r) = self.recorder {
            r.finish().await;
        }
        if let Some(v) = self.validator {
            v.finish().await;
        }
    }
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

/// [`relay`], with every line that is sent on also copied to `taps`.
pub async fn relay_tapped<I, O>(
    editor_in: I,
    editor_out: O,
    opts: Options,
    mut taps: Taps,
) -> anyhow::Result<u8>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (mut agent, pipes) = agent::spawn(&opts.argv)?;
    let mut observer = Observer::new(opts.settings.clone());
    tracing::info!(agent = ?opts.argv, pgid = agent.pgid, profile = observer.profile().name(), "agent started");

    // One channel per source, so the loop can stop reading a side whose destination is full
    // while it keeps draining the other (a shared channel deadlocks when the agent echoes a
    // flood: the loop waits on the agent's stdin, the agent waits on its stdout).
    let (ed_tx, mut ed_rx) = mpsc::channel::<std::io::Result<Read>>(CHANNEL_DEPTH);
    let (ag_tx, mut ag_rx) = mpsc::channel::<std::io::Result<Read>>(CHANNEL_DEPTH);
    tokio::spawn(read_lines(editor_in, opts.max_line, ed_tx));
    tokio::spawn(read_lines(pipes.stdout, opts.max_line, ag_tx));
    let (to_agent, agent_rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
    let (to_editor, editor_rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
    let agent_writer = tokio::spawn(write_lines(pipes.stdin, agent_rx, "agent"));
    let editor_writer = tokio::spawn(write_lines(editor_out, editor_rx, "editor"));

    let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut to_agent = Some(to_agent);
    // Lines decided but not yet handed to a writer; the loop never waits on a writer while
    // holding them, and stops reading a side while its destination's queue is full.
    let mut to_agent_q: VecDeque<Vec<u8>> = VecDeque::new();
    let mut to_editor_q: VecDeque<Vec<u8>> = VecDeque::new();
    let mut editor_open = true;
    let mut editor_closed_at: Option<tokio::time::Instant> = None;
    let mut agent_stdout_open = true;
    let mut status: Option<ExitStatus> = None;
    // Once the agent has exited, its stdout gets a short while to drain (a grandchild may hold
    // it open forever).
    let mut drain_deadline: Option<tokio::time::Instant> = None;

    let mut agent_stdin_gone = false;
    let mut learned_changed = false;
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
    let mut held: Option<Held> = None;
    let mut holds = HoldStats::default();
    loop {
        if status.is_some() && !agent_stdout_open {
            break;
        }
        if agent_stdin_gone || (!editor_open && to_agent_q.is_empty() && to_agent.is_some()) {
            // Everything the editor sent is handed over: dropping the sender lets the writer
            // finish, then close the agent's stdin.
            to_agent = None;
        }
        let grace_deadline = editor_closed_at.map(|t| t + opts.grace);
        let deadline = match (grace_deadline, drain_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            ev = ed_rx.recv(), if editor_open && to_agent_q.len() < CHANNEL_DEPTH => match ev {
                Some(Ok(Read::Line(line))) => {
                    observer.from_editor(&line.bytes);
                    send_commands(&mut observer, worker.as_ref());
                    taps.line(Dir::EditorToAgent, &line.bytes, false);
                    if to_agent.is_some() {
                        to_agent_q.push_back(frame(line));
                    }
                }
                Some(Ok(Read::TooLong(n))) => {
                    tracing::warn!(bytes = n, limit = opts.max_line, "dropped an over-long line from the editor");
                }
                Some(Ok(Read::Eof) | Err(_)) | None => {
                    tracing::info!("the editor closed its side; closing the agent's stdin");
                    editor_open = false;
                    editor_closed_at = Some(tokio::time::Instant::now());
                }
            },
            ev = ag_rx.recv(), if agent_stdout_open && held.is_none() && to_editor_q.len() < CHANNEL_DEPTH => match ev {
                Some(Ok(Read::Line(line))) => {
                    let out = observer.from_agent(&line.bytes);
                    if let Some(session) = out.hold {
                        // Everything after this line waits with it, so the editor sees the
                        // agent's lines in their order.
                        let now = tokio::time::Instant::now();
                        held = Some(Held { line, session, since: now, deadline: now + opts.transcript_wait });
                    } else {
                        queue_outcome(out, line, &mut to_editor_q, &mut taps);
                    }
                    send_commands(&mut observer, worker.as_ref());
                    if let (Some(learned), Some(path)) = (observer.take_learned(), &opts.state_path) {
                        // Rare (a turn's end, a new window) and off the relay's path.
                        learned_changed = true;
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || save_state(&path, &learned));
                    }
                }
                Some(Ok(Read::TooLong(n))) => {
                    tracing::warn!(bytes = n, limit = opts.max_line, "dropped an over-long line from the agent");
                }
                Some(Ok(Read::Eof) | Err(_)) | None => agent_stdout_open = false,
            },
            permit = reserve(&to_agent), if !to_agent_q.is_empty() => match permit {
                Some(permit) => permit.send(to_agent_q.pop_front().expect("not empty")),
                None => {
                    // The agent's stdin is gone: it is exiting, and its exit ends the relay.
                    to_agent_q.clear();
                    agent_stdin_gone = true;
                }
            },
            permit = to_editor.reserve(), if !to_editor_q.is_empty() => {
                // The editor writer keeps receiving even after a write error, so this only
                // fails if it panicked; then nothing can reach the editor anyway.
                match permit {
                    Ok(permit) => permit.send(to_editor_q.pop_front().expect("not empty")),
                    Err(_) => to_editor_q.clear(),
                }
            }
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
            Some(update) = tr_rx.recv() => {
                observer.transcript_update(update);
                if let Some(h) = held.take_if(|h| observer.hold_ready(&h.session)) {
                    release(h, false, &mut observer, &mut to_editor_q, &mut taps, &mut holds);
                }
                send_commands(&mut observer, worker.as_ref());
            }
            _ = sleep_until(held.as_ref().map(|h| h.deadline)), if held.is_some() => {
                let h = held.take().expect("guarded");
                release(h, true, &mut observer, &mut to_editor_q, &mut taps, &mut holds);
                send_commands(&mut observer, worker.as_ref());
            }
            _ = sigint.recv() => agent.signal_group(libc::SIGINT),
            _ = sigterm.recv() => agent.signal_group(libc::SIGTERM),
        }
    }
    // Grandchildren may outlive the agent; the group goes with it.
    agent.signal_group(libc::SIGKILL);
    if let Some(h) = held.take() {
        // The agent is gone: what was held goes on as it is.
        release(h, true, &mut observer, &mut to_editor_q, &mut taps, &mut holds);
    }
    holds.log();
    let status = status.expect("loop ends with a status");
    // What the agent wrote before it went still reaches the editor.
    for line in to_editor_q {
        let _ = to_editor.send(line).await;
    }

    // Requests the agent will never answer get an error, so the editor does not hang.
    for id in observer.pending_ids() {
        let err = ErrorObjectOwned::owned(
            INTERNAL_ERROR,
            format!("the agent exited ({}) before answering", agent::describe(status)),
            None::<()>,
        );
        let msg = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
            serde_json::to_string(&err).expect("error object serialises")
        );
        taps.line(Dir::Injected, msg.as_bytes(), false);
        let _ = to_editor.send(terminated(msg.into_bytes())).await;
    }
    let c = observer.counters;
    tracing::info!(
        not_objects = c.not_objects,
        other_methods = c.other_methods,
        extensions = c.extensions,
        untracked_responses = c.untracked_responses,
        "passed through without reading"
    );
    // A save still in flight may be cut short when the process exits: the last word is written
    // here, whole, whatever changed during the run.
    learned_changed |= observer.take_learned().is_some();
    if let (true, Some(path)) = (learned_changed, &opts.state_path) {
        save_state(path, observer.learned());
    }
    drop(to_agent);
    drop(to_editor);
    let _ = editor_writer.await;
    agent_writer.abort();
    taps.finish().await;
    Ok(agent::exit_code(status))
}

/// An agent line waiting for its session's transcript.
#[derive(Debug)]
struct Held {
    line: Line,
    session: String,
    since: tokio::time::Instant,
    deadline: tokio::time::Instant,
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
fn release(
    h: Held,
    timed_out: bool,
    observer: &mut Observer,
    to_editor_q: &mut VecDeque<Vec<u8>>,
    taps: &mut Taps,
    stats: &mut HoldStats,
) {
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
    observer.release(&h.session, timed_out);
    let out = observer.from_agent_released(&h.line.bytes);
    queue_outcome(out, h.line, to_editor_q, taps);
}

/// Queues an agent line for the editor, with what the observer adds before and after it.
fn queue_outcome(
    out: observer::Outcome,
    line: Line,
    to_editor_q: &mut VecDeque<Vec<u8>>,
    taps: &mut Taps,
) {
    for extra in out.before {
        taps.line(Dir::Injected, &extra, false);
        to_editor_q.push_back(terminated(extra));
    }
    match out.replace {
        Some(new) => {
            taps.line(Dir::AgentToEditor, &new, true);
            to_editor_q.push_back(terminated(new));
        }
        None => {
            taps.line(Dir::AgentToEditor, &line.bytes, false);
            to_editor_q.push_back(frame(line));
        }
    }
    for extra in out.after {
        taps.line(Dir::Injected, &extra, false);
        to_editor_q.push_back(terminated(extra));
    }
}

/// Hands the observer's transcript commands to the worker.
fn send_commands(observer: &mut Observer, worker: Option<&Worker>) {
    let commands = observer.take_commands();
    if let Some(w) = worker {
        for c in commands {
            w.send(c);
        }
    }
}

fn save_state(path: &std::path::Path, learned: &crate::state::Learned) {
    if let Err(err) = crate::state::save(path, learned) {
        tracing::warn!("cannot save {}: {err}", path.display());
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A forwarded line with its terminator as it came.
fn frame(line: Line) -> Vec<u8> {
    let mut bytes = line.bytes;
    if line.newline {
        bytes.push(b'\n');
    }
    bytes
}

/// A line acp-usage wrote, with its terminator.
fn terminated(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.push(b'\n');
    bytes
}

async fn read_lines<R>(input: R, max: usize, tx: mpsc::Sender<std::io::Result<Read>>)
where
    R: AsyncRead + Unpin,
{
    let mut lines = LineReader::new(BufReader::with_capacity(READ_BUFFER, input), max);
    loop {
        let res = lines.next().await;
        let end = matches!(res, Ok(Read::Eof) | Err(_));
        if tx.send(res).await.is_err() || end {
            return;
        }
    }
}

/// A permit to send to the agent, or `None` when its stdin is closed (or was dropped).
async fn reserve(tx: &Option<mpsc::Sender<Vec<u8>>>) -> Option<mpsc::Permit<'_, Vec<u8>>> {
    tx.as_ref()?.reserve().await.ok()
}

async fn write_lines<W>(mut out: W, mut rx: mpsc::Receiver<Vec<u8>>, peer: &'static str)
where
    W: AsyncWrite + Unpin,
{
    while let Some(buf) = rx.recv().await {
        let mut res = out.write_all(&buf).await;
        // Flush when nothing else is queued: batches writes under load, no delay when idle.
        if res.is_ok() && rx.is_empty() {
            res = out.flush().await;
        }
        if let Err(err) = res {
            tracing::info!("cannot write to the {peer} ({err}); discarding what follows");
            // Keep receiving so the relay never blocks on a peer that is gone.
            while rx.recv().await.is_some() {}
            return;
        }
    }
    let _ = out.shutdown().await;
}
