//! `acp-usage import` with real agents: sessions run directly (no relay) against the mock, then
//! imported from the transcripts the agents left in the lab's HOME.
//!
//! Guarantees checked, per agent (Claude Code, Codex, Gemini CLI, opencode, kilo, qwen-code):
//! - the ledger's totals after import (as `acp-usage report --json` reads them, and as the
//!   ledger holds them) equal what the mock served for every call the agent records on disk
//!   (every call but the few auxiliary ones an agent keeps no record of: Claude Code's and
//!   opencode's and kilo's titles, qwen-code's prompt suggestions), each counted once, priced to
//!   the catalog;
//! - a second import adds nothing;
//! - `report` imports first (into a fresh ledger, its totals are the import's, and an import
//!   after it adds nothing), and `report --no-import` reads the ledger as it is;
//! - a session the relay already recorded (through `acp-usage` with the ledger on) gains
//!   nothing from an import of its transcript but the calls the relay could not see (Codex and
//!   Claude Code: none, matched by key; qwen-code: its memory extraction, the rest matched by
//!   counts).
//!
//! A figure table goes to stderr: calls and tokens served vs imported.

use std::path::Path;
use std::process::Command;

use acp_usage::sinks::ledger::Store;
use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::{Call, CallKind};
use acp_usage_tests::relay::relay_binary;
use serde_json::Value;

use crate::flows;
use crate::support;

/// Calls, input, cache reads, output.
type Sums = (u64, u64, u64, u64);

fn sums(calls: &[&Call]) -> Sums {
    let u = support::sum(calls);
    (calls.iter().filter(|c| c.usage.is_some()).count() as u64, u.input, u.cache_read, u.output)
}

/// What the ledger at `path` holds: (calls, input, cache reads, output), cost, and the
/// sessions filed under `agent`.
fn ledger_totals(path: &Path, agent: &str) -> (Sums, f64, u64) {
    let store = Store::open_read(path).expect("the ledger exists");
    let conn = store.conn();
    let (sums, cost) = conn
        .query_row(
            "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(input), 0), COALESCE(SUM(cache_read), 0),
                    COALESCE(SUM(output), 0), COALESCE(SUM(cost), 0) FROM calls",
            [],
            |r| {
                let n = |i| r.get::<_, i64>(i).map(|v| v as u64);
                Ok(((n(0)?, n(1)?, n(2)?, n(3)?), r.get(4)?))
            },
        )
        .expect("totals");
    let sessions: i64 = conn
        .query_row("SELECT COUNT(*) FROM sessions WHERE agent = ?1", [agent], |r| r.get(0))
        .expect("sessions");
    (sums, cost, sessions as u64)
}

/// Runs `acp-usage <args>` with the lab's environment (its HOME and the agents' variables);
/// returns stdout and stderr.
fn acp_usage(lab: &Lab, args: &[&str]) -> (String, String) {
    let out = Command::new(relay_binary().expect("binary"))
        .env_clear()
        .envs(lab.spec.env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .current_dir(lab.scratch.work())
        .output()
        .expect("acp-usage runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "acp-usage {args:?} failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// `import --ledger <ledger>`; returns how many calls it added, from its summary line.
fn import(lab: &Lab, ledger: &Path) -> (u64, String) {
    let (_, stderr) = acp_usage(lab, &["import", "--ledger", ledger.to_str().expect("utf-8")]);
    let summary = stderr.lines().last().unwrap_or_default().to_owned();
    // "imported N sessions (M with new calls): K calls added, ..."
    let added = summary
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary line in: {stderr}"));
    (added, stderr)
}

fn report_totals(lab: &Lab, ledger: &Path) -> Option<Value> {
    let out = Command::new(relay_binary().expect("binary"))
        .env_clear()
        .envs(lab.spec.env.iter().map(|(k, v)| (k, v)))
        .args(["report", "session", "--json", "--ledger"])
        .arg(ledger)
        .output()
        .expect("report runs");
    // `report` is someone else's command: when it is not there (yet), the ledger is read directly.
    out.status.success().then(|| serde_json::from_slice::<Value>(&out.stdout).ok()).flatten()
}

/// `report session --json --ledger LEDGER ARGS` with the lab's environment; its JSON.
fn report_json(lab: &Lab, ledger: &Path, args: &[&str]) -> Value {
    let mut all = vec!["report", "session", "--json", "--ledger", ledger.to_str().expect("utf-8")];
    all.extend_from_slice(args);
    let (stdout, _) = acp_usage(lab, &all);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("report {args:?}: {e}: {stdout}"))
}

/// The calls of `agent`'s direct session that its records on disk hold: every billed call but
/// the auxiliary ones the agent records nowhere (Claude Code's and opencode's titles; qwen-code
/// records its memory extraction, not its prompt suggestions, classifier or title calls).
fn recorded(agent: Agent, calls: &[Call]) -> Vec<&Call> {
    let on_disk = |c: &Call| match agent {
        _ if c.kind != CallKind::Auxiliary => true,
        Agent::Claude | Agent::Opencode | Agent::Kilo => false,
        Agent::Qwen => c.request_body.to_string().contains("memory extraction subagent"),
        _ => true,
    };
    calls.iter().filter(|c| c.kind.is_billed() && on_disk(c)).collect()
}

/// A direct session (a plain turn and a tool turn), then `import` twice.
pub(crate) fn direct_then_import(agent: Agent) {
    let history = flows::direct_history(agent).expect("direct session");
    let lab = &history.lab;
    let ledger = lab.scratch.path("ledger.db");
    let served = lab.mock.calls();
    let want_calls = recorded(agent, &served);
    let want = sums(&want_calls);
    let want_cost = support::catalog_cost(want_calls.iter().copied());

    // `report --no-import` answers from the ledger as it is: there is none yet, and it makes
    // none.
    let mut failures = Vec::new();
    let bare = report_json(lab, &ledger, &["--no-import"]);
    if bare["totals"]["calls"].as_u64() != Some(0) || ledger.exists() {
        failures.push(format!("report --no-import imported: {}", bare["totals"]));
    }
    // `report` imports first: into a ledger of its own, it reports what was served, and an
    // import after it has nothing left to add.
    let fresh = lab.scratch.path("report-first.db");
    let first = report_json(lab, &fresh, &[]);
    if first["totals"]["calls"].as_u64() != Some(want.0) {
        failures.push(format!("report did not import first: {} != {want:?}", first["totals"]));
    }
    let (after_report, _) = import(lab, &fresh);
    if after_report != 0 {
        failures.push(format!("an import after report added {after_report} calls"));
    }

    let (added, stderr) = import(lab, &ledger);
    let (got, cost, sessions) = ledger_totals(&ledger, agent.name());
    let left_out: Vec<String> = served
        .iter()
        .filter(|c| c.kind.is_billed() && !want_calls.iter().any(|w| w.seq == c.seq))
        .map(|c| format!("{:?} {}", c.kind, c.model.as_deref().unwrap_or("?")))
        .collect();
    eprintln!(
        "import {:<8} served {} billed calls ({} recorded: {} in / {} cache read / {} out; left out: {:?}); \
         imported {} calls ({} in / {} cache read / {} out), cost {cost:.6} (catalog {:.6})",
        agent.name(),
        served.iter().filter(|c| c.kind.is_billed()).count(),
        want.0,
        want.1,
        want.2,
        want.3,
        left_out,
        got.0,
        got.1,
        got.2,
        got.3,
        want_cost,
    );
    if got != want {
        failures.push(format!("ledger totals {got:?} != served {want:?}\n{stderr}"));
    }
    if added != want.0 {
        failures.push(format!("import said {added} calls added, the mock served {}", want.0));
    }
    if sessions != 1 {
        failures.push(format!("{sessions} sessions filed under {}", agent.name()));
    }
    if !support::close(cost, want_cost) {
        failures.push(format!("cost {cost} != the catalog's {want_cost}"));
    }
    if let Some(report) = report_totals(lab, &ledger) {
        let t = &report["totals"];
        let rep = (
            t["calls"].as_u64(),
            t["inputTokens"].as_u64(),
            t["cachedReadTokens"].as_u64(),
            t["outputTokens"].as_u64(),
        );
        if rep != (Some(want.0), Some(want.1), Some(want.2), Some(want.3)) {
            failures.push(format!("report --json totals {t} != served {want:?}"));
        }
        if !report["rows"].to_string().contains(&history.session_id) {
            failures.push(format!("no report row names the session: {}", report["rows"]));
        }
    } else {
        eprintln!(
            "import {}: `report --json` unavailable; checked the ledger directly",
            agent.name()
        );
    }

    let (again, stderr) = import(lab, &ledger);
    if again != 0 || ledger_totals(&ledger, agent.name()).0 != got {
        failures.push(format!("a second import added {again} calls:\n{stderr}"));
    }
    assert!(failures.is_empty(), "{}:\n{}", agent.name(), failures.join("\n"));
}

#[test]
fn import_claude() {
    direct_then_import(Agent::Claude);
}

#[test]
fn import_codex() {
    direct_then_import(Agent::Codex);
}

#[test]
fn import_gemini() {
    direct_then_import(Agent::Gemini);
}

#[test]
fn import_opencode() {
    direct_then_import(Agent::Opencode);
}

#[test]
fn import_kilo() {
    direct_then_import(Agent::Kilo);
}

#[test]
fn import_qwen() {
    direct_then_import(Agent::Qwen);
}

/// A session through the relay with the ledger on (a plain turn and a tool turn); returns the
/// lab, the ledger, what the relay recorded, and the import's calls added and output.
fn relay_then_import(agent: Agent, relay_args: &[&str]) -> (Lab, Sums, Sums, u64, String) {
    let mut lab = Lab::new(agent, support::script(agent)).expect("lab");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    let client = lab.relayed_with(relay_args).expect("relay");
    client.initialize().expect("initialize");
    let id = flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap();
    for prompt in [flows::PLAIN_PROMPT, flows::TOOL_PROMPT] {
        run_turn(&client, &lab.mock, &id, prompt).expect("turn");
    }
    drop(client);
    let (before, _, _) = ledger_totals(&ledger, agent.name());
    let (added, stderr) = import(&lab, &ledger);
    let (after, _, sessions) = ledger_totals(&ledger, agent.name());
    let want = sums(&recorded(agent, &lab.mock.calls()));
    eprintln!(
        "import after the relay, {}: relay recorded {before:?}, import added {added}, ledger {after:?}; \
         on disk {want:?}",
        agent.name()
    );
    assert_eq!(sessions, 1, "{stderr}");
    (lab, before, after, added, stderr)
}

/// Codex through the relay: every call is in the ledger already (keyed by the rollout's keys),
/// and an import of the same rollout adds none of them.
#[test]
fn import_after_the_relay_codex() {
    let (lab, before, after, added, stderr) = relay_then_import(Agent::Codex, &[]);
    let want = sums(&recorded(Agent::Codex, &lab.mock.calls()));
    assert_eq!(before, want, "the relay recorded every call");
    assert_eq!((added, after), (0, want), "{stderr}");
}

/// Claude Code through the relay: the relay's rows carry the message ids, so nothing is added
/// (the relay may also hold title calls the transcript never shows).
#[test]
fn import_after_the_relay_claude() {
    let (_lab, before, after, added, stderr) = relay_then_import(Agent::Claude, &[]);
    assert_eq!((added, after), (0, before), "{stderr}");
}

/// qwen-code through the relay without the tap: its calls come from qwen's ACP reports,
/// without ids, so they are matched by their counts; import adds only what the relay could not
/// see (memory extraction), and every recorded call is then in the ledger once.
#[test]
fn import_after_the_relay_qwen() {
    let (lab, before, after, added, stderr) = relay_then_import(Agent::Qwen, &["--tap", "off"]);
    let want = sums(&recorded(Agent::Qwen, &lab.mock.calls()));
    assert_eq!((after, added), (want, want.0 - before.0), "{stderr}");
}

/// qwen-code through the relay as it runs by default, with the tap: the relay recorded every
/// billed call, side calls included, and an import of qwen's records adds none of them again.
#[test]
fn import_after_the_tapped_relay_qwen() {
    let (lab, before, after, added, stderr) = relay_then_import(Agent::Qwen, &[]);
    // Every call qwen records, and its side calls besides (a memory extraction still running
    // when the session closes may miss the ledger: the relay is ending).
    let recorded = sums(&recorded(Agent::Qwen, &lab.mock.calls()));
    let billed = lab.mock.calls().into_iter().filter(|c| c.kind.is_billed()).count() as u64;
    assert!(
        (recorded.0..=billed).contains(&before.0),
        "the tap recorded {before:?}; qwen's records hold {recorded:?}, the mock billed {billed}"
    );
    assert_eq!((added, after), (0, before), "{stderr}");
}
