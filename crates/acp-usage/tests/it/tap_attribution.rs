//! The LLM-API tap's calls inside the observer: which session and turn each belongs to, and who
//! made it (main, subagent, side), through the figures the editor gets.

use crate::support::settings;
use acp_usage::relay::observer::{Observer, Settings};
use acp_usage::sources::tap::TapCall;
use acp_usage_core::api::{Api, RequestInfo};
use acp_usage_core::{Catalog, TokenRecord};
use serde_json::{Value, json};

fn line(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

fn observer() -> Observer {
    Observer::new(Settings {
        tap: true,
        catalog: Catalog::embedded().clone(),
        ..settings(&["agent"])
    })
}

fn open(o: &mut Observer, id: u64, session: &str) {
    o.from_editor(&line(
        json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd":"/w"}}),
    ));
    o.from_agent(&line(json!({"jsonrpc":"2.0","id":id,"result":{"sessionId":session}})));
}

fn prompt(o: &mut Observer, id: u64, session: &str, text: &str) {
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}})));
}

/// The per-turn usage the editor gets with the result of prompt `id`.
fn result(o: &mut Observer, id: u64) -> Value {
    let out =
        o.from_agent(&line(json!({"jsonrpc":"2.0","id":id,"result":{"stopReason":"end_turn"}})));
    let replaced = out.replace.expect("the result gets a usage");
    serde_json::from_slice::<Value>(&replaced).unwrap()["result"]["usage"].clone()
}

fn call(
    input: u64,
    output: u64,
    tools: bool,
    system: u64,
    body: &str,
    header: Option<&str>,
) -> TapCall {
    TapCall {
        api: Api::AnthropicMessages,
        request: RequestInfo {
            model: Some("claude-sonnet-4-5".into()),
            has_tools: tools,
            system_fingerprint: Some(system),
            ..RequestInfo::default()
        },
        body: bytes::Bytes::from(body.to_owned()),
        session_header: header.map(str::to_owned),
        record: TokenRecord {
            model: Some("claude-sonnet-4-5".into()),
            ..TokenRecord::from_anthropic(input, 0, 0, 0, output)
        },
        id: None,
        complete: true,
        estimated: false,
        // Read as it ends: during the turn it belongs to.
        started_ms: now_ms(),
        ended_ms: now_ms(),
        warmup: false,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn role_inputs(usage: &Value) -> Vec<(String, u64)> {
    let roles = usage["_meta"]["acpUsage"]["roles"].as_object().cloned().unwrap_or_default();
    roles.into_iter().map(|(k, v)| (k, v["inputTokens"].as_u64().unwrap_or(0))).collect()
}

#[test]
fn the_one_turn_in_flight_gets_the_call_and_tools_tell_main_from_side() {
    let mut o = observer();
    open(&mut o, 1, "A");
    open(&mut o, 2, "B");
    prompt(&mut o, 3, "A", "Refactor the tokenizer module now");
    // The main loop (tools, carries the prompt), a title (no tools), a subagent (tools, its own
    // system prompt, not the user's text).
    o.tap_call(call(
        1000,
        50,
        true,
        7,
        r#"{"messages":"Refactor the tokenizer module now"}"#,
        None,
    ));
    o.tap_call(call(100, 5, false, 9, r#"{"messages":"title please"}"#, None));
    o.tap_call(call(400, 20, true, 8, r#"{"messages":"look at tokenizer.rs"}"#, None));
    o.tap_call(call(
        1200,
        30,
        true,
        7,
        r#"{"messages":"Refactor the tokenizer module now ..."}"#,
        None,
    ));
    let usage = result(&mut o, 3);
    assert_eq!(usage["_meta"]["acpUsage"]["source"], "tap");
    assert_eq!(usage["inputTokens"], 2700);
    assert_eq!(
        role_inputs(&usage),
        vec![("main".into(), 2200), ("side".into(), 100), ("subagent".into(), 400)]
    );
}

#[test]
fn with_two_turns_in_flight_the_prompt_the_request_carries_decides() {
    let mut o = observer();
    open(&mut o, 1, "A");
    open(&mut o, 2, "B");
    prompt(&mut o, 3, "A", "Explain the parser in detail");
    prompt(&mut o, 4, "B", "Write tests for the ledger module");
    o.tap_call(call(700, 10, true, 1, r#"{"m":"Write tests for the ledger module"}"#, None));
    o.tap_call(call(300, 10, true, 2, r#"{"m":"Explain the parser in detail"}"#, None));
    // A session header beats everything else.
    o.tap_call(call(50, 1, false, 3, r#"{"m":"Write tests for the ledger module"}"#, Some("A")));
    assert_eq!(result(&mut o, 3)["inputTokens"], 350);
    assert_eq!(result(&mut o, 4)["inputTokens"], 700);
}

#[test]
fn a_call_before_any_session_counts_in_the_first_one() {
    let mut o = observer();
    o.tap_call(call(20, 1, false, 1, "{}", None));
    open(&mut o, 1, "A");
    prompt(&mut o, 2, "A", "Say hello to the world");
    o.tap_call(call(500, 10, true, 5, r#"{"m":"Say hello to the world"}"#, None));
    let usage = result(&mut o, 2);
    // The early call is counted between turns (in the cost), not in this turn.
    assert_eq!(usage["inputTokens"], 500);
}

#[test]
fn a_call_after_the_result_gets_an_update_of_its_own_and_one_in_a_turn_does_not() {
    let mut o = observer();
    open(&mut o, 1, "A");
    prompt(&mut o, 2, "A", "Say hello to the world");
    o.tap_call(call(500, 10, true, 5, r#"{"m":"Say hello to the world"}"#, None));
    // In the turn: the turn's own update shows it.
    assert!(!o.has_between_turn_updates());
    result(&mut o, 2);
    // A title that ended after the result, then a second side call: one update shows both.
    o.tap_call(call(100, 5, false, 9, r#"{"messages":"title please"}"#, None));
    o.tap_call(call(40, 2, false, 9, r#"{"messages":"suggest a prompt"}"#, None));
    assert!(o.has_between_turn_updates());
    let lines = o.between_turn_updates();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let update: Value = serde_json::from_slice(&lines[0]).unwrap();
    let u = &update["params"]["update"];
    assert_eq!(u["sessionUpdate"], "usage_update");
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "between_turns");
    // The cost covers all three calls at the catalog's Sonnet 4.5 prices ($3 in, $15 out per M).
    let want = (640.0 * 3.0 + 17.0 * 15.0) / 1e6;
    let got = u["cost"]["amount"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-9, "cost {got} vs {want}");
    // Nothing more until the next call between turns.
    assert!(!o.has_between_turn_updates());
    assert!(o.between_turn_updates().is_empty());

    // A call counted between turns, then a turn that starts before its update went out: the
    // turn's update will show it.
    o.tap_call(call(30, 1, false, 9, r#"{"messages":"memory"}"#, None));
    prompt(&mut o, 3, "A", "Say hello again");
    assert!(o.between_turn_updates().is_empty());
}

#[test]
fn a_call_read_late_counts_when_it_began_not_when_it_was_read() {
    // A warm-up made while the session opened, read only once the first turn had begun (the
    // ledger was still opening): it happened between turns, and the turn is its main call.
    let mut o = observer();
    open(&mut o, 1, "A");
    let mut early = call(900, 0, true, 7, r#"{"m":"warm"}"#, Some("A"));
    early.started_ms = 0;
    early.ended_ms = 0;
    prompt(&mut o, 2, "A", "Refactor the tokenizer module now");
    o.tap_call(early);
    o.tap_call(call(1000, 50, true, 7, r#"{"m":"Refactor the tokenizer module now"}"#, Some("A")));
    let usage = result(&mut o, 2);
    assert_eq!(usage["inputTokens"], 1000, "{usage}");
    assert_eq!(usage["_meta"]["acpUsage"]["source"], "tap");
}

#[test]
fn a_call_the_last_turn_began_is_not_the_next_turns_though_it_ends_in_it() {
    // Vibe's title: requested after the first result, still streaming when the second prompt
    // is sent, its usage read during the second turn. It is the session's, not that turn's.
    let mut o = observer();
    open(&mut o, 1, "A");
    prompt(&mut o, 2, "A", "Say hello to the world");
    o.tap_call(call(500, 10, true, 5, r#"{"m":"Say hello to the world"}"#, None));
    result(&mut o, 2);
    let mut title = call(150, 12, false, 9, r#"{"messages":"title please"}"#, None);
    title.started_ms = now_ms() - 1;
    prompt(&mut o, 3, "A", "Refactor the tokenizer module now");
    o.tap_call(title);
    o.tap_call(call(1000, 50, true, 5, r#"{"m":"Refactor the tokenizer module now"}"#, None));
    let out =
        o.from_agent(&line(json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}})));
    let usage = serde_json::from_slice::<Value>(&out.replace.expect("a usage")).unwrap()["result"]
        ["usage"]
        .clone();
    assert_eq!(usage["inputTokens"], 1000, "{usage}");
    assert_eq!(usage["outputTokens"], 50, "{usage}");
    // The session's figures hold all three calls.
    let update = out.before.last().expect("the turn's update");
    let update: Value = serde_json::from_slice(update).unwrap();
    let want = ((500.0 + 150.0 + 1000.0) * 3.0 + (10.0 + 12.0 + 50.0) * 15.0) / 1e6;
    let got = update["params"]["update"]["cost"]["amount"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-9, "cost {got} vs {want}");
}
