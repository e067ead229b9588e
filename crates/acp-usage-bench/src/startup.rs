//! The start-up benchmark: the `initialize` round trip from spawn, the agent alone against the
//! agent wrapped by acp-usage (as it starts by default, as Claude Code with and without the
//! tap, and without its guard); and the other wait an editor sees that is acp-usage's alone, its
//! answer to `/usage` ([`usage_table`]).
//!
//! This is the wait an editor sees before its first answer, and the one figure where the relay's
//! start-up (reading the config, the catalog, opening the ledger) is not hidden by a long run.
//! The targets are spawned in turn, round after round, so a noisy neighbour spreads over all.

use std::fmt::Write as _;
use std::time::Duration;

use crate::client::{self, Target};
use crate::stats::{median, percentile};

/// One command whose start-up is timed.
#[derive(Debug)]
pub struct Subject {
    /// Its column in the table.
    pub name: &'static str,
    /// How to start it.
    pub target: Target,
}

/// Round trips of each subject, in milliseconds, in the subjects' order. One untimed round
/// first, so the binaries are in the page cache for all.
pub fn measure(subjects: &[Subject], rounds: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::with_capacity(rounds); subjects.len()];
    for round in 0..=rounds {
        for (s, out) in subjects.iter().zip(&mut times) {
            let took = client::initialize_round_trip(&s.target)
                .map_err(|e| e.context(format!("start-up of {}", s.name)))?;
            if round > 0 {
                out.push(ms(took));
            }
        }
    }
    Ok(times)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The table: p50 and p90 of each subject, and each one's difference to the first (the agent
/// alone).
pub fn table(subjects: &[Subject], times: &[Vec<f64>]) -> String {
    let mut out = String::new();
    let rounds = times.first().map_or(0, Vec::len);
    let _ = writeln!(out, "## start-up: `initialize` round trip from spawn ({rounds} rounds)\n");
    let names: Vec<&str> = subjects.iter().map(|s| s.name).collect();
    let _ = writeln!(out, "| | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(names.len()));
    for (label, p) in [("p50", None), ("p90", Some(90.0))] {
        let at = |v: &[f64]| p.map_or_else(|| median(v), |p| percentile(v, p));
        let base = times.first().and_then(|v| at(v));
        let cells: Vec<String> = times
            .iter()
            .enumerate()
            .map(|(i, v)| match (at(v), base) {
                (Some(x), Some(b)) if i > 0 => format!("{x:.2} ms ({:+.2} ms)", x - b),
                (Some(x), _) => format!("{x:.2} ms"),
                (None, _) => "-".to_owned(),
            })
            .collect();
        let _ = writeln!(out, "| initialize round trip {label} | {} |", cells.join(" | "));
    }
    out
}

/// The `/usage` table: p50, p90 and the slowest of `times` (milliseconds, one relay process).
pub fn usage_table(times: &[f64]) -> String {
    let at = |p: f64| percentile(times, p).map_or_else(|| "-".to_owned(), |x| format!("{x:.2} ms"));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## `/usage` answered by acp-usage: prompt to result ({} prompts)\n",
        times.len()
    );
    let _ = writeln!(out, "| p50 | p90 | slowest |\n|---|---|---|");
    let _ = writeln!(out, "| {} | {} | {} |", at(50.0), at(90.0), at(100.0));
    out
}

/// Milliseconds of each duration.
pub fn millis(times: &[Duration]) -> Vec<f64> {
    times.iter().copied().map(ms).collect()
}
