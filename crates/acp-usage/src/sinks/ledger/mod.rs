//! The ledger: every call, turn and session acp-usage accounted, in SQLite (WAL) at
//! `$ACP_USAGE_LEDGER` (`off` disables it), else `$XDG_DATA_HOME/acp-usage/ledger.db`, else
//! `~/.local/share/acp-usage/ledger.db`. `report`, `watch`, `status` and budgets read it;
//! `import` and every running relay write it.
//!
//! ```text
//! relay loop --Write--> writer thread (one connection, one short transaction per batch)
//! ```
//! The relay never waits for a write: [`Writer::send`] queues it. A ledger that cannot be opened
//! or written (a full disk, a corrupt or locked file) is one log line and the relay goes on
//! without it; the next write tries again.

pub mod learned;
mod limits;
pub mod schema;
pub mod store;

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use acp_usage_core::AccountedCall;

pub use store::{Figures, Origin, SessionInfo, SessionRef, Settled, Store, TurnRow};

/// Environment variable naming the ledger file (`off`: no ledger).
pub const LEDGER_ENV: &str = "ACP_USAGE_LEDGER";

/// The ledger's path, `None` when it is turned off or no home is known.
pub fn path() -> Option<PathBuf> {
    path_in(&|name| std::env::var_os(name))
}

/// [`path`] in the environment `env` reads (`doctor` asks it of the environment it checks).
pub fn path_in(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    match env(LEDGER_ENV) {
        Some(p) if p == "off" => None,
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            let data = match env("XDG_DATA_HOME") {
                Some(d) if !d.is_empty() => PathBuf::from(d),
                _ => PathBuf::from(env("HOME")?).join(".local/share"),
            };
            Some(data.join("acp-usage/ledger.db"))
        }
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// When the current local day (or month) began, in Unix ms: what `today` and `this month`
/// count from in budgets and reports.
pub fn period_start_ms(month: bool) -> i64 {
    use chrono::Datelike;
    let today = chrono::Local::now().date_naive();
    start_of_day(if month { today.with_day(1).unwrap_or(today) } else { today })
}

/// When the current local day (or month, with `month`) ends, in Unix ms: the next one's start.
pub fn period_end_ms(month: bool) -> i64 {
    use chrono::Datelike;
    let today = chrono::Local::now().date_naive();
    let next = if month {
        let first = today.with_day(1).unwrap_or(today);
        first.checked_add_months(chrono::Months::new(1))
    } else {
        today.succ_opt()
    };
    next.map_or(now_ms() + 24 * 3600 * 1000, start_of_day)
}

/// When a day's (or month's) budget of `limit` runs out at this pace, having spent `spent`
/// since the period began: the windows' forecast ([`acp_usage_core::limits::forecast`]) on the
/// period's spending, which the ledger holds from its start (so it began at nothing).
pub fn budget_runs_out(month: bool, spent: f64, limit: f64, now: i64) -> Option<i64> {
    if limit <= 0.0 || spent <= 0.0 {
        return None;
    }
    let start = period_start_ms(month);
    let period = acp_usage_core::limits::forecast::Period {
        start_ms: start,
        end_ms: period_end_ms(month),
        first: (start, 0.0),
        last: (now, spent * 100.0 / limit),
    };
    acp_usage_core::limits::forecast::runs_out(&period, now)
}

/// When a local day began, in Unix ms.
pub fn start_of_day(date: chrono::NaiveDate) -> i64 {
    use chrono::TimeZone;
    // Where a DST change skips midnight, the day starts at the first hour that exists.
    for hour in 0..24 {
        if let Some(t) = date
            .and_hms_opt(hour, 0, 0)
            .and_then(|t| chrono::Local.from_local_datetime(&t).earliest())
        {
            return t.timestamp_millis();
        }
    }
    now_ms() - 24 * 3600 * 1000
}

/// Whether the process that wrote `pid` (and `started`, its [`process_start`], when known)
/// still runs. A relay killed with `kill -9` leaves its pid in the ledger, and the system may
/// give that pid to a new process: a different start time tells them apart. Signal 0 checks
/// without sending anything, and EPERM means the process exists under another user.
#[cfg(unix)]
pub fn process_alive(pid: i64, started: Option<i64>) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks the process; no memory is involved.
    let rc = unsafe { libc::kill(pid, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    match (started, process_start(pid as u32)) {
        (Some(recorded), Some(now)) => recorded == now,
        // No start recorded (or none readable here, /proc hidden): the pid is all we have.
        _ => true,
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`);
/// `None` where there is no such file (macOS). Unique per pid for as long as the machine runs.
#[cfg(unix)]
pub fn process_start(pid: u32) -> Option<i64> {
    // Field 22, the 20th from the state on.
    crate::procfs::stat_fields(pid.into())?.get(19)?.parse().ok()
}

/// Whether the process that wrote `pid` (and `started`, its [`process_start`], when known)
/// still runs, on Windows: it can be opened and has no exit code yet (one that exited stays
/// openable while anyone holds a handle to it); access denied means it exists under another
/// user.
#[cfg(windows)]
pub fn process_alive(pid: i64, started: Option<i64>) -> bool {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::GetExitCodeProcess;
    // Pid 0 is the idle process, never a relay.
    let Some(pid) = u32::try_from(pid).ok().filter(|p| *p != 0) else { return false };
    let process = match windows_process::open(pid) {
        Ok(p) => p,
        Err(err) => return err.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32),
    };
    let mut code = 0u32;
    // SAFETY: an open process handle and a u32 to write the code to.
    let ok = unsafe { GetExitCodeProcess(windows_process::raw(&process), &mut code) };
    if ok != 0 && code != STILL_ACTIVE as u32 {
        return false;
    }
    match (started, windows_process::start(&process)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

/// When process `pid` started, as a Windows FILETIME (100 ns since 1601); `None` when it cannot
/// be opened. Unique per pid.
#[cfg(windows)]
pub fn process_start(pid: u32) -> Option<i64> {
    windows_process::start(&windows_process::open(pid).ok()?)
}

#[cfg(windows)]
mod windows_process {
    //! A process opened for queries, on Windows.

    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};

    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{
        GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };

    /// Opens process `pid` with the least access that reads its exit code and times.
    pub(super) fn open(pid: u32) -> std::io::Result<OwnedHandle> {
        // SAFETY: OpenProcess takes no pointers; the handle is not inheritable.
        let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if handle.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a handle just opened, owned by nothing else.
        Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
    }

    pub(super) fn raw(process: &OwnedHandle) -> RawHandle {
        process.as_raw_handle()
    }

    /// The process's creation time.
    pub(super) fn start(process: &OwnedHandle) -> Option<i64> {
        let mut created = FILETIME::default();
        let (mut exited, mut kernel, mut user) = (created, created, created);
        // SAFETY: an open process handle and four FILETIMEs to write to.
        let ok = unsafe {
            GetProcessTimes(raw(process), &mut created, &mut exited, &mut kernel, &mut user)
        };
        if ok == 0 {
            return None;
        }
        Some((i64::from(created.dwHighDateTime) << 32) | i64::from(created.dwLowDateTime))
    }
}

/// Opens the ledger for writing, bringing in the old `learned.json` the first time.
pub fn open(path: &std::path::Path) -> rusqlite::Result<Store> {
    let mut store = Store::open(path)?;
    let adopted = store.adopt_orphans()?;
    if adopted > 0 {
        tracing::info!("settled {adopted} calls a killed run had kept provisionally");
    }
    if let Some(old) = learned::legacy_path().filter(|p| p.exists()) {
        let learned = learned::legacy(&old);
        if store.import_learned(&learned)? {
            tracing::info!(
                "imported {} baselines and {} sessions from {}",
                learned.agents.len(),
                learned.sessions.len(),
                old.display()
            );
        }
    }
    Ok(store)
}

/// One write for the ledger's thread.
#[derive(Debug)]
pub enum Write {
    /// A session is open in this process.
    Session { session: SessionRef, info: SessionInfo, at: i64 },
    /// Calls were settled: a turn's (with the turn) or one between turns.
    Calls {
        /// Whose.
        session: SessionRef,
        /// The turn they belong to.
        turn: Option<TurnRow>,
        /// The calls.
        calls: Vec<AccountedCall>,
        /// The session's figures after them.
        figures: Option<Figures>,
        /// When.
        at: i64,
    },
    /// Exact calls of a turn still in progress (replaced by the turn's settled calls).
    Provisional { session: SessionRef, calls: Vec<AccountedCall>, at: i64 },
    /// An agent's and model's baseline or window was learned.
    Agent { key: String, entry: learned::Entry, at: i64 },
    /// Subscription windows were observed (in a session, when one was current).
    Limits { limits: Vec<acp_usage_core::limits::Limit>, session: Option<String> },
    /// A provider stated the account's credits and plan.
    Credits(acp_usage_core::limits::credits::Credits),
    /// A response named the account of a credential (its fingerprint).
    Alias { credential: String, account: String },
    /// The session was closed in this process.
    Closed { session_id: String },
    /// The session was deleted.
    Forget { session_id: String },
    /// Answered once every write before it is done.
    Flush(mpsc::Sender<()>),
}

/// The relay's handle on the ledger's writer thread.
#[derive(Debug)]
pub struct Writer {
    tx: mpsc::Sender<Write>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread for the ledger at `path`; it opens the file itself, off the
    /// relay's path.
    pub fn start(path: PathBuf) -> Writer {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("acp-usage-ledger".into())
            .spawn(move || writer(path, rx))
            .ok();
        if thread.is_none() {
            tracing::warn!("cannot start the ledger's writer thread; going on without the ledger");
        }
        Writer { tx, thread }
    }

    /// Queues a write; never waits.
    pub fn send(&self, w: Write) {
        let _ = self.tx.send(w);
    }

    /// Waits, at most `timeout`, for every queued write to be done (the end of a run).
    pub fn flush(&self, timeout: Duration) -> bool {
        let (tx, rx) = mpsc::channel();
        self.send(Write::Flush(tx));
        rx.recv_timeout(timeout).is_ok()
    }

    /// Closes every session of this process in the ledger, flushes, and stops the thread.
    pub fn finish(mut self, timeout: Duration) {
        self.send(Write::Closed { session_id: String::new() });
        if !self.flush(timeout) {
            tracing::warn!("the ledger did not finish its writes in {timeout:?}");
            return;
        }
        drop(self.tx);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: opens the ledger and applies writes in order, each batch of queued
/// writes in turn. Errors are logged (once per kind in a row) and the write dropped.
fn writer(path: PathBuf, rx: mpsc::Receiver<Write>) {
    let pid = std::process::id();
    let mut store: Option<Store> = None;
    let mut last_error: Option<String> = None;
    while let Ok(w) = rx.recv() {
        if let Write::Flush(done) = w {
            let _ = done.send(());
            continue;
        }
        if store.is_none() {
            // The run's start made the file and did the one-time work (`open`).
            match Store::open(&path) {
                Ok(s) => store = Some(s),
                Err(err) => {
                    report(
                        &mut last_error,
                        format!("cannot open the ledger {}: {err}", path.display()),
                    );
                    continue;
                }
            }
        }
        let s = store.as_mut().expect("opened above");
        let res = apply(s, w, pid);
        match res {
            Ok(()) => last_error = None,
            Err(err) => {
                report(
                    &mut last_error,
                    format!("cannot write to the ledger {}: {err}", path.display()),
                );
                // A file replaced or corrupted under us: reopen on the next write.
                if matches!(
                    err.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
                ) {
                    store = None;
                }
            }
        }
    }
}

fn report(last: &mut Option<String>, msg: String) {
    if last.as_deref() != Some(msg.as_str()) {
        tracing::warn!("{msg}; going on without it");
        *last = Some(msg);
    }
}

fn apply(s: &mut Store, w: Write, pid: u32) -> rusqlite::Result<()> {
    match w {
        Write::Session { session, info, at } => s.session(&session, &info, Some(pid), at),
        Write::Calls { session, turn, calls, figures, at } => s
            .calls(
                &session,
                Settled {
                    turn: turn.as_ref(),
                    calls: &calls,
                    figures: figures.as_ref(),
                    ..Default::default()
                },
                Origin::Relay,
                at,
            )
            .map(|_| ()),
        Write::Provisional { session, calls, at } => {
            s.provisional(&session, &calls, at).map(|_| ())
        }
        Write::Agent { key, entry, at } => s.agent(&key, entry, at),
        Write::Limits { limits, session } => s.limits(&limits, session.as_deref()),
        Write::Credits(c) => s.credits(&c),
        Write::Alias { credential, account } => s.alias(&credential, &account),
        Write::Closed { session_id } if session_id.is_empty() => s.closed(None, pid),
        Write::Closed { session_id } => s.closed(Some(&session_id), pid),
        Write::Forget { session_id } => s.forget(&session_id),
        Write::Flush(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Timelike};

    #[test]
    fn days_and_months_start_at_local_midnight() {
        let today = chrono::Local::now().date_naive();
        let t = chrono::Local.timestamp_millis_opt(period_start_ms(false)).unwrap();
        assert_eq!(t.date_naive(), today);
        assert!(t.hour() <= 1 && t.minute() == 0);
        let m = chrono::Local.timestamp_millis_opt(period_start_ms(true)).unwrap();
        assert_eq!((m.day(), m.month()), (1, today.month()));
        assert!(period_start_ms(true) <= period_start_ms(false));
        assert!(period_start_ms(false) <= now_ms());
    }

    #[test]
    fn a_budget_runs_out_at_its_days_pace() {
        let (start, end) = (period_start_ms(false), period_end_ms(false));
        assert!(end > start && end - start <= 25 * 3600 * 1000, "{start} {end}");
        let at = |share: f64| start + ((end - start) as f64 * share) as i64;
        // 60% of $10 spent half way through the day: out at five sixths of it.
        let out = budget_runs_out(false, 6.0, 10.0, at(0.5)).expect("a forecast");
        assert!((out - at(5.0 / 6.0)).abs() < 1000, "{out} vs {}", at(5.0 / 6.0));
        // 30% half way through lasts the day; nothing spent, nothing said; an hour into the
        // day is too early.
        assert_eq!(budget_runs_out(false, 3.0, 10.0, at(0.5)), None);
        assert_eq!(budget_runs_out(false, 0.0, 10.0, at(0.5)), None);
        assert_eq!(budget_runs_out(false, 9.0, 10.0, at(0.05)), None);
        assert!(period_end_ms(true) >= end);
    }
}
