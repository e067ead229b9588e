//! claude-agent-acp 0.101.0 (Claude Code 2.1.318 underneath, Node 22) against the Anthropic mock.
//!
//! What it sends by itself (`claude_direct` pins this down; acp-usage's Claude profile relies on
//! it): no `usage_update` after `session/new`/`load`/`resume`; the model option `default` with
//! the description "Opus" beside `opus` named "Opus 5.5" (`claude-opus-5-5`, a 1,000,000
//! window); during a turn two or three `usage_update`s per model call (`message_start` snapshot
//! with output 1, `message_delta`, then the turn's `result` with the cumulative `cost`), each
//! with `_meta["_claude/model"]`; `used` = the last call's input + cache read + cache write +
//! output; `size` 1,000,000, also after a reload; per-turn `usage` in the result with
//! `inputTokens` WITHOUT the cache (Anthropic's `input_tokens`), summed over the turn's main
//! calls, and `_meta.quota.model_usage`, the turn's per-model counts with its side calls (the
//! session title on the second turn, a prompt suggestion after a turn) which no transcript
//! records; `cost` = catalog price of every call the process saw, side calls included.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::mock_llm::{Call, Usage};
use serde_json::Value;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Claude;
/// The default model resolves to claude-opus-5-5, whose window is 1,000,000.
const WINDOW: u64 = 1_000_000;
/// What Claude Code reports as `contextWindow` in a process that reloaded the session.
const WINDOW_AFTER_RELOAD: u64 = 1_000_000;

pub(crate) const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: false,
    auxiliary_in_part: true,
    tap: false,
};

/// Claude's own per-turn usage: Anthropic's disjoint counters.
fn check_agent_usage(checks: &mut Checks, phase: &str, usage: &Value, calls: &[&Call]) {
    let served = support::sum(calls);
    let uncached = served.input - served.cache_read - served.cache_write();
    let want = serde_json::json!({
        "inputTokens": uncached,
        "outputTokens": served.output,
        "cachedReadTokens": served.cache_read,
        "cachedWriteTokens": served.cache_write(),
        "totalTokens": served.total(),
    });
    checks.check(*usage == want, || format!("{phase}: claude's usage {usage} != {want}"));
}

/// Claude's last usage_update of a turn: `used` of the last call, the window, the cost.
fn check_agent_update(
    checks: &mut Checks,
    phase: &str,
    update: &Value,
    last: &Usage,
    size: u64,
    cost: f64,
) {
    checks.check(support::u64_at(update, "used") == Some(last.total()), || {
        format!("{phase}: claude's used {:?} != last call's total {}", update["used"], last.total())
    });
    checks.check(support::u64_at(update, "size") == Some(size), || {
        format!("{phase}: claude's size {:?} != {size}", update["size"])
    });
    let got = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
    checks.check(support::close(got, cost), || {
        format!("{phase}: claude's cost {got} != catalog {cost}")
    });
}

#[test]
fn claude_direct() {
    let history = flows::direct_history(AGENT).expect("direct claude session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "@agentclientprotocol/claude-agent-acp", || {
        format!("agentInfo: {init}")
    });
    checks.check(init["agentInfo"]["version"] == "0.101.0", || format!("agentInfo: {init}"));
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "claude sent a usage_update after session/new".to_owned(),
    );
    let mut billed: Vec<Call> = Vec::new();
    let mut main: Vec<Call> = Vec::new();
    for (n, turn) in turns.iter().enumerate() {
        let phase = format!("direct turn {}", n + 1);
        let calls = turn.main_calls();
        check_agent_usage(&mut checks, &phase, &turn.result["usage"], &calls);
        let updates = turn.usage_updates();
        // Two or three per call: message_start (output 1), message_delta, plus the result's.
        checks.check(updates.len() > calls.len() * 2, || {
            format!("{phase}: only {} usage_updates", updates.len())
        });
        let last = calls.last().and_then(|call| call.usage).unwrap_or_default();
        // Its stated cost covers every main call the process made so far and some of its side
        // calls (the title; not the prompt suggestions).
        billed.extend(turn.billed_calls().into_iter().cloned());
        main.extend(calls.iter().map(|call| (*call).clone()));
        if let Some(update) = updates.last() {
            let own = support::catalog_cost(&main);
            let all = support::catalog_cost(&billed);
            let got = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
            checks.check(got >= own - 1e-9 && got <= all + 1e-9, || {
                format!("{phase}: claude's cost {got} outside [{own}, {all}]")
            });
            check_agent_update(&mut checks, &phase, update, &last, WINDOW, got);
        }
    }

    // Reload and resume in fresh processes: nothing on reopening; afterwards the window stays
    // 1,000,000 and the cost goes on from the session's earlier cost (the fresh process counts
    // its own calls on top).
    let mut fixtures = Vec::new();
    for method in ["session/load", "session/resume"] {
        let (turn, transcript) = flows::reopen_direct(&mut checks, lab, session_id, method);
        let phase = format!("direct turn after {method}");
        let calls = turn.main_calls();
        check_agent_usage(&mut checks, &phase, &turn.result["usage"], &calls);
        let last = calls.last().and_then(|call| call.usage).unwrap_or_default();
        if let Some(update) = turn.usage_updates().last() {
            // Between the turn's own calls and everything billed so far.
            let own = support::catalog_cost(calls.iter().copied());
            let all = support::catalog_cost(history.billed().iter());
            let got = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
            checks.check(got >= own - 1e-9 && got <= all + 1e-9, || {
                format!("{phase}: claude's cost {got} outside [{own}, {all}]")
            });
            let stated_cost = got;
            check_agent_update(
                &mut checks,
                &phase,
                update,
                &last,
                WINDOW_AFTER_RELOAD,
                stated_cost,
            );
        }
        fixtures.push((method, transcript));
    }

    support::save_fixture("claude-direct.jsonl", &history.transcript);
    support::save_fixture("claude-direct-load.jsonl", &fixtures[0].1);
    support::save_fixture("claude-direct-resume.jsonl", &fixtures[1].1);
    support::save_fixture("claude-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Two turns, then the session reloaded and resumed in fresh processes (one launch for both).
#[test]
fn claude_relay_turns_load_and_resume() {
    // Right after reopening nobody knows yet that Claude Code will run the reloaded session
    // without the 1M-context beta; after the first turn the relay must follow the agent's 200,000.
    flows::relay_turns_load_resume(EXPECT, None, Some(WINDOW_AFTER_RELOAD));
}

#[test]
fn claude_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, None, Some(WINDOW_AFTER_RELOAD));
}

/// Claude Code's `Agent` tool runs a subagent whose calls go to
/// `<session>/subagents/agent-*.jsonl`: they count in the turn and the cost; the ACP-reported
/// usage leaves them out.
#[test]
fn claude_relay_subagent() {
    use acp_usage_tests::mock_llm::{Script, Step, ToolCall, Usage};
    let delegate = ToolCall::named(
        "Agent",
        serde_json::json!({"description": "look", "prompt": "Say hi", "subagent_type": "general-purpose"}),
    );
    let script = Script::new(vec![
        Step::text("Let me ask a subagent.", Usage::anthropic(24, 3000, 9000, 61))
            .with_tool(delegate),
        Step::text("Hi from the subagent.", Usage::anthropic_split(16, 0, 2000, 0, 9)),
        Step::text("The subagent said hi.", Usage::anthropic(30, 150, 12100, 12)),
    ]);
    flows::relay_subagent_turn(
        EXPECT,
        flows::SubagentTurn {
            script,
            prepare: flows::nothing,
            after_new: flows::no_requests,
            main_calls: 2,
        },
    );
}

#[test]
fn claude_relay_fork() {
    flows::relay_fork(EXPECT);
}

#[test]
fn claude_relay_clear() {
    flows::relay_clear(EXPECT);
}

#[test]
fn claude_relay_turns_load_and_resume_tapped() {
    // The first run's side calls (title, classifier) are in no transcript: reopened, the
    // session keeps the cost that run counted.
    flows::relay_turns_load_resume(EXPECT.tapped(), None, Some(WINDOW_AFTER_RELOAD));
}
