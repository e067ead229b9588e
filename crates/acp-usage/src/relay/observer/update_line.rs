//! The update line: a session's snapshot (with the baseline and window learned for its agent and
//! model) written as the `usage_update` the editor shows, also between turns when calls were
//! counted with no turn to carry them.

use acp_usage_core::Source;

use super::emit::{self, Trigger};
use super::{Observer, ledger_context};
use crate::sinks::ledger::learned::Entry;

impl Observer {
    /// A call was counted in `id` between its turns: the editor is to see it (see
    /// [`Observer::between_turn_updates`]).
    pub(super) fn counted_between_turns(&mut self, id: &str) {
        if !self.between_turns.iter().any(|s| s == id) {
            self.between_turns.push(id.to_owned());
        }
    }

    /// Whether calls were counted between turns that no update has shown yet.
    pub fn has_between_turn_updates(&self) -> bool {
        !self.between_turns.is_empty()
    }

    /// A `usage_update` for each session with calls counted between turns since its last
    /// update, so the figures the editor is left showing cover every billed call. A session
    /// whose turn started since gets none: the turn's own update will show them.
    pub fn between_turn_updates(&mut self) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        for id in std::mem::take(&mut self.between_turns) {
            let idle = self.sessions.get(&id).is_some_and(|s| !s.account.in_turn());
            if idle {
                lines.push(self.update_line(&id, Trigger::BetweenTurns));
            }
        }
        // A notice an update gave rise to (a context threshold) goes with it.
        lines.append(&mut self.alerting.notices_out);
        lines
    }

    /// The key of what is learned for a session's agent and model.
    pub(super) fn learned_key(&self, id: &str) -> String {
        let model = self.sessions.get(id).and_then(|s| s.model_value.as_deref());
        format!("{}/{}", self.profile.name(), model.unwrap_or("default"))
    }

    pub(super) fn context_parts(&self, id: &str) -> (u64, Option<u64>) {
        let remembered = self.learned.agents.get(&self.learned_key(id)).and_then(|e| e.size);
        (self.profile.window_percent(), remembered)
    }

    /// Gives the session the baseline learned for its agent and model.
    pub(super) fn sync_baseline(&mut self, id: &str) {
        let baseline = self.learned.agents.get(&self.learned_key(id)).and_then(|e| e.baseline);
        if let (Some(b), Some(s)) = (baseline, self.sessions.get_mut(id)) {
            s.account.set_baseline(b);
        }
    }

    pub(super) fn snapshot(&mut self, id: &str) -> acp_usage_core::Snapshot {
        self.sync_baseline(id);
        let cx = ledger_context(&self.settings, self.context_parts(id));
        let s = self.sessions.get(id).expect("session exists");
        let snap = s.account.snapshot(&cx);
        if matches!(snap.size_source, Source::Agent | Source::Catalog) && s.model_value.is_some() {
            let key = self.learned_key(id);
            let entry = self.learned.agents.entry(key.clone()).or_default();
            if entry.size != Some(snap.size) {
                entry.size = Some(snap.size);
                self.record_agent(key, Entry { baseline: None, size: Some(snap.size) });
            }
        }
        let s = self.sessions.get_mut(id).expect("session exists");
        if snap.unpriced_calls > 0 && snap.cost.is_none() && !s.unpriced_logged {
            s.unpriced_logged = true;
            tracing::warn!(session = id, model = ?snap.model, "the catalog has no price for this model; cost left out");
        }
        snap
    }

    pub(super) fn update_line(&mut self, id: &str, trigger: Trigger) -> Vec<u8> {
        // Whatever was counted between turns, this update shows.
        self.between_turns.retain(|s| s != id);
        let snap = self.snapshot(id);
        self.context_alert(id, snap.used, snap.size, snap.model.as_deref());
        emit::usage_update(id, &snap, &self.label(), trigger)
    }

    /// The agent's profile and the side calls it makes that no source records.
    pub(super) fn label(&self) -> emit::AgentLabel {
        emit::AgentLabel {
            profile: self.profile.name(),
            unrecorded: if self.settings.tap {
                &[]
            } else {
                self.profile.unrecorded_side_calls(self.agent_name.as_deref())
            },
            limits: self.current_limits(),
            credits: self.current_credits(),
        }
    }
}
