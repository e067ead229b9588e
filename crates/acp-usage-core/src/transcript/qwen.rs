//! qwen-code's chat records (`<qwen dir>/projects/<escaped cwd>/chats/<session>.jsonl`, 0.24),
//! read by `import` only: the relay takes qwen's per-call usage from its ACP reports.
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

use serde::Deserialize;

use super::{Call, Event, FileRole, FormatError, Parser, parse_timestamp};
use crate::tokens::TokenRecord;

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

    fn session_facts(&self) -> (Option<String>, Option<String>) {
        (self.cwd.clone(), self.title.clone())
    }

    fn is_side_call(&self, key: &str) -> bool {
        self.side.contains(key)
    }
}
