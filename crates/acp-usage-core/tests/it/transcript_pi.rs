//! The pi session-file parser against real session files (pi 1.5.2 through pi-acp 0.0.34, run
//! offline against a mock LLM; see `fixtures/transcripts/pi/README.md`), and lines edited from
//! them.

use crate::common::calls;

use acp_usage_core::tokens::TokenRecord;
use acp_usage_core::transcript::pi::PiParser;
use acp_usage_core::transcript::{Event, FileRole, FormatError, Parser, parse_timestamp};

const MODEL: &str = "claude-sonnet-4-5";

fn fixture(name: &str) -> String {
    crate::common::fixture("pi", name)
}

fn parse(name: &str) -> Vec<Event> {
    crate::common::feed(&mut PiParser::default(), FileRole::Main, fixture(name).lines())
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|event| match event {
            Event::Call(call) if call.main => "call",
            Event::Call(_) => "side",
            Event::Prompt { .. } => "prompt",
            Event::TurnEnd { .. } => "end",
            Event::Window(_) => "window",
            Event::Limits(_) => "limits",
        })
        .collect()
}

/// What the mock served (Anthropic counters: input without the cache), as pi records it.
fn served(input: u64, write_5m: u64, write_1h: u64, read: u64, output: u64) -> TokenRecord {
    TokenRecord {
        model: Some(MODEL.to_owned()),
        ..TokenRecord::from_anthropic(input, read, write_5m, write_1h, output)
    }
}

fn without_cost(mut rec: TokenRecord) -> TokenRecord {
    rec.stated_cost = None;
    rec
}

#[test]
fn tool_turn_and_load() {
    let events = parse("tool-turn-and-load.jsonl");
    assert_eq!(
        kinds(&events),
        [
            "prompt", "call", "end", // Say hello.
            "prompt", "call", "call", "end", // read README.md, then the answer
            "prompt", "call", "end", // One more thing
            "prompt", "call", "end", // after session/load
        ]
    );
    let calls = calls(&events);
    let records: Vec<TokenRecord> = calls.iter().map(|c| without_cost(c.record.clone())).collect();
    assert_eq!(
        records,
        [
            served(20, 1000, 500, 11000, 42),
            served(15, 200, 0, 12000, 61),
            served(9, 350, 0, 12200, 23),
            served(30, 0, 0, 12500, 5),
            served(31, 120, 0, 12600, 6),
        ]
    );
    // The provider's message id is the key (the tap sees the same id).
    let keys: Vec<&str> = calls.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys[0], "pi:msg_mock_37833a10d_0001");
    assert_eq!(keys[2], "pi:msg_mock_37833a10d_0003");
    assert!(calls.iter().all(|c| c.main));
    // `used` after turn 1 is pi's own `totalTokens`: 20 + 1500 + 11000 + 42.
    assert_eq!(calls[0].record.context_after(), 12_562);
    // pi's own price of each call (its catalog: 3/15/0.3/3.75, a 1h write at twice the input).
    let stated: Vec<f64> = calls.iter().map(|c| c.record.stated_cost.unwrap()).collect();
    for (got, want) in stated.iter().zip([0.01074, 0.00531, 0.0053445, 0.003915, 0.004413]) {
        assert!((got - want).abs() < 1e-12, "{stated:?}");
    }
    // Written when the message completed.
    assert_eq!(calls[0].at_ms, parse_timestamp("2026-11-26T06:57:53.347Z"));
    let prompts: Vec<Option<String>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Prompt { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts[0].as_deref(), Some("Say hello."));
    assert_eq!(prompts[3].as_deref(), Some("Are you still there?"));
}

#[test]
fn cache_warming_calls_are_side_calls() {
    let events = parse("cache-warm.jsonl");
    assert_eq!(kinds(&events), ["prompt", "call", "end", "side", "side", "side"]);
    let calls = calls(&events);
    assert_eq!(calls.len(), 4);
    for call in &calls[1..] {
        assert!(!call.main && call.key.starts_with("pi:usage:"), "{call:?}");
        assert_eq!(without_cost(call.record.clone()), served(12, 3000, 0, 9000, 7));
        // Priced by pi with the user's override (cache writes at $37.50/M).
        assert!((call.record.stated_cost.unwrap() - 0.115341).abs() < 1e-12);
    }
}

#[test]
fn custom_provider() {
    let events = parse("custom-provider.jsonl");
    assert_eq!(kinds(&events), ["prompt", "call", "end"]);
    let call = &calls(&events)[0];
    assert_eq!(call.key, "pi:msg_mock_675729fab_0003");
    assert_eq!(without_cost(call.record.clone()), served(12, 3000, 0, 9000, 7));
    assert!((call.record.stated_cost.unwrap() - 0.014091).abs() < 1e-12);
}

#[test]
fn a_line_fed_twice_counts_once() {
    let text = fixture("tool-turn-and-load.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    let mut parser = PiParser::new();
    let mut events = crate::common::feed(&mut parser, FileRole::Main, lines.iter().copied());
    let again = crate::common::feed(&mut parser, FileRole::Main, lines.iter().copied());
    // The calls come again with the same keys (they replace themselves); no new turn.
    assert!(again.iter().all(|e| matches!(e, Event::Call(_))), "{again:?}");
    events.extend(again);
    assert_eq!(calls(&events).len(), 5);
}

#[test]
fn reasoning_is_part_of_output_and_zero_costs_are_not_stated() {
    let line = r#"{"type":"message","id":"a1","timestamp":"2026-11-26T06:57:53.347Z","message":{"role":"assistant","content":[],"provider":"openai","model":"gpt-5.2","usage":{"input":100,"output":50,"reasoning":30,"cacheRead":900,"cacheWrite":0,"totalTokens":1050,"cost":{"total":0,"totalFromProvider":false}},"stopReason":"stop"}}"#;
    let events = crate::common::feed(&mut PiParser::new(), FileRole::Main, [line]);
    let call = &calls(&events)[0];
    // No responseId: the entry's id is the key.
    assert_eq!(call.key, "pi:entry:a1");
    assert_eq!((call.record.input, call.record.cache_read), (1000, 900));
    assert_eq!((call.record.output, call.record.thought), (50, 30));
    // pi priced it at zero: it has no price for the model, the catalog decides.
    assert_eq!(call.record.stated_cost, None);
    let provider = line.replace(r#""totalFromProvider":false"#, r#""totalFromProvider":true"#);
    let events = crate::common::feed(&mut PiParser::new(), FileRole::Main, [provider.as_str()]);
    assert_eq!(calls(&events)[0].record.stated_cost, Some(0.0));
}

#[test]
fn compaction_and_errors() {
    let lines = [
        r#"{"type":"message","id":"u1","timestamp":"2026-11-26T06:57:53.000Z","message":{"role":"user","content":"go"}}"#,
        // An aborted call with no tokens: nothing billed, the turn still ends.
        r#"{"type":"message","id":"a1","timestamp":"2026-11-26T06:57:54.000Z","message":{"role":"assistant","content":[],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},"stopReason":"aborted"}}"#,
        r#"{"type":"compaction","id":"c1","timestamp":"2026-11-26T06:57:55.000Z","summary":"...","usage":{"input":5000,"output":300,"cacheRead":0,"cacheWrite":0}}"#,
        r#"{"type":"branch_summary","id":"b1","timestamp":"2026-11-26T06:57:56.000Z","summary":"..."}"#,
        r#"{"type":"custom","id":"x1","customType":"whatever","data":{}}"#,
    ];
    let events = crate::common::feed(&mut PiParser::new(), FileRole::Main, lines);
    assert_eq!(kinds(&events), ["prompt", "end", "side"]);
    assert_eq!(calls(&events)[0].key, "pi:compaction:c1");
    assert_eq!(calls(&events)[0].record.total(), 5300);
}

#[test]
fn a_changed_format_is_an_error() {
    let mut parser = PiParser::new();
    let mut out = Vec::new();
    let bad = [
        "not json",
        r#"{"id":"x"}"#,
        r#"{"type":"message","id":"m"}"#,
        r#"{"type":"message","id":"m","message":{"role":"assistant","usage":{"output":1}}}"#,
        r#"{"type":"usage","id":"u","kind":"cache_warm","usage":{"input":1}}"#,
    ];
    for line in bad {
        let err: Result<(), FormatError> = parser.line(FileRole::Main, line.as_bytes(), &mut out);
        assert!(err.is_err(), "{line} should be an error");
    }
    assert!(parser.line(FileRole::Main, b"", &mut out).is_ok());
}
