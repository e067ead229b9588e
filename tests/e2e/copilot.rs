//! GitHub Copilot CLI 1.0.102 (`copilot --acp`, npm `@github/copilot`) against the Anthropic
//! Messages mock, bring-your-own-key in offline mode (no GitHub login).
//!
//! What it sends by itself (`copilot_direct` pins this down): `agentInfo.name` `Copilot`,
//! `loadSession`, `sessionCapabilities` `list` and `close` (no `resume`). Nothing after
//! `session/new` or `session/load`. One `usage_update` before each model call, its `used`
//! Copilot's own estimate of the prompt it is about to send (not the provider's count), its
//! `size` the model's `maxPromptTokens` (168,000 for claude-sonnet-4.5); never a `cost`. The
//! `session/prompt` result's `usage` counts every call since the session was created or loaded
//! in this process (turn 2 reports turn 1 + turn 2), input including the cache. Per call, the
//! provider's counts are in `$COPILOT_HOME/session-state/<id>/events.jsonl`
//! (`session.usage_record`). No side calls.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::Turn;
use acp_usage_tests::mock_llm::{Call, Usage};
use serde_json::Value;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Copilot;
/// claude-sonnet-4.5's `maxPromptTokens` in Copilot's catalog: the prompt limit Copilot enforces
/// and reports as `size`.
const WINDOW: u64 = 168_000;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    // Copilot says nothing before its first call, and names no model over ACP.
    size_on_new: None,
    known: Known::Everything,
    turn_exact: true,
    resume: false,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: false,
};

/// The ACP `Usage` Copilot reports for `usage` (input including the cache).
fn check_reported(checks: &mut Checks, phase: &str, result: &Value, usage: &Usage) {
    let reported = &result["usage"];
    let want = [
        ("inputTokens", usage.input),
        ("outputTokens", usage.output),
        ("totalTokens", usage.total()),
        ("cachedReadTokens", usage.cache_read),
        ("cachedWriteTokens", usage.cache_write()),
    ];
    for (key, want) in want {
        checks.check(support::u64_at(reported, key) == Some(want), || {
            format!("{phase}: copilot usage.{key} should be {want}: {result}")
        });
    }
}

/// One `usage_update` per main call, each before the call's reply reaches the client, with an
/// estimated `used` below the window, `size` = the window and no cost; the result's `usage` is
/// `cumulative` (every call of this process so far).
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn, cumulative: &Usage) {
    let calls = turn.main_calls();
    let updates = turn.usage_updates();
    checks.check(updates.len() == calls.len(), || {
        format!(
            "{phase}: {} usage_update(s) for {} call(s): {updates:?}",
            updates.len(),
            calls.len()
        )
    });
    for update in &updates {
        let used = support::u64_at(update, "used").unwrap_or(0);
        checks.check(used > 1000 && used < WINDOW, || {
            format!("{phase}: copilot used should be its prompt estimate: {update}")
        });
        checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
            format!("{phase}: copilot size {update}")
        });
        checks.check(update.get("cost").is_none() && update.get("_meta").is_none(), || {
            format!("{phase}: copilot now sends a cost or _meta: {update}")
        });
    }
    // Sent before the call: every reply's text follows a usage_update of its own.
    let kinds: Vec<&str> = turn
        .updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .filter(|kind| *kind == "usage_update" || *kind == "agent_message_chunk")
        .collect();
    let last_update = kinds.iter().rposition(|kind| *kind == "usage_update");
    let last_reply = kinds.iter().rposition(|kind| *kind == "agent_message_chunk");
    checks.check(kinds.first() == Some(&"usage_update") && last_update < last_reply, || {
        format!("{phase}: copilot's usage_update should come before each call's reply: {kinds:?}")
    });
    check_reported(checks, phase, &turn.result, cumulative);
    for key in ["cost", "_meta"] {
        checks.check(turn.result.get(key).is_none(), || {
            format!("{phase}: copilot's result now has {key}: {}", turn.result)
        });
    }
}

/// `session.usage_record` events of the session's `events.jsonl`: one per call, the provider's
/// counts (input including the cache), `maxPromptTokens`, cost 0 under BYOK.
fn check_events(checks: &mut Checks, history: &History, calls: &[Call]) {
    let path = history
        .lab
        .scratch
        .home()
        .join(".copilot/session-state")
        .join(&history.session_id)
        .join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == "session.usage_record")
        .map(|event| event["data"]["usage"].clone())
        .collect();
    checks.check(records.len() == calls.len(), || {
        format!("{}: {} usage record(s) for {} call(s)", path.display(), records.len(), calls.len())
    });
    for (record, call) in records.iter().zip(calls) {
        let Some(usage) = call.usage else { continue };
        let want = [
            ("inputTokens", usage.input),
            ("outputTokens", usage.output),
            ("cacheReadTokens", usage.cache_read),
            ("cacheWriteTokens", usage.cache_write()),
            ("maxPromptTokens", WINDOW),
        ];
        for (key, want) in want {
            checks.check(support::u64_at(record, key) == Some(want), || {
                format!("events.jsonl usage_record.{key} should be {want}: {record}")
            });
        }
        checks.check(record["model"] == "claude-sonnet-4.5" && record["cost"] == 0.0, || {
            format!("events.jsonl usage_record model/cost: {record}")
        });
    }
}

#[test]
fn copilot_direct() {
    let history = flows::direct_history(AGENT).expect("direct copilot session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "Copilot", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "1.0.102", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"].get("resume").is_none(),
        || format!("copilot should advertise loadSession and no resume: {init}"),
    );
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "copilot sent a usage_update after session/new".to_owned(),
    );
    let mut cumulative = Usage::default();
    for (n, turn) in turns.iter().enumerate() {
        cumulative += support::sum(&turn.main_calls());
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn, &cumulative);
    }
    checks.check(lab.mock.calls().iter().all(|call| !call.declared_tools.is_empty()), || {
        "copilot made a call without tools (a side call)".to_owned()
    });
    check_events(&mut checks, &history, &lab.mock.calls());
    // A new process: nothing on session/load, and the counter starts again.
    let (turn, load) = flows::reopen_direct(&mut checks, lab, session_id, "session/load");
    let fresh = support::sum(&turn.main_calls());
    check_agent_turn(&mut checks, "direct turn after session/load", &turn, &fresh);
    support::save_fixture("copilot-direct.jsonl", &history.transcript);
    support::save_fixture("copilot-direct-load.jsonl", &load);
    support::save_fixture("copilot-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Two turns, then the session reloaded in a fresh process (one launch for both).
#[test]
fn copilot_relay_turns_and_load() {
    // No session/resume: the relay must pass Copilot's refusal through.
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn copilot_relay_turns_tapped() {
    // BYOK: its provider URL (`COPILOT_PROVIDER_BASE_URL`) is pointed at the tap.
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}
