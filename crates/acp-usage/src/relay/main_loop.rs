//! The relay's main loop: the agent's exit, signals, the editor's grace, the transcript
//! worker's updates, the tap's calls and the results held for a transcript.

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Notify, mpsc, oneshot};

use super::agent::{self, Agent, Signal};
use super::observer::Outcome;
use super::{Core, Event, Shared, lock};
use crate::sources::transcripts::Update;

/// An agent line waiting for its session's transcript.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) line: Vec<u8>,
    pub(super) session: String,
    pub(super) since: tokio::time::Instant,
    pub(super) deadline: tokio::time::Instant,
    /// Where the agent pump waits for what to write in the line's place.
    pub(super) resume: oneshot::Sender<Outcome>,
}

/// What the main loop listens on, and where acp-usage's own answers for the editor go.
#[derive(Debug)]
pub(super) struct Channels {
    /// The pumps' events.
    pub(super) events: mpsc::UnboundedReceiver<Event>,
    /// The transcript worker's updates.
    pub(super) transcripts: mpsc::UnboundedReceiver<Update>,
    /// Rung when the tap has read a call.
    pub(super) tap_notify: Arc<Notify>,
    /// To the agent pump, which writes them between the agent's lines.
    pub(super) answers: mpsc::UnboundedSender<Vec<u8>>,
}

/// The main loop's inputs and state.
#[derive(Debug)]
pub(super) struct MainLoop {
    core: Shared,
    agent: Agent,
    /// How long the agent may take to exit after the editor closed its side.
    grace: Duration,
    events: mpsc::UnboundedReceiver<Event>,
    transcripts: mpsc::UnboundedReceiver<Update>,
    /// Rung when the tap has read a call.
    tap_notify: Arc<Notify>,
    editor_closed_at: Option<tokio::time::Instant>,
    agent_stdout_open: bool,
    status: Option<ExitStatus>,
    /// Once the agent has exited, its stdout gets a short while to drain (a grandchild may
    /// hold it open forever).
    drain_deadline: Option<tokio::time::Instant>,
    held: Option<Held>,
    holds: HoldStats,
    /// Where acp-usage's own lines for the editor go (the agent pump writes them between the
    /// agent's lines).
    answers: mpsc::UnboundedSender<Vec<u8>>,
    /// When the updates for calls counted between turns go out: calls that end within
    /// [`BETWEEN_TURNS_COALESCE`] of each other share one.
    between_turns_at: Option<tokio::time::Instant>,
}

/// How long an update for a call counted between turns waits for more such calls.
const BETWEEN_TURNS_COALESCE: Duration = Duration::from_millis(100);

/// The longest a result whose transcript is in waits for the tap's report of a call the
/// transcript has, while the tap is still reading one (see [`MainLoop::hold_or_release`]).
const TAP_GRACE: Duration = Duration::from_millis(500);

impl MainLoop {
    pub(super) fn new(core: Shared, agent: Agent, grace: Duration, channels: Channels) -> MainLoop {
        let Channels { events, transcripts, tap_notify, answers } = channels;
        MainLoop {
            core,
            agent,
            grace,
            events,
            transcripts,
            tap_notify,
            editor_closed_at: None,
            agent_stdout_open: true,
            status: None,
            drain_deadline: None,
            held: None,
            holds: HoldStats::default(),
            answers,
            between_turns_at: None,
        }
    }

    /// Runs until the agent has exited and its stdout is done with; returns how it exited.
    pub(super) async fn run(mut self) -> anyhow::Result<ExitStatus> {
        // The pumps first: what the editor sent already (its `initialize`) goes to the agent
        // before the signal handlers are set up.
        tokio::task::yield_now().await;
        let mut signals = Signals::new()?;
        while self.status.is_none() || self.agent_stdout_open {
            let deadline = self.deadline();
            tokio::select! {
                Some(ev) = self.events.recv() => self.on_event(ev),
                res = &mut self.agent.exited, if self.status.is_none() => {
                    let st = res.ok().and_then(Result::ok).context("waiting for the agent")?;
                    tracing::info!("the agent exited with {}", agent::describe(st));
                    self.status = Some(st);
                    self.drain_deadline =
                        Some(tokio::time::Instant::now() + Duration::from_millis(500));
                }
                _ = sleep_until(deadline), if deadline.is_some() => self.on_deadline().await?,
                _ = self.tap_notify.notified() => {
                    lock(&self.core).drain_tap();
                    if let Some(h) = self.held.take() {
                        self.hold_or_release(h);
                    }
                    self.schedule_between_turns();
                }
                Some(update) = self.transcripts.recv() => {
                    self.on_transcript(update);
                    self.schedule_between_turns();
                }
                _ = sleep_until(self.between_turns_at), if self.between_turns_at.is_some() => {
                    self.send_between_turns();
                }
                _ = sleep_until(self.held.as_ref().map(|h| h.deadline)), if self.held.is_some() => {
                    let h = self.held.take().expect("guarded");
                    let mut c = lock(&self.core);
                    // The wait ran out: for the transcript, or (it is in) for the tap.
                    let timed_out = !c.observer.hold_ready(&h.session);
                    release(h, timed_out, &mut c, &mut self.holds);
                }
                signal = signals.recv() => self.agent.signal_group(signal),
            }
        }
        // Grandchildren may outlive the agent; the group goes with it.
        self.agent.signal_group(Signal::Kill);
        if let Some(h) = self.held.take() {
            // The agent is gone: what was held goes on as it is.
            release(h, true, &mut lock(&self.core), &mut self.holds);
        }
        self.holds.log();
        Ok(self.status.expect("loop ends with a status"))
    }

    /// Starts the short wait before the update for calls counted between turns, if there are
    /// any and it has not started.
    fn schedule_between_turns(&mut self) {
        if self.between_turns_at.is_none() && lock(&self.core).observer.has_between_turn_updates() {
            self.between_turns_at = Some(tokio::time::Instant::now() + BETWEEN_TURNS_COALESCE);
        }
    }

    /// Sends the updates for calls counted between turns.
    fn send_between_turns(&mut self) {
        self.between_turns_at = None;
        let mut c = lock(&self.core);
        let lines = c.observer.between_turn_updates();
        for line in lines {
            c.copies.line(crate::record::Dir::Injected, &line, false);
            // The agent pump is gone once the agent is: nothing more reaches the editor.
            let _ = self.answers.send(line);
        }
        c.save_learned();
    }

    /// The next of the editor's grace and the agent's drain deadline.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        let grace_deadline = self.editor_closed_at.map(|t| t + self.grace);
        match (grace_deadline, self.drain_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::EditorClosed => {
                tracing::info!("the editor closed its side; closing the agent's stdin");
                self.editor_closed_at = Some(tokio::time::Instant::now());
            }
            Event::AgentClosed => self.agent_stdout_open = false,
            // The transcript may have caught up while the line was on its way here.
            Event::Held(h) => self.hold_or_release(h),
        }
    }

    /// Lets a held line go once its session's transcript is in, and the tap has reported the
    /// turn's calls the transcript has: while the tap is still reading a call, a report it owes
    /// is on its way (it reports a call before the agent has its last bytes, but a response it
    /// can read only to its end reports later), and the turn waits for it up to [`TAP_GRACE`],
    /// so that the tap wins whichever source reports first. Otherwise the line waits on.
    fn hold_or_release(&mut self, mut h: Held) {
        let mut c = lock(&self.core);
        if !c.observer.hold_ready(&h.session) {
            self.held = Some(h);
            return;
        }
        c.drain_tap();
        let reading = c.tap_in_flight.as_ref().is_some_and(|n| *n.borrow() > 0);
        if reading && c.observer.tap_missing(&h.session) {
            h.deadline = h.deadline.min(tokio::time::Instant::now() + TAP_GRACE);
            self.held = Some(h);
            return;
        }
        release(h, false, &mut c, &mut self.holds);
    }

    /// The editor's grace or the agent's drain ran out.
    async fn on_deadline(&mut self) -> anyhow::Result<()> {
        if self.status.is_none() {
            tracing::info!(
                "the agent did not exit within {:?} of the editor closing; ending its process group",
                self.grace
            );
            let st = agent::end_group(&mut self.agent, Duration::from_millis(500)).await?;
            self.status = Some(st);
        }
        if self.drain_deadline.is_some_and(|d| d <= tokio::time::Instant::now())
            || self.editor_closed_at.is_some()
        {
            self.agent_stdout_open = false;
        }
        Ok(())
    }

    fn on_transcript(&mut self, update: Update) {
        lock(&self.core).observer.transcript_update(update);
        if let Some(h) = self.held.take() {
            self.hold_or_release(h);
        }
        lock(&self.core).send_commands();
    }
}

/// The signals acp-usage passes on to the agent's group instead of dying of them.
#[derive(Debug)]
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
    /// The console window is closing: the system ends this process within seconds.
    #[cfg(windows)]
    close: tokio::signal::windows::CtrlClose,
}

impl Signals {
    #[cfg(unix)]
    fn new() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            int: signal(SignalKind::interrupt()).context("SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("SIGTERM handler")?,
            hup: signal(SignalKind::hangup()).context("SIGHUP handler")?,
        })
    }

    #[cfg(windows)]
    fn new() -> anyhow::Result<Signals> {
        use tokio::signal::windows::{ctrl_c, ctrl_close};
        Ok(Signals {
            ctrl_c: ctrl_c().context("Ctrl-C handler")?,
            close: ctrl_close().context("console close handler")?,
        })
    }

    /// The next signal, as what to send the agent's group.
    #[cfg(unix)]
    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::Interrupt,
            _ = self.term.recv() => Signal::Terminate,
            _ = self.hup.recv() => Signal::Hangup,
        }
    }

    /// The next console event, as what to send the agent's group.
    #[cfg(windows)]
    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.ctrl_c.recv() => Signal::Interrupt,
            _ = self.close.recv() => Signal::Terminate,
        }
    }
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
    // The tap's calls first, as before any agent line is observed: every call of the turn it
    // read is in the turn when it ends, whether the transcript or the tap's last report came
    // first (the tap reports a call before the agent has its last bytes).
    core.drain_tap();
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
