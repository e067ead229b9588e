//! The Gemini CLI chat-record parser against real chat files (gemini-cli 0.61.0 run against the
//! project's mock LLM, including a `generalist` subagent) and hand-written edge cases.

use crate::common::calls;

use acp_usage_core::tokens::TokenRecord;
use acp_usage_core::transcript::gemini::{GeminiParser, session_id_of_first_line};
use acp_usage_core::transcript::{Event, FileRole, Parser, parse_timestamp};

const MODEL: &str = "gemini-2.5-pro";

fn fixture(name: &str) -> String {
    crate::common::fixture("gemini", name)
}

fn feed<'a>(
    parser: &mut GeminiParser,
    role: FileRole,
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Event> {
    crate::common::feed(parser, role, lines)
}

fn parse(role: FileRole, text: &str) -> Vec<Event> {
    feed(&mut GeminiParser::default(), role, text.lines())
}

fn n_calls(events: &[Event]) -> usize {
    events.iter().filter(|event| matches!(event, Event::Call(_))).count()
}

/// What the mock served, as a transcript record (Gemini usageMetadata counters).
fn served(prompt: u64, cached: u64, candidates: u64, thoughts: u64) -> TokenRecord {
    TokenRecord {
        model: Some(MODEL.to_owned()),
        ..TokenRecord::from_gemini(prompt, cached, candidates, thoughts)
    }
}

fn prompts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Prompt { text, .. } => text.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn plain_turn_and_tool_turn() {
    let events = parse(FileRole::Main, &fixture("session-two-turns.jsonl"));
    assert_eq!(
        prompts(&events),
        ["Say hi.", "Look at the project files and tell me what is there."]
    );
    let calls = calls(&events);
    let records: Vec<&TokenRecord> = calls.iter().map(|call| &call.record).collect();
    assert_eq!(
        records,
        [&served(8000, 6000, 9, 24), &served(8300, 0, 14, 40), &served(8600, 8192, 31, 0)]
    );
    assert_eq!(n_calls(&events), 3);
    assert!(calls.iter().all(|call| call.main));
    assert_eq!(calls[0].key, "gemini:7ee55d93-9e6c-4937-90ad-bf7387816d59");
    assert_eq!(calls[0].at_ms, parse_timestamp("2026-11-22T04:18:00.103Z"));
    // No turn end: the file has none (see the module docs).
    assert!(!events.iter().any(|event| matches!(event, Event::TurnEnd { .. } | Event::Window(_))));
}

#[test]
fn load_appends_and_relists_history_without_counting_it_twice() {
    // After session/load the original file got a `$set` of the whole history (same ids, same
    // tokens) and the new turn.
    let events = parse(FileRole::Main, &fixture("session-after-load.jsonl"));
    let calls = calls(&events);
    assert_eq!(calls.len(), 4);
    assert_eq!(n_calls(&events), 4, "the relisted history emits nothing new");
    assert_eq!(calls[3].record, served(9000, 8192, 5, 11));
    assert_eq!(
        prompts(&events),
        ["Say hi.", "Look at the project files and tell me what is there.", "Again."]
    );
    // The file the new process opened before loading, and gemini-cli's bootstrap session, hold
    // no calls.
    assert!(parse(FileRole::Main, &fixture("session-after-load-stub.jsonl")).is_empty());
    assert!(parse(FileRole::Main, &fixture("bootstrap.jsonl")).is_empty());
}

#[test]
fn relisted_history_alone_still_counts() {
    // A reader that only sees the `$set` snapshot gets the calls under their original keys.
    let text = fixture("session-after-load.jsonl");
    let snapshot = text
        .lines()
        .find(|line| line.starts_with(r#"{"$set":{"messages""#) && line.contains("tokens"));
    let events = feed(&mut GeminiParser::default(), FileRole::Main, snapshot);
    let keys: Vec<String> = calls(&events).into_iter().map(|call| call.key).collect();
    let originals: Vec<String> = calls(&parse(FileRole::Main, &fixture("session-two-turns.jsonl")))
        .into_iter()
        .map(|call| call.key)
        .collect();
    assert_eq!(keys, originals);
    assert!(prompts(&events).is_empty());
}

#[test]
fn subagent_calls_are_not_main() {
    let mut parser = GeminiParser::default();
    let main = feed(
        &mut parser,
        FileRole::Main,
        fixture("subagent-parent.jsonl").lines().collect::<Vec<_>>(),
    );
    let child_text = fixture("subagent-child.jsonl");
    let child = feed(&mut parser, FileRole::Subagent, child_text.lines());
    let main_calls = calls(&main);
    assert_eq!(
        main_calls.iter().map(|call| &call.record).collect::<Vec<_>>(),
        [&served(8000, 6000, 9, 24), &served(9000, 8192, 5, 11)]
    );
    assert!(main_calls.iter().all(|call| call.main));
    let child_calls = calls(&child);
    assert_eq!(
        child_calls.iter().map(|call| &call.record).collect::<Vec<_>>(),
        [&served(3000, 0, 14, 40), &served(3100, 1024, 31, 0)]
    );
    assert!(child_calls.iter().all(|call| !call.main));
    assert_eq!(prompts(&main), ["Ask a subagent to say hi."]);
    assert!(prompts(&child).is_empty(), "the subagent's task is not a user prompt");
    assert_eq!(
        session_id_of_first_line(child_text.lines().next().unwrap().as_bytes()).as_deref(),
        Some("1df37f48-ba30-4b82-8bd2-2683a2c02046")
    );
}

#[test]
fn re_appended_message_last_wins() {
    let lines = [
        r#"{"id":"m1","timestamp":"2026-11-22T04:18:00.103Z","type":"gemini","content":"","thoughts":[],"model":"gemini-2.5-pro"}"#,
        r#"{"id":"m1","timestamp":"2026-11-22T04:18:00.103Z","type":"gemini","content":"Hi","tokens":{"input":100,"output":5,"cached":0,"thoughts":0,"tool":0,"total":105},"model":"gemini-2.5-pro"}"#,
        // Tool calls attached: the same tokens again, nothing new to say.
        r#"{"id":"m1","timestamp":"2026-11-22T04:18:00.103Z","type":"gemini","content":"Hi","toolCalls":[{"id":"t","name":"glob"}],"tokens":{"input":100,"output":5,"cached":0,"thoughts":0,"tool":0,"total":105},"model":"gemini-2.5-pro"}"#,
        r#"{"id":"m1","timestamp":"2026-11-22T04:18:00.103Z","type":"gemini","content":"Hi","tokens":{"input":120,"output":7,"cached":64,"thoughts":3,"tool":0,"total":130},"model":"gemini-2.5-pro"}"#,
    ];
    let events = feed(&mut GeminiParser::default(), FileRole::Main, lines);
    assert_eq!(n_calls(&events), 2);
    let calls = calls(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].record, served(120, 64, 7, 3));
}

#[test]
fn rewind_never_uncounts() {
    let lines = [
        r#"{"id":"u1","timestamp":"2026-11-22T04:18:00.000Z","type":"user","content":[{"text":"First try"}]}"#,
        r#"{"id":"g1","timestamp":"2026-11-22T04:18:01.000Z","type":"gemini","content":"A","tokens":{"input":100,"output":5},"model":"gemini-2.5-pro"}"#,
        r#"{"$rewindTo":"u1"}"#,
        r#"{"id":"u2","timestamp":"2026-11-22T04:18:02.000Z","type":"user","content":[{"text":"Second try"}]}"#,
        r#"{"id":"g2","timestamp":"2026-11-22T04:18:03.000Z","type":"gemini","content":"B","tokens":{"input":200,"output":6},"model":"gemini-2.5-pro"}"#,
    ];
    let events = feed(&mut GeminiParser::default(), FileRole::Main, lines);
    let totals: Vec<u64> = calls(&events).iter().map(|call| call.record.total()).collect();
    assert_eq!(totals, [105, 206]);
    assert_eq!(prompts(&events), ["First try", "Second try"]);
}

#[test]
fn tool_use_prompt_tokens_count_as_input() {
    let line = r#"{"id":"g","timestamp":"2026-11-22T04:18:00.000Z","type":"gemini","content":"","tokens":{"input":1000,"output":10,"cached":400,"thoughts":20,"tool":50,"total":1080},"model":"gemini-2.5-flash"}"#;
    let events = feed(&mut GeminiParser::default(), FileRole::Main, [line]);
    let record = &calls(&events)[0].record;
    assert_eq!(
        (record.input, record.cache_read, record.output, record.thought),
        (1050, 400, 30, 20)
    );
    assert_eq!(record.total(), 1080, "the file's own total");
}

#[test]
fn metadata_and_unknown_lines() {
    let first = fixture("session-two-turns.jsonl");
    let first = first.lines().next().unwrap();
    assert_eq!(
        session_id_of_first_line(first.as_bytes()).as_deref(),
        Some("55ebb2ff-5213-439b-aa0f-686df6e5a57b")
    );
    assert_eq!(session_id_of_first_line(br#"{"id":"x","type":"user","content":[]}"#), None);
    assert_eq!(session_id_of_first_line(b"{"), None);
    let lines = [
        r#"{"$set":{"lastUpdated":"2026-11-22T04:18:00.103Z","summary":"s"}}"#,
        r#"{"id":"i","timestamp":"2026-11-22T04:18:00.000Z","type":"info","content":"x"}"#,
        r#"{"id":"n","timestamp":"2026-11-22T04:18:00.000Z","type":"something_new"}"#,
    ];
    assert!(feed(&mut GeminiParser::default(), FileRole::Main, lines).is_empty());
}

#[test]
fn malformed_lines_are_format_errors() {
    let mut parser = GeminiParser::default();
    let mut out = Vec::new();
    assert!(parser.line(FileRole::Main, b"{\"id\":\"g\",\"type\":", &mut out).is_err());
    let no_counters = br#"{"id":"g","type":"gemini","content":"","tokens":{"cached":3}}"#;
    assert!(parser.line(FileRole::Main, no_counters, &mut out).is_err());
    assert!(out.is_empty());
}
