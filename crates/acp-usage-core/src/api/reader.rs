//! Reading a model call's response body, fed in whatever pieces the network delivers, into the
//! call's usage.
//!
//! The body's first significant byte tells its framing: `{` or `[` is JSON, anything else an
//! event stream (the `content-type` only settles bodies that look like neither). Framers cut
//! whole events or values out of the bytes; each API's reader takes what it needs from them and
//! notes the terminal event, after which nothing the body still holds changes the usage.

use serde_json::Value;

use super::anthropic::Messages;
use super::gemini::Generate;
use super::json::ValueFramer;
use super::openai::{Chat, Responses};
use super::said::Said;
use super::sse::SseFramer;
use super::{Api, RequestInfo};
use crate::estimate::Family;
use crate::tokens::TokenRecord;

/// The most a reader keeps: one SSE event, or one JSON body (or array element). Responses'
/// terminal event repeats the whole output, so this is generous.
const LIMIT: usize = 16 << 20;

/// One model call as its response told it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The call's counts, normalised; `model` is the response's model, else the request's.
    pub record: TokenRecord,
    /// The provider's id of the reply: Anthropic's message id, the Responses response id, the
    /// Chat completion id, Gemini's `responseId`.
    pub id: Option<String>,
    /// The response reached its terminal event (or its JSON body closed) with a success status,
    /// so the counts are final; false for cut streams and errors, whose counts are what was seen.
    pub complete: bool,
    /// The counts are estimated (a Chat Completions reply that stated no usage), not read.
    pub estimated: bool,
}

/// Reads one response body; see the module documentation.
#[derive(Debug)]
pub struct UsageReader {
    request_model: Option<String>,
    prompt_bytes: usize,
    /// The `content-type` says event stream.
    declared_sse: bool,
    limit: usize,
    framing: Framing,
    reading: Reading,
}

#[derive(Debug)]
enum Framing {
    /// No significant byte yet.
    Sniffing,
    Sse(SseFramer),
    Json(ValueFramer),
    /// Neither (a compressed body, say): nothing is read.
    Unreadable,
}

#[derive(Debug)]
enum Reading {
    Anthropic(Messages),
    Responses(Responses),
    Chat(Chat),
    Gemini(Generate),
}

impl UsageReader {
    /// A reader for the response to `request`, a call to `api`; `content_type` is the
    /// response's header, when it has one.
    pub fn new(api: Api, content_type: Option<&str>, request: &RequestInfo) -> UsageReader {
        UsageReader::with_limit(api, content_type, request, LIMIT)
    }

    pub(super) fn with_limit(
        api: Api,
        content_type: Option<&str>,
        request: &RequestInfo,
        limit: usize,
    ) -> UsageReader {
        let reading = match api {
            Api::AnthropicMessages => Reading::Anthropic(Messages::default()),
            Api::OpenAiResponses => Reading::Responses(Responses::default()),
            Api::OpenAiChat => Reading::Chat(Chat::default()),
            Api::Gemini | Api::GeminiCodeAssist => Reading::Gemini(Generate::default()),
        };
        let declared_sse = content_type
            .is_some_and(|content_type| content_type.to_ascii_lowercase().contains("event-stream"));
        UsageReader {
            request_model: request.model.clone(),
            prompt_bytes: request.prompt_bytes,
            declared_sse,
            limit,
            framing: Framing::Sniffing,
            reading,
        }
    }

    /// Reads the next piece of the body. Returns true once the usage is final: the terminal
    /// event has been read (or the JSON body closed), so the caller may report the call before
    /// forwarding the rest; it stays true for later pieces.
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        let mut chunk = chunk;
        if matches!(self.framing, Framing::Sniffing) {
            // Leading whitespace and a byte-order mark say nothing and change nothing.
            let start = chunk.iter().position(|&byte| {
                !matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | 0xEF | 0xBB | 0xBF)
            });
            let Some(start) = start else { return self.is_final() };
            chunk = &chunk[start..];
            self.framing = match chunk[0] {
                b'{' | b'[' => Framing::Json(ValueFramer::new(self.limit)),
                byte if self.declared_sse || byte.is_ascii_alphabetic() || byte == b':' => {
                    Framing::Sse(SseFramer::new(self.limit, self.reading.skips()))
                }
                _ => Framing::Unreadable,
            };
        }
        let reading = &mut self.reading;
        match &mut self.framing {
            Framing::Sse(framer) => framer.feed(chunk, &mut |name, data| reading.event(name, data)),
            Framing::Json(framer) => {
                framer.feed(chunk, &mut |value| reading.value(value));
                if framer.is_done() {
                    // A closed JSON body has said all it will.
                    reading.said_mut().terminal = true;
                }
            }
            Framing::Sniffing | Framing::Unreadable => (),
        }
        self.is_final()
    }

    /// The subscription windows the body stated since the last call (Codex's
    /// `codex.rate_limits` events), observed at `observed_ms`.
    pub fn take_limits(&mut self, observed_ms: i64) -> Vec<crate::limits::Limit> {
        match &mut self.reading {
            Reading::Responses(r) if !r.rate_limits.is_empty() => {
                std::mem::take(&mut r.rate_limits)
                    .iter()
                    .flat_map(|event| crate::limits::from_codex_event_value(event, observed_ms))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Whether the usage is final (see [`UsageReader::feed`]).
    pub fn is_final(&self) -> bool {
        self.reading.said().terminal
    }

    /// The call as read, once the body ended or was cut, or as soon as [`UsageReader::feed`]
    /// returned true; `status` is the response's HTTP status. `None` when the response stated
    /// no usage (an error, a stream cut before any usage), except for a Chat Completions reply,
    /// whose usage is then estimated.
    pub fn finish(mut self, status: u16) -> Option<Observed> {
        let reading = &mut self.reading;
        if let Framing::Sse(framer) = &mut self.framing {
            framer.finish(&mut |name, data| reading.event(name, data));
        }
        let failed = status >= 400;
        let model = self.reading.said().model.clone().or(self.request_model);
        let (mut record, estimated) = match (self.reading.usage(), &self.reading) {
            (Some(record), _) => (record, false),
            (None, Reading::Chat(chat)) if !failed => {
                (chat.estimate(self.prompt_bytes, Family::of(model.as_deref()))?, true)
            }
            (None, _) => return None,
        };
        record.model = model;
        let said = self.reading.said();
        Some(Observed {
            record,
            id: said.id.clone(),
            complete: said.terminal && !failed,
            estimated,
        })
    }
}

impl Reading {
    /// The stream events this reader never looks at, by name.
    fn skips(&self) -> fn(&str) -> bool {
        match self {
            Reading::Anthropic(_) => Messages::skips,
            Reading::Responses(_) => Responses::skips,
            Reading::Chat(_) | Reading::Gemini(_) => |_| false,
        }
    }

    /// One SSE event (the framer has dropped those [`Reading::skips`] names).
    fn event(&mut self, _name: Option<&str>, data: &[u8]) {
        if data.trim_ascii() == b"[DONE]" {
            if let Reading::Chat(chat) = self {
                chat.done();
            }
            return;
        }
        self.value(data);
    }

    /// One JSON value: an event's data, a body, or an element of a Gemini array.
    fn value(&mut self, bytes: &[u8]) {
        // Anything that is not JSON (a truncated event, a server's own text) says nothing.
        let Ok(value) = serde_json::from_slice::<Value>(bytes) else { return };
        match self {
            Reading::Anthropic(messages) => messages.read(&value),
            Reading::Responses(responses) => responses.read(&value),
            Reading::Chat(chat) => chat.read(&value),
            Reading::Gemini(generate) => generate.read(&value),
        }
    }

    fn said(&self) -> &Said {
        match self {
            Reading::Anthropic(messages) => &messages.said,
            Reading::Responses(responses) => &responses.said,
            Reading::Chat(chat) => &chat.said,
            Reading::Gemini(generate) => &generate.said,
        }
    }

    fn said_mut(&mut self) -> &mut Said {
        match self {
            Reading::Anthropic(messages) => &mut messages.said,
            Reading::Responses(responses) => &mut responses.said,
            Reading::Chat(chat) => &mut chat.said,
            Reading::Gemini(generate) => &mut generate.said,
        }
    }

    fn usage(&self) -> Option<TokenRecord> {
        match self {
            Reading::Anthropic(messages) => messages.usage_record(),
            Reading::Responses(responses) => responses.usage_record(),
            Reading::Chat(chat) => chat.usage_record(),
            Reading::Gemini(generate) => generate.usage_record(),
        }
    }
}
