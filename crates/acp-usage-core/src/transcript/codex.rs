//! Codex rollout files (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread-id>.jsonl`), parsed.
//!
//! The usage lives in `event_msg` records of type `token_count`: `info.last_token_usage` is the
//! response just received (OpenAI convention: input includes cached tokens, output includes
//! reasoning), `info.total_token_usage` the thread's running total (research/agents-usage.md
//! §3.4). Codex may write the same `token_count` twice for one response, so a call's key is
//! derived from the running total, which only a new response moves.
//!
//! A forked thread (a `spawn_agent` subagent, or a forked session) starts its rollout with a
//! copy of its parent's history, `token_count`s included. Those calls were billed to the parent
//! and are already in the parent's rollout, so they are skipped: a `token_count` counts only once
//! the thread has started a turn of its own. Turn ids and thread ids are UUIDv7 (time-ordered,
//! lowercase hex), so a turn is the thread's own when its id sorts at or after the thread's id:
//! the copied parent turns all began before the child thread existed.
//!
//! State is kept per [`FileRole`]: the caller feeds the main rollout and a subagent rollout
//! through one parser, but two subagent rollouts whose lines interleave need a parser each (a
//! rollout's lines carry no thread id, only its first `session_meta` does).

use serde::Deserialize;
use serde_json::Value;

use super::{Call, Event, FileRole, FormatError, Parser, parse_timestamp};
use crate::tokens::TokenRecord;

/// Parser of Codex rollout lines.
#[derive(Debug, Default)]
pub struct CodexParser {
    main: FileState,
    subagent: FileState,
}

/// What one rollout file needs remembered.
#[derive(Debug, Default)]
struct FileState {
    /// The thread's own id, from the file's first `session_meta`.
    thread_id: Option<String>,
    /// From the file's first `session_meta` until the thread starts a turn of its own (see the
    /// module docs): what comes is a copy of an ancestor's history. A file read without its
    /// `session_meta` is taken as the thread's own.
    replaying: bool,
    /// The model of the latest `turn_context`.
    model: Option<String>,
    /// The last running total seen, and how many times it went backwards: a total that drops
    /// (Codex reset its counters) starts a new epoch so keys never repeat an earlier call's.
    last_total: Option<u64>,
    epoch: u32,
    /// The last window sent, to send [`Event::Window`] only when it changes.
    window: Option<u64>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: Value,
}

#[derive(Deserialize)]
struct TokenInfo {
    last_token_usage: Usage,
    #[serde(default)]
    total_token_usage: Option<Usage>,
    #[serde(default)]
    model_context_window: Option<u64>,
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    /// Newer builds: prompt tokens written to the cache (a subset of `input_tokens`).
    #[serde(default)]
    cache_write_input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    reasoning_output_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
}

impl Usage {
    fn total(&self) -> u64 {
        self.total_tokens.unwrap_or(self.input_tokens + self.output_tokens)
    }
}

impl Parser for CodexParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let record: Line = serde_json::from_slice(line)
            .map_err(|err| FormatError(format!("codex rollout line: {err}")))?;
        let at_ms = record.timestamp.as_deref().and_then(parse_timestamp);
        let state = match role {
            FileRole::Main => &mut self.main,
            FileRole::Subagent => &mut self.subagent,
        };
        let payload = &record.payload;
        match record.kind.as_str() {
            // The first session_meta is the thread's own. Later ones before the thread's first
            // own turn are its ancestors', copied with their history into a forked rollout. One
            // after that can only open the next file fed in this role (the caller moved on to
            // another subagent rollout): start over.
            "session_meta" if state.thread_id.is_none() || !state.replaying => {
                let thread_id = payload["id"].as_str().map(str::to_owned);
                *state = FileState { thread_id, replaying: true, ..FileState::default() };
            }
            "turn_context" => {
                state.note_turn(payload["turn_id"].as_str());
                if !state.replaying
                    && let Some(model) = payload["model"].as_str()
                {
                    state.model = Some(model.to_owned());
                }
            }
            "event_msg" => state.event(role, payload, at_ms, out)?,
            _ => {}
        }
        Ok(())
    }
}

impl FileState {
    /// A turn starts: is it the thread's own (see the module docs)?
    fn note_turn(&mut self, turn_id: Option<&str>) {
        if !self.replaying {
            return;
        }
        self.replaying = match (&self.thread_id, turn_id) {
            (Some(thread), Some(turn)) if thread.len() == turn.len() => {
                turn.to_ascii_lowercase() < thread.to_ascii_lowercase()
            }
            // Ids we cannot compare: count what follows.
            _ => false,
        };
    }

    fn event(
        &mut self,
        role: FileRole,
        payload: &Value,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        match payload["type"].as_str() {
            Some("task_started") => {
                self.note_turn(payload["turn_id"].as_str());
                if !self.replaying {
                    self.window(payload["model_context_window"].as_u64(), out);
                }
            }
            Some("token_count") => {
                if self.replaying {
                    return Ok(());
                }
                if payload["rate_limits"].is_object() {
                    let limits = crate::limits::from_codex_rollout(
                        &payload["rate_limits"],
                        at_ms.unwrap_or(0),
                    );
                    if !limits.is_empty() {
                        out.push(Event::Limits(limits));
                    }
                }
                // `info: null` is a rate-limits-only event.
                if payload["info"].is_null() {
                    return Ok(());
                }
                let info = TokenInfo::deserialize(&payload["info"])
                    .map_err(|err| FormatError(format!("codex token_count: {err}")))?;
                self.window(info.model_context_window, out);
                let last = &info.last_token_usage;
                let total = info.total_token_usage.as_ref().map_or(last.total(), Usage::total);
                if self.last_total.is_some_and(|previous| total < previous) {
                    self.epoch += 1;
                }
                self.last_total = Some(total);
                let mut record = TokenRecord::from_openai(
                    last.input_tokens,
                    last.cached_input_tokens,
                    last.output_tokens,
                    last.reasoning_output_tokens,
                );
                // OpenAI's prompt cache keeps entries for minutes (5–10 by default): the 5-minute
                // bucket is the closest. Clamped so the cache figures stay a subset of input.
                record.cache_write_5m =
                    last.cache_write_input_tokens.min(record.input - record.cache_read);
                record.model = self.model.clone();
                let thread = self.thread_id.as_deref().unwrap_or("?");
                out.push(Event::Call(Call {
                    key: format!("codex:{thread}:{}:{total}", self.epoch),
                    record,
                    at_ms,
                    main: role == FileRole::Main,
                }));
            }
            Some("user_message") if role == FileRole::Main && !self.replaying => {
                out.push(Event::Prompt {
                    at_ms,
                    text: payload["message"].as_str().map(str::to_owned),
                });
            }
            // An interrupted turn is over too: nothing more is written for it.
            Some("task_complete" | "turn_aborted") if role == FileRole::Main && !self.replaying => {
                out.push(Event::TurnEnd { at_ms });
            }
            _ => {}
        }
        Ok(())
    }

    fn window(&mut self, window: Option<u64>, out: &mut Vec<Event>) {
        if let Some(window) = window.filter(|window| *window > 0)
            && self.window != Some(window)
        {
            self.window = Some(window);
            out.push(Event::Window(window));
        }
    }
}
