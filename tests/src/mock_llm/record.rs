//! What the mock remembers of every request: enough to compute what an agent was billed for.

use serde::Serialize;
use serde_json::Value;

use super::script::Usage;

/// The API family a request belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Anthropic,
    /// OpenAI Responses (Codex), and the shared `GET /v1/models` listing.
    OpenAi,
    /// OpenAI Chat Completions (qwen-code, kimi-cli, fast-agent, cline): a provider of its own
    /// because its stream carries usage only on request (`stream_options.include_usage`), so a
    /// test may want these calls apart. [`sum_usage`] over all calls is unaffected: every
    /// [`Usage`] is normalised the same way.
    OpenAiChat,
    Gemini,
    /// Google's Code Assist (`v1internal:`, Gemini CLI signed in with Google): Gemini requests
    /// and responses, each wrapped.
    CodeAssist,
    /// A path the mock does not serve.
    Unknown,
}

/// Why the request was made, as far as the mock can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A main-agent model call: it declares tools. Consumes the turn script.
    Main,
    /// A billed model call outside the conversation: title generation, next-speaker checks,
    /// classifiers. Does not consume the script.
    Auxiliary,
    /// `count_tokens` / `countTokens`: free, no usage.
    CountTokens,
    /// A warm-up: Codex's WebSocket `response.create` with `generate: false`. Billed (its input
    /// is processed), generates nothing, does not consume the script.
    Warmup,
    /// `GET /v1/models` and the like.
    Listing,
    /// Anything else; answered 404.
    Unhandled,
}

impl CallKind {
    /// Whether the provider bills this call (it produced tokens).
    pub fn is_billed(self) -> bool {
        matches!(self, CallKind::Main | CallKind::Auxiliary | CallKind::Warmup)
    }
}

/// One request the mock answered.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// Order of arrival, from 0.
    pub seq: usize,
    pub unix_ms: u128,
    pub method: String,
    /// Path and query.
    pub target: String,
    pub provider: Provider,
    pub kind: CallKind,
    /// The model the request named (Gemini: from the path).
    pub model: Option<String>,
    pub streamed: bool,
    pub status: u16,
    /// The usage served, normalised; `None` for calls that bill nothing.
    pub usage: Option<Usage>,
    /// The usage object exactly as served, in the provider's own shape. `None` for a billed call
    /// whose response carried no usage: a Chat Completions stream without
    /// `stream_options.include_usage` (the agent never saw a number, yet `usage` is set).
    pub native_usage: Option<Value>,
    /// Index into the script's steps; `None` for the default reply and auxiliary calls.
    pub script_step: Option<usize>,
    /// The tool call the response asked for: `{"name", "args"}`.
    pub tool_call: Option<Value>,
    /// Names of the tools the request declared.
    pub declared_tools: Vec<String>,
    pub user_agent: Option<String>,
    /// Request headers that tell calls apart: `anthropic-beta`, `originator`, `x-goog-api-client`.
    pub headers: Vec<(String, String)>,
    /// The `request-id` (Anthropic) or response id the mock sent back.
    pub response_id: String,
    /// The call came over the Responses WebSocket (a `response.create` message), not HTTP.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub websocket: bool,
    /// The port of 127.0.0.1 it came to (the mock's own, or one of [`super::MockLlm::listen_also`]).
    pub port: u16,
    /// The request body (JSON when it parsed); kept in memory only.
    #[serde(skip)]
    pub request_body: Value,
    /// The request body's bytes as they arrived (a test compares what reached the mock with and
    /// without the tap); kept in memory only.
    #[serde(skip)]
    pub request_bytes: Vec<u8>,
}

/// Sums the usage of the billed calls among `calls`.
pub fn sum_usage<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Usage {
    calls.into_iter().filter_map(|call| call.usage).sum()
}

/// The request headers that carry a login's credentials, lowercase.
pub const CREDENTIAL_HEADERS: &[&str] =
    &["authorization", "x-api-key", "x-goog-api-key", "chatgpt-account-id"];

/// One request as it arrived, with the credentials it carried. Kept in memory for the tests'
/// assertions; never serialised, so that no log or fixture holds a token.
#[derive(Clone)]
pub struct Received {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Whether it asked for a protocol upgrade (a WebSocket).
    pub upgrade: bool,
    /// [`CREDENTIAL_HEADERS`] present on the request: name and value.
    pub credentials: Vec<(String, String)>,
}

impl Received {
    pub(crate) fn of(request: &super::Request) -> Received {
        Received {
            method: request.method.clone(),
            target: request.target.clone(),
            upgrade: request.header("upgrade").is_some(),
            credentials: request
                .headers
                .iter()
                .filter(|(name, _)| CREDENTIAL_HEADERS.contains(&name.as_str()))
                .cloned()
                .collect(),
        }
    }

    /// The value of credential header `name`.
    pub fn credential(&self, name: &str) -> Option<&str> {
        self.credentials.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

// Debug without the values: a failed assertion prints requests, never tokens.
impl std::fmt::Debug for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.credentials.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Received")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("upgrade", &self.upgrade)
            .field("credentials", &names)
            .finish()
    }
}
