//! The observer's side of the ledger: what it hands the ledger's writer thread, as
//! [`Write`]s the relay takes after each batch of lines. Nothing here computes a figure: the
//! calls are the session account's settled ones, the figures its snapshot.

use super::*;
use crate::sinks::ledger::{Figures, SessionInfo, SessionRef, TurnRow, Write, now_ms};

impl Observer {
    fn session_ref(&self, id: &str) -> SessionRef {
        SessionRef { id: id.to_string(), agent: self.profile.name().to_string() }
    }

    /// A session is open in this process (new, loaded, resumed or forked) in `cwd`.
    pub(super) fn record_session(&mut self, id: &str, cwd: Option<String>) {
        if self.settings.ledger.is_none() {
            return;
        }
        let info = SessionInfo {
            agent_name: self.agent_name.clone(),
            agent_version: self.agent_version.clone(),
            project: cwd,
            title: None,
            model: self.sessions.get(id).and_then(|s| s.model_value.clone()),
        };
        let session = self.session_ref(id);
        self.writes.push(Write::Session { session, info, at: now_ms() });
    }

    /// The session's settled calls (its turn's, when `turn` is given) and its figures after
    /// them; they are also kept in memory for a reopening in this run.
    pub(super) fn record_settled(&mut self, id: &str, turn: Option<TurnRow>) {
        let cx = ledger_context(&self.settings, self.context_parts(id));
        let Some(s) = self.sessions.get_mut(id) else { return };
        let provisional = s.account.take_provisional();
        let calls = s.account.take_accounted();
        let snap = s.account.snapshot(&cx);
        let carried = SessionEntry::from_carried(&s.account.carry(&cx), now_ms() as u64 / 1000);
        let key = format!("{}/{id}", self.profile.name());
        self.learned.sessions.insert(key, carried.clone());
        self.usage.tally(id, &calls);
        if self.settings.ledger.is_none() {
            return;
        }
        let figures = Figures { carried, used: snap.used, size: snap.size, model: snap.model };
        let session = self.session_ref(id);
        if !provisional.is_empty() {
            let at = now_ms();
            self.writes.push(Write::Provisional {
                session: session.clone(),
                calls: provisional,
                at,
            });
        }
        if calls.is_empty() && turn.is_none() {
            return;
        }
        self.writes.push(Write::Calls {
            session,
            turn,
            calls,
            figures: Some(figures),
            at: now_ms(),
        });
    }

    /// What the ledger is to record since the last call: calls settled between turns (a
    /// transcript's or the tap's) are gathered here.
    pub fn take_writes(&mut self) -> Vec<Write> {
        let between: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.account.has_accounted())
            .map(|(id, _)| id.clone())
            .collect();
        for id in between {
            self.record_settled(&id, None);
        }
        std::mem::take(&mut self.writes)
    }

    /// What an earlier run carried for a session: this run's memory, else the ledger.
    pub(super) fn carried(&self, id: &str) -> Option<SessionEntry> {
        let key = format!("{}/{id}", self.profile.name());
        if let Some(e) = self.learned.sessions.get(&key) {
            return Some(e.clone());
        }
        let path = self.settings.ledger.as_deref()?;
        // A rare, small read (a session reopened); WAL readers never wait for writers.
        match crate::sinks::ledger::Store::open_read(path).and_then(|st| st.carried(id)) {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!("cannot read the ledger {}: {err}", path.display());
                None
            }
        }
    }

    /// A reopened session's calls by role from the ledger, for `/usage` (a rare, small read).
    pub(super) fn remembered_roles(&mut self, id: &str) {
        let Some(path) = self.settings.ledger.as_deref() else { return };
        match crate::sinks::ledger::Store::open_read(path).and_then(|st| st.roles(id)) {
            Ok(roles) => self.usage.remember(id, roles),
            Err(err) => tracing::warn!("cannot read the ledger {}: {err}", path.display()),
        }
    }

    /// Remembers a learned baseline or window of the session's agent and model.
    pub(super) fn record_agent(&mut self, key: String, entry: Entry) {
        if self.settings.ledger.is_some() {
            self.writes.push(Write::Agent { key, entry, at: now_ms() });
        }
    }

    /// The editor deleted the session.
    pub(super) fn record_forget(&mut self, id: &str) {
        self.learned.sessions.remove(&format!("{}/{id}", self.profile.name()));
        if self.settings.ledger.is_some() {
            self.writes.push(Write::Forget { session_id: id.to_string() });
        }
    }

    /// The editor closed the session in this process.
    pub(super) fn record_closed(&mut self, id: &str) {
        if self.settings.ledger.is_some() {
            self.writes.push(Write::Closed { session_id: id.to_string() });
        }
    }
}
