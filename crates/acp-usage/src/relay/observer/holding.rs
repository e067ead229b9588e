//! Holding a result until the session's transcript has caught up, and releasing it: the waits,
//! the transcript worker's commands and what its reads add to the sessions' accounts.

use acp_usage_core::Source;
use serde_json::Value;

use super::envelope::Envelope;
use super::{Method, Observer, Outcome, Pending, ledger_context, now_ms};
use crate::relay::follow::{Awaiting, Follow};
use crate::sources::transcripts::{Command, Format, Update, UpdateKind};

/// Results released because the transcript was late, in a row, before it is given up.
const MAX_TIMEOUTS_IN_A_ROW: u32 = 3;

/// Whether a prompt result says the turn made no model call (all its usage is zero).
pub(super) fn no_model_call(result: &Value) -> bool {
    let zero = |v: Option<&Value>| v.and_then(Value::as_u64) == Some(0);
    zero(result.pointer("/usage/totalTokens"))
        || zero(result.pointer("/_meta/quota/token_count/input_tokens"))
}

impl Observer {
    /// The transcript format of the agent, when its transcripts are followed.
    pub(super) fn format(&self) -> Option<&'static Format> {
        if !self.settings.transcripts {
            return None;
        }
        self.profile.transcripts()
    }

    /// Starts following a session's transcript (`history`: it has one to read first).
    pub(super) fn follow(&mut self, id: &str, history: bool) {
        let Some(format) = self.format() else { return };
        let Some(s) = self.sessions.get_mut(id) else { return };
        if s.follow.as_ref().is_some_and(|f| !f.failed) {
            // Reopened: its history is read again (the worker's offsets are where they were).
            if history {
                let f = s.follow.as_mut().expect("checked");
                *f = Follow::new(true, format.marks_turn_end, now_ms());
                self.commands.push(Command::Forget(id.to_string()));
            } else {
                return;
            }
        } else {
            s.follow = Some(Follow::new(history, format.marks_turn_end, now_ms()));
        }
        self.commands.push(Command::Track { session: id.to_string(), format });
    }

    /// What the transcript worker read.
    pub fn transcript_update(&mut self, update: Update) {
        let cx = ledger_context(&self.settings, self.context_parts(&update.session));
        let Some(s) = self.sessions.get_mut(&update.session) else { return };
        let Some(f) = &mut s.follow else { return };
        match update.kind {
            UpdateKind::Failed(why) => {
                tracing::debug!(session = update.session, why, "transcript given up");
                f.failed = true;
            }
            UpdateKind::Events { events, found, at_end, settled } => {
                let windows: Vec<u64> = events
                    .iter()
                    .filter_map(|e| match e {
                        acp_usage_core::transcript::Event::Window(w) => Some(*w),
                        _ => None,
                    })
                    .collect();
                let limits: Vec<acp_usage_core::limits::Limit> = events
                    .iter()
                    .filter_map(|e| match e {
                        acp_usage_core::transcript::Event::Limits(l) => Some(l.clone()),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                let newly_found = found && !f.found;
                let mut between = false;
                for o in f.events(events, found, at_end, settled) {
                    s.account.record_outside_turn(o.record, Source::Transcript, o.main, &cx);
                    between = true;
                }
                if newly_found {
                    s.account.follow_transcript();
                }
                for w in windows {
                    s.account.agent_window(w);
                }
                if between {
                    self.counted_between_turns(&update.session);
                }
                self.limits_observed(limits, Some(&update.session));
            }
        }
    }

    /// Whether the result held for `session` may go on, as far as its transcript goes.
    pub fn hold_ready(&self, session: &str) -> bool {
        let Some(f) = self.sessions.get(session).and_then(|s| s.follow.as_ref()) else {
            return true;
        };
        f.awaiting().is_none_or(|what| f.ready(what))
    }

    /// Whether the transcript holds calls of `session`'s turn in progress that the LLM-API tap
    /// has not reported (yet): the tap, when it runs, reports a call before the agent has its
    /// last bytes, so such a call's report is on its way only while the tap is still reading a
    /// call; the relay then waits a moment for it before the turn ends (see
    /// `relay::main_loop`), and the turn is the tap's whichever source reported first.
    pub fn tap_missing(&self, session: &str) -> bool {
        if !self.settings.tap {
            return false;
        }
        let Some(s) = self.sessions.get(session) else { return false };
        let Some(f) = s.follow.as_ref().filter(|f| !f.failed) else { return false };
        !s.account.tap_covers(&f.turn_calls())
    }

    /// The result held for `session` goes on: `timed_out` when the wait ran out. Hand the held
    /// line to [`Observer::from_agent_released`] next.
    pub fn release(&mut self, session: &str, timed_out: bool) {
        self.commands.push(Command::Release(session.to_string()));
        let Some(f) = self.sessions.get_mut(session).and_then(|s| s.follow.as_mut()) else {
            return;
        };
        if timed_out {
            tracing::debug!(
                session,
                found = f.found,
                "the transcript did not catch up in time; using the ACP numbers for this answer"
            );
        }
        f.released(timed_out, now_ms());
        if f.timeouts_in_a_row >= MAX_TIMEOUTS_IN_A_ROW && !f.failed {
            f.failed = true;
            let why =
                if f.found { "it stopped showing the turns' ends" } else { "it never appeared" };
            tracing::warn!(
                session,
                "giving up the agent's transcript ({why}); using the numbers the agent reports over ACP"
            );
            self.commands.push(Command::Forget(session.to_string()));
        }
    }

    /// [`Observer::from_agent`] for a line that was held: it is not held again.
    pub fn from_agent_released(&mut self, line: &[u8]) -> Outcome {
        self.releasing = true;
        let out = self.from_agent(line);
        self.releasing = false;
        out
    }

    /// Whether a response must wait for the session's transcript; starts the wait.
    pub(super) fn hold_for(&mut self, env: &Envelope<'_>, p: &Pending) -> Option<String> {
        if self.releasing || env.error.is_some() {
            return None;
        }
        let (id, what) = match p.method {
            Method::Prompt => {
                let id = p.session.clone()?;
                // Only a followed session's result is parsed here.
                self.sessions.get(&id)?.follow.as_ref().filter(|f| !f.failed)?;
                let result = env.result.and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
                if result.as_ref().is_some_and(no_model_call) {
                    // A local command (`/clear`, `/context`): nothing will be written to wait for.
                    return None;
                }
                let reported = result.and_then(|r| self.profile.reported_turn_input(&r));
                if let (Some(n), Some(f)) =
                    (reported, self.sessions.get_mut(&id).and_then(|s| s.follow.as_mut()))
                {
                    f.reported_input(n);
                }
                (id, Awaiting::TurnEnd)
            }
            Method::Load | Method::Resume => (p.session.clone()?, Awaiting::History),
            Method::Fork => {
                // The fork's id is in the result: follow it now, so its history is read.
                let r: Value = serde_json::from_str(env.result?.get()).ok()?;
                let id = r.get("sessionId")?.as_str()?.to_string();
                self.format()?;
                self.forked_session(p.session.as_deref(), &id);
                self.follow(&id, true);
                // The fork's transcript repeats its parent's calls: they are history.
                let inherited = p
                    .session
                    .as_ref()
                    .and_then(|parent| self.sessions.get(parent)?.follow.as_ref())
                    .map(Follow::calls);
                if let (Some(calls), Some(f)) =
                    (inherited, self.sessions.get_mut(&id).and_then(|s| s.follow.as_mut()))
                {
                    f.inherit(calls);
                }
                (id, Awaiting::History)
            }
            _ => return None,
        };
        // A turn the transcript has whole but whose calls the tap has not all reported goes
        // by the main loop too, which waits a moment for the tap's reports under way.
        let tap_missing = what == Awaiting::TurnEnd && self.tap_missing(&id);
        let f = self.sessions.get_mut(&id)?.follow.as_mut().filter(|f| !f.failed)?;
        if f.ready(what) && !tap_missing {
            return None;
        }
        f.await_(what);
        self.commands.push(Command::Hold(id.clone()));
        Some(id)
    }
}
