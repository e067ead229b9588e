//! Budgets and context thresholds: when a figure crosses a line the user drew, and whether a
//! new turn may start. Pure: the relay tells it what was spent (its session's account's cost, the
//! ledger file's day and month) and sends the notices and refusals it decides.

/// What a budget covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// One session.
    Session,
    /// One calendar day, every session of every running acp-usage.
    Day,
    /// One calendar month, likewise.
    Month,
}

impl Scope {
    /// Its name in the config file and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Day => "day",
            Scope::Month => "month",
        }
    }

    /// How messages name the budget.
    pub fn adjective(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Day => "daily",
            Scope::Month => "monthly",
        }
    }
}

/// The default warning fractions of a budget.
pub const DEFAULT_BUDGET_WARN: [f64; 2] = [0.75, 0.9];
/// The default warning fractions of a subscription window (besides the limit itself).
pub const DEFAULT_LIMIT_WARN: [f64; 2] = [0.75, 0.9];
/// The default fractions of the context window that are noticed.
pub const DEFAULT_CONTEXT_WARN: [f64; 3] = [0.75, 0.9, 0.95];

/// The lines of one figure: fractions of a limit, each crossed upwards once. The limit itself
/// (1.0) is always one of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines {
    fractions: Vec<f64>,
}

impl Lines {
    /// Lines at `fractions` (those outside (0, 1] are dropped), plus the limit itself when
    /// `with_limit`.
    pub fn new(fractions: &[f64], with_limit: bool) -> Lines {
        let mut f: Vec<f64> =
            fractions.iter().copied().filter(|x| *x > 0.0 && *x <= 1.0 && x.is_finite()).collect();
        if with_limit {
            f.push(1.0);
        }
        f.sort_by(f64::total_cmp);
        f.dedup();
        Lines { fractions: f }
    }

    /// The highest line `value` has reached, as an index into the lines (`None`: none).
    fn level(&self, value: f64, limit: f64) -> Option<usize> {
        if limit <= 0.0 {
            return None;
        }
        self.fractions.iter().rposition(|f| value >= f * limit - 1e-12)
    }

    /// Whether there is no line at all.
    pub fn is_empty(&self) -> bool {
        self.fractions.is_empty()
    }

    /// The fraction of a level.
    pub fn fraction(&self, level: usize) -> f64 {
        self.fractions[level]
    }
}

/// Remembers the highest line a figure reached, so that each crossing is told once. A figure
/// that falls back below a line (a compaction emptied the context) may cross it again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Crossings {
    reached: Option<usize>,
}

impl Crossings {
    /// Starts at what `value` has reached already, so that what was crossed before (an earlier
    /// run, a reopened session) is not told again.
    pub fn at(lines: &Lines, value: f64, limit: f64) -> Crossings {
        Crossings { reached: lines.level(value, limit) }
    }

    /// The line newly crossed by `value` (the highest, when it jumped several), if any.
    pub fn update(&mut self, lines: &Lines, value: f64, limit: f64) -> Option<f64> {
        let level = lines.level(value, limit);
        let crossed = match (level, self.reached) {
            (Some(l), None) => Some(l),
            (Some(l), Some(r)) if l > r => Some(l),
            _ => None,
        };
        self.reached = level;
        crossed.map(|l| lines.fraction(l))
    }
}

/// What the budgets say of a prompt about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Overrun {
    /// The budget that is spent.
    pub scope: Scope,
    /// Its limit, USD.
    pub limit: f64,
    /// What was spent, USD.
    pub spent: f64,
}

/// The first budget (session, day, month) whose limit `spent` has reached, if any.
pub fn overrun(limits: &[(Scope, f64)], spent: impl Fn(Scope) -> f64) -> Option<Overrun> {
    limits.iter().find_map(|&(scope, limit)| {
        let s = spent(scope);
        (limit > 0.0 && s >= limit - 1e-12).then_some(Overrun { scope, limit, spent: s })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_crossed_once_and_the_highest_of_a_jump_is_told() {
        let lines = Lines::new(&DEFAULT_BUDGET_WARN, true);
        let mut c = Crossings::at(&lines, 0.0, 10.0);
        assert_eq!(c.update(&lines, 5.0, 10.0), None);
        assert_eq!(c.update(&lines, 7.5, 10.0), Some(0.75));
        assert_eq!(c.update(&lines, 8.0, 10.0), None);
        // 0.9 and the limit at once: one notice, the limit.
        assert_eq!(c.update(&lines, 12.0, 10.0), Some(1.0));
        assert_eq!(c.update(&lines, 13.0, 10.0), None);
    }

    #[test]
    fn a_figure_that_falls_back_may_cross_again_and_earlier_crossings_are_not_told() {
        let lines = Lines::new(&DEFAULT_CONTEXT_WARN, false);
        let mut c = Crossings::at(&lines, 160_000.0, 200_000.0);
        assert_eq!(c.update(&lines, 170_000.0, 200_000.0), None, "0.75 was reached before");
        assert_eq!(c.update(&lines, 185_000.0, 200_000.0), Some(0.9));
        // A compaction: the context is small again.
        assert_eq!(c.update(&lines, 40_000.0, 200_000.0), None);
        assert_eq!(c.update(&lines, 151_000.0, 200_000.0), Some(0.75));
        // Without the limit as a line, a full window is the 0.95 line.
        assert_eq!(c.update(&lines, 200_000.0, 200_000.0), Some(0.95));
    }

    #[test]
    fn fractions_outside_the_unit_interval_are_dropped() {
        let lines = Lines::new(&[0.5, 1.5, -1.0, f64::NAN, 0.5], true);
        assert_eq!(lines.fractions, vec![0.5, 1.0]);
    }

    #[test]
    fn the_first_spent_budget_refuses() {
        let limits = [(Scope::Session, 5.0), (Scope::Day, 20.0), (Scope::Month, 100.0)];
        let spent = |s: Scope| match s {
            Scope::Session => 1.0,
            Scope::Day => 20.0,
            Scope::Month => 150.0,
        };
        assert_eq!(
            overrun(&limits, spent),
            Some(Overrun { scope: Scope::Day, limit: 20.0, spent: 20.0 })
        );
        assert_eq!(overrun(&limits, |_| 4.99), None);
    }
}
