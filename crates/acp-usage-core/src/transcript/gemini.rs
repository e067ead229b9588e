//! Gemini CLI chat recordings (`…/.gemini/tmp/<project>/chats/session-*.jsonl`), parsed.
//!
//! The file is append-only JSONL (research/agents-usage.md §3.6): a metadata line
//! (`sessionId`, `kind`), then messages. A message is appended again, whole and under the same
//! `id`, whenever it changes (its tokens arrive, tool calls are attached), so the last record of
//! an id wins and a call's key is its message id. `{"$set":{…}}` patches the metadata; a `$set`
//! of `messages` replaces the whole list (written on startup and on `session/load`, with the
//! history's messages under their original ids). `{"$rewindTo": id}` drops that message and the
//! ones after it from the conversation.
//!
//! Each model response is one `type:"gemini"` message carrying `tokens`
//! (`input`=promptTokenCount incl. `cached`, `output`=candidates, `thoughts`, `tool`=
//! toolUsePromptTokenCount). Gemini bills tool-use prompt tokens as input and leaves them out of
//! promptTokenCount, so `input + tool` is the call's input.
//!
//! What this parser does not emit, on purpose:
//! - Rewinds un-count nothing: the rewound calls were made and billed. Their messages keep their
//!   ids, so nothing new is emitted for them either.
//! - No [`Event::TurnEnd`]: the file has no end-of-turn mark. A response that both says
//!   something and calls a tool is recorded first as a plain message with its tokens, and its
//!   tool calls are added once the tool has run (by a re-append or as a separate message), so "a gemini
//!   message without tool calls" is not the last call of a turn. gemini-cli writes every message
//!   of a turn before it answers `session/prompt`, so that answer marks the end.
//! - No [`Event::Prompt`] for user messages that only carry tool results (`functionResponse`),
//!   nor for messages listed by a `$set` (they replay history, they start no turn).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::{Call, Event, FileRole, FormatError, Parser, parse_timestamp};
use crate::tokens::TokenRecord;

/// Parser of Gemini CLI chat-recording lines.
#[derive(Debug, Default)]
pub struct GeminiParser {
    /// The last record emitted per call key: an unchanged re-append emits nothing.
    calls: HashMap<String, TokenRecord>,
    /// User messages already reported as prompts.
    prompts: HashSet<String>,
}

#[derive(Deserialize)]
struct Tokens {
    input: u64,
    output: u64,
    #[serde(default)]
    cached: u64,
    #[serde(default)]
    thoughts: u64,
    #[serde(default)]
    tool: u64,
}

/// Reads the session id from a chat file's first line (its metadata record). File names carry
/// only the first 8 characters of the id, and a session's id is what ACP's `sessionId` holds.
pub fn session_id_of_first_line(line: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(line).ok()?;
    if value.get("id").is_some() || value.get("type").is_some() {
        return None;
    }
    value["sessionId"].as_str().map(str::to_owned)
}

impl Parser for GeminiParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let record: Value = serde_json::from_slice(line)
            .map_err(|err| FormatError(format!("gemini chat line: {err}")))?;
        if let Some(set) = record.get("$set") {
            if let Some(messages) = set["messages"].as_array() {
                for message in messages {
                    self.call(role, message, out)?;
                }
            }
            return Ok(());
        }
        if record.get("$rewindTo").is_some() {
            return Ok(());
        }
        if record.get("id").is_none() {
            // The metadata line; files of older versions could list messages in it.
            if let Some(messages) = record["messages"].as_array() {
                for message in messages {
                    self.call(role, message, out)?;
                }
            }
            return Ok(());
        }
        match record["type"].as_str() {
            Some("gemini") => self.call(role, &record, out)?,
            Some("user") if role == FileRole::Main => self.prompt(&record, out),
            // info, warning, error and whatever comes next: nothing to count.
            _ => {}
        }
        Ok(())
    }
}

impl GeminiParser {
    fn call(
        &mut self,
        role: FileRole,
        message: &Value,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        if message["type"] != "gemini" || message["tokens"].is_null() {
            return Ok(());
        }
        let Some(id) = message["id"].as_str() else {
            return Err(FormatError("gemini message without an id".to_owned()));
        };
        let tokens = Tokens::deserialize(&message["tokens"])
            .map_err(|err| FormatError(format!("gemini message tokens: {err}")))?;
        let mut record = TokenRecord::from_gemini(
            tokens.input + tokens.tool,
            tokens.cached,
            tokens.output,
            tokens.thoughts,
        );
        record.model = message["model"].as_str().map(str::to_owned);
        let key = format!("gemini:{id}");
        if self.calls.get(&key) == Some(&record) {
            return Ok(());
        }
        self.calls.insert(key.clone(), record.clone());
        out.push(Event::Call(Call {
            key,
            record,
            at_ms: message["timestamp"].as_str().and_then(parse_timestamp),
            main: role == FileRole::Main,
        }));
        Ok(())
    }

    fn prompt(&mut self, message: &Value, out: &mut Vec<Event>) {
        let text = match &message["content"] {
            Value::String(text) => Some(text.clone()),
            Value::Array(parts) => {
                let texts: Vec<&str> =
                    parts.iter().filter_map(|part| part["text"].as_str()).collect();
                (!texts.is_empty()).then(|| texts.concat())
            }
            _ => None,
        };
        // Tool results come back as user messages with only functionResponse parts.
        let Some(text) = text else { return };
        let Some(id) = message["id"].as_str() else { return };
        if !self.prompts.insert(id.to_owned()) {
            return;
        }
        out.push(Event::Prompt {
            at_ms: message["timestamp"].as_str().and_then(parse_timestamp),
            text: Some(text),
        });
    }
}
