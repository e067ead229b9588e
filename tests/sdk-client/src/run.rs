//! One run of the SDK client: the script it follows and what it saw, the types it writes as JSON
//! (`--transcript`) and the tests read back. One file for both sides: the client's crate has it
//! as a module, and the tests crate (another workspace) includes the same file by path. Only std,
//! serde and serde_json here.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the client does after `initialize` and `session/new`.
#[derive(Debug, Clone)]
pub struct SdkScript {
    /// Prompts sent in order, each as one `session/prompt` with a single text block.
    pub prompts: Vec<String>,
    /// After the prompts, `session/load` the same session if the agent advertises `loadSession`.
    pub load: bool,
    /// Limit for the whole run; the agent is killed and an error returned when it passes.
    pub timeout: Duration,
    /// Let the agent's stderr through to ours instead of capturing it into the transcript.
    pub inherit_stderr: bool,
    /// How long to keep listening after the last response, for notifications sent after it
    /// (a relay's `usage_update` after `session/load`, say).
    pub linger: Duration,
}

impl Default for SdkScript {
    fn default() -> Self {
        Self {
            prompts: Vec::new(),
            load: false,
            timeout: Duration::from_secs(60),
            inherit_stderr: false,
            linger: Duration::from_millis(250),
        }
    }
}

impl SdkScript {
    /// An empty script: `initialize` and `session/new` only.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a prompt.
    #[must_use]
    pub fn prompt(mut self, text: impl Into<String>) -> Self {
        self.prompts.push(text.into());
        self
    }

    /// Sets whether to `session/load` at the end.
    #[must_use]
    pub fn load(mut self, load: bool) -> Self {
        self.load = load;
        self
    }

    /// Sets the time limit of the run.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long to listen after the last response.
    #[must_use]
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets whether the agent's stderr goes straight to ours.
    #[must_use]
    pub fn inherit_stderr(mut self, inherit: bool) -> Self {
        self.inherit_stderr = inherit;
        self
    }
}

/// One `session/update` notification.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SdkUpdate {
    /// The label of the last response received before it (`"session/new"`, `"session/prompt#0"`,
    /// …): a `usage_update` sent right after `session/new` has `after == "session/new"`.
    pub after: String,
    /// `params.sessionId`.
    pub session_id: String,
    /// `params.update` exactly as received.
    pub raw: Value,
    /// The SDK's typed `SessionUpdate`, serialised back to JSON; `null` when the SDK rejected the
    /// notification (an SDK-typed client would silently never see it).
    pub typed: Value,
    /// What the typed parse dropped or changed (see `lost_fields`), or why it was rejected;
    /// empty when nothing.
    pub lost: Vec<String>,
}

impl SdkUpdate {
    /// The `sessionUpdate` discriminator.
    #[must_use]
    pub fn kind(&self) -> &str {
        self.raw.get("sessionUpdate").and_then(Value::as_str).unwrap_or("")
    }
}

/// The response to one of the client's requests.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SdkResponse {
    /// The method of the request.
    pub method: String,
    /// The method, with `#n` for the n-th prompt (`"session/prompt#0"`).
    pub label: String,
    /// The `result` exactly as received.
    pub raw: Value,
    /// The SDK's typed response, serialised back to JSON.
    pub typed: Value,
    /// What the typed parse dropped or changed (see `lost_fields`).
    pub lost: Vec<String>,
}

/// Everything one run saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SdkTranscript {
    /// The session from `session/new`.
    pub session_id: String,
    /// The `initialize` response.
    pub initialize: SdkResponse,
    /// The `session/new` response.
    pub new_session: SdkResponse,
    /// The `session/prompt` responses, in prompt order.
    pub prompts: Vec<SdkResponse>,
    /// The `session/load` response, when the script asked for it and the agent supports it.
    pub load: Option<SdkResponse>,
    /// All `session/update` notifications, in arrival order.
    pub updates: Vec<SdkUpdate>,
    /// Every message received from the agent, in order, as one JSON object each:
    /// `{"kind":"update",…}`, `{"kind":"response",…}`, `{"kind":"request",…}` or
    /// `{"kind":"notification",…}`.
    pub events: Vec<Value>,
    /// The agent's stderr, unless the script inherited it.
    pub stderr: String,
}

impl SdkTranscript {
    /// The `usage_update` notifications, in order.
    pub fn usage_updates(&self) -> impl Iterator<Item = &SdkUpdate> {
        self.updates.iter().filter(|u| u.kind() == "usage_update")
    }

    /// The updates received after the response labelled `label` and before the next response.
    pub fn updates_after<'a>(&'a self, label: &'a str) -> impl Iterator<Item = &'a SdkUpdate> + 'a {
        self.updates.iter().filter(move |u| u.after == label)
    }

    /// Everything the typed parses lost, as `"<where>: <path> …"` lines; empty when nothing.
    #[must_use]
    pub fn lost(&self) -> Vec<String> {
        let responses = [&self.initialize, &self.new_session]
            .into_iter()
            .chain(&self.prompts)
            .chain(&self.load);
        let mut out: Vec<String> = responses
            .flat_map(|r| r.lost.iter().map(move |l| format!("{}: {l}", r.label)))
            .collect();
        for (i, u) in self.updates.iter().enumerate() {
            out.extend(u.lost.iter().map(|l| format!("update #{i} ({}): {l}", u.kind())));
        }
        out
    }
}
