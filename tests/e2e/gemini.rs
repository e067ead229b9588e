//! gemini-cli 0.61.0 `--acp -m gemini-2.5-pro` against the Gemini mock.
//!
//! What it sends by itself (`gemini_direct` pins this down): no `usage_update` at all, no
//! per-turn `usage`; only `_meta.quota.token_count` in the `session/prompt` result, with
//! `input_tokens` = the sum of `promptTokenCount` (cache included) and `output_tokens` = the sum
//! of `candidatesTokenCount` (thoughts left out) over the turn's calls. `session/load` works
//! (replaying the history), `session/resume` is "Method not found".

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::{Turn, run_turn};

use crate::flows::{self, Expect, History, PLAIN_PROMPT};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Gemini;
/// gemini-2.5-pro: Gemini CLI's `tokenLimit()` and the catalog agree.
const WINDOW: u64 = 1_048_576;

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

fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn) {
    let served = support::sum(&turn.main_calls());
    let quota = &turn.result["_meta"]["quota"]["token_count"];
    checks.check(support::u64_at(quota, "input_tokens") == Some(served.input), || {
        format!("{phase}: gemini quota input {quota} != sum of promptTokenCount {}", served.input)
    });
    let candidates = served.output - served.thought;
    checks.check(support::u64_at(quota, "output_tokens") == Some(candidates), || {
        format!("{phase}: gemini quota output {quota} != sum of candidatesTokenCount {candidates}")
    });
    checks.check(turn.usage_updates().is_empty(), || {
        format!("{phase}: gemini now sends usage_update")
    });
    checks.check(turn.result.get("usage").is_none(), || {
        format!("{phase}: gemini now sends usage: {}", turn.result)
    });
}

#[test]
fn gemini_direct() {
    let history = flows::direct_history(AGENT).expect("direct gemini session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "gemini-cli", || format!("agentInfo: {init}"));
    checks.check(init["agentInfo"]["version"] == "0.61.0", || format!("agentInfo: {init}"));
    for (n, turn) in turns.iter().enumerate() {
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn);
    }

    flows::backdate_gemini_chats(&lab.scratch.home()).expect("backdate chats");
    let client = lab.direct().expect("gemini");
    let mark = client.mark();
    let response =
        flows::reopen(&client, "session/load", session_id, &lab.scratch.work()).expect("load");
    checks.check(response.get("result").is_some(), || format!("session/load failed: {response}"));
    let replayed = client.notifications_since(mark).len();
    checks.check(replayed > 0, || "session/load replayed no history".to_owned());
    let turn = run_turn(&client, &lab.mock, session_id, PLAIN_PROMPT).expect("turn after load");
    check_agent_turn(&mut checks, "direct turn after session/load", &turn);
    let load_fixture = client.transcript_jsonl();
    drop(client);

    let client = lab.direct().expect("gemini");
    let response =
        flows::reopen(&client, "session/resume", session_id, &lab.scratch.work()).expect("resume");
    checks.check(response["error"]["code"] == -32601, || {
        format!("gemini now supports session/resume: {response}")
    });

    support::save_fixture("gemini-direct.jsonl", &history.transcript);
    support::save_fixture("gemini-direct-load.jsonl", &load_fixture);
    support::save_fixture("gemini-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

/// Two turns, then the session reloaded in a fresh process (one launch for both).
#[test]
fn gemini_relay_turns_and_load() {
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn gemini_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// gemini-cli's `invoke_agent` runs the `generalist` subagent (its own chat file under
/// `chats/<session>/`); `_meta.quota` leaves the subagent's tokens out, the transcript has them.
/// The tool needs an untrusted-folder check off and the `yolo` mode.
#[test]
fn gemini_relay_subagent() {
    use acp_usage_tests::mock_llm::{Script, Step, ToolCall, Usage};
    let delegate = ToolCall::named(
        "invoke_agent",
        serde_json::json!({"agent_name": "generalist", "prompt": "Say hi from the subagent. Reply with one word."}),
    );
    let script = Script::new(vec![
        Step::text("Delegating.", Usage::gemini(8000, 6000, 9, 24)).with_tool(delegate),
        // The subagent ends without `complete_task`: gemini-cli gives it a grace turn.
        Step::text("Sub reply one.", Usage::gemini(3000, 0, 14, 40)),
        Step::text("Sub reply two.", Usage::gemini(3100, 1024, 31, 0)),
        Step::text("Main reply three.", Usage::gemini(9000, 8192, 5, 11)),
    ]);
    fn trust_all(lab: &acp_usage_tests::lab::Lab) -> anyhow::Result<()> {
        let path = lab.scratch.home().join(".gemini/settings.json");
        let mut settings: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        settings["security"]["folderTrust"] = serde_json::json!({"enabled": false});
        std::fs::write(&path, settings.to_string())?;
        Ok(())
    }
    fn yolo(client: &acp_usage_tests::client::AcpClient, session: &str) -> anyhow::Result<()> {
        let r = client.request_response(
            "session/set_mode",
            serde_json::json!({"sessionId": session, "modeId": "yolo"}),
        )?;
        anyhow::ensure!(r.get("error").is_none(), "set_mode yolo: {r}");
        Ok(())
    }
    flows::relay_subagent_turn(
        EXPECT,
        flows::SubagentTurn { script, prepare: trust_all, after_new: yolo, main_calls: 2 },
    );
}

/// Without the transcript (`--transcripts off`, or one that cannot be read), the session goes on
/// with what the agent reports over ACP: what it reports is exact, the rest estimated.
#[test]
fn gemini_relay_turns_without_transcripts() {
    let expect = Expect { known: Known::Input, turn_exact: false, ..EXPECT };
    flows::relay_turns_with(expect, &["--transcripts", "off"]);
}

#[test]
fn gemini_relay_turns_tapped() {
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}
