//! Side calls no per-call source showed: what an agent's own per-model counts of a turn have
//! beyond the turn's exact calls (Claude Code's session titles and classifier calls, which its
//! transcript leaves out).

use super::Role;
use crate::tokens::{Source, TokenRecord};

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
        let mut seen = TokenRecord::default();
        for (rec, _, _) in exact.iter().filter(|(r, _, _)| r.model.as_deref() == Some(model)) {
            seen.input += rec.input;
            seen.cache_read += rec.cache_read;
            seen.cache_write_5m += rec.cache_write_5m;
            seen.cache_write_1h += rec.cache_write_1h;
            seen.output += rec.output;
            seen.thought += rec.thought;
        }
        let seen_writes = seen.cache_write_5m + seen.cache_write_1h;
        let agent_writes = agent.cache_write_5m + agent.cache_write_1h;
        let rec = TokenRecord {
            input: agent.input.saturating_sub(seen.input),
            cache_read: agent.cache_read.saturating_sub(seen.cache_read),
            // The agent's counts do not split 5-minute from 1-hour writes: the shortfall is
            // priced as 5-minute writes.
            cache_write_5m: agent_writes.saturating_sub(seen_writes),
            output: agent.output.saturating_sub(seen.output),
            thought: agent.thought.saturating_sub(seen.thought),
            model: Some(model.to_string()),
            ..TokenRecord::default()
        };
        if rec.input > 0 || rec.output > 0 {
            unseen.push(rec);
        }
    }
    unseen
}
