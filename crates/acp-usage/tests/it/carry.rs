//! What one run of the relay hands the next through the ledger. Guarantees:
//!
//! - a session accounted by one run and reloaded by the next continues its cost and cumulative
//!   totals (the agent's per-process cost is added to the carried one, not taken for the session's);
//! - the hidden context an agent sends before the first visible prompt is learned from a session's
//!   first turn and becomes the `used` estimate of the next new session of that agent and model;
//! - a deleted session is forgotten;
//! - every settled call is in the ledger, once, with its turn.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::settings;
use acp_usage::relay::observer::{Observer, Settings};
use acp_usage::sinks::ledger::{self, Store, Writer, learned::Learned};
use serde_json::{Value, json};

fn line(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

/// A fresh ledger file of its own for a test.
fn scratch_ledger(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acp-usage-carry-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("ledger.db")
}

/// An observer as a run of the relay starts it: what the ledger learned, and the ledger.
fn observer(path: &Path) -> Observer {
    let agents = ledger::open(path).unwrap().agents().unwrap();
    Observer::new(Settings {
        learned: Learned { agents, ..Learned::default() },
        ledger: Some(path.to_path_buf()),
        ..settings(&["claude-agent-acp"])
    })
}

/// Writes what the observer settled, as the relay's writer thread does, and waits for it.
fn save(o: &mut Observer, path: &Path) {
    let sink = Writer::start(path.to_path_buf());
    for w in o.take_writes() {
        sink.send(w);
    }
    sink.finish(Duration::from_secs(10));
}

/// The `update` object of the first injected/rewritten usage_update in `lines`.
fn usage_update(lines: &[Vec<u8>]) -> Value {
    lines
        .iter()
        .map(|l| serde_json::from_slice::<Value>(l).unwrap())
        .find(|v| v["params"]["update"]["sessionUpdate"] == "usage_update")
        .map(|v| v["params"]["update"].clone())
        .expect("a usage_update")
}

/// initialize, session/new (model `sonnet`), one claude-style turn with a stated cost.
fn first_run(o: &mut Observer, session: &str, cost: f64) -> Value {
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})));
    o.from_agent(&line(
        json!({"jsonrpc":"2.0","id":0,"result":{"agentInfo":{"name":"claude-agent-acp"}}}),
    ));
    o.from_editor(&line(
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}),
    ));
    let opts = json!([{"id":"model","category":"model","currentValue":"sonnet","options":[]}]);
    let out = o.from_agent(&line(
        json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":session,"configOptions":opts}}),
    ));
    let after_new = usage_update(&out.after);
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"Say hi."}]}})));
    o.from_agent(&line(json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":session,"update":{"sessionUpdate":"usage_update","used":12019,"size":200000,"cost":{"amount":cost,"currency":"USD"}}}})));
    o.from_agent(&line(json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":7,"cachedReadTokens":9000,"cachedWriteTokens":3000,"totalTokens":12019}}})));
    after_new
}

#[test]
fn a_reloaded_session_continues_its_cost_and_totals() {
    let path = scratch_ledger("reload");
    let mut one = observer(&path);
    first_run(&mut one, "S1", 0.014091);
    save(&mut one, &path);
    assert!(Store::open(&path).unwrap().carried("S1").unwrap().is_some());

    // A new process: the agent's own cost starts at zero again.
    let mut two = observer(&path);
    two.from_editor(&line(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})));
    two.from_agent(&line(
        json!({"jsonrpc":"2.0","id":0,"result":{"agentInfo":{"name":"claude-agent-acp"}}}),
    ));
    two.from_editor(&line(json!({"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"S1","cwd":"/w"}})));
    // The replay is history, not usage.
    two.from_agent(&line(json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello from mock."}}}})));
    let out = two.from_agent(&line(json!({"jsonrpc":"2.0","id":1,"result":null})));
    let u = usage_update(&out.after);
    assert_eq!(u["used"], 12019, "{u}");
    assert_eq!(u["cost"]["amount"], 0.014091, "{u}");
    assert_eq!(u["_meta"]["acpUsage"]["cost"]["source"], "agent", "{u}");
    assert_eq!(u["_meta"]["usage"]["totalTokens"], 12019, "{u}");

    two.from_editor(&line(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[{"type":"text","text":"Again."}]}})));
    two.from_agent(&line(json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"usage_update","used":12100,"size":200000,"cost":{"amount":0.002,"currency":"USD"}}}})));
    let out = two.from_agent(&line(json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"cachedReadTokens":12000,"cachedWriteTokens":85,"totalTokens":12100}}})));
    let u = usage_update(&out.before);
    let amount = u["cost"]["amount"].as_f64().unwrap();
    assert!((amount - 0.016091).abs() < 1e-12, "carried 0.014091 + this process's 0.002: {u}");
    assert_eq!(u["_meta"]["acpUsage"]["cost"]["exact"], true, "{u}");
    assert_eq!(u["_meta"]["usage"]["totalTokens"], 12019 + 12100, "{u}");
}

#[test]
fn the_hidden_context_of_a_first_turn_seeds_the_next_session() {
    let path = scratch_ledger("baseline");
    let mut one = observer(&path);
    let after_new = first_run(&mut one, "S1", 0.014091);
    assert_eq!(after_new["used"], 0, "nothing learned yet: {after_new}");
    save(&mut one, &path);
    let agents = Store::open(&path).unwrap().agents().unwrap();
    let baseline = agents["claude/sonnet"].baseline.expect("a baseline");
    // 12,012 prompt tokens for a 3-token prompt ("Say hi."): the rest was hidden context.
    assert!((12_000..12_012).contains(&baseline), "{baseline}");

    let mut two = observer(&path);
    let after_new = first_run(&mut two, "S2", 0.01);
    assert_eq!(after_new["used"], baseline, "{after_new}");
    assert_eq!(after_new["_meta"]["acpUsage"]["used"]["source"], "estimate", "{after_new}");
}

#[test]
fn deleted_sessions_are_forgotten_by_the_ledger() {
    let path = scratch_ledger("delete");
    let mut one = observer(&path);
    first_run(&mut one, "S1", 0.01);
    save(&mut one, &path);
    assert!(Store::open(&path).unwrap().carried("S1").unwrap().is_some());

    let mut two = observer(&path);
    two.from_editor(&line(
        json!({"jsonrpc":"2.0","id":9,"method":"session/delete","params":{"sessionId":"S1"}}),
    ));
    two.from_agent(&line(json!({"jsonrpc":"2.0","id":9,"result":{}})));
    save(&mut two, &path);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.carried("S1").unwrap(), None);
    // Its calls stay: they were billed.
    assert!((store.session_spent("S1").unwrap() - 0.01).abs() < 1e-12);
}

#[test]
fn a_turn_and_its_calls_are_in_the_ledger_once() {
    let path = scratch_ledger("turn");
    let mut one = observer(&path);
    first_run(&mut one, "S1", 0.014091);
    save(&mut one, &path);
    // Nothing new since: nothing is written twice.
    save(&mut one, &path);
    let store = Store::open(&path).unwrap();
    let (calls, input, output, cost, turns, project, agent_name): (
        i64,
        i64,
        i64,
        f64,
        i64,
        String,
        String,
    ) = store
        .conn()
        .query_row(
            "SELECT SUM(c.calls), SUM(c.input), SUM(c.output), SUM(c.cost), s.turns, s.project,
                    s.agent_name
             FROM calls c JOIN sessions s ON s.id = c.session WHERE s.session_id = 'S1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
        )
        .unwrap();
    // The agent's turn sums (12 + 9,000 + 3,000 prompt tokens, 7 output), at its stated cost.
    assert_eq!((calls, input, output, turns), (1, 12_012, 7, 1));
    assert!((cost - 0.014091).abs() < 1e-12, "{cost}");
    assert_eq!((project.as_str(), agent_name.as_str()), ("/w", "claude-agent-acp"));
    let stop: String =
        store.conn().query_row("SELECT stop_reason FROM turns", [], |r| r.get(0)).unwrap();
    assert_eq!(stop, "end_turn");
}
