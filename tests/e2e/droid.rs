//! Factory Droid 0.215.0 (npm `droid`, `droid exec --output-format acp-daemon`) against the
//! Anthropic Messages mock: a custom model (`~/.factory/settings.json` `customModels`, provider
//! `anthropic`, `baseUrl` the mock's) in air-gap mode (`FACTORY_AIRGAP_ENABLED=true`: sessions
//! without a Factory login, custom models only).
//!
//! What it sends by itself (`droid_direct` pins this down): `agentInfo.name` `@factory/cli`,
//! `loadSession` and `resume`; no `usage_update` ever, nothing but `stopReason` in a prompt
//! result. Its model option's value is `custom:Mock-Sonnet-0`. It titles a new session with a
//! side call of its own (no tools) on the same model at the first prompt. Its session files keep
//! only session-cumulative counters.
//!
//! Behind the relay the tap counts every call (Droid is pointed through a runtime settings file,
//! `FACTORY_RUNTIME_SETTINGS_PATH`, holding its custom model with the tap's URL): per-turn
//! usage, `used` and cost exact, the title call included; `size` claude-sonnet-4-5's catalog
//! window, known from the model option.

use acp_usage_tests::agents::{Agent, DROID_MODEL};
use acp_usage_tests::mock_llm::CallKind;
use serde_json::{Value, json};

use crate::flows::{self, Expect, History};
use crate::support::{Checks, Known};

const AGENT: Agent = Agent::Droid;
/// claude-sonnet-4-5's window in the catalog.
const WINDOW: u64 = 200_000;

/// Tapped (as by default): every billed call counted, the title call included. Without the
/// tap nothing of Droid's is exact (it reports nothing, its files keep only totals).
const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: true,
};

#[test]
fn droid_direct() {
    let history = flows::direct_history(AGENT).expect("direct droid session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "@factory/cli", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "0.215.0", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"]["resume"].is_object(),
        || format!("droid's capabilities: {caps}"),
    );
    checks.check(!updates_after_new.iter().any(|u| u["sessionUpdate"] == "usage_update"), || {
        "droid sent a usage_update after session/new".to_owned()
    });
    for (n, turn) in turns.iter().enumerate() {
        let phase = format!("direct turn {}", n + 1);
        checks.check(turn.usage_updates().is_empty(), || format!("{phase}: droid sent usage"));
        checks.check(turn.result == json!({"stopReason": "end_turn"}), || {
            format!("{phase}: droid's result now says more than its stop reason: {}", turn.result)
        });
    }
    let model_value = history
        .transcript
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|line| {
            let options = line["msg"]["result"]["configOptions"].as_array()?.clone();
            options
                .into_iter()
                .find(|o| o["category"] == "model")
                .map(|o| o["currentValue"].clone())
        });
    checks.check(model_value == Some(json!(DROID_MODEL)), || {
        format!("session/new's model option: {model_value:?}")
    });
    // One title call, without tools, at the first prompt.
    let aux: Vec<_> =
        lab.mock.calls().into_iter().filter(|call| call.kind == CallKind::Auxiliary).collect();
    checks.check(aux.len() == 1 && aux[0].model.as_deref() == Some("claude-sonnet-4-5"), || {
        format!("droid's side calls: {aux:#?}")
    });
    crate::support::save_fixture("droid-direct.jsonl", &history.transcript);
    let calls = crate::support::calls_jsonl(&lab.mock.calls());
    crate::support::save_fixture("droid-direct.mock.jsonl", &calls);
    checks.finish();
}

/// Every billed call through the tap, the title call included: every figure exact; then
/// `session/load` and `session/resume` in fresh processes, tapped (one launch for both).
#[test]
fn droid_relay_turns_load_and_resume_tapped() {
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}
