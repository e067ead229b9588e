//! Claude Code's transcripts: a session's `<session>.jsonl` and its subagents' files, parsed.
//!
//! They live in `${CLAUDE_CONFIG_DIR:-~/.claude}/projects/<escaped cwd>/`: the session's own file
//! is `<session>.jsonl` (the ACP session id is its stem), each subagent's is
//! `<session>/subagents/agent-<agentId>.jsonl`.
//!
//! What the parser relies on (research/agents-usage.md §3.2, checked against Claude Code 2.1.185
//! under claude-agent-acp 0.49.0):
//!
//! - A model call is an `assistant` record; its `message.usage` holds Anthropic's counters
//!   (`input_tokens` without the cache; `cache_creation.ephemeral_{5m,1h}_input_tokens` splits the
//!   writes). Claude Code writes one line per content block of a message, all with the same
//!   `message.id`; with real streaming the earlier lines carry a partial `output_tokens`, so the
//!   call is keyed by `message.id` and keeps the largest counts seen.
//! - A subagent file may start by replaying parent messages under their `message.id` (with a new
//!   `requestId`): a main-file copy of a message owns it, a replay never adds a second call.
//! - `model: "<synthetic>"` marks a message Claude Code made up locally (API errors, "no
//!   response requested"): no call, but in the main file it can still end the turn.
//! - A `user` record is the user's prompt unless it carries tool results, is meta, a compaction
//!   summary, a sidechain, or an interruption marker.
//! - The SDK build writes no `system`/`turn_duration` record (only the interactive REPL does),
//!   so the end of a turn is the main agent's message with a final `stop_reason`; a
//!   `turn_duration` record is honoured when present. Claude Code buffers its writes: the last
//!   line of a turn lands up to about half a second after the ACP `session/prompt` result.
//! - `session/load` appends to the same file; `session/fork` starts a new file (stem = the
//!   fork's session id) with the parent's lines copied verbatim, so their keys are the parent's.
//!
//! Leniency: unknown record types and fields are skipped. What means the format changed is an
//! error: a line that is not a JSON object, or an `assistant` record of a real model without
//! `message.usage` or without its `input_tokens`/`output_tokens`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::{Block, Call, Event, FileRole, FormatError, Parser, json_record, parse_timestamp};
use crate::tokens::{Modifiers, TokenRecord};

/// Parses one Claude Code session's transcripts (the main file and its subagents' files).
#[derive(Debug, Default)]
pub struct ClaudeParser {
    /// Every call seen so far, by key: revisions merge into these.
    calls: HashMap<String, Seen>,
    /// A turn end was reported since the last prompt (split lines of the final message, or a
    /// `turn_duration` after it, must not end the turn twice).
    turn_ended: bool,
    /// The call whose final stop reason ended the turn.
    ended_by: Option<String>,
}

/// What is known of one call.
#[derive(Debug, Clone)]
struct Seen {
    /// A main-file, non-sidechain copy was seen: replays elsewhere are ignored.
    main: bool,
    counters: Counters,
    /// Fast mode, US-only inference: any line of the message stating one counts.
    modifiers: Modifiers,
    model: Option<String>,
    at_ms: Option<i64>,
}

/// Anthropic's counters of one message, cache writes already split by TTL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    input: u64,
    cache_read: u64,
    cache_write_5m: u64,
    cache_write_1h: u64,
    output: u64,
}

impl Counters {
    /// Field by field maximum: lines of one message only ever grow (`output_tokens` while it
    /// streams); keeping the maximum makes the order lines arrive in irrelevant.
    fn max(self, other: Counters) -> Counters {
        Counters {
            input: self.input.max(other.input),
            cache_read: self.cache_read.max(other.cache_read),
            cache_write_5m: self.cache_write_5m.max(other.cache_write_5m),
            cache_write_1h: self.cache_write_1h.max(other.cache_write_1h),
            output: self.output.max(other.output),
        }
    }
}

/// The fields of a record that usage needs; everything else is skipped unread.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    subtype: Option<Cow<'a, str>>,
    #[serde(rename = "isSidechain", default)]
    is_sidechain: Option<bool>,
    #[serde(rename = "isMeta", default)]
    is_meta: Option<bool>,
    #[serde(rename = "isCompactSummary", default)]
    is_compact_summary: Option<bool>,
    #[serde(rename = "isVisibleInTranscriptOnly", default)]
    transcript_only: Option<bool>,
    #[serde(rename = "toolUseResult", default)]
    tool_use_result: Option<IgnoredAny>,
    #[serde(borrow, default)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "requestId", borrow, default)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uuid: Option<Cow<'a, str>>,
    /// Parsed later, by record type: a user's message may be a long tool result nobody needs.
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct AssistantMessage<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
    /// `standard` or `fast` (fast mode, billed at a multiple of the standard price).
    #[serde(default)]
    speed: Option<String>,
    /// `us` for US-only inference (1.1x); empty or `global` otherwise.
    #[serde(default)]
    inference_geo: Option<String>,
}

#[derive(Deserialize)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_5m_input_tokens: Option<u64>,
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct UserMessage<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// Stop reasons after which the model does not continue by itself.
const FINAL_STOP_REASONS: &[&str] =
    &["end_turn", "stop_sequence", "max_tokens", "refusal", "model_context_window_exceeded"];

/// What Claude Code writes as a user message when the user interrupts a turn.
const INTERRUPTION_MARKER: &str = "[Request interrupted by user";

const SYNTHETIC_MODEL: &str = "<synthetic>";

impl Usage {
    fn counters(&self) -> Result<Counters, FormatError> {
        let (Some(input), Some(output)) = (self.input_tokens, self.output_tokens) else {
            return Err(FormatError(
                "claude: assistant usage without input_tokens/output_tokens".to_owned(),
            ));
        };
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        let (split_5m, split_1h) = self.cache_creation.as_ref().map_or((0, 0), |split| {
            (
                split.ephemeral_5m_input_tokens.unwrap_or(0),
                split.ephemeral_1h_input_tokens.unwrap_or(0),
            )
        });
        // Without a split (or an all-zero one, as Claude Code records a response that sent
        // none) every write counts as 5-minute, the cheaper assumption ccusage also makes. The
        // total is authoritative when both are present: the 1-hour part comes from the split.
        let (cache_write_5m, cache_write_1h) = if split_5m + split_1h == 0 {
            (written, 0)
        } else if written == 0 {
            (split_5m, split_1h)
        } else {
            let one_hour = split_1h.min(written);
            (written - one_hour, one_hour)
        };
        Ok(Counters {
            input,
            cache_read: self.cache_read_input_tokens.unwrap_or(0),
            cache_write_5m,
            cache_write_1h,
            output,
        })
    }
}

impl ClaudeParser {
    /// A parser with no history.
    pub fn new() -> ClaudeParser {
        ClaudeParser::default()
    }

    fn assistant(
        &mut self,
        record: &Record<'_>,
        is_main: bool,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(raw) = record.message else {
            return Err(FormatError("claude: assistant record without message".to_owned()));
        };
        let message: AssistantMessage<'_> = serde_json::from_str(raw.get())
            .map_err(|err| FormatError(format!("claude: assistant message: {err}")))?;
        let is_final = message
            .stop_reason
            .as_deref()
            .is_some_and(|reason| FINAL_STOP_REASONS.contains(&reason));
        if message.model.as_deref() == Some(SYNTHETIC_MODEL) {
            // No API call, but an API error or a refusal still ends the main agent's turn.
            if is_main && is_final {
                self.end_turn(None, at_ms, out);
            }
            return Ok(());
        }
        let Some(usage) = &message.usage else {
            return Err(FormatError("claude: assistant record without message.usage".to_owned()));
        };
        let counters = usage.counters()?;
        let modifiers =
            Modifiers::from_anthropic(usage.speed.as_deref(), usage.inference_geo.as_deref());
        // Fallbacks for gateways that send no message id: the request id still groups a
        // message's lines; a line's own uuid at least never merges two calls.
        let Some(key) = message
            .id
            .as_deref()
            .or(record.request_id.as_deref())
            .or(record.uuid.as_deref())
            .map(str::to_owned)
        else {
            return Err(FormatError("claude: assistant record without any id".to_owned()));
        };
        let model = message.model.as_deref().map(str::to_owned);
        let seen = match self.calls.get_mut(&key) {
            // A sidechain replay of a message the main file owns: counted there already.
            Some(seen) if seen.main && !is_main => return Ok(()),
            Some(seen) => {
                seen.main |= is_main;
                seen.counters = seen.counters.max(counters);
                seen.modifiers = seen.modifiers.union(modifiers);
                seen.model = model.or(seen.model.take());
                seen.at_ms = match (seen.at_ms, at_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                seen.clone()
            }
            None => {
                let seen = Seen { main: is_main, counters, modifiers, model, at_ms };
                self.calls.insert(key.clone(), seen.clone());
                seen
            }
        };
        let c = seen.counters;
        let mut token_record = TokenRecord::from_anthropic(
            c.input,
            c.cache_read,
            c.cache_write_5m,
            c.cache_write_1h,
            c.output,
        );
        token_record.model = seen.model;
        token_record.modifiers = seen.modifiers;
        out.push(Event::Call(Call {
            key: key.clone(),
            record: token_record,
            at_ms: seen.at_ms,
            main: seen.main,
        }));
        if is_main {
            if is_final {
                self.end_turn(Some(key), at_ms, out);
            } else if self.ended_by.as_deref() != Some(key.as_str()) {
                // The main agent went on (a tool call, a continuation): a later final message
                // ends the turn again.
                self.turn_ended = false;
                self.ended_by = None;
            }
        }
        Ok(())
    }

    fn end_turn(&mut self, key: Option<String>, at_ms: Option<i64>, out: &mut Vec<Event>) {
        if self.turn_ended {
            return;
        }
        self.turn_ended = true;
        self.ended_by = key;
        out.push(Event::TurnEnd { at_ms });
    }

    fn user(
        &mut self,
        record: &Record<'_>,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        if record.is_meta == Some(true)
            || record.is_compact_summary == Some(true)
            || record.transcript_only == Some(true)
            || record.tool_use_result.is_some()
        {
            return Ok(());
        }
        let Some(raw) = record.message else { return Ok(()) };
        let message: UserMessage<'_> = serde_json::from_str(raw.get())
            .map_err(|err| FormatError(format!("claude: user message: {err}")))?;
        let Some(content) = message.content else { return Ok(()) };
        let Some(text) = prompt_text(content)? else { return Ok(()) };
        if text.as_deref().is_some_and(|text| text.starts_with(INTERRUPTION_MARKER)) {
            return Ok(());
        }
        self.turn_ended = false;
        self.ended_by = None;
        out.push(Event::Prompt { at_ms, text });
        Ok(())
    }
}

/// What a user message's content says: `None` when it is no prompt (tool results, nothing at
/// all), `Some(text)` when it is one, with `text` `None` when it has no text (an image only). A
/// string content is the text itself; text blocks are joined with newlines (claude-agent-acp
/// turns each ACP text or resource-link chunk into one block).
fn prompt_text(content: &RawValue) -> Result<Option<Option<String>>, FormatError> {
    let raw = content.get();
    let bad = |err: serde_json::Error| FormatError(format!("claude: user content: {err}"));
    if raw.starts_with('"') {
        let text: String = serde_json::from_str(raw).map_err(bad)?;
        return Ok(Some(Some(text)));
    }
    if !raw.starts_with('[') {
        return Ok(None);
    }
    let blocks: Vec<Block<'_>> = serde_json::from_str(raw).map_err(bad)?;
    if blocks.is_empty() {
        return Ok(None);
    }
    let mut texts = Vec::new();
    for block in &blocks {
        match block.kind.as_deref() {
            Some("tool_result") => return Ok(None),
            Some("text") => texts.extend(block.text.as_deref()),
            _ => {}
        }
    }
    Ok(Some((!texts.is_empty()).then(|| texts.join("\n"))))
}

impl Parser for ClaudeParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(record) = json_record::<Record<'_>>("claude", "a transcript record", line)? else {
            return Ok(());
        };
        // Older builds wrote sidechains into the main file, flagged; they are never the main
        // agent's.
        let is_main = role == FileRole::Main && record.is_sidechain != Some(true);
        let at_ms = record.timestamp.as_deref().and_then(parse_timestamp);
        match record.kind.as_deref() {
            Some("assistant") => self.assistant(&record, is_main, at_ms, out),
            Some("user") if is_main => self.user(&record, at_ms, out),
            Some("system") if is_main && record.subtype.as_deref() == Some("turn_duration") => {
                let key = self.ended_by.clone();
                self.end_turn(key, at_ms, out);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(usage: &str) -> Result<Counters, FormatError> {
        let usage: Usage = serde_json::from_str(usage).expect("a usage object");
        usage.counters()
    }

    #[test]
    fn cache_write_split() {
        let c = |input, cache_read, cache_write_5m, cache_write_1h, output| Counters {
            input,
            cache_read,
            cache_write_5m,
            cache_write_1h,
            output,
        };
        // No split object, or a split of zeros: all 5-minute writes.
        let bare = r#"{"input_tokens":1,"cache_creation_input_tokens":30,"cache_read_input_tokens":9,"output_tokens":2}"#;
        assert_eq!(counters(bare), Ok(c(1, 9, 30, 0, 2)));
        let zeros = r#"{"input_tokens":1,"cache_creation_input_tokens":30,"output_tokens":2,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0}}"#;
        assert_eq!(counters(zeros), Ok(c(1, 0, 30, 0, 2)));
        // The total wins when the split disagrees; the 1-hour part comes from the split.
        let off = r#"{"input_tokens":1,"cache_creation_input_tokens":30,"output_tokens":2,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":20}}"#;
        assert_eq!(counters(off), Ok(c(1, 0, 10, 20, 2)));
        // A split without the total.
        let split_only = r#"{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":null,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":20}}"#;
        assert_eq!(counters(split_only), Ok(c(1, 0, 5, 20, 2)));
        // The two counters every usage has.
        assert!(counters(r#"{"input_tokens":1}"#).is_err());
        assert!(counters(r#"{"output_tokens":1,"input_tokens":null}"#).is_err());
    }

    #[test]
    fn keys_without_a_message_id() {
        let line = |request: &str, uuid: &str, output: u64| {
            format!(
                r#"{{"type":"assistant","uuid":"{uuid}",{request}"message":{{"model":"m","stop_reason":null,"usage":{{"input_tokens":3,"output_tokens":{output}}}}}}}"#
            )
        };
        let mut parser = ClaudeParser::new();
        let mut out = Vec::new();
        for text in [
            line(r#""requestId":"req_1","#, "u1", 1),
            line(r#""requestId":"req_1","#, "u2", 5),
            line("", "u3", 7),
        ] {
            parser.line(FileRole::Main, text.as_bytes(), &mut out).expect("valid");
        }
        let keys: Vec<(&str, u64)> = out
            .iter()
            .filter_map(|event| match event {
                Event::Call(call) => Some((call.key.as_str(), call.record.output)),
                _ => None,
            })
            .collect();
        assert_eq!(keys, [("req_1", 1), ("req_1", 5), ("u3", 7)]);
    }

    #[test]
    fn prompts() {
        let user = |fields: &str| {
            format!(r#"{{"type":"user","timestamp":"1970-01-01T00:00:01Z",{fields}}}"#)
        };
        let cases = [
            (user(r#""message":{"role":"user","content":"typed"}"#), Some(Some("typed"))),
            (
                user(
                    r#""message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
                ),
                Some(Some("a\nb")),
            ),
            (user(r#""message":{"content":[{"type":"image","source":{}}]}"#), Some(None)),
            (
                user(
                    r#""message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}"#,
                ),
                None,
            ),
            (user(r#""isMeta":true,"message":{"content":"caveat"}"#), None),
            (user(r#""isCompactSummary":true,"message":{"content":"summary"}"#), None),
            (user(r#""toolUseResult":{"a":1},"message":{"content":"x"}"#), None),
            (
                user(
                    r#""message":{"content":[{"type":"text","text":"[Request interrupted by user]"}]}"#,
                ),
                None,
            ),
            (user(r#""isSidechain":true,"message":{"content":"sub"}"#), None),
            (user(r#""message":{"content":[]}"#), None),
        ];
        for (line, want) in cases {
            let mut out = Vec::new();
            ClaudeParser::new().line(FileRole::Main, line.as_bytes(), &mut out).expect("valid");
            let want: Vec<Event> = want
                .into_iter()
                .map(|text| Event::Prompt { at_ms: Some(1000), text: text.map(str::to_owned) })
                .collect();
            assert_eq!(out, want, "{line}");
        }
    }
}
