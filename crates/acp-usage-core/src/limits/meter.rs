//! Zed's plan-usage meter for every provider: the subscription windows on the board, mapped to
//! the shape Zed reads from a `usage_update`'s `_meta["_claude/rateLimit"]` (claude-agent-acp's
//! `rate_limit_info`, `crates/acp_thread/src/rate_limits.rs` in Zed).
//!
//! Zed draws two windows, `five_hour` and `seven_day`. Any provider's window of those lengths
//! fills them: Anthropic's `five_hour`/`seven_day` claims, and any other window that states 300
//! or 10,080 minutes (Codex's primary and secondary). Windows of other lengths (Gemini's quotas,
//! Anthropic's `seven_day_overage_included`, other Codex windows) stay out of it.
//!
//! The rules, pure and deterministic:
//! - the windows come from one provider's limit family (so the meter never mixes Claude's 5-hour
//!   window with Codex's weekly one): the family whose 5-hour or 7-day window was observed last
//!   (the provider the agent is using now); on a tie the default family (Anthropic's, Codex's
//!   `codex`), then the fuller family, then the first in the board's order;
//! - `rateLimitType` is the fuller of the two windows (a tie goes to the 5-hour one, which
//!   resets first), and the top-level `utilization`/`resetsAt` are its own;
//! - `status` is the provider's word for that window when it gives one Zed knows (`allowed`,
//!   `allowed_warning`, `rejected`); else `rejected` once the window is used up (100% or more),
//!   else `allowed` (Zed warns from 80% by itself, so no warning is made up here);
//! - `utilization` is a fraction (the board keeps percent), rounded to six places so that float
//!   noise never reaches the wire, not clamped (Zed clamps; the figure is the provider's);
//! - a window whose reset time has passed is shown empty (0, `allowed`, no reset time): it
//!   started over, and its old fill would be stale (Zed keeps a window it is no longer sent, so
//!   leaving it out would not clear it). The next response states the new window.
//!
//! The type serialises to exactly the JSON Zed parses; the binary puts it under the key.

use serde::Serialize;

use super::Limit;

/// The `_meta` key Zed (and claude-agent-acp) use.
pub const CLAUDE_RATE_LIMIT_KEY: &str = "_claude/rateLimit";

/// Minutes in Zed's two windows.
const FIVE_HOURS: u64 = 300;
const SEVEN_DAYS: u64 = 10_080;

/// The status words Zed accepts; anything else makes it drop the whole value.
const STATUSES: [&str; 3] = ["allowed", "allowed_warning", "rejected"];

/// One of Zed's two windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MeterWindowKind {
    /// `five_hour`.
    FiveHour,
    /// `seven_day`.
    SevenDay,
}

/// A window in `unifiedWindows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeterWindow {
    /// How full, a fraction (can pass 1).
    pub utilization: f64,
    /// When it resets, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
}

/// Both windows, as Zed's `unifiedWindows` names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeterWindows {
    /// The 5-hour window, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub five_hour: Option<MeterWindow>,
    /// The 7-day window, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seven_day: Option<MeterWindow>,
}

/// The value of `_meta["_claude/rateLimit"]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZedMeter {
    /// `allowed`, `allowed_warning` or `rejected`: of the `rate_limit_type` window.
    pub status: &'static str,
    /// The fuller window.
    pub rate_limit_type: MeterWindowKind,
    /// The fuller window's fraction.
    pub utilization: f64,
    /// The fuller window's reset, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
    /// Every window known, of the two.
    pub unified_windows: MeterWindows,
}

/// Which of Zed's windows `l` fills, if any.
pub fn meter_window(l: &Limit) -> Option<MeterWindowKind> {
    if l.provider == "anthropic" {
        // Anthropic names its windows; `seven_day_overage_included` is a week long too, but it
        // is not the plan's weekly limit.
        return match l.window.as_str() {
            "five_hour" => Some(MeterWindowKind::FiveHour),
            "seven_day" => Some(MeterWindowKind::SevenDay),
            _ => None,
        };
    }
    match l.window_minutes {
        Some(FIVE_HOURS) => Some(MeterWindowKind::FiveHour),
        Some(SEVEN_DAYS) => Some(MeterWindowKind::SevenDay),
        _ => None,
    }
}

/// A limit family: provider and limit id.
type Family<'a> = (&'a str, &'a str);

fn family(l: &Limit) -> Family<'_> {
    (l.provider.as_str(), l.limit_id.as_deref().unwrap_or(""))
}

/// Whether a family is its provider's default one (Anthropic has one; Codex's is `codex`).
fn is_default(f: Family<'_>) -> bool {
    matches!(f.1, "" | "codex")
}

/// A window as the meter shows it at some time.
struct Shown {
    fraction: f64,
    resets_at: Option<i64>,
    status: &'static str,
}

impl Shown {
    /// `l` at `now_s` (Unix seconds): empty once its reset has passed.
    fn of(l: &Limit, now_s: i64) -> Shown {
        match l.resets_at {
            Some(at) if at <= now_s => Shown { fraction: 0.0, resets_at: None, status: "allowed" },
            resets_at => Shown { fraction: fraction(l), resets_at, status: status(l) },
        }
    }

    fn window(&self) -> MeterWindow {
        MeterWindow { utilization: self.fraction, resets_at: self.resets_at }
    }
}

/// Zed's meter for `limits` (the latest observation of each window) at `now_s` (Unix seconds);
/// `None` when no window of five hours or seven days is among them.
pub fn zed_meter(limits: &[Limit], now_s: i64) -> Option<ZedMeter> {
    let candidates: Vec<(&Limit, MeterWindowKind)> =
        limits.iter().filter_map(|l| Some((l, meter_window(l)?))).collect();
    let chosen = pick_family(&candidates)?;
    let in_family: Vec<(&Limit, MeterWindowKind)> =
        candidates.into_iter().filter(|(l, _)| family(l) == chosen).collect();
    // Two windows of one length in one family (not seen in practice): the later, then fuller.
    let slot = |kind: MeterWindowKind| {
        in_family.iter().filter(|(_, k)| *k == kind).map(|(l, _)| *l).max_by(|a, b| {
            a.observed_ms.cmp(&b.observed_ms).then(a.used_percent.total_cmp(&b.used_percent))
        })
    };
    let five = slot(MeterWindowKind::FiveHour).map(|l| Shown::of(l, now_s));
    let seven = slot(MeterWindowKind::SevenDay).map(|l| Shown::of(l, now_s));
    let (kind, primary) = match (&five, &seven) {
        (Some(f), Some(s)) if s.fraction > f.fraction => (MeterWindowKind::SevenDay, s),
        (Some(f), _) => (MeterWindowKind::FiveHour, f),
        (None, Some(s)) => (MeterWindowKind::SevenDay, s),
        (None, None) => return None,
    };
    Some(ZedMeter {
        status: primary.status,
        rate_limit_type: kind,
        utilization: primary.fraction,
        resets_at: primary.resets_at,
        unified_windows: MeterWindows {
            five_hour: five.as_ref().map(Shown::window),
            seven_day: seven.as_ref().map(Shown::window),
        },
    })
}

/// The family the meter shows (see the module's rules).
fn pick_family<'a>(candidates: &[(&'a Limit, MeterWindowKind)]) -> Option<Family<'a>> {
    let mut families: Vec<Family<'a>> = candidates.iter().map(|(l, _)| family(l)).collect();
    families.sort_unstable();
    families.dedup();
    let latest = |f: Family<'_>| {
        candidates.iter().filter(|(l, _)| family(l) == f).map(|(l, _)| l.observed_ms).max()
    };
    let fullest = |f: Family<'_>| {
        candidates
            .iter()
            .filter(|(l, _)| family(l) == f)
            .map(|(l, _)| l.used_percent)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    // `max_by` keeps the last of equals: iterate in reverse so a full tie goes to the first.
    families.into_iter().rev().max_by(|a, b| {
        latest(*a)
            .cmp(&latest(*b))
            .then(is_default(*a).cmp(&is_default(*b)))
            .then(fullest(*a).total_cmp(&fullest(*b)))
    })
}

fn fraction(l: &Limit) -> f64 {
    (l.used_percent * 1e4).round() / 1e6
}

/// The window's status in Zed's words.
fn status(l: &Limit) -> &'static str {
    if let Some(word) = l.status.as_deref().and_then(|s| STATUSES.iter().find(|w| **w == s)) {
        return word;
    }
    if l.used_percent >= 100.0 { "rejected" } else { "allowed" }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::limits::{LimitSource, from_headers};

    /// Before every reset below.
    const NOW: i64 = 1_700_000_000;

    fn codex(window: &str, id: &str, minutes: u64, used: f64, observed_ms: i64) -> Limit {
        Limit {
            provider: "openai".into(),
            window: window.into(),
            limit_id: Some(id.into()),
            window_minutes: Some(minutes),
            used_percent: used,
            resets_at: Some(1_800_000_000 + minutes as i64),
            status: None,
            source: LimitSource::Tap,
            observed_ms,
            account: None,
            runs_out_at: None,
        }
    }

    fn shape(limits: &[Limit]) -> serde_json::Value {
        shape_at(limits, NOW)
    }

    fn shape_at(limits: &[Limit], now_s: i64) -> serde_json::Value {
        serde_json::to_value(zed_meter(limits, now_s)).unwrap()
    }

    #[test]
    fn anthropic_headers_give_both_windows_the_fuller_first() {
        let limits = from_headers(
            [
                ("anthropic-ratelimit-unified-status", "allowed"),
                ("anthropic-ratelimit-unified-5h-utilization", "0.42"),
                ("anthropic-ratelimit-unified-5h-reset", "1800000000"),
                ("anthropic-ratelimit-unified-7d-utilization", "0.73"),
                ("anthropic-ratelimit-unified-7d-reset", "1800500000"),
                ("anthropic-ratelimit-unified-7d-status", "allowed_warning"),
                // A week long, but not the plan's weekly limit: not on the meter.
                ("anthropic-ratelimit-unified-7d_oi-utilization", "0.99"),
            ],
            5,
        );
        assert_eq!(
            shape(&limits),
            json!({
                "status": "allowed_warning",
                "rateLimitType": "seven_day",
                "utilization": 0.73,
                "resetsAt": 1_800_500_000,
                "unifiedWindows": {
                    "five_hour": {"utilization": 0.42, "resetsAt": 1_800_000_000},
                    "seven_day": {"utilization": 0.73, "resetsAt": 1_800_500_000},
                },
            })
        );
    }

    #[test]
    fn codex_windows_by_their_length_and_a_status_when_none_is_stated() {
        let mut five = codex("primary", "codex", 300, 12.5, 1);
        let week = codex("secondary", "codex", 10_080, 12.5, 1);
        // A tie goes to the 5-hour window; Codex states no status.
        assert_eq!(
            shape(&[five.clone(), week.clone()]),
            json!({
                "status": "allowed",
                "rateLimitType": "five_hour",
                "utilization": 0.125,
                "resetsAt": 1_800_000_300,
                "unifiedWindows": {
                    "five_hour": {"utilization": 0.125, "resetsAt": 1_800_000_300},
                    "seven_day": {"utilization": 0.125, "resetsAt": 1_800_010_080},
                },
            })
        );
        five.used_percent = 100.0;
        five.resets_at = None;
        let m = zed_meter(&[five, week], NOW).unwrap();
        assert_eq!((m.status, m.resets_at), ("rejected", None));
        assert!(!serde_json::to_string(&m).unwrap().contains("\"resetsAt\":null"));
        // A plan whose primary window is the weekly one: only `seven_day`.
        let only = shape(&[codex("primary", "codex", 10_080, 3.0, 1)]);
        assert_eq!(only["rateLimitType"], "seven_day");
        assert_eq!(
            only["unifiedWindows"],
            json!({"seven_day": {"utilization": 0.03, "resetsAt": 1_800_010_080}})
        );
    }

    #[test]
    fn other_windows_make_no_meter() {
        let mut gemini = codex("gemini-2.5-pro", "", 0, 50.0, 1);
        gemini.provider = "google".into();
        gemini.window_minutes = None;
        let hourly = codex("primary", "codex", 60, 90.0, 1);
        let overage = from_headers([("anthropic-ratelimit-unified-overage-utilization", "0.5")], 1);
        assert_eq!(zed_meter(&[gemini, hourly], NOW), None);
        assert_eq!(zed_meter(&overage, NOW), None);
        assert_eq!(zed_meter(&[], NOW), None);
    }

    #[test]
    fn a_window_past_its_reset_is_shown_empty() {
        let mut five = codex("primary", "codex", 300, 100.0, 1);
        five.status = Some("rejected".into());
        let week = codex("secondary", "codex", 10_080, 30.0, 1);
        let after_five = five.resets_at.unwrap();
        assert_eq!(
            shape_at(&[five, week], after_five),
            json!({
                "status": "allowed",
                "rateLimitType": "seven_day",
                "utilization": 0.3,
                "resetsAt": 1_800_010_080,
                "unifiedWindows": {
                    "five_hour": {"utilization": 0.0},
                    "seven_day": {"utilization": 0.3, "resetsAt": 1_800_010_080},
                },
            })
        );
    }

    #[test]
    fn an_unknown_status_word_is_not_passed_on() {
        let mut l = codex("primary", "codex", 300, 80.0, 1);
        l.status = Some("throttled".into());
        assert_eq!(zed_meter(std::slice::from_ref(&l), NOW).unwrap().status, "allowed");
        l.status = Some("rejected".into());
        assert_eq!(zed_meter(&[l], NOW).unwrap().status, "rejected");
    }

    #[test]
    fn one_family_the_one_seen_last() {
        let claude = from_headers(
            [
                ("anthropic-ratelimit-unified-5h-utilization", "0.9"),
                ("anthropic-ratelimit-unified-7d-utilization", "0.1"),
            ],
            10,
        );
        let codex_five = codex("primary", "codex", 300, 20.0, 20);
        let mut all = claude.clone();
        all.push(codex_five.clone());
        // Codex was seen last: its 5-hour window alone, no Claude weekly window beside it.
        let m = zed_meter(&all, NOW).unwrap();
        assert_eq!(m.unified_windows.five_hour.unwrap().utilization, 0.2);
        assert_eq!(m.unified_windows.seven_day, None);
        // Seen at once, both default families: the fuller, whatever the order on the board.
        let mut same_time = claude.clone();
        same_time.push(codex("primary", "codex", 300, 20.0, 10));
        let mut reversed = same_time.clone();
        reversed.reverse();
        assert_eq!(zed_meter(&same_time, NOW), zed_meter(&reversed, NOW));
        assert_eq!(zed_meter(&same_time, NOW).unwrap().utilization, 0.9);
        // Codex's families seen in one response: `codex` over a model's own limit.
        let other = codex("primary", "codex_bengalfox", 300, 70.0, 30);
        let main = codex("primary", "codex", 300, 10.0, 30);
        assert_eq!(zed_meter(&[other.clone(), main.clone()], NOW).unwrap().utilization, 0.1);
        assert_eq!(zed_meter(&[main, other], NOW).unwrap().utilization, 0.1);
    }
}
