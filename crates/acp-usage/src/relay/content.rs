//! Estimating the tokens of ACP-visible content: prompt blocks, message and thought chunks,
//! tool calls and their results.
//!
//! Only the parts a model reads or writes are counted: text of content blocks, embedded
//! resources, a tool's raw input and its result. Images and audio have no text to count; they
//! get a fixed estimate ([`MEDIA_TOKENS`]) because providers bill them by size, which ACP does
//! not carry.

use std::borrow::Cow;

use acp_usage_core::estimate::Family;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use acp_usage_core::estimate::count as tokens;

/// The estimate for one image or audio block: a mid-size screenshot is about 1,500 tokens with
/// Anthropic's (width × height / 750) rule.
pub const MEDIA_TOKENS: u64 = 1500;

/// `session/update` params, borrowed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateParams<'a> {
    /// The session.
    #[serde(borrow)]
    pub session_id: Cow<'a, str>,
    /// The update.
    #[serde(borrow)]
    pub update: Update<'a>,
}

/// The fields of a session update acp-usage reads; the rest stays raw.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Update<'a> {
    /// The discriminator (`agent_message_chunk`, `tool_call`, `usage_update`, ...).
    #[serde(default, borrow)]
    pub session_update: Option<Cow<'a, str>>,
    /// A chunk's content block, or a tool call's content list.
    #[serde(default, borrow)]
    pub content: Option<&'a RawValue>,
    /// A tool call's raw input.
    #[serde(default, borrow)]
    pub raw_input: Option<&'a RawValue>,
    /// A tool call's raw output.
    #[serde(default, borrow)]
    pub raw_output: Option<&'a RawValue>,
    /// A compaction's complete summary.
    #[serde(default, borrow)]
    pub summary: Option<&'a RawValue>,
    /// A tool call's (or compaction's) status.
    #[serde(default, borrow)]
    pub status: Option<Cow<'a, str>>,
}

/// Tokens of a list of prompt content blocks.
pub fn blocks_tokens(blocks: Option<&Value>, family: Family) -> u64 {
    let mut n = 0;
    if let Some(blocks) = blocks.and_then(Value::as_array) {
        for b in blocks {
            n += block_tokens(b, family);
        }
    }
    n
}

/// Tokens of one content block (or anything holding text).
fn block_tokens(v: &Value, family: Family) -> u64 {
    match v {
        Value::Object(map) => match map.get("type").and_then(Value::as_str) {
            Some("image" | "audio") => MEDIA_TOKENS,
            _ => map
                .iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("text", Value::String(s)) => tokens(s, family),
                    ("_meta" | "annotations" | "data", _) => 0,
                    (_, Value::Object(_) | Value::Array(_)) => block_tokens(v, family),
                    _ => 0,
                })
                .sum(),
        },
        Value::Array(items) => items.iter().map(|i| block_tokens(i, family)).sum(),
        _ => 0,
    }
}

fn raw_tokens(raw: Option<&RawValue>, family: Family) -> u64 {
    match raw {
        Some(r) if r.get() != "null" => tokens(r.get(), family),
        _ => 0,
    }
}

fn content_tokens(update: &Update<'_>, family: Family) -> u64 {
    update
        .content
        .and_then(|c| serde_json::from_str::<Value>(c.get()).ok())
        .map(|v| block_tokens(&v, family))
        .unwrap_or(0)
}

/// Tokens of a chunk's content (or, for replayed history, of any update's content).
pub fn update_tokens(update: &Update<'_>, family: Family) -> u64 {
    content_tokens(update, family) + raw_tokens(update.raw_input, family)
}

/// Tokens the model wrote to call a tool.
pub fn tool_input_tokens(update: &Update<'_>, family: Family) -> u64 {
    raw_tokens(update.raw_input, family)
}

/// Tokens of a tool's result, counted once: when the call reaches a final status. The result
/// shows both as content and as raw output; the larger is what the model was given.
pub fn tool_output_tokens(update: &Update<'_>, family: Family) -> u64 {
    match update.status.as_deref() {
        Some("completed" | "failed") => {
            content_tokens(update, family).max(raw_tokens(update.raw_output, family))
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_blocks() {
        let blocks = json!([
            {"type": "text", "text": "Hello from mock."},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "Hello from mock."}},
        ]);
        assert_eq!(blocks_tokens(Some(&blocks), Family::OpenAi), 4 + MEDIA_TOKENS + 4);
        assert_eq!(blocks_tokens(None, Family::OpenAi), 0);
    }

    #[test]
    fn tool_results_count_once() {
        let running: UpdateParams<'_> = serde_json::from_str(
            r#"{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress","content":[{"type":"content","content":{"type":"text","text":"partial"}}]}}"#,
        )
        .unwrap();
        assert_eq!(tool_output_tokens(&running.update, Family::OpenAi), 0);
        let done: UpdateParams<'_> = serde_json::from_str(
            r#"{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed","content":[{"type":"content","content":{"type":"text","text":"Hello from mock."}}],"rawOutput":null}}"#,
        )
        .unwrap();
        assert_eq!(tool_output_tokens(&done.update, Family::OpenAi), 4);
    }
}
