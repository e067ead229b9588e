//! Subscription windows in the relay: each observation (the tap's headers and events, the
//! agent's rate-limit `_meta`, Codex's rollout) goes on the board that every `usage_update`
//! shows under `_meta.acpUsage.limits`, into the ledger, and, when a window crossed a line of
//! `[limits] warn_at`, into a `notice` saying when it resets (or, for a client without
//! notices, a line in the chat at the session's next turn moment; see [`super::alerts`]).

use acp_usage_core::limits::credits::Credits;
use acp_usage_core::limits::{Limit, LimitCrossing};
use serde_json::json;

use super::*;
use crate::agents::Plan;
use crate::sinks::ledger::Write;

impl Observer {
    /// Windows a source stated, for `session` when the source knows it (else the session that
    /// prompted last). A window that moved while its session is between turns gets an update
    /// of its own, so the editor's figure is current.
    pub fn limits_observed(&mut self, mut limits: Vec<Limit>, session: Option<&str>) {
        if limits.is_empty() {
            return;
        }
        let session = session
            .filter(|s| self.sessions.contains_key(*s))
            .map(str::to_owned)
            .or_else(|| self.latest_session());
        let now = now_ms();
        let mut moved = false;
        for limit in &mut limits {
            // A source that does not say whose window it is (the agent's own report, a
            // transcript) speaks of the account in use.
            if limit.account.is_none() {
                limit.account = self.limit_board.account_in_use(&limit.provider).map(str::to_owned);
            }
            moved |= self.limit_board.get(&limit.key()).is_none_or(|b| !b.same_figures(limit));
            let told = self.limit_board.observe(limit.clone(), now);
            if let Some(crossing) = told.crossing {
                self.limit_alert(session.as_deref(), &crossing);
            }
            if let Some(window) = told.runs_out {
                self.runs_out_alert(session.as_deref(), &window, now / 1000);
            }
        }
        tracing::debug!(windows = limits.len(), moved, "subscription windows observed");
        self.writes.push(Write::Limits { limits, session: session.clone() });
        if moved
            && let Some(id) = session
            && self.sessions.get(&id).is_some_and(|s| !s.account.in_turn())
        {
            self.counted_between_turns(&id);
        }
    }

    /// Windows remembered from earlier runs (the ledger's, at start): those of the accounts
    /// the agent will use go on the board, so the first update shows them.
    pub fn limits_remembered(&mut self, windows: Vec<acp_usage_core::limits::Tracked>) {
        let now = now_ms();
        let mut shown = 0;
        for t in windows {
            let l = &t.latest;
            let Some(account) = self.limit_board.account_in_use(&l.provider) else { continue };
            if l.account.as_deref() == Some(account) {
                self.limit_board.seed(t, now);
                shown += 1;
            }
        }
        tracing::debug!(shown, "subscription windows remembered");
    }

    /// The session that prompted last, else any.
    fn latest_session(&self) -> Option<String> {
        self.sessions.iter().max_by_key(|(_, s)| s.tap.last_prompt).map(|(id, _)| id.clone())
    }

    /// Credits and a plan a response stated (Codex's): kept per provider, into the ledger, on
    /// the next update.
    pub fn credits_observed(&mut self, mut credits: Credits) {
        if credits.account.is_none() {
            credits.account = self.limit_board.account_in_use(&credits.provider).map(str::to_owned);
        }
        tracing::debug!(provider = credits.provider, "credits observed");
        self.writes.push(Write::Credits(credits.clone()));
        self.credits.insert(credits.provider.clone(), credits);
    }

    /// A response named the account (organisation) of a credential: kept in the ledger, so
    /// the credential names it at the next start. Written once per pairing in a run.
    pub fn account_named(&mut self, credential: String, account: String) {
        if self.aliases_written.insert((credential.clone(), account.clone())) {
            self.writes.push(Write::Alias { credential, account });
        }
    }

    /// The credits stated for the account in use, for the updates and `/usage` (one
    /// provider's; the one whose account is known first, in name order).
    pub(super) fn current_credits(&self) -> Option<Credits> {
        self.credits
            .values()
            .find(|c| c.account.as_deref() == self.limit_board.account_in_use(&c.provider))
            .cloned()
    }

    /// The latest observation of every window, for the updates.
    pub(super) fn current_limits(&self) -> Vec<Limit> {
        self.limit_board.current(now_ms())
    }

    /// A notice (and a log line) for a window that crossed a line.
    fn limit_alert(&mut self, session: Option<&str>, c: &LimitCrossing) {
        let l = &c.limit;
        let name = window_name(l);
        let title = if c.fraction >= 1.0 {
            format!("{name} reached")
        } else {
            format!("{name}: {:.0}% used", l.used_percent)
        };
        let description = match l.resets_at {
            Some(at) => format!("It resets {}.", when(at, now_ms() / 1000)),
            None => "The provider did not say when it resets.".to_owned(),
        };
        tracing::warn!("{title}. {description}");
        let Some(id) = session else { return };
        let meta = json!({"limit": crate::relay::emit::limit_window(l), "fraction": c.fraction});
        let severity = if c.fraction >= 1.0 { "error" } else { "warning" };
        self.notice(id, severity, &title, &description, meta);
        self.chat_warning(id, &format!("{title}. {description}"));
    }
}

impl Observer {
    /// A notice (and a log line) for a window whose forecast first says it runs out before it
    /// resets: once per window and period.
    fn runs_out_alert(&mut self, session: Option<&str>, l: &Limit, now: i64) {
        let (Some(out), Some(reset)) = (l.runs_out_at, l.resets_at) else { return };
        let name = window_name(l);
        let title = format!("{name} runs out {}", when(out, now));
        let before = span(reset - out);
        let text =
            format!("at this pace {name} runs out {}, {before} before it resets.", when(out, now));
        tracing::warn!("{text}");
        let Some(id) = session else { return };
        let description = format!("At this pace, {before} before it resets {}.", when(reset, now));
        let meta = json!({"limit": crate::relay::emit::limit_window(l), "runsOut": true});
        self.notice(id, "warning", &title, &description, meta);
        self.chat_warning(id, &text);
    }
}

/// How a notice names a window: `Claude's 5-hour limit`, `Codex's weekly window`.
fn window_name(l: &Limit) -> String {
    let (who, span) = window_parts(l);
    format!("{who}'s {span} limit")
}

/// Who a window is of and its span, in the user's words: (`Claude`, `5-hour`), (`Codex`,
/// `weekly`); `/usage` shows them as `Claude 5-hour`.
pub(super) fn window_parts(l: &Limit) -> (&str, String) {
    let who = Plan::of_provider(&l.provider).map_or(l.provider.as_str(), |p| p.word);
    let span = match (l.window.as_str(), l.window_minutes) {
        ("overage", _) => "usage credit".to_owned(),
        (_, Some(300)) => "5-hour".to_owned(),
        (_, Some(10080)) => "weekly".to_owned(),
        (_, Some(m)) if m % 1440 == 0 => format!("{}-day", m / 1440),
        (_, Some(m)) if m % 60 == 0 => format!("{}-hour", m / 60),
        (_, Some(m)) => format!("{m}-minute"),
        (w, None) => w.to_owned(),
    };
    (who, span)
}

/// `at 14:00 UTC (in 2 h 5 min)`, or the date when it is more than a day away.
pub(super) fn when(at: i64, now: i64) -> String {
    let Some(t) = chrono::DateTime::from_timestamp(at, 0) else { return "later".into() };
    let left = (at - now).max(0);
    let clock = if left < 86_400 {
        t.format("at %H:%M UTC").to_string()
    } else {
        t.format("on %Y-%m-%d at %H:%M UTC").to_string()
    };
    format!("{clock} (in {})", span(left))
}

/// A span of seconds as people say it: `38 min`, `3 h`, `3 h 8 min`.
pub(super) fn span(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match (seconds / 3600, (seconds % 3600) / 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_the_window_and_when_it_resets() {
        let mut l = acp_usage_core::limits::from_headers(
            [("anthropic-ratelimit-unified-5h-utilization", "0.8")],
            0,
        )
        .remove(0);
        assert_eq!(window_name(&l), "Claude's 5-hour limit");
        l.window_minutes = Some(10080);
        assert_eq!(window_name(&l), "Claude's weekly limit");
        // 2026-11-26 14:00 UTC, 2 h 5 min after now.
        assert_eq!(when(1_795_701_600, 1_795_701_600 - 7500), "at 14:00 UTC (in 2 h 5 min)");
        assert_eq!(
            when(1_795_701_600, 1_795_701_600 - 3 * 86_400),
            "on 2026-11-26 at 14:00 UTC (in 72 h)"
        );
        assert_eq!(span(3 * 3600 + 8 * 60 + 59), "3 h 8 min");
        assert_eq!(span(-5), "0 min");
    }
}
