//! `acp-usage report limits [--per day|hour]`: how each subscription window filled over time,
//! from the observations the ledger keeps (one row per window and day or hour: the peak, the
//! last figure and when the window resets), as a table or JSON.

use std::collections::BTreeMap;
use std::io::{self, Write};

use acp_usage_core::limits::Limit;
use chrono::{DateTime, Timelike};
use serde_json::{Value, json};

use super::{ReportOptions, Zone};
use crate::agents::Plan;

/// How long a row covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Per {
    #[default]
    Day,
    Hour,
}

impl Per {
    fn name(self) -> &'static str {
        match self {
            Per::Day => "day",
            Per::Hour => "hour",
        }
    }
}

/// One window over one day or hour.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitRow {
    /// `2026-11-26` or `2026-11-26 14:00`.
    pub period: String,
    /// The window's latest observation in the period.
    pub last: Limit,
    /// The fullest it was in the period, 0-100.
    pub peak: f64,
    /// Observations in the period.
    pub observations: u64,
    /// When the window runs out at this pace (Unix s), on its latest row while its period
    /// lasts (the ledger's forecast, [`acp_usage_core::limits::forecast`]).
    pub runs_out_at: Option<i64>,
}

/// The observations grouped per window and period, in time order within each window.
pub fn rows(observed: &[Limit], zone: Zone, per: Per) -> Vec<LimitRow> {
    let mut groups: BTreeMap<(acp_usage_core::limits::WindowKey, String), LimitRow> =
        BTreeMap::new();
    for l in observed {
        let period = period_of(l.observed_ms, zone, per);
        groups
            .entry((l.key(), period.clone()))
            .and_modify(|row| {
                row.peak = row.peak.max(l.used_percent);
                row.observations += 1;
                if l.observed_ms >= row.last.observed_ms {
                    row.last = l.clone();
                }
            })
            .or_insert_with(|| LimitRow {
                period,
                last: l.clone(),
                peak: l.used_percent,
                observations: 1,
                runs_out_at: None,
            });
    }
    groups.into_values().collect()
}

/// Puts each window's forecast (from `current`, the ledger's windows as of now) on the
/// window's latest row.
pub fn forecast(rows: &mut [LimitRow], current: &[Limit]) {
    for c in current.iter().filter(|c| c.runs_out_at.is_some()) {
        let latest =
            rows.iter_mut().filter(|r| r.last.key() == c.key()).max_by_key(|r| r.last.observed_ms);
        if let Some(row) = latest
            && row.last.resets_at == c.resets_at
        {
            row.runs_out_at = c.runs_out_at;
        }
    }
}

fn period_of(ms: i64, zone: Zone, per: Per) -> String {
    match per {
        Per::Day => zone.date_of(ms).to_string(),
        Per::Hour => {
            let t = DateTime::from_timestamp_millis(ms).unwrap_or_default();
            let (date, hour) = match zone {
                Zone::Local => {
                    let l = t.with_timezone(&chrono::Local);
                    (l.date_naive(), l.hour())
                }
                Zone::Utc => (t.date_naive(), t.hour()),
            };
            format!("{date} {hour:02}:00")
        }
    }
}

fn window_label(l: &Limit) -> String {
    let family = match l.limit_id.as_deref() {
        Some(id) if !Plan::is_own_family(id) => format!("{id} "),
        _ => String::new(),
    };
    let span = match l.window_minutes {
        Some(m) if m % 1440 == 0 => format!(" ({}d)", m / 1440),
        Some(m) if m % 60 == 0 => format!(" ({}h)", m / 60),
        Some(m) => format!(" ({m}m)"),
        None => String::new(),
    };
    let whose = l.account_label().map(|a| format!(" [{a}]")).unwrap_or_default();
    format!("{} {family}{}{span}{whose}", l.provider, l.window)
}

fn resets(l: &Limit, zone: Zone) -> String {
    l.resets_at.map_or_else(|| "-".to_owned(), |s| zone.timestamp(s * 1000))
}

/// The `--json` form.
pub fn to_json(rows: &[LimitRow], opts: &ReportOptions, per: Per) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "period": r.period,
                "provider": r.last.provider,
                "window": r.last.window,
                "limitId": r.last.limit_id,
                "windowMinutes": r.last.window_minutes,
                "peakUsedPercent": r.peak,
                "lastUsedPercent": r.last.used_percent,
                "resetsAt": r.last.resets_at.map(|s| opts.zone.timestamp(s * 1000)),
                "status": r.last.status,
                "observations": r.observations,
                "lastObservedAt": opts.zone.timestamp(r.last.observed_ms),
                "account": r.last.account_label(),
                "runsOutAt": r.runs_out_at.map(|s| opts.zone.timestamp(s * 1000)),
            })
        })
        .collect();
    json!({"report": "limits", "per": per.name(), "timeZone": opts.zone.name(), "rows": rows})
}

/// The table form.
pub fn write_table(w: &mut impl Write, rows: &[LimitRow], zone: Zone, per: Per) -> io::Result<()> {
    let head = [
        per.name().to_ascii_uppercase(),
        "WINDOW".into(),
        "PEAK".into(),
        "LAST".into(),
        "RESETS".into(),
        "RUNS OUT".into(),
        "SEEN".into(),
    ];
    let body: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.period.clone(),
                window_label(&r.last),
                format!("{:.0}%", r.peak),
                format!("{:.0}%", r.last.used_percent),
                resets(&r.last, zone),
                r.runs_out_at.map_or_else(|| "-".to_owned(), |s| zone.timestamp(s * 1000)),
                r.observations.to_string(),
            ]
        })
        .collect();
    let mut widths = head.clone().map(|h| h.chars().count());
    for row in &body {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    for row in std::iter::once(&head).chain(&body) {
        writeln!(w, "{}", crate::commands::watch::aligned(row, &widths, &[2, 3, 6]))?;
    }
    Ok(())
}
