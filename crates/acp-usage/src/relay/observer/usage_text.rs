//! The text of acp-usage's answer to its own `/usage` command: Markdown that every client shows
//! as agent message text. Pure: the figures come in ([`Figures`]), text goes out. The figures
//! sit in a fenced code block, so that they line up in every client, terminals included (a
//! Markdown table only lines up where it is rendered).

use acp_usage_core::Snapshot;
use acp_usage_core::account::{Role, RoleTotals};
use acp_usage_core::budget::Scope;
use acp_usage_core::limits::Limit;
use acp_usage_core::limits::credits::Credits;

use super::limits::{when, window_parts};
use crate::numbers::thousands;

/// What `/usage` was asked to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Everything: the session, the day's and month's spending, windows, budgets.
    All,
    /// `/usage today`: the day's spending and its budget.
    Today,
    /// `/usage month`: the month's spending and its budget.
    Month,
    /// `/usage limits`: the subscription windows.
    Limits,
}

/// What the text shows; `today` and `month` are `Err` with why when they are not known.
#[derive(Debug)]
pub struct Figures<'a> {
    /// The session's figures: the snapshot its last `usage_update` showed.
    pub snapshot: &'a Snapshot,
    /// The session's settled calls by role.
    pub roles: &'a RoleTotals,
    /// Every session's spending since the day began (USD).
    pub today: Result<f64, String>,
    /// Every session's spending since the month began (USD).
    pub month: Result<f64, String>,
    /// The latest observation of each subscription window.
    pub limits: &'a [Limit],
    /// The credits and plan the provider last stated (Codex's), when it did.
    pub credits: Option<&'a Credits>,
    /// The budgets set, in USD.
    pub budgets: &'a [(Scope, f64)],
    /// When a day's or month's budget runs out at this pace, Unix seconds (only those that do
    /// before their period ends).
    pub budgets_run_out: &'a [(Scope, i64)],
    /// Now, in Unix seconds (for "resets in ...").
    pub now: i64,
}

/// The one-line help for `/<name>` with an argument it does not know.
pub fn help(name: &str) -> String {
    format!(
        "`/{name}` shows this session's context, cost and tokens, today's and this month's \
         spending, subscription windows and budgets; `/{name} today`, `/{name} month` and \
         `/{name} limits` narrow it."
    )
}

/// The Markdown answer to `/<name>` for a view of the figures.
pub fn render(name: &str, view: View, f: &Figures<'_>) -> String {
    let (title, rows) = match view {
        View::All => {
            let mut rows = session_rows(f);
            rows.extend(spend_rows(f, true, true));
            rows.extend(limit_rows(f));
            rows.extend(budget_rows(f, &[Scope::Session, Scope::Day, Scope::Month]));
            ("this session, your spending and limits", rows)
        }
        View::Today => {
            let mut rows = spend_rows(f, true, false);
            rows.push(("This session".into(), cost_text(f.snapshot)));
            rows.extend(budget_rows(f, &[Scope::Day]));
            ("today", rows)
        }
        View::Month => {
            let mut rows = spend_rows(f, false, true);
            rows.extend(budget_rows(f, &[Scope::Month]));
            ("this month", rows)
        }
        View::Limits => ("subscription windows", limit_rows(f)),
    };
    let mut out = format!("**/{name}**: {title} (answered by acp-usage; no tokens used)\n\n");
    if rows.is_empty() {
        out.push_str("No subscription window seen yet: acp-usage shows one once the provider or the agent has stated it.");
        return out;
    }
    let width = rows.iter().map(|(label, _)| label.chars().count()).max().unwrap_or(0) + 2;
    out.push_str("```text\n");
    for (label, value) in rows {
        let pad = width - label.chars().count();
        out.push_str(&format!("{label}{:pad$}{value}\n", ""));
    }
    out.push_str("```");
    out
}

type Rows = Vec<(String, String)>;

/// Context, model, cost, calls and tokens of the session.
fn session_rows(f: &Figures<'_>) -> Rows {
    let s = f.snapshot;
    let percent = s.used as f64 * 100.0 / s.size.max(1) as f64;
    let mut rows: Rows = vec![(
        "Context".into(),
        format!("{} of {} tokens ({percent:.0}%)", thousands(s.used), thousands(s.size)),
    )];
    if let Some(model) = &s.model {
        rows.push(("Model".into(), model.clone()));
    }
    rows.push(("Cost".into(), cost_text(s)));
    rows.push(("Calls".into(), calls_text(f.roles)));
    let t = &s.totals;
    let mut input = format!("{} tokens", thousands(t.input));
    if t.cache_read > 0 || t.cache_write > 0 {
        input.push_str(&format!(
            " (cache read {}, cache write {})",
            thousands(t.cache_read),
            thousands(t.cache_write)
        ));
    }
    rows.push(("Input".into(), input));
    let mut output = format!("{} tokens", thousands(t.output));
    if t.thought > 0 {
        output.push_str(&format!(" (thinking {})", thousands(t.thought)));
    }
    rows.push(("Output".into(), output));
    rows
}

/// The session's cost and whether it is exact, as `usage_update`'s `_meta` says it.
fn cost_text(s: &Snapshot) -> String {
    let Some(cost) = s.cost else {
        return if s.unpriced_calls > 0 {
            "not known (the catalog has no price for the model)".into()
        } else {
            "none yet".into()
        };
    };
    let exact = s.cost_source.is_exact() && !s.cost_partial && s.unpriced_calls == 0;
    let how = match (exact, s.cost_partial) {
        (true, _) => "exact",
        (false, true) => "partial: some calls were not seen",
        (false, false) => "estimated",
    };
    format!("{} ({how})", money(cost))
}

/// `2 main, 1 side`.
fn calls_text(roles: &RoleTotals) -> String {
    let parts: Vec<String> = roles
        .roles
        .iter()
        .filter(|(_, t)| t.calls > 0)
        .map(|(role, t)| {
            let name = match role {
                Role::Main => "main",
                Role::Subagent => "subagent",
                Role::Side => "side",
            };
            format!("{} {name}", thousands(t.calls))
        })
        .collect();
    if parts.is_empty() { "none yet".into() } else { parts.join(", ") }
}

/// Today's and this month's spending across sessions.
fn spend_rows(f: &Figures<'_>, today: bool, month: bool) -> Rows {
    let line = |v: &Result<f64, String>| match v {
        Ok(v) => format!("{} across all sessions", money(*v)),
        Err(why) => format!("not available ({why})"),
    };
    let mut rows = Rows::new();
    if today {
        rows.push(("Today".into(), line(&f.today)));
    }
    if month {
        rows.push(("This month".into(), line(&f.month)));
    }
    rows
}

/// Each subscription window: how full, when it runs out at this pace (when before its reset),
/// when it resets.
fn limit_rows(f: &Figures<'_>) -> Rows {
    f.limits
        .iter()
        .map(|l| {
            let (who, span) = window_parts(l);
            let mut value = format!("{:.0}% used", l.used_percent);
            if l.status.as_deref() == Some("rejected") {
                value.push_str(" (limit reached)");
            }
            if let Some(out) = l.runs_out_at {
                value.push_str(&format!(", at this pace runs out {}", when(out, f.now)));
            }
            match l.resets_at {
                Some(at) => value.push_str(&format!(", resets {}", when(at, f.now))),
                None => value.push_str(", reset time not stated"),
            }
            (format!("{who} {span}"), value)
        })
        .chain(f.credits.map(|c| {
            let who = crate::agents::Plan::of_provider(&c.provider)
                .map_or(c.provider.as_str(), |p| p.word);
            (format!("{who} credits"), c.describe())
        }))
        .collect()
}

/// The budgets of `scopes` that are set: spent of limit.
fn budget_rows(f: &Figures<'_>, scopes: &[Scope]) -> Rows {
    f.budgets
        .iter()
        .filter(|(scope, _)| scopes.contains(scope))
        .map(|(scope, limit)| {
            let spent = match scope {
                Scope::Session => Ok(f.snapshot.cost.unwrap_or(0.0)),
                Scope::Day => f.today.clone(),
                Scope::Month => f.month.clone(),
            };
            let mut value = match spent {
                Ok(spent) => {
                    format!("{} of {} ({:.0}%)", money(spent), money(*limit), spent * 100.0 / limit)
                }
                Err(_) => format!("{} (spending not available)", money(*limit)),
            };
            if let Some((_, out)) = f.budgets_run_out.iter().find(|(s, _)| s == scope) {
                value.push_str(&format!(", at this pace runs out {}", when(*out, f.now)));
            }
            (format!("Budget ({})", scope.as_str()), value)
        })
        .collect()
}

/// `$0.0123` under a dollar (a session's cost is often cents), `$1,234.56` from there.
pub fn money(v: f64) -> String {
    if v.abs() < 1.0 {
        return format!("${v:.4}");
    }
    let cents = (v * 100.0).round() as u64;
    format!("${}.{:02}", thousands(cents / 100), cents % 100)
}

#[cfg(test)]
mod tests {
    use acp_usage_core::limits::LimitSource;
    use acp_usage_core::{Source, TokenTotals};

    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot {
            used: 45_210,
            used_source: Source::Tap,
            used_exact: true,
            used_split: None,
            size: 200_000,
            size_source: Source::Catalog,
            cost: Some(0.123_456),
            cost_source: Source::Tap,
            unpriced_calls: 0,
            cost_partial: false,
            cost_floor: None,
            model: Some("claude-sonnet-4-5".into()),
            totals: TokenTotals {
                input: 90_000,
                cache_read: 60_000,
                cache_write: 20_000,
                output: 1_234,
                thought: 0,
                calls: 3,
            },
            totals_exact: true,
        }
    }

    fn roles() -> RoleTotals {
        let t = |calls| TokenTotals { calls, ..TokenTotals::default() };
        RoleTotals { roles: vec![(Role::Main, t(2)), (Role::Side, t(1))] }
    }

    fn limit(minutes: u64, percent: f64, resets_at: i64) -> Limit {
        Limit {
            provider: "anthropic".into(),
            window: if minutes == 300 { "five_hour" } else { "seven_day" }.into(),
            limit_id: None,
            window_minutes: Some(minutes),
            used_percent: percent,
            resets_at: Some(resets_at),
            status: Some("allowed".into()),
            source: LimitSource::Tap,
            observed_ms: 0,
            account: None,
            runs_out_at: None,
        }
    }

    /// 2026-11-26 11:55 UTC.
    const NOW: i64 = 1_795_701_600 - 7500;

    #[test]
    fn everything() {
        let (snap, roles) = (snapshot(), roles());
        let mut five = limit(300, 73.4, NOW + 7500);
        five.runs_out_at = Some(NOW + 38 * 60);
        let limits = [five, limit(10_080, 25.0, NOW + 3 * 86_400)];
        let f = Figures {
            snapshot: &snap,
            roles: &roles,
            today: Ok(1.5),
            month: Ok(1234.5),
            limits: &limits,
            credits: None,
            budgets: &[(Scope::Day, 20.0)],
            budgets_run_out: &[(Scope::Day, NOW + 3600)],
            now: NOW,
        };
        let want = "**/usage**: this session, your spending and limits (answered by acp-usage; \
                    no tokens used)\n\n```text\n\
                    Context        45,210 of 200,000 tokens (23%)\n\
                    Model          claude-sonnet-4-5\n\
                    Cost           $0.1235 (exact)\n\
                    Calls          2 main, 1 side\n\
                    Input          90,000 tokens (cache read 60,000, cache write 20,000)\n\
                    Output         1,234 tokens\n\
                    Today          $1.50 across all sessions\n\
                    This month     $1,234.50 across all sessions\n\
                    Claude 5-hour  73% used, at this pace runs out at 12:33 UTC (in 38 min), \
                    resets at 14:00 UTC (in 2 h 5 min)\n\
                    Claude weekly  25% used, resets on 2026-11-29 at 11:55 UTC (in 72 h)\n\
                    Budget (day)   $1.50 of $20.00 (8%), at this pace runs out at 12:55 UTC (in 1 h)\n```";
        assert_eq!(render("usage", View::All, &f), want);
    }

    #[test]
    fn narrowed_views_and_a_ledger_that_cannot_be_read() {
        let mut snap = snapshot();
        snap.cost_source = Source::Estimate;
        let roles = RoleTotals::default();
        let why = || Err("the ledger cannot be read".to_string());
        let f = Figures {
            snapshot: &snap,
            roles: &roles,
            today: why(),
            month: why(),
            limits: &[],
            credits: None,
            budgets: &[(Scope::Session, 1.0), (Scope::Day, 5.0), (Scope::Month, 50.0)],
            budgets_run_out: &[],
            now: NOW,
        };
        assert_eq!(
            render("cost", View::Today, &f),
            "**/cost**: today (answered by acp-usage; no tokens used)\n\n```text\n\
             Today         not available (the ledger cannot be read)\n\
             This session  $0.1235 (estimated)\n\
             Budget (day)  $5.00 (spending not available)\n```"
        );
        assert_eq!(
            render("usage", View::Month, &f),
            "**/usage**: this month (answered by acp-usage; no tokens used)\n\n```text\n\
             This month      not available (the ledger cannot be read)\n\
             Budget (month)  $50.00 (spending not available)\n```"
        );
        assert_eq!(
            render("usage", View::Limits, &f),
            "**/usage**: subscription windows (answered by acp-usage; no tokens used)\n\n\
             No subscription window seen yet: acp-usage shows one once the provider or the \
             agent has stated it."
        );
        let all = render("usage", View::All, &f);
        assert!(all.contains("\nCalls             none yet\n"), "{all}");
        let mut unpriced = snapshot();
        unpriced.cost = None;
        assert_eq!(cost_text(&unpriced), "none yet");
        unpriced.unpriced_calls = 2;
        assert_eq!(cost_text(&unpriced), "not known (the catalog has no price for the model)");
        assert!(all.contains("\nBudget (session)  $0.1235 of $1.00 (12%)\n"), "{all}");
    }

    #[test]
    fn a_weekly_only_codex_plan_and_its_credits() {
        let (snap, roles) = (snapshot(), roles());
        let mut week = limit(10_080, 40.0, NOW + 3 * 86_400);
        week.provider = "openai".into();
        week.window = "primary".into();
        let credits = acp_usage_core::limits::credits::from_headers(
            [
                ("x-codex-credits-has-credits", "true"),
                ("x-codex-credits-balance", "12.5"),
                ("x-codex-plan-type", "plus"),
            ],
            0,
        );
        let f = Figures {
            snapshot: &snap,
            roles: &roles,
            today: Ok(0.0),
            month: Ok(0.0),
            limits: std::slice::from_ref(&week),
            credits: credits.as_ref(),
            budgets: &[],
            budgets_run_out: &[],
            now: NOW,
        };
        assert_eq!(
            render("usage", View::Limits, &f),
            "**/usage**: subscription windows (answered by acp-usage; no tokens used)\n\n\
             ```text\n\
             Codex weekly   40% used, resets on 2026-11-29 at 11:55 UTC (in 72 h)\n\
             Codex credits  12.5 credits (plan plus)\n```"
        );
    }

    #[test]
    fn help_and_money() {
        assert_eq!(
            help("usage"),
            "`/usage` shows this session's context, cost and tokens, today's and this month's \
             spending, subscription windows and budgets; `/usage today`, `/usage month` and \
             `/usage limits` narrow it."
        );
        assert_eq!(money(0.0), "$0.0000");
        assert_eq!(money(0.99994), "$0.9999");
        assert_eq!(money(12.345), "$12.35");
    }
}
