//! Tests of `watch`'s reading and showing, and the temporary ledgers `status`'s tests share.

use super::*;
use crate::sinks::ledger::{Figures, Origin, SessionInfo, SessionRef, Settled, TurnRow};
use acp_usage_core::{AccountedCall, Role, Source, TokenRecord};

pub(crate) struct TempLedger {
    pub dir: PathBuf,
    pub path: PathBuf,
}

impl TempLedger {
    pub(crate) fn new(name: &str) -> TempLedger {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-watch-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.db");
        TempLedger { dir, path }
    }
}

impl Drop for TempLedger {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn call(cost: Option<f64>) -> AccountedCall {
    AccountedCall {
        record: TokenRecord {
            input: 1000,
            output: 100,
            model: Some("claude-sonnet-4-5".into()),
            ..TokenRecord::default()
        },
        calls: 1,
        role: Role::Main,
        provider: Some("anthropic".into()),
        source: Source::Tap,
        cost,
        cost_stated: false,
        modifiers_unpriced: false,
        key: None,
        in_turn: true,
    }
}

/// A session as [`add`] records it: when it was last seen, and by which process.
pub(crate) struct Seen<'a> {
    pub id: &'a str,
    pub agent: &'a str,
    pub pid: Option<u32>,
    pub at: i64,
}

/// A session `seen`, with one turn of `costs` that leaves it at `used` of `size`.
pub(crate) fn add(store: &mut Store, seen: Seen<'_>, costs: &[Option<f64>], used: u64, size: u64) {
    let Seen { id, agent, pid, at } = seen;
    let s = SessionRef { id: id.into(), agent: agent.into() };
    let info = SessionInfo {
        project: Some(format!("/src/{id}")),
        model: Some("claude-sonnet-4-5".into()),
        ..SessionInfo::default()
    };
    store.session(&s, &info, pid, at).unwrap();
    let calls: Vec<_> = costs.iter().map(|c| call(*c)).collect();
    let turn = TurnRow { started: at - 1000, ended: at, stop_reason: Some("end_turn".into()) };
    let figures = Figures { carried: Default::default(), used, size, model: None };
    store
        .calls(
            &s,
            Settled {
                turn: Some(&turn),
                calls: &calls,
                figures: Some(&figures),
                ..Default::default()
            },
            Origin::Relay,
            at,
        )
        .unwrap();
}

/// A pid that belonged to a process that has exited (and was reaped).
pub(crate) fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn running_recent_and_old_sessions() {
    let t = TempLedger::new("rows");
    let mut store = Store::open(&t.path).unwrap();
    let now = ledger::now_ms();
    let me = std::process::id();
    let hour = 3600 * 1000;
    // Running, idle for two hours: shown, first.
    add(
        &mut store,
        Seen { id: "running-old", agent: "claude", pid: Some(me), at: now - 2 * hour },
        &[Some(0.5)],
        84_000,
        200_000,
    );
    // Ended a minute ago: shown.
    add(
        &mut store,
        Seen { id: "recent", agent: "codex", pid: None, at: now - 60_000 },
        &[Some(0.25), Some(0.05)],
        1000,
        0,
    );
    // Its relay was killed (stale pid), active ten minutes ago: shown, not running.
    add(
        &mut store,
        Seen { id: "stale", agent: "gemini", pid: Some(dead_pid()), at: now - 600_000 },
        &[None],
        10,
        100,
    );
    // Stale pid and two hours old: gone.
    add(
        &mut store,
        Seen { id: "stale-old", agent: "gemini", pid: Some(dead_pid()), at: now - 2 * hour },
        &[Some(1.0)],
        1,
        2,
    );
    // Ended two hours ago: gone.
    add(
        &mut store,
        Seen { id: "old", agent: "claude", pid: None, at: now - 2 * hour },
        &[Some(2.0)],
        1,
        2,
    );
    // Its relay was killed two hours ago and the system gave its pid to another process (here
    // ours, with another start time): gone, not running.
    add(
        &mut store,
        Seen { id: "reused", agent: "codex", pid: Some(me), at: now - 2 * hour },
        &[Some(1.0)],
        1,
        2,
    );
    store
        .conn()
        .execute("UPDATE sessions SET pid_start = pid_start + 1 WHERE session_id = 'reused'", [])
        .unwrap();
    drop(store);

    let store = Store::open_read(&t.path).unwrap();
    let snap = snapshot(&store, now, now - 3 * hour).unwrap();
    let ids: Vec<_> = snap.sessions.iter().map(|s| (s.session_id.as_str(), s.running)).collect();
    assert_eq!(ids, [("running-old", true), ("recent", false), ("stale", false)]);
    assert_eq!(snap.running(), 1);
    let first = &snap.sessions[0];
    assert_eq!(first.percent(), Some(42));
    assert_eq!(first.turns, 1);
    assert_eq!(first.cost.fmt(), "$0.50");
    assert_eq!(snap.sessions[1].cost.fmt(), "$0.30");
    assert_eq!(snap.sessions[1].percent(), None, "size 0 is no window");
    assert_eq!(snap.sessions[2].cost.fmt(), "?", "no priced call is an unknown cost");
    // Today's total: every call since `today`, shown or not, unpriced ones making it a floor.
    assert_eq!(snap.today.rows, 7);
    assert_eq!(snap.today.fmt(), "$4.80+");

    let text = render_text(&snap, now);
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines[0], "today $4.80+ · 1 running · 2 more in the last hour");
    assert!(lines[1].starts_with("STATE"), "{text}");
    assert!(lines[2].starts_with("running  claude"), "{text}");
    assert!(lines[2].contains("████░░░░░░  42% 84k/200k"), "{text}");
    assert!(lines[2].contains("/src/running-old") && lines[2].ends_with("2h ago"), "{text}");
    assert!(lines[3].starts_with("ended    codex") && lines[3].ends_with("1m ago"), "{text}");
    assert_eq!(lines.len(), 5, "{text}");
}

#[test]
fn live_view_draws_the_rows() {
    use ratatui::backend::TestBackend;
    const W: u16 = 120;
    let t = TempLedger::new("view");
    let mut store = Store::open(&t.path).unwrap();
    let now = ledger::now_ms();
    add(
        &mut store,
        Seen { id: "a", agent: "claude", pid: Some(std::process::id()), at: now },
        &[Some(0.31)],
        84_000,
        200_000,
    );
    add(
        &mut store,
        Seen { id: "b", agent: "codex", pid: None, at: now - 120_000 },
        &[Some(0.05)],
        9_000,
        272_000,
    );
    // Claude's 5-hour window, observed in session a.
    let reset = (now / 1000 + 3600).to_string();
    let limits = acp_usage_core::limits::from_headers(
        [
            ("anthropic-ratelimit-unified-5h-utilization", "0.8"),
            ("anthropic-ratelimit-unified-5h-reset", reset.as_str()),
        ],
        now - 1000,
    );
    store.limits(&limits, Some("a")).unwrap();
    let snap = snapshot(&store, now, now - 3_600_000).unwrap();
    let text = render_text(&snap, now);
    assert!(text.lines().next().unwrap().ends_with(" · limit 5h 80%"), "{text}");
    let mut term = ratatui::Terminal::new(TestBackend::new(W, 8)).unwrap();
    let path = t.path.clone();
    term.draw(|f| view(f, &path, &State::Read(snap), now)).unwrap();
    let screen: Vec<String> = (0..8)
        .map(|y| (0..W).map(|x| term.backend().buffer()[(x, y)].symbol()).collect())
        .collect();
    let screen = screen.join("\n");
    assert!(
        screen.contains("today $0.36   1 running · 1 more in the last hour · limit 5h 80%"),
        "{screen}"
    );
    assert!(screen.contains("●  claude  claude-sonnet-4-5"), "{screen}");
    assert!(screen.contains("████░░░░░░  42% 84k/200k"), "{screen}");
    // The claude row shows its window; codex has none.
    let row = |agent: &str| screen.lines().find(|l| l.contains(agent)).unwrap().to_owned();
    assert!(row("●  claude").contains("$0.31  5h 80%"), "{screen}");
    assert!(row("○  codex").contains("$0.05  -"), "{screen}");
    assert!(screen.contains("2m ago"), "{screen}");

    term.draw(|f| view(f, &path, &State::Missing, now)).unwrap();
    let top: String = (0..W).map(|x| term.backend().buffer()[(x, 2)].symbol()).collect();
    assert!(top.starts_with("No ledger at "), "{top}");
}

#[test]
fn empty_and_new_ledgers() {
    let t = TempLedger::new("empty");
    Store::open(&t.path).unwrap();
    let store = Store::open_read(&t.path).unwrap();
    let snap = snapshot(&store, ledger::now_ms(), 0).unwrap();
    assert_eq!(snap, Snapshot::default());
    assert_eq!(
        render_text(&snap, 0),
        "today $0.00 · 0 running · 0 more in the last hour\n\
         no session running or active in the last hour\n"
    );
    // A file a first relay has only just created: no tables yet.
    let bare = t.dir.join("bare.db");
    rusqlite::Connection::open(&bare).unwrap().execute_batch("PRAGMA user_version = 0").unwrap();
    let store = Store::open_read(&bare).unwrap();
    assert_eq!(snapshot(&store, 0, 0).unwrap(), Snapshot::default());
}

#[test]
fn a_ledger_of_the_first_schema_reads_without_start_times() {
    // What an earlier acp-usage left, before any relay of this version opened (and migrated) it.
    let t = TempLedger::new("v1");
    let mut store = Store::open(&t.path).unwrap();
    let now = ledger::now_ms();
    add(
        &mut store,
        Seen { id: "running", agent: "claude", pid: Some(std::process::id()), at: now },
        &[Some(0.5)],
        1,
        2,
    );
    store
        .conn()
        .execute_batch("ALTER TABLE sessions DROP COLUMN pid_start; PRAGMA user_version = 1")
        .unwrap();
    drop(store);
    let store = Store::open_read(&t.path).unwrap();
    let snap = snapshot(&store, now, now - 1000).unwrap();
    assert_eq!(snap.running(), 1, "the pid alone says running");
}

// Process start times come from /proc.
#[cfg(target_os = "linux")]
#[test]
fn liveness() {
    let me = std::process::id();
    let started = ledger::process_start(me).expect("/proc/self/stat is readable");
    assert!(process_alive(me as i64, None));
    assert!(process_alive(me as i64, Some(started)));
    // The same pid, but a process that started at another time: a reused pid.
    assert!(!process_alive(me as i64, Some(started + 1)));
    assert!(!process_alive(dead_pid() as i64, None));
    assert!(!process_alive(0, None), "0 is the process group, not a process");
    assert!(!process_alive(-1, None));
    assert!(!process_alive(i64::MAX, None));
    // A child started after us started no earlier, and its own start is what it reads.
    let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let child_start = ledger::process_start(child.id()).unwrap();
    assert!(child_start >= started);
    assert!(process_alive(child.id() as i64, Some(child_start)));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!process_alive(child.id() as i64, Some(child_start)));
}

#[test]
fn formats() {
    assert_eq!(fmt_tokens(950), "950");
    assert_eq!(fmt_tokens(1500), "1.5k");
    assert_eq!(fmt_tokens(2000), "2k");
    assert_eq!(fmt_tokens(84_321), "84k");
    assert_eq!(fmt_tokens(200_000), "200k");
    assert_eq!(fmt_tokens(999_700), "1M");
    assert_eq!(fmt_tokens(1_000_000), "1M");
    assert_eq!(fmt_tokens(1_048_576), "1.05M");
    assert_eq!(fmt_ago(10_000, 9_000), "now");
    assert_eq!(fmt_ago(100_000, 0), "1m ago");
    assert_eq!(fmt_ago(7_200_000, 0), "2h ago");
    assert_eq!(short_project("/a/b", 32), "/a/b");
    assert_eq!(short_project("/very/long/path/to/some/project", 16), "…/some/project");
    assert_eq!(
        short_project("/x/a-directory-name-longer-than-max", 10),
        "…/a-directory-name-longer-than-max"
    );
    assert_eq!(bar(42, 10), "████░░░░░░");
    assert_eq!(bar(140, 4), "████");
    assert_eq!(Money { usd: 0.0, rows: 0, unpriced: 0 }.fmt(), "$0.00");
}
