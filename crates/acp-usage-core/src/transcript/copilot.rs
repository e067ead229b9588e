//! GitHub Copilot CLI's session event logs (`~/.copilot/session-state/<id>/events.jsonl`), parsed.
//!
//! The directory name is the ACP session id (`$COPILOT_HOME` replaces `~/.copilot`);
//! `session/load` in a new process appends to the same file (after a `session.shutdown` and a
//! `session.resume`). Every line is one event: `{"type", "data", "id", "timestamp", "parentId",
//! "agentId"?}`. What this parser relies on (checked against Copilot CLI 1.0.102 run offline
//! against a mock LLM, and the JSON schema the CLI ships, `schemas/session-events.schema.json`):
//!
//! - Each model call of the main agent or a subagent is one `session.usage_record`, whose
//!   `data.usage` is the call's "durable accounting receipt". `inputTokens` counts every prompt
//!   token, cache reads and writes included (Anthropic provider: 101 + 10003 read + 1002
//!   written = 11106); `outputTokens` is the provider's output count, reasoning included
//!   (OpenAI's `completion_tokens`), and `reasoningTokens` is the part of it spent reasoning.
//!   Copilot sends Anthropic cache breakpoints without a TTL, so writes are 5-minute ones.
//! - A call's key is its accounting identity, `accounting.{sourceSessionId, sequence}` (the
//!   sequence only grows within its source session, across `session/load`), with `usageId`
//!   (the provider's message id) added so a sequence that ever restarted (a rewound history)
//!   cannot make a new call look like an old one. Without `accounting`: `usageId`/`apiCallId`,
//!   then the event's own `id`.
//! - `usage.cost` is Copilot's premium-request multiplier (`0.0` under BYOK) and
//!   `copilotUsage.totalNanoAiu` is in GitHub AI units: neither is a price in USD, so no call
//!   carries a stated cost.
//! - `usage.maxPromptTokens` is the prompt limit Copilot enforces for the model (what it sends
//!   as `usage_update.size`): an [`Event::Window`] when a main-agent call changes it.
//! - Compaction (`/compact`, or automatic) makes a model call that gets no `usage_record`: its
//!   counts are only in `session.compaction_complete.data.compactionTokensUsed`, a call of its
//!   own here (never the main agent's: its prompt is not the conversation's context).
//!
//! Subagents (the `task` tool) write into the same file, every event of theirs carrying the
//! subagent instance's `agentId`; their usage records also say `initiator: "sub-agent"`,
//! `interactionType: "conversation-subagent"`, `parentToolCallId`, and an
//! `accounting.sourceSessionId` of the subagent's own execution session. A call is the main
//! agent's unless any of those says otherwise (an MCP sampling request, a background or
//! compaction call are not the main agent's either), or its source session is not the one the
//! file's first `session.start` names.
//!
//! Turns: `assistant.turn_start`/`assistant.turn_end` bracket one round of the agent loop (one
//! model call and the tools it asked for), not the user's turn: a prompt whose answer used a
//! tool has two rounds, each with its `turn_end`. The user's turn is over when a main-agent
//! round ends without having asked for tools: its `assistant.message`s have empty
//! `toolRequests`, or it wrote none (a failed call: the round's `turn_end`, then
//! `session.error`). Also on `abort` (a denied permission stops the loop: the tool round's
//! `turn_end`, then `abort`; a cancel) and on `session.error` alone. A manual compaction
//! (`/compact` over ACP) writes neither a `user.message` nor rounds: its `compaction_complete`
//! ends that turn. Subagents' rounds (`agentId`, `parentToolCallId`) never end the turn. A
//! later round of the main agent (an autopilot continuation, a retry after an error) opens the
//! turn again, so its own end is reported too.
//!
//! Leniency: unknown record types and fields are skipped (1.0.102 also writes `model.*`
//! records during compaction that its schema does not list). What means the format changed is
//! an error: a line that is not a JSON object with a string `type`, a `session.usage_record`
//! without `usage.inputTokens`/`outputTokens`, or an `assistant.message` whose `toolRequests`
//! is not a list.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Call, Event, FileRole, FormatError, Parser, json_record, parse_timestamp};
use crate::tokens::TokenRecord;

/// Parses one Copilot CLI session's `events.jsonl`.
#[derive(Debug, Default)]
pub struct CopilotParser {
    /// The session's own id, from the first `session.start`.
    session_id: Option<String>,
    /// The current main-agent round asked for tools: the loop goes on after it.
    round_asked_tools: bool,
    /// A turn end was reported and no main-agent activity came since (a re-fed `turn_end`, or
    /// an `abort` after the round's `turn_end`, must not end the turn twice).
    turn_ended: bool,
    /// The last window sent, to send [`Event::Window`] only when it changes.
    window: Option<u64>,
    /// Events already reported as prompts (a re-fed line is not a second prompt).
    prompts: HashSet<String>,
}

/// The envelope of every event; `data` is parsed by type (it may be a long tool result).
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    timestamp: Option<Cow<'a, str>>,
    /// Set on every event of a subagent instance.
    #[serde(rename = "agentId", borrow, default)]
    agent_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct UsageRecordData<'a> {
    #[serde(borrow)]
    usage: Usage<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    #[serde(default)]
    max_prompt_tokens: Option<u64>,
    #[serde(borrow, default)]
    initiator: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    interaction_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    parent_tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    api_call_id: Option<Cow<'a, str>>,
    /// Read loosely: only joined into the key.
    #[serde(default)]
    accounting: Option<Value>,
}

/// `session.compaction_complete`'s fields that usage needs.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CompactionData<'a> {
    #[serde(borrow, default)]
    compaction_attempt_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    trigger: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    compaction_tokens_used: Option<CompactionUsage<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactionUsage<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StartData<'a> {
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct UserMessageData<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    /// Set on a message the runtime or another agent injected (`skill-…`, `agent-<id>`).
    #[serde(borrow, default)]
    source: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delivery: Option<Cow<'a, str>>,
    #[serde(default)]
    is_autopilot_continuation: Option<bool>,
    #[serde(borrow, default)]
    message_id: Option<Cow<'a, str>>,
}

/// `assistant.turn_start`, `assistant.message`, `assistant.turn_end`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RoundData<'a> {
    /// Deprecated subagent marker, still written on a subagent's rounds and messages.
    #[serde(borrow, default)]
    parent_tool_call_id: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_requests: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize, Default)]
struct CompactionStartData<'a> {
    #[serde(borrow, default)]
    trigger: Option<Cow<'a, str>>,
}

/// `initiator`s of calls the main agent's conversation did not make.
const FOREIGN_INITIATORS: &[&str] = &["sub-agent", "mcp-sampling"];

/// `interactionType`s of calls that are not the main agent's conversation.
const FOREIGN_INTERACTIONS: &[&str] = &[
    "conversation-subagent",
    "conversation-sampling",
    "conversation-background",
    "conversation-compaction",
];

/// A record's `data` as `T` (absent: `T::default()`); a shape `T` cannot read means the format
/// changed.
fn data<'a, T: Deserialize<'a> + Default>(record: &Record<'a>) -> Result<T, FormatError> {
    let Some(raw) = record.data else { return Ok(T::default()) };
    serde_json::from_str(raw.get())
        .map_err(|err| FormatError(format!("copilot: {} data: {err}", record.kind)))
}

fn present(value: Option<&Cow<'_, str>>) -> bool {
    value.is_some_and(|value| !value.is_empty())
}

/// A JSON scalar as a key part.
fn key_part(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl CopilotParser {
    /// A parser with no history.
    pub fn new() -> CopilotParser {
        CopilotParser::default()
    }

    fn usage_record(
        &mut self,
        record: &Record<'_>,
        role: FileRole,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(raw) = record.data else {
            return Err(FormatError("copilot: session.usage_record without data".to_owned()));
        };
        let UsageRecordData { usage } = serde_json::from_str(raw.get())
            .map_err(|err| FormatError(format!("copilot: session.usage_record: {err}")))?;
        let (Some(input), Some(output)) = (usage.input_tokens, usage.output_tokens) else {
            return Err(FormatError(
                "copilot: usage record without inputTokens/outputTokens".to_owned(),
            ));
        };
        let source = usage.accounting.as_ref().and_then(|a| a["sourceSessionId"].as_str());
        let main = role == FileRole::Main
            && !present(record.agent_id.as_ref())
            && !present(usage.parent_tool_call_id.as_ref())
            && !usage.initiator.as_deref().is_some_and(|i| FOREIGN_INITIATORS.contains(&i))
            && !usage
                .interaction_type
                .as_deref()
                .is_some_and(|i| FOREIGN_INTERACTIONS.contains(&i))
            && match (source, self.session_id.as_deref()) {
                (Some(source), Some(own)) => source == own,
                _ => true,
            };
        let call_id =
            usage.accounting.as_ref().and_then(|a| key_part(&a["usageId"])).or_else(|| {
                usage.api_call_id.as_deref().filter(|id| !id.is_empty()).map(str::to_owned)
            });
        let sequence = usage.accounting.as_ref().and_then(|a| key_part(&a["sequence"]));
        let key = match (source, sequence, &call_id, record.id.as_deref()) {
            (Some(source), Some(sequence), call_id, _) => {
                format!("copilot:{source}:{sequence}:{}", call_id.as_deref().unwrap_or(""))
            }
            (_, _, Some(call_id), _) => format!("copilot:call:{call_id}"),
            (_, _, None, Some(id)) => format!("copilot:event:{id}"),
            _ => {
                return Err(FormatError("copilot: usage record without any id".to_owned()));
            }
        };
        if main {
            self.window(usage.max_prompt_tokens, out);
        }
        let token_record = TokenRecord {
            model: usage.model.as_deref().map(str::to_owned),
            ..TokenRecord::from_inclusive(
                input,
                usage.cache_read_tokens.unwrap_or(0),
                usage.cache_write_tokens.unwrap_or(0),
                output,
                usage.reasoning_tokens.unwrap_or(0),
            )
        };
        out.push(Event::Call(Call { key, record: token_record, at_ms, main }));
        Ok(())
    }

    /// A compaction's model call (it has no usage record of its own).
    fn compaction(
        &mut self,
        record: &Record<'_>,
        role: FileRole,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let compaction: CompactionData<'_> = data(record)?;
        let main = role == FileRole::Main && !present(record.agent_id.as_ref());
        if let Some(used) = &compaction.compaction_tokens_used
            && (used.input_tokens.is_some() || used.output_tokens.is_some())
            && let Some(id) = compaction.compaction_attempt_id.as_deref().or(record.id.as_deref())
        {
            let token_record = TokenRecord {
                model: used.model.as_deref().or(compaction.model.as_deref()).map(str::to_owned),
                ..TokenRecord::from_inclusive(
                    used.input_tokens.unwrap_or(0),
                    used.cache_read_tokens.unwrap_or(0),
                    used.cache_write_tokens.unwrap_or(0),
                    used.output_tokens.unwrap_or(0),
                    0,
                )
            };
            out.push(Event::Call(Call {
                key: format!("copilot:compaction:{id}"),
                record: token_record,
                at_ms,
                main: false,
            }));
        }
        // `/compact` is a turn of its own, without rounds.
        if main && compaction.trigger.as_deref() == Some("manual") {
            self.end_turn(at_ms, out);
        }
        Ok(())
    }

    fn user_message(
        &mut self,
        record: &Record<'_>,
        at_ms: Option<i64>,
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let message: UserMessageData<'_> = data(record)?;
        // Injected messages (a skill's context, an autopilot continuation) and steering (typed
        // while a turn runs) start no turn.
        if present(message.source.as_ref())
            || message.is_autopilot_continuation == Some(true)
            || message.delivery.as_deref() == Some("steering")
        {
            return Ok(());
        }
        let id = record.id.as_deref().or(message.message_id.as_deref()).unwrap_or("");
        if !id.is_empty() && !self.prompts.insert(id.to_owned()) {
            return Ok(());
        }
        self.turn_ended = false;
        out.push(Event::Prompt { at_ms, text: message.content.as_deref().map(str::to_owned) });
        Ok(())
    }

    fn end_turn(&mut self, at_ms: Option<i64>, out: &mut Vec<Event>) {
        if !self.turn_ended {
            self.turn_ended = true;
            out.push(Event::TurnEnd { at_ms });
        }
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

impl Parser for CopilotParser {
    fn line(
        &mut self,
        role: FileRole,
        line: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), FormatError> {
        let Some(record) = json_record::<Record<'_>>("copilot", "a session event", line)? else {
            return Ok(());
        };
        let at_ms = record.timestamp.as_deref().and_then(parse_timestamp);
        let main = role == FileRole::Main && !present(record.agent_id.as_ref());
        match record.kind.as_ref() {
            "session.usage_record" => self.usage_record(&record, role, at_ms, out)?,
            "session.compaction_complete" => self.compaction(&record, role, at_ms, out)?,
            "session.start" => {
                let start: StartData<'_> = data(&record)?;
                if self.session_id.is_none() && main {
                    self.session_id = start.session_id.as_deref().map(str::to_owned);
                }
            }
            // From here on, only the main agent's conversation says where its turns are.
            _ if !main => {}
            "user.message" => self.user_message(&record, at_ms, out)?,
            kind @ ("assistant.turn_start" | "assistant.message" | "assistant.turn_end") => {
                let round: RoundData<'_> = data(&record)?;
                if present(round.parent_tool_call_id.as_ref()) {
                    return Ok(());
                }
                match kind {
                    "assistant.turn_start" => {
                        self.round_asked_tools = false;
                        self.turn_ended = false;
                    }
                    "assistant.message" => {
                        self.round_asked_tools |=
                            round.tool_requests.is_some_and(|requests| !requests.is_empty());
                    }
                    _ if !self.round_asked_tools => self.end_turn(at_ms, out),
                    _ => {}
                }
            }
            "abort" | "session.error" => self.end_turn(at_ms, out),
            "session.compaction_start" => {
                let start: CompactionStartData<'_> = data(&record)?;
                if start.trigger.as_deref() == Some("manual") {
                    self.turn_ended = false;
                }
            }
            _ => {}
        }
        Ok(())
    }
}
