//! Attribution of the calls the LLM-API tap saw: to which session, and who made each call.
//!
//! A call goes to the session its request names in a session header (Claude Code and Codex send
//! one), else to the one session with a turn in flight, else to the session whose latest prompt
//! the request carries, else to the only or the most recently prompted session. Who made it: a
//! call that declares no tools, or that the agent's profile knows as one of its own (a prompt
//! suggestion), is a side call; a call with the session's main system prompt is the main
//! agent's; other tool-using calls are subagents'. The first tool-using call that carries the
//! session's prompt tells which system prompt is the main one. When the transcript (or the
//! agent's per-call reports) covered the turn, the account corrects these guesses.

use acp_usage_core::account::Role;

use super::{Observer, Session, ledger_context};
use crate::sources::tap::TapCall;

/// What attributes the tap's calls to sessions across the run.
#[derive(Debug, Default)]
pub(super) struct Attribution {
    /// Prompts seen so far (orders sessions by their latest prompt).
    prompts: u64,
    /// Calls the tap saw before any session existed.
    unclaimed: Vec<TapCall>,
}

/// What a session's attribution remembers.
#[derive(Debug, Default)]
pub(super) struct TapState {
    /// A piece of the latest prompt's text as it appears in a JSON request body.
    needle: Option<String>,
    /// The fingerprint of the main agent's system prompt.
    main_system: Option<u64>,
    /// When the session was last prompted (a counter, not a clock).
    pub(super) last_prompt: u64,
}

/// The longest run of the prompt's text that JSON writes as it is (printable ASCII without
/// quotes or backslashes), at most 80 bytes; none when shorter than 8.
fn needle_of(text: &str) -> Option<String> {
    let plain = |c: char| c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ';
    let best = text.split(|c: char| !plain(c)).max_by_key(|run| run.len())?;
    let best = best.trim();
    if best.len() < 8 {
        return None;
    }
    Some(best[..best.len().min(80)].to_owned())
}

fn carries(body: &[u8], needle: &str) -> bool {
    memchr::memmem::find(body, needle.as_bytes()).is_some()
}

impl Observer {
    /// A session's prompt went to the agent: what its calls will carry.
    pub(super) fn tap_prompt(&mut self, id: &str, text: &str) {
        self.tap.prompts += 1;
        let n = self.tap.prompts;
        if let Some(s) = self.sessions.get_mut(id) {
            s.tap.last_prompt = n;
            if let Some(needle) = needle_of(text) {
                s.tap.needle = Some(needle);
            }
        }
    }

    /// Which session a call belongs to.
    fn tap_session(&self, call: &TapCall) -> Option<String> {
        if let Some(h) = &call.session_header
            && self.sessions.contains_key(h)
        {
            return Some(h.clone());
        }
        let carrying =
            |s: &Session| s.tap.needle.as_deref().is_some_and(|n| carries(&call.body, n));
        let in_turn: Vec<(&String, &Session)> =
            self.sessions.iter().filter(|(_, s)| s.turn_owner.is_some()).collect();
        if let [(id, _)] = in_turn.as_slice() {
            return Some((*id).clone());
        }
        // Several turns in flight, or none: the session whose prompt the request carries.
        let pool: Vec<(&String, &Session)> =
            if in_turn.is_empty() { self.sessions.iter().collect() } else { in_turn };
        let matching: Vec<&(&String, &Session)> =
            pool.iter().filter(|(_, s)| carrying(s)).collect();
        if let [(id, _)] = matching.as_slice() {
            return Some((*id).clone());
        }
        let candidates = if matching.is_empty() { pool.iter().collect() } else { matching };
        candidates.into_iter().max_by_key(|(_, s)| s.tap.last_prompt).map(|(id, _)| (*id).clone())
    }

    /// Counts a call the tap saw.
    pub fn tap_call(&mut self, call: TapCall) {
        let Some(id) = self.tap_session(&call) else {
            // No session yet (a call made while the agent starts): the first session has it.
            self.tap.unclaimed.push(call);
            return;
        };
        for early in std::mem::take(&mut self.tap.unclaimed) {
            self.count_tap_call(&id, early, true);
        }
        self.count_tap_call(&id, call, false);
    }

    /// `early`: the call was made before any session existed (it belongs to no turn).
    fn count_tap_call(&mut self, id: &str, call: TapCall, early: bool) {
        let profile = self.profile;
        let cx = ledger_context(&self.settings, self.context_parts(id));
        let Some(s) = self.sessions.get_mut(id) else { return };
        // Codex's WebSocket warm-up (`generate: false`) fills the provider's cache for the
        // session and answers nothing: billed, but no turn's model call.
        let role = if call.warmup || !call.request.has_tools || profile.is_side_call(&call.body) {
            Role::Side
        } else {
            match (s.tap.main_system, call.request.system_fingerprint) {
                (Some(main), Some(this)) if main == this => Role::Main,
                (Some(_), _) => Role::Subagent,
                (None, this) => {
                    let carries_prompt =
                        s.tap.needle.as_deref().is_none_or(|n| carries(&call.body, n));
                    if carries_prompt {
                        s.tap.main_system = this;
                        Role::Main
                    } else {
                        Role::Subagent
                    }
                }
            }
        };
        tracing::debug!(
            session = id,
            role = role.as_str(),
            model = call.record.model.as_deref().unwrap_or("?"),
            input = call.record.input,
            output = call.record.output,
            complete = call.complete,
            estimated = call.estimated,
            "tap: a model call"
        );
        if role == Role::Main
            && let Some(model) = &call.record.model
        {
            s.account.model_seen(model);
        }
        // A call whose response carried no usage was counted from its content: an estimate.
        let source = match call.estimated {
            true => acp_usage_core::Source::Estimate,
            false => acp_usage_core::Source::Tap,
        };
        if early {
            s.account.record_outside_turn(call.record, source, false, &cx);
            self.counted_between_turns(id);
            return;
        }
        // A call that began before the turn in progress did is not the turn's: one the last
        // turn started that ended after this prompt was sent (Vibe's title, still streaming),
        // or one read late (while the ledger was opening, say). It happened between turns,
        // whenever its report is read.
        if s.turn_started.is_some_and(|started| call.started_ms < started) {
            s.account.tap_call_before_turn(call.record, role, &cx);
            self.counted_between_turns(id);
            return;
        }
        // Between turns it is counted at once, and kept at once (the ledger's writes are taken
        // after each batch): a reload must not lose a call made after the last result (a
        // title, a memory extraction).
        let between = !s.account.in_turn();
        match call.estimated {
            true => s.account.tap_estimated_call(call.record, call.id, role, &cx),
            false => s.account.tap_call(call.record, call.id, role, &cx),
        }
        if between {
            self.counted_between_turns(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needles_are_runs_json_keeps_as_they_are() {
        assert_eq!(
            needle_of("Fix the \"parser\" in module foo.rs please").as_deref(),
            Some("in module foo.rs please")
        );
        assert_eq!(
            needle_of("Refactor the tokenizer module now").as_deref(),
            Some("Refactor the tokenizer module now")
        );
        assert_eq!(needle_of("short"), None);
        assert_eq!(needle_of("ünïcödé ünïcödé").as_deref(), None);
        let long = "x".repeat(200);
        assert_eq!(needle_of(&long).map(|n| n.len()), Some(80));
    }
}
