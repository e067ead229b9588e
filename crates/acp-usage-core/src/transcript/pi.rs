//! pi's session files (`~/.pi/agent/sessions/--<cwd>--/<timestamp>_<id>.jsonl`), parsed.
//!
//! pi (npm `@earendil-works/pi-coding-agent`, driven over ACP by `pi-acp`) appends one JSON
//! object per line when an entry completes; the file is named after the ACP session id (pi's own
//! session id) and appears at the session's first prompt. A `session/load` in a new process
//! appends to the same file. What this parser relies on (checked against pi 1.5.2 with pi-acp
//! 0.0.34 run offline against a mock LLM, and pi's session-format docs):
//!
//! - Every line is an entry `{"type", "id", "parentId", "timestamp", ...}`: the first is the
//!   `session` header (`id`, `cwd`), then `model_change`, `thinking_level_change`, `message`
//!   (`message.role`: `system`, `user`, `assistant`, `toolResult`, ...), `usage`, `compaction`,
//!   `branch_summary`, `session_info` and others. Entries form a tree (branches live in the same
//!   file), but each line is a billed call at most once: calls are summed over every line.
//! - Each model call of the agent loop is one `assistant` message with the call's `usage`:
//!   `input` is the prompt's uncached tokens (Anthropic style; pi subtracts cached tokens for
//!   OpenAI-style APIs), `cacheRead` and `cacheWrite` (every cache write, of which
//!   `cacheWrite1h` had a one-hour TTL) are separate, `output` includes `reasoning` (when the
//!   provider reports it). `responseId` is the provider's message id (what an API tap reads
//!   too): the call's key, else the entry's `id`.
//! - `usage.cost.total` is what pi priced the call at from its model catalog or the user's
//!   `models.json` (`totalFromProvider: true` when the provider stated it): the call's stated
//!   cost. A zero from pi's own pricing for a call with tokens means pi has no price for the
//!   model, not that the call was free: it is left to the catalog.
//! - Calls pi makes for itself are recorded beside the conversation: a `usage` entry per
//!   cache-warming request (`kind: "cache_warm"`: the last request re-sent with `max_tokens: 1`
//!   to keep the provider's prompt cache alive, between or during turns), and a `usage` on
//!   `compaction` and `branch_summary` entries (the summarising call). They are side calls,
//!   keyed by the entry's `id`.
//! - A user turn starts with a `user` message and ends with the assistant message whose
//!   `stopReason` is not `toolUse` (`stop`, `length`, `error`, `aborted`); a `toolUse` message is
//!   followed by `toolResult` messages and the next call.
//!
//! Leniency: unknown entry types, roles and fields are skipped. What means the format changed
//! is an error: a line that is not a JSON object with a string `type`, a `message` entry without
//! a `message` object, or an assistant message or `usage` entry whose `usage` lacks `input` or
//! `output`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Block, Call, Event, FileRole, FormatError, Parser, json_record, parse_timestamp};
use crate::tokens::TokenRecord;

/// Parses one pi session file.
#[derive(Debug, Default)]
pub struct PiParser {
    /// The last turn end reported had no main call after it (a re-fed answer does not end the
    /// turn twice).
    turn_ended: bool,
    /// Entries already reported as prompts or turn ends, by id (a re-fed line says nothing new).
    seen: std::collections::HashSet<String>,
}

/// An entry; `message` and `usage` are read by type.
#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    /// `usage` entries and the summarising call of `compaction`/`branch_summary`.
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
}

/// pi's per-call `usage`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    input: Option<u64>,
    #[serde(default)]
    output: Option<u64>,
    #[serde(default)]
    cache_read: Option<u64>,
    #[serde(default)]
    cache_write: Option<u64>,
    #[serde(default)]
    cache_write1h: Option<u64>,
    #[serde(default)]
    reasoning: Option<u64>,
    #[serde(default)]
    cost: Option<Cost>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cost {
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    total_from_provider: Option<bool>,
}

/// `usage` as a record; `model` names the call's model.
fn record(raw: &RawValue, model: Option<&str>) -> Result<TokenRecord, FormatError> {
    let usage: Usage = serde_json::from_str(raw.get())
        .map_err(|err| FormatError(format!("pi: a usage that is not pi's: {err}")))?;
    let (Some(input), Some(output)) = (usage.input, usage.output) else {
        return Err(FormatError("pi: usage without input/output".to_owned()));
    };
    let read = usage.cache_read.unwrap_or(0);
    let write = usage.cache_write.unwrap_or(0);
    let write_1h = usage.cache_write1h.unwrap_or(0).min(write);
    let mut rec = TokenRecord::from_anthropic(input, read, write - write_1h, write_1h, output);
    rec.thought = usage.reasoning.unwrap_or(0).min(output);
    rec.model = model.filter(|m| !m.is_empty()).map(str::to_owned);
    rec.stated_cost = usage.cost.and_then(|cost| {
        let total = cost.total.filter(|c| c.is_finite() && *c >= 0.0)?;
        let priced = total > 0.0 || cost.total_from_provider == Some(true) || rec.total() == 0;
        priced.then_some(total)
    });
    Ok(rec)
}

/// The text of a user message's content (a string or a list of blocks).
fn prompt_text(content: Option<&RawValue>) -> Option<String> {
    let raw = content?.get();
    if let Ok(text) = serde_json::from_str::<String>(raw) {
        return Some(text);
    }
    let blocks: Vec<Block<'_>> = serde_json::from_str(raw).ok()?;
    let texts: Vec<&str> = blocks.iter().filter_map(Block::text).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

impl PiParser {
    /// A parser with no history.
    pub fn new() -> PiParser {
        PiParser::default()
    }

    /// Whether `entry` is seen for the first time (entries without an id always are).
    fn first_time(&mut self, entry: &Entry<'_>) -> bool {
        entry.id.as_deref().is_none_or(|id| self.seen.insert(id.to_owned()))
    }

    fn message(
        &mut self,
        entry: &Entry<'_>,
        role: FileRole,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(raw) = entry.message else {
            return Err(FormatError("pi: a message entry without a message".to_owned()));
        };
        let message: Message<'_> = serde_json::from_str(raw.get())
            .map_err(|err| FormatError(format!("pi: a message that is not pi's: {err}")))?;
        let main = role == FileRole::Main;
        match message.role.as_deref() {
            Some("user") if main && self.first_time(entry) => {
                self.turn_ended = false;
                out.push(Event::Prompt { at_ms, text: prompt_text(message.content) });
            }
            Some("assistant") => {
                if let Some(usage) = message.usage {
                    let rec = record(usage, message.model.as_deref())?;
                    let key = match (message.response_id.as_deref(), entry.id.as_deref()) {
                        (Some(response), _) if !response.is_empty() => format!("pi:{response}"),
                        (_, Some(id)) => format!("pi:entry:{id}"),
                        _ => {
                            return Err(FormatError("pi: an assistant message without ids".into()));
                        }
                    };
                    // A failed or aborted call may record no tokens: nothing was billed.
                    if rec.total() > 0 {
                        out.push(Event::Call(Call { key, record: rec, at_ms, main }));
                    }
                }
                let asked_tools = message.stop_reason.as_deref() == Some("toolUse");
                if main && self.first_time(entry) {
                    if asked_tools {
                        self.turn_ended = false;
                    } else if !self.turn_ended {
                        self.turn_ended = true;
                        out.push(Event::TurnEnd { at_ms });
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A call pi made for itself: a `usage` entry (cache warming), a compaction's or a branch
    /// summary's summarising call.
    fn side_call(
        &mut self,
        entry: &Entry<'_>,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(usage) = entry.usage else { return Ok(()) };
        let Some(id) = entry.id.as_deref() else {
            return Err(FormatError(format!("pi: a {} entry without an id", entry.kind)));
        };
        let rec = record(usage, entry.model.as_deref())?;
        if rec.total() > 0 {
            let key = format!("pi:{}:{id}", entry.kind);
            out.push(Event::Call(Call { key, record: rec, at_ms, main: false }));
        }
        Ok(())
    }
}

impl Parser for PiParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(entry) = json_record::<Entry<'_>>("pi", "a session entry", line)? else {
            return Ok(());
        };
        let at_ms = entry.timestamp.as_deref().and_then(parse_timestamp);
        match entry.kind.as_ref() {
            "message" => self.message(&entry, role, at_ms, out),
            "usage" | "compaction" | "branch_summary" => self.side_call(&entry, at_ms, out),
            _ => Ok(()),
        }
    }
}
