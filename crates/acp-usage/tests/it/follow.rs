//! The observer following a session through its transcript, in process: which commands it
//! gives the worker, when it holds a result, and what it reports once the transcript's calls
//! are in (the worker itself is replaced by hand-made updates).

use acp_usage::relay::observer::{Observer, Settings};
use acp_usage::sources::transcripts::{Command, Format, Update, UpdateKind};

/// Claude Code's transcript format, from its profile.
fn claude_format() -> &'static Format {
    acp_usage::agents::Profile::named("claude").unwrap().transcripts().unwrap()
}
use crate::support::settings;
use acp_usage_core::transcript::{Call, Event};
use acp_usage_core::{Catalog, TokenRecord};
use serde_json::{Value, json};

fn line(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

fn observer() -> Observer {
    Observer::new(Settings {
        transcripts: true,
        catalog: Catalog::embedded().clone(),
        ..settings(&["claude-agent-acp"])
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn call(key: &str, rec: TokenRecord, main: bool) -> Event {
    Event::Call(Call { key: key.into(), record: rec, at_ms: Some(now_ms()), main })
}

fn sonnet(input: u64, read: u64, write: u64, output: u64) -> TokenRecord {
    TokenRecord {
        model: Some("claude-sonnet-4-5".into()),
        ..TokenRecord::from_anthropic(input, read, write, 0, output)
    }
}

fn events(session: &str, events: Vec<Event>) -> Update {
    Update {
        session: session.into(),
        kind: UpdateKind::Events { events, found: true, at_end: true, settled: true },
    }
}

fn usage_update(lines: &[Vec<u8>]) -> Value {
    lines
        .iter()
        .map(|l| serde_json::from_slice::<Value>(l).unwrap())
        .find(|v| v["params"]["update"]["sessionUpdate"] == "usage_update")
        .map(|v| v["params"]["update"].clone())
        .expect("a usage_update")
}

/// Catalog price of Sonnet 4.5 calls: $3 in, $15 out, $0.30 cache read, $3.75 5-minute write.
fn price(recs: &[&TokenRecord]) -> f64 {
    recs.iter()
        .map(|r| {
            (r.uncached_input() as f64 * 3.0
                + r.cache_read as f64 * 0.30
                + r.cache_write_5m as f64 * 3.75
                + r.output as f64 * 15.0)
                / 1e6
        })
        .sum()
}

fn start(o: &mut Observer, session: &str) {
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})));
    o.from_agent(&line(
        json!({"jsonrpc":"2.0","id":0,"result":{"agentInfo":{"name":"claude-agent-acp"}}}),
    ));
    o.from_editor(&line(
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}),
    ));
    o.from_agent(&line(json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":session}})));
}

#[test]
fn a_turn_is_held_until_its_end_is_in_the_transcript_then_reported_from_it() {
    let mut o = observer();
    start(&mut o, "S");
    assert_eq!(
        o.take_commands(),
        vec![Command::Track { session: "S".into(), format: claude_format() }]
    );
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"Read it."}]}})));
    assert_eq!(o.take_commands(), vec![Command::Poll("S".into())]);

    // Two main calls and a subagent's call between them.
    let first = sonnet(12, 9000, 3000, 61);
    let sub = sonnet(500, 0, 2000, 40);
    let last = sonnet(80, 12000, 0, 7);
    o.transcript_update(events(
        "S",
        vec![call("m1", first.clone(), true), call("s1", sub.clone(), false)],
    ));
    // The agent's own report, which the transcript supersedes (its cost is lower: a floor that
    // does not bind).
    o.from_agent(&line(json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"usage_update","used":1,"size":200000,"cost":{"amount":0.001,"currency":"USD"}}}})));
    let result = line(
        json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}}),
    );
    let out = o.from_agent(&result);
    assert_eq!(out.hold.as_deref(), Some("S"), "the result waits for the transcript");
    assert!(out.before.is_empty() && out.replace.is_none());
    assert!(o.take_commands().contains(&Command::Hold("S".into())));
    assert!(!o.hold_ready("S"));

    o.transcript_update(events(
        "S",
        vec![call("m2", last.clone(), true), Event::TurnEnd { at_ms: Some(now_ms()) }],
    ));
    assert!(o.hold_ready("S"));
    o.release("S", false);
    let out = o.from_agent_released(&result);
    assert_eq!(out.hold, None);

    let u = usage_update(&out.before);
    assert_eq!(u["used"], last.input + last.output, "used = the last main call: {u}");
    assert_eq!(u["_meta"]["acpUsage"]["used"]["source"], "transcript", "{u}");
    assert_eq!(u["_meta"]["acpUsage"]["used"]["exact"], true, "{u}");
    let cost = u["cost"]["amount"].as_f64().unwrap();
    let want = price(&[&first, &sub, &last]);
    assert!((cost - want).abs() < 1e-9, "cost {cost} != {want} (the agent's lower 0.001 ignored)");

    let result: Value =
        serde_json::from_slice(out.replace.as_ref().expect("usage rewritten")).unwrap();
    let usage = &result["result"]["usage"];
    let input = first.input + sub.input + last.input;
    let output = first.output + sub.output + last.output;
    assert_eq!(usage["inputTokens"], input, "{usage}");
    assert_eq!(usage["outputTokens"], output, "{usage}");
    assert_eq!(usage["totalTokens"], input + output, "{usage}");
    assert_eq!(usage["cachedReadTokens"], 9000 + 12000, "{usage}");
    assert_eq!(usage["cachedWriteTokens"], 3000 + 2000, "{usage}");
}

#[test]
fn a_late_transcript_falls_back_to_the_agent_numbers_and_is_given_up_after_three() {
    let mut o = observer();
    start(&mut o, "S");
    o.take_commands();
    for turn in 0..3 {
        let id = 10 + turn;
        o.from_editor(&line(json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"Hi."}]}})));
        let result = line(
            json!({"jsonrpc":"2.0","id":id,"result":{"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":7,"cachedReadTokens":9000,"cachedWriteTokens":3000,"totalTokens":12019}}}),
        );
        let out = o.from_agent(&result);
        assert_eq!(out.hold.as_deref(), Some("S"), "turn {turn}");
        o.release("S", true);
        let out = o.from_agent_released(&result);
        let r: Value = serde_json::from_slice(out.replace.as_ref().unwrap()).unwrap();
        assert_eq!(r["result"]["usage"]["totalTokens"], 12019, "the agent's numbers: {r}");
    }
    assert!(o.take_commands().contains(&Command::Forget("S".into())), "given up after 3 timeouts");
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"Hi."}]}})));
    let out =
        o.from_agent(&line(json!({"jsonrpc":"2.0","id":20,"result":{"stopReason":"end_turn"}})));
    assert_eq!(out.hold, None, "a given-up transcript holds nothing");
}

#[test]
fn a_loaded_session_reports_its_whole_history_from_the_transcript() {
    let mut o = observer();
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})));
    o.from_agent(&line(
        json!({"jsonrpc":"2.0","id":0,"result":{"agentInfo":{"name":"claude-agent-acp"}}}),
    ));
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"L","cwd":"/w"}})));
    assert_eq!(
        o.take_commands(),
        vec![Command::Track { session: "L".into(), format: claude_format() }]
    );
    let a = sonnet(12, 9000, 3000, 7);
    let b = sonnet(10, 12000, 19, 5);
    let sub = sonnet(300, 0, 0, 20);
    // The worker reads the history while the agent replays it.
    o.transcript_update(events(
        "L",
        vec![call("a", a.clone(), true), call("b", b.clone(), true), call("x", sub.clone(), false)],
    ));
    let response = line(json!({"jsonrpc":"2.0","id":1,"result":{}}));
    let out = o.from_agent(&response);
    // A read that reached the end came before the response: nothing to wait for.
    assert_eq!(out.hold, None);
    let u = usage_update(&out.after);
    assert_eq!(u["used"], b.input + b.output, "{u}");
    assert_eq!(u["_meta"]["acpUsage"]["used"]["source"], "transcript", "{u}");
    let cost = u["cost"]["amount"].as_f64().unwrap();
    assert!((cost - price(&[&a, &b, &sub])).abs() < 1e-9, "the whole history's cost: {cost}");
    assert_eq!(u["_meta"]["acpUsage"]["cost"]["partial"], Value::Null, "{u}");
}

#[test]
fn a_failed_transcript_releases_at_once() {
    let mut o = observer();
    start(&mut o, "S");
    o.from_editor(&line(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"Hi."}]}})));
    let result = line(json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}));
    assert_eq!(o.from_agent(&result).hold.as_deref(), Some("S"));
    o.transcript_update(Update { session: "S".into(), kind: UpdateKind::Failed("gone".into()) });
    assert!(o.hold_ready("S"));
}

/// A main call of Claude Code as the tap reports it: its provider id is the transcript's key.
fn tap_call(rec: &TokenRecord, id: &str) -> acp_usage::sources::tap::TapCall {
    acp_usage::sources::tap::TapCall {
        api: acp_usage_core::api::Api::AnthropicMessages,
        request: acp_usage_core::api::RequestInfo {
            model: rec.model.clone(),
            has_tools: true,
            system_fingerprint: Some(7),
            ..Default::default()
        },
        body: bytes::Bytes::from_static(b"{}"),
        session_header: Some("S".into()),
        record: rec.clone(),
        id: Some(id.into()),
        complete: true,
        estimated: false,
        started_ms: now_ms(),
        ended_ms: now_ms(),
        warmup: false,
    }
}

#[test]
fn the_tap_wins_the_turn_whether_its_report_or_the_transcript_comes_first() {
    let rec = sonnet(12, 9000, 3000, 61);
    let mut results = Vec::new();
    for tap_first in [true, false] {
        let mut o = Observer::new(Settings {
            tap: true,
            transcripts: true,
            catalog: Catalog::embedded().clone(),
            ..settings(&["claude-agent-acp"])
        });
        start(&mut o, "S");
        o.from_editor(&line(json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"Read it."}]}})));
        if tap_first {
            o.tap_call(tap_call(&rec, "m1"));
        }
        let result = line(json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}));
        assert_eq!(o.from_agent(&result).hold.as_deref(), Some("S"));
        o.transcript_update(events(
            "S",
            vec![call("m1", rec.clone(), true), Event::TurnEnd { at_ms: Some(now_ms()) }],
        ));
        assert!(o.hold_ready("S"), "the transcript is in");
        // The transcript has a call the tap has not reported yet: the main loop waits for the
        // report (while the tap is still reading a call) before the turn ends.
        assert_eq!(o.tap_missing("S"), !tap_first, "tap first: {tap_first}");
        if !tap_first {
            o.tap_call(tap_call(&rec, "m1"));
            assert!(!o.tap_missing("S"));
        }
        o.release("S", false);
        let out = o.from_agent_released(&result);
        let r: Value = serde_json::from_slice(out.replace.as_ref().expect("usage")).unwrap();
        let usage = r["result"]["usage"].clone();
        assert_eq!(usage["_meta"]["acpUsage"]["source"], "tap", "tap first: {tap_first}: {usage}");
        assert_eq!(usage["totalTokens"], rec.total(), "counted once: {usage}");
        results.push(usage);
    }
    assert_eq!(results[0], results[1], "the same turn either way");
}
