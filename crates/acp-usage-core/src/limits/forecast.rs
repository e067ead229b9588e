//! When a window (or a day's or month's budget) runs out at this pace: pure arithmetic on what
//! was observed of the current period, so that "ahead of the wall" is one rule for every
//! figure that fills over a period and starts over.
//!
//! The pace is the fill over the period's elapsed time: `used / (now − start)`, where a
//! window's period began at `resetsAt − windowMinutes` (known from one observation, since the
//! provider states the reset) and a budget's at midnight or the first of the month. It runs out
//! at `last + (100 − used) / pace`; a forecast is given only when that is before the period
//! ends. It is deliberately conservative, because a forecast that cries wolf teaches people to
//! ignore it:
//! - the figure must have moved within the period (two observations, the later one fuller): a
//!   window seen once, or one that does not move, gets none;
//! - at least a tenth of the period (and a quarter of an hour) must have gone by: seconds of
//!   data never project a run-out, since the elapsed time is part of the pace;
//! - the pace runs to now, not to the last observation: a window left idle slows down;
//! - a period that has ended, a figure already at its limit (that is the wall, said otherwise)
//!   and an observation stamped later than now (clock skew) use `now` as the later of the two.

/// The least share of the period that must have gone by before a forecast is made.
const MIN_ELAPSED_SHARE: f64 = 0.1;
/// The least time that must have gone by, in milliseconds (short windows).
const MIN_ELAPSED_MS: i64 = 15 * 60 * 1000;

/// What is known of one period: its bounds, its first and latest observation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    /// When the period began, Unix milliseconds.
    pub start_ms: i64,
    /// When it ends (the window resets, the budget starts over), Unix milliseconds.
    pub end_ms: i64,
    /// The first observation in the period: when (Unix ms), and how full (0-100).
    pub first: (i64, f64),
    /// The latest observation in the period.
    pub last: (i64, f64),
}

/// When the figure reaches 100 at this pace (Unix milliseconds), if that is before the period
/// ends and the rules above allow a forecast.
pub fn runs_out(p: &Period, now_ms: i64) -> Option<i64> {
    let (first_at, first_used) = p.first;
    let (last_at, used) = p.last;
    // Observations out of order (two clocks) are taken in time order.
    let (first_used, used, last_at) = if first_at <= last_at {
        (first_used, used, last_at)
    } else {
        (used, first_used, first_at)
    };
    let length = p.end_ms - p.start_ms;
    if length <= 0 || !used.is_finite() || !first_used.is_finite() {
        return None;
    }
    // Did not move, or already at the limit.
    if used <= first_used || used >= 100.0 {
        return None;
    }
    let now = now_ms.max(last_at);
    if now >= p.end_ms {
        return None;
    }
    let elapsed = now - p.start_ms;
    let min_elapsed = ((length as f64 * MIN_ELAPSED_SHARE) as i64).max(MIN_ELAPSED_MS);
    if elapsed < min_elapsed {
        return None;
    }
    // (100 − used) / pace, with pace = used / elapsed.
    let at = now + ((100.0 - used) * elapsed as f64 / used).round() as i64;
    (at < p.end_ms).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;

    /// A 5-hour window that began at 0.
    fn five_hour(first: (i64, f64), last: (i64, f64)) -> Period {
        Period { start_ms: 0, end_ms: 5 * HOUR, first, last }
    }

    #[test]
    fn a_fast_window_runs_out_before_its_reset() {
        // 10% after 20 min, 70% after 2 h: 35% an hour, 30% left is 51.4 min.
        let p = five_hour((20 * MIN, 10.0), (2 * HOUR, 70.0));
        let at = runs_out(&p, 2 * HOUR).expect("a forecast");
        assert_eq!((at - 2 * HOUR) / MIN, 51);
        // Asked half an hour later with nothing new, the pace has slowed to 28% an hour: out
        // 64 min later, still before the reset.
        let later = runs_out(&p, 2 * HOUR + 30 * MIN).expect("still one");
        assert!(later > at, "idle time slows the pace: {later} vs {at}");
    }

    #[test]
    fn a_steady_window_gets_none() {
        // 20% after 2 h is 10% an hour: 80% left lasts 8 h, past the reset.
        assert_eq!(runs_out(&five_hour((HOUR, 10.0), (2 * HOUR, 20.0)), 2 * HOUR), None);
        // Slower still.
        assert_eq!(runs_out(&five_hour((HOUR, 5.0), (3 * HOUR, 15.0)), 3 * HOUR), None);
        // Did not move.
        assert_eq!(runs_out(&five_hour((HOUR, 60.0), (2 * HOUR, 60.0)), 2 * HOUR), None);
    }

    #[test]
    fn one_observation_gets_none() {
        let once = five_hour((2 * HOUR, 90.0), (2 * HOUR, 90.0));
        assert_eq!(runs_out(&once, 2 * HOUR), None);
    }

    #[test]
    fn seconds_of_data_never_project() {
        // A window that began 40 s ago and is 30% full after a burst: no forecast until a tenth
        // of the window (30 min) has gone by.
        let burst = five_hour((10_000, 5.0), (40_000, 30.0));
        assert_eq!(runs_out(&burst, 40_000), None);
        assert_eq!(runs_out(&burst, 29 * MIN), None);
        // Half an hour in, 30% is 60% an hour: out 70 min later.
        assert_eq!(runs_out(&burst, 30 * MIN), Some(30 * MIN + 70 * MIN));
    }

    #[test]
    fn a_burst_late_in_the_window_is_averaged_over_it() {
        // 5% for four hours, then 40% in ten minutes: 9.5% an hour, 60% left lasts beyond the
        // reset 50 minutes later.
        let p = five_hour((4 * HOUR, 5.0), (4 * HOUR + 10 * MIN, 40.0));
        assert_eq!(runs_out(&p, 4 * HOUR + 10 * MIN), None);
    }

    #[test]
    fn a_passed_reset_or_a_full_window_gets_none() {
        let p = five_hour((HOUR, 10.0), (2 * HOUR, 70.0));
        assert_eq!(runs_out(&p, 5 * HOUR), None);
        assert_eq!(runs_out(&p, 6 * HOUR), None);
        let full = five_hour((HOUR, 10.0), (2 * HOUR, 100.0));
        assert_eq!(runs_out(&full, 2 * HOUR), None);
    }

    #[test]
    fn clock_skew_between_observations() {
        // The later figure stamped earlier (another clock): taken in time order, the window
        // moved from 10 to 70.
        let swapped = five_hour((2 * HOUR, 70.0), (HOUR + 59 * MIN, 10.0));
        assert_eq!(
            runs_out(&swapped, 2 * HOUR),
            runs_out(&five_hour((0, 10.0), (2 * HOUR, 70.0)), 2 * HOUR)
        );
        // An observation from the future: now is taken as its time.
        let future = five_hour((HOUR, 10.0), (3 * HOUR, 80.0));
        assert_eq!(runs_out(&future, 2 * HOUR), runs_out(&future, 3 * HOUR));
        // A clock behind the window's start: nothing elapsed, nothing said.
        let behind =
            Period { start_ms: 10 * HOUR, end_ms: 15 * HOUR, first: (0, 1.0), last: (MIN, 50.0) };
        assert_eq!(runs_out(&behind, MIN), None);
    }

    #[test]
    fn windows_of_other_lengths() {
        let week = 7 * 24 * HOUR;
        // A week: 40% after two days is 20% a day, 60% left lasts three days, before the reset
        // five days away.
        let p = Period { start_ms: 0, end_ms: week, first: (HOUR, 1.0), last: (48 * HOUR, 40.0) };
        assert_eq!(runs_out(&p, 48 * HOUR), Some(48 * HOUR + 72 * HOUR));
        // Half a day in is not a tenth of a week yet.
        let early = Period { last: (12 * HOUR, 40.0), ..p };
        assert_eq!(runs_out(&early, 12 * HOUR), None);
        // A one-hour window needs a quarter of an hour, not six minutes.
        let hour = Period { start_ms: 0, end_ms: HOUR, first: (MIN, 5.0), last: (10 * MIN, 40.0) };
        assert_eq!(runs_out(&hour, 10 * MIN), None);
        assert_eq!(runs_out(&hour, 15 * MIN), Some(15 * MIN + 22 * MIN + 30_000));
        // A zero-length period is nonsense.
        let empty = Period { start_ms: 0, end_ms: 0, first: (0, 1.0), last: (0, 2.0) };
        assert_eq!(runs_out(&empty, 0), None);
    }
}
