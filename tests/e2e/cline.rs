//! cline 3.0.65 (`cline --acp`, npm `cline`) against the Anthropic Messages mock.
//!
//! What it sends by itself (`cline_direct` pins this down): `agentInfo.name` `cline`,
//! `loadSession`, no `sessionCapabilities` (no resume). No usage at all: no `usage_update`, no
//! `usage` or `_meta` in the `session/prompt` result, no context window anywhere (its
//! `session/new` result names the model, `claude-sonnet-4-5`). Per call, the provider's counts
//! and a catalog cost are in `<data>/sessions/<id>/<id>.messages.json` (`messages[].metrics`,
//! `inputTokens` including the cache). No side calls.
//!
//! Behind the relay, acp-usage reads those records: every figure exact
//! (`cline_relay_turns_and_load`, `cline_relay_reopen_unseen`), `size` claude-sonnet-4-5's catalog
//! window (200,000), known from the model `session/new` names. Without the transcript
//! (`--transcripts off`) cline is an agent that reports nothing: no `Known` of [`support`] fits
//! (each demands some exact figure), so `cline_relay_turns_without_transcripts` checks the
//! estimates themselves: marked as estimates, within a factor of what the mock served, after a
//! first session with the transcript taught acp-usage cline's hidden context (without it the
//! estimates miss cline's ~3,000-token system prompt and tools). The
//! mock's counts in `scripts/cline.json` are close to the real size of cline's prompts (~13 KB
//! of JSON, ~3,300 tokens), so that an estimate from the prompt can be held to them.
//!
//! The tests run cline with `CLINE_SESSION_BACKEND_MODE=local`: by default it starts a detached
//! hub daemon (127.0.0.1:25463, shared by every cline on the machine) that outlives the agent.
//! [`HubGuard`] kills one if it appears anyway.

use std::path::PathBuf;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use acp_usage_tests::lab::{Lab, Turn, run_turn};
use acp_usage_tests::mock_llm::Call;
use serde_json::Value;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Cline;
/// claude-sonnet-4-5's window in the catalog (cline's own catalog says the same; ACP never does).
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

/// cline's data directory in a lab's scratch HOME (`CLINE_DATA_DIR`).
fn data_dir(home: PathBuf) -> PathBuf {
    home.join(".cline").join("data")
}

/// Kills the hub daemon of a lab's cline on drop, if one was started (its pid is in
/// `<data>/locks/hub/production.json`): it is detached from the agent's process group and would
/// outlive the test.
struct HubGuard {
    discovery: PathBuf,
}

impl HubGuard {
    fn new(home: PathBuf) -> HubGuard {
        HubGuard { discovery: data_dir(home).join("locks/hub/production.json") }
    }

    fn pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(&self.discovery).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        json["pid"].as_i64().and_then(|pid| i32::try_from(pid).ok()).filter(|pid| *pid > 1)
    }
}

impl Drop for HubGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            eprintln!("cline left a hub daemon (pid {pid}): killing it");
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// cline's per-call `metrics` in the session's `messages.json`, in call order.
fn call_metrics(home: PathBuf, session_id: &str) -> Vec<Value> {
    let path = data_dir(home)
        .join("sessions")
        .join(session_id)
        .join(format!("{session_id}.messages.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let json: Value = serde_json::from_str(&text).unwrap_or_default();
    let messages = json["messages"].as_array().or_else(|| json.as_array()).cloned();
    messages
        .unwrap_or_default()
        .into_iter()
        .filter(|message| message["role"] == "assistant")
        .filter_map(|message| message.get("metrics").cloned())
        .collect()
}

/// No usage of any kind in a turn.
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn) {
    checks.check(turn.usage_updates().is_empty(), || {
        format!("{phase}: cline now sends usage_update: {:?}", turn.usage_updates())
    });
    for key in ["usage", "_meta"] {
        checks.check(turn.result.get(key).is_none(), || {
            format!("{phase}: cline's result now has {key}: {}", turn.result)
        });
    }
}

/// Each call's `metrics`: the provider's counts (input including the cache) and the catalog cost.
fn check_metrics(checks: &mut Checks, metrics: &[Value], calls: &[Call]) {
    checks.check(metrics.len() == calls.len(), || {
        format!("messages.json: {} metrics for {} call(s): {metrics:?}", metrics.len(), calls.len())
    });
    for (record, call) in metrics.iter().zip(calls) {
        let Some(usage) = call.usage else { continue };
        let want = [
            ("inputTokens", usage.input),
            ("outputTokens", usage.output),
            ("cacheReadTokens", usage.cache_read),
            ("cacheWriteTokens", usage.cache_write()),
        ];
        for (key, want) in want {
            checks.check(support::u64_at(record, key) == Some(want), || {
                format!("messages.json metrics.{key} should be {want}: {record}")
            });
        }
        let cost = record["cost"].as_f64().unwrap_or(-1.0);
        let want = support::catalog_cost([call]);
        checks.check(support::close(cost, want), || {
            format!("messages.json metrics.cost {cost} != catalog {want}")
        });
    }
}

#[test]
fn cline_direct() {
    let history = flows::direct_history(AGENT).expect("direct cline session");
    let _hub = HubGuard::new(history.lab.scratch.home());
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "cline", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "3.0.65", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(caps["loadSession"] == true && caps.get("sessionCapabilities").is_none(), || {
        format!("cline should advertise loadSession and no sessionCapabilities: {init}")
    });
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "cline sent a usage_update after session/new".to_owned(),
    );
    for (n, turn) in turns.iter().enumerate() {
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn);
    }
    checks.check(lab.mock.calls().iter().all(|call| !call.declared_tools.is_empty()), || {
        "cline made a call without tools (a side call)".to_owned()
    });
    let (turn, load) = flows::reopen_direct(&mut checks, lab, session_id, "session/load");
    check_agent_turn(&mut checks, "direct turn after session/load", &turn);
    let metrics = call_metrics(lab.scratch.home(), session_id);
    check_metrics(&mut checks, &metrics, &lab.mock.calls());
    checks.check(HubGuard::new(lab.scratch.home()).pid().is_none(), || {
        "cline started a hub daemon despite CLINE_SESSION_BACKEND_MODE=local".to_owned()
    });
    support::save_fixture("cline-direct.jsonl", &history.transcript);
    support::save_fixture("cline-direct-load.jsonl", &load);
    support::save_fixture("cline-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Two turns, then the session reloaded in a fresh process (one launch for both).
#[test]
fn cline_relay_turns_and_load() {
    // No session/resume: the relay must pass cline's refusal through.
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn cline_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// Without the transcript, the relay has only its own estimates: the turn's usage, `used` and
/// the cost are marked as such and stay within a factor of what the mock served; the window is
/// still the catalog's.
#[test]
fn cline_relay_turns_without_transcripts() {
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let _hub = HubGuard::new(lab.scratch.home());
    let mut checks = Checks::new(AGENT);
    // A session through the relay with the transcript teaches acp-usage what cline sends that
    // ACP never shows (its system prompt and tools, ~3,000 tokens): the hidden baseline that
    // later estimates of the same agent and model start from. It runs in a lab of its own,
    // whose ledger this lab then starts from.
    let ledger = learn_baseline().expect("a session that teaches the baseline");
    let mut lab = lab;
    let copy = lab.scratch.path("ledger.db");
    std::fs::write(&copy, ledger).expect("the ledger's copy");
    lab.spec.set_env("ACP_USAGE_LEDGER", copy.display().to_string());
    let client = lab.relayed_with(&["--transcripts", "off"]).expect("start the relay");
    client.initialize().expect("initialize through the relay");
    let new_result =
        client.new_session(&lab.scratch.work()).expect("session/new through the relay");
    let session = flows::session_id(&new_result).expect("session id");
    let id = support::last_request_id(&client, "session/new");
    match support::update_after_response(&client, &id, &session) {
        // The model is named in the response: the window is known at once.
        Ok(update) => checks.usage_update("after new", &update, None, Some(WINDOW), None),
        Err(err) => checks.fail(format!("no usage_update after the session/new response: {err:#}")),
    }
    let mut calls: Vec<Call> = Vec::new();
    for (phase, prompt, n_calls) in
        [("turn 1 (plain)", flows::PLAIN_PROMPT, 1), ("turn 2 (tool)", flows::TOOL_PROMPT, 2)]
    {
        let turn = match run_turn(&client, &lab.mock, &session, prompt) {
            Ok(turn) => turn,
            Err(err) => {
                checks.fail(format!("{phase}: session/prompt through the relay failed: {err:#}"));
                break;
            }
        };
        assert_eq!(turn.main_calls().len(), n_calls, "{phase}: model calls {:#?}", turn.calls);
        calls.extend(turn.billed_calls().into_iter().cloned());
        check_estimated_turn(&mut checks, phase, &client, &turn, &calls);
    }
    drop(client);
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}

/// Runs a session of one plain turn through the relay, with cline's transcript, in a lab of its
/// own; returns the ledger file in which acp-usage keeps what the turn taught: cline's hidden
/// context, learned from the turn's exact first call.
fn learn_baseline() -> anyhow::Result<Vec<u8>> {
    // The first turn of the tests' script: cline's real prompt size.
    let mut script = support::script(AGENT);
    script.steps.truncate(1);
    let mut lab = Lab::new(AGENT, script)?;
    let path = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", path.display().to_string());
    let _hub = HubGuard::new(lab.scratch.home());
    {
        let client = lab.relayed()?;
        client.initialize()?;
        let session = flows::session_id(&client.new_session(&lab.scratch.work())?)?;
        run_turn(&client, &lab.mock, &session, flows::PLAIN_PROMPT)?;
    }
    // The relay finishes its ledger writes before it exits (the client waited for it), and the
    // last connection to close folds the write-ahead log into the file.
    let agents = acp_usage::sinks::ledger::Store::open_read(&path)?.agents()?;
    let learned = agents.iter().any(|(key, e)| key.starts_with("cline/") && e.baseline.is_some());
    anyhow::ensure!(learned, "the session taught no baseline (its turn was not exact): {agents:?}");
    Ok(std::fs::read(&path)?)
}

/// A relayed turn of an agent that reports nothing: the per-turn usage is there, marked as an
/// estimate, within a factor of what the mock served; the `usage_update` right before the
/// result has an estimated `used` within a factor of the last call, the catalog window and an
/// estimated cost (see [`check_estimated_cost`]); `session` is every call of the session so far.
fn check_estimated_turn(
    checks: &mut Checks,
    phase: &str,
    client: &AcpClient,
    turn: &Turn,
    session: &[Call],
) {
    let served = support::sum(&turn.billed_calls());
    let usage = &turn.result["usage"];
    match (
        support::u64_at(usage, "inputTokens"),
        support::u64_at(usage, "outputTokens"),
        support::u64_at(usage, "totalTokens"),
    ) {
        (Some(input), Some(output), Some(total)) => {
            let meta = &usage["_meta"]["acpUsage"];
            let exact = meta["exact"].as_bool();
            checks.row(phase, "turn.input", Some(input as f64), served.input as f64, exact);
            checks.row(phase, "turn.output", Some(output as f64), served.output as f64, exact);
            checks.row(phase, "turn.total", Some(total as f64), served.total() as f64, exact);
            checks.check(total == input + output, || {
                format!("{phase}: totalTokens {total} != input {input} + output {output}")
            });
            checks.check(exact == Some(false) && meta["source"].is_string(), || {
                format!("{phase}: cline reports nothing, the usage should be marked an estimate with its source: {usage}")
            });
            checks.check(within(input, served.input, 0.5, 2.0), || {
                format!("{phase}: estimated input {input} too far from {}", served.input)
            });
            checks.check(output > 0 && output <= served.output * 20 + 200, || {
                format!("{phase}: estimated output {output} not sane (mock {})", served.output)
            });
            for field in ["cachedReadTokens", "cachedWriteTokens"] {
                let got = support::u64_at(usage, field);
                checks.check(got.is_none_or(|got| got <= input), || {
                    format!("{phase}: {field} {got:?} exceeds inputTokens {input}")
                });
            }
        }
        _ => checks.fail(format!("{phase}: no per-turn usage in the result: {}", turn.result)),
    }
    for update in turn.usage_updates() {
        checks.check(update["_meta"]["acpUsage"].is_object(), || {
            format!("{phase}: a usage_update without acp-usage's _meta: {update}")
        });
    }
    let Some(update) = support::usage_update_before_result(client) else {
        checks
            .fail(format!("{phase}: the session/prompt result is not preceded by a usage_update"));
        return;
    };
    let last = turn.main_calls().last().and_then(|call| call.usage);
    checks.usage_update(phase, &update, last.as_ref(), Some(WINDOW), None);
    checks.check(update["_meta"]["acpUsage"]["used"]["exact"] == false, || {
        format!("{phase}: used should be marked an estimate: {update}")
    });
    check_estimated_cost(checks, phase, &update, session);
    let session_refs: Vec<&Call> = session.iter().collect();
    // Only reported: nothing in it can be exact.
    checks.cumulative(phase, &update, support::sum(&session_refs), false, Known::Everything);
}

/// The cost of an estimate: present, in USD, marked inexact, no less than a quarter of the
/// catalog cost and no more than twice the most the prompts could cost (every input token
/// written to the cache at the 5-minute price, a write costing more than fresh input).
fn check_estimated_cost(checks: &mut Checks, phase: &str, update: &Value, session: &[Call]) {
    let got = update["cost"]["amount"].as_f64();
    let exact = update["_meta"]["acpUsage"]["cost"]["exact"].as_bool();
    let want = support::catalog_cost(session.iter());
    checks.row(phase, "cost (USD)", got, want, exact);
    let Some(got) = got else {
        checks.fail(format!("{phase}: usage_update has no cost (catalog {want:.6}): {update}"));
        return;
    };
    checks.check(update["cost"]["currency"] == "USD", || {
        format!("{phase}: cost currency is not USD: {update}")
    });
    checks.check(exact == Some(false), || {
        format!("{phase}: cline reports no cost, it should be marked inexact: {update}")
    });
    // What the same tokens could cost at the extremes: every prompt token a cache write (the
    // dearest), or a cache read (the cheapest; an estimate assumes the prompt prefix is cached,
    // while the mock's first call writes it). The estimate's token counts may be off by up to
    // half either way.
    let priced = |input_price: fn(&support::Price) -> f64| -> f64 {
        session
            .iter()
            .filter_map(|call| {
                let usage = call.usage?;
                let price = support::price(call.model.as_deref()?, usage.input);
                Some(usage.input as f64 * input_price(&price) + usage.output as f64 * price.output)
            })
            .sum()
    };
    let most = priced(|p| p.cache_write_5m);
    let least = priced(|p| p.cache_read);
    checks.check(got >= least / 2.0 && got <= most * 2.0, || {
        format!("{phase}: estimated cost {got} outside [{:.6}, {:.6}]", least / 2.0, most * 2.0)
    });
}

fn within(got: u64, want: u64, low: f64, high: f64) -> bool {
    let (got, want) = (got as f64, want as f64);
    got >= want * low && got <= want * high
}
