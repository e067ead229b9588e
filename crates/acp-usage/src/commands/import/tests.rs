//! `import` against real transcripts (the parsers' fixtures, laid out as each agent keeps them
//! under a scratch HOME): what it adds, that a second run adds nothing, and that calls the
//! relay already recorded are not counted again.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sinks::ledger::{Settled, TurnRow};
use acp_usage_core::{AccountedCall, Catalog, Role, Source, TokenRecord};

use super::*;

mod incremental;

fn profile(name: &str) -> Profile {
    Profile::named(name).unwrap()
}

const CLAUDE_SESSION: &str = "bc7341c5-8dda-4e7a-b1a8-d2ade5970368";
const CLAUDE_PARENT: &str = "c7ef9273-eb2f-463b-885e-8d1a6a0adc57";
const CLAUDE_FORK: &str = "3f16f941-88b6-4b82-984e-1be6b0afcde4";
const CODEX_SESSION: &str = "01a20178-6915-7481-ba74-d3bf82059e8f";
const GEMINI_SESSION: &str = "55ebb2ff-5213-439b-aa0f-686df6e5a57b";
const OPENCODE_SESSION: &str = "ses_dfe851c35ffeJNFH2h2yXhPT2V";
const QWEN_SESSION: &str = "502fcbae-2786-450f-8276-d03f8ebe3269";
const COPILOT_SESSION: &str = "8f4a8f2a-ab02-44b8-881f-329138725991";
const CLINE_SESSION: &str = "1795456777419_r5Ufe_cli";

/// A scratch HOME, removed when dropped.
struct Home(PathBuf);

impl Home {
    fn new(name: &str) -> Home {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir()
            .join(format!("acp-usage-import-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Home(dir)
    }

    fn locations(&self) -> Locations {
        let home = self.0.join("home");
        Locations::from_env(move |name| (name == "HOME").then(|| OsString::from(&home)))
    }

    fn home(&self) -> PathBuf {
        self.0.join("home")
    }

    fn ledger(&self) -> Store {
        Store::open(&self.0.join("ledger.db")).unwrap()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn core_fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../acp-usage-core/tests/fixtures/transcripts")
        .join(path)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("{} -> {}: {e}", from.display(), to.display()));
}

/// Lays out every agent's fixtures under `home` the way the agents keep them.
fn lay_out(home: &Path) {
    let claude = home.join(".claude/projects/-tmp-work");
    let session = core_fixture("claude/session");
    copy(
        &session.join(format!("{CLAUDE_SESSION}.jsonl")),
        &claude.join(format!("{CLAUDE_SESSION}.jsonl")),
    );
    let sub = format!("{CLAUDE_SESSION}/subagents/agent-a455660011ddec475.jsonl");
    copy(&session.join(&sub), &claude.join(&sub));
    for id in [CLAUDE_PARENT, CLAUDE_FORK] {
        let name = format!("{id}.jsonl");
        copy(
            &core_fixture("claude/fork").join(&name),
            &home.join(".claude/projects/-tmp-fork").join(&name),
        );
    }

    let day = home.join(".codex/sessions/2026/11/22");
    copy(
        &core_fixture("codex/rollout-after-load-and-resume.jsonl"),
        &day.join(format!("rollout-2026-11-22T04-16-38-{CODEX_SESSION}.jsonl")),
    );
    copy(
        &core_fixture("codex/rollout-forked-subagent.jsonl"),
        &day.join("rollout-2026-11-22T04-16-43-01a20178-7a10-7c3e-9d51-3f0e2b6a41d7.jsonl"),
    );

    let chats = home.join(".gemini/tmp/work/chats");
    copy(
        &core_fixture("gemini/session-after-load.jsonl"),
        &chats.join("session-2026-11-22T04-18-55ebb2ff.jsonl"),
    );
    // The stub a loading process opens under the same id, and the CLI's bootstrap session.
    copy(
        &core_fixture("gemini/session-after-load-stub.jsonl"),
        &chats.join("session-2026-11-22T04-19-55ebb2ff.jsonl"),
    );
    copy(
        &core_fixture("gemini/bootstrap.jsonl"),
        &chats.join("session-2026-11-22T04-17-d197f572.jsonl"),
    );
    std::fs::write(home.join(".gemini/projects.json"), r#"{"projects":{"/tmp/work":"work"}}"#)
        .unwrap();

    copy(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode/complete.db"),
        &home.join(".local/share/opencode/opencode.db"),
    );

    let qwen = home.join(format!(".qwen/projects/-tmp-qwen-work/chats/{QWEN_SESSION}.jsonl"));
    std::fs::create_dir_all(qwen.parent().unwrap()).unwrap();
    std::fs::copy(core_fixture("qwen/chat-0.24.4.jsonl"), &qwen).unwrap();

    copy(
        &core_fixture("copilot/openai.jsonl"),
        &home.join(format!(".copilot/session-state/{COPILOT_SESSION}/events.jsonl")),
    );

    let cline = home.join(format!(".cline/data/sessions/{CLINE_SESSION}"));
    copy(
        &core_fixture("cline/openai.messages.json"),
        &cline.join(format!("{CLINE_SESSION}.messages.json")),
    );
    copy(&core_fixture("cline/openai.json"), &cline.join(format!("{CLINE_SESSION}.json")));
}

fn run(store: &mut Store, locs: &Locations, opts: &ImportOptions) -> Summary {
    let catalog = Catalog::embedded().clone();
    let mut last = Progress::default();
    let summary = import(store, locs, &catalog, opts, &mut |p| last = p).unwrap();
    assert_eq!(last.files_done, last.files_total, "the last progress report is complete");
    summary
}

/// Per agent: (sessions, calls added, calls present, input, output).
fn counts(s: &Summary) -> Vec<(&'static str, usize, u64, u64, u64, u64)> {
    s.agents
        .iter()
        .map(|(a, x)| {
            (a.name(), x.sessions, x.calls_added, x.calls_present, x.tokens.input, x.tokens.output)
        })
        .collect()
}

/// (calls, input, output) per session in the ledger.
fn ledger_session(store: &Store, id: &str) -> (i64, i64, i64) {
    store
        .conn()
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(c.input), 0), COALESCE(SUM(c.output), 0)
             FROM calls c JOIN sessions s ON s.id = c.session WHERE s.session_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

#[test]
fn imports_every_agent_once() {
    let home = Home::new("all");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    let first = run(&mut store, &locs, &ImportOptions::default());
    assert!(first.unreadable.is_empty(), "{:?}", first.unreadable);
    assert!(first.skipped.is_empty(), "{:?}", first.skipped);
    assert_eq!(
        counts(&first),
        [
            // The session: five main calls and the subagent's; the fork group: the parent's two
            // calls, and the fork's own two (its copies of the parent's are the parent's).
            ("claude", 3, 6 + 4, 2, 66_125 + 50_031, 202 + 60),
            // Five calls over three processes, and the subagent's two of its own.
            ("codex", 1, 5 + 2, 0, 31_700 + 6_300, 221 + 37),
            ("gemini", 1, 4, 0, 33_900, 134),
            // Three turns, a subagent's two calls in a child session; the title call is
            // recorded nowhere.
            ("opencode", 1, 7, 0, 73_076, 178),
            // Main calls, memory extraction, a subagent, a compression.
            ("qwen", 1, 4, 0, 25_000, 404),
            ("copilot", 1, 3, 0, 60_612, 72),
            ("cline", 1, 3, 0, 60_612, 72),
        ]
    );
    assert_eq!(ledger_session(&store, CLAUDE_SESSION), (6, 66_125, 202));
    assert_eq!(ledger_session(&store, CLAUDE_PARENT).0, 2, "the parent owns its copied calls");
    assert_eq!(ledger_session(&store, CLAUDE_FORK).0, 2);

    // What the sessions table says of them.
    let row = |id: &str| -> (String, Option<String>, Option<String>, i64, i64, i64) {
        store
            .conn()
            .query_row(
                "SELECT agent, project, title, first_seen, last_seen, turns FROM sessions WHERE session_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .unwrap()
    };
    let (agent, project, _, first_seen, last_seen, turns) = row(CLAUDE_SESSION);
    assert_eq!(agent, "claude");
    assert!(project.is_some_and(|p| p.ends_with("/work")));
    assert!(first_seen > 1_700_000_000_000 && first_seen < last_seen);
    assert_eq!(turns, 0, "no turn rows for imported sessions");
    assert_eq!(
        row(CODEX_SESSION).1.as_deref(),
        Some("/tmp/acp-usage-tests/codex-9003-0-05b62a00/work")
    );
    assert_eq!(row(GEMINI_SESSION).1.as_deref(), Some("/tmp/work"));
    assert_eq!(row(QWEN_SESSION).1.as_deref(), Some("/tmp/qwen-work"));
    assert_eq!(row(QWEN_SESSION).2.as_deref(), Some("mock-title"));
    assert_eq!(row(COPILOT_SESSION).1.as_deref(), Some("/tmp/cc-ws-copilot"));
    assert_eq!(row(CLINE_SESSION).1.as_deref(), Some("/tmp/cc-ws-cline"));
    assert_eq!(row(CLINE_SESSION).2.as_deref(), Some("Say hello."));
    assert!(row(OPENCODE_SESSION).1.is_some());

    // Roles, sources, times and prices as the relay writes them.
    let roles: Vec<(String, i64)> = {
        let mut stmt = store
            .conn()
            .prepare("SELECT role, COUNT(*) FROM calls GROUP BY role ORDER BY role")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(roles, [("main".into(), 30), ("side".into(), 2), ("subagent".into(), 6)]);
    let (origins, priced, untimed): (String, i64, i64) = store
        .conn()
        .query_row(
            "SELECT GROUP_CONCAT(DISTINCT origin || '/' || source), COUNT(cost), SUM(at < 1700000000000) FROM calls",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(origins, "import/transcript");
    assert!(priced >= 30, "most mock models are in the catalog ({priced} priced)");
    assert_eq!(untimed, 0);

    // Run twice, count once; the second run reads no file: nothing changed.
    assert_eq!((first.files_read, first.files_unchanged), (first.files, 0));
    let second = run(&mut store, &locs, &ImportOptions::default());
    let t = second.total();
    assert_eq!((second.files_read, second.files_unchanged), (0, first.files));
    assert_eq!((t.calls_added, t.calls_present, t.sessions), (0, 0, 0));
    let rows: i64 = store.conn().query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0)).unwrap();
    assert_eq!(rows as u64, first.total().calls_added);

    // Forgotten (a ledger from before schema 5), every file is read again and every call is
    // found in the ledger.
    store.conn().execute("DELETE FROM import_files", []).unwrap();
    let third = run(&mut store, &locs, &ImportOptions::default());
    let (t, f) = (third.total(), first.total());
    assert_eq!((t.calls_added, t.calls_present), (0, f.calls_added + f.calls_present));
    assert_eq!((third.files_read, t.sessions_added), (first.files, 0));
}

fn relay_call(record: TokenRecord, key: Option<&str>) -> AccountedCall {
    AccountedCall {
        record,
        calls: 1,
        role: Role::Main,
        provider: None,
        source: if key.is_some() { Source::Tap } else { Source::Agent },
        cost: Some(0.01),
        cost_stated: false,
        modifiers_unpriced: false,
        key: key.map(String::from),
        in_turn: true,
    }
}

#[test]
fn calls_the_relay_recorded_are_not_counted_again() {
    let home = Home::new("relay");
    lay_out(&home.home());
    let mut store = home.ledger();
    let claude = SessionRef { id: CLAUDE_SESSION.into(), agent: "claude".into() };
    let codex = SessionRef { id: CODEX_SESSION.into(), agent: "codex".into() };
    let rec = |input, cache_read, cache_write, output| TokenRecord {
        input,
        cache_read,
        cache_write_5m: cache_write,
        output,
        ..TokenRecord::default()
    };
    // The relay saw two of Claude's calls through the tap (keyed by message id) and one that the
    // agent reported without an id.
    let relay_claude = [
        relay_call(rec(12_520, 11_000, 1_500, 42), Some("msg_mock_177e9c6ca_0001")),
        relay_call(rec(12_215, 12_000, 200, 61), Some("msg_mock_177e9c6ca_0002")),
        relay_call(rec(12_559, 12_200, 350, 23), None),
    ];
    store
        .calls(&claude, Settled { calls: &relay_claude, ..Default::default() }, Origin::Relay, 1)
        .unwrap();
    // Codex's first two calls through the tap (response ids, not the rollout's keys), and a
    // call the relay counted that no transcript has the like of.
    let relay_codex = [
        relay_call(rec(5_000, 4_096, 0, 40), Some("resp_1")),
        relay_call(rec(6_200, 4_992, 0, 85), Some("resp_2")),
        relay_call(rec(999, 0, 0, 9), None),
    ];
    store
        .calls(&codex, Settled { calls: &relay_codex, ..Default::default() }, Origin::Relay, 1)
        .unwrap();

    let opts = ImportOptions {
        agents: vec![profile("claude"), profile("codex")],
        ..ImportOptions::default()
    };
    let s = run(&mut store, &home.locations(), &opts);
    let claude_sums = &s.agents[&profile("claude")];
    let codex_sums = &s.agents[&profile("codex")];
    assert_eq!((claude_sums.calls_added, claude_sums.calls_present), (10 - 3, 3 + 2));
    assert_eq!((codex_sums.calls_added, codex_sums.calls_present), (7 - 2, 2));
    assert_eq!(s.agents.len(), 2, "only the agents asked for");
    // Every call of the session once: the relay's three and the transcript's other three.
    assert_eq!(ledger_session(&store, CLAUDE_SESSION), (6, 66_125, 202));
    // Codex: the relay's three (one of them unknown to the rollout) and five from the rollouts.
    assert_eq!(ledger_session(&store, CODEX_SESSION), (8, 31_700 + 6_300 + 999, 221 + 37 + 9));

    let again = run(&mut store, &home.locations(), &opts);
    assert_eq!((again.total().calls_added, again.files_read), (0, 0));
    store.conn().execute("DELETE FROM import_files", []).unwrap();
    let again = run(&mut store, &home.locations(), &opts);
    assert_eq!(again.total().calls_added, 0);
    assert_eq!(again.total().calls_present, 10 + 2 + 7);
}

#[test]
fn calls_during_a_turn_the_relay_settled_from_estimates_are_not_counted_again() {
    let home = Home::new("estimated");
    lay_out(&home.home());
    let mut store = home.ledger();
    let codex = SessionRef { id: CODEX_SESSION.into(), agent: "codex".into() };
    // The relay had no transcript: it settled one turn from its estimates, whose counts match
    // no call of the rollout. The turn spans the rollout's calls.
    let mut estimate =
        relay_call(TokenRecord { input: 40_000, output: 300, ..TokenRecord::default() }, None);
    estimate.source = Source::Estimate;
    let turn = TurnRow { started: 0, ended: i64::MAX / 4, stop_reason: Some("end_turn".into()) };
    store
        .calls(
            &codex,
            Settled { turn: Some(&turn), calls: &[estimate], ..Default::default() },
            Origin::Relay,
            1,
        )
        .unwrap();
    let opts = ImportOptions { agents: vec![profile("codex")], ..ImportOptions::default() };
    let s = run(&mut store, &home.locations(), &opts);
    assert_eq!(
        (s.agents[&profile("codex")].calls_added, s.agents[&profile("codex")].calls_present),
        (0, 7)
    );
    assert_eq!(ledger_session(&store, CODEX_SESSION), (1, 40_000, 300));

    // A turn that ended before the rollout's calls claims none of them.
    let home = Home::new("estimated-before");
    lay_out(&home.home());
    let mut store = home.ledger();
    let turn = TurnRow { started: 0, ended: 1, stop_reason: Some("end_turn".into()) };
    let mut estimate =
        relay_call(TokenRecord { input: 10, output: 1, ..TokenRecord::default() }, None);
    estimate.source = Source::Estimate;
    store
        .calls(
            &codex,
            Settled { turn: Some(&turn), calls: &[estimate], ..Default::default() },
            Origin::Relay,
            1,
        )
        .unwrap();
    let s = run(&mut store, &home.locations(), &opts);
    assert_eq!(s.agents[&profile("codex")].calls_added, 7);

    // A turn recorded call by call (exact rows) claims no transcript call by its time: one
    // its rows do not match is a call the relay did not see.
    let home = Home::new("exact-turn");
    lay_out(&home.home());
    let mut store = home.ledger();
    let turn = TurnRow { started: 0, ended: i64::MAX / 4, stop_reason: Some("end_turn".into()) };
    let exact = relay_call(TokenRecord { input: 10, output: 1, ..TokenRecord::default() }, None);
    store
        .calls(
            &codex,
            Settled { turn: Some(&turn), calls: &[exact], ..Default::default() },
            Origin::Relay,
            1,
        )
        .unwrap();
    let s = run(&mut store, &home.locations(), &opts);
    assert_eq!(s.agents[&profile("codex")].calls_added, 7);
}

#[test]
fn since_leaves_older_calls_out() {
    let home = Home::new("since");
    lay_out(&home.home());
    let mut store = home.ledger();
    // Codex's rollout: the first process's three calls before 04:16:40, the later ones after.
    let since = super::parse_since("2026-11-22T04:16:40Z").unwrap();
    let opts = ImportOptions {
        agents: vec![profile("codex")],
        since: Some(since),
        ..ImportOptions::default()
    };
    let s = run(&mut store, &home.locations(), &opts);
    let before: i64 = store
        .conn()
        .query_row("SELECT COUNT(*) FROM calls WHERE at < ?1", [since], |r| r.get(0))
        .unwrap();
    assert_eq!(before, 0);
    let added = s.agents[&profile("codex")].calls_added;
    assert!(added > 0 && added < 7, "some of the seven calls are older ({added} added)");

    // Files last changed before `since` are not read at all.
    let later = ImportOptions { since: Some(i64::MAX / 2), ..opts };
    assert_eq!(run(&mut store, &home.locations(), &later).files, 0);
}

#[test]
fn an_unreadable_file_is_named_and_the_rest_imported() {
    let home = Home::new("broken");
    lay_out(&home.home());
    let projects = home.home().join(".claude/projects/-tmp-work");
    // A format this build does not know: every line fails.
    let broken = projects.join("0b0b0b0b-0000-0000-0000-000000000000.jsonl");
    std::fs::write(&broken, "not json\n[1,2]\n").unwrap();
    // A file torn by a crash: one bad line among good ones.
    let mut torn =
        std::fs::read_to_string(core_fixture("claude/fork").join(format!("{CLAUDE_PARENT}.jsonl")))
            .unwrap();
    torn.insert_str(0, "{\"type\":\"assist\n");
    std::fs::write(
        home.home().join(format!(".claude/projects/-tmp-fork/{CLAUDE_PARENT}.jsonl")),
        torn,
    )
    .unwrap();
    // opencode's store replaced by something else.
    std::fs::write(home.home().join(".local/share/opencode/opencode.db"), "not a database")
        .unwrap();

    let mut store = home.ledger();
    let s = run(&mut store, &home.locations(), &ImportOptions::default());
    let unreadable: Vec<&Path> = s.unreadable.iter().map(|u| u.path.as_path()).collect();
    assert_eq!(unreadable.len(), 2, "{:?}", s.unreadable);
    assert!(unreadable.contains(&broken.as_path()));
    assert!(unreadable.iter().any(|p| p.ends_with("opencode.db")));
    assert_eq!(s.skipped.len(), 1);
    assert_eq!(s.skipped[0].lines, 1);
    assert_eq!(s.agents[&profile("claude")].calls_added, 10);
    assert!(!s.agents.contains_key(&profile("opencode")));
}

#[test]
fn since_accepts_a_date_or_a_time() {
    assert_eq!(super::parse_since("2026-11-22T04:17:00Z"), Ok(1_795_321_020_000));
    let day = super::parse_since("2026-11-22").unwrap();
    // Local midnight: within a day of UTC midnight.
    assert!((day - 1_795_305_600_000).abs() <= 14 * 3_600_000, "{day}");
    assert_eq!(super::parse_since("20261122"), Ok(day));
    assert!(super::parse_since("yesterday").is_err());
    assert_eq!(crate::numbers::thousands(1_234_567), "1,234,567");
    assert_eq!(super::output::count(1, "call"), "1 call");
}

#[test]
fn fast_mode_calls_are_imported_with_their_modifiers_and_multiplied_cost() {
    let home = Home::new("fast");
    let dir = home.home().join(".claude/projects/-tmp-fast");
    copy(&core_fixture("claude/fast-mode.jsonl"), &dir.join(format!("{CLAUDE_SESSION}.jsonl")));
    let mut store = home.ledger();
    let opts = ImportOptions { agents: vec![profile("claude")], ..ImportOptions::default() };
    run(&mut store, &home.locations(), &opts);
    let mut stmt = store
        .conn()
        .prepare("SELECT model, modifiers, cost, exact FROM calls ORDER BY id")
        .unwrap();
    let rows: Vec<(String, Option<String>, f64, bool)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Opus 4.6 fast: 6x its standard $0.00885, under its own model, exact.
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1.as_deref(), rows[0].3),
        ("claude-opus-4-6", Some("fast"), true)
    );
    assert!((rows[0].2 - 6.0 * 0.00885).abs() < 1e-9, "{rows:?}");
    assert_eq!(
        (rows[1].0.as_str(), rows[1].1.as_deref()),
        ("claude-opus-4-8", Some("fast,us_only"))
    );
    assert!(rows[1].3);
}
