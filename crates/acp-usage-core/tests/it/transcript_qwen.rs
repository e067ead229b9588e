//! The qwen-code chat-record parser against records of qwen-code 0.24.4 run against the
//! project's mock LLM (long fields trimmed): the main loop, an `agent`-tool subagent, memory
//! extraction and compression.

use acp_usage_core::transcript::qwen::QwenParser;
use acp_usage_core::transcript::{Event, FileRole, Parser, parse_timestamp};

#[test]
fn reads_every_recorded_call_with_its_role() {
    let mut p = QwenParser::default();
    let out = crate::common::feed(
        &mut p,
        FileRole::Main,
        crate::common::fixture("qwen", "chat-0.24.4.jsonl").lines(),
    );
    // Each call is recorded once: no event revises another.
    let survivors = crate::common::calls(&out);
    assert_eq!(survivors.len(), out.len());
    let calls: Vec<(&str, u64, u64, u64, u64, bool)> = survivors
        .iter()
        .map(|c| {
            (
                c.key.as_str(),
                c.record.input,
                c.record.cache_read,
                c.record.output,
                c.record.thought,
                c.main,
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("chatcmpl-mock1", 5100, 4001, 41, 11, true),
            ("chatcmpl-mock3", 5300, 4003, 43, 13, false),
            ("chatcmpl-mock4", 3000, 0, 20, 0, false),
            ("chatcmpl-mock5", 11600, 11000, 300, 0, false),
        ]
    );
    assert!(p.side.contains("chatcmpl-mock3") && p.side.contains("chatcmpl-mock5"));
    assert!(!p.side.contains("chatcmpl-mock4"), "a subagent, not a side call");
    assert_eq!(p.cwd.as_deref(), Some("/tmp/qwen-work"));
    assert_eq!(p.title.as_deref(), Some("mock-title"));
    let Event::Call(first) = &out[0] else { unreachable!() };
    assert_eq!(first.at_ms, parse_timestamp("2026-11-23T17:46:55.585Z"));
    assert_eq!(first.record.model.as_deref(), Some("gpt-5.2"));
}

#[test]
fn a_line_that_is_not_json_is_a_format_error() {
    let mut out = Vec::new();
    assert!(QwenParser::default().line(FileRole::Main, b"{\"uuid\":", &mut out).is_err());
    assert!(QwenParser::default().line(FileRole::Main, b"  ", &mut out).is_ok());
}
