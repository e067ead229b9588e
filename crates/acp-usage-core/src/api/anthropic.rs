//! Anthropic Messages responses: the `message` JSON body, or its stream of `message_start`,
//! content-block events, `message_delta` and `message_stop`.
//!
//! A stream states the prompt side in `message_start.message.usage` with a provisional output
//! count, then cumulative counts in `message_delta.usage` (the final output, and on newer API
//! versions the prompt side again). Cumulative counts never shrink, so each field keeps its
//! largest value: later reports replace earlier ones, and a gateway's placeholder zero (some
//! send `input_tokens: 0` in `message_start` and the real count later, or the reverse) never
//! hides a real count.

use serde_json::Value;

use super::said::{Said, count};
use crate::tokens::{Modifiers, TokenRecord};

/// What an Anthropic response said so far.
#[derive(Debug, Default)]
pub(super) struct Messages {
    pub(super) said: Said,
    counts: Option<Counts>,
    /// Fast mode or US-only inference, stated by any usage object of the response.
    modifiers: Modifiers,
}

/// The usage fields as Anthropic names them, each the largest value seen.
#[derive(Debug, Default)]
struct Counts {
    input: u64,
    cache_read: u64,
    cache_write: u64,
    write_5m: u64,
    write_1h: u64,
    output: u64,
}

impl Messages {
    /// Events that never carry usage: the content itself and keep-alives.
    pub(super) fn skips(event: &str) -> bool {
        matches!(
            event,
            "ping" | "content_block_start" | "content_block_delta" | "content_block_stop"
        )
    }

    /// Reads a stream event's data or a JSON body.
    pub(super) fn read(&mut self, value: &Value) {
        match value["type"].as_str() {
            Some("message_start") => self.message(&value["message"]),
            Some("message_delta") => {
                self.usage(&value["usage"]);
                if value["delta"]["stop_reason"].is_string() {
                    self.said.terminal = true;
                }
            }
            Some("message_stop") => self.said.terminal = true,
            Some("message") => self.message(value),
            // Compatible servers may leave out the body's type.
            None if value.get("usage").is_some() => self.message(value),
            _ => (),
        }
    }

    fn message(&mut self, message: &Value) {
        self.said.note_id(&message["id"]);
        self.said.note_model(&message["model"]);
        self.usage(&message["usage"]);
    }

    fn usage(&mut self, usage: &Value) {
        if !usage.is_object() {
            return;
        }
        let stated =
            Modifiers::from_anthropic(usage["speed"].as_str(), usage["inference_geo"].as_str());
        self.modifiers = self.modifiers.union(stated);
        let counts = self.counts.get_or_insert_with(Counts::default);
        let split = &usage["cache_creation"];
        let fields = [
            (&mut counts.input, &usage["input_tokens"]),
            (&mut counts.cache_read, &usage["cache_read_input_tokens"]),
            (&mut counts.cache_write, &usage["cache_creation_input_tokens"]),
            (&mut counts.write_5m, &split["ephemeral_5m_input_tokens"]),
            (&mut counts.write_1h, &split["ephemeral_1h_input_tokens"]),
            (&mut counts.output, &usage["output_tokens"]),
        ];
        for (kept, reported) in fields {
            *kept = (*kept).max(count(reported).unwrap_or(0));
        }
    }

    /// The usage seen, normalised; `None` when no usage object came.
    pub(super) fn usage_record(&self) -> Option<TokenRecord> {
        let counts = self.counts.as_ref()?;
        // Writes without the TTL split are 5-minute ones (the default TTL); with it, whatever the
        // total has beyond the split is too.
        let write_1h = counts.write_1h;
        let write_5m = counts.write_5m.max(counts.cache_write.saturating_sub(write_1h));
        let mut record = TokenRecord::from_anthropic(
            counts.input,
            counts.cache_read,
            write_5m,
            write_1h,
            counts.output,
        );
        record.modifiers = self.modifiers;
        Some(record)
    }
}
