//! What a model-call request asks for, read from its JSON body: the model, whether it streams
//! and will state its usage, whether it declares tools, and a fingerprint of its system prompt.
//!
//! Bodies may be cut short (the proxy may keep only a prefix of a large one) or not JSON at all
//! (compressed): whatever cannot be read stays `None`/`false`. Only the fields the tap needs are
//! parsed; the conversation itself is skipped over unread.

use serde_json::Value;

use super::{Api, gemini_path_model, gemini_path_streams, json};

/// What a request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The model asked for: the body's `model` (Anthropic, OpenAI, Code Assist) or the path's
    /// (Gemini API).
    pub model: Option<String>,
    /// Whether the response streams (`stream: true`; Gemini: `:streamGenerateContent`).
    pub stream: bool,
    /// Whether the response will state its usage: always, except for a Chat Completions stream
    /// without `stream_options.include_usage: true`, whose usage must then be estimated.
    pub include_usage: bool,
    /// Whether the request declares tools (a non-empty `tools` array); agents' main loops do,
    /// their titles and checks mostly do not.
    pub has_tools: bool,
    /// A stable hash (FNV-1a 64) of the system prompt's text, to tell apart the prompts an agent
    /// uses (main loop, subagents, side queries). Claude Code's `x-anthropic-billing-header`
    /// line changes on every request and is left out.
    pub system_fingerprint: Option<u64>,
    /// The body's length in bytes, for estimates; set it to the full length if `body` was a
    /// prefix.
    pub prompt_bytes: usize,
}

impl RequestInfo {
    /// Reads a request to `api` at `path` (the path matters for Gemini, which names the model
    /// and the streaming in it). Never fails: unreadable fields stay unset.
    pub fn read(api: Api, path: &str, body: &[u8]) -> RequestInfo {
        let mut info = RequestInfo { prompt_bytes: body.len(), ..RequestInfo::default() };
        let mut asks_usage = false;
        for (key, value) in json::members(body) {
            match (api, key.as_ref()) {
                (Api::Gemini, "model") => (),
                (_, "model") => info.model = json::string(value),
                (Api::AnthropicMessages | Api::OpenAiResponses | Api::OpenAiChat, "stream") => {
                    info.stream = value == b"true";
                }
                (Api::OpenAiChat, "stream_options") => {
                    asks_usage = json::member(value, "include_usage") == Some(b"true");
                }
                (Api::GeminiCodeAssist, "request") => info.read_gemini_request(value),
                (Api::GeminiCodeAssist, _) => (),
                // Chat Completions' deprecated form of tools.
                (_, "tools") | (Api::OpenAiChat, "functions") => {
                    info.has_tools |= json::non_empty_array(value);
                }
                (Api::AnthropicMessages, "system") | (Api::OpenAiResponses, "instructions") => {
                    info.system_fingerprint = fingerprint(value);
                }
                (Api::OpenAiChat, "messages") => info.system_fingerprint = chat_system(value),
                (Api::Gemini, "systemInstruction" | "system_instruction") => {
                    info.system_fingerprint = fingerprint(value);
                }
                _ => (),
            }
        }
        if matches!(api, Api::Gemini | Api::GeminiCodeAssist) {
            info.stream = gemini_path_streams(path);
        }
        if api == Api::Gemini {
            info.model = gemini_path_model(path);
        }
        info.include_usage = api != Api::OpenAiChat || !info.stream || asks_usage;
        info
    }

    /// Code Assist wraps a Gemini request as `{"model", "project", "request": {…}}`.
    fn read_gemini_request(&mut self, request: &[u8]) {
        for (key, value) in json::members(request) {
            match key.as_ref() {
                "tools" => self.has_tools |= json::non_empty_array(value),
                "systemInstruction" | "system_instruction" => {
                    self.system_fingerprint = fingerprint(value);
                }
                _ => (),
            }
        }
    }
}

/// The fingerprint of the first `system` or `developer` message of a Chat Completions request.
fn chat_system(messages: &[u8]) -> Option<u64> {
    json::elements(messages).find_map(|message| {
        let role = json::member(message, "role").and_then(json::string)?;
        match role.as_str() {
            "system" | "developer" => json::member(message, "content").and_then(fingerprint),
            _ => None,
        }
    })
}

/// The fingerprint of the text a system-prompt value holds, whatever its shape: a string, text
/// blocks, Gemini parts, messages with content.
fn fingerprint(value: &[u8]) -> Option<u64> {
    let value: Value = serde_json::from_slice(value).ok()?;
    let mut hash = Fnv1a::default();
    let mut any = false;
    hash_text(&value, &mut hash, &mut any);
    any.then(|| hash.finish())
}

/// The line Claude Code puts first in its system prompt; its values change on every request.
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

fn hash_text(value: &Value, hash: &mut Fnv1a, any: &mut bool) {
    match value {
        Value::String(text) => {
            let text = match text.strip_prefix(BILLING_HEADER) {
                Some(rest) => rest.split_once('\n').map_or("", |(_, after)| after),
                None => text,
            };
            if !text.is_empty() {
                // A separator keeps ["ab", "c"] and ["a", "bc"] apart.
                hash.write(text.as_bytes());
                hash.write(b"\n");
                *any = true;
            }
        }
        Value::Array(items) => {
            for item in items {
                hash_text(item, hash, any);
            }
        }
        Value::Object(object) => {
            let inner = ["text", "content", "parts"].iter().find_map(|key| object.get(*key));
            if let Some(inner) = inner {
                hash_text(inner, hash, any);
            }
        }
        _ => (),
    }
}

/// FNV-1a, 64-bit: small, fast and the same on every platform and release, so a fingerprint
/// can be compared across runs.
#[derive(Debug, Clone, Copy)]
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        let hash = |text: &str| {
            let mut hash = Fnv1a::default();
            hash.write(text.as_bytes());
            hash.finish()
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }
}
