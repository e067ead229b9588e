//! pi through pi-acp 0.0.34 (npm `pi-acp`, running `pi` 1.6.0 of
//! `@earendil-works/pi-coding-agent`) against the Anthropic Messages mock: pi's own Anthropic
//! provider, its base URL set in `~/.pi/agent/models.json`, model `anthropic/claude-sonnet-4-5`.
//!
//! What it sends by itself (`pi_direct` pins this down): `agentInfo.name` `pi-acp`,
//! `loadSession`, no `resume`. A `usage_update` with only `used` and `size` after the
//! `session/new` response (`used` 0), after the `session/load` response, and at the end of each
//! turn: `used` is pi's `totalTokens` of the last assistant message (input with the cache and
//! output), `size` its catalog's window (200,000). Never a cost, never a `usage` or `_meta` in
//! the `session/prompt` result. Per call, the provider's counts and pi's own price are in its
//! session file (`~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl`), which appears at the first
//! prompt. The only side calls pi makes here are cache warming (off in these tests but one:
//! `pi_relay_cache_warming`).
//!
//! Behind the relay, acp-usage follows that file: every figure exact (`pi_relay_turns`,
//! `pi_relay_load`, `pi_relay_reopen_unseen`), `size` claude-sonnet-4-5's catalog window, known
//! from the model option `session/new` selects. No tap: pi ignores the base-URL variables.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use acp_usage::sinks::ledger::Store;
use acp_usage_tests::agents::{self, Agent};
use acp_usage_tests::lab::{Lab, Turn, run_turn};
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use serde_json::{Value, json};

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Pi;
/// claude-sonnet-4-5's window in the catalog (pi's own catalog says the same).
const WINDOW: u64 = 200_000;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: false,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: false,
};

/// The session's file in a lab's scratch HOME.
fn session_file(home: PathBuf, session_id: &str) -> Option<PathBuf> {
    let sessions = home.join(".pi/agent/sessions");
    let suffix = format!("_{session_id}.jsonl");
    std::fs::read_dir(sessions).ok()?.filter_map(Result::ok).find_map(|dir| {
        let entries = std::fs::read_dir(dir.path()).ok()?;
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&suffix))
    })
}

/// The entries of the session's file with a `usage`: assistant messages and `usage` entries.
fn usage_entries(home: PathBuf, session_id: &str) -> Vec<Value> {
    let text = session_file(home, session_id)
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["type"] == "usage" || e["message"]["role"] == "assistant")
        .collect()
}

/// pi's `usage_update`: `used` = the last call's tokens (pi's `totalTokens`), `size` = the
/// window, nothing else.
fn check_agent_update(checks: &mut Checks, phase: &str, update: &Value, last: Option<&Usage>) {
    let used = support::u64_at(update, "used");
    let want = last.map_or(0, |u| u.in_context());
    checks.check(used == Some(want), || format!("{phase}: pi's used should be {want}: {update}"));
    checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
        format!("{phase}: pi's size should be {WINDOW}: {update}")
    });
    checks.check(update.get("cost").is_none() && update.get("_meta").is_none(), || {
        format!("{phase}: pi-acp now sends a cost or _meta: {update}")
    });
}

/// One `usage_update` at the end of the turn, and a result of only the stop reason.
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn) {
    let updates = turn.usage_updates();
    checks.check(updates.len() == 1, || format!("{phase}: pi's usage_updates: {updates:?}"));
    let last = turn.main_calls().last().and_then(|call| call.usage);
    if let Some(update) = updates.last() {
        check_agent_update(checks, phase, update, last.as_ref());
    }
    checks.check(turn.result == json!({"stopReason": "end_turn"}), || {
        format!("{phase}: pi's result now says more than its stop reason: {}", turn.result)
    });
}

/// Each call's entry in the session file: the provider's counts (input without the cache, 1h
/// writes apart) and pi's price, the catalog's.
fn check_entries(checks: &mut Checks, entries: &[Value], calls: &[Call]) {
    checks.check(entries.len() == calls.len(), || {
        format!("session file: {} usage entries for {} call(s)", entries.len(), calls.len())
    });
    for (entry, call) in entries.iter().zip(calls) {
        let Some(usage) = call.usage else { continue };
        let recorded = &entry["message"]["usage"];
        let want = [
            ("input", usage.input - usage.cache_read - usage.cache_write()),
            ("cacheRead", usage.cache_read),
            ("cacheWrite", usage.cache_write()),
            ("cacheWrite1h", usage.cache_write_1h),
            ("output", usage.output),
            ("totalTokens", usage.total()),
        ];
        for (key, want) in want {
            checks.check(support::u64_at(recorded, key) == Some(want), || {
                format!("session file usage.{key} should be {want}: {entry}")
            });
        }
        let cost = recorded["cost"]["total"].as_f64().unwrap_or(-1.0);
        let want = support::catalog_cost([call]);
        checks.check(support::close(cost, want), || {
            format!("session file cost.total {cost} != catalog {want}")
        });
    }
}

#[test]
fn pi_direct() {
    let history = flows::direct_history(AGENT).expect("direct pi session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "pi-acp", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "0.0.34", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"].get("resume").is_none(),
        || format!("pi-acp should advertise loadSession and no resume: {init}"),
    );
    let after_new: Vec<&Value> =
        updates_after_new.iter().filter(|u| u["sessionUpdate"] == "usage_update").collect();
    checks.check(after_new.len() == 1, || format!("after session/new: {after_new:?}"));
    if let Some(update) = after_new.first() {
        check_agent_update(&mut checks, "after session/new", update, None);
    }
    for (n, turn) in turns.iter().enumerate() {
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn);
    }
    checks.check(lab.mock.calls().iter().all(|call| call.kind == CallKind::Main), || {
        "pi made a side call with cache warming off".to_owned()
    });
    let last = lab.mock.calls().last().and_then(|call| call.usage);
    let (turn, load) =
        flows::reopen_direct_with(&mut checks, lab, session_id, "session/load", |checks, u| {
            checks.check(u.len() == 1, || format!("after session/load: {u:?}"));
            if let Some(update) = u.first() {
                check_agent_update(checks, "after session/load", update, last.as_ref());
            }
        });
    check_agent_turn(&mut checks, "direct turn after session/load", &turn);
    let entries = usage_entries(lab.scratch.home(), session_id);
    check_entries(&mut checks, &entries, &lab.mock.calls());
    support::save_fixture("pi-direct.jsonl", &history.transcript);
    support::save_fixture("pi-direct-load.jsonl", &load);
    support::save_fixture("pi-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

#[test]
fn pi_relay_turns() {
    // A plain turn, a tool turn (two calls), a plain turn.
    flows::relay_turns_and_more(EXPECT, 1);
}

#[test]
fn pi_relay_turns_session_dir() {
    // `sessionDir` in pi's settings moves its session files (flat, no per-cwd directory): the
    // relay finds them there, so every figure stays exact (without them pi-acp gives none).
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let dir = lab.scratch.path("pi-sessions");
    let settings_path = lab.scratch.home().join(".pi/agent/settings.json");
    let text = std::fs::read_to_string(&settings_path).expect("pi settings");
    let mut settings: Value = serde_json::from_str(&text).expect("pi settings json");
    settings["sessionDir"] = json!(dir.display().to_string());
    std::fs::write(&settings_path, settings.to_string()).expect("pi settings");
    flows::relay_turns_in(EXPECT, &lab, &[]);
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "jsonl")), "{files:?}");
    let default = lab.scratch.home().join(".pi/agent/sessions");
    assert!(!default.exists() || std::fs::read_dir(&default).is_ok_and(|mut d| d.next().is_none()));
}

#[test]
fn pi_relay_load() {
    // No session/resume: the relay must pass pi-acp's refusal through.
    flows::relay_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn pi_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn import_pi() {
    crate::import::direct_then_import(AGENT);
}

/// What pi charges per token with the cache-warming test's override (cache writes at
/// $37.50/M, which makes warming pay off while idle); 1h writes at twice the input price.
fn warming_cost<'a>(calls: impl IntoIterator<Item = &'a Call>) -> f64 {
    calls
        .into_iter()
        .filter_map(|call| call.usage)
        .map(|u| {
            let uncached = u.input - u.cache_read - u.cache_write();
            (uncached as f64 * 3.0
                + u.output as f64 * 15.0
                + u.cache_read as f64 * 0.3
                + u.cache_write_5m as f64 * 37.5
                + u.cache_write_1h as f64 * 6.0)
                / 1e6
        })
        .sum()
}

/// Cache warming on: after a turn, pi re-sends its last request with `max_tokens: 1` while the
/// session is idle, and records each as a `usage` entry. The relay counts them as side calls
/// between turns: in the session's cost and totals from the update sent for them on, in no
/// turn's usage, never in `used`; the cost is pi's own price of each call (here with a price override).
#[test]
fn pi_relay_cache_warming() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let dir = lab.scratch.home().join(".pi/agent");
    std::fs::write(dir.join("settings.json"), agents::pi_settings(true)).expect("settings");
    // Warming pays off for pi only with a short cache (delay: 20 s - 10 s) and dear writes.
    let overrides =
        json!({"promptCache": {"short": 20, "long": 3600}, "cost": {"cacheWrite": 37.5}});
    std::fs::write(dir.join("models.json"), agents::pi_models(&lab.mock.url(), Some(overrides)))
        .expect("models");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    let mut checks = Checks::new(AGENT);
    checks.exact_everything = true;
    let client = lab.relayed().expect("start the relay");
    client.initialize().expect("initialize");
    let session =
        flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).expect("id");

    let first = run_turn(&client, &lab.mock, &session, flows::PLAIN_PROMPT).expect("turn 1");
    checks.check(first.billed_calls().len() == 1, || format!("turn 1 calls: {:#?}", first.calls));
    let after_first = client.mark();
    // The first warming call comes ~10 s after the turn.
    let deadline = Instant::now() + Duration::from_secs(40);
    let warm = loop {
        let warm: Vec<Call> =
            lab.mock.calls().into_iter().filter(|c| c.kind == CallKind::Auxiliary).collect();
        if !warm.is_empty() || Instant::now() > deadline {
            break warm;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!warm.is_empty(), "pi made no cache-warming call: {:#?}", lab.mock.calls());
    checks.check(warm.iter().all(|c| !c.declared_tools.is_empty()), || {
        "pi's cache warming should re-send the tools (the mock tells it by max_tokens)".to_owned()
    });
    // Its `usage` entry is in the file within a few ms; the relay's worker reads it on its
    // next tick and sends an update for it (trigger `between_turns`): the editor's cost covers
    // the warming call without waiting for the next turn.
    let deadline = Instant::now() + Duration::from_secs(5);
    let between = loop {
        let updates = client.updates_since(after_first, "usage_update");
        if !updates.is_empty() || Instant::now() > deadline {
            break updates;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    match between.first() {
        Some(update) => {
            let trigger = &update["_meta"]["acpUsage"]["trigger"];
            checks.check(trigger == "between_turns", || format!("between turns: {update}"));
            let served: Vec<Call> = lab.mock.calls();
            let got = update["cost"]["amount"].as_f64();
            let want = warming_cost(&served);
            checks.row("between turns", "cost (USD)", got, want, Some(true));
            checks.check(got.is_some_and(|got| support::close(got, want)), || {
                format!("between turns: cost {got:?} != turn 1 and the warming call {want}")
            });
        }
        None => checks.fail("no usage_update within 5 s of a call between turns".to_owned()),
    }

    let second = run_turn(&client, &lab.mock, &session, flows::TOOL_PROMPT).expect("turn 2");
    let in_turn = second.billed_calls();
    let served = support::sum(&in_turn);
    checks.turn_usage("turn 2", &second.result["usage"], served, Known::Everything);
    match support::usage_update_before_result(&client) {
        Some(update) => {
            let last = second.main_calls().last().and_then(|c| c.usage);
            let all = lab.mock.calls();
            checks.usage_update("turn 2", &update, last.as_ref(), Some(WINDOW), None);
            let got = update["cost"]["amount"].as_f64();
            let want = warming_cost(&all);
            checks.row("turn 2", "cost (USD)", got, want, Some(true));
            checks.check(got.is_some_and(|got| support::close(got, want)), || {
                format!("turn 2: cost {got:?} != every call at pi's prices {want}")
            });
            let refs: Vec<&Call> = all.iter().collect();
            checks.cumulative("turn 2", &update, support::sum(&refs), true, Known::Everything);
        }
        None => checks.fail("turn 2: no usage_update right before the result".to_owned()),
    }
    drop(client);

    // The ledger: each warming call once, a side call outside any turn, at pi's stated price
    // (turn 1's and turn 2's calls are their turns').
    let store = Store::open_read(&ledger).expect("the ledger");
    let rows: Vec<(String, Option<i64>, i64, i64, f64)> = {
        let conn = store.conn();
        let mut stmt = conn
            .prepare(
                "SELECT role, turn, input, cost_stated, COALESCE(cost, -1) FROM calls
                 WHERE turn IS NULL AND provisional IS NULL",
            )
            .expect("query");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    let warm_calls: Vec<Call> = lab
        .mock
        .calls()
        .into_iter()
        .filter(|c| c.kind == CallKind::Auxiliary && !in_turn.iter().any(|t| t.seq == c.seq))
        .collect();
    checks.check(rows.len() == warm_calls.len(), || {
        format!(
            "ledger: {} warming rows, the mock served {} warming call(s)",
            rows.len(),
            warm_calls.len()
        )
    });
    for (role, turn, input, stated, cost) in &rows {
        let want = warm_calls.first().and_then(|c| c.usage).map_or(0, |u| u.input) as i64;
        checks.check(role == "side" && turn.is_none() && *input == want && *stated == 1, || {
            format!(
                "ledger warming row: role {role}, turn {turn:?}, input {input}, stated {stated}"
            )
        });
        let want = warming_cost(warm_calls.iter().take(1));
        checks
            .check(support::close(*cost, want), || format!("ledger warming cost {cost} != {want}"));
    }
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}
