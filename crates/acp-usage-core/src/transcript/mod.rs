//! Agents' transcripts, parsed: the exact per-call token records agents write to disk.
//!
//! Each agent writes its own format (research/agents-usage.md §3.2, §3.4, §3.6, §3.7). A parser
//! here turns the lines of one session's files into [`Event`]s; it does no I/O: the binary
//! crate finds the files, tails them and feeds the parser whole lines (terminator stripped), in
//! the order they were written within each file. A parser keeps whatever state its format's
//! dedup rules need, so feeding it the same line twice, or a line that revises an earlier call,
//! yields an [`Event::Call`] with the same [`Call::key`] that replaces the earlier one.

pub mod claude;
pub mod cline;
pub mod codex;
pub mod copilot;
pub mod gemini;
pub mod pi;
pub mod qwen;

pub use crate::time::parse_timestamp;
use crate::tokens::TokenRecord;

/// Which file of a session a line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileRole {
    /// The session's own transcript (the main agent's conversation).
    Main,
    /// A subagent's or sidechain's transcript that belongs to the session.
    Subagent,
}

/// One model call as a transcript records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Identifies the call within the session's transcripts; a later [`Event::Call`] with the
    /// same key replaces this one (a revised record, a split line, a re-appended message).
    pub key: String,
    /// The call's counts, normalised; `model` set when the format names it.
    pub record: TokenRecord,
    /// When the call was written, in Unix milliseconds, when the format records it.
    pub at_ms: Option<i64>,
    /// True for the main agent's calls; false for subagents', sidechains' and auxiliary calls
    /// (they count in cost and per-turn usage, never in `used`).
    pub main: bool,
}

/// What a transcript line says, as far as usage goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A model call, new or revised (see [`Call::key`]).
    Call(Call),
    /// The user's prompt, as the main transcript records it: a turn starts.
    Prompt {
        /// When it was written.
        at_ms: Option<i64>,
        /// Its text, when the format records it (used to match it with the ACP prompt).
        text: Option<String>,
    },
    /// The main agent finished answering a prompt: every call of the turn is written.
    TurnEnd {
        /// When it was written.
        at_ms: Option<i64>,
    },
    /// The context window the agent enforces for the session's model (Codex).
    Window(u64),
    /// Subscription windows the transcript records (Codex's rollout `rate_limits`).
    Limits(Vec<crate::limits::Limit>),
}

/// A line the parser cannot read in a way that means the format changed (not a line of a type
/// it skips on purpose).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

/// A parser of one session's transcript lines.
pub trait Parser: std::fmt::Debug + Send {
    /// Reads one line (without its terminator) of a file with the given role, appending what it
    /// says to `out`. Lines of types the format has but usage does not need are skipped
    /// silently; a line that is not valid JSON, or a usage record missing its counters, is a
    /// [`FormatError`] (the caller logs it once and falls back).
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError>;

    /// The session's working directory and title, when the lines read so far say (`import`
    /// shows them); formats whose facts other lines carry leave this to their reader.
    fn session_facts(&self) -> (Option<String>, Option<String>) {
        (None, None)
    }

    /// Whether the lines read so far show the call of `key` to be one the agent made for itself
    /// (a side call) although the line that recorded it did not say.
    fn is_side_call(&self, key: &str) -> bool {
        let _ = key;
        false
    }
}

/// A content block of a message (Anthropic-shaped: `{"type", "text"}`); what else a block holds
/// (tool inputs and results) is skipped unread.
#[derive(serde::Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    pub text: Option<std::borrow::Cow<'a, str>>,
}

impl Block<'_> {
    /// The block's text, when it is a text block.
    pub fn text(&self) -> Option<&str> {
        match self.kind.as_deref() {
            Some("text") => self.text.as_deref(),
            _ => None,
        }
    }
}

/// Parses a JSONL line that must hold one JSON object of `format`'s records (`what` names them
/// in errors); `Ok(None)` for a blank line.
pub(crate) fn json_record<'a, T: serde::Deserialize<'a>>(
    format: &str,
    what: &str,
    line: &'a [u8],
) -> Result<Option<T>, FormatError> {
    match line.iter().find(|byte| !byte.is_ascii_whitespace()) {
        None => return Ok(None),
        Some(b'{') => {}
        Some(_) => return Err(FormatError(format!("{format}: a line that is not a JSON object"))),
    }
    serde_json::from_slice(line)
        .map(Some)
        .map_err(|err| FormatError(format!("{format}: not {what}: {err}")))
}
