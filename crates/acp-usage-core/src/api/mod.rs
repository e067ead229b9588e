//! The LLM-API tap's reading: which HTTP requests are billed model calls, what a request asks
//! for, and the token usage its response states.
//!
//! The binary crate proxies agents' LLM requests unchanged; this module only looks at copies of
//! the bytes. [`classify`] picks the model calls out of an agent's traffic, [`RequestInfo::read`]
//! reads the request body, and a [`UsageReader`] is fed the response body chunk by chunk (SSE or
//! JSON, split anywhere) and says as soon as the usage is final, so the proxy can report the
//! call before it forwards the last bytes. Each API's conventions are normalised into a
//! [`TokenRecord`](crate::tokens::TokenRecord) by its constructors (research/pricing-and-tokens.md §6).

mod anthropic;
mod gemini;
mod json;
mod openai;
mod reader;
mod request;
mod said;
mod sse;

#[cfg(test)]
mod tests;

use std::borrow::Cow;

pub use reader::{Observed, UsageReader};
pub use request::RequestInfo;

/// An LLM API whose model calls the tap reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// Anthropic Messages: `POST …/messages`.
    AnthropicMessages,
    /// OpenAI Responses: `POST …/responses`, and Codex's `…/responses/compact`.
    OpenAiResponses,
    /// OpenAI Chat Completions and the many compatible servers: `POST …/chat/completions`.
    OpenAiChat,
    /// Gemini API and Vertex AI: `POST …/models/<model>:generateContent` or
    /// `:streamGenerateContent`.
    Gemini,
    /// Google's Code Assist (Gemini CLI signed in with Google): `POST …/v1internal:generateContent`
    /// or `:streamGenerateContent`, each chunk wrapped as `{"response": …}`.
    GeminiCodeAssist,
}

impl Api {
    /// A short stable name, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenAiResponses => "openai-responses",
            Api::OpenAiChat => "openai-chat",
            Api::Gemini => "gemini",
            Api::GeminiCodeAssist => "gemini-code-assist",
        }
    }
}

/// Which API a request calls, when it is a billed model call; `None` for everything else
/// (token counting, model lists, embeddings, batches, GETs).
///
/// `path` is the request target after any proxy prefix; it may carry a base path (`/v1`,
/// `/api/v1`, `/backend-api/codex`, a Vertex project path) and a query string.
pub fn classify(method: &str, path: &str) -> Option<Api> {
    if !method.eq_ignore_ascii_case("POST") {
        return None;
    }
    let path = bare_path(path);
    let path = path.strip_suffix('/').unwrap_or(&path);
    if let Some(api) = gemini_call(path) {
        return Some(api);
    }
    if path.ends_with("/messages") {
        // OpenAI's Assistants API posts messages into threads: no model runs.
        return (!path.contains("/threads/")).then_some(Api::AnthropicMessages);
    }
    if path.ends_with("/responses") || path.ends_with("/responses/compact") {
        return Some(Api::OpenAiResponses);
    }
    if path.ends_with("/chat/completions") {
        return Some(Api::OpenAiChat);
    }
    None
}

/// The model a Gemini API path names (`…/models/gemini-2.5-pro:streamGenerateContent`).
pub(crate) fn gemini_path_model(path: &str) -> Option<String> {
    let path = bare_path(path);
    let (_, rest) = path.rsplit_once("/models/")?;
    let (model, _) = rest.split_once(':')?;
    (!model.is_empty() && !model.contains('/')).then(|| model.to_owned())
}

/// Whether a Gemini path asks for a stream.
pub(crate) fn gemini_path_streams(path: &str) -> bool {
    bare_path(path).ends_with(":streamGenerateContent")
}

/// `path` without its query or fragment; a percent-encoded `:` decoded, since some clients
/// encode the method separator of Google's custom methods.
fn bare_path(path: &str) -> Cow<'_, str> {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    match path.contains("%3A") || path.contains("%3a") {
        true => Cow::Owned(path.replace("%3A", ":").replace("%3a", ":")),
        false => Cow::Borrowed(path),
    }
}

/// Gemini API, Vertex AI and Code Assist model calls: Google's `resource:method` form.
fn gemini_call(path: &str) -> Option<Api> {
    let (parent, last) = path.rsplit_once('/')?;
    let (resource, method) = last.rsplit_once(':')?;
    if !matches!(method, "generateContent" | "streamGenerateContent") || resource.is_empty() {
        return None;
    }
    if resource == "v1internal" {
        return Some(Api::GeminiCodeAssist);
    }
    (parent.ends_with("/models") || parent == "models").then_some(Api::Gemini)
}
