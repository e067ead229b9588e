//! acp-usage-schema: the wire types acp-usage reads and writes.
//!
//! ACP's own types come from the official `agent-client-protocol-schema` crate (pinned exactly,
//! with the unstable end-turn `usage` enabled), re-exported as [`acp`]. What acp-usage adds lives
//! here: the payload it puts under its own namespaced key [`META_KEY`] in `_meta`.
//!
//! These types are for what acp-usage *writes*; what peers send is observed through borrowed
//! views in the binary crate and never rejected for unknown fields.
//!
//! [`generate`] builds `schema/schema.json` (every ACP v1 message type of the official crate, the
//! method table, and these payloads) and [`validate`] checks JSON-RPC traffic against the copy of
//! that file compiled into this crate, [`SCHEMA_JSON`].

#![deny(missing_docs)]

pub mod generate;
pub mod validate;

pub use agent_client_protocol_schema as acp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `schema/schema.json` as committed, compiled in so the binary validates against exactly that
/// file. `cargo xtask codegen` writes it; the test `tests/it/schema.rs` keeps it fresh. (If the file
/// is ever lost, an empty file lets the workspace build again so the generator can rerun.)
pub const SCHEMA_JSON: &str = include_str!("../../../schema/schema.json");

/// The workspace-relative path of [`SCHEMA_JSON`]'s file.
pub const SCHEMA_FILE: &str = "schema/schema.json";

/// The one `_meta` key under which acp-usage puts everything that is its own.
pub const META_KEY: &str = "acpUsage";

/// Version of the payloads below; bumped on incompatible changes.
pub const META_VERSION: u32 = 1;

/// Where a figure came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "AcpUsageSource")]
pub enum SourceName {
    /// The LLM API's own responses, read by a loopback tap.
    Tap,
    /// The agent's transcript on disk.
    Transcript,
    /// What the agent reported over ACP.
    Agent,
    /// Counted or guessed from the ACP-visible content.
    Estimate,
    /// The model catalog (windows and prices).
    Catalog,
    /// A documented default.
    Default,
}

/// Provenance of one figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "AcpUsageFigure")]
pub struct Figure {
    /// Where the figure came from.
    pub source: SourceName,
    /// Whether the figure is exact (false for estimates and defaults).
    pub exact: bool,
}

/// How `used` splits into the last call's prompt and its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "AcpUsageUsedSplit")]
pub struct UsedSplit {
    /// Prompt-side tokens of the last main-agent call (cache included).
    pub prompt: u64,
    /// Output of that call that stays in context (thoughts dropped by the provider excluded).
    pub output: u64,
}

/// Provenance of the cumulative cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AcpUsageCostFigure")]
pub struct CostFigure {
    /// Where the cost came from (`agent` when the agent stated it, `catalog` when priced from
    /// token counts, `estimate` when those counts were estimated).
    pub source: SourceName,
    /// Whether the cost is exact.
    pub exact: bool,
    /// Model calls that could not be priced (unknown model); the cost leaves them out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_calls: u64,
    /// The cost may leave out usage acp-usage never saw (the history of a loaded session, calls
    /// that no source showed it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The agent's own stated cost, when it was higher than acp-usage's figure and became the
    /// cost: the difference is calls acp-usage did not see (side calls no transcript records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_stated: Option<f64>,
    /// Side calls this agent is known to make that no source acp-usage reads records (e.g. a
    /// session title generated with another model): the cost leaves them out. `exact` speaks
    /// for the calls acp-usage counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unrecorded_side_calls: Vec<String>,
}

/// acp-usage's payload in a `usage_update`'s `_meta`, under [`META_KEY`]
/// (`params.update._meta.acpUsage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AcpUsageUpdateMeta")]
pub struct UsageUpdateMeta {
    /// Payload version, [`META_VERSION`].
    pub version: u32,
    /// The agent profile in use (`claude`, `codex`, `gemini`, `generic`).
    pub profile: String,
    /// Provenance of `used`.
    pub used: Figure,
    /// Provenance of `size`.
    pub size: Figure,
    /// Provenance of `cost`, when a cost is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostFigure>,
    /// The concrete model in use, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prompt/output split of `used`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_split: Option<UsedSplit>,
    /// What acp-usage emitted this update after (`session/new`, `turn`, `model_change`, ...), or
    /// `agent` when it rewrote the agent's own update.
    pub trigger: String,
    /// The agent's original `used`/`size`/`cost` when this update rewrites the agent's own, and
    /// its `_claude/rateLimit` (under that key) when acp-usage's replaced it in `_meta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<serde_json::Value>,
    /// Every subscription usage window seen so far (Claude's 5-hour and 7-day limits, Codex's
    /// primary and secondary windows, Gemini's quota), as the provider last stated it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitWindow>,
    /// The credit balance and plan the provider last stated for the account in use (Codex's),
    /// when it stated one: its own unit, not a dollar cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits: Option<CreditsInfo>,
}

/// A provider's statement of the account's credits and plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreditsInfo {
    /// `openai`.
    pub provider: String,
    /// Whether the account has credits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_credits: Option<bool>,
    /// Whether they are unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlimited: Option<bool>,
    /// The balance, as the provider wrote it (in credits, not dollars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<String>,
    /// The plan (`plus`, `pro`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_type: Option<String>,
    /// Whose, as a short label (see [`LimitWindow::account`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// When it was observed (RFC 3339, UTC).
    pub observed_at: String,
}

/// One subscription usage window, as the provider last stated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AcpUsageLimitWindow")]
pub struct LimitWindow {
    /// `anthropic`, `openai` or `google`.
    pub provider: String,
    /// The provider's own name for the window: Anthropic's claim (`five_hour`, `seven_day`,
    /// ...), Codex's `primary`/`secondary`, Gemini's model (with its token type).
    pub window: String,
    /// Codex's limit family (`codex` unless the server names another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_id: Option<String>,
    /// The window's length in minutes, when stated (300: five hours, 10080: a week).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<u64>,
    /// How full it is, 0-100 whatever the provider's scale (may pass 100).
    pub used_percent: f64,
    /// When it resets (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// The provider's own word for it, when it gives one (`allowed`, `allowed_warning`,
    /// `rejected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Where it was read: `tap` (the provider's response), `agent` (over ACP), `transcript`.
    pub source: String,
    /// When it was observed (RFC 3339, UTC).
    pub observed_at: String,
    /// When it runs out at this pace (RFC 3339, UTC), only when that is before it resets:
    /// the pace is its fill over the time its period has run (see docs/limits.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_out_at: Option<String>,
    /// Whose window it is, as a short label (`key 3f9a1c`: a keyed fingerprint of the
    /// credential; `acct …`, `org …`: the provider's id), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

/// acp-usage's payload in a per-turn `usage`'s `_meta`, under [`META_KEY`]
/// (`result.usage._meta.acpUsage` of a `session/prompt` result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AcpUsageTurnMeta")]
pub struct TurnUsageMeta {
    /// Payload version, [`META_VERSION`].
    pub version: u32,
    /// Where the turn's counts came from.
    pub source: SourceName,
    /// Whether every count is exact.
    pub exact: bool,
    /// Model calls summed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// The concrete model of the turn's last call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The turn's cost in USD, when it could be priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Request modifiers some call of the turn was billed with (`fast`: fast mode, `us_only`:
    /// US-only inference, `priority`: OpenAI priority processing), priced with their multipliers; absent for standard calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modifiers: Vec<String>,
    /// The turn's counts by the role of the calls (`main`, `subagent`, `side`), when the calls
    /// are known one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<std::collections::BTreeMap<String, UsageBreakdown>>,
    /// The agent's own `usage` object, when acp-usage replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<serde_json::Value>,
}

/// The ACP `Usage` shape (camelCase), used for per-turn `usage` and the cumulative
/// `_meta.usage` breakdown that clients such as acpx read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AcpUsageBreakdown")]
pub struct UsageBreakdown {
    /// `inputTokens + outputTokens`.
    pub total_tokens: u64,
    /// Every prompt-side token, cache reads and writes included.
    pub input_tokens: u64,
    /// Every generated token, thoughts included.
    pub output_tokens: u64,
    /// Thought/reasoning tokens (subset of output), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Cache reads (subset of input), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Cache writes (subset of input), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
    /// Provenance, under [`META_KEY`].
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
