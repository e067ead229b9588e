//! opencode 1.18.33 (`opencode acp`, its Anthropic provider) against the Anthropic mock.
//!
//! What it sends by itself (`opencode_direct` pins this down; acp-usage's opencode profile relies
//! on it): nothing after `session/new`/`load`/`resume`; exactly one `usage_update` per turn, just
//! before the `session/prompt` result, with `used` = the turn's last model call's input + cache
//! read + cache write WITHOUT its output, `size` = 1,000,000 for claude-sonnet-4-5 (copied from
//! models.dev; the API runs it at 200,000) and `cost` = the catalog price of every main-agent
//! call the session has stored, reloaded history included (the title call, made with
//! claude-haiku-4-5, is left out); per-turn `usage` = the last call's counts only, Anthropic
//! style (`inputTokens` without the cache, zero cache counts left out), `_meta: {}`.

use acp_usage_tests::agents::{Agent, OPENCODE_MODEL};
use acp_usage_tests::lab::{Lab, Turn};
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use serde_json::{Value, json};

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Opencode;
/// What opencode itself reports for claude-sonnet-4-5 (models.dev's `limit.context`).
const AGENT_WINDOW: u64 = 1_000_000;
/// claude-sonnet-4-5's window in the catalog, which the API enforces without the 1M beta.
const WINDOW: u64 = 200_000;

/// With opencode's database followed, every figure is exact per call.
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

/// opencode's per-turn usage: the last call's Anthropic counters, zero cache counts left out.
fn check_agent_usage(checks: &mut Checks, phase: &str, result: &Value, last: &Usage) {
    let mut want = json!({
        "inputTokens": last.input - last.cache_read - last.cache_write(),
        "outputTokens": last.output,
        "totalTokens": last.total(),
    });
    if last.cache_read > 0 {
        want["cachedReadTokens"] = last.cache_read.into();
    }
    if last.cache_write() > 0 {
        want["cachedWriteTokens"] = last.cache_write().into();
    }
    checks.check(result["usage"] == want, || {
        format!("{phase}: opencode's usage {} != the last call's {want}", result["usage"])
    });
    checks.check(result["_meta"] == json!({}), || format!("{phase}: _meta {}", result["_meta"]));
}

/// opencode's one usage_update of a turn: `used` without output, its window, the cost of the
/// session's main-agent calls.
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn, main_so_far: &[Call]) {
    let calls = turn.main_calls();
    let last = calls.last().and_then(|call| call.usage).unwrap_or_default();
    check_agent_usage(checks, phase, &turn.result, &last);
    let updates = turn.usage_updates();
    checks.check(updates.len() == 1, || format!("{phase}: {} usage_updates", updates.len()));
    checks.check(
        turn.updates.last().is_some_and(|update| update["sessionUpdate"] == "usage_update"),
        || format!("{phase}: the last update before the result is not the usage_update"),
    );
    let Some(update) = updates.last() else { return };
    checks.check(support::u64_at(update, "used") == Some(last.input), || {
        format!("{phase}: opencode's used {:?} != last call's input {}", update["used"], last.input)
    });
    checks.check(support::u64_at(update, "size") == Some(AGENT_WINDOW), || {
        format!("{phase}: opencode's size {:?} != {AGENT_WINDOW}", update["size"])
    });
    let cost = support::catalog_cost(main_so_far);
    let got = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
    checks.check(support::close(got, cost), || {
        format!("{phase}: opencode's cost {got} != catalog price of the main calls {cost}")
    });
}

/// What opencode sends by itself; then the same session, which acp-usage never saw, reopened
/// through the relay (one history made for both).
#[test]
fn opencode_direct_then_reopen_unseen() {
    direct_then_reopen_unseen(EXPECT, "OpenCode", "1.18.33");
}

/// What opencode, or a fork of it that kept its ACP code (kilo), sends by itself, as its
/// `initialize` names it (`name`, `version`); then that session, made without acp-usage,
/// reloaded and resumed through the relay in fresh processes (`flows::relay_reopen_unseen`'s
/// checks): one agent launch and two turns fewer than the two tests apart.
pub(crate) fn direct_then_reopen_unseen(expect: Expect, name: &str, version: &str) {
    let agent = expect.agent;
    let history = flows::direct_history(agent).expect("direct session");
    let mut checks = Checks::new(agent);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == name, || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == version, || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"]["resume"].is_object(),
        || format!("opencode's capabilities: {caps}"),
    );
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "opencode sent a usage_update after session/new".to_owned(),
    );
    let mut main_calls: Vec<Call> = Vec::new();
    for (n, turn) in turns.iter().enumerate() {
        main_calls.extend(turn.main_calls().into_iter().cloned());
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn, &main_calls);
    }
    // One title call with the small model, which no figure of opencode's includes.
    let aux: Vec<Call> =
        lab.mock.calls().into_iter().filter(|call| call.kind == CallKind::Auxiliary).collect();
    checks.check(
        aux.len() == 1 && aux[0].model.as_deref() == Some("claude-haiku-4-5-20251001"),
        || format!("opencode's auxiliary calls: {aux:#?}"),
    );

    // Reopened in fresh processes: nothing on reopening; the cost afterwards still covers the
    // whole session (opencode sums the stored messages), not just this process's calls.
    let mut fixtures = Vec::new();
    for method in ["session/load", "session/resume"] {
        let (turn, transcript) = flows::reopen_direct(&mut checks, lab, session_id, method);
        main_calls.extend(turn.main_calls().into_iter().cloned());
        check_agent_turn(&mut checks, &format!("direct turn after {method}"), &turn, &main_calls);
        fixtures.push(transcript);
    }

    let fixture = |suffix: &str| format!("{}-direct{suffix}", agent.name());
    support::save_fixture(&fixture(".jsonl"), &history.transcript);
    support::save_fixture(&fixture("-load.jsonl"), &fixtures[0]);
    support::save_fixture(&fixture("-resume.jsonl"), &fixtures[1]);
    support::save_fixture(&fixture(".mock.jsonl"), &support::calls_jsonl(&lab.mock.calls()));

    checks.exact_everything = expect.known == Known::Everything;
    let size = Some(expect.size);
    flows::reopen_through_relay(expect, lab, session_id, checks, size, size);
}

/// The model option `session/new` returns: the configured one, as the relay passed it on.
pub(crate) fn model_option(checks: &mut Checks, new_result: &Value) {
    let model = new_result["configOptions"]
        .as_array()
        .and_then(|options| options.iter().find(|option| option["category"] == "model"))
        .map(|option| option["currentValue"].clone());
    checks.check(model == Some(json!(OPENCODE_MODEL)), || {
        format!("session/new's model option: {model:?}")
    });
}

/// Every figure exact, from opencode's database: two turns through the relay, then the session
/// reloaded and resumed in fresh processes, one launch of opencode for both. The title call is
/// in no record of opencode's (only the API tap could count it): the checks leave it out.
#[test]
fn opencode_relay_turns_load_and_resume() {
    flows::relay_turns_load_resume_with(EXPECT, Some(WINDOW), Some(WINDOW), model_option);
}

/// opencode's `task` tool runs the `general` subagent in a child session (`parent_id` = the
/// session); its calls are in the database under that child, and count in the turn and the cost.
#[test]
fn opencode_relay_subagent() {
    relay_subagent(EXPECT);
}

/// [`opencode_relay_subagent`] for opencode or a fork of it.
pub(crate) fn relay_subagent(expect: Expect) {
    use acp_usage_tests::mock_llm::{Script, Step, ToolCall, Usage};
    let task = ToolCall::named(
        "task",
        json!({"description": "look", "prompt": "Say hi", "subagent_type": "general"}),
    );
    let mut script = Script::new(vec![
        Step::text("Asking a helper.", Usage::anthropic(20, 1500, 11000, 42)).with_tool(task),
        Step::text("Hi from the helper.", Usage::anthropic(300, 2000, 0, 17)),
        Step::text("The helper said hi.", Usage::anthropic(12, 400, 12900, 9)),
    ]);
    script.auxiliary = Usage::anthropic(150, 0, 0, 12);
    flows::relay_subagent_turn(
        expect,
        flows::SubagentTurn {
            script,
            prepare: flows::nothing,
            after_new: flows::no_requests,
            main_calls: 2,
        },
    );
}

#[test]
fn opencode_relay_turns_load_and_resume_tapped() {
    flows::relay_turns_load_resume(EXPECT.tapped(), Some(WINDOW), Some(WINDOW));
}

/// opencode copies the parent's history into the fork's session, as kilo does: the fork's turn
/// counts its own call only.
#[test]
fn opencode_relay_fork() {
    flows::relay_fork(EXPECT);
}

/// The provider's `baseURL` in a config file of the project (`file`, JSONC) instead of the
/// config variable: acp-usage points it through the variable, which the agent merges last, so
/// every call goes through the tap (each turn's source is the tap) and the user's file is left
/// as it was.
pub(crate) fn relay_turns_config_file(expect: Expect, file: &str) {
    let mut lab = Lab::new(expect.agent, support::script(expect.agent)).expect("lab");
    // With its `$schema`, which kilo adds to a file that lacks it.
    let (var, schema) = match expect.agent {
        Agent::Kilo => ("KILO_CONFIG_CONTENT", "https://app.kilo.ai/config.json"),
        _ => ("OPENCODE_CONFIG_CONTENT", "https://opencode.ai/config.json"),
    };
    lab.spec.env.retain(|(name, _)| name != var);
    let config = json!({
        "$schema": schema,
        "model": OPENCODE_MODEL,
        "provider": {"anthropic": {"options": {"baseURL": format!("{}/v1", lab.mock.url()), "apiKey": "x"}}},
    });
    let text = format!("// the project's own\n{config:#}\n");
    let path = lab.scratch.work().join(file);
    std::fs::write(&path, &text).expect("config file");
    flows::relay_turns_in(expect, &lab, &[]);
    assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some(text.as_str()));
}

#[test]
fn opencode_relay_turns_tapped_config_file() {
    relay_turns_config_file(EXPECT.tapped(), "opencode.jsonc");
}
