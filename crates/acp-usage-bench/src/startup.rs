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

/// The API key the remembered-windows subjects run with (the account their windows are of).
pub const BENCH_KEY: &str = "sk-ant-bench-remembered-windows";

/// Fills a ledger at `path` with a year of subscription-window observations of [`BENCH_KEY`]'s
/// account, as a heavy user's would hold: Claude's 5-hour and 7-day windows observed every
/// five minutes (210,240 rows), the latest periods still running. Returns the rows written.
pub fn year_of_windows(path: &std::path::Path) -> anyhow::Result<usize> {
    use acp_usage_core::limits::{Limit, LimitSource};
    let fingerprints = acp_usage::accounts::Fingerprints::load(Some(path));
    let account = fingerprints.of(BENCH_KEY);
    let mut store = acp_usage::sinks::ledger::Store::open(path)?;
    let now_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    let step = 300;
    let start = now_s - 365 * 86_400;
    let window = |name: &str, minutes: i64, at: i64| {
        let length = minutes * 60;
        let began = start + (at - start) / length * length;
        Limit {
            provider: "anthropic".into(),
            window: name.into(),
            limit_id: None,
            window_minutes: Some(minutes as u64),
            used_percent: ((at - began) as f64 / length as f64 * 80.0).round(),
            resets_at: Some(began + length),
            status: Some("allowed".into()),
            source: LimitSource::Tap,
            observed_ms: at * 1000,
            account: Some(account.clone()),
            runs_out_at: None,
        }
    };
    let mut written = 0;
    let mut batch = Vec::with_capacity(2_000);
    let mut at = start;
    while at <= now_s {
        batch.push(window("five_hour", 300, at));
        batch.push(window("seven_day", 10_080, at));
        if batch.len() >= 2_000 {
            store.limits(&batch, None)?;
            written += batch.len();
            batch.clear();
        }
        at += step;
    }
    store.limits(&batch, None)?;
    Ok(written + batch.len())
}

/// The windows remembered at start: `initialize` and `session/new` through acp-usage as
/// Claude Code (its key says whose windows to show; `--tap off`), with a fresh ledger and with
/// one holding a year of observations of that account, beside the agent alone. The table.
pub fn remembered_windows(
    acp_usage: &std::ffi::OsStr,
    agent: &std::ffi::OsStr,
    state: &std::path::Path,
    timeout: Duration,
    rounds: usize,
) -> anyhow::Result<String> {
    let year = state.join("year");
    std::fs::create_dir_all(&year)?;
    let filled = year_of_windows(&year.join("ledger.db"))?;
    let target = |argv: Vec<std::ffi::OsString>, ledger: &std::path::Path| Target {
        argv,
        env: vec![
            ("ACP_USAGE_LEDGER".into(), ledger.into()),
            ("ACP_USAGE_STATE_DIR".into(), "off".into()),
            ("ANTHROPIC_API_KEY".into(), BENCH_KEY.into()),
        ],
        stderr: None,
        byte_exact: true,
        measure: false,
        timeout,
    };
    let claude = |ledger: &std::path::Path| {
        let argv = ["--profile", "claude", "--tap", "off", "--"].map(std::ffi::OsString::from);
        let argv = std::iter::once(acp_usage.to_owned())
            .chain(argv)
            .chain(std::iter::once(agent.to_owned()))
            .collect();
        target(argv, ledger)
    };
    let fresh = state.join("fresh").join("ledger.db");
    let subjects = [
        Subject { name: "direct", target: target(vec![agent.to_owned()], &fresh) },
        Subject { name: "acp-usage --profile claude, a fresh ledger", target: claude(&fresh) },
        Subject {
            name: "the same, a year of windows in the ledger",
            target: claude(&year.join("ledger.db")),
        },
    ];
    eprintln!("start-up with a session: {rounds} rounds of 3 commands, {filled} observations");
    let times = measure_open(&subjects, rounds)?;
    Ok(open_table(&subjects, &times))
}

/// Round trips of each subject, in milliseconds, in the subjects' order. One untimed round
/// first, so the binaries are in the page cache for all.
pub fn measure(subjects: &[Subject], rounds: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    measure_with(subjects, rounds, client::initialize_round_trip)
}

/// [`measure`] of `initialize` and a `session/new`.
pub fn measure_open(subjects: &[Subject], rounds: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    measure_with(subjects, rounds, client::open_round_trip)
}

fn measure_with(
    subjects: &[Subject],
    rounds: usize,
    round_trip: fn(&client::Target) -> anyhow::Result<Duration>,
) -> anyhow::Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::with_capacity(rounds); subjects.len()];
    for round in 0..=rounds {
        for (s, out) in subjects.iter().zip(&mut times) {
            let took =
                round_trip(&s.target).map_err(|e| e.context(format!("start-up of {}", s.name)))?;
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
    table_of(subjects, times, "`initialize`", "initialize round trip")
}

/// [`table`] of `initialize` and a `session/new`.
pub fn open_table(subjects: &[Subject], times: &[Vec<f64>]) -> String {
    table_of(subjects, times, "`initialize` and `session/new`", "open round trip")
}

fn table_of(subjects: &[Subject], times: &[Vec<f64>], what: &str, row: &str) -> String {
    let mut out = String::new();
    let rounds = times.first().map_or(0, Vec::len);
    let _ = writeln!(out, "## start-up: {what} round trip from spawn ({rounds} rounds)\n");
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
        let _ = writeln!(out, "| {row} {label} | {} |", cells.join(" | "));
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
