//! The relay: spawn the agent, forward lines both ways, observe them, and add usage.
//!
//! ```text
//! editor stdin --[editor pump: read, observe, write]--> agent stdin
//! agent stdout --[agent pump:  read, write, observe]--> editor stdout
//!                      \____ Core (Observer, copies) ____/        main loop: exit, signals,
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
//! `--record` and `--validate` see the lines through [`Copies`]: a copy of each line as it is
//! forwarded, handed over with `try_send`, so neither can ever hold the relay up. They need
//! whole lines, so with either of them no line is streamed (every line is held, up to the limit).
//!
//! The relay runs on a current-thread runtime: both pumps and the main loop share one thread
//! that waits on the poller itself, so a line crossing the relay costs no thread wake-up (on
//! Unix; on Windows tokio reads and writes pipes on its blocking threads, see [`lines`]).

pub mod agent;
mod agent_pump;
pub mod content;
mod copies;
mod editor_pump;
pub mod emit;
pub mod envelope;
pub mod follow;
pub mod guard;
mod io;
pub mod json;
pub mod lines;
pub mod live_validate;
mod main_loop;
pub mod observer;
mod options;
#[cfg(unix)]
mod spawn;
pub mod splice;

use std::ops::Range;
use std::process::{ExitCode, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use jsonrpsee_types::ErrorObjectOwned;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use crate::options::RelayOptions;
use crate::record::{Dir, Recorder};
use crate::sources::transcripts::Worker;
use agent_pump::AgentPump;
pub use copies::Copies;
use editor_pump::EditorPump;
use io::PeerWriter;
use live_validate::Live;
use main_loop::{Held, MainLoop};
use observer::Observer;
pub use options::{Options, PendingLedger};

/// Bytes read at a time from either side: a batch of lines. A line still arriving when the
/// buffer is full makes it grow, up to the line limit.
const READ_BUFFER: usize = 256 * 1024;
/// JSON-RPC "internal error", used to answer requests the agent can no longer answer.
const INTERNAL_ERROR: i32 = -32603;

/// Runs the relay on this process's stdin/stdout until the agent exits or the editor goes away.
pub fn run(
    args: RelayOptions,
    guard: Option<std::io::Result<guard::Guard>>,
) -> anyhow::Result<ExitCode> {
    let mut opts = Options::resolve(&args)?;
    let guard = match guard {
        Some(Ok(guard)) => Some(guard),
        Some(Err(err)) => {
            tracing::warn!("starting the agent without its guard: {err}");
            None
        }
        None => None,
    };
    // Created before anything starts, so a bad path is a clear error and not a silent gap.
    let recorder = args.record.as_deref().map(Recorder::create).transpose()?;
    // The agent is started first, and everything else (the ledger, the tap's server, the
    // runtime) while it loads. The tap's socket is bound already, so the agent is started
    // pointed at it.
    let mut tap = prepare_tap(&mut opts);
    let spawned = agent::start(&tap.argv, &tap.env, guard)?;
    let ledger = opts.start_ledger();
    tap.serve();
    let validator = if args.validate { Some(Live::start()?) } else { None };
    let copies = Copies::new(recorder, validator);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let res = rt.block_on(async {
        // Inside the runtime: the fds are registered with its poller.
        let started = spawned.register();
        let launch = Launch { copies, tap, spawned: started, ledger };
        relay_started(lines::stdin(), lines::stdout(), opts, launch).await
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
    relay_copying(editor_in, editor_out, opts, Copies::default()).await
}

/// What both pumps and the main loop share: one lock, taken once per batch of lines.
#[derive(Debug)]
struct Core {
    observer: Observer,
    copies: Copies,
    worker: Option<Worker>,
    /// The ledger's writer thread (`None`: no ledger).
    ledger: Option<crate::sinks::ledger::Writer>,
    /// The OTLP exporter, when the ledger is exported.
    exporter: Option<crate::sinks::otlp::Handle>,
    /// True once the ledger is open and in place, or there is none: the tap's calls are
    /// counted only from then on (they are written to it), and the pumps wait for it
    /// (`Pump::wait_for_ledger`).
    opened: tokio::sync::watch::Sender<bool>,
    /// The calls the LLM-API tap saw, when it runs.
    tap_rx: Option<mpsc::UnboundedReceiver<crate::sources::tap::TapCall>>,
    /// The subscription windows the tap read.
    tap_limits_rx: Option<mpsc::UnboundedReceiver<crate::sources::tap::limits::Observed>>,
    /// How many calls the tap is still reading.
    tap_in_flight: Option<tokio::sync::watch::Receiver<usize>>,
}

impl Core {
    /// Counts the calls the tap has read. Called before the agent's lines are observed: the
    /// tap reports a call before the agent has its last bytes, so a turn's calls are all in
    /// by the time its result is.
    fn drain_tap(&mut self) {
        if !*self.opened.borrow() {
            return;
        }
        // Windows first: a call's headers came before its body.
        if let Some(rx) = &mut self.tap_limits_rx {
            while let Ok(observed) = rx.try_recv() {
                self.observer.limits_observed(observed.limits, observed.session.as_deref());
                if let Some(credits) = observed.credits {
                    self.observer.credits_observed(credits);
                }
                if let Some((credential, account)) = observed.alias {
                    self.observer.account_named(credential, account);
                }
            }
        }
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
        if let Some(writer) = &self.ledger {
            for w in writes {
                writer.send(w);
            }
        }
    }
}

type Shared = Arc<Mutex<Core>>;

fn lock(core: &Shared) -> MutexGuard<'_, Core> {
    // A panic elsewhere while holding the lock leaves the observer as it was; keep relaying.
    core.lock().unwrap_or_else(|e| e.into_inner())
}

/// What each pump has of the relay: the shared core, the line limit, and the way to the main
/// loop.
#[derive(Debug)]
struct Pump {
    core: Shared,
    /// Longest accepted line.
    max: usize,
    events: mpsc::UnboundedSender<Event>,
    /// True once the ledger is open (or there is none) and in place.
    opened: tokio::sync::watch::Receiver<bool>,
}

impl Pump {
    /// Waits, unless the ledger is in place already, for it to be: before lines other than the
    /// `initialize` exchange are observed. The observer reads what earlier runs learned (a
    /// session's carried figures, an agent's baseline) and writes to the ledger only for those;
    /// the ledger's open (a millisecond or two) is not on the editor's first round trip.
    async fn wait_for_ledger(&self, buf: &[u8], pieces: &[lines::Piece]) {
        if *self.opened.borrow() {
            return;
        }
        let initializing = pieces.iter().all(|p| match p {
            lines::Piece::Line { range, .. } => initialize_exchange(&buf[range.clone()]),
            lines::Piece::TooLong(_) => true,
        });
        if !initializing {
            self.wait_for_ledger_always().await;
        }
    }

    /// Waits for the ledger to be in place (a ledger that failed to open is in place as none).
    async fn wait_for_ledger_always(&self) {
        let _ = self.opened.clone().wait_for(|open| *open).await;
    }
}

/// Whether a line belongs to the `initialize` exchange, as far as the ledger goes: the request,
/// or a response (before the ledger is in place no other request was passed on), or what is not
/// a message at all (passed on unread).
fn initialize_exchange(line: &[u8]) -> bool {
    match envelope::Envelope::parse(line) {
        Some(env) => env.method.as_deref().is_none_or(|m| m == "initialize"),
        None => true,
    }
}

/// Waits for the ledger being opened and puts it in place: the observer gets its path and what
/// earlier runs learned, the writer thread and the OTLP exporter start. A ledger that could not
/// be opened leaves the run without one (and without an export). Then tells the pumps.
async fn ledger_opened(
    core: Shared,
    ledger: PendingLedger,
    otlp: Option<crate::sinks::otlp::config::OtlpConfig>,
) {
    let path = ledger.path().to_path_buf();
    let learned = ledger.wait().await;
    {
        let mut c = lock(&core);
        if let Some(learned) = learned {
            c.observer.ledger_opened(path.clone(), learned);
            c.ledger = Some(crate::sinks::ledger::Writer::start(path.clone()));
            // The OTLP exporter: its own thread and timer; the relay never waits for it.
            c.exporter = otlp.map(|cfg| crate::sinks::otlp::Handle::start(cfg, path));
        }
        c.opened.send_replace(true);
        // Calls the tap read meanwhile.
        c.drain_tap();
    }
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

/// [`relay`], with every line that is sent on also copied to `copies`.
pub async fn relay_copying<I, O>(
    editor_in: I,
    editor_out: O,
    mut opts: Options,
    copies: Copies,
) -> anyhow::Result<u8>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let mut tap = prepare_tap(&mut opts);
    let spawned = agent::spawn_with(&tap.argv, &tap.env);
    let ledger = opts.start_ledger();
    tap.serve();
    let launch = Launch { copies, tap, spawned, ledger };
    relay_started(editor_in, editor_out, opts, launch).await
}

/// What is started before the relay's loop: the agent and the tap first (the agent loads
/// meanwhile), the ledger's open under way, and where copies of the lines go.
struct Launch {
    copies: Copies,
    tap: TapStart,
    /// The agent, started (or why not).
    spawned: anyhow::Result<(agent::Agent, agent::Pipes)>,
    /// The ledger being opened (`None`: no ledger).
    ledger: Option<PendingLedger>,
}

/// [`relay_copying`] once the agent was started and the ledger is being opened (`launch`).
async fn relay_started<I, O>(
    editor_in: I,
    editor_out: O,
    opts: Options,
    launch: Launch,
) -> anyhow::Result<u8>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let Launch { copies, tap, spawned, ledger } = launch;
    let (agent, pipes) = match spawned {
        Ok(started) => started,
        Err(err) => {
            // Waited for, so the ledger's open (a migration, perhaps) is never cut short.
            if let Some(ledger) = ledger {
                ledger.wait().await;
            }
            return Err(err);
        }
    };
    // Larger pipes to and from the agent: fewer wake-ups of either side per long line.
    #[cfg(target_os = "linux")]
    {
        lines::grow_pipe(std::os::fd::AsRawFd::as_raw_fd(&pipes.stdout));
        lines::grow_pipe(std::os::fd::AsRawFd::as_raw_fd(&pipes.stdin));
    }
    let observer = Observer::new(opts.settings.clone());
    tracing::info!(agent = ?opts.argv, pgid = agent.pgid, profile = observer.profile().name(), "agent started");

    // The transcript worker, whose updates let a held result go.
    let (tr_tx, tr_rx) = mpsc::unbounded_channel();
    let worker = match &opts.transcripts {
        Some(locs) => Worker::start(locs.clone(), tr_tx)
            .inspect_err(|err| {
                tracing::warn!("cannot start the transcript reader ({err}); using the ACP numbers")
            })
            .ok(),
        None => None,
    };
    // The ledger is put in place once it is open; only the `initialize` exchange is passed on
    // before that (see `Pump::wait_for_ledger`).
    let (opened_tx, opened) = tokio::sync::watch::channel(ledger.is_none());
    let core: Shared = Arc::new(Mutex::new(Core {
        observer,
        copies,
        worker,
        ledger: None,
        exporter: None,
        opened: opened_tx,
        tap_rx: tap.calls,
        tap_limits_rx: tap.limits,
        tap_in_flight: tap.in_flight,
    }));
    if let Some(ledger) = ledger {
        tokio::spawn(ledger_opened(core.clone(), ledger, opts.otlp.clone()));
    }
    let (ev_tx, ev_rx) = mpsc::unbounded_channel::<Event>();
    let pump =
        |events| Pump { core: core.clone(), max: opts.max_line, events, opened: opened.clone() };
    // Answers acp-usage gives the editor itself (a prompt refused for a spent budget): the
    // agent pump owns the editor's side, and writes them between the agent's lines.
    let (answer_tx, answer_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let editor_pump =
        EditorPump::new(editor_in, pipes.stdin, pump(ev_tx.clone()), answer_tx.clone());
    let editor_pump = tokio::spawn(editor_pump.run());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let control = agent_pump::Control { stop: stop_rx, answers: answer_rx };
    let agent_pump =
        AgentPump::new(pipes.stdout, editor_out, pump(ev_tx), opts.transcript_wait, control);
    let agent_pump = tokio::spawn(agent_pump.run());

    let channels = main_loop::Channels {
        events: ev_rx,
        transcripts: tr_rx,
        tap_notify: tap.notify,
        answers: answer_tx,
    };
    let main_loop = MainLoop::new(core.clone(), agent, opts.grace, channels);
    let status = main_loop.run().await?;
    // What the agent wrote before it went still reaches the editor: the pump stops at its next
    // read, never within a batch.
    let _ = stop_tx.send(());
    let out = agent_pump.await.context("the agent pump")?;
    answer_pending(&core, status, out).await;
    // The editor pump may sit in a read on an editor that keeps its side open.
    editor_pump.abort();
    finish(&core, opened, opts.grace).await;
    Ok(agent::exit_code(status))
}

/// The LLM-API tap as the agent is started with it.
struct TapStart {
    /// The tap, bound and not serving yet (`None`: not started, or serving already).
    bound: Option<crate::sources::tap::Bound>,
    /// The agent command, with the arguments that point it at the tap.
    argv: Vec<String>,
    /// The variables that point it at the tap.
    env: Vec<(String, String)>,
    /// The calls the tap read.
    calls: Option<mpsc::UnboundedReceiver<crate::sources::tap::TapCall>>,
    /// The subscription windows it read.
    limits: Option<mpsc::UnboundedReceiver<crate::sources::tap::limits::Observed>>,
    /// Rung when a call was read.
    notify: Arc<tokio::sync::Notify>,
    /// How many calls it is still reading.
    in_flight: Option<tokio::sync::watch::Receiver<usize>>,
}

impl TapStart {
    /// Starts serving the bound tap. The agent was started pointed at it, so a tap that cannot
    /// serve (no thread or runtime to be had: the relay will hardly start either) is an error
    /// in the log; its connections are refused.
    fn serve(&mut self) {
        if let Some(bound) = self.bound.take()
            && let Err(e) = bound.serve()
        {
            tracing::error!("the LLM-API tap could not start serving ({e:#})");
        }
    }
}

/// Binds the LLM-API tap unless it was turned off, for an agent whose profile knows how to
/// point it (`opts.settings.tap` says afterwards whether it runs); [`TapStart::serve`] starts
/// it. The generic profile's base URLs would be a guess: an unknown agent runs untapped unless
/// `--tap on` asked for it, and then the variables pointed are said on stderr.
fn prepare_tap(opts: &mut Options) -> TapStart {
    let mut argv = opts.argv.clone();
    let profile = opts.settings.forced_profile.unwrap_or(opts.settings.launched_as);
    let tapped = if !opts.settings.tap {
        tracing::info!("tap: off (--tap off, ACP_USAGE_TAP=0 or `tap = false`)");
        None
    } else if profile.is_generic() && !opts.tap_asked {
        tracing::info!(
            "tap: not started for an agent without a profile (its base URLs would be a guess; \
             `--tap on` points the well-known ones)"
        );
        None
    } else {
        let env = |name: &str| std::env::var(name).ok();
        let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
        let point_env = crate::sources::tap::point::Env { var: &env, read_file: &read };
        // Logins the tap cannot point: said once; the other sources count those calls.
        for untapped in profile.untapped(&point_env) {
            tracing::info!("tap: cannot see this agent's calls: {}", untapped.why);
        }
        let pointing = crate::agents::point_command(profile, &opts.settings.command, &env, &read);
        if pointing.routes.is_empty() {
            tracing::info!("tap: nothing of this agent's setup can be pointed at it; not started");
            None
        } else {
            if profile.is_generic() {
                tracing::warn!("{}", generic_tap_notice(&pointing));
            }
            crate::sources::tap::bind_for_agent(pointing)
        }
    };
    opts.settings.tap = tapped.is_some();
    match tapped {
        Some(t) => {
            argv.extend(t.args);
            TapStart {
                bound: Some(t.tap),
                argv,
                env: t.env,
                calls: Some(t.calls),
                limits: Some(t.limits),
                notify: t.notify,
                in_flight: Some(t.in_flight),
            }
        }
        None => TapStart {
            bound: None,
            argv,
            env: Vec::new(),
            calls: None,
            limits: None,
            notify: Arc::new(tokio::sync::Notify::new()),
            in_flight: None,
        },
    }
}

/// What `--tap on` pointed for an agent without a profile: the variables, and where each goes
/// on to.
fn generic_tap_notice(pointing: &crate::sources::tap::point::Pointing) -> String {
    let vars: Vec<&str> = pointing.env.iter().map(|(var, _, _)| var.as_str()).collect();
    format!(
        "tap: the agent has no profile; as --tap on asks, {} point at the tap (each goes on to \
         the value it had, else the provider's public endpoint); calls through other settings \
         are not tapped",
        vars.join(", ")
    )
}

/// Requests the agent will never answer get an error, so the editor does not hang; then the
/// editor's side is closed.
async fn answer_pending<W: AsyncWrite + Unpin>(
    core: &Shared,
    status: ExitStatus,
    mut out: PeerWriter<W>,
) {
    let answers: Vec<Vec<u8>> = {
        let mut c = lock(core);
        let ids = c.observer.pending_ids();
        ids.into_iter()
            .map(|id| {
                let err = ErrorObjectOwned::owned(
                    INTERNAL_ERROR,
                    format!("the agent exited ({}) before answering", agent::describe(status)),
                    None::<()>,
                );
                let msg = emit::error_response(&id, err);
                c.copies.line(Dir::Injected, &msg, false);
                msg
            })
            .collect()
    };
    for msg in answers {
        out.line(&msg).await;
    }
    out.finish().await;
}

/// The longest the end of a run waits for the tap's calls under way: the tap lets a call go
/// one second after its agent hung up.
const TAP_SETTLE: Duration = Duration::from_millis(1500);

/// The end of a run: counters logged, the copies, the ledger's last writes and a last export
/// done.
async fn finish(core: &Shared, mut opened: tokio::sync::watch::Receiver<bool>, grace: Duration) {
    // The ledger's writer and the exporter are in place once the ledger is open.
    let _ = opened.wait_for(|open| *open).await;
    // A call the agent made just before it ended (a prompt suggestion after its last result)
    // may still be on its way through the tap: the agent's group is gone, so the tap reads on
    // only for a moment (`AFTER_HANGUP`), and it is counted below.
    let in_flight = lock(core).tap_in_flight.take();
    if let Some(count) = in_flight
        && !crate::sources::tap::settled(count, TAP_SETTLE).await
    {
        tracing::info!(
            "a call through the tap was still under way {TAP_SETTLE:?} after the agent ended; not counted"
        );
    }
    let copies = {
        let mut c = lock(core);
        let counters = c.observer.counters;
        tracing::info!(
            not_objects = counters.not_objects,
            other_methods = counters.other_methods,
            extensions = counters.extensions,
            untracked_responses = counters.untracked_responses,
            "passed through without reading"
        );
        // Calls the tap finished while the agent was being ended (a prompt suggestion the
        // agent started after its last result): counted and written like any other.
        c.drain_tap();
        c.save_learned();
        std::mem::take(&mut c.copies)
    };
    copies.finish().await;

    // The ledger's last writes (the last turn, the sessions no longer open here) are done
    // before the process ends; a ledger stuck behind another process's lock is not waited for
    // longer than this.
    let (ledger, exporter) = {
        let mut c = lock(core);
        (c.ledger.take(), c.exporter.take())
    };
    if let Some(writer) = ledger {
        let _ = tokio::task::spawn_blocking(move || writer.finish(Duration::from_secs(5))).await;
    }
    // A last export of what the run recorded, within the exit grace; what does not make it stays
    // in the ledger for the next run (or `acp-usage export --otlp`).
    if let Some(exporter) = exporter {
        let deadline = std::time::Instant::now() + grace.min(Duration::from_secs(5));
        let _ = tokio::task::spawn_blocking(move || exporter.finish(deadline)).await;
    }
}

/// A line still arriving at this length is streamed on from then on when acp-usage does not
/// own it (or at the line limit, when that is lower). Shorter lines are held whole: they cost
/// little, and their observation is exact.
pub const STREAM_FROM: usize = READ_BUFFER / 2;

/// Appends a line's bytes to the runs to write, merging it with the previous run when they
/// touch (consecutive forwarded lines are one write).
fn extend_run(runs: &mut Vec<Range<usize>>, r: Range<usize>) {
    match runs.last_mut() {
        Some(last) if last.end == r.start => last.end = r.end,
        _ => runs.push(r),
    }
}
