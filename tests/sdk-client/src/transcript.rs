//! What one run of the SDK client saw: the types it writes as JSON (`--transcript`) and the tests
//! read back. One file for both sides: the client's crate has it as a module, and the tests crate
//! (another workspace) includes the same file by path. Only serde and serde_json here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
