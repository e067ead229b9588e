//! What a session's account answers: the [`Snapshot`] with `size` resolved by DESIGN.md's
//! precedence and the cost rules applied.

use super::{Account, Context, Snapshot};
use crate::tokens::Source;

impl Account {
    /// The session as it stands.
    pub fn snapshot(&self, cx: &Context<'_>) -> Snapshot {
        let (size, size_source) = self.size(cx);
        let (used, used_source, used_exact, used_split) = match self.used {
            Some(u) => {
                let split = (u.output > 0).then_some((u.prompt, u.output));
                (u.prompt + u.output, u.source, u.exact, split)
            }
            None => (self.replayed + self.baseline, Source::Estimate, false, None),
        };
        let (cost, cost_source, cost_partial) = match self.stated_cost {
            // Agents state what their process spent; for a session restored into a new process
            // that leaves out the history (claude-agent-acp restarts its count at zero).
            Some(c) => (Some(c), Source::Agent, self.history_unseen),
            None if self.priced_calls > 0 => {
                let source = if self.priced_exact { Source::Catalog } else { Source::Estimate };
                (Some(self.priced_cost), source, self.history_unseen)
            }
            None => (None, Source::Estimate, self.history_unseen),
        };
        let mut unpriced_calls = if self.stated_cost.is_some() { 0 } else { self.unpriced_calls };
        let mut totals = self.totals;
        let mut totals_exact = !self.totals_estimated;
        let (mut cost, mut cost_source, mut cost_partial) = (cost, cost_source, cost_partial);
        if let Some(c) = &self.carried {
            // This run's figures continue an earlier run's: the weaker provenance wins.
            cost = match (c.cost, cost) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            if c.cost.is_some() {
                cost_source = match (c.cost_exact, cost_source) {
                    (false, _) => Source::Estimate,
                    // Nothing priced in this run yet: the carried cost's provenance stands.
                    (true, _) if self.stated_cost.is_none() && self.priced_calls == 0 => {
                        c.cost_source
                    }
                    (true, src) => src,
                };
            }
            cost_partial |= c.cost_partial;
            unpriced_calls += c.unpriced_calls;
            totals += &c.totals;
            totals_exact &= c.totals_exact;
        }
        // What the agent states it spent covers calls no source showed acp-usage (Claude Code's
        // titles and prompt suggestions are in no transcript): never send less than that. The
        // tap sees every call from the session's start on, but not the history of a session
        // reopened here that no run of acp-usage saw.
        let mut cost_floor = None;
        let unseen = self.history_unseen && self.carried.is_none();
        if let Some(floor) = self.stated_floor.filter(|_| !self.tap || unseen)
            && cost.is_none_or(|c| floor > c + 1e-9)
        {
            cost = Some(floor);
            cost_source = Source::Agent;
            cost_partial = true;
            cost_floor = Some(floor);
        }
        Snapshot {
            used,
            used_source,
            used_exact,
            used_split,
            size,
            size_source,
            cost,
            cost_source,
            // A stated cost covers every call, priced by the catalog or not.
            unpriced_calls,
            cost_partial,
            cost_floor,
            model: self.seen_model.clone().or(self.selected_model.clone()),
            totals,
            totals_exact,
        }
    }

    /// The effective window, by DESIGN.md's precedence.
    fn size(&self, cx: &Context<'_>) -> (u64, Source) {
        if let Some(w) = self.agent_window {
            return (w, Source::Agent);
        }
        let from_catalog = |model: &Option<String>| {
            let info = cx.catalog.lookup(model.as_deref()?)?;
            let w = info.max_input?;
            Some(w * cx.window_percent / 100)
        };
        if let Some(w) = from_catalog(&self.seen_model) {
            return (w, Source::Catalog);
        }
        // Below this line everything is a guess, which never replaces what the agent reported.
        if let Some(w) = self.reported_window {
            return (w, Source::Agent);
        }
        if let Some(w) = self.selected_window {
            return (w * cx.window_percent / 100, Source::Catalog);
        }
        if let Some(w) = from_catalog(&self.selected_model) {
            return (w, Source::Catalog);
        }
        if let Some(w) = cx.remembered_size {
            return (w, Source::Catalog);
        }
        (cx.default_window.max(1), Source::Default)
    }
}
