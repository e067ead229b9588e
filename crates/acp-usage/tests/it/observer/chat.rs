//! Warnings in the chat, in the observer: a subscription window's crossing reaches a client
//! without notices as one line of agent message text inside a turn: before the result of the
//! turn it was seen in, or, seen between turns, as the session's next turn starts; never while
//! no prompt is in flight. A client that shows notices gets the notice instead, at once.

use acp_usage::relay::observer::{EditorOutcome, Observer};
use acp_usage_core::limits::{Limit, from_headers};
use serde_json::{Value, json};

use crate::support::*;

/// The 5-hour window at `fraction`, as Anthropic's headers state it: a window that began ten
/// minutes ago, too early for a forecast, so only the crossings are told.
fn five_hour(fraction: f64) -> Vec<Limit> {
    let reset = (chrono_now() + 5 * 3600 - 600).to_string();
    let fill = fraction.to_string();
    from_headers(
        [
            ("anthropic-ratelimit-unified-5h-utilization", fill.as_str()),
            ("anthropic-ratelimit-unified-5h-reset", reset.as_str()),
        ],
        chrono_now() * 1000,
    )
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// An observer with session `s1` open, for a client that shows notices or not.
fn opened(notices: bool) -> Observer {
    opened_with(settings(&["claude-agent-acp"]), notices)
}

fn opened_with(settings: acp_usage::relay::observer::Settings, notices: bool) -> Observer {
    let mut o = Observer::new(settings);
    let caps = if notices { json!({"session": {"notices": {}}}) } else { json!({}) };
    let init = json!({"protocolVersion": 1, "clientCapabilities": caps});
    o.from_editor(req("0", "initialize", init).as_bytes());
    o.from_agent(resp("0", json!({"protocolVersion": 1})).as_bytes());
    o.from_editor(req("1", "session/new", new_params()).as_bytes());
    o.from_agent(resp("1", json!({"sessionId": "s1"})).as_bytes());
    // What a window had reached when first seen is not told: the crossings come after this.
    o.limits_observed(five_hour(0.5), Some("s1"));
    o.between_turn_updates();
    o
}

/// acp-usage's chat lines among `lines`, their texts.
fn chat(lines: &[Vec<u8>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| parse(l))
        .filter(|v| v.pointer("/params/update/_meta/acpUsage/warning") == Some(&json!(true)))
        .map(|v| v.pointer("/params/update/content/text").and_then(Value::as_str).unwrap().into())
        .collect()
}

fn notices(lines: &[Vec<u8>]) -> usize {
    lines
        .iter()
        .filter(|l| parse(l).pointer("/params/update/sessionUpdate") == Some(&json!("notice")))
        .count()
}

fn prompt(o: &mut Observer, id: &str) -> EditorOutcome {
    let out = o.from_editor(req(id, "session/prompt", prompt_params("s1", "Hi.")).as_bytes());
    assert!(out.forward, "a prompt goes to the agent");
    out
}

#[test]
fn a_crossing_in_a_turn_goes_before_its_result() {
    let mut o = opened(false);
    assert!(chat(&prompt(&mut o, "2").to_editor).is_empty());
    o.from_agent(chunk("s1", "Hello.").as_bytes());
    o.limits_observed(five_hour(0.8), Some("s1"));
    let out = o.from_agent(end_turn("2").as_bytes());
    let texts = chat(&out.before);
    assert_eq!(texts.len(), 1, "{:?}", lossy(&out.before));
    assert!(texts[0].starts_with("\n\nacp-usage: Claude's 5-hour limit: 80% used. It resets at "));
    assert_eq!(notices(&out.before), 0, "no notice to a client without them");
    // The chat line comes before the turn's update (and so before the result).
    let kinds: Vec<Value> =
        out.before.iter().map(|l| parse(l)["params"]["update"]["sessionUpdate"].clone()).collect();
    assert_eq!(kinds, [json!("agent_message_chunk"), json!("usage_update")]);
    // Told once: the next turn has nothing to say.
    prompt(&mut o, "3");
    assert!(chat(&o.from_agent(end_turn("3").as_bytes()).before).is_empty());
}

#[test]
fn a_crossing_between_turns_waits_for_the_next_turn() {
    let mut o = opened(false);
    prompt(&mut o, "2");
    o.from_agent(end_turn("2").as_bytes());
    // Between turns: the window moved (a call after the result), so an update is due, but the
    // chat line is not sent while no prompt is in flight.
    o.limits_observed(five_hour(0.95), Some("s1"));
    assert!(o.has_between_turn_updates());
    let between = o.between_turn_updates();
    assert!(chat(&between).is_empty(), "{:?}", lossy(&between));
    assert!(!between.is_empty(), "the update still goes");
    // The next prompt's turn starts: the line goes with it, as the turn's first words.
    let started = prompt(&mut o, "3");
    let texts = chat(&started.to_editor);
    assert_eq!(texts.len(), 1, "{:?}", lossy(&started.to_editor));
    assert!(texts[0].starts_with("acp-usage: Claude's 5-hour limit: 95% used."), "{texts:?}");
    assert!(chat(&o.from_agent(end_turn("3").as_bytes()).before).is_empty(), "told once");
}

#[test]
fn a_prompt_queued_behind_a_turn_does_not_take_its_lines() {
    let mut o = opened(false);
    prompt(&mut o, "2");
    o.limits_observed(five_hour(0.8), Some("s1"));
    // A second prompt while the first runs: its turn has not started, so the line stays with
    // the running turn's result.
    assert!(chat(&prompt(&mut o, "3").to_editor).is_empty());
    assert_eq!(chat(&o.from_agent(end_turn("2").as_bytes()).before).len(), 1);
}

#[test]
fn a_client_that_shows_notices_gets_no_chat_line() {
    let mut o = opened(true);
    prompt(&mut o, "2");
    o.from_agent(end_turn("2").as_bytes());
    o.limits_observed(five_hour(0.8), Some("s1"));
    let between = o.between_turn_updates();
    assert_eq!(notices(&between), 1, "the notice goes at once: {:?}", lossy(&between));
    assert!(chat(&between).is_empty());
    assert!(chat(&prompt(&mut o, "3").to_editor).is_empty());
    let out = o.from_agent(end_turn("3").as_bytes());
    assert!(chat(&out.before).is_empty(), "{:?}", lossy(&out.before));
}

#[test]
fn chat_off_sends_no_line() {
    let mut settings = settings(&["claude-agent-acp"]);
    settings.budgets.chat = false;
    let mut o = opened_with(settings, false);
    prompt(&mut o, "2");
    o.limits_observed(five_hour(0.8), Some("s1"));
    let out = o.from_agent(end_turn("2").as_bytes());
    assert!(chat(&out.before).is_empty() && notices(&out.before) == 0);
}

/// A 5-hour window that began two hours ago, at `fraction`, observed now.
fn two_hours_in(fraction: f64) -> Vec<Limit> {
    let reset = (chrono_now() + 3 * 3600).to_string();
    let fill = fraction.to_string();
    from_headers(
        [
            ("anthropic-ratelimit-unified-5h-utilization", fill.as_str()),
            ("anthropic-ratelimit-unified-5h-reset", reset.as_str()),
        ],
        chrono_now() * 1000,
    )
}

#[test]
fn a_window_that_runs_out_before_it_resets_is_told_once_in_the_chat() {
    let mut o = opened(false);
    o.limits_observed(two_hours_in(0.1), Some("s1"));
    prompt(&mut o, "2");
    // 40% two hours in lasts three more hours: exactly to the reset, not before it.
    o.limits_observed(two_hours_in(0.4), Some("s1"));
    assert!(chat(&o.from_agent(end_turn("2").as_bytes()).before).is_empty());
    prompt(&mut o, "3");
    // 60% two hours in: the rest in 80 minutes, 100 before the reset.
    o.limits_observed(two_hours_in(0.6), Some("s1"));
    let texts = chat(&o.from_agent(end_turn("3").as_bytes()).before);
    assert_eq!(texts.len(), 1, "{texts:?}");
    let text = &texts[0];
    assert!(text.contains("acp-usage: at this pace Claude's 5-hour limit runs out at "), "{text}");
    // Whole minutes, rounded down: a second either way of the 80 and 100 minutes.
    let near = |a: &str, b: &str| text.contains(a) || text.contains(b);
    assert!(near("(in 1 h 20 min), ", "(in 1 h 19 min), "), "{text}");
    assert!(near(" 1 h 40 min before it resets.", " 1 h 39 min before it resets."), "{text}");
    // Told once per period, though it still runs out.
    prompt(&mut o, "4");
    o.limits_observed(two_hours_in(0.65), Some("s1"));
    assert!(chat(&o.from_agent(end_turn("4").as_bytes()).before).is_empty(), "told once");
}
