//! Gemini responses (Gemini API, Vertex AI, Code Assist): a `GenerateContentResponse` body, or a
//! stream of them (SSE with `alt=sse`, a JSON array without).
//!
//! Every chunk may carry `usageMetadata`, cumulative, so the last one counts. `promptTokenCount`
//! includes the cached part; `candidatesTokenCount` leaves out the thoughts, billed as output;
//! `toolUsePromptTokenCount` (prompts of built-in tools such as search) is outside the prompt
//! count but billed as input, so it is added to it. Code Assist wraps each chunk as
//! `{"response": {…}, "traceId": …}`.

use serde_json::Value;

use super::said::{Said, count};
use crate::tokens::TokenRecord;

/// What a Gemini response said so far.
#[derive(Debug, Default)]
pub(super) struct Generate {
    pub(super) said: Said,
    usage: Option<TokenRecord>,
}

impl Generate {
    /// Reads one chunk or a JSON body.
    pub(super) fn read(&mut self, value: &Value) {
        let response = match value.get("response") {
            Some(inner) if inner.is_object() => inner,
            _ => value,
        };
        let usage = &response["usageMetadata"];
        if usage.is_object() {
            let prompt = count(&usage["promptTokenCount"]).unwrap_or(0)
                + count(&usage["toolUsePromptTokenCount"]).unwrap_or(0);
            self.usage = Some(TokenRecord::from_gemini(
                prompt,
                count(&usage["cachedContentTokenCount"]).unwrap_or(0),
                count(&usage["candidatesTokenCount"]).unwrap_or(0),
                count(&usage["thoughtsTokenCount"]).unwrap_or(0),
            ));
        }
        self.said.note_id(&response["responseId"]);
        self.said.note_model(&response["modelVersion"]);
        let candidates = response["candidates"].as_array().map(Vec::as_slice).unwrap_or_default();
        let finished = candidates.iter().any(|candidate| candidate["finishReason"].is_string());
        // A blocked prompt gets no candidates at all, only the reason.
        let blocked = response["promptFeedback"]["blockReason"].is_string();
        if finished || blocked {
            self.said.terminal = true;
        }
    }

    /// The last usage seen, normalised.
    pub(super) fn usage_record(&self) -> Option<TokenRecord> {
        self.usage.clone()
    }
}
