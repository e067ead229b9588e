//! qwen-code's chat records (`<qwen dir>/projects/<escaped cwd>/chats/<session>.jsonl`, 0.24),
//! read for `import` only: the relay takes qwen's per-call usage from its ACP reports.
//!
//! The file name is the ACP session id; every record carries `cwd`. A model call's usage is a
//! `system` record of subtype `ui_telemetry` whose `systemPayload.uiEvent` is a
//! `qwen-code.api_response`: `input_token_count` (cache reads included),
//! `cached_content_token_count`, `output_token_count` (thoughts included), `thoughts_token_count`, `model`, `response_id`
//! (the provider's id, the tap's key too). These cover the main loop, `agent`-tool subagents
//! (`subagent_name`), memory extraction and compression (`prompt_id` `compress-…`); the
//! `assistant` records' `usageMetadata` repeat the main loop's calls and are not read.
//! Prompt suggestions, the auto-mode classifier and titles are recorded nowhere per call.
//! The title is a `custom_title` record's `systemPayload.customTitle`.

use acp_usage_core::TokenRecord;
use acp_usage_core::transcript::{Call, Event, FileRole, FormatError, Parser, parse_timestamp};
use serde::Deserialize;

/// The subagent that extracts memories after a turn: a call the agent makes for itself.
const MEMORY_EXTRACTOR: &str = "managed-auto-memory-extractor";

/// Parser of one qwen-code chat file.
#[derive(Debug, Default)]
pub struct QwenParser {
    /// Keys of calls the agent made for itself (memory extraction, compression).
    pub side: std::collections::HashSet<String>,
    /// The session's working directory, from the first record that names it.
    pub cwd: Option<String>,
    /// The session's latest title.
    pub title: Option<String>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(rename = "systemPayload", default)]
    payload: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ApiResponse {
    #[serde(rename = "event.name")]
    name: String,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    input_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: u64,
    output_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    prompt_id: Option<String>,
    #[serde(default)]
    subagent_name: Option<String>,
}

impl Parser for QwenParser {
    fn line(
        &mut self,
        _role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let rec: Record = serde_json::from_slice(line)
            .map_err(|err| FormatError(format!("qwen chat line: {err}")))?;
        if self.cwd.is_none() {
            self.cwd = rec.cwd.filter(|c| !c.is_empty());
        }
        if rec.kind.as_deref() != Some("system") {
            return Ok(());
        }
        let payload = rec.payload.unwrap_or_default();
        match rec.subtype.as_deref() {
            Some("custom_title") => {
                if let Some(title) = payload["customTitle"].as_str().filter(|t| !t.is_empty()) {
                    self.title = Some(title.to_owned());
                }
            }
            Some("ui_telemetry") => {
                let event = &payload["uiEvent"];
                if event["event.name"] != "qwen-code.api_response" {
                    return Ok(());
                }
                let r = ApiResponse::deserialize(event)
                    .map_err(|err| FormatError(format!("qwen api_response: {err}")))?;
                debug_assert_eq!(r.name, "qwen-code.api_response");
                // An error response carries no counts: nothing was billed that it knows of.
                let (Some(input), Some(output)) = (r.input_token_count, r.output_token_count)
                else {
                    return Ok(());
                };
                let mut record = TokenRecord::from_openai(
                    input,
                    r.cached_content_token_count,
                    output,
                    r.thoughts_token_count,
                );
                if record.total() == 0 {
                    return Ok(());
                }
                record.model = r.model.filter(|m| !m.is_empty());
                let Some(key) = r.response_id.filter(|k| !k.is_empty()).or(rec.uuid) else {
                    return Err(FormatError("qwen api_response without an id".into()));
                };
                let compression =
                    r.prompt_id.as_deref().is_some_and(|p| p.starts_with("compress-"));
                let subagent = r.subagent_name.as_deref();
                if compression || subagent == Some(MEMORY_EXTRACTOR) {
                    self.side.insert(key.clone());
                }
                out.push(Event::Call(Call {
                    key,
                    record,
                    at_ms: rec.timestamp.as_deref().and_then(parse_timestamp),
                    main: subagent.is_none() && !compression,
                }));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Records of qwen-code 0.24.4 against the mock (notes/qwen.md), long fields trimmed.
#[cfg(test)]
pub(super) const CHAT: &str = r#"{"uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2026-11-23T17:46:54.729Z","type":"user","provenance":"real_user","cwd":"/tmp/qwen-work","version":"0.24.4","message":{"role":"user","parts":[{"text":"Read hello.txt."}]}}
{"uuid":"t1","sessionId":"s","timestamp":"2026-11-23T17:46:55.585Z","type":"system","cwd":"/tmp/qwen-work","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response","response_id":"chatcmpl-mock1","model":"gpt-5.2","status_code":200,"input_token_count":5100,"output_token_count":41,"cached_content_token_count":4001,"thoughts_token_count":11,"total_token_count":5141,"prompt_id":"s########1"}}}
{"uuid":"a1","sessionId":"s","timestamp":"2026-11-23T17:46:55.590Z","type":"assistant","cwd":"/tmp/qwen-work","model":"gpt-5.2","message":{"role":"model","parts":[]},"usageMetadata":{"promptTokenCount":5100,"candidatesTokenCount":41,"thoughtsTokenCount":11,"totalTokenCount":5141,"cachedContentTokenCount":4001}}
{"uuid":"t2","sessionId":"s","timestamp":"2026-11-23T17:46:55.660Z","type":"system","cwd":"/tmp/qwen-work","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.tool_call","prompt_id":"s########1"}}}
{"uuid":"t3","sessionId":"s","timestamp":"2026-11-23T17:46:56.088Z","type":"system","cwd":"/tmp/qwen-work","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response","response_id":"chatcmpl-mock3","model":"gpt-5.2","input_token_count":5300,"output_token_count":43,"cached_content_token_count":4003,"thoughts_token_count":13,"prompt_id":"s#managed-auto-memory-extractor-a456a0e5#0","subagent_name":"managed-auto-memory-extractor"}}}
{"uuid":"t4","sessionId":"s","timestamp":"2026-11-23T17:47:00.000Z","type":"system","cwd":"/tmp/qwen-work","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response","response_id":"chatcmpl-mock4","model":"gpt-5.2","input_token_count":3000,"output_token_count":20,"cached_content_token_count":0,"thoughts_token_count":0,"prompt_id":"s#general-purpose-1#0","subagent_name":"general-purpose"}}}
{"uuid":"t5","sessionId":"s","timestamp":"2026-11-23T17:47:01.000Z","type":"system","cwd":"/tmp/qwen-work","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response","response_id":"chatcmpl-mock5","model":"gpt-5.2","input_token_count":11600,"output_token_count":300,"cached_content_token_count":11000,"thoughts_token_count":0,"prompt_id":"compress-1795456319366"}}}
{"uuid":"c1","sessionId":"s","timestamp":"2026-11-23T17:51:54.953Z","type":"system","cwd":"/tmp/qwen-work","subtype":"custom_title","systemPayload":{"customTitle":"mock-title","titleSource":"auto"}}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_recorded_call_with_its_role() {
        let mut p = QwenParser::default();
        let mut out = Vec::new();
        for line in CHAT.lines() {
            p.line(FileRole::Main, line.as_bytes(), &mut out).unwrap();
        }
        let calls: Vec<(&str, u64, u64, u64, u64, bool)> = out
            .iter()
            .map(|e| match e {
                Event::Call(c) => (
                    c.key.as_str(),
                    c.record.input,
                    c.record.cache_read,
                    c.record.output,
                    c.record.thought,
                    c.main,
                ),
                other => panic!("{other:?}"),
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
}
