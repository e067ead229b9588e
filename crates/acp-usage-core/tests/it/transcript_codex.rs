//! The Codex rollout parser against real rollouts (codex-acp 0.16.0 / codex 0.137 run against
//! the project's mock LLM) and a forked-subagent rollout built from the documented shape.

use crate::common::calls;

use acp_usage_core::tokens::TokenRecord;
use acp_usage_core::transcript::codex::CodexParser;
use acp_usage_core::transcript::{Event, FileRole, Parser, parse_timestamp};

const MODEL: &str = "gpt-5.2-codex";
const WINDOW: u64 = 258_400;

fn fixture(name: &str) -> String {
    crate::common::fixture("codex", name)
}

fn parse_lines<'a>(
    parser: &mut CodexParser,
    role: FileRole,
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Event> {
    crate::common::feed(parser, role, lines)
}

fn parse(role: FileRole, text: &str) -> Vec<Event> {
    parse_lines(&mut CodexParser::default(), role, text.lines())
}

/// What the mock served, as a transcript record (OpenAI counters).
fn served(input: u64, cached: u64, output: u64, reasoning: u64, model: &str) -> TokenRecord {
    TokenRecord {
        model: Some(model.to_owned()),
        ..TokenRecord::from_openai(input, cached, output, reasoning)
    }
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

fn count(events: &[Event], pred: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|event| pred(event)).count()
}

#[test]
fn plain_turn_and_tool_turn() {
    let events = parse(FileRole::Main, &fixture("rollout-two-turns.jsonl"));
    // The order a reader sees: the window on task_started, then each turn's prompt, its calls
    // and its end.
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| match event {
            Event::Call(_) => "call",
            Event::Prompt { .. } => "prompt",
            Event::TurnEnd { .. } => "end",
            Event::Window(_) => "window",
            Event::Limits(_) => "limits",
        })
        .collect();
    assert_eq!(kinds, ["window", "prompt", "call", "end", "prompt", "call", "call", "end"]);
    assert_eq!(events[0], Event::Window(WINDOW));
    assert_eq!(
        prompts(&events),
        [
            Some("Say hi.".to_owned()),
            Some("Look at the project files and tell me what is there.".to_owned())
        ]
    );
    let calls = calls(&events);
    let records: Vec<&TokenRecord> = calls.iter().map(|call| &call.record).collect();
    assert_eq!(
        records,
        [
            &served(5000, 4096, 40, 16, MODEL),
            &served(6200, 4992, 85, 30, MODEL),
            &served(6400, 6144, 52, 12, MODEL),
        ]
    );
    assert!(calls.iter().all(|call| call.main));
    // at_ms is the record's own timestamp.
    assert_eq!(calls[0].at_ms, parse_timestamp("2026-11-22T04:16:38.255Z"));
    assert_eq!(calls[0].key, "codex:01a20178-6915-7481-ba74-d3bf82059e8f:0:5040");
    let total: u64 = calls.iter().map(|call| call.record.total()).sum();
    assert_eq!(total, 17_777, "the rollout's own running total");
}

#[test]
fn repeated_token_count_counts_once() {
    let text = fixture("rollout-two-turns.jsonl");
    let mut doubled = Vec::new();
    for line in text.lines() {
        doubled.push(line);
        if line.contains(r#""type":"token_count""#) {
            doubled.push(line);
        }
    }
    let events = parse_lines(&mut CodexParser::default(), FileRole::Main, doubled);
    assert_eq!(count(&events, |event| matches!(event, Event::Call(_))), 6);
    let calls = calls(&events);
    assert_eq!(calls.len(), 3);
    assert_eq!(calls.iter().map(|call| call.record.total()).sum::<u64>(), 17_777);
}

#[test]
fn load_and_resume_append_to_the_same_rollout() {
    // session/load and session/resume in new processes appended their turns to the same file,
    // and the running total carried on from the recorded one.
    let events = parse(FileRole::Main, &fixture("rollout-after-load-and-resume.jsonl"));
    let calls = calls(&events);
    let totals: Vec<u64> = calls.iter().map(|call| call.record.total()).collect();
    assert_eq!(totals, [5040, 6285, 6452, 7020, 7124]);
    assert_eq!(calls[3].record, served(7000, 6144, 20, 0, MODEL));
    assert_eq!(calls[4].record, served(7100, 6912, 24, 8, MODEL));
    assert_eq!(prompts(&events).len(), 4);
    assert_eq!(prompts(&events)[3].as_deref(), Some("Again."));
    assert_eq!(count(&events, |event| matches!(event, Event::TurnEnd { .. })), 4);
    // The window does not change, so it is sent once.
    assert_eq!(count(&events, |event| matches!(event, Event::Window(_))), 1);
}

#[test]
fn forked_subagent_skips_the_parents_history() {
    let mut parser = CodexParser::default();
    let main = parse_lines(
        &mut parser,
        FileRole::Main,
        fixture("rollout-two-turns.jsonl").lines().collect::<Vec<_>>(),
    );
    let sub_text = fixture("rollout-forked-subagent.jsonl");
    let sub = parse_lines(&mut parser, FileRole::Subagent, sub_text.lines());
    assert_eq!(calls(&main).len(), 3);
    // Only the child's own two calls (one written twice); the parent's four copied token_counts
    // and the rate-limits-only event are skipped.
    assert_eq!(count(&sub, |event| matches!(event, Event::Call(_))), 3);
    let calls = calls(&sub);
    let records: Vec<&TokenRecord> = calls.iter().map(|call| &call.record).collect();
    let mini = "gpt-5.2-codex-mini";
    assert_eq!(records, [&served(3000, 0, 25, 5, mini), &served(3300, 2048, 12, 0, mini)]);
    assert!(calls.iter().all(|call| !call.main));
    assert!(
        calls
            .iter()
            .all(|call| call.key.starts_with("codex:01a20178-7a10-7c3e-9d51-3f0e2b6a41d7:"))
    );
    // Prompts and turn ends are the main agent's only.
    assert_eq!(prompts(&sub).len(), 0);
    assert_eq!(count(&sub, |event| matches!(event, Event::TurnEnd { .. })), 0);
    assert_eq!(sub.iter().filter(|event| matches!(event, Event::Window(_))).count(), 1);
}

#[test]
fn forked_rollouts_fed_one_after_another() {
    // Two subagent rollouts through one parser, one after the other: the second file's
    // session_meta starts over.
    let text = fixture("rollout-forked-subagent.jsonl");
    let second = text
        .replace("01a20178-7a10-7c3e-9d51-3f0e2b6a41d7", "01a20178-7a11-7000-8000-000000000002");
    let mut parser = CodexParser::default();
    let mut events = parse_lines(&mut parser, FileRole::Subagent, text.lines());
    events.extend(parse_lines(&mut parser, FileRole::Subagent, second.lines()));
    assert_eq!(calls(&events).len(), 4);
}

/// 2026-11-22T04:16:38.255Z.
const OBSERVED_MS: i64 = 1_795_320_998_255;

#[test]
fn rate_limits_are_read_and_unknown_records_skipped() {
    let lines = [
        r#"{"timestamp":"2026-11-22T04:16:38.255Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":3.0}}}}"#,
        r#"{"timestamp":"2026-11-22T04:16:38.255Z","type":"compacted","payload":{"message":"..."}}"#,
        r#"{"timestamp":"2026-11-22T04:16:38.255Z","type":"event_msg","payload":{"type":"some_future_event"}}"#,
        r#"{"type":"brand_new_record"}"#,
    ];
    let events = parse_lines(&mut CodexParser::default(), FileRole::Main, lines);
    // The rate-limit-only `token_count` is no call, but its window is read.
    assert_eq!(events.len(), 1, "{events:?}");
    let Event::Limits(limits) = &events[0] else { panic!("{events:?}") };
    assert_eq!((limits[0].window.as_str(), limits[0].used_percent), ("primary", 3.0));
    // Observed when the rollout says it was written.
    assert_eq!(limits[0].observed_ms, OBSERVED_MS);
}

#[test]
fn malformed_lines_are_format_errors() {
    let mut out = Vec::new();
    let mut parser = CodexParser::default();
    assert!(parser.line(FileRole::Main, b"{\"timestamp\":\"2026-11-22T04:1", &mut out).is_err());
    assert!(parser.line(FileRole::Main, b"not json", &mut out).is_err());
    // A token_count whose usage lacks its counters.
    let broken = br#"{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"cached_input_tokens":1}}}}"#;
    assert!(parser.line(FileRole::Main, broken, &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn cache_writes_and_counter_resets() {
    let token_count = |total: u64, input: u64, cached: u64, written: u64, output: u64| {
        format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":0,"output_tokens":0,"total_tokens":{total}}},"last_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"cache_write_input_tokens":{written},"output_tokens":{output},"reasoning_output_tokens":0,"total_tokens":{}}}}}}}}}"#,
            input + output
        )
    };
    let lines = [
        r#"{"type":"session_meta","payload":{"id":"t1"}}"#.to_owned(),
        r#"{"type":"turn_context","payload":{"model":"gpt-5.5"}}"#.to_owned(),
        token_count(1100, 1000, 200, 300, 100),
        // The running total went backwards (counters reset): a new call, not a repeat of one.
        token_count(550, 500, 0, 0, 50),
        token_count(1100, 1000, 200, 300, 100),
    ];
    let events =
        parse_lines(&mut CodexParser::default(), FileRole::Main, lines.iter().map(String::as_str));
    let calls = calls(&events);
    assert_eq!(calls.len(), 3);
    let first = &calls[0].record;
    assert_eq!(
        (first.input, first.cache_read, first.cache_write_5m, first.uncached_input()),
        (1000, 200, 300, 500)
    );
    assert_eq!(first.model.as_deref(), Some("gpt-5.5"));
}
