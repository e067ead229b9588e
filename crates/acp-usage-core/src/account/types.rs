//! What the account answers: per-turn usage, session snapshots, and what a session carries
//! across runs.

use crate::tokens::{Modifiers, Source, TokenRecord, TokenTotals};

/// Who made a model call (DESIGN.md "The numbers"): only main-agent calls set `used`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The agent's own conversation.
    Main,
    /// A subagent the main agent started (its context is its own).
    Subagent,
    /// A call the agent makes for itself: a session title, a prompt suggestion, a classifier,
    /// memory extraction.
    Side,
}

impl Role {
    /// The wire name used in `_meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Subagent => "subagent",
            Role::Side => "side",
        }
    }
}

/// A turn's counts split by the role of the calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleTotals {
    /// One entry per role that made at least one call, in role order.
    pub roles: Vec<(Role, TokenTotals)>,
}

impl RoleTotals {
    /// Adds one call of `role`.
    pub fn add(&mut self, role: Role, rec: &TokenRecord) {
        match self.roles.iter_mut().find(|(r, _)| *r == role) {
            Some((_, totals)) => *totals += rec,
            None => {
                let mut totals = TokenTotals::default();
                totals += rec;
                self.roles.push((role, totals));
                self.roles.sort_by_key(|(r, _)| *r);
            }
        }
    }
}

/// How the agent reported a turn's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnReport {
    /// Every count of the turn, summed over its calls (claude-agent-acp).
    Complete,
    /// Input and output are right, but cache and thought tokens are missing (gemini-cli's quota).
    WithoutCacheAndThoughts,
}

/// The per-turn usage sent on the `session/prompt` result.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnUsage {
    /// The summed counts.
    pub totals: TokenTotals,
    /// Whether cache counts are known (else they are left out rather than sent as 0).
    pub cache_known: bool,
    /// Whether thought counts are known.
    pub thought_known: bool,
    /// The weakest source among the counts.
    pub source: Source,
    /// Model calls summed, when known.
    pub calls: Option<u64>,
    /// The concrete model of the last call, when known.
    pub model: Option<String>,
    /// The turn's cost in USD, when it could be priced.
    pub cost: Option<f64>,
    /// The counts by the role of the calls, when exact calls are known.
    pub roles: RoleTotals,
    /// Every request modifier a call of the turn was billed with (fast mode, US-only).
    pub modifiers: Modifiers,
}

/// A point-in-time view of a session, rendered into a `usage_update`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Tokens currently in context.
    pub used: u64,
    /// Where `used` came from.
    pub used_source: Source,
    /// Whether `used` is exact.
    pub used_exact: bool,
    /// The prompt/output split of `used`, when known.
    pub used_split: Option<(u64, u64)>,
    /// The effective context window.
    pub size: u64,
    /// Where `size` came from.
    pub size_source: Source,
    /// Cumulative session cost in USD; `None` when nothing could be priced.
    pub cost: Option<f64>,
    /// Where the cost came from.
    pub cost_source: Source,
    /// Model calls left out of the cost because their model has no price.
    pub unpriced_calls: u64,
    /// The cost leaves out usage acp-usage never saw (history of a loaded session, calls no
    /// source showed).
    pub cost_partial: bool,
    /// The agent's own stated cost, when it was higher than acp-usage's figure and replaced it
    /// (the difference is calls acp-usage did not see).
    pub cost_floor: Option<f64>,
    /// The concrete model in use, when known.
    pub model: Option<String>,
    /// Cumulative token counts over the turns acp-usage saw.
    pub totals: TokenTotals,
    /// Whether `totals` are exact.
    pub totals_exact: bool,
}

/// What a session's account keeps across runs of acp-usage, so that reloading a session an
/// earlier run accounted continues its cost and totals instead of starting over.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// Cumulative cost in USD, when it was known.
    pub cost: Option<f64>,
    /// Where that cost came from.
    pub cost_source: Source,
    /// Whether that cost was exact.
    pub cost_exact: bool,
    /// Whether that cost already left out history.
    pub cost_partial: bool,
    /// Calls left out of the cost for want of a price.
    pub unpriced_calls: u64,
    /// Cumulative token counts.
    pub totals: TokenTotals,
    /// Whether they were exact.
    pub totals_exact: bool,
    /// `used` at the end of the last turn: prompt part, output part, source, exactness.
    pub used: Option<(u64, u64, Source, bool)>,
}

impl Default for Carried {
    fn default() -> Carried {
        Carried {
            cost: None,
            cost_source: Source::Estimate,
            cost_exact: false,
            cost_partial: false,
            unpriced_calls: 0,
            totals: TokenTotals::default(),
            totals_exact: false,
            used: None,
        }
    }
}
