//! qwen-code 0.24.4 (`qwen --acp`, Node 22) against the OpenAI Chat Completions mock.
//!
//! What it sends by itself (`qwen_direct` pins this down; acp-usage's qwen profile relies on it):
//! nothing after `session/new`/`load`/`resume` but the model list, whose current model has
//! `_meta.contextLimit` (272,000 for gpt-5.2) and an id like `$runtime|openai|gpt-5.2(openai)`;
//! per main model call an empty `agent_message_chunk` with `_meta.usage` (input with the cache,
//! output with thoughts, exactly what the API returned), then a `usage_update` whose `used` is
//! the call's prompt without its output and whose `size` is the `contextLimit`; no cost; no
//! per-turn `usage` in the result. Its side calls (memory extraction after a turn, a prompt
//! suggestion) are in no record acp-usage reads: the checks leave them out.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::mock_llm::CallKind;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Qwen;
/// gpt-5.2's window (qwen's `contextLimit`, the catalog's).
const WINDOW: u64 = 272_000;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: true,
    auxiliary_in_part: false,
    tap: false,
};

#[test]
fn qwen_direct() {
    let history = flows::direct_history(AGENT).expect("direct qwen session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "qwen-code", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "0.24.4", || format!("agentInfo: {init}"));
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "qwen sent a usage_update after session/new".to_owned(),
    );
    for (n, turn) in turns.iter().enumerate() {
        let phase = format!("direct turn {}", n + 1);
        let calls = turn.main_calls();
        // One usage chunk per main call, the call's exact counts.
        let reported: Vec<(u64, u64, u64, u64)> = turn
            .updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["_meta"].get("usage"))
            .map(|u| {
                let n = |k: &str| u[k].as_u64().unwrap_or(u64::MAX);
                (n("inputTokens"), n("cachedReadTokens"), n("outputTokens"), n("thoughtTokens"))
            })
            .collect();
        let served: Vec<(u64, u64, u64, u64)> = calls
            .iter()
            .filter_map(|c| c.usage)
            .map(|u| (u.input, u.cache_read, u.output, u.thought))
            .collect();
        checks.check(reported == served, || {
            format!("{phase}: qwen's per-call usage {reported:?} != served {served:?}")
        });
        // A usage_update per call: the prompt without the output, the model's window, no cost.
        let updates = turn.usage_updates();
        let used: Vec<Option<u64>> = updates.iter().map(|u| support::u64_at(u, "used")).collect();
        let inputs: Vec<Option<u64>> = served.iter().map(|s| Some(s.0)).collect();
        checks
            .check(used == inputs, || format!("{phase}: qwen used {used:?} != inputs {inputs:?}"));
        for update in &updates {
            checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
                format!("{phase}: qwen size {update}")
            });
            checks.check(update.get("cost").is_none(), || format!("{phase}: qwen cost {update}"));
        }
        checks.check(turn.result.get("usage").is_none(), || {
            format!("{phase}: qwen now sends usage: {}", turn.result)
        });
    }
    let side = lab.mock.calls().iter().filter(|c| c.kind == CallKind::Auxiliary).count();
    eprintln!("qwen made {side} side call(s) no ACP report shows");
    support::save_fixture("qwen-direct.jsonl", &history.transcript);
    checks.finish();
}

/// Two turns, then the session reopened in fresh processes (one launch for both).
#[test]
fn qwen_relay_turns_load_and_resume() {
    // Reloaded, the replay carries every call's usage: the history is exact. Resumed in a fresh
    // process, nothing is replayed: the state file carries the session's figures.
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn qwen_relay_turns_tapped() {
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}
