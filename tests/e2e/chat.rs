//! Warnings in the chat: a client that does not advertise `session.notices` (most of them) is
//! told a subscription window's or a budget's crossing as one line of agent message text in the
//! turn, before its result. codex-acp against the mock's Codex rate-limit headers (the primary
//! window filling 50%, 80%, 95% over three turns) and a day budget whose line the first turn
//! crosses; no flag.
//!
//! Guarantees checked:
//! - without notices: exactly one chat line per crossing (the day budget in turn 1, the window's
//!   75% in turn 2, its 90% in turn 3), each in the turn that crossed it and before its result;
//!   no `notice`, and no chat line for the context window;
//! - `[notices] chat = false`: no chat line (and no notice);
//! - a client that advertises notices gets the three `notice`s and no chat line.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use serde_json::Value;

use crate::flows;
use crate::limits::{FILLS, Windows, lab, script_with};

/// The day budget (USD) and the line of it noticed: the first turn's cost crosses it.
const BUDGET: &str = "[budget]\nday = 1000.0\nwarn_at = [0.000001]\n";

/// What one turn showed: the texts of acp-usage's chat lines (each checked to come before the
/// result) and the `_meta.acpUsage` of its notices.
struct Shown {
    chat: Vec<String>,
    notices: Vec<Value>,
}

/// One turn, read line by line so the chat lines' place relative to the result is known.
fn turn(client: &AcpClient, id: &str) -> Shown {
    let mark = client.mark();
    client.prompt(id, flows::PLAIN_PROMPT).expect("prompt");
    let lines = client.lines_since(mark);
    let result_at = lines
        .iter()
        .position(|l| l.json.as_ref().is_some_and(|j| j["result"]["stopReason"].is_string()))
        .expect("the prompt's result");
    let mut shown = Shown { chat: Vec::new(), notices: Vec::new() };
    for (at, line) in lines.iter().enumerate() {
        let Some(update) = line.session_update() else { continue };
        if update["sessionUpdate"] == "agent_message_chunk"
            && update["_meta"]["acpUsage"]["warning"] == true
        {
            assert!(at < result_at, "a chat line after the result: {}", line.text());
            shown.chat.push(update["content"]["text"].as_str().unwrap_or_default().to_owned());
        }
        if update["sessionUpdate"] == "notice" && update["_meta"]["acpUsage"].is_object() {
            shown.notices.push(update["_meta"]["acpUsage"].clone());
        }
    }
    shown
}

/// Three turns with a client that advertises notices (or not) and the config `extra` on top
/// of the budget; what each turn showed.
fn three_turns(notices: bool, extra: &str) -> Vec<Shown> {
    let agent = Agent::CodexTs;
    let windows = Windows::new();
    let lab = lab(agent, script_with(agent, |k| windows.codex_headers(k)));
    let cfg = lab.scratch.path("config.toml");
    std::fs::write(&cfg, format!("{BUDGET}{extra}")).expect("config");
    let client = lab.relayed_with(&["--config", &cfg.display().to_string()]).expect("relay");
    let id = crate::ledger::open(&lab, &client, notices);
    (0..FILLS.len()).map(|_| turn(&client, &id)).collect()
}

#[test]
fn chat_warnings_reach_clients_without_notices_once_per_crossing() {
    let turns = three_turns(false, "");
    let chat: Vec<&Vec<String>> = turns.iter().map(|t| &t.chat).collect();
    assert!(turns.iter().all(|t| t.notices.is_empty()), "notices to a client without them");
    assert_eq!(chat[0].len(), 1, "turn 1: the day budget's line: {chat:#?}");
    assert!(chat[0][0].contains("of the daily budget spent: $0.00 of $1000.00 today"), "{chat:#?}");
    assert_eq!(chat[1].len(), 1, "turn 2: the window's 75%: {chat:#?}");
    assert!(chat[1][0].contains("Codex's 5-hour limit: 80% used. It resets at "), "{chat:#?}");
    assert_eq!(chat[2].len(), 1, "turn 3: the window's 90%: {chat:#?}");
    assert!(chat[2][0].contains("Codex's 5-hour limit: 95% used. It resets at "), "{chat:#?}");
    for text in turns.iter().flat_map(|t| &t.chat) {
        assert!(text.starts_with("\n\nacp-usage: ") && text.ends_with("\n\n"), "{text:?}");
        assert_eq!(text.trim().lines().count(), 1, "one short line: {text:?}");
    }

    let off = three_turns(false, "[notices]\nchat = false\n");
    assert!(off.iter().all(|t| t.chat.is_empty() && t.notices.is_empty()), "chat = false");
}

#[test]
fn chat_warnings_stay_out_of_a_client_that_shows_notices() {
    let turns = three_turns(true, "");
    assert!(turns.iter().all(|t| t.chat.is_empty()), "a chat line beside the notices");
    let per_turn: Vec<usize> = turns.iter().map(|t| t.notices.len()).collect();
    assert_eq!(per_turn, [1, 1, 1], "the budget's, then the window's two: {:#?}", {
        turns.iter().map(|t| &t.notices).collect::<Vec<_>>()
    });
    assert_eq!(turns[0].notices[0]["budget"], "day");
    assert_eq!(turns[1].notices[0]["fraction"], 0.75);
    assert_eq!(turns[2].notices[0]["fraction"], 0.9);
}
