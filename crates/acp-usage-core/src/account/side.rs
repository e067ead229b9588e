//! Side calls no per-call source showed: what an agent's own per-model counts of a turn have
//! beyond the turn's exact calls (Claude Code's session titles and classifier calls, which its
//! transcript leaves out).

use super::Role;
use crate::tokens::{Source, TokenRecord, TokenTotals};

/// The calls the agent's per-model counts show beyond the exact calls of the same model: one
/// record per model, every count the shortfall (never negative). Empty when the agent gave no
/// per-model counts or the exact calls cover them.
pub(super) fn unseen_calls(
    exact: &[(TokenRecord, Source, Role)],
    agent_models: &[TokenRecord],
) -> Vec<TokenRecord> {
    let mut unseen = Vec::new();
    for agent in agent_models {
        let Some(model) = agent.model.as_deref() else { continue };
        let mut seen = TokenTotals::default();
        for (rec, _, _) in exact.iter().filter(|(r, _, _)| r.model.as_deref() == Some(model)) {
            seen += rec;
        }
        // The agent's counts do not split 5-minute from 1-hour writes: both sides are compared,
        // and the shortfall priced, as 5-minute writes.
        let agent = TokenRecord::from_inclusive(
            agent.input,
            agent.cache_read,
            agent.cache_write(),
            agent.output,
            agent.thought,
        );
        let seen = TokenRecord::from_inclusive(
            seen.input,
            seen.cache_read,
            seen.cache_write,
            seen.output,
            seen.thought,
        );
        let rec = TokenRecord { model: Some(model.to_string()), ..agent.beyond(&seen) };
        if rec.input > 0 || rec.output > 0 {
            unseen.push(rec);
        }
    }
    unseen
}
