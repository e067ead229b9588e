//! The transcript worker: one thread that follows every tracked session's files and sends what
//! they say back to the relay.
//!
//! It wakes on a command, on a change in a watched directory (inotify, through `notify`), and on
//! a tick: every [`SLOW_TICK`] for all sessions, every [`HOLD_TICK`] for a session whose turn
//! result the relay is holding. File I/O stays here, off the relay's path; the relay only sends
//! small commands and receives parsed events.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use acp_usage_core::transcript::{Event, FileRole, Parser};
use notify::Watcher as _;

use super::locate::Locator;
use super::opencode::OpencodeDb;
use super::tail::Tail;
use super::{Format, Locations, Store};

/// How often every session is read when nothing else wakes the worker.
const SLOW_TICK: Duration = Duration::from_millis(1000);
/// How often a session whose result is held is read.
const HOLD_TICK: Duration = Duration::from_millis(5);
/// Least time between two searches for a session's files (a Codex search walks day folders).
const SEARCH_EVERY: Duration = Duration::from_millis(250);
/// The same while a result is held.
const SEARCH_EVERY_HELD: Duration = Duration::from_millis(20);
/// Unreadable lines tolerated before a transcript that yielded no call is given up.
const MAX_BAD_LINES: u32 = 20;

/// What the relay asks of the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Follow a session's transcript; its existing history is read first.
    Track {
        /// The ACP session id (the agents' own id too).
        session: String,
        /// Its agent's format.
        format: &'static Format,
    },
    /// Read the session's files now (its turn's traffic says they are growing).
    Poll(String),
    /// Read the session's files now and keep reading them often: a result waits for them.
    Hold(String),
    /// The held result went on.
    Release(String),
    /// The agent started a new transcript for the session at this time, in Unix ms (Claude
    /// Code's `/clear`): find it beside the old one.
    Restarted(String, i64),
    /// Stop following the session.
    Forget(String),
}

/// What the worker tells the relay.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The ACP session.
    pub session: String,
    /// What happened.
    pub kind: UpdateKind,
}

/// See [`Update`].
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateKind {
    /// Events read from the session's files, in order.
    Events {
        /// The events (may be empty when only `at_end` news is sent, for a held result).
        events: Vec<Event>,
        /// Whether the session's main transcript has been found.
        found: bool,
        /// Whether everything written so far has been read.
        at_end: bool,
        /// This read began after the last [`Command::Hold`], looked for new files (a subagent's
        /// may have appeared) and reached the end: a held result can trust it.
        settled: bool,
    },
    /// The transcript cannot be used (said once per session).
    Failed(String),
}

enum Msg {
    Cmd(Command),
    Changed,
}

/// The handle the relay keeps.
#[derive(Debug)]
pub struct Worker {
    tx: mpsc::Sender<Msg>,
    rounds: Arc<AtomicU64>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Cmd(c) => write!(f, "{c:?}"),
            Msg::Changed => f.write_str("Changed"),
        }
    }
}

impl Worker {
    /// Starts the worker thread; updates go to `updates`.
    pub fn start(
        locs: Locations,
        updates: tokio::sync::mpsc::UnboundedSender<Update>,
    ) -> std::io::Result<Worker> {
        let (tx, rx) = mpsc::channel();
        let notify_tx = tx.clone();
        let rounds = Arc::new(AtomicU64::new(0));
        let counted = rounds.clone();
        // The watcher (inotify and a thread of its own) is made on the worker's thread: the
        // relay's goes on to pass on the editor's first request meanwhile.
        std::thread::Builder::new().name("transcripts".into()).spawn(move || {
            let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if res.is_ok_and(|event| may_add_data(&event.kind)) {
                    let _ = notify_tx.send(Msg::Changed);
                }
            });
            let watcher = match watcher {
                Ok(w) => Some(w),
                Err(err) => {
                    tracing::info!(
                        "no file notifications ({err}); transcripts are read on traffic and on a timer"
                    );
                    None
                }
            };
            State {
                locs,
                locator: Locator::default(),
                sessions: HashMap::new(),
                watcher,
                watched: HashSet::new(),
                updates,
                rounds: counted,
            }
            .run(rx)
        })?;
        Ok(Worker { tx, rounds })
    }

    /// How many times the worker has read its sessions' files so far: about once a second
    /// while nothing is written or held (tests check that it does not spin).
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// Sends a command (never blocks; a stopped worker is ignored).
    pub fn send(&self, cmd: Command) {
        let _ = self.tx.send(Msg::Cmd(cmd));
    }
}

/// Whether an event in a watched directory may mean something new to read. Opening or reading a
/// file may not, and the worker's own reads are such events (inotify reports opens and closes
/// without writes): waking on them, every read would wake the next, and the worker would spin
/// on a core for as long as it follows a session. A close after writing counts.
fn may_add_data(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// A fresh parser of the format's lines (`None` for a database).
pub fn parser_for(format: &Format) -> Option<Box<dyn Parser>> {
    match format.store {
        Store::Files(files) => Some((files.parser)()),
        Store::OpencodeDb => None,
    }
}

struct State {
    locs: Locations,
    locator: Locator,
    sessions: HashMap<String, Tracked>,
    watcher: Option<notify::RecommendedWatcher>,
    watched: HashSet<PathBuf>,
    updates: tokio::sync::mpsc::UnboundedSender<Update>,
    /// Rounds that read at least one session ([`Worker::rounds`]).
    rounds: Arc<AtomicU64>,
}

struct Tracked {
    format: &'static Format,
    /// The session's parser (formats whose dedup spans files: a subagent's file may replay the
    /// main file's calls).
    parser: Option<Box<dyn Parser>>,
    main: Option<Tail>,
    /// Transcripts the agent started later for the same session (after a `/clear`).
    restarts: Vec<Tail>,
    /// A restart announced and not found yet: since when to look, in Unix ms.
    restart_since: Option<i64>,
    /// Subagents' files, each with its own parser where the format keeps state per file.
    subagents: Vec<(Tail, Option<Box<dyn Parser>>)>,
    db: Option<OpencodeDb>,
    held: bool,
    /// A hold came and no read has looked for new files since.
    hold_search_pending: bool,
    dirty: bool,
    failed: bool,
    bad_lines: u32,
    calls_seen: u64,
    last_search: Option<Instant>,
}

impl State {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let mut last_round = Instant::now();
        loop {
            let held = self.sessions.values().any(|s| s.held);
            let timeout = if held { HOLD_TICK } else { SLOW_TICK };
            match rx.recv_timeout(timeout) {
                Ok(msg) => {
                    self.apply(msg);
                    // Take everything that is already queued before reading.
                    while let Ok(msg) = rx.try_recv() {
                        self.apply(msg);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            let all = last_round.elapsed() >= SLOW_TICK;
            if all {
                last_round = Instant::now();
            }
            let ids: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, s)| !s.failed && (all || s.dirty || s.held))
                .map(|(id, _)| id.clone())
                .collect();
            if !ids.is_empty() {
                self.rounds.fetch_add(1, Ordering::Relaxed);
            }
            for id in ids {
                self.read(&id);
            }
        }
    }

    fn apply(&mut self, msg: Msg) {
        match msg {
            Msg::Changed => self.sessions.values_mut().for_each(|s| s.dirty = true),
            Msg::Cmd(Command::Track { session, format }) => {
                let parser = parser_for(format);
                self.sessions.entry(session).or_insert(Tracked {
                    format,
                    parser,
                    main: None,
                    restarts: Vec::new(),
                    restart_since: None,
                    subagents: Vec::new(),
                    db: None,
                    held: false,
                    hold_search_pending: false,
                    dirty: true,
                    failed: false,
                    bad_lines: 0,
                    calls_seen: 0,
                    last_search: None,
                });
            }
            Msg::Cmd(Command::Poll(id)) => {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.dirty = true;
                }
            }
            Msg::Cmd(Command::Hold(id)) => {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.held = true;
                    s.dirty = true;
                    // The next read looks for new files first: a subagent's file may have
                    // appeared since the last search.
                    s.last_search = None;
                    s.hold_search_pending = true;
                } else {
                    // Not tracked (e.g. failed and forgotten): let the relay go on at once.
                    self.send(&id, UpdateKind::Failed("not followed".into()));
                }
            }
            Msg::Cmd(Command::Release(id)) => {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.held = false;
                }
            }
            Msg::Cmd(Command::Restarted(id, since)) => {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.restart_since = Some(since);
                    s.dirty = true;
                }
            }
            Msg::Cmd(Command::Forget(id)) => {
                self.sessions.remove(&id);
            }
        }
    }

    fn send(&self, session: &str, kind: UpdateKind) {
        let _ = self.updates.send(Update { session: session.to_string(), kind });
    }

    fn read(&mut self, id: &str) {
        let Some(mut s) = self.sessions.remove(id) else { return };
        s.dirty = false;
        let mut events = Vec::new();
        let pending = s.hold_search_pending;
        let result = match s.format.store {
            Store::OpencodeDb => self.read_db(id, &mut s, &mut events),
            Store::Files(_) => self.read_files(id, &mut s, &mut events),
        };
        match result {
            Ok(at_end) => {
                let found = s.main.is_some() || s.db.is_some();
                let settled = pending && !s.hold_search_pending && at_end;
                if !events.is_empty() || s.held {
                    tracing::trace!(
                        session = id,
                        events = events.len(),
                        found,
                        at_end,
                        settled,
                        "transcript read"
                    );
                    self.send(id, UpdateKind::Events { events, found, at_end, settled });
                }
            }
            Err(why) => {
                tracing::warn!(
                    session = id,
                    format = s.format.name,
                    "cannot read the agent's transcript ({why}); using the numbers the agent reports over ACP"
                );
                s.failed = true;
                s.held = false;
                self.send(id, UpdateKind::Failed(why));
            }
        }
        self.sessions.insert(id.to_string(), s);
    }

    /// Reads new lines of the session's files; true when everything written was read.
    fn read_files(
        &mut self,
        id: &str,
        s: &mut Tracked,
        events: &mut Vec<Event>,
    ) -> Result<bool, String> {
        let every = if s.held { SEARCH_EVERY_HELD } else { SEARCH_EVERY };
        if s.last_search.is_none_or(|t| t.elapsed() >= every) {
            s.last_search = Some(Instant::now());
            s.hold_search_pending = false;
            let Store::Files(files) = s.format.store else { return Ok(true) };
            let found = match self.locs.of(s.format) {
                Some(dir) => (files.find)(&mut self.locator, &dir, id),
                None => Default::default(),
            };
            if let Some(path) = found.main
                && s.main.as_ref().is_none_or(|t| t.path() != path)
            {
                tracing::info!(session = id, path = %path.display(), "following the agent's transcript");
                self.watch(path.parent());
                s.main = Some(match s.format.whole_document() {
                    true => Tail::whole(path),
                    false => Tail::new(path),
                });
            }
            for path in found.subagents {
                if !s.subagents.iter().any(|(t, _)| t.path() == path) {
                    tracing::debug!(session = id, path = %path.display(), "following a subagent's transcript");
                    self.watch(path.parent());
                    // A format whose lines do not say which file they are from (Codex's) needs a
                    // parser per file.
                    let own = files.parser_per_file.then(|| parser_for(s.format)).flatten();
                    s.subagents.push((Tail::new(path), own));
                }
            }
        }
        let restarted = match s.format.store {
            Store::Files(files) => files.restarted,
            Store::OpencodeDb => None,
        };
        if let (Some(since), Some(main), Some(restarted)) =
            (s.restart_since, s.main.as_ref(), restarted)
        {
            let known: Vec<&Path> = s.restarts.iter().map(Tail::path).collect();
            if let Some(path) = restarted(main.path(), &known, since) {
                tracing::info!(session = id, path = %path.display(), "the agent started a new transcript for the session (/clear); following it");
                s.restarts.push(Tail::new(path));
                s.restart_since = None;
            }
        }
        let Some(shared) = s.parser.as_mut() else {
            return Err(format!("no {} transcript parser", s.format.name));
        };
        let mut at_end = true;
        let tails =
            s.main.iter_mut().chain(s.restarts.iter_mut()).map(|t| (FileRole::Main, t, None));
        let tails = tails
            .chain(s.subagents.iter_mut().map(|(t, own)| (FileRole::Subagent, t, own.as_mut())));
        for (role, tail, own) in tails {
            let parser: &mut Box<dyn Parser> = match own {
                Some(p) => p,
                None => &mut *shared,
            };
            let chunk = match tail.read() {
                Ok(c) => c,
                // A subagent's file that went away does not spoil the session.
                Err(err) if role == FileRole::Subagent => {
                    tracing::debug!(path = %tail.path().display(), "{err}");
                    continue;
                }
                Err(err) => return Err(format!("{}: {err}", tail.path().display())),
            };
            at_end &= chunk.at_end;
            for line in chunk.lines() {
                let before = events.len();
                if let Err(err) = parser.line(role, line, events) {
                    s.bad_lines += 1;
                    if s.bad_lines == 1 {
                        tracing::warn!(path = %tail.path().display(), "skipping an unreadable transcript line: {err}");
                    }
                    if s.bad_lines >= MAX_BAD_LINES && s.calls_seen == 0 {
                        return Err(format!(
                            "{} unreadable lines, no model call read ({err})",
                            s.bad_lines
                        ));
                    }
                }
                s.calls_seen +=
                    events[before..].iter().filter(|e| matches!(e, Event::Call(_))).count() as u64;
            }
        }
        Ok(at_end)
    }

    fn read_db(
        &mut self,
        id: &str,
        s: &mut Tracked,
        events: &mut Vec<Event>,
    ) -> Result<bool, String> {
        if s.db.is_none() {
            let Some(path) = self.locs.of(s.format) else {
                return Err(format!("no {} database location (set HOME)", s.format.name));
            };
            if !path.exists() {
                // Not created yet: the agent writes it on its first session.
                return Ok(true);
            }
            let db = OpencodeDb::open(&path).map_err(|e| format!("{}: {e:#}", path.display()))?;
            tracing::info!(session = id, path = %path.display(), format = s.format.name, "following the agent's database");
            self.watch(path.parent());
            s.db = Some(db);
        }
        // One query covers the session and its child (subagent) sessions.
        s.hold_search_pending = false;
        let db = s.db.as_mut().expect("opened above");
        db.read_new(id, events).map_err(|e| format!("{e:#}"))?;
        Ok(true)
    }

    fn watch(&mut self, dir: Option<&Path>) {
        let (Some(dir), Some(w)) = (dir, self.watcher.as_mut()) else { return };
        if self.watched.insert(dir.to_path_buf())
            && let Err(err) = w.watch(dir, notify::RecursiveMode::NonRecursive)
        {
            tracing::debug!(dir = %dir.display(), "cannot watch: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, ModifyKind};

    use super::may_add_data;

    #[test]
    fn reads_do_not_wake_the_worker_and_writes_do() {
        for quiet in [
            AccessKind::Open(AccessMode::Any),
            AccessKind::Close(AccessMode::Read),
            AccessKind::Read,
            AccessKind::Any,
        ] {
            assert!(!may_add_data(&EventKind::Access(quiet)), "{quiet:?}");
        }
        for change in [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Create(CreateKind::File),
            EventKind::Any,
        ] {
            assert!(may_add_data(&change), "{change:?}");
        }
    }
}
