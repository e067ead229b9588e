//! The Copilot CLI event-log parser against real `events.jsonl` files (Copilot CLI 1.0.102 run
//! offline against a mock LLM; see `fixtures/transcripts/copilot/README.md`), and lines edited from them.

use crate::common::calls;

use acp_usage_core::tokens::TokenRecord;
use acp_usage_core::transcript::copilot::CopilotParser;
use acp_usage_core::transcript::{Event, FileRole, FormatError, Parser, parse_timestamp};

const SESSION: &str = "222c1bac-c227-4ace-b77c-e6fd912a13dc";
const MODEL: &str = "claude-sonnet-4.5";

fn fixture(name: &str) -> String {
    crate::common::fixture("copilot", name)
}

fn feed<'a>(
    parser: &mut CopilotParser,
    role: FileRole,
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Event> {
    crate::common::feed(parser, role, lines)
}

fn parse(name: &str) -> Vec<Event> {
    feed(&mut CopilotParser::default(), FileRole::Main, fixture(name).lines())
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

fn prompts(events: &[Event]) -> Vec<Option<String>> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Prompt { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn turn_ends(events: &[Event]) -> Vec<Option<i64>> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::TurnEnd { at_ms } => Some(*at_ms),
            _ => None,
        })
        .collect()
}

fn windows(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Window(window) => Some(*window),
            _ => None,
        })
        .collect()
}

fn at(timestamp: &str) -> Option<i64> {
    parse_timestamp(timestamp)
}

/// What the mock served as its call `n` (Anthropic counters: input without the cache), as
/// Copilot records it.
fn served(n: u64) -> TokenRecord {
    TokenRecord {
        model: Some(MODEL.to_owned()),
        ..TokenRecord::from_anthropic(100 * n + 1, 10_000 * n + 3, 1000 * n + 2, 0, 10 * n + 4)
    }
}

/// A line of a fixture, by its 1-based number.
fn line_of(text: &str, number: usize) -> &str {
    text.lines().nth(number - 1).expect("the fixture has that line")
}

/// A line with one JSON field replaced (by pointer) or removed (`None`).
fn edited(line: &str, pointer: &str, value: Option<serde_json::Value>) -> String {
    let mut record: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    let (parent, field) = pointer.rsplit_once('/').expect("a pointer");
    let object = record.pointer_mut(parent).and_then(|v| v.as_object_mut()).expect("an object");
    match value {
        Some(value) => object.insert(field.to_owned(), value),
        None => object.remove(field),
    };
    record.to_string()
}

fn one_line(line: &str) -> Result<Vec<Event>, FormatError> {
    let mut parser = CopilotParser::default();
    let mut out = Vec::new();
    parser.line(FileRole::Main, line.as_bytes(), &mut out)?;
    Ok(out)
}

#[test]
fn tool_turn_and_load() {
    let events = parse("tool-turn-and-load.jsonl");
    // A plain turn; a tool turn (two rounds, one end); a plain turn; then, after session/load
    // in a new process (appended to the same file), one more.
    assert_eq!(
        kinds(&events),
        [
            "prompt", "window", "call", "end", //
            "prompt", "call", "call", "end", //
            "prompt", "call", "end", //
            "prompt", "call", "end",
        ]
    );
    assert_eq!(
        prompts(&events),
        [
            Some("Say hello.".to_owned()),
            Some("Please USE_TOOL to list files, then answer.".to_owned()),
            Some("Say bye.".to_owned()),
            Some("Third turn after load.".to_owned()),
        ]
    );
    assert_eq!(windows(&events), [168_000]);
    // The end of each turn is the turn_end of its last round, not of the tool round.
    assert_eq!(
        turn_ends(&events),
        [
            at("2026-11-23T17:58:59.113Z"),
            at("2026-11-23T17:59:00.690Z"),
            at("2026-11-23T17:59:02.218Z"),
            at("2026-11-23T17:59:07.176Z"),
        ]
    );

    let calls = calls(&events);
    let keys: Vec<&str> = calls.iter().map(|call| call.key.as_str()).collect();
    let want: Vec<String> = (1..=5).map(|n| format!("copilot:{SESSION}:{n}:msg_{n}")).collect();
    assert_eq!(keys, want);
    for (n, call) in (1..).zip(&calls) {
        assert_eq!(call.record, served(n), "call {n}");
        assert!(call.main, "call {n}");
    }
    // Turn 1 in full: 101 uncached + 10003 read + 1002 written, 14 out; cost 0.0 under BYOK is
    // no stated cost.
    let first = &calls[0].record;
    assert_eq!((first.input, first.cache_read, first.cache_write_5m), (11_106, 10_003, 1002));
    assert_eq!((first.uncached_input(), first.output, first.thought), (101, 14, 0));
    assert_eq!(first.stated_cost, None);
    assert_eq!(calls[0].at_ms, at("2026-11-23T17:58:59.111Z"));
    // The session's own total, as its last session.shutdown records it.
    let input: u64 = calls.iter().map(|call| call.record.input).sum();
    let output: u64 = calls.iter().map(|call| call.record.output).sum();
    assert_eq!((input, output), (166_530, 170));
}

#[test]
fn openai_provider_reasoning() {
    // COPILOT_PROVIDER_TYPE=openai (Chat Completions): inputTokens is prompt_tokens, cached
    // included; outputTokens is completion_tokens, reasoning included.
    let events = parse("openai.jsonl");
    assert_eq!(windows(&events), [64_000]);
    assert_eq!(turn_ends(&events).len(), 2);
    let calls = calls(&events);
    let records: Vec<TokenRecord> = calls.iter().map(|call| call.record.clone()).collect();
    let gpt = |n: u64| TokenRecord {
        model: Some("gpt-4.1".to_owned()),
        ..TokenRecord::from_openai(10_100 * n + 4, 10_000 * n + 3, 10 * n + 4, n)
    };
    assert_eq!(records, [gpt(1), gpt(2), gpt(3)]);
    assert_eq!(calls[0].key, "copilot:8f4a8f2a-ab02-44b8-881f-329138725991:1:chatcmpl-1");
}

#[test]
fn subagent_calls_are_not_the_main_agents() {
    // The main agent called `task` (an `explore` subagent, sync); the subagent's events are in
    // the same file under its agentId.
    let events = parse("subagent.jsonl");
    assert_eq!(
        kinds(&events),
        ["prompt", "window", "call", "side", "call", "end", "prompt", "call", "end"]
    );
    // The subagent's own user.message (its task prompt) is no prompt of the session.
    assert_eq!(
        prompts(&events),
        [Some("Please USE_TOOL task to explore, then answer.".to_owned()), Some("Say bye.".into())]
    );
    let calls = calls(&events);
    let main = "a75c66a2-d589-4bb4-91ce-d735f342c84b";
    let keys: Vec<&str> = calls.iter().map(|call| call.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            format!("copilot:{main}:1:msg_1"),
            // Accounted under the subagent's execution session, whose sequence starts at 1.
            "copilot:58defc85-6886-4423-99bd-9f56f5cae747:1:msg_2".to_owned(),
            format!("copilot:{main}:2:msg_3"),
            format!("copilot:{main}:3:msg_4"),
        ]
    );
    assert_eq!(calls[1].record, served(2));
    // The subagent's round ended without tools: not the end of the user's turn.
    assert_eq!(
        turn_ends(&events),
        [at("2026-11-23T18:19:51.450Z"), at("2026-11-23T18:19:52.984Z")]
    );
}

#[test]
fn subagent_marks_each_suffice() {
    // The main agent's first call, re-marked one way at a time.
    let text = fixture("tool-turn-and-load.jsonl");
    let start = line_of(&text, 1);
    let usage = line_of(&text, 6);
    let marks = [
        edited(usage, "/agentId", Some("bfcadb06-4c5b-4f04-b315-d6c7edf28cbe".into())),
        edited(usage, "/data/usage/parentToolCallId", Some("toolu_1".into())),
        edited(usage, "/data/usage/initiator", Some("sub-agent".into())),
        edited(usage, "/data/usage/initiator", Some("mcp-sampling".into())),
        edited(usage, "/data/usage/interactionType", Some("conversation-subagent".into())),
        edited(usage, "/data/usage/interactionType", Some("conversation-compaction".into())),
        edited(usage, "/data/usage/accounting/sourceSessionId", Some("another-session".into())),
    ];
    for line in &marks {
        let events = feed(&mut CopilotParser::default(), FileRole::Main, [start, line.as_str()]);
        let calls = calls(&events);
        assert_eq!(calls.len(), 1, "{line}");
        assert!(!calls[0].main, "{line}");
        assert!(windows(&events).is_empty(), "a subagent's limit is not the session's window");
    }
    // Without the session.start, the source session cannot be compared: the call is main.
    let events = feed(&mut CopilotParser::default(), FileRole::Main, [marks[6].as_str()]);
    assert!(calls(&events)[0].main);
}

#[test]
fn denied_tool_ends_with_abort() {
    // The user rejected the tool: the round's turn_end, then `abort`, and no further call.
    let events = parse("denied-tool.jsonl");
    assert_eq!(kinds(&events), ["prompt", "window", "call", "end", "prompt", "call", "end"]);
    assert_eq!(
        turn_ends(&events),
        [at("2026-11-23T18:20:33.517Z"), at("2026-11-23T18:20:35.055Z")]
    );
}

#[test]
fn failed_call_ends_the_turn() {
    // The call after the tool failed (HTTP 400): an empty round, then session.error; one end.
    let events = parse("failed-call.jsonl");
    assert_eq!(kinds(&events), ["prompt", "window", "call", "end", "prompt", "call", "end"]);
    assert_eq!(turn_ends(&events)[0], at("2026-11-23T18:21:15.560Z"));
}

#[test]
fn compaction_is_a_side_call_and_its_own_turn() {
    // "Say hello.", then `/compact` (no user.message, no rounds; the compaction's call has no
    // usage record), then "Say bye.".
    let events = parse("compact.jsonl");
    assert_eq!(
        kinds(&events),
        ["prompt", "window", "call", "end", "side", "end", "prompt", "call", "end"]
    );
    let calls = calls(&events);
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1].key, "copilot:compaction:00c4f2c6-8978-4ed6-9cc5-07756eed75a5");
    assert_eq!(calls[1].record, served(2));
    assert!(!calls[1].main);
    assert_eq!(turn_ends(&events)[1], calls[1].at_ms);
    assert_eq!(calls[2].key, "copilot:3c0e2f63-2b8a-41e6-8f3f-7bde39ab26b4:2:msg_3");
}

#[test]
fn a_line_fed_twice_changes_nothing() {
    let text = fixture("tool-turn-and-load.jsonl");
    let once = parse("tool-turn-and-load.jsonl");
    let twice = feed(
        &mut CopilotParser::default(),
        FileRole::Main,
        text.lines().flat_map(|line| [line, line]),
    );
    assert_eq!(calls(&twice), calls(&once));
    assert_eq!(kinds(&twice).iter().filter(|kind| **kind == "call").count(), 10);
    assert_eq!(prompts(&twice), prompts(&once));
    assert_eq!(turn_ends(&twice), turn_ends(&once));
    assert_eq!(windows(&twice), windows(&once));
}

#[test]
fn subagent_role_has_no_main_calls_nor_turns() {
    let events = feed(
        &mut CopilotParser::default(),
        FileRole::Subagent,
        fixture("tool-turn-and-load.jsonl").lines(),
    );
    assert_eq!(kinds(&events), ["side"; 5]);
}

#[test]
fn key_fallbacks() {
    let text = fixture("tool-turn-and-load.jsonl");
    let usage = line_of(&text, 6);
    let no_accounting = edited(usage, "/data/usage/accounting", None);
    let call = |line: &str| match one_line(line).expect("a valid line").as_slice() {
        [Event::Window(_), Event::Call(call)] => call.key.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(call(&no_accounting), "copilot:call:msg_1");
    let bare = edited(&no_accounting, "/data/usage/apiCallId", None);
    assert_eq!(call(&bare), "copilot:event:d53cc8da-8d41-4eac-95bc-91ea705ba324");
    // A provider that repeats its message ids: the accounting sequence still tells calls apart.
    let again = edited(usage, "/data/usage/accounting/sequence", Some(2.into()));
    assert_ne!(call(usage), call(&again));
}

#[test]
fn stated_cost_is_never_the_multiplier() {
    let text = fixture("tool-turn-and-load.jsonl");
    let usage = edited(line_of(&text, 6), "/data/usage/isByok", Some(false.into()));
    let usage = edited(&usage, "/data/usage/cost", Some(1.0.into()));
    let events = one_line(&usage).expect("a valid line");
    assert_eq!(calls(&events)[0].record.stated_cost, None);
}

#[test]
fn format_errors_and_skipped_records() {
    let text = fixture("tool-turn-and-load.jsonl");
    let usage = line_of(&text, 6);
    for bad in [
        "not json".to_owned(),
        "[1, 2]".to_owned(),
        r#"{"type": "session.usage_record""#.to_owned(),
        r#"{"data": {}, "id": "x", "timestamp": "2026-11-23T17:58:59.111Z"}"#.to_owned(),
        edited(usage, "/data/usage/inputTokens", None),
        edited(usage, "/data/usage/outputTokens", Some("14".into())),
        edited(usage, "/data", Some(serde_json::json!({}))),
        edited(line_of(&text, 12), "/data/toolRequests", Some("bash".into())),
    ] {
        assert!(one_line(&bad).is_err(), "{bad}");
    }
    // Types usage does not need, and ones this version does not know, are skipped.
    for skipped in [
        line_of(&text, 4).to_owned(),
        line_of(&text, 27).to_owned(),
        r#"{"type":"session.brand_new","data":{"inputTokens":"?"},"id":"x","parentId":null}"#
            .to_owned(),
        String::new(),
    ] {
        assert_eq!(one_line(&skipped), Ok(Vec::new()), "{skipped}");
    }
}
