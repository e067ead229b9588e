//! Budgets and context thresholds in the relay: a crossing becomes a `notice` session update
//! (to a client that advertised `session.notices` in `initialize`) and a log line; in `block`
//! mode a prompt that would start past a budget is answered here and never reaches the agent.
//!
//! A client that shows no notices (most of them) learns of a budget's or a subscription
//! window's crossing in the chat instead: one line of agent message text, the fallback the
//! Session Notices RFD names. Such a line belongs to a turn (agent-shell flags updates that
//! come while no prompt is in flight), so it waits for one: it goes out before the session's
//! next prompt result, or as its next turn starts. Context crossings stay out of the chat: the
//! editor's ring already shows them.
//! When a line is crossed and whether a prompt may start is decided by
//! [`acp_usage_core::budget`]; this module only gathers the figures and words the messages.
//!
//! Day and month budgets count every session of every running acp-usage: what the ledger file
//! holds, plus what this process has settled and not yet handed to the ledger's writer.

use acp_usage_core::budget::{Crossings, Overrun, Scope, overrun};
use jsonrpsee_types::ErrorObject;
use serde_json::json;

use crate::numbers::thousands;

use super::*;
use crate::sinks::ledger::{Store, Write, period_start_ms};

/// The JSON-RPC error code of a prompt refused for a spent budget (in the range JSON-RPC leaves
/// to implementations; ACP does not use it).
pub const BUDGET_EXCEEDED: i32 = -32050;

/// The observer's alerting state: whether the client shows notices, what waits to be sent,
/// and what each session and period has crossed (so a line is told once).
#[derive(Debug, Default)]
pub(super) struct Alerting {
    /// The client shows `notice` session updates (it said so in `initialize`).
    pub(super) notices: bool,
    /// Notices to send the editor after the line being handled.
    pub(super) notices_out: Vec<Vec<u8>>,
    /// Crossings to tell in the chat of a client without notices, per session, until one of
    /// its turns is in flight.
    pub(super) chat_out: HashMap<String, Vec<String>>,
    /// What each session crossed of its context window and session budget.
    sessions: HashMap<String, SessionAlerts>,
    /// What the day's and month's spending crossed, per period (its start, Unix ms).
    periods: HashMap<(Scope, i64), Crossings>,
    /// The periods this process has looked at, and whether their run-out was told (or already
    /// held when it first looked).
    forecasts_told: HashMap<(Scope, i64), bool>,
}

/// What one session has crossed so far.
#[derive(Debug, Default)]
pub(super) struct SessionAlerts {
    context: Option<Crossings>,
    budget: Option<Crossings>,
}

impl Observer {
    /// What this process spent in `scope` (the session `id`'s, or every session's since the day
    /// or month began), and the limit's crossings for that period.
    fn spent(&mut self, id: &str, scope: Scope) -> f64 {
        match scope {
            Scope::Session => self.snapshot(id).cost.unwrap_or(0.0),
            Scope::Day | Scope::Month => match self.period_spent(scope) {
                Ok(v) => v,
                Err((path, err)) => {
                    tracing::warn!(
                        "cannot read the ledger {} for the {} budget: {err}",
                        path.display(),
                        scope.adjective()
                    );
                    self.unhanded_spent()
                }
            },
        }
    }

    /// What every session of every acp-usage spent since the day (or month) began: what the
    /// ledger file holds plus what this process has not handed to its writer (without a
    /// ledger, only the latter); the ledger's path and the error when it cannot be read.
    pub(super) fn period_spent(
        &self,
        scope: Scope,
    ) -> Result<f64, (std::path::PathBuf, rusqlite::Error)> {
        let since = period_start_ms(scope == Scope::Month);
        let stored = match self.settings.ledger.as_deref() {
            Some(path) => Store::open_read(path)
                .and_then(|s| s.spent_since(since))
                .map_err(|err| (path.to_owned(), err))?,
            None => 0.0,
        };
        Ok(stored + self.unhanded_spent())
    }

    /// The cost of the calls this process settled and has not handed to the ledger's writer.
    fn unhanded_spent(&self) -> f64 {
        self.writes
            .iter()
            .filter_map(|w| match w {
                Write::Calls { calls, .. } => {
                    Some(calls.iter().filter_map(|c| c.cost).sum::<f64>())
                }
                _ => None,
            })
            .sum::<f64>()
            + self.sessions.values().map(|s| s.account.accounted_cost()).sum::<f64>()
    }

    /// In `block` mode, the answer to a prompt that would start past a budget.
    pub(super) fn refuse_prompt(&mut self, id: &str, raw_id: &str) -> Option<Vec<u8>> {
        if !self.settings.budgets.block || self.settings.budgets.limits.is_empty() {
            return None;
        }
        self.sessions.get(id)?;
        let limits = self.settings.budgets.limits.clone();
        let spent: Vec<(Scope, f64)> =
            limits.iter().map(|(s, _)| (*s, self.spent(id, *s))).collect();
        let Overrun { scope, limit, spent } =
            overrun(&limits, |s| spent.iter().find(|(k, _)| *k == s).map_or(0.0, |(_, v)| *v))?;
        let what = spent_where(scope);
        let message = format!(
            "acp-usage: the {} budget of ${limit:.2} is spent (${spent:.2} {what}); the prompt was \
             not sent. Raise `budget.{}` or set `budget.action = \"warn\"` in the acp-usage \
             config file to go on.",
            scope.adjective(),
            scope.as_str()
        );
        tracing::warn!(session = id, "{message}");
        let data = json!({"acpUsage": {"budget": scope.as_str(), "limit": limit, "spent": spent, "currency": "USD"}});
        let error = ErrorObject::owned(BUDGET_EXCEEDED, message, Some(data));
        Some(emit::error_response(raw_id, error))
    }

    /// After a turn: notices for the budgets whose lines its cost crossed.
    pub(super) fn budget_alerts(&mut self, id: &str, turn_cost: f64) {
        let limits = self.settings.budgets.limits.clone();
        if limits.is_empty() {
            return;
        }
        let lines = self.settings.budgets.warn_at.clone();
        for (scope, limit) in limits {
            let after = self.spent(id, scope);
            let before = after - turn_cost;
            let crossed = match scope {
                Scope::Session => {
                    let a = self.alerting.sessions.entry(id.to_string()).or_default();
                    a.budget
                        .get_or_insert_with(|| Crossings::at(&lines, before, limit))
                        .update(&lines, after, limit)
                }
                Scope::Day | Scope::Month => {
                    let period = period_start_ms(scope == Scope::Month);
                    self.alerting
                        .periods
                        .entry((scope, period))
                        .or_insert_with(|| Crossings::at(&lines, before, limit))
                        .update(&lines, after, limit)
                }
            };
            if scope != Scope::Session {
                self.budget_forecast(id, scope, limit, before, after);
            }
            let Some(fraction) = crossed else { continue };
            let what = spent_where(scope);
            let title = if fraction >= 1.0 {
                format!("The {} budget of ${limit:.2} is spent", scope.adjective())
            } else {
                format!("{:.0}% of the {} budget spent", fraction * 100.0, scope.adjective())
            };
            let mut description = format!("${after:.2} of ${limit:.2} {what}.");
            if fraction >= 1.0 && self.settings.budgets.block {
                description.push_str(" The next prompt will be refused.");
            }
            tracing::warn!(session = id, "{title}: {description}");
            let meta = json!({"budget": scope.as_str(), "fraction": fraction, "limit": limit, "spent": after, "currency": "USD"});
            let severity = if fraction >= 1.0 { "error" } else { "warning" };
            self.notice(id, severity, &title, &description, meta);
            self.chat_warning(id, &format!("{title}: {description}"));
        }
    }

    /// A day's or month's budget that at this pace runs out before the period ends: told once
    /// per period; what already held when this process first looked was told by another.
    fn budget_forecast(&mut self, id: &str, scope: Scope, limit: f64, before: f64, after: f64) {
        let month = scope == Scope::Month;
        let period = (scope, period_start_ms(month));
        let now = crate::sinks::ledger::now_ms();
        let told = self.alerting.forecasts_told.entry(period).or_insert_with(|| {
            crate::sinks::ledger::budget_runs_out(month, before, limit, now).is_some()
        });
        if *told || after >= limit {
            return;
        }
        let Some(out) = crate::sinks::ledger::budget_runs_out(month, after, limit, now) else {
            return;
        };
        *told = true;
        let out = out / 1000;
        let ends = if month { "month" } else { "day" };
        let title = format!(
            "At this pace the {} budget of ${limit:.2} runs out {}",
            scope.adjective(),
            super::limits::when(out, now / 1000)
        );
        let description =
            format!("${after:.2} {} so far, before the {ends} ends.", spent_where(scope));
        tracing::warn!(session = id, "{title}: {description}");
        let meta = json!({"budget": scope.as_str(), "runsOut": true, "limit": limit, "spent": after, "currency": "USD"});
        self.notice(id, "warning", &title, &description, meta);
        self.chat_warning(id, &format!("{title}: {description}"));
    }

    /// After a `usage_update`: a notice when `used` crossed a line of the window.
    pub(super) fn context_alert(&mut self, id: &str, used: u64, size: u64, model: Option<&str>) {
        let lines = &self.settings.budgets.context_warn_at;
        if size == 0 || lines.is_empty() {
            return;
        }
        let (used_f, size_f) = (used as f64, size as f64);
        let a = self.alerting.sessions.entry(id.to_string()).or_default();
        let crossed = match &mut a.context {
            Some(c) => c.update(lines, used_f, size_f),
            None => {
                // What a reopened session had crossed before is not told again.
                a.context = Some(Crossings::at(lines, used_f, size_f));
                None
            }
        };
        let Some(fraction) = crossed else { return };
        let title = format!("Context {:.0}% full", fraction * 100.0);
        let description = format!(
            "{} of {} tokens in use{}.",
            thousands(used),
            thousands(size),
            model.map(|m| format!(" ({m})")).unwrap_or_default()
        );
        tracing::warn!(session = id, "{title}: {description}");
        let meta = json!({"context": {"fraction": fraction, "used": used, "size": size}});
        self.notice(id, "warning", &title, &description, meta);
    }

    /// Queues a `notice` for the editor, when it shows notices.
    pub(super) fn notice(
        &mut self,
        id: &str,
        severity: &str,
        title: &str,
        description: &str,
        meta: Value,
    ) {
        if !self.alerting.notices {
            return;
        }
        let update = json!({
            "sessionUpdate": "notice",
            "severity": severity,
            "title": title,
            "description": description,
            "_meta": {"acpUsage": meta},
        });
        self.alerting.notices_out.push(emit::session_update(id, update));
    }

    /// Queues a crossing for the chat of session `id`, when its client shows no notices and
    /// `[notices] chat` is on: it waits for a moment of one of the session's turns.
    pub(super) fn chat_warning(&mut self, id: &str, text: &str) {
        if self.alerting.notices || !self.settings.budgets.chat {
            return;
        }
        self.alerting.chat_out.entry(id.to_string()).or_default().push(text.to_owned());
    }

    /// The chat lines waiting for session `id`, as `agent_message_chunk` updates: `after_text`
    /// when the turn's own message may precede them (the line then starts a paragraph of its
    /// own, since clients join a turn's chunks into one message).
    pub(super) fn take_chat(&mut self, id: &str, after_text: bool) -> Vec<Vec<u8>> {
        let Some(texts) = self.alerting.chat_out.remove(id) else { return Vec::new() };
        texts.iter().map(|t| chat_line(id, t, after_text)).collect()
    }
}

/// One line of agent message text saying a crossing: `acp-usage: <what>`, a paragraph apart
/// from the agent's own text, marked in `_meta.acpUsage` so a client (or a test) can tell it.
pub(super) fn chat_line(id: &str, text: &str, after_text: bool) -> Vec<u8> {
    let lead = if after_text { "\n\n" } else { "" };
    let update = json!({
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("{lead}acp-usage: {text}\n\n")},
        "_meta": {"acpUsage": {"warning": true}},
    });
    emit::session_update(id, update)
}

/// Where a budget's spending was counted, as messages say it.
pub(super) fn spent_where(scope: Scope) -> &'static str {
    match scope {
        Scope::Session => "in this session",
        Scope::Day => "today, across all sessions",
        Scope::Month => "this month, across all sessions",
    }
}
