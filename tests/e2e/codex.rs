//! codex-acp 0.16.0 (zed-industries, codex-rs 0.137 underneath) against the OpenAI Responses mock.
//!
//! What it sends by itself (`codex_direct` pins this down): one `usage_update` per model call,
//! `used` = that call's `total_tokens` (input incl. cached + output incl. reasoning), `size` =
//! 95% of the model's window (258,400 for gpt-5.2-codex); never a `cost`, never a per-turn
//! `usage`, nothing on `session/new`/`load`/`resume`. The `session/load` replay carries no
//! usage either.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::Lab;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Codex;
/// gpt-5.2-codex: 272,000 × 95%.
const WINDOW: u64 = 258_400;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: false,
};

/// One usage_update per call, `used` = the call's total, in call order.
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &acp_usage_tests::lab::Turn) {
    let calls = turn.main_calls();
    let updates = turn.usage_updates();
    let used: Vec<Option<u64>> =
        updates.iter().map(|update| support::u64_at(update, "used")).collect();
    let totals: Vec<Option<u64>> =
        calls.iter().map(|call| call.usage.map(|usage| usage.total())).collect();
    checks.check(used == totals, || {
        format!("{phase}: codex used {used:?} != the calls' totals {totals:?}")
    });
    for update in &updates {
        checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
            format!("{phase}: codex size {update}")
        });
        checks.check(update.get("cost").is_none(), || {
            format!("{phase}: codex now sends a cost: {update}")
        });
    }
    checks.check(turn.result.get("usage").is_none(), || {
        format!("{phase}: codex now sends usage: {}", turn.result)
    });
}

#[test]
fn codex_direct() {
    let history = flows::direct_history(AGENT).expect("direct codex session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "codex-acp", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "0.16.0", || format!("agentInfo: {init}"));
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "codex sent a usage_update after session/new".to_owned(),
    );
    for (n, turn) in turns.iter().enumerate() {
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn);
    }
    let mut fixtures = Vec::new();
    for method in ["session/load", "session/resume"] {
        let (turn, transcript) = flows::reopen_direct(&mut checks, lab, session_id, method);
        check_agent_turn(&mut checks, &format!("direct turn after {method}"), &turn);
        fixtures.push(transcript);
    }
    support::save_fixture("codex-direct.jsonl", &history.transcript);
    support::save_fixture("codex-direct-load.jsonl", &fixtures[0]);
    support::save_fixture("codex-direct-resume.jsonl", &fixtures[1]);
    support::save_fixture("codex-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Two turns, then the session reloaded and resumed in fresh processes (one launch for both).
#[test]
fn codex_relay_turns_load_and_resume() {
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn codex_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// Without the transcript (`--transcripts off`, or one that cannot be read), the session goes on
/// with what the agent reports over ACP: what it reports is exact, the rest estimated.
#[test]
fn codex_relay_turns_without_transcripts() {
    let expect = Expect { known: Known::Total, turn_exact: false, ..EXPECT };
    flows::relay_turns_with(expect, &["--transcripts", "off"]);
}

#[test]
fn codex_relay_turns_tapped() {
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}

#[test]
fn codex_relay_turns_tapped_builtin_provider() {
    // Codex's built-in `openai` provider with an API key (what most users run, with their own
    // key or a ChatGPT login): its base URL is `openai_base_url`, and it tries a WebSocket
    // first, which the tap declines with 426 so that Codex goes on over HTTP.
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let config = format!(
        "model = \"{}\"\nopenai_base_url = \"{}/v1\"\n",
        acp_usage_tests::agents::CODEX_MODEL,
        lab.mock.url()
    );
    std::fs::write(lab.scratch.home().join(".codex").join("config.toml"), config)
        .expect("write config.toml");
    // An API-key login, as `codex login --with-api-key` stores it.
    std::fs::write(
        lab.scratch.home().join(".codex").join("auth.json"),
        r#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-mock-key"}"#,
    )
    .expect("write auth.json");
    flows::relay_turns_in(EXPECT.tapped(), &lab, &[]);
}
