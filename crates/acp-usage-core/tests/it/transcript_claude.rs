//! The Claude Code transcript parser against real transcripts (claude-agent-acp 0.49.0, Claude
//! Code 2.1.185, run against the project's mock LLM) and a few lines edited from them into the
//! shapes the mock cannot provoke (partial streamed counts, a sidechain replay, torn lines); see
//! `fixtures/transcripts/claude/README.md`.

use crate::common::calls;

use acp_usage_core::tokens::TokenRecord;
use acp_usage_core::transcript::claude::ClaudeParser;
use acp_usage_core::transcript::{Call, Event, FileRole, Parser, parse_timestamp};

const MODEL: &str = "claude-opus-4-8";
const SESSION: &str = "session/bc7341c5-8dda-4e7a-b1a8-d2ade5970368.jsonl";
const SUBAGENT: &str =
    "session/bc7341c5-8dda-4e7a-b1a8-d2ade5970368/subagents/agent-a455660011ddec475.jsonl";

fn fixture(name: &str) -> String {
    crate::common::fixture("claude", name)
}

fn feed(parser: &mut ClaudeParser, role: FileRole, text: &str) -> Vec<Event> {
    crate::common::feed(parser, role, text.lines())
}

/// What the mock served, as a transcript record (Anthropic counters, 5m/1h writes apart).
fn served(input: u64, read: u64, write_5m: u64, write_1h: u64, output: u64) -> TokenRecord {
    TokenRecord {
        model: Some(MODEL.to_owned()),
        ..TokenRecord::from_anthropic(input, read, write_5m, write_1h, output)
    }
}

fn ms(timestamp: &str) -> Option<i64> {
    Some(parse_timestamp(timestamp).expect("a timestamp"))
}

/// One line per event, for comparing whole sequences.
fn summary(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            Event::Call(call) => format!(
                "call {} main={} in={} out={}",
                call.key.trim_start_matches("msg_mock_177e9c6ca_"),
                call.main,
                call.record.input,
                call.record.output
            ),
            Event::Prompt { text, .. } => format!("prompt {text:?}"),
            Event::TurnEnd { .. } => "end".to_owned(),
            Event::Window(window) => format!("window {window}"),
            Event::Limits(l) => format!("limits {}", l.len()),
        })
        .collect()
}

#[test]
fn whole_session_with_a_subagent() {
    let mut parser = ClaudeParser::default();
    let main = feed(&mut parser, FileRole::Main, &fixture(SESSION));
    assert_eq!(
        summary(&main),
        [
            "prompt Some(\"Say hi.\")",
            "call 0001 main=true in=12520 out=42",
            "end",
            "prompt Some(\"Look at the project files and tell me what is there.\")",
            // Text and tool_use blocks of one message: two lines, one call.
            "call 0002 main=true in=12215 out=61",
            "call 0002 main=true in=12215 out=61",
            "call 0003 main=true in=12559 out=23",
            "end",
            "prompt Some(\"Use a subagent to say hi.\")",
            "call 0004 main=true in=13511 out=50",
            "call 0004 main=true in=13511 out=50",
            "call 0006 main=true in=13313 out=17",
            "end",
        ]
    );
    let sub = feed(&mut parser, FileRole::Subagent, &fixture(SUBAGENT));
    // The subagent's own prompt ("Say hi") and final message neither start nor end a turn.
    assert_eq!(summary(&sub), ["call 0005 main=false in=2007 out=9"]);

    let all: Vec<Event> = main.iter().chain(&sub).cloned().collect();
    let calls = calls(&all);
    let records: Vec<(&str, bool, &TokenRecord, Option<i64>)> =
        calls.iter().map(|call| (call.key.as_str(), call.main, &call.record, call.at_ms)).collect();
    let (r1, r2, r3) = (
        served(20, 11000, 1000, 500, 42),
        served(15, 12000, 200, 0, 61),
        served(9, 12200, 350, 0, 23),
    );
    let (r4, r5, r6) =
        (served(11, 12500, 300, 700, 50), served(7, 0, 2000, 0, 9), served(13, 12900, 400, 0, 17));
    assert_eq!(
        records,
        [
            ("msg_mock_177e9c6ca_0001", true, &r1, ms("2026-11-22T04:32:08.269Z")),
            ("msg_mock_177e9c6ca_0002", true, &r2, ms("2026-11-22T04:32:08.316Z")),
            ("msg_mock_177e9c6ca_0003", true, &r3, ms("2026-11-22T04:32:08.354Z")),
            ("msg_mock_177e9c6ca_0004", true, &r4, ms("2026-11-22T04:32:08.377Z")),
            ("msg_mock_177e9c6ca_0006", true, &r6, ms("2026-11-22T04:32:08.413Z")),
            ("msg_mock_177e9c6ca_0005", false, &r5, ms("2026-11-22T04:32:08.400Z")),
        ]
    );
    // What claude-agent-acp reported as the third turn's usage (main loop only) and the mock's
    // total over all six calls.
    let turn3: u64 = [&r4, &r6].iter().map(|r| r.total()).sum();
    assert_eq!(turn3, 26_891);
    let session: u64 = calls.iter().map(|call| call.record.total()).sum();
    assert_eq!(session, 12_562 + 24_858 + 26_891 + 2_016);

    let ends: Vec<Option<i64>> = main
        .iter()
        .filter_map(|event| match event {
            Event::TurnEnd { at_ms } => Some(*at_ms),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [
            ms("2026-11-22T04:32:08.269Z"),
            ms("2026-11-22T04:32:08.354Z"),
            ms("2026-11-22T04:32:08.413Z")
        ]
    );
}

#[test]
fn cache_writes_split_by_ttl() {
    let calls = calls(&feed(&mut ClaudeParser::default(), FileRole::Main, &fixture(SESSION)));
    let split: Vec<(u64, u64)> =
        calls.iter().map(|call| (call.record.cache_write_5m, call.record.cache_write_1h)).collect();
    // 0001 and 0004 were served with the split; the others without it, which Claude Code
    // records as a split of zeros: all 5-minute writes.
    assert_eq!(split, [(1000, 500), (200, 0), (350, 0), (300, 700), (400, 0)]);
}

#[test]
fn split_lines_keep_the_largest_output() {
    let mut parser = ClaudeParser::default();
    let text = fixture("split-growing.jsonl");
    let events = feed(&mut parser, FileRole::Main, &text);
    assert_eq!(
        summary(&events),
        [
            "prompt Some(\"Look at the project files and tell me what is there.\")",
            // The first block's line, written before message_delta: output 1, no stop reason.
            "call 0002 main=true in=12215 out=1",
            "call 0002 main=true in=12215 out=61",
            "call 0003 main=true in=12559 out=23",
            "end",
        ]
    );
    // The partial line again (a re-read file) cannot lower the count.
    let first = text.lines().nth(1).expect("the partial line");
    let mut out = Vec::new();
    parser.line(FileRole::Main, first.as_bytes(), &mut out).expect("valid");
    assert_eq!(summary(&out), ["call 0002 main=true in=12215 out=61"]);
}

#[test]
fn sidechain_replay_after_the_main_copy_is_ignored() {
    let mut parser = ClaudeParser::default();
    feed(&mut parser, FileRole::Main, &fixture(SESSION));
    let replay = feed(&mut parser, FileRole::Subagent, &fixture("replay-subagent.jsonl"));
    assert_eq!(summary(&replay), ["call 0005 main=false in=2007 out=9"]);
}

#[test]
fn sidechain_replay_before_the_main_copy_is_taken_over() {
    let mut parser = ClaudeParser::default();
    let replay = feed(&mut parser, FileRole::Subagent, &fixture("replay-subagent.jsonl"));
    assert_eq!(
        summary(&replay),
        [
            "call 0002 main=false in=12215 out=61",
            "call 0002 main=false in=12215 out=61",
            "call 0005 main=false in=2007 out=9",
        ]
    );
    let main = feed(&mut parser, FileRole::Main, &fixture(SESSION));
    let all: Vec<Event> = replay.into_iter().chain(main).collect();
    let calls = calls(&all);
    let keys: Vec<(&str, bool)> = calls
        .iter()
        .map(|call| (call.key.trim_start_matches("msg_mock_177e9c6ca_"), call.main))
        .collect();
    assert_eq!(
        keys,
        [
            ("0002", true),
            ("0005", false),
            ("0001", true),
            ("0003", true),
            ("0004", true),
            ("0006", true)
        ]
    );
    let once: u64 = calls.iter().map(|call| call.record.output).sum();
    assert_eq!(once, 42 + 61 + 23 + 50 + 9 + 17);
}

#[test]
fn inline_sidechains_are_not_the_main_agent() {
    // Older builds wrote sidechains into the main file, flagged `isSidechain`.
    let events = feed(&mut ClaudeParser::default(), FileRole::Main, &fixture(SUBAGENT));
    assert_eq!(summary(&events), ["call 0005 main=false in=2007 out=9"]);
}

#[test]
fn synthetic_messages_are_no_calls_but_end_the_turn() {
    // ANTHROPIC_BASE_URL on a dead port and CLAUDE_CODE_MAX_RETRIES=0: the prompt fails with
    // "API Error: Unable to connect to API (ConnectionRefused)" and Claude Code writes a
    // `<synthetic>` message with zero usage.
    let events = feed(&mut ClaudeParser::default(), FileRole::Main, &fixture("api-error.jsonl"));
    assert_eq!(
        events,
        [
            Event::Prompt {
                at_ms: ms("2026-11-22T04:32:15.121Z"),
                text: Some("Say hi.".to_owned())
            },
            Event::TurnEnd { at_ms: ms("2026-11-22T04:32:15.161Z") },
        ]
    );
}

#[test]
fn malformed_lines_are_errors_and_do_not_stop_the_parser() {
    let mut parser = ClaudeParser::default();
    let mut results = Vec::new();
    let mut out = Vec::new();
    for line in fixture("malformed.jsonl").lines() {
        results.push(parser.line(FileRole::Main, line.as_bytes(), &mut out).is_ok());
    }
    // A prompt, a torn line, not JSON, an assistant record without usage, a JSON array, and the
    // complete assistant line.
    assert_eq!(results, [true, false, false, false, false, true]);
    assert_eq!(
        summary(&out),
        ["prompt Some(\"Say hi.\")", "call 0001 main=true in=12520 out=42", "end"]
    );
    // Blank lines are nothing.
    assert!(parser.line(FileRole::Main, b"  ", &mut out).is_ok());
}

#[test]
fn unknown_records_are_skipped() {
    let mut out = Vec::new();
    let mut parser = ClaudeParser::default();
    for line in [
        r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-22T04:32:08.223Z","sessionId":"x"}"#,
        r#"{"type":"last-prompt","lastPrompt":"Say hi.","sessionId":"x"}"#,
        r#"{"type":"mode","mode":"normal","sessionId":"x"}"#,
        r#"{"type":"some-future-record","message":{"usage":{}}}"#,
        r#"{"no":"type"}"#,
    ] {
        parser.line(FileRole::Main, line.as_bytes(), &mut out).expect("skipped silently");
    }
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn turn_duration_ends_a_turn_once() {
    // The interactive REPL writes this after a turn (the shape is Claude Code 2.1.185's
    // `turn_duration` system message; the SDK build behind claude-agent-acp writes none).
    let duration = r#"{"type":"system","subtype":"turn_duration","durationMs":1234,"messageCount":4,"timestamp":"2026-11-22T04:32:09.000Z","uuid":"u","isMeta":false}"#;
    let mut parser = ClaudeParser::default();
    let mut out = feed(&mut parser, FileRole::Main, &fixture(SESSION));
    let ends = out.len();
    parser.line(FileRole::Main, duration.as_bytes(), &mut out).expect("valid");
    assert_eq!(out.len(), ends, "the final message already ended the turn");

    // A turn whose last line never got its stop reason (the partial line alone).
    let mut parser = ClaudeParser::default();
    let text = fixture("split-growing.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for line in [lines[0], lines[1], duration] {
        parser.line(FileRole::Main, line.as_bytes(), &mut out).expect("valid");
    }
    assert_eq!(out.last(), Some(&Event::TurnEnd { at_ms: ms("2026-11-22T04:32:09.000Z") }));
    // A subagent's file never ends the main turn.
    let mut sub = Vec::new();
    parser.line(FileRole::Subagent, duration.as_bytes(), &mut sub).expect("valid");
    assert!(sub.is_empty());
}

#[test]
fn a_fork_copies_the_parent_lines_under_the_same_keys() {
    // session/fork: the new session's file (stem = the new ACP session id) starts with the
    // parent's conversation copied verbatim, only `sessionId` rewritten.
    let parent = calls(&feed(
        &mut ClaudeParser::default(),
        FileRole::Main,
        &fixture("fork/c7ef9273-eb2f-463b-885e-8d1a6a0adc57.jsonl"),
    ));
    let fork_events = feed(
        &mut ClaudeParser::default(),
        FileRole::Main,
        &fixture("fork/3f16f941-88b6-4b82-984e-1be6b0afcde4.jsonl"),
    );
    let fork = calls(&fork_events);
    let keys = |calls: &[Call]| -> Vec<String> {
        calls
            .iter()
            .map(|call| call.key.trim_start_matches("msg_mock_f8039724_").to_owned())
            .collect()
    };
    assert_eq!(keys(&parent), ["0001", "0002"]);
    assert_eq!(keys(&fork), ["0001", "0002", "0003", "0004"]);
    assert_eq!(parent[..], fork[..2]);
    let prompts: Vec<String> = fork_events
        .iter()
        .filter_map(|event| match event {
            Event::Prompt { text, .. } => text.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(prompts, ["Say hi.", "After load.", "In the fork.", "In the fork again."]);
}

#[test]
fn fast_mode_and_us_only_calls_are_read_and_priced_with_their_multipliers() {
    use acp_usage_core::account::price_call;
    use acp_usage_core::tokens::Modifiers;
    use acp_usage_core::{Catalog, pricing};

    let calls =
        calls(&feed(&mut ClaudeParser::default(), FileRole::Main, &fixture("fast-mode.jsonl")));
    let last: Vec<_> = ["msg_mock_177e9c6ca_0002", "msg_mock_177e9c6ca_0003"]
        .iter()
        .map(|key| calls.iter().rev().find(|c| c.key == *key).expect("the call"))
        .collect();
    // Only the message's final line says `fast`: the call keeps it.
    assert_eq!(last[0].record.modifiers, Modifiers { fast: true, us_only: false, priority: false });
    assert_eq!(last[1].record.modifiers, Modifiers { fast: true, us_only: true, priority: false });
    // The call stays under its own model.
    assert_eq!(last[0].record.model.as_deref(), Some("claude-opus-4-6"));
    let catalog = Catalog::embedded();
    let standard = |rec: &TokenRecord| {
        let info = catalog.lookup(rec.model.as_deref().unwrap()).unwrap();
        pricing::cost(rec, info.prices.as_ref().unwrap())
    };
    // Opus 4.6 fast: 6x. 15 in, 12,000 read, 200 written, 61 out at $5/$0.50/$6.25/$25 per M.
    let base = standard(&last[0].record);
    assert!((base - 0.00885).abs() < 1e-12, "{base}");
    let priced = price_call(&last[0].record, None, 1, catalog);
    assert!((priced.cost.unwrap() - 6.0 * base).abs() < 1e-12, "{priced:?}");
    assert!(!priced.modifiers_unpriced);
    // Opus 4.8 fast and US-only: 2x and 1.1x.
    let priced = price_call(&last[1].record, None, 1, catalog);
    let want = 2.2 * standard(&last[1].record);
    assert!((priced.cost.unwrap() - want).abs() < 1e-12, "{priced:?}");
    assert!(!priced.modifiers_unpriced);
}
