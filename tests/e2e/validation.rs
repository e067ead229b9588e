//! Recording and validating real sessions: each agent runs a plain and a tool-use turn through
//! `acp-usage --record FILE --validate`, then `acp-usage validate --json FILE` checks the whole
//! recording. Guarantees: the recording holds both directions and acp-usage's injected lines in
//! order; what the pinned agents and acp-usage send validates against schema/schema.json (the
//! pinned agents violate nothing today; a violation fails here, naming the agent, method and
//! pointer, so it can be pinned as a fixture); live validation logs no violation either.

use std::process::Command;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::relay;
use serde_json::Value;

use crate::flows::{PLAIN_PROMPT, TOOL_PROMPT, session_id};
use crate::support;

fn record_and_validate(agent: Agent) {
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let recording = lab.scratch.path(&format!("{}-session.record.jsonl", agent.name()));
    let rec = recording.to_str().expect("utf-8 path");
    let client = lab.relayed_with(&["--record", rec, "--validate"]).expect("start the relay");
    client.initialize().expect("initialize");
    let new_result = client.new_session(&lab.scratch.work()).expect("session/new");
    let session = session_id(&new_result).expect("session id");
    run_turn(&client, &lab.mock, &session, PLAIN_PROMPT).expect("plain turn");
    run_turn(&client, &lab.mock, &session, TOOL_PROMPT).expect("tool turn");
    // Closing the client ends the relay, which flushes the recording.
    drop(client);

    let text = std::fs::read_to_string(&recording).expect("the recording exists");
    let records: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect();
    let dirs = |d: &str| records.iter().filter(|r| r["dir"] == d).count();
    assert!(dirs("editor_to_agent") >= 4, "{agent:?}: editor lines missing from {rec}");
    assert!(dirs("agent_to_editor") >= 4, "{agent:?}: agent lines missing from {rec}");
    // After session/new and before each of the two results at least.
    assert!(dirs("injected") >= 3, "{agent:?}: injected usage_updates missing from {rec}");
    let seqs: Vec<u64> = records.iter().filter_map(|r| r["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{agent:?}: records out of order");

    let out = Command::new(relay::relay_binary().expect("the relay binary"))
        .args(["validate", "--json", rec])
        .output()
        .expect("run acp-usage validate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let findings: Vec<Value> =
        stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let summary = findings.iter().find(|f| f["type"] == "summary").expect("a summary");
    eprintln!(
        "{agent:?}: validated {} messages at {} messages/s",
        summary["messages"], summary["messages_per_second"]
    );
    let problems: Vec<&Value> = findings.iter().filter(|f| f["type"] != "summary").collect();
    assert!(
        out.status.code() == Some(0) && problems.is_empty(),
        "{agent:?}: the recorded session violates the schema (exit {:?}):\n{}",
        out.status.code(),
        problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(summary["invalid"], 0);
    assert!(summary["messages"].as_u64().unwrap_or(0) as usize >= records.len() - 1);

    // Live validation saw the same traffic and logged nothing against it.
    let logs: String = std::fs::read_dir(lab.scratch.path(""))
        .expect("scratch dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("-relay-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    assert!(!logs.is_empty(), "{agent:?}: no relay log found");
    assert!(logs.contains("validation summary"), "{agent:?}: live validation did not run:\n{logs}");
    let live: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("ACP invalid:") || l.contains("ACP malformed:"))
        .collect();
    assert!(
        live.is_empty(),
        "{agent:?}: live validation reported violations:\n{}",
        live.join("\n")
    );
}

#[test]
fn claude_session_records_and_validates() {
    record_and_validate(Agent::Claude);
}

#[test]
fn codex_session_records_and_validates() {
    record_and_validate(Agent::Codex);
}

#[test]
fn gemini_session_records_and_validates() {
    record_and_validate(Agent::Gemini);
}
