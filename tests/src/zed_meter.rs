//! Zed's reading of `_meta["_claude/rateLimit"]` (its plan-usage meter), rewritten here from the
//! rules in `research/editors.md` (Zed's `crates/acp_thread/src/rate_limits.rs`), so the tests
//! read acp-usage's updates the way the editor does:
//!
//! - camelCase keys, unknown keys ignored; `status` required, one of `allowed`,
//!   `allowed_warning`, `rejected`; `resetsAt` an optional integer of Unix seconds;
//!   `rateLimitType` an optional string; `utilization` an optional number; `unifiedWindows` an
//!   optional map of window name to `{utilization, resetsAt}`;
//! - `rateLimitType` names the primary window (`five_hour` or `seven_day`; anything else names
//!   none);
//! - each of `five_hour` and `seven_day` is its `unifiedWindows` entry when there is one, else the
//!   top-level `utilization`/`resetsAt` when it is the primary, else absent;
//! - `status` belongs to the primary only (the other window is `allowed`);
//! - utilization is clamped to 0..1 (a non-finite one is dropped);
//! - a malformed value, or one that yields no window, is ignored (the meter keeps what it had).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

/// The key of the value in a `usage_update`'s `_meta`.
pub const KEY: &str = "_claude/rateLimit";

/// A window's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Allowed,
    AllowedWarning,
    Rejected,
}

/// One window as the meter shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub status: Status,
    /// A fraction, 0..1.
    pub utilization: Option<f32>,
    /// Unix seconds.
    pub resets_at: Option<i64>,
}

impl Window {
    /// Whether Zed draws it as a warning (80% or a status other than `allowed`).
    pub fn warns(&self) -> bool {
        self.status != Status::Allowed || self.utilization.is_some_and(|u| u >= 0.8)
    }
}

/// What the meter holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meter {
    pub five_hour: Option<Window>,
    pub seven_day: Option<Window>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Info {
    status: Status,
    resets_at: Option<i64>,
    rate_limit_type: Option<String>,
    utilization: Option<f32>,
    #[serde(default)]
    unified_windows: HashMap<String, Unified>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Unified {
    utilization: Option<f32>,
    resets_at: Option<i64>,
}

/// The windows one value states; `None` when Zed would ignore it.
pub fn parse(value: &Value) -> Option<Meter> {
    let info = Info::deserialize(value).ok()?;
    let primary = info.rate_limit_type.as_deref();
    let window = |name: &str| {
        let is_primary = primary == Some(name);
        let (utilization, resets_at) = match info.unified_windows.get(name) {
            Some(u) => (u.utilization, u.resets_at),
            None if is_primary => (info.utilization, info.resets_at),
            None => return None,
        };
        Some(Window {
            status: if is_primary { info.status } else { Status::Allowed },
            utilization: utilization.filter(|u| u.is_finite()).map(|u| u.clamp(0.0, 1.0)),
            resets_at,
        })
    };
    let meter = Meter { five_hour: window("five_hour"), seven_day: window("seven_day") };
    (meter.five_hour.is_some() || meter.seven_day.is_some()).then_some(meter)
}

impl Meter {
    /// Takes what a `usage_update`'s `_meta` states, as Zed does: each window it names replaces
    /// the one shown, the others stay. Whether anything was read.
    pub fn apply(&mut self, meta: &Value) -> bool {
        let Some(read) = meta.get(KEY).and_then(parse) else { return false };
        if read.five_hour.is_some() {
            self.five_hour = read.five_hour;
        }
        if read.seven_day.is_some() {
            self.seven_day = read.seven_day;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn primary_window_from_the_top_level_fields() {
        let m = parse(&json!({"status": "rejected", "rateLimitType": "five_hour",
                              "utilization": 1.4, "resetsAt": 1_700_000_000, "extra": [1]}))
        .unwrap();
        let five = m.five_hour.unwrap();
        assert_eq!(five.status, Status::Rejected);
        assert_eq!(five.utilization, Some(1.0));
        assert_eq!(five.resets_at, Some(1_700_000_000));
        assert!(five.warns());
        assert_eq!(m.seven_day, None);
    }

    #[test]
    fn unified_windows_and_a_status_for_the_primary_only() {
        let m = parse(&json!({"status": "allowed_warning", "rateLimitType": "seven_day",
                              "utilization": 0.9,
                              "unifiedWindows": {"five_hour": {"utilization": 0.1},
                                                 "seven_day": {"utilization": 0.75, "resetsAt": 9}}}))
        .unwrap();
        let five = m.five_hour.unwrap();
        assert_eq!(
            (five.status, five.utilization, five.warns()),
            (Status::Allowed, Some(0.1), false)
        );
        let week = m.seven_day.unwrap();
        // The unified entry wins over the top level for the primary too.
        assert_eq!(
            (week.status, week.utilization, week.resets_at),
            (Status::AllowedWarning, Some(0.75), Some(9))
        );
    }

    #[test]
    fn malformed_or_windowless_values_are_ignored_and_the_meter_keeps_its_windows() {
        for bad in [
            json!({"status": "nope", "rateLimitType": "five_hour", "utilization": 0.5}),
            json!({"rateLimitType": "five_hour", "utilization": 0.5}),
            json!({"status": "allowed", "utilization": 0.5}),
            json!({"status": "allowed", "rateLimitType": "overage", "utilization": 0.5}),
            json!({"status": "allowed", "rateLimitType": "five_hour", "resetsAt": 1.5}),
            json!({"status": "allowed", "unifiedWindows": {"five_hour": 3}}),
            json!("allowed"),
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
        }
        let mut meter = Meter::default();
        let good =
            json!({KEY: {"status": "allowed", "rateLimitType": "seven_day", "utilization": 0.3}});
        assert!(meter.apply(&good));
        assert!(!meter.apply(&json!({KEY: {"status": "?"}})));
        assert!(!meter.apply(&json!({"other": 1})));
        let five =
            json!({KEY: {"status": "allowed", "rateLimitType": "five_hour", "utilization": 0.2}});
        assert!(meter.apply(&five));
        assert_eq!(meter.seven_day.and_then(|w| w.utilization), Some(0.3));
        assert_eq!(meter.five_hour.and_then(|w| w.utilization), Some(0.2));
    }
}
