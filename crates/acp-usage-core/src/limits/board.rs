//! The board: every window of every account as last observed, with the first observation of
//! its current period (what the forecast needs), the lines each has reached, whether its
//! run-out was told, and whose windows are on screen (one account per provider).
//!
//! Windows are facts about an account, so the board keys them by it: a window observed for one
//! account is never shown while the provider's account in use is another. The account in use
//! is the one the latest observation that named one belongs to (a response says whose it is),
//! or the one the relay set at start from the agent's credentials.

use std::collections::BTreeMap;

use super::forecast::{self, Period};
use super::{Limit, LimitCrossing};
use crate::budget::{Crossings, Lines};

/// What identifies a window: account (`""` when unknown), provider, limit family, window name.
pub type WindowKey = (String, String, String, String);

/// Two resets this far apart (seconds) are two windows: providers round the reset time.
pub const SAME_RESET_SLACK_S: i64 = 120;

/// One window's current period: its latest observation and its first one.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracked {
    /// The latest observation.
    pub latest: Limit,
    /// When the period's first observation was made (Unix ms), and how full it was.
    pub first: (i64, f64),
}

/// What an observation did to a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Older than the latest: ignored.
    Older,
    /// The same figures again (another source of the same response, a repeat).
    Same,
    /// New figures in the same period.
    Moved,
    /// A new period began (the reset moved on).
    NewPeriod,
}

impl Tracked {
    /// A window first seen in `l`.
    pub fn new(l: Limit) -> Tracked {
        let first = (l.observed_ms, l.used_percent);
        Tracked { latest: l, first }
    }

    /// Takes an observation of the same window.
    pub fn observe(&mut self, l: Limit) -> Step {
        let latest = &self.latest;
        if l.observed_ms < latest.observed_ms {
            return Step::Older;
        }
        if latest.same_figures(&l) {
            return Step::Same;
        }
        let new_period = match (latest.resets_at, l.resets_at) {
            (Some(a), Some(b)) => (a - b).abs() > SAME_RESET_SLACK_S,
            _ => false,
        };
        if new_period {
            self.first = (l.observed_ms, l.used_percent);
        }
        self.latest = l;
        if new_period { Step::NewPeriod } else { Step::Moved }
    }

    /// The current period, when the window's length and reset are known.
    pub fn period(&self) -> Option<Period> {
        let l = &self.latest;
        let end_ms = l.resets_at? * 1000;
        let length = l.window_minutes? as i64 * 60_000;
        Some(Period {
            start_ms: end_ms - length,
            end_ms,
            first: self.first,
            last: (l.observed_ms, l.used_percent),
        })
    }

    /// When the window runs out at this pace, if before it resets (see [`forecast`]).
    pub fn runs_out(&self, now_ms: i64) -> Option<i64> {
        forecast::runs_out(&self.period()?, now_ms)
    }

    /// The latest observation with its forecast as of `now_ms`.
    pub fn shown(&self, now_ms: i64) -> Limit {
        let mut l = self.latest.clone();
        l.runs_out_at = self.runs_out(now_ms).map(|ms| ms.div_euclid(1000));
        l
    }
}

/// What one observation is to be told: a line crossed, a forecast that now says it runs out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Told {
    /// A line of `[limits] warn_at` (or the limit) it crossed.
    pub crossing: Option<LimitCrossing>,
    /// The window, with `runs_out_at`, when its forecast first says it runs out this period.
    pub runs_out: Option<Limit>,
}

#[derive(Debug, Clone)]
struct Entry {
    tracked: Tracked,
    crossings: Crossings,
    /// The period (its reset, Unix s) whose run-out was told or already held when first seen.
    forecast_told: Option<i64>,
}

/// The latest observation of every window, and the lines each has reached.
#[derive(Debug, Clone)]
pub struct LimitBoard {
    lines: Lines,
    windows: BTreeMap<WindowKey, Entry>,
    /// The account in use per provider (`""`: none known).
    in_use: BTreeMap<String, String>,
}

impl LimitBoard {
    /// A board that notices `lines` (fractions of each window; `[limits] warn_at` and the
    /// limit itself).
    pub fn new(lines: Lines) -> LimitBoard {
        LimitBoard { lines, windows: BTreeMap::new(), in_use: BTreeMap::new() }
    }

    /// Says whose windows of `provider` are shown from now on (`None`: nobody's is known).
    pub fn use_account(&mut self, provider: &str, account: Option<&str>) {
        self.in_use.insert(provider.to_owned(), account.unwrap_or_default().to_owned());
    }

    /// The account in use for `provider`, when one is known.
    pub fn account_in_use(&self, provider: &str) -> Option<&str> {
        self.in_use.get(provider).map(String::as_str).filter(|a| !a.is_empty())
    }

    /// A window remembered from an earlier run (the ledger's latest observation of a period
    /// that has not ended). What it has reached and a run-out that already held were told then.
    pub fn seed(&mut self, tracked: Tracked, now_ms: i64) {
        let key = tracked.latest.key();
        let crossings = Crossings::at(&self.lines, tracked.latest.used_percent, 100.0);
        let forecast_told = tracked.runs_out(now_ms).and(tracked.latest.resets_at);
        match self.windows.get(&key) {
            Some(e) if e.tracked.latest.observed_ms >= tracked.latest.observed_ms => {}
            _ => {
                self.windows.insert(key, Entry { tracked, crossings, forecast_told });
            }
        }
    }

    /// Takes an observation (as of `now_ms`), and says what is to be told of it: what a window
    /// had reached when first seen is not told (an earlier run told it); a window that reset
    /// starts over. An observation that names its account puts that account in use.
    pub fn observe(&mut self, limit: Limit, now_ms: i64) -> Told {
        if let Some(account) = &limit.account {
            self.in_use.insert(limit.provider.clone(), account.clone());
        }
        let key = limit.key();
        let value = limit.used_percent;
        let lines = &self.lines;
        let Some(entry) = self.windows.get_mut(&key) else {
            let tracked = Tracked::new(limit);
            let crossings = Crossings::at(lines, value, 100.0);
            self.windows.insert(key, Entry { tracked, crossings, forecast_told: None });
            return Told::default();
        };
        let mut told = Told::default();
        match entry.tracked.observe(limit) {
            Step::Older | Step::Same => return told,
            Step::NewPeriod => {
                entry.crossings = Crossings::default();
                entry.forecast_told = None;
            }
            Step::Moved => {}
        }
        let latest = &entry.tracked.latest;
        if let Some(fraction) = entry.crossings.update(lines, value, 100.0) {
            told.crossing = Some(LimitCrossing { limit: latest.clone(), fraction });
        }
        let shown = entry.tracked.shown(now_ms);
        if shown.runs_out_at.is_some() && entry.forecast_told != latest.resets_at {
            entry.forecast_told = latest.resets_at;
            // At the wall the crossing says it; a forecast would repeat it.
            if told.crossing.as_ref().is_none_or(|c| c.fraction < 1.0) {
                told.runs_out = Some(shown);
            }
        }
        told
    }

    /// The latest observation of a window.
    pub fn get(&self, key: &WindowKey) -> Option<&Limit> {
        self.windows.get(key).map(|e| &e.tracked.latest)
    }

    /// What is shown: the latest observation of every window of the accounts in use, with its
    /// forecast as of `now_ms`, in a stable order.
    pub fn current(&self, now_ms: i64) -> Vec<Limit> {
        self.windows
            .values()
            .filter(|e| {
                let l = &e.tracked.latest;
                let in_use = self.in_use.get(&l.provider).map_or("", String::as_str);
                l.account.as_deref().unwrap_or_default() == in_use
            })
            .map(|e| e.tracked.shown(now_ms))
            .collect()
    }

    /// Whether no window was seen.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
}
