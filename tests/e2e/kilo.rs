//! kilo 7.7.7 (`kilo acp`, npm `@kilocode/cli`, an opencode fork) against the Anthropic mock.
//!
//! What it sends by itself (`kilo_direct` pins this down): opencode 1.18's ACP behaviour, its
//! code being opencode's: nothing after `session/new`/`load`/`resume`/`fork`; one `usage_update`
//! per turn, just before the result, with `used` = the last call's input + cache read + cache
//! write WITHOUT its output, `size` = 1,000,000 for claude-sonnet-4-5 (models.dev's; no 1M beta
//! header is sent, so the API runs it at 200,000) and `cost` = the catalog price of every stored
//! main-agent message (the title call, with claude-haiku-4-5, left out); per-turn `usage` = the
//! last call's counts, Anthropic style, `_meta: {}`. kilo titles a session only after a turn
//! with a tool or a second prompt. Its store is `$XDG_DATA_HOME/kilo/kilo.db`, opencode's schema.
//! kilo 7.8.1, the newest release, cannot be installed: its platform packages are not on the
//! registry.

use acp_usage_tests::agents::{Agent, OPENCODE_MODEL};
use acp_usage_tests::lab::{Lab, Turn, run_turn};
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use serde_json::{Value, json};

use crate::flows::{self, Expect, History, PLAIN_PROMPT, TOOL_PROMPT};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Kilo;
/// What kilo itself reports for claude-sonnet-4-5 (models.dev's `limit.context`).
const AGENT_WINDOW: u64 = 1_000_000;
/// claude-sonnet-4-5's window in the catalog, which the API enforces without the 1M beta.
const WINDOW: u64 = 200_000;

/// With kilo's database followed, every figure is exact per call.
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

/// kilo's per-turn usage: the last call's Anthropic counters, zero cache counts left out.
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
        format!("{phase}: kilo's usage {} != the last call's {want}", result["usage"])
    });
    checks.check(result["_meta"] == json!({}), || format!("{phase}: _meta {}", result["_meta"]));
}

/// kilo's one usage_update of a turn: `used` without output, its window, the cost of the
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
        format!("{phase}: kilo's used {:?} != last call's input {}", update["used"], last.input)
    });
    checks.check(support::u64_at(update, "size") == Some(AGENT_WINDOW), || {
        format!("{phase}: kilo's size {:?} != {AGENT_WINDOW}", update["size"])
    });
    let cost = support::catalog_cost(main_so_far).unwrap_or(-1.0);
    let got = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
    checks.check(support::close(got, cost), || {
        format!("{phase}: kilo's cost {got} != catalog price of the main calls {cost}")
    });
}

#[test]
fn kilo_direct() {
    let _lock = support::agent_lock(AGENT);
    let history = flows::direct_history(AGENT).expect("direct kilo session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "Kilo", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "7.7.7", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"]["resume"].is_object(),
        || format!("kilo's capabilities: {caps}"),
    );
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "kilo sent a usage_update after session/new".to_owned(),
    );
    let mut main_calls: Vec<Call> = Vec::new();
    for (n, turn) in turns.iter().enumerate() {
        main_calls.extend(turn.main_calls().into_iter().cloned());
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn, &main_calls);
    }
    // One title call with the small model, which no figure of kilo's includes.
    let aux: Vec<Call> =
        lab.mock.calls().into_iter().filter(|call| call.kind == CallKind::Auxiliary).collect();
    checks.check(
        aux.len() == 1 && aux[0].model.as_deref() == Some("claude-haiku-4-5-20251001"),
        || format!("kilo's auxiliary calls: {aux:#?}"),
    );

    // Reopened in fresh processes: nothing on reopening; the cost afterwards still covers the
    // whole session (kilo sums the stored messages), not just this process's calls.
    let mut fixtures = Vec::new();
    for method in ["session/load", "session/resume"] {
        let (turn, transcript) = flows::reopen_direct(&mut checks, lab, session_id, method);
        main_calls.extend(turn.main_calls().into_iter().cloned());
        check_agent_turn(&mut checks, &format!("direct turn after {method}"), &turn, &main_calls);
        fixtures.push(transcript);
    }

    support::save_fixture("kilo-direct.jsonl", &history.transcript);
    support::save_fixture("kilo-direct-load.jsonl", &fixtures[0]);
    support::save_fixture("kilo-direct-resume.jsonl", &fixtures[1]);
    support::save_fixture("kilo-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Through the relay, what holds whether or not kilo's database is read: an update after
/// `session/new` with the catalog's window, a per-turn `usage` on every result, the catalog's
/// window (not kilo's 1,000,000) on every update, and an exact `used` after a one-call turn.
#[test]
fn kilo_relay_basics() {
    let _lock = support::agent_lock(AGENT);
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let client = lab.relayed().expect("start the relay");
    let mut checks = Checks::new(AGENT);
    client.initialize().expect("initialize through the relay");
    let new_result = client.new_session(&lab.scratch.work()).expect("session/new");
    let model = new_result["configOptions"]
        .as_array()
        .and_then(|options| options.iter().find(|option| option["category"] == "model"))
        .map(|option| option["currentValue"].clone());
    checks.check(model == Some(json!(OPENCODE_MODEL)), || {
        format!("session/new's model option: {model:?}")
    });
    let session_id = flows::session_id(&new_result).expect("session id");
    let new_id = support::last_request_id(&client, "session/new");
    match support::update_after_response(&client, &new_id, &session_id) {
        Ok(update) => checks.usage_update("after new", &update, None, Some(WINDOW), None),
        Err(err) => checks.fail(format!("no usage_update after the session/new response: {err:#}")),
    }
    for (phase, prompt) in [("turn 1 (plain)", PLAIN_PROMPT), ("turn 2 (tool)", TOOL_PROMPT)] {
        let turn = match run_turn(&client, &lab.mock, &session_id, prompt) {
            Ok(turn) => turn,
            Err(err) => {
                checks.fail(format!("{phase}: session/prompt through the relay failed: {err:#}"));
                break;
            }
        };
        let usage = &turn.result["usage"];
        checks
            .check(usage["totalTokens"].is_u64() && usage["_meta"]["acpUsage"].is_object(), || {
                format!("{phase}: no normalised usage on the result: {}", turn.result)
            });
        for update in turn.usage_updates() {
            checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
                format!("{phase}: size {:?}, expected the catalog's {WINDOW}", update["size"])
            });
        }
        let last = turn.main_calls().last().and_then(|call| call.usage);
        match support::usage_update_before_result(&client) {
            Some(update) => {
                let one_call = turn.main_calls().len() == 1;
                checks.usage_update(
                    phase,
                    &update,
                    last.as_ref().filter(|_| one_call),
                    Some(WINDOW),
                    None,
                );
                if one_call {
                    checks.check(update["_meta"]["acpUsage"]["used"]["exact"] == true, || {
                        format!("{phase}: used should be exact after a one-call turn: {update}")
                    });
                }
            }
            None => checks.fail(format!("{phase}: the result is not preceded by a usage_update")),
        }
    }
    drop(client);
    checks.finish();
}

/// Every figure exact, from kilo's database. The title call is in no record of kilo's
/// (only the API tap could count it): the checks leave it out.
#[test]
fn kilo_relay_turns() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_turns(EXPECT);
}

#[test]
fn kilo_relay_load_and_resume() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn kilo_relay_reopen_unseen() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// kilo's `task` tool runs the `general` subagent in a child session (`parent_id` = the
/// session); its calls are in the database under that child, and count in the turn and the cost.
#[test]
fn kilo_relay_subagent() {
    use acp_usage_tests::mock_llm::{Script, Step, ToolCall, Usage};
    let _lock = support::agent_lock(AGENT);
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
fn kilo_relay_turns_tapped() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_turns_with(EXPECT.tapped(), &["--tap"]);
}

#[test]
fn kilo_relay_load_and_resume_tapped() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_load_resume(EXPECT.tapped(), Some(WINDOW), Some(WINDOW));
}

/// kilo copies the parent's history into the fork's session (with the original times, cost 0):
/// the fork's turn counts its own call only.
#[test]
fn kilo_relay_fork() {
    let _lock = support::agent_lock(AGENT);
    flows::relay_fork(EXPECT);
}
