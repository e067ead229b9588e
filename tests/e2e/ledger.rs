//! The ledger with real agents: several acp-usage processes writing one SQLite file at once, one
//! of them killed with SIGKILL, and budgets and context thresholds in the relay.
//!
//! Guarantees checked:
//! - two relays running sessions at the same time and a third killed with SIGKILL after its
//!   first turn leave a ledger whose totals (as `acp-usage report --json` reads them) equal the
//!   sum of every call the three mocks served, each counted once, priced to the catalog;
//! - `budget.action = "block"`: once a budget is spent, the next `session/prompt` is answered by
//!   acp-usage with an error naming the budget, and the agent never sees it (no model call);
//! - `warn`: one `notice` per crossing to a client that advertised `session.notices`, and none to
//!   one that did not; a context threshold crossed is noticed once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use acp_usage::sinks::ledger::Store;
use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::process_tree::{self, Proc};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::{Value, json};

use crate::flows;
use crate::support;

/// Codex (codex-rs behind Zed's adapter): exact per-call figures from its rollouts, fast to
/// start, no side calls; its model is priced in the tests' own table.
const AGENT: Agent = Agent::Codex;

/// What the ledger at `path` holds in all: calls, input, cache reads, output, cost.
fn ledger_totals(path: &Path) -> (u64, u64, u64, u64, f64) {
    let store = Store::open_read(path).expect("the ledger exists");
    store
        .conn()
        .query_row(
            "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(input), 0), COALESCE(SUM(cache_read), 0),
                    COALESCE(SUM(output), 0), COALESCE(SUM(cost), 0) FROM calls",
            [],
            |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                    r.get::<_, i64>(3)? as u64,
                    r.get(4)?,
                ))
            },
        )
        .expect("totals")
}

/// A lab whose relays write the ledger at `ledger`.
fn lab_on(ledger: &Path) -> Lab {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    lab
}

/// Runs `prompts` in a new session through the relay; returns every billed call the mock served.
fn session(
    lab: &Lab,
    client: &AcpClient,
    prompts: &[&str],
) -> Vec<acp_usage_tests::mock_llm::Call> {
    client.initialize().expect("initialize");
    let id = flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap();
    for p in prompts {
        run_turn(client, &lab.mock, &id, p).expect("turn");
    }
    lab.mock.calls().into_iter().filter(|c| c.kind.is_billed()).collect()
}

#[test]
fn ledger_concurrent_relays_and_a_killed_one() {
    let shared = Scratch::new("ledger-shared").expect("scratch");
    let ledger = shared.path("ledger.db");
    let labs: Vec<Lab> = (0..3).map(|_| lab_on(&ledger)).collect();

    // Two relays at once, two turns each, ending cleanly.
    let served: Vec<Vec<acp_usage_tests::mock_llm::Call>> = std::thread::scope(|s| {
        let runs: Vec<_> = labs[..2]
            .iter()
            .map(|lab| {
                s.spawn(move || {
                    let client = lab.relayed().expect("relay");
                    let calls = session(lab, &client, &[flows::PLAIN_PROMPT, flows::TOOL_PROMPT]);
                    drop(client);
                    calls
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a relay's session")).collect()
    });

    // A third, killed with SIGKILL once its first turn is in the ledger.
    let killed = &labs[2];
    let client = killed.relayed().expect("relay");
    let before = ledger_totals(&ledger).0;
    let third = session(killed, &client, &[flows::PLAIN_PROMPT]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while ledger_totals(&ledger).0 < before + third.len() as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its agent's whole tree (the guard, the launcher and the native binary), before the kill.
    let tree: Vec<Proc> = process_tree::tree(client.pid() as i32)
        .into_iter()
        .filter(|p| p.pid != client.pid() as i32)
        .collect();
    let _cleanup = process_tree::KillOnDrop(tree.clone());
    assert!(tree.len() >= 2, "the relay runs its agent under a guard: {tree:?}");
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(client.pid() as i32, libc::SIGKILL) };
    drop(client);
    // Nothing the killed relay started outlives it.
    let left = process_tree::wait_all_gone(&tree, Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "5 s after the relay's SIGKILL its agent's tree is still running: {left:?}"
    );

    let all: Vec<&acp_usage_tests::mock_llm::Call> =
        served.iter().flatten().chain(third.iter()).collect();
    let want = support::sum(&all);
    let want_cost = support::catalog_cost(all.iter().copied());

    let report = report_json(&ledger, &[]);
    let t = &report["totals"];
    let got = (
        t["calls"].as_u64(),
        t["inputTokens"].as_u64(),
        t["cachedReadTokens"].as_u64(),
        t["outputTokens"].as_u64(),
    );
    assert_eq!(
        got,
        (Some(all.len() as u64), Some(want.input), Some(want.cache_read), Some(want.output)),
        "report totals {t} vs the mocks' {want:?} over {} calls",
        all.len()
    );
    let cost = t["cost"].as_f64().expect("a cost");
    assert!((cost - want_cost).abs() < 1e-9, "cost {cost} vs the catalog's {want_cost}");
    // The store agrees with the report, and nothing was counted twice.
    let (calls, input, _, output, _) = ledger_totals(&ledger);
    assert_eq!((calls, input, output), (all.len() as u64, want.input, want.output));
    // A later writer still opens the file (the killed process left it whole).
    Store::open(&ledger).expect("the ledger opens after a SIGKILL");
}

/// `acp-usage report --json` over `ledger`.
fn report_json(ledger: &Path, args: &[&str]) -> Value {
    let out = Command::new(relay_binary().expect("binary"))
        // The relays' ledger as they wrote it: no import of this machine's transcripts.
        .args(["report", "--json", "--no-import", "--ledger"])
        .arg(ledger)
        .args(args)
        .output()
        .expect("report runs");
    assert!(out.status.success(), "report failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("report prints JSON")
}

/// A config file with `body` in a scratch directory.
fn config(scratch: &Scratch, body: &str) -> PathBuf {
    let path = scratch.path("config.toml");
    std::fs::write(&path, body).expect("config");
    path
}

/// `initialize` advertising notices (or not), then a new session; returns its id.
pub(crate) fn open(lab: &Lab, client: &AcpClient, notices: bool) -> String {
    initialize(client, notices);
    flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap()
}

/// `initialize` advertising notices (or not).
pub(crate) fn initialize(client: &AcpClient, notices: bool) {
    let mut caps = json!({"fs": {"readTextFile": false, "writeTextFile": false}});
    if notices {
        caps["session"] = json!({"notices": {}});
    }
    client
        .request("initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}))
        .expect("initialize");
}

fn notices(updates: &[Value]) -> Vec<&Value> {
    updates.iter().filter(|u| u["sessionUpdate"] == "notice").collect()
}

#[test]
fn ledger_budget_block_refuses_the_next_prompt() {
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let cfg = config(&lab.scratch, "[budget]\nsession = 0.0001\naction = \"block\"\n");
    let cfg = cfg.display().to_string();
    let client = lab.relayed_with(&["--config", &cfg]).expect("relay");
    let id = open(&lab, &client, true);
    // Nothing spent yet: the first prompt goes through and spends past the budget.
    let turn = run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("first turn");
    assert!(!turn.billed_calls().is_empty());
    let spent = notices(&turn.updates);
    assert_eq!(spent.len(), 1, "one notice: the budget is spent: {spent:#?}");
    assert_eq!(spent[0]["_meta"]["acpUsage"]["fraction"], 1.0, "{spent:#?}");
    assert_eq!(spent[0]["severity"], "error", "{spent:#?}");

    let calls_before = lab.mock.calls().len();
    let response = client
        .request_response(
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": flows::PLAIN_PROMPT}]}),
        )
        .expect("an answer");
    let error = &response["error"];
    assert_eq!(error["code"], -32050, "{response}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("session budget") && message.contains("budget.session"),
        "the error names the budget and how to raise it: {message}"
    );
    assert_eq!(error["data"]["acpUsage"]["budget"], "session", "{response}");
    assert!(error["data"]["acpUsage"]["spent"].as_f64().unwrap_or(0.0) >= 0.0001);
    // The agent never saw it: no model call, and the session still answers other requests.
    assert_eq!(lab.mock.calls().len(), calls_before, "the refused prompt reached the agent");
}

#[test]
fn ledger_budget_warn_notices_once_per_crossing_and_only_to_clients_that_show_them() {
    for notices_on in [true, false] {
        let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
        // Half the first turn's cost is crossed by it; the context line at 1% is crossed by the
        // first call.
        let cfg = config(
            &lab.scratch,
            "[budget]\nsession = 1.0\nwarn_at = [0.000001]\n\n[context]\nwarn_at = [0.01]\n",
        );
        let cfg = cfg.display().to_string();
        let client = lab.relayed_with(&["--config", &cfg]).expect("relay");
        let id = open(&lab, &client, notices_on);
        let first = run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn 1");
        let second = run_turn(&client, &lab.mock, &id, flows::TOOL_PROMPT).expect("turn 2");
        let (n1, n2) = (notices(&first.updates), notices(&second.updates));
        if !notices_on {
            assert!(
                n1.is_empty() && n2.is_empty(),
                "notices to a client without them: {n1:#?} {n2:#?}"
            );
            continue;
        }
        let budget: Vec<_> =
            n1.iter().filter(|n| n["_meta"]["acpUsage"]["budget"] == "session").collect();
        let context: Vec<_> =
            n1.iter().filter(|n| n["_meta"]["acpUsage"]["context"].is_object()).collect();
        assert_eq!(budget.len(), 1, "the budget line crossed once in turn 1: {n1:#?}");
        assert_eq!(context.len(), 1, "the context line crossed once in turn 1: {n1:#?}");
        assert!(n2.is_empty(), "nothing new crossed in turn 2: {n2:#?}");
        assert!(
            context[0]["title"].as_str().is_some_and(|t| t.contains("Context")),
            "{context:#?}"
        );
    }
}
