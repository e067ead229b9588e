//! The observer's reading of the agent's responses to the editor's requests: a session opened,
//! reopened or forked, a turn's result, a model changed, a session closed.

use super::*;
use acp_usage_core::account::TurnUsage;

use crate::sinks::ledger::TurnRow;

impl Observer {
    pub(super) fn on_response(&mut self, line: &[u8], env: &Envelope<'_>, p: Pending) -> Outcome {
        let result: Option<Value> = env.result.and_then(|r| serde_json::from_str(r.get()).ok());
        let ok = env.error.is_none() && env.result.is_some();
        let mut out = Outcome::default();
        match p.method {
            Method::Initialize => self.on_initialized(result.as_ref()),
            Method::New | Method::Fork => {
                let Some(r) = result.as_ref().filter(|_| ok) else { return out };
                out.after.extend(self.on_opened(&p, r));
                let id = r.get("sessionId").and_then(Value::as_str);
                out.after.extend(id.and_then(|id| self.own_commands(id)));
            }
            Method::Load | Method::Resume => {
                out.after.extend(self.on_reopened(&p, result.as_ref(), ok));
                if ok && let Some(id) = p.session.as_deref() {
                    out.after.extend(self.own_commands(id));
                }
            }
            Method::Prompt => {
                let Some(id) = p.session.as_deref() else { return out };
                let key = env.id_key().expect("responses have ids");
                return self.on_prompt_result(line, id, &key, result.as_ref(), ok);
            }
            Method::SetConfigOption => {
                let (Some(id), Some(r)) = (p.session.as_deref(), result.as_ref().filter(|_| ok))
                else {
                    return out;
                };
                if self.read_models(id, r) {
                    out.after.push(self.update_line(id, Trigger::ModelChange));
                }
            }
            Method::SetModel => {
                let (Some(id), Some(model)) = (p.session.as_deref(), p.model.as_deref()) else {
                    return out;
                };
                if ok && self.select_model(id, model) {
                    out.after.push(self.update_line(id, Trigger::ModelChange));
                }
            }
            Method::Close | Method::Delete => {
                if let (Some(id), true) = (p.session.as_deref(), ok) {
                    self.on_closed(id, p.method == Method::Delete);
                }
            }
            Method::Other => {}
        }
        out
    }

    /// `initialize`'s result: the agent's name and version, and its profile unless forced.
    fn on_initialized(&mut self, result: Option<&Value>) {
        self.agent_name = result
            .and_then(|r| r.pointer("/agentInfo/name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        self.agent_version = result
            .and_then(|r| r.pointer("/agentInfo/version"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if let (None, Some(r)) = (self.settings.forced_profile, result) {
            let name = r.pointer("/agentInfo/name").and_then(Value::as_str);
            let recognised = name.and_then(Profile::by_name).unwrap_or(self.settings.launched_as);
            if recognised != self.profile && self.profile == self.settings.launched_as {
                self.recognised_late(name.unwrap_or_default(), recognised);
            }
            self.profile = recognised;
            tracing::info!(profile = self.profile.name(), agent = ?name, "agent recognised");
        }
    }

    /// The agent named a profile in `initialize` that its command did not name before it
    /// started: the tap, wanted, was not pointed for it. Said once, at warn level (seen by
    /// default), with the fix, unless that profile would not start the tap either (nothing of
    /// its setup, read as the relay reads it before starting an agent, can be pointed).
    fn recognised_late(&self, name: &str, recognised: Profile) {
        let settings = &self.settings;
        let tap = TapAtStart { wanted: settings.tap_wanted, runs: settings.tap };
        let Some(warning) = late_recognition(name, recognised, settings.launched_as, tap) else {
            return;
        };
        let env = |name: &str| std::env::var(name).ok();
        let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
        if !crate::agents::point(recognised, &env, &read).routes.is_empty() {
            tracing::warn!("{warning}");
        }
    }

    /// A successful `session/new` or `session/fork` result: the session, and the update to
    /// send after the result.
    fn on_opened(&mut self, p: &Pending, r: &Value) -> Option<Vec<u8>> {
        let id = r.get("sessionId").and_then(Value::as_str)?;
        if p.method == Method::Fork {
            self.forked_session(p.session.as_deref(), id);
        } else {
            // Keep what a pipelining client already started in the session, or an agent's
            // notifications before its response (Copilot sends some): a new session has no
            // unseen history either way.
            self.session(id, Account::new).account.mark_new();
        }
        self.read_models(id, r);
        if p.method == Method::New {
            self.follow(id, false);
        } else {
            self.settle_history(id);
        }
        self.record_session(id, p.cwd.clone());
        let trigger = if p.method == Method::New { Trigger::New } else { Trigger::Fork };
        Some(self.update_line(id, trigger))
    }

    /// A `session/load` or `session/resume` response: the session reopened (when it
    /// succeeded), and the update to send after the result.
    fn on_reopened(&mut self, p: &Pending, result: Option<&Value>, ok: bool) -> Option<Vec<u8>> {
        let id = p.session.as_deref()?;
        if !ok {
            if let Some(s) = self.sessions.get_mut(id) {
                s.loading = false;
            }
            return None;
        }
        let s = self.reopened(id);
        s.loading = false;
        s.account.reset_agent_cumulative();
        if let Some(r) = result {
            self.read_models(id, r);
        }
        // A response that names no model (Vibe's `session/resume`): the profile's.
        if self.sessions.get(id).is_some_and(|s| s.model_value.is_none())
            && let Some(model) = self.profile.reopened_model()
        {
            self.select_model(id, &model);
        }
        self.settle_history(id);
        self.record_session(id, p.cwd.clone());
        let trigger = if p.method == Method::Load { Trigger::Load } else { Trigger::Resume };
        Some(self.update_line(id, trigger))
    }

    /// A `session/prompt` result (request id `key`): the turn it owns ends and the next queued
    /// one starts; the result gets the turn's usage, and an update goes before it.
    fn on_prompt_result(
        &mut self,
        line: &[u8],
        id: &str,
        key: &str,
        result: Option<&Value>,
        ok: bool,
    ) -> Outcome {
        let mut out = Outcome::default();
        let (turn, started) = self.end_prompt_turn(id, key, result);
        if let Some(b) = self.session(id, Account::restored).account.take_learned_baseline() {
            let key = self.learned_key(id);
            tracing::debug!(key, baseline = b, "learned the agent's hidden context");
            self.learned.agents.entry(key.clone()).or_default().baseline = Some(b);
            self.record_agent(key, Entry { baseline: Some(b), size: None });
        }
        if turn.is_some() {
            let stop_reason = match result {
                Some(r) => r.get("stopReason").and_then(Value::as_str).map(str::to_string),
                None => Some("error".to_string()),
            };
            let ended = crate::sinks::ledger::now_ms();
            let row = TurnRow { started: started.unwrap_or(ended), ended, stop_reason };
            self.record_settled(id, Some(row));
            let cost = turn.as_ref().and_then(|t| t.cost).unwrap_or(0.0);
            self.budget_alerts(id, cost);
        }
        if let (Some(turn), true) = (&turn, ok) {
            out.replace = emit::rewrite_prompt_result(line, turn, self.settings.keep_agent_usage);
        }
        // The turn's chat lines (crossings seen since it started, or waiting since the last
        // one) go before its update and result: the result is where many clients stop
        // reading the turn.
        out.before = self.take_chat(id, true);
        out.before.push(self.update_line(id, Trigger::Turn));
        out
    }

    /// Ends the turn the prompt `key` owns (if it owns one; else it leaves the queue) and
    /// starts the next queued one: the ended turn's usage, and when it started.
    fn end_prompt_turn(
        &mut self,
        id: &str,
        key: &str,
        result: Option<&Value>,
    ) -> (Option<TurnUsage>, Option<i64>) {
        let profile = self.profile;
        let cx_owned = self.context_parts(id);
        let s = self
            .sessions
            .entry(id.to_string())
            .or_insert_with(|| Session::new(Account::restored()));
        if let Some(r) = result {
            profile.on_prompt_result(&mut s.account, r);
        }
        let cx = ledger_context(&self.settings, cx_owned);
        let owns_turn = s.turn_owner.as_deref() == Some(key);
        if owns_turn && let Some(calls) = s.follow.as_mut().and_then(|f| f.end_turn_keyed(now_ms()))
        {
            s.account.transcript_turn_keyed(calls);
        }
        let turn = if owns_turn { s.account.end_turn(&cx) } else { None };
        if owns_turn {
            s.turn_owner = None;
        } else {
            s.queued.retain(|(k, ..)| k != key);
        }
        // The ended turn's start, taken before the next queued turn sets its own.
        let started = if owns_turn { s.turn_started.take() } else { None };
        if s.turn_owner.is_none()
            && let Some((next, tokens, sent)) = s.queued.pop_front()
        {
            s.turn_owner = Some(next);
            s.begin_turn(tokens, sent);
        }
        (turn, started)
    }

    /// A successful `session/close` or `session/delete`: a closed session can be loaded again;
    /// a deleted one is gone for good.
    fn on_closed(&mut self, id: &str, deleted: bool) {
        // A closed session has no next turn to tell its crossings in.
        self.alerting.chat_out.remove(id);
        self.usage.forget(id);
        if self.sessions.remove(id).is_some_and(|s| s.follow.is_some()) {
            self.commands.push(Command::Forget(id.to_string()));
        }
        if deleted {
            self.record_forget(id);
        } else {
            self.record_closed(id);
        }
    }
}

/// Whether the tap was wanted when the agent started, and whether it runs.
#[derive(Debug, Clone, Copy)]
struct TapAtStart {
    wanted: bool,
    runs: bool,
}

/// What to tell the user when `initialize` names (`name`) a profile, `recognised`, other than
/// the one the agent was started as: the tap was not pointed for it. `None` when the tap was
/// not wanted (nothing is lost) or nothing new was recognised.
fn late_recognition(
    name: &str,
    recognised: Profile,
    launched: Profile,
    tap: TapAtStart,
) -> Option<String> {
    if !tap.wanted || recognised == launched || recognised.is_generic() {
        return None;
    }
    let what = if !tap.runs {
        "the LLM-API tap was not started for it".to_owned()
    } else if launched.is_generic() {
        "the LLM-API tap points only the base-URL variables of `--tap on`".to_owned()
    } else {
        format!("the LLM-API tap was pointed as for `{}`", launched.name())
    };
    let profile = recognised.name();
    Some(format!(
        "the agent calls itself {name:?} in `initialize`: acp-usage's `{profile}` profile, which \
         its command did not name before it started, so {what}; put `--profile {profile}` \
         before `--` to tap its calls from the start"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_recognised_only_from_initialize_is_told_the_profile_to_name() {
        let p = |name| Profile::named(name).unwrap();
        let started = TapAtStart { wanted: true, runs: false };
        let text = late_recognition("Copilot", p("copilot"), Profile::generic(), started).unwrap();
        assert!(text.contains("--profile copilot"), "{text}");
        assert!(text.contains("was not started"), "{text}");
        // `--tap on` tapped it on the generic variables; a profile named wrongly.
        let runs = TapAtStart { wanted: true, runs: true };
        let text = late_recognition("x", p("claude"), Profile::generic(), runs).unwrap();
        assert!(text.contains("only the base-URL variables"), "{text}");
        let text = late_recognition("x", p("claude"), p("codex"), runs).unwrap();
        assert!(text.contains("as for `codex`") && text.contains("--profile claude"), "{text}");
        // Nothing to say: the tap was turned off, the command said it already, or the agent's
        // name names no profile.
        let off = TapAtStart { wanted: false, runs: false };
        assert_eq!(late_recognition("x", p("claude"), Profile::generic(), off), None);
        assert_eq!(late_recognition("x", p("claude"), p("claude"), runs), None);
        assert_eq!(late_recognition("x", Profile::generic(), Profile::generic(), started), None);
    }
}
