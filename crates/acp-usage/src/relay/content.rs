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

use super::json::{Invalid, Raw, Scanner, Str};
use acp_usage_core::estimate::{by_bytes, count as tokens};

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
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Update<'a> {
    /// The discriminator (`agent_message_chunk`, `tool_call`, `usage_update`, ...).
    #[serde(default, borrow)]
    pub session_update: Option<Cow<'a, str>>,
    /// A chunk's content block, or a tool call's content list.
    #[serde(default, borrow)]
    pub content: Option<Raw<'a>>,
    /// A tool call's raw input.
    #[serde(default, borrow)]
    pub raw_input: Option<Raw<'a>>,
    /// A tool call's raw output.
    #[serde(default, borrow)]
    pub raw_output: Option<Raw<'a>>,
    /// A compaction's complete summary.
    #[serde(default, borrow)]
    pub summary: Option<Raw<'a>>,
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

fn raw_tokens(raw: Option<Raw<'_>>, family: Family) -> u64 {
    match raw {
        Some(r) if r.get() != "null" => tokens(r.get(), family),
        _ => 0,
    }
}

fn content_tokens(update: &Update<'_>, family: Family) -> u64 {
    update.content.map_or(0, |c| json_block_tokens(c.get(), family))
}

/// [`blocks_tokens`]/`block_tokens` over JSON text, without building a `Value`: one walk that
/// counts the text strings in place. For the bytes-per-token families a string's decoded length
/// is all the estimate needs, so nothing is decoded or copied. Objects whose reading would
/// depend on `Value`'s rules for odd input (a repeated or escaped member name, an escaped
/// `type`) take the `Value` path, so both always agree.
pub fn json_block_tokens(json: &str, family: Family) -> u64 {
    let mut p = Scanner::new(json);
    // `Value` decodes every string, so one surrogate escape that pairs with nothing fails it
    // whole; the walk skips most strings, so content with surrogate escapes takes that path.
    let surrogates = memchr::memmem::find_iter(json.as_bytes(), b"\\u").any(|at| {
        let h = &json.as_bytes()[at + 2..];
        matches!(h.first(), Some(b'd' | b'D'))
            && matches!(h.get(1), Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'))
    });
    let walked = if surrogates { Err(Invalid) } else { walk(&mut p, family, 0) };
    match walked {
        Ok(n) => n,
        Err(_) => serde_json::from_str::<Value>(json).map_or(0, |v| block_tokens(&v, family)),
    }
}

/// Member names remembered per object to notice a repeated one; more members take the
/// `Value` path.
const WALK_MEMBERS: usize = 16;
/// Nesting followed by the walk; deeper content takes the `Value` path.
const WALK_DEPTH: u32 = 64;

fn walk(p: &mut Scanner<'_>, family: Family, depth: u32) -> Result<u64, Invalid> {
    if depth > WALK_DEPTH {
        return Err(Invalid);
    }
    match p.peek()? {
        b'{' => {
            let mut names: [&str; WALK_MEMBERS] = [""; WALK_MEMBERS];
            let mut n_names = 0;
            let mut media = false;
            let mut sum = 0u64;
            p.object(|p, key| {
                if key.escaped || n_names == WALK_MEMBERS || names[..n_names].contains(&key.raw) {
                    return Err(Invalid);
                }
                names[n_names] = key.raw;
                n_names += 1;
                match (key.raw, p.peek()?) {
                    ("type", b'"') => {
                        let t = p.string()?;
                        if t.escaped {
                            return Err(Invalid);
                        }
                        media = matches!(t.raw, "image" | "audio");
                    }
                    ("text", b'"') => sum += text_tokens(p.string()?, family)?,
                    ("_meta" | "annotations" | "data", _) => {
                        p.value()?;
                    }
                    (_, b'{' | b'[') => sum += walk(p, family, depth + 1)?,
                    _ => {
                        p.value()?;
                    }
                }
                Ok(())
            })?;
            Ok(if media { MEDIA_TOKENS } else { sum })
        }
        b'[' => {
            let mut sum = 0u64;
            p.array(|p| {
                sum += walk(p, family, depth + 1)?;
                Ok(())
            })?;
            Ok(sum)
        }
        _ => {
            // Every string is decoded by `Value`, so one that cannot be decoded fails it.
            if p.peek()? == b'"' {
                p.string()?.decoded_len().ok_or(Invalid)?;
            } else {
                p.value()?;
            }
            Ok(0)
        }
    }
}

/// Tokens of one JSON string: o200k needs the text; the other families only its length.
fn text_tokens(s: Str<'_>, family: Family) -> Result<u64, Invalid> {
    if family == Family::OpenAi {
        return Ok(tokens(&s.decode().ok_or(Invalid)?, family));
    }
    Ok(by_bytes(s.decoded_len().ok_or(Invalid)? as u64, family))
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
    fn walk_agrees_with_value() {
        let cases = [
            r#"{"type":"text","text":"Hello from mock."}"#,
            r#"{"type":"text","text":"a\nb \u00e9\ud83d\ude00"}"#,
            r#"{"type":"image","data":"aGVsbG8=","text":"ignored"}"#,
            r#"{"text":"first","type":"audio"}"#,
            r#"[{"type":"content","content":{"type":"text","text":"x y z"}},{"type":"diff","path":"/a","newText":"n"}]"#,
            r#"{"type":"resource","resource":{"uri":"file:///a","text":"Hello from mock."},"_meta":{"text":"no"}}"#,
            r#"{"text":"a","text":"bbbbbbbbbbbbb"}"#,
            r#"{"t\u0065xt":"aaaaaaaaaa"}"#,
            r#"{"type":"im\u0061ge"}"#,
            r#"{"text":{"text":"nested"}}"#,
            r#"{"text":"\ud800"}"#,
            r#"{"other":"\ud800","text":"abc"}"#,
            r#""just a string""#,
            r#"{"text":""}"#,
            r#"{"annotations":{"text":"no"},"text":12}"#,
        ];
        for c in cases {
            for f in [Family::OpenAi, Family::Anthropic, Family::Other] {
                let want = serde_json::from_str::<Value>(c).map_or(0, |v| block_tokens(&v, f));
                assert_eq!(json_block_tokens(c, f), want, "{c} {f:?}");
            }
        }
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
