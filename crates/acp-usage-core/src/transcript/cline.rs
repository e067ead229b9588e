//! cline's session conversation (`~/.cline/data/sessions/<id>/<id>.messages.json`), parsed.
//!
//! The directory and file are named after the ACP session id (`$CLINE_DATA_DIR` replaces
//! `~/.cline/data`). Unlike the other formats this is ONE JSON document, `{"version": 1,
//! "updated_at", "agent", "sessionId", "origin", "messages": [...], "system_prompt"}`, that cline
//! rewrites whole (`writeFileSync`, pretty-printed) whenever it persists the conversation; a
//! new process that runs `session/load` rewrites the same file. The caller feeds the whole
//! document as one "line" each time the file changed, so this parser is idempotent across
//! re-reads. What it relies on (checked against cline 3.0.65 run offline against a mock LLM,
//! and the `@cline/core` 3.0.65 JavaScript that writes the file):
//!
//! - Every assistant message of a model call carries the call's `metrics {inputTokens,
//!   outputTokens, cacheReadTokens, cacheWriteTokens, cost?}`. `inputTokens` counts every prompt
//!   token, cache reads and writes included (Anthropic provider: 101 + 10003 read + 1002
//!   written = 11106; OpenAI-compatible: `prompt_tokens`, cached included, and no cache writes).
//!   No reasoning count is recorded. cline sends Anthropic cache breakpoints without a TTL, so
//!   writes are 5-minute ones. `cost` is cline's own estimate from its price table (absent when
//!   it does not know the model), not a price the provider stated: no call carries a stated
//!   cost.
//! - Every message has an `id` that cline gives it once (`msg_…` from the agent loop, a UUID for
//!   the user's input, `error_…` for a failure notice), so the id is the call's key: a re-read
//!   document yields the same calls again, which replace themselves, while prompts and turn ends
//!   are reported only for messages not seen before. (cline gives a message it persists without
//!   an id a fresh random one each time; only runtime notices lack one, and they say nothing
//!   here. A message without any id is identified by its position.)
//! - The user's input is a user message whose text is wrapped as `<user_input mode="act">…
//!   </user_input>` (a slash command as `<user_command slash="…">…</user_command>`, a mode
//!   switch notice as `<mode_notice>…</mode_notice>`); the prompt's text is what is inside.
//!   Tool results are user messages of `tool_result` blocks; the runtime's own user messages
//!   (recovery and loop notices, a compaction summary) are not wrapped, and teammates' run
//!   updates, although wrapped, are no input of the user's: none of these is a prompt.
//! - One user turn is one agent run: model calls whose messages have `tool_use` blocks, until
//!   one without tool use ends it. A failed run ends with an assistant message that is only for
//!   display (`metadata.displayOnly`, an `error_…` id, no metrics): it ends the turn too, unless
//!   it already ended.
//! - Subagents and teammates write their own documents beside the session's; fed as
//!   [`FileRole::Subagent`], their calls are never the main agent's and their messages say
//!   nothing about the user's turns. The top-level `agent` (`lead`, `subagent`, `teammate`) is
//!   not trusted for this: cline sometimes marks an ACP session's own file `subagent`.
//!
//! cline writes the file in place, so a read can catch it half-written (or mixed with the
//! previous, longer content): a document that is not valid JSON is "not complete yet", nothing
//! is reported and the next change is read again. What means the format changed is an error:
//! valid JSON that is neither the document object with a `messages` list nor (as cline's own
//! reader also accepts) a bare list of messages, a message that is not an object, metrics
//! whose counters are not numbers or lack `inputTokens`/`outputTokens`, content that is
//! neither a string nor a list of blocks.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Number;
use serde_json::value::RawValue;

use super::{Block, Call, Event, FileRole, FormatError, Parser};
use crate::tokens::TokenRecord;

/// Parses one cline session's `<id>.messages.json`, fed whole each time it changed.
#[derive(Debug, Default)]
pub struct ClineParser {
    /// Messages already read (by [`message_id`]): a re-read reports their prompts and turn ends
    /// only once.
    seen: HashSet<String>,
    /// A turn end was reported and no main-agent call came since (a failure notice after the
    /// answer must not end the turn twice).
    turn_ended: bool,
}

/// The document cline writes; only what usage needs.
#[derive(Deserialize)]
struct Document<'a> {
    #[serde(borrow, default)]
    messages: Option<Vec<Message<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    /// A string or a list of blocks; read only for messages not seen before.
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    /// Unix milliseconds (JavaScript's `Date.now()`).
    #[serde(default)]
    ts: Option<Number>,
    #[serde(borrow, default)]
    model_info: Option<ModelInfo<'a>>,
    #[serde(default)]
    metrics: Option<Metrics>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
struct ModelInfo<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metrics {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    /// A notice shown to the user, never sent to the model (a failed run's error).
    #[serde(default)]
    display_only: Option<bool>,
}

/// What a message's content holds, as far as turns go.
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl Content<'_> {
    fn blocks_of(&self, kind: &str) -> bool {
        match self {
            Content::Text(_) => false,
            Content::Blocks(blocks) => blocks.iter().any(|b| b.kind.as_deref() == Some(kind)),
        }
    }

    fn texts(&self) -> Vec<&str> {
        match self {
            Content::Text(text) => vec![text.as_ref()],
            Content::Blocks(blocks) => blocks.iter().filter_map(Block::text).collect(),
        }
    }
}

fn content<'a>(message: &Message<'a>) -> Result<Option<Content<'a>>, FormatError> {
    let Some(raw) = message.content else { return Ok(None) };
    let raw = raw.get();
    let bad = |err: serde_json::Error| FormatError(format!("cline: message content: {err}"));
    match raw.as_bytes().first() {
        Some(b'"') => Ok(Some(Content::Text(serde_json::from_str(raw).map_err(bad)?))),
        Some(b'[') => Ok(Some(Content::Blocks(serde_json::from_str(raw).map_err(bad)?))),
        _ if raw == "null" => Ok(None),
        _ => Err(FormatError("cline: message content neither a string nor a list".to_owned())),
    }
}

/// A message's identity: its id, else its position in the list.
fn message_id(message: &Message<'_>, index: usize) -> String {
    match message.id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => format!("#{index}"),
    }
}

/// `text` without the `<tag …>…</tag>` wrapping it whole: the tag's attributes and its inner
/// text (as cline's own `^<tag\b([^>]*)>([\s\S]*?)</tag>$`).
fn unwrap_tag<'t>(text: &'t str, tag: &str) -> Option<(&'t str, &'t str)> {
    let rest = text.trim().strip_prefix('<')?.strip_prefix(tag)?;
    if !rest.starts_with(|c: char| c == '>' || c.is_whitespace()) {
        return None;
    }
    let body = rest.strip_suffix(">")?.strip_suffix(tag)?.strip_suffix("</")?;
    let end = body.find('>')?;
    Some((&body[..end], &body[end + 1..]))
}

/// `text` without cline's `<mode_notice>…</mode_notice>` elements (it prepends one to the first
/// message after the user switched between plan and act).
fn strip_mode_notices(text: &str) -> Cow<'_, str> {
    const OPEN: &str = "<mode_notice>";
    const CLOSE: &str = "</mode_notice>";
    if !text.contains(OPEN) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let Some(len) = rest[start + OPEN.len()..].find(CLOSE) else { break };
        out.push_str(&rest[..start]);
        rest = &rest[start + OPEN.len() + len + CLOSE.len()..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The value of attribute `name` in a tag's attribute text.
fn attribute<'t>(attrs: &'t str, name: &str) -> Option<&'t str> {
    let start = attrs.find(&format!("{name}=\""))? + name.len() + 2;
    let len = attrs[start..].find('"')?;
    Some(attrs[start..start + len].trim()).filter(|value| !value.is_empty())
}

/// The text the user typed, when `text` is the user's input as cline wraps it; `None` for any
/// other user text.
fn user_input(text: &str) -> Option<String> {
    let text = strip_mode_notices(text);
    let (inner, wrapped) = match unwrap_tag(&text, "user_input") {
        Some((_, inner)) => (strip_mode_notices(inner).trim().to_owned(), true),
        None => (text.trim().to_owned(), false),
    };
    // Updates on teammates' runs are delivered to the lead as its own wrapped input.
    if inner.starts_with("System-delivered teammate async run updates:") {
        return None;
    }
    if let Some((attrs, command)) = unwrap_tag(&inner, "user_command") {
        let slash = attribute(attrs, "slash")?;
        let command = command.trim();
        return Some(if command.is_empty() {
            format!("/{slash}")
        } else {
            format!("/{slash} {command}")
        });
    }
    wrapped.then_some(inner)
}

fn timestamp(ts: Option<&Number>) -> Option<i64> {
    let ts = ts?;
    // JavaScript writes whole milliseconds; a fraction would be cut off.
    ts.as_i64().or_else(|| ts.as_f64().filter(|ms| ms.is_finite()).map(|ms| ms as i64))
}

fn call(message: &Message<'_>, key: &str, main: bool) -> Result<Option<Call>, FormatError> {
    let Some(metrics) = &message.metrics else { return Ok(None) };
    let (Some(input), Some(output)) = (metrics.input_tokens, metrics.output_tokens) else {
        return Err(FormatError("cline: metrics without inputTokens/outputTokens".to_owned()));
    };
    let record = TokenRecord {
        model: message
            .model_info
            .as_ref()
            .and_then(|info| info.id.as_deref())
            .filter(|id| !id.is_empty())
            .map(str::to_owned),
        ..TokenRecord::from_inclusive(
            input,
            metrics.cache_read_tokens.unwrap_or(0),
            metrics.cache_write_tokens.unwrap_or(0),
            output,
            0,
        )
    };
    Ok(Some(Call {
        key: format!("cline:{key}"),
        record,
        at_ms: timestamp(message.ts.as_ref()),
        main,
    }))
}

impl ClineParser {
    /// A parser with no history.
    pub fn new() -> ClineParser {
        ClineParser::default()
    }

    /// Reads the messages of one complete document into `out`, and the ids they make seen into
    /// `seen` (committed only when the whole document was read).
    fn messages(
        &mut self,
        messages: &[Message<'_>],
        main: bool,
        seen: &mut HashSet<String>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        for (index, message) in messages.iter().enumerate() {
            let id = message_id(message, index);
            let assistant = message.role.as_deref() == Some("assistant");
            if assistant && let Some(call) = call(message, &id, main)? {
                out.push(Event::Call(call));
            }
            if !main || self.seen.contains(&id) || !seen.insert(id) {
                continue;
            }
            let at_ms = timestamp(message.ts.as_ref());
            match message.role.as_deref() {
                Some("user") => {
                    let Some(content) = content(message)? else { continue };
                    if content.blocks_of("tool_result") {
                        continue;
                    }
                    if let Some(text) = content.texts().into_iter().find_map(user_input) {
                        self.turn_ended = false;
                        let text = (!text.is_empty()).then_some(text);
                        out.push(Event::Prompt { at_ms, text });
                    }
                }
                Some("assistant") => {
                    let display_only = message
                        .metadata
                        .as_ref()
                        .is_some_and(|metadata| metadata.display_only == Some(true));
                    let asked_tools = content(message)?.is_some_and(|c| c.blocks_of("tool_use"));
                    if !display_only {
                        // A call: the turn goes on, or ends here.
                        self.turn_ended = false;
                    }
                    if !asked_tools && !self.turn_ended {
                        self.turn_ended = true;
                        out.push(Event::TurnEnd { at_ms });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Parser for ClineParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let bare_list = match line.iter().find(|byte| !byte.is_ascii_whitespace()) {
            // Empty: cline truncated the file and has not written it yet.
            None => return Ok(()),
            Some(b'{') => false,
            Some(b'[') => true,
            Some(_) => {
                return Err(FormatError("cline: a document that is not a JSON object".to_owned()));
            }
        };
        let parsed = if bare_list {
            serde_json::from_slice::<Vec<Message<'_>>>(line)
                .map(|messages| Document { messages: Some(messages) })
        } else {
            serde_json::from_slice::<Document<'_>>(line)
        };
        let document = match parsed {
            Ok(document) => document,
            // Not (yet) valid JSON: half-written, or caught while cline rewrote it.
            Err(err) if err.is_eof() || err.is_syntax() => return Ok(()),
            Err(err) => return Err(FormatError(format!("cline: not a session document: {err}"))),
        };
        let Some(messages) = &document.messages else {
            return Err(FormatError("cline: a document without messages".to_owned()));
        };
        // The session's own document is the main agent's whatever its `agent` says: cline
        // 3.0.65 writes `"agent": "subagent"` (`taskType: subagent_task`) into an ACP session's
        // own file now and then. Only the caller knows which file is which.
        let main = role == FileRole::Main;
        let mut events = Vec::new();
        let mut seen = HashSet::new();
        let turn_ended = self.turn_ended;
        if let Err(err) = self.messages(messages, main, &mut seen, &mut events) {
            self.turn_ended = turn_ended;
            return Err(err);
        }
        self.seen.extend(seen);
        out.append(&mut events);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{strip_mode_notices, unwrap_tag, user_input};

    #[test]
    fn user_input_unwrapped() {
        assert_eq!(
            user_input("<user_input mode=\"act\">Say hello.</user_input>").as_deref(),
            Some("Say hello.")
        );
        assert_eq!(
            user_input(
                "<user_input mode=\"plan\"><mode_notice>The user switched from act mode to plan \
                 mode before sending this message.</mode_notice>\nPlan it.</user_input>"
            )
            .as_deref(),
            Some("Plan it.")
        );
        assert_eq!(
            user_input(
                "<user_input mode=\"act\"><user_command slash=\"team\">Do it</user_command>\
                 </user_input>"
            )
            .as_deref(),
            Some("/team Do it")
        );
        assert_eq!(user_input("Context summary: …"), None);
        assert_eq!(user_input("<user_inputs>x</user_inputs>"), None);
        assert_eq!(
            user_input(
                "<user_input mode=\"act\">System-delivered teammate async run updates:\n- r1 \
                 </user_input>"
            ),
            None
        );
        assert_eq!(user_input("<user_input mode=\"act\"></user_input>").as_deref(), Some(""));
    }

    #[test]
    fn tags() {
        assert_eq!(unwrap_tag(" <a x=\"1\">in</a> ", "a"), Some((" x=\"1\"", "in")));
        assert_eq!(unwrap_tag("<a>in</a> tail", "a"), None);
        assert_eq!(strip_mode_notices("a<mode_notice>n</mode_notice>b"), "ab");
        assert_eq!(strip_mode_notices("a<mode_notice>n"), "a<mode_notice>n");
    }
}
