//! Reports against a known bill: a generated Claude Code + Codex history (the bench's seeded
//! generator, `acp_usage_bench::history`: fast mode, `[1m]` Sonnet 4.5 past 200k, 1-hour cache
//! writes, streamed partial counts, subagents, forks, re-emitted Codex counts, and Sonnet calls
//! in fast mode, which has no published multiplier) imported by the built binary, then read
//! back with `report --json`.
//!
//! Guarantees checked, per day and per day and model: the cost equals the true bill to $1e-6
//! and the tokens equal the truth; `exactCost` leaves out exactly the calls priced without
//! their modifier, so nothing priced without one is called exact.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use acp_usage_bench::history::{self, Bill, Spec, Truth};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::Value;

use crate::support::Checks;

/// `acp-usage <args>` as a user in `home` runs it, on UTC days; its stdout.
fn run(home: &Path, args: &[&str]) -> String {
    let out = Command::new(relay_binary().expect("binary"))
        .env_clear()
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .args(args)
        .output()
        .expect("acp-usage runs");
    assert!(
        out.status.success(),
        "acp-usage {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Compares one row (a day, or a day's model) with its share of the truth.
fn check_row(checks: &mut Checks, what: &str, row: &Value, want: &Bill, inexact: f64) {
    let cost = row["cost"].as_f64().unwrap_or(f64::NAN);
    checks.row(
        what,
        "cost (USD)",
        Some(cost),
        want.cost,
        row["exactCost"].as_f64().map(|e| e == cost),
    );
    checks.check((cost - want.cost).abs() <= 1e-6, || {
        format!("{what}: cost {cost} != the true bill {}", want.cost)
    });
    let exact = row["exactCost"].as_f64().unwrap_or(f64::NAN);
    checks.check((exact - (want.cost - inexact)).abs() <= 1e-6, || {
        format!(
            "{what}: exactCost {exact} != {} (the bill less {inexact} priced without a modifier)",
            want.cost - inexact
        )
    });
    let tokens = [
        ("calls", want.calls),
        ("inputTokens", want.input),
        ("cachedReadTokens", want.cache_read),
        ("cachedWriteTokens", want.cache_write),
        ("outputTokens", want.output),
    ];
    for (field, want) in tokens {
        let got = row[field].as_u64();
        checks.check(got == Some(want), || format!("{what}: {field} {got:?} != {want}"));
    }
}

fn check_history(seed: u64) {
    let scratch = Scratch::new("reports-truth").expect("scratch");
    let home = scratch.home();
    let truth: Truth = history::generate(&home, &Spec::small(seed)).expect("generate");
    let ledger = scratch.path("ledger.db");
    let ledger = ledger.to_str().expect("utf-8");
    run(&home, &["import", "--ledger", ledger]);
    let report: Value = serde_json::from_str(&run(
        &home,
        &["report", "daily", "--json", "--breakdown", "--ledger", ledger],
    ))
    .expect("report --json");

    let mut checks = Checks::new(acp_usage_tests::agents::Agent::Claude);
    let by_day = truth.by_day();
    let rows = report["rows"].as_array().cloned().unwrap_or_default();
    let days: Vec<&str> = rows.iter().filter_map(|r| r["date"].as_str()).collect();
    let want_days: Vec<&str> = by_day.keys().map(String::as_str).collect();
    checks.check(days == want_days, || format!("seed {seed}: days {days:?} != {want_days:?}"));
    let mut inexact_by_day: BTreeMap<&str, f64> = BTreeMap::new();
    for ((day, _), cost) in &truth.inexact {
        *inexact_by_day.entry(day.as_str()).or_default() += cost;
    }
    for row in &rows {
        let day = row["date"].as_str().unwrap_or_default();
        let Some(want) = by_day.get(day) else { continue };
        let inexact = inexact_by_day.get(day).copied().unwrap_or(0.0);
        check_row(&mut checks, &format!("seed {seed} {day}"), row, want, inexact);
        let models = row["models"].as_array().cloned().unwrap_or_default();
        let want_models: Vec<&String> =
            truth.by_day_model.keys().filter(|(d, _)| d == day).map(|(_, m)| m).collect();
        checks.check(models.len() == want_models.len(), || {
            format!("seed {seed} {day}: models {models:?}, want {want_models:?}")
        });
        for m in &models {
            let model = m["model"].as_str().unwrap_or_default().to_owned();
            let key = (day.to_owned(), model.clone());
            match truth.by_day_model.get(&key) {
                Some(want) => {
                    let inexact = truth.inexact.get(&key).copied().unwrap_or(0.0);
                    check_row(&mut checks, &format!("seed {seed} {day} {model}"), m, want, inexact);
                }
                None => checks
                    .fail(format!("seed {seed} {day}: a model the history never used: {model}")),
            }
        }
    }
    let total = truth.total();
    let inexact: f64 = truth.inexact.values().sum();
    check_row(&mut checks, &format!("seed {seed} total"), &report["totals"], &total, inexact);
    eprintln!(
        "seed {seed}: {} files, {} calls, true bill ${:.6} (fast +${:.2}, long context +${:.2}, 1h writes +${:.2}, ${:.4} with an unpriceable modifier)",
        truth.files,
        total.calls,
        total.cost,
        truth.fast_extra,
        truth.long_context_extra,
        truth.one_hour_extra,
        inexact
    );
    checks.finish();
}

#[test]
fn report_totals_equal_the_true_bill_of_a_generated_history() {
    for seed in [19, 20, 21] {
        check_history(seed);
    }
}
