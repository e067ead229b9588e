//! `acp-usage watch [--once] [--ledger FILE]`: a live view of the sessions that run now and of
//! those active in the last hour, across every acp-usage process, read from the ledger.
//!
//! No polling of the file: the ledger's directory is watched (`notify`; every commit touches
//! `ledger.db-wal`), redraws are throttled, and a slow tick ages sessions out of the hour and
//! notices a relay that died without closing its sessions (its pid is gone). When stdout is not
//! a terminal, or with `--once`, it prints one plain-text snapshot and exits.
//!
//! The reading half (sessions with their costs, today's total, liveness) is shared with
//! `status`.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};
use rusqlite::{OptionalExtension, params};
#[cfg(unix)]
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
#[cfg(unix)]
use signal_hook::iterator::Signals;

use crate::agents::Profile;
use crate::sinks::ledger::{self, Store, process_alive};
use acp_usage_core::limits::Limit;

/// How far back a session that no longer runs is still shown.
pub const RECENT: Duration = Duration::from_secs(3600);
/// The slow tick: sessions age out of the hour and dead relays are noticed without any write.
const TICK: Duration = Duration::from_secs(5);
/// Redraws wait this long after a change, so a burst of commits is one redraw.
const THROTTLE: Duration = Duration::from_millis(150);

/// What `watch` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The ledger (default: [`ledger::path`]).
    pub ledger: Option<PathBuf>,
    /// Print one plain-text snapshot and exit, even on a terminal.
    pub once: bool,
}

/// Runs the command.
pub fn run(opts: &Options) -> anyhow::Result<ExitCode> {
    let path = ledger_path(opts.ledger.as_deref())?;
    if opts.once || !io::stdout().is_terminal() {
        return once(&path);
    }
    live(&path)
}

/// `--ledger`, else the ledger the relays write; an error when it is turned off.
pub(crate) fn ledger_path(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => ledger::path().with_context(|| {
            format!(
                "no ledger: {} is `off` (or no home directory is known); give one with --ledger",
                ledger::LEDGER_ENV
            )
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the ledger.

/// A sum of call costs. Calls the catalog could not price have no cost: they make the sum a
/// lower bound, and a sum of nothing but them is unknown (never shown as $0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Money {
    /// USD over the priced calls.
    pub usd: f64,
    /// Call rows summed.
    pub rows: u64,
    /// Of which had no cost.
    pub unpriced: u64,
}

impl Money {
    /// `$0.31`; `$0.31+` when some calls have no price; `?` when none has one.
    pub fn fmt(&self) -> String {
        if self.rows > 0 && self.unpriced == self.rows {
            return "?".to_owned();
        }
        let plus = if self.unpriced > 0 { "+" } else { "" };
        format!("${:.2}{plus}", self.usd)
    }
}

/// A session as `watch` and `status` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionView {
    /// The ACP session id.
    pub session_id: String,
    /// The agent's profile name (`claude`, `codex`, `generic`, ...).
    pub agent: String,
    /// `initialize`'s `agentInfo.name`.
    pub agent_name: Option<String>,
    /// The session's working directory.
    pub project: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// The model in use.
    pub model: Option<String>,
    /// Last activity (Unix ms).
    pub last_seen: i64,
    /// Prompt turns.
    pub turns: u64,
    /// Tokens in context, as last sent to the editor.
    pub used: Option<u64>,
    /// The context window.
    pub size: Option<u64>,
    /// The cost of the session's calls.
    pub cost: Money,
    /// Whether an acp-usage process that has it open is alive.
    pub running: bool,
    /// The provider of the subscription windows last observed in this session, if any.
    pub limit_provider: Option<String>,
}

impl SessionView {
    /// The agent's name to show: the profile's, or the agent's own for the generic profile.
    pub fn agent_label(&self) -> &str {
        match &self.agent_name {
            Some(name) if self.agent == "generic" && !name.is_empty() => name,
            _ => &self.agent,
        }
    }

    /// `used` as a share of `size` in whole percent, when both are known.
    pub fn percent(&self) -> Option<u64> {
        match (self.used, self.size) {
            (Some(u), Some(s)) if s > 0 => Some((u as f64 * 100.0 / s as f64).round() as u64),
            _ => None,
        }
    }
}

/// What `watch` shows at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The cost of every call made since local midnight.
    pub today: Money,
    /// Running sessions first, then the rest; the most recently active first within each.
    pub sessions: Vec<SessionView>,
    /// The latest observation of every subscription window.
    pub limits: Vec<Limit>,
}

impl Snapshot {
    /// How many of the sessions run now.
    pub fn running(&self) -> usize {
        self.sessions.iter().filter(|s| s.running).count()
    }
}

/// The sessions running now (their process alive) or active since `now - RECENT`, and the
/// cost of every call since `today` (Unix ms).
pub fn snapshot(store: &Store, now: i64, today: i64) -> rusqlite::Result<Snapshot> {
    if !has_schema(store)? {
        return Ok(Snapshot::default());
    }
    let since = now - RECENT.as_millis() as i64;
    let mut sessions = sessions(store, "WHERE pid IS NOT NULL OR last_seen >= ?1", since)?;
    sessions.retain(|s| s.running || s.last_seen >= since);
    // A stable sort keeps the query's most-recent-first order within each group.
    sessions.sort_by_key(|s| !s.running);
    Ok(Snapshot { today: spent_since(store, today)?, sessions, limits: store.latest_limits(now)? })
}

/// Whether the ledger has its tables yet: a file that a first relay is still creating has not.
pub(crate) fn has_schema(store: &Store) -> rusqlite::Result<bool> {
    Ok(ledger::schema::version(store.conn())? > 0)
}

/// Sessions matching `filter` (a `WHERE` clause over `sessions`, with `?1` bound to `arg`),
/// the most recently active first, each with its calls' cost.
pub(crate) fn sessions(
    store: &Store,
    filter: &str,
    arg: i64,
) -> rusqlite::Result<Vec<SessionView>> {
    // A ledger no relay of this version has opened yet (reading never migrates) has no start
    // times: liveness falls back to the pid alone.
    let version = ledger::schema::version(store.conn())?;
    let pid_start = if version >= 2 { "s.pid_start" } else { "NULL" };
    // The provider of the latest window observed in the session (files from schema 3 on).
    let limit_provider = if version >= 3 {
        "(SELECT provider FROM limits l WHERE l.session = s.session_id ORDER BY l.at DESC LIMIT 1)"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT s.session_id, s.agent, s.agent_name, s.project, s.title, s.model, s.last_seen,
                s.turns, s.used, s.size, s.pid,
                COALESCE(SUM(c.cost), 0), COUNT(c.id), COUNT(c.id) - COUNT(c.cost), {pid_start},
                {limit_provider}
         FROM (SELECT * FROM sessions {filter}) s LEFT JOIN calls c ON c.session = s.id
         GROUP BY s.id ORDER BY s.last_seen DESC, s.id DESC"
    );
    let mut stmt = store.conn().prepare(&sql)?;
    let rows = stmt.query_map(params![arg], |r| {
        let pid: Option<i64> = r.get(10)?;
        let started: Option<i64> = r.get(14)?;
        Ok(SessionView {
            session_id: r.get(0)?,
            agent: r.get(1)?,
            agent_name: r.get(2)?,
            project: r.get(3)?,
            title: r.get(4)?,
            model: r.get(5)?,
            last_seen: r.get(6)?,
            turns: r.get::<_, i64>(7)?.max(0) as u64,
            used: r.get::<_, Option<i64>>(8)?.map(|v| v.max(0) as u64),
            size: r.get::<_, Option<i64>>(9)?.map(|v| v.max(0) as u64),
            cost: Money {
                usd: r.get(11)?,
                rows: r.get::<_, i64>(12)? as u64,
                unpriced: r.get::<_, i64>(13)? as u64,
            },
            running: pid.is_some_and(|pid| process_alive(pid, started)),
            limit_provider: r.get(15)?,
        })
    })?;
    rows.collect()
}

/// The most recently active session, if any.
pub(crate) fn latest(store: &Store) -> rusqlite::Result<Option<SessionView>> {
    // The subquery picks one row through the `last_seen` index before the join sums its calls.
    let row: Option<i64> = store
        .conn()
        .query_row("SELECT id FROM sessions ORDER BY last_seen DESC, id DESC LIMIT 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    match row {
        Some(id) => Ok(sessions(store, "WHERE id = ?1", id)?.pop()),
        None => Ok(None),
    }
}

/// The cost of every call at or after `since` (Unix ms), every session and process.
pub(crate) fn spent_since(store: &Store, since: i64) -> rusqlite::Result<Money> {
    store.conn().query_row(
        "SELECT COALESCE(SUM(cost), 0), COUNT(*), COUNT(*) - COUNT(cost) FROM calls WHERE at >= ?1",
        [since],
        |r| {
            Ok(Money {
                usd: r.get(0)?,
                rows: r.get::<_, i64>(1)? as u64,
                unpriced: r.get::<_, i64>(2)? as u64,
            })
        },
    )
}

/// Local midnight today, in Unix ms: where "today" starts.
pub(crate) fn today_start() -> i64 {
    ledger::period_start_ms(false)
}

// ---------------------------------------------------------------------------------------------
// Formatting, shared by the live view, the snapshot and `status`.

/// Token counts as people read them: `950`, `1.5k`, `84k`, `200k`, `1M`, `1.05M`.
pub(crate) fn fmt_tokens(n: u64) -> String {
    fn trim(s: String) -> String {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s }
    }
    match n {
        0..1_000 => n.to_string(),
        1_000..10_000 => format!("{}k", trim(format!("{:.1}", n as f64 / 1e3))),
        // Rounding up to 1000k reads as 1M.
        10_000..999_500 => format!("{}k", (n as f64 / 1e3).round()),
        _ => format!("{}M", trim(format!("{:.2}", n as f64 / 1e6))),
    }
}

/// How long ago `then` was: `now`, `12s`, `3m`, `2h`, `4d`.
pub(crate) fn fmt_ago(now: i64, then: i64) -> String {
    let s = (now - then).max(0) / 1000;
    match s {
        0..5 => "now".to_owned(),
        5..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}

/// A project directory shortened to at most `max` characters: the home directory as `~`, then
/// leading components dropped (`…/acp-usage/crates`), the last component kept whole.
pub(crate) fn short_project(path: &str, max: usize) -> String {
    let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
    let p = match home.as_deref().and_then(|h| path.strip_prefix(h)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_owned(),
    };
    if p.chars().count() <= max {
        return p;
    }
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    let mut out = String::new();
    for part in parts.iter().rev() {
        let next = if out.is_empty() { (*part).to_owned() } else { format!("{part}/{out}") };
        if next.chars().count() + 2 > max && !out.is_empty() {
            break;
        }
        out = next;
    }
    format!("…/{out}")
}

/// `used` of `size` as a bar of `width` cells.
fn bar(percent: u64, width: usize) -> String {
    let full = ((percent.min(100) as usize * width) + 50) / 100;
    format!("{}{}", "█".repeat(full), "░".repeat(width - full))
}

const HEADERS: [&str; 9] =
    ["STATE", "AGENT", "MODEL", "CONTEXT", "TURNS", "COST", "LIMIT", "PROJECT", "LAST"];
const BAR_WIDTH: usize = 10;
const PROJECT_WIDTH: usize = 32;

/// The cells of one session's row, as text, with a context bar of `bar_width` cells (none when
/// 0) and the project shortened to `project_width`.
fn cells(
    s: &SessionView,
    limits: &[Limit],
    now: i64,
    bar_width: usize,
    project_width: usize,
) -> [String; 9] {
    let gauge =
        |p: u64| if bar_width > 0 { format!("{} ", bar(p, bar_width)) } else { String::new() };
    let context = match (s.percent(), s.used, s.size.filter(|&z| z > 0)) {
        (Some(p), Some(u), Some(z)) => {
            format!("{}{p:>3}% {}/{}", gauge(p), fmt_tokens(u), fmt_tokens(z))
        }
        (_, _, Some(z)) => {
            format!("{}     ?/{}", " ".repeat(gauge(0).chars().count()), fmt_tokens(z))
        }
        _ => "-".to_owned(),
    };
    [
        if s.running { "running" } else { "ended" }.to_owned(),
        s.agent_label().to_owned(),
        s.model.clone().unwrap_or_else(|| "-".to_owned()),
        context,
        s.turns.to_string(),
        s.cost.fmt(),
        session_limit(s, limits, now).map_or_else(|| "-".to_owned(), Limit::short),
        s.project.as_deref().map_or_else(|| "-".to_owned(), |p| short_project(p, project_width)),
        fmt_ago(now, s.last_seen),
    ]
}

fn summary(snap: &Snapshot, now: i64) -> String {
    let running = snap.running();
    let recent = snap.sessions.len() - running;
    let mut line =
        format!("today {} · {running} running · {recent} more in the last hour", snap.today.fmt());
    if let Some(l) = current_fullest(&snap.limits, now) {
        line.push_str(&format!(" · limit {}", limit_text(l, now)));
    }
    line
}

/// The provider whose subscription windows an agent's sessions fill, for the agents that
/// have one login of their own.
fn provider_of(agent: &str) -> Option<&'static str> {
    Some(Profile::named(agent)?.plan()?.provider)
}

/// A window for a status line: `5h 73%`, and when its forecast says it runs out, the local
/// time: `5h 73% runs out 11:52`.
pub fn limit_text(l: &Limit, now_ms: i64) -> String {
    let mut text = l.short();
    if let Some(out) = l.runs_out_at.and_then(|s| chrono::DateTime::from_timestamp(s, 0)) {
        let local = out.with_timezone(&chrono::Local);
        let format = if out.timestamp() - now_ms / 1000 < 86_400 { "%H:%M" } else { "%a %H:%M" };
        text.push_str(&format!(" runs out {}", local.format(format)));
    }
    text
}

/// The fullest live window of the session's provider (else of any window seen in it).
fn session_limit<'a>(s: &SessionView, limits: &'a [Limit], now: i64) -> Option<&'a Limit> {
    let provider = provider_of(&s.agent).or(s.limit_provider.as_deref())?;
    current_fullest(limits.iter().filter(|l| l.provider == provider), now)
}

/// The snapshot as plain text: a summary line, then a table (nothing but the summary and a
/// note when no session is shown).
pub fn render_text(snap: &Snapshot, now: i64) -> String {
    let mut out = summary(snap, now);
    out.push('\n');
    if snap.sessions.is_empty() {
        out.push_str("no session running or active in the last hour\n");
        return out;
    }
    let rows: Vec<[String; 9]> = snap
        .sessions
        .iter()
        .map(|s| cells(s, &snap.limits, now, BAR_WIDTH, PROJECT_WIDTH))
        .collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let header = HEADERS.map(str::to_owned);
    for row in std::iter::once(&header).chain(&rows) {
        // Numbers right-aligned, text left.
        out.push_str(&aligned(row, &widths, &[4, 5]));
        out.push('\n');
    }
    out
}

/// One row of a plain-text table: each cell padded to its column's width, the columns in
/// `right` right-aligned, two spaces between columns, no trailing blanks.
pub(crate) fn aligned(row: &[String], widths: &[usize], right: &[usize]) -> String {
    let mut line = String::new();
    for (k, (cell, w)) in row.iter().zip(widths).enumerate() {
        let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
        if right.contains(&k) {
            line.push_str(&pad);
            line.push_str(cell);
        } else {
            line.push_str(cell);
            line.push_str(&pad);
        }
        line.push_str("  ");
    }
    line.trim_end().to_owned()
}

/// `--once`, or stdout not a terminal: one snapshot.
fn once(path: &Path) -> anyhow::Result<ExitCode> {
    if !path.exists() {
        eprintln!(
            "acp-usage: no ledger at {} yet: it appears when an acp-usage relay first records a session",
            path.display()
        );
        return Ok(ExitCode::from(1));
    }
    let store =
        Store::open_read(path).with_context(|| format!("opening the ledger {}", path.display()))?;
    let now = ledger::now_ms();
    let snap = snapshot(&store, now, today_start())
        .with_context(|| format!("reading the ledger {}", path.display()))?;
    match io::stdout().lock().write_all(render_text(&snap, now).as_bytes()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `acp-usage watch | head` closes the pipe early; that is not an error.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err.into()),
    }
}

// ---------------------------------------------------------------------------------------------
// The live view.

/// What wakes the live view.
enum Wake {
    /// Something in the ledger's directory changed.
    Ledger,
    /// A terminal event.
    Input(Event),
    /// The terminal cannot be read any more.
    InputGone,
    /// SIGTERM, SIGHUP or SIGINT from outside (in raw mode Ctrl-C is a key, not a signal).
    #[cfg(unix)]
    Signal(i32),
}

/// The ledger as the live view reads it: one read-only connection, reopened when the file is
/// replaced (a new inode) or goes away, so a refresh costs three small queries.
struct Reader {
    path: PathBuf,
    store: Option<(Store, u64)>,
}

/// What the live view shows.
enum State {
    /// No file yet.
    Missing,
    /// The file could not be read (locked, corrupt, newer schema): the error.
    Failed(String),
    /// A snapshot.
    Read(Snapshot),
}

impl Reader {
    fn read(&mut self, now: i64, today: i64) -> State {
        let Ok(meta) = std::fs::metadata(&self.path) else {
            self.store = None;
            return State::Missing;
        };
        if self.store.as_ref().is_none_or(|(_, ino)| *ino != file_id(&meta)) {
            match Store::open_read(&self.path) {
                Ok(s) => self.store = Some((s, file_id(&meta))),
                Err(err) => return State::Failed(err.to_string()),
            }
        }
        let (store, _) = self.store.as_ref().expect("opened above");
        match snapshot(store, now, today) {
            Ok(s) => State::Read(s),
            Err(err) => {
                // Reopen next time: the file may have been replaced under the same inode number.
                self.store = None;
                State::Failed(err.to_string())
            }
        }
    }
}

/// What tells the ledger from a file that replaced it: its inode.
#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.ino()
}

/// What tells the ledger from a file that replaced it: its creation time (std has the file
/// index only on nightly).
#[cfg(windows)]
fn file_id(meta: &std::fs::Metadata) -> u64 {
    use std::os::windows::fs::MetadataExt;
    meta.creation_time()
}

/// Leaves the alternate screen and raw mode however the view ends: a return, an error, or a
/// panic (ratatui's panic hook restores the terminal before the message is printed, and the
/// unwinding drops this).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

fn live(path: &Path) -> anyhow::Result<ExitCode> {
    let (tx, rx) = mpsc::channel();
    spawn_input(tx.clone())?;

    // Without this, `kill` or a closed terminal window would end the process by the signal's
    // default action, before the guard could leave raw mode and the alternate screen. (A
    // Windows console has no such state to leave once its window is gone, and raw mode there
    // reads Ctrl-C as a key.)
    #[cfg(unix)]
    spawn_signals(tx.clone())?;

    let guard = TerminalGuard;
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let mut reader = Reader { path: path.to_path_buf(), store: None };
    let mut watcher: Option<notify::RecommendedWatcher> = None;
    let mut state = State::Missing;
    let mut refresh_at = Some(Instant::now());
    let mut next_tick = Instant::now();
    let mut now = ledger::now_ms();
    loop {
        let mut draw = false;
        let t = Instant::now();
        if t >= next_tick {
            // The directory may have appeared since (a first relay creates it).
            if watcher.is_none() {
                watcher = watch_dir(path, tx.clone());
            }
            refresh_at = Some(t);
            next_tick = t + TICK;
        }
        if refresh_at.is_some_and(|r| t >= r) {
            now = ledger::now_ms();
            state = reader.read(now, today_start());
            refresh_at = None;
            draw = true;
        }
        loop {
            if draw {
                terminal.draw(|f| view(f, path, &state, now))?;
                draw = false;
            }
            let deadline = refresh_at.map_or(next_tick, |r| r.min(next_tick));
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(wake) => {
                    if let Some(code) = on_wake(wake, &mut refresh_at, &mut draw) {
                        drop(terminal);
                        drop(guard);
                        return Ok(code);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    unreachable!("the loop holds a sender")
                }
            }
        }
    }
}

/// Reads terminal input on its own thread, so the main loop sleeps on one channel for both
/// input and ledger changes. The thread ends with the process.
fn spawn_input(tx: mpsc::Sender<Wake>) -> io::Result<()> {
    std::thread::Builder::new().name("acp-usage-watch-input".into()).spawn(move || {
        loop {
            let msg = match event::read() {
                Ok(ev) => Wake::Input(ev),
                Err(_) => Wake::InputGone,
            };
            let gone = matches!(msg, Wake::InputGone);
            if tx.send(msg).is_err() || gone {
                break;
            }
        }
    })?;
    Ok(())
}

/// Turns SIGTERM, SIGHUP and SIGINT into a message to the main loop, which then leaves the
/// terminal as it found it (see `live`).
#[cfg(unix)]
fn spawn_signals(tx: mpsc::Sender<Wake>) -> anyhow::Result<()> {
    let mut signals =
        Signals::new([SIGTERM, SIGHUP, SIGINT]).context("installing signal handlers")?;
    std::thread::Builder::new().name("acp-usage-watch-signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let _ = tx.send(Wake::Signal(sig));
        }
    })?;
    Ok(())
}

/// What one message to the main loop does: schedules a read (`refresh_at`), asks for a redraw
/// (`draw`), or ends the view with the exit code returned.
fn on_wake(wake: Wake, refresh_at: &mut Option<Instant>, draw: &mut bool) -> Option<ExitCode> {
    match wake {
        Wake::Ledger => {
            // Throttled, not postponed: a steady stream of commits still redraws.
            refresh_at.get_or_insert_with(|| Instant::now() + THROTTLE);
        }
        Wake::Input(Event::Key(k)) if quits(&k) => return Some(ExitCode::SUCCESS),
        Wake::Input(Event::Key(k))
            if k.kind == KeyEventKind::Press && k.code == KeyCode::Char('r') =>
        {
            *refresh_at = Some(Instant::now());
        }
        Wake::Input(Event::Resize(..)) => *draw = true,
        Wake::Input(_) => {}
        Wake::InputGone => return Some(ExitCode::SUCCESS),
        // The shell's convention for "ended by a signal".
        #[cfg(unix)]
        Wake::Signal(sig) => return Some(ExitCode::from(128u8.saturating_add(sig as u8))),
    }
    None
}

fn quits(k: &KeyEvent) -> bool {
    k.kind == KeyEventKind::Press
        && match k.code {
            KeyCode::Char('q' | 'Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// Watches the ledger's directory (the file itself may not exist yet, and SQLite commits to
/// `ledger.db-wal` beside it). `None` while the directory does not exist.
fn watch_dir(path: &Path, tx: mpsc::Sender<Wake>) -> Option<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name()?.to_os_string();
    let mut wal = name.clone();
    wal.push("-wal");
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else { return };
        // Opens and closes (our own reads among them) and attribute changes say nothing new;
        // `-shm` changes through a shared mapping on every read.
        let kind = matches!(
            ev.kind,
            EventKind::Create(_)
                | EventKind::Remove(_)
                | EventKind::Modify(notify::event::ModifyKind::Data(_))
                | EventKind::Modify(notify::event::ModifyKind::Name(_))
                | EventKind::Modify(notify::event::ModifyKind::Any)
        );
        let ours = ev.paths.iter().any(|p| p.file_name().is_some_and(|f| f == name || f == wal));
        if kind && ours {
            let _ = tx.send(Wake::Ledger);
        }
    })
    .ok()?;
    w.watch(&dir, RecursiveMode::NonRecursive).ok()?;
    Some(w)
}

mod screen;
/// The fullest subscription window that has not reset yet (a window past its reset time
/// holds nothing any more).
pub fn current_fullest<'a>(
    limits: impl IntoIterator<Item = &'a Limit>,
    now_ms: i64,
) -> Option<&'a Limit> {
    acp_usage_core::limits::fullest(
        limits.into_iter().filter(|l| l.resets_at.is_none_or(|r| r * 1000 > now_ms)),
    )
}

#[cfg(test)]
pub(crate) mod tests;

use screen::view;
