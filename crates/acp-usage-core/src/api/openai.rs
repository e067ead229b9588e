//! OpenAI responses: the Responses API (Codex) and Chat Completions with its many compatible
//! servers.
//!
//! Both count input with its cached part and output with its reasoning (`from_inclusive`). The
//! Responses API states usage once, in its terminal event or body. Chat Completions states it in
//! the completion body, or in a stream's last chunk only when the request asked with
//! `stream_options.include_usage`; without it the call is billed all the same, so the reader
//! keeps the streamed text (up to a budget) to estimate the output.

use serde_json::Value;

use super::said::{Said, count};
use crate::estimate::{self, Family};
use crate::tokens::{Modifiers, TokenRecord};

/// What a Responses API response said so far.
#[derive(Debug, Default)]
pub(super) struct Responses {
    pub(super) said: Said,
    usage: Option<TokenRecord>,
    /// The response's `service_tier`, as the terminal event states it.
    service_tier: Option<String>,
    /// Codex's `codex.rate_limits` events, until taken.
    pub(super) rate_limits: Vec<Value>,
}

impl Responses {
    /// Events that never carry the response object: items, deltas, their ends.
    pub(super) fn skips(event: &str) -> bool {
        event.starts_with("response.")
            && !matches!(
                event,
                "response.created"
                    | "response.queued"
                    | "response.in_progress"
                    | "response.completed"
                    | "response.incomplete"
                    | "response.failed"
            )
    }

    /// Reads a stream event's data or a JSON body.
    pub(super) fn read(&mut self, value: &Value) {
        match value["type"].as_str() {
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                self.response(&value["response"]);
                self.said.terminal = true;
            }
            Some(kind) if kind.starts_with("response.") => self.response(&value["response"]),
            Some("codex.rate_limits") => self.rate_limits.push(value.clone()),
            // A JSON body is the response object itself (`response`, or Codex's compaction
            // `response.compaction`), which has `object` rather than `type`.
            None => self.response(value),
            Some(_) => (),
        }
    }

    fn response(&mut self, response: &Value) {
        self.said.note_id(&response["id"]);
        self.said.note_model(&response["model"]);
        // What the request asked for may not be what it got: the response's tier is billed.
        if let Some(tier) = response["service_tier"].as_str() {
            self.service_tier = Some(tier.to_owned());
        }
        let usage = &response["usage"];
        if usage.is_object() {
            let input = &usage["input_tokens_details"];
            let output = &usage["output_tokens_details"];
            self.usage = Some(TokenRecord::from_inclusive(
                count(&usage["input_tokens"]).unwrap_or(0),
                count(&input["cached_tokens"]).unwrap_or(0),
                count(&input["cache_write_tokens"]).unwrap_or(0),
                count(&usage["output_tokens"]).unwrap_or(0),
                count(&output["reasoning_tokens"]).unwrap_or(0),
            ));
        }
    }

    /// The usage seen, normalised.
    pub(super) fn usage_record(&self) -> Option<TokenRecord> {
        let mut record = self.usage.clone()?;
        record.modifiers = Modifiers::from_openai(self.service_tier.as_deref());
        Some(record)
    }
}

/// How much streamed text a Chat reader keeps for an estimate; beyond it only bytes are counted.
const TEXT_BUDGET: usize = 1 << 20;

/// What a Chat Completions response said so far.
#[derive(Debug, Default)]
pub(super) struct Chat {
    pub(super) said: Said,
    usage: Option<TokenRecord>,
    /// Completions or chunks read: the model did answer, with or without a usage.
    replies: usize,
    /// Generated text (content, tool names and arguments), for an estimate.
    text: String,
    /// Generated reasoning, for an estimate.
    reasoning: String,
    /// Bytes of generated text beyond [`TEXT_BUDGET`].
    unkept: u64,
}

impl Chat {
    /// Reads a chunk's data or a JSON body.
    pub(super) fn read(&mut self, value: &Value) {
        let choices = value["choices"].as_array();
        // OpenAI puts it at the top; Moonshot inside the finishing choice; Groq under `x_groq`.
        let usage = [&value["usage"], &value["choices"][0]["usage"], &value["x_groq"]["usage"]]
            .into_iter()
            .find(|usage| usage.is_object());
        if choices.is_none() && usage.is_none() {
            // Not a completion: an error object, or a server's own event.
            return;
        }
        self.replies += 1;
        if self.said.id.is_none() {
            self.said.note_id(&value["id"]);
        }
        self.said.note_model(&value["model"]);
        let mut finished = false;
        for choice in choices.map(Vec::as_slice).unwrap_or_default() {
            let message = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(message) = message {
                self.generated(message);
            }
            finished |= choice["finish_reason"].is_string();
        }
        if let Some(usage) = usage {
            self.usage = Some(chat_usage(usage));
            // Servers that report usage on every chunk (vLLM's continuous stats) are final
            // only once a choice finishes; OpenAI's own usage chunk has no choices.
            if finished || choices.is_none_or(|choices| choices.is_empty()) {
                self.said.terminal = true;
            }
        }
    }

    /// The stream's `data: [DONE]` sentinel.
    pub(super) fn done(&mut self) {
        self.said.terminal = true;
    }

    /// Keeps the text a delta or message generates.
    fn generated(&mut self, message: &Value) {
        match &message["content"] {
            Value::String(text) => self.keep(text, false),
            Value::Array(parts) => {
                for text in parts.iter().filter_map(|part| part["text"].as_str()) {
                    self.keep(text, false);
                }
            }
            _ => (),
        }
        // DeepSeek and qwen name it `reasoning_content`, OpenRouter `reasoning`.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = message[key].as_str() {
                self.keep(text, true);
            }
        }
        let calls = message["tool_calls"].as_array().map(Vec::as_slice).unwrap_or_default();
        let functions = calls.iter().map(|call| &call["function"]);
        for function in functions.chain([&message["function_call"]]) {
            for key in ["name", "arguments"] {
                if let Some(text) = function[key].as_str() {
                    self.keep(text, false);
                }
            }
        }
    }

    fn keep(&mut self, text: &str, reasoning: bool) {
        if self.text.len() + self.reasoning.len() + text.len() > TEXT_BUDGET {
            self.unkept += text.len() as u64;
        } else if reasoning {
            self.reasoning.push_str(text);
        } else {
            self.text.push_str(text);
        }
    }

    /// The usage seen, normalised.
    pub(super) fn usage_record(&self) -> Option<TokenRecord> {
        self.usage.clone()
    }

    /// An estimate for a reply that stated no usage: the prompt by its body's bytes, the output
    /// by the text streamed. `None` when no reply came at all.
    pub(super) fn estimate(&self, prompt_bytes: usize, family: Family) -> Option<TokenRecord> {
        if self.replies == 0 {
            return None;
        }
        let thought = estimate::count(&self.reasoning, family);
        let output =
            estimate::count(&self.text, family) + thought + estimate::by_bytes(self.unkept, family);
        Some(TokenRecord {
            input: estimate::by_bytes(prompt_bytes as u64, family),
            output,
            thought,
            ..TokenRecord::default()
        })
    }
}

/// A Chat Completions `usage` object, normalised, with the cache fields compatible servers use
/// when OpenAI's are missing.
fn chat_usage(usage: &Value) -> TokenRecord {
    let prompt = &usage["prompt_tokens_details"];
    let cached =
        [&prompt["cached_tokens"], &usage["prompt_cache_hit_tokens"], &usage["cached_tokens"]]
            .into_iter()
            .find_map(count)
            .unwrap_or(0);
    let mut record = TokenRecord::from_inclusive(
        count(&usage["prompt_tokens"]).unwrap_or(0),
        cached,
        count(&prompt["cache_write_tokens"]).unwrap_or(0),
        count(&usage["completion_tokens"]).unwrap_or(0),
        count(&usage["completion_tokens_details"]["reasoning_tokens"]).unwrap_or(0),
    );
    // OpenRouter states each call's cost, in USD.
    record.stated_cost = usage["cost"].as_f64().filter(|cost| cost.is_finite() && *cost >= 0.0);
    record
}
