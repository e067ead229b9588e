//! `acp-usage-bench`: builds (or finds) the synthetic agent, the raw byte-copy relay, acp-usage
//! and the official ACP conductor, runs every scenario through each of them side by side, and
//! prints medians with ratios to the raw copy; then measures the LLM-API tap in process against
//! a direct HTTP connection (`--tap` for that alone).
//!
//! `cargo run --release -p acp-usage-bench -- --help` lists the options.

// The runner's job is to print its table on stdout (progress and notes go to stderr).
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use acp_usage_bench::client::{self, Measurement, Target};
use acp_usage_bench::scenario::{Kind, NAMES, Scenario};
use acp_usage_bench::startup::{self, Subject};
use acp_usage_bench::tap::{self, TapOptions};
use clap::Parser;

mod relay_table;
use relay_table::{Table, brief};

const CONDUCTOR: &str = "agent-client-protocol-conductor";
const CONDUCTOR_VERSION: &str = "5.0.0";
const RELAYS: [&str; 6] = ["direct", "raw-copy", "acp-usage", "no-ledger", "otlp", "conductor"];
/// The tap benchmark's name among the scenarios.
const TAP: &str = "tap";
/// The ledger benchmark's name among the scenarios.
const LEDGER: &str = "ledger";
/// The start-up benchmark's name among the scenarios.
const STARTUP: &str = "startup";
/// The reports benchmark's name among the scenarios.
const REPORTS: &str = "reports";
/// The `/usage` benchmark's name among the scenarios.
const USAGE_CMD: &str = "usage-cmd";

/// Side-by-side benchmark of acp-usage: a synthetic ACP agent streams through no relay
/// ("direct", the client+agent ceiling), a raw byte copy (the physical limit of a relay),
/// acp-usage, and the official ACP conductor when it can be installed. Every chunk is checked
/// at the client (count, order, bytes). Prints medians over several runs, ratios to the raw
/// copy, the relay's CPU time per message and its peak RSS.
///
/// Scenarios: small (200,000 chunks of 200 B), large-64k / large-1m / large-16m (256 MiB of
/// lines), rtt (2,000 round trips), sessions (100 sessions interleaving prompts), load
/// (session/load replaying 100,000 messages), slow (an editor reading a 64 MiB burst at 1 MB/s
/// for its first 4 MB; run once).
///
/// usage-cmd: acp-usage's answer to a `/usage` prompt in front of the bench agent, from the
/// request to its result, 200 prompts (quick: 50) times --runs after one turn of the agent's.
///
/// startup: the `initialize` round trip from spawn, the agent alone and through acp-usage (as
/// it starts, as Claude Code with the tap and without it, and without its guard process; the
/// bench agent has the generic profile, untapped unless `--profile claude` is given), 50 rounds
/// (quick: 20) times --runs.
///
/// tap (in this process, nothing to build): an LLM upstream on 127.0.0.1 answered directly and
/// through acp-usage's LLM-API tap, interleaved: time to first byte of 2,000 small calls, MB/s
/// of a 256 MiB event stream, small calls/s with 8 clients, whether the first event of a held
/// stream gets through; every reply compared with what was served, every call's usage checked.
///
/// reports: a generated Claude Code + Codex history with a known true bill (--history-mb, fast
/// mode, long context, 1-hour cache writes, subagents, forks, re-emitted counts), then
/// acp-usage's import (first and again), `report daily` and `status`, and ccusage's `daily
/// --offline` (installed from npm into target/bench-tools when it can be), with times, peak
/// memory and each tool's cost error against the truth.
#[derive(Debug, Parser)]
#[command(name = "acp-usage-bench", version)]
struct Args {
    /// Runs of each scenario; the table shows medians (the slow editor runs once).
    #[arg(long, value_name = "N", default_value_t = 5)]
    runs: usize,
    /// A fast smoke run: every scenario scaled down, one run (unless --runs is given).
    #[arg(long)]
    quick: bool,
    /// Only these relays (comma-separated): direct, raw-copy, acp-usage, no-ledger (acp-usage
    /// with the ledger off), otlp (with the OTLP exporter on), conductor. The raw copy
    /// is always measured too, as the reference of the ratios.
    #[arg(long, value_name = "RELAY", value_delimiter = ',')]
    only: Vec<String>,
    /// Only these scenarios (comma-separated): small, large-64k, large-1m, large-16m, rtt,
    /// sessions, load, slow, startup, usage-cmd, tap, ledger, reports.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    scenario: Vec<String>,
    /// Only the LLM-API tap benchmark (with --scenario: those and the tap).
    #[arg(long)]
    tap: bool,
    /// Only the ledger benchmark (with --scenario: those and the ledger).
    #[arg(long)]
    ledger: bool,
    /// Tap: small calls timed for time to first byte, each way [default: 2000; quick 300].
    #[arg(long, value_name = "N")]
    tap_requests: Option<usize>,
    /// Tap: concurrent clients for calls per second [default: 8].
    #[arg(long, value_name = "N")]
    tap_clients: Option<usize>,
    /// Tap: size of the long event stream, in MiB [default: 256; quick 16].
    #[arg(long, value_name = "MIB")]
    tap_stream_mib: Option<u64>,
    /// The acp-usage binary to measure (default: `cargo build --release -p acp-usage`, then
    /// target/release/acp-usage).
    #[arg(long, value_name = "PATH")]
    acp_usage: Option<PathBuf>,
    /// The conductor binary (default: target/bench-tools/bin/agent-client-protocol-conductor,
    /// installed there with `cargo install --root target/bench-tools` when missing).
    #[arg(long, value_name = "PATH")]
    conductor: Option<PathBuf>,
    /// Skip the conductor.
    #[arg(long)]
    no_conductor: bool,
    /// Build and install nothing; use the binaries as they are.
    #[arg(long)]
    no_build: bool,
    /// Reports: MB of generated history [default: 400; quick 40].
    #[arg(long, value_name = "MB")]
    history_mb: Option<u64>,
    /// Reports: the generator's seed.
    #[arg(long, value_name = "N", default_value_t = 19)]
    history_seed: u64,
    /// Reports: keep the generated history and ledger (target/bench-history/<pid>).
    #[arg(long)]
    keep_history: bool,
    /// Seconds one scenario run may take before its relay is killed and the run failed.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("acp-usage-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// One relay under test.
#[derive(Debug)]
struct Relay {
    name: &'static str,
    target: Target,
}

fn run(args: Args) -> anyhow::Result<bool> {
    for r in &args.only {
        anyhow::ensure!(
            RELAYS.contains(&r.as_str()),
            "unknown relay {r:?} (known: {})",
            RELAYS.join(", ")
        );
    }
    let quick = args.quick;
    let runs = if quick && args.runs == 5 { 1 } else { args.runs.max(1) };
    // The tap is measured in this process, apart from the relays; it runs after them.
    let mut names: Vec<&str> = match (args.scenario.is_empty(), args.tap, args.ledger) {
        (true, false, false) => {
            NAMES.iter().copied().chain([STARTUP, USAGE_CMD, TAP, LEDGER, REPORTS]).collect()
        }
        (true, tap, ledger) => {
            [(tap, TAP), (ledger, LEDGER)].iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
        }
        (false, tap, ledger) => args
            .scenario
            .iter()
            .map(String::as_str)
            .chain(tap.then_some(TAP))
            .chain(ledger.then_some(LEDGER))
            .collect(),
    };
    let with_tap = names.contains(&TAP);
    let with_ledger = names.contains(&LEDGER);
    let with_startup = names.contains(&STARTUP);
    let with_reports = names.contains(&REPORTS);
    let with_usage_cmd = names.contains(&USAGE_CMD);
    names.retain(|n| ![TAP, LEDGER, STARTUP, REPORTS, USAGE_CMD].contains(n));
    let scenarios = names
        .iter()
        .map(|n| {
            Scenario::by_name(n, quick).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown scenario {n:?} (known: {}, {STARTUP}, {USAGE_CMD}, {TAP}, {LEDGER}, \
                     {REPORTS})",
                    NAMES.join(", ")
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut ok = true;
    if !scenarios.is_empty() {
        ok &= run_relays(&args, &scenarios, runs)?;
    }
    if with_startup || with_usage_cmd {
        if !scenarios.is_empty() {
            println!();
        }
        run_startup(&args, runs, with_startup, with_usage_cmd)?;
    }
    if with_tap {
        if scenarios.is_empty() {
            println!("# acp-usage-bench: the LLM-API tap\n");
        } else {
            println!();
        }
        ok &= run_tap(&args, runs)?;
    }
    if with_ledger {
        if cfg!(debug_assertions) {
            eprintln!(
                "note: the ledger is measured inside this runner, a debug build (use cargo run --release)"
            );
        }
        let rounds = if args.quick && args.runs == 5 { 1 } else { runs };
        let (table, good) = acp_usage_bench::ledger::run(
            &acp_usage_bench::ledger::LedgerOptions::new(args.quick, rounds),
        )?;
        println!("\n{table}");
        ok &= good;
    }
    if with_reports {
        ok &= run_reports(&args, runs)?;
    }
    Ok(ok)
}

/// The reports benchmark; false when acp-usage's bill is off the truth.
fn run_reports(args: &Args, runs: usize) -> anyhow::Result<bool> {
    let (bins, target_dir) = binaries(args, true)?;
    let acp_usage = existing(args.acp_usage.clone().unwrap_or_else(|| bins.join("acp-usage")))?;
    let opts = acp_usage_bench::reports::ReportsOptions {
        acp_usage,
        work: acp_usage_bench::reports::work_dir(&target_dir),
        tools: target_dir.join("bench-tools"),
        mb: args.history_mb.unwrap_or(if args.quick { 40 } else { 400 }).max(1),
        seed: args.history_seed,
        runs: if args.quick && args.runs == 5 { 1 } else { runs.min(3) },
        keep: args.keep_history,
    };
    let (table, ok) = acp_usage_bench::reports::run(&opts)?;
    println!("\n{table}");
    Ok(ok)
}

/// The tap benchmark; false when the tap got a call's accounting wrong.
fn run_tap(args: &Args, runs: usize) -> anyhow::Result<bool> {
    if cfg!(debug_assertions) {
        eprintln!(
            "note: the tap is measured inside this runner, a debug build: its figures are a debug build's (use cargo run --release)"
        );
    }
    // A smoke run still alternates which way goes first.
    let rounds = if args.quick && args.runs == 5 { 2 } else { runs };
    let mut options = TapOptions::new(args.quick, rounds);
    options.requests = args.tap_requests.unwrap_or(options.requests).max(1);
    options.clients = args.tap_clients.unwrap_or(options.clients).max(1);
    options.stream_mib = args.tap_stream_mib.unwrap_or(options.stream_mib).max(1);
    let results = tap::run(&options)?;
    println!("{}", results.table());
    if !results.problems.is_empty() {
        println!("Failures:");
        for p in &results.problems {
            println!("- tap: {p}");
        }
    }
    Ok(results.problems.is_empty())
}

/// The relays side by side.
fn run_relays(args: &Args, scenarios: &[Scenario], runs: usize) -> anyhow::Result<bool> {
    let wanted = |name: &str| {
        args.only.is_empty() || name == "raw-copy" || args.only.iter().any(|o| o == name)
    };

    let (bins, target_dir) = binaries(args, wanted("acp-usage"))?;
    let root = workspace_root();
    let agent = existing(bins.join("bench-agent"))?;
    let raw = existing(bins.join("bench-raw-relay"))?;
    let logs = target_dir.join("bench-logs");
    std::fs::create_dir_all(&logs)?;
    let state = logs.join(format!("state-{}", std::process::id()));
    let timeout = Duration::from_secs(args.timeout);
    let target = |argv: Vec<OsString>, byte_exact: bool, measure: bool| Target {
        argv,
        env: Vec::new(),
        stderr: None,
        byte_exact,
        measure,
        timeout,
    };

    let mut relays = Vec::new();
    if wanted("direct") {
        relays.push(Relay {
            name: "direct",
            target: target(vec![agent.clone().into()], true, false),
        });
    }
    relays.push(Relay {
        name: "raw-copy",
        target: target(vec![raw.into(), agent.clone().into()], true, true),
    });
    if wanted("acp-usage") {
        let path = existing(args.acp_usage.clone().unwrap_or_else(|| bins.join("acp-usage")))?;
        let mut t =
            target(vec![path.clone().into(), "--".into(), agent.clone().into()], true, true);
        // The ledger goes to a scratch directory, never the user's (nor is the user's old state
        // file read).
        t.env.push(("ACP_USAGE_LEDGER".into(), state.join("ledger.db").into()));
        t.env.push(("ACP_USAGE_STATE_DIR".into(), "off".into()));
        relays.push(Relay { name: "acp-usage", target: t });
        if wanted("no-ledger") {
            // The same without the ledger: what the ledger costs the relay.
            let mut t =
                target(vec![path.clone().into(), "--".into(), agent.clone().into()], true, true);
            t.env.push(("ACP_USAGE_LEDGER".into(), "off".into()));
            relays.push(Relay { name: "no-ledger", target: t });
        }
        if wanted("otlp") {
            // With the OTLP exporter on, every 200 ms, to a stand-in collector that accepts all.
            let (url, _) = acp_usage_bench::ledger::accept_all()?;
            let mut t = target(vec![path.into(), "--".into(), agent.clone().into()], true, true);
            t.env.push(("ACP_USAGE_LEDGER".into(), state.join("otlp-ledger.db").into()));
            t.env.push(("ACP_USAGE_STATE_DIR".into(), "off".into()));
            t.env.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), url.into()));
            t.env.push(("OTEL_METRIC_EXPORT_INTERVAL".into(), "200".into()));
            relays.push(Relay { name: "otlp", target: t });
        }
    }
    if wanted("conductor") && !args.no_conductor {
        match conductor(args, &root, &target_dir) {
            Some(path) => {
                let t =
                    target(vec![path.into(), "agent".into(), agent.clone().into()], false, true);
                relays.push(Relay { name: "conductor", target: t });
            }
            None => eprintln!("note: the official conductor is skipped (see above)"),
        }
    }

    println!("# acp-usage-bench: {runs} run(s) per figure, medians; ratios are to the raw copy\n");
    for r in &relays {
        let argv: Vec<_> = r.target.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        println!("- {:<10} `{}`", r.name, argv.join(" "));
    }
    println!();

    let mut results: BTreeMap<(&str, &str), Vec<Measurement>> = BTreeMap::new();
    let mut failed: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for run in 0..runs {
        for sc in scenarios {
            let once = matches!(sc.kind, Kind::Slow { .. });
            if once && run > 0 {
                continue;
            }
            // Rotate the order each run so a noisy neighbour does not always hit the same relay.
            let count = relays.len();
            for i in 0..count {
                let relay = &mut relays[(i + run) % count];
                let key = (relay.name, sc.name);
                if (once && relay.name == "direct") || failed.contains_key(&key) {
                    continue;
                }
                let log = logs.join(format!("{}-{}.log", relay.name, sc.name));
                relay.target.stderr = Some(log.clone());
                let _ = std::fs::remove_dir_all(&state);
                eprint!("run {}/{runs} {:<10} {:<10} ", run + 1, sc.name, relay.name);
                match client::run(&relay.target, sc) {
                    Ok(m) => {
                        eprintln!("{}", brief(sc, &m));
                        results.entry(key).or_default().push(m);
                    }
                    Err(e) => {
                        eprintln!("FAILED: {e:#} (stderr in {})", log.display());
                        failed.insert(key, format!("{e:#} (stderr: {})", log.display()));
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&state);

    let names: Vec<&str> = relays.iter().map(|r| r.name).collect();
    let table = Table { relays: &names, results: &results, failed: &failed };
    for sc in scenarios {
        table.scenario(sc);
    }
    table.summary(scenarios);
    if !failed.is_empty() {
        println!("\nFailures:");
        for ((relay, sc), e) in &failed {
            println!("- {relay} / {sc}: {e}");
        }
    }
    // The conductor failing is a finding; acp-usage or the reference failing is a failure.
    Ok(!failed.keys().any(|(r, _)| *r != "conductor"))
}

/// The directory of the release binaries and the target directory, building them first
/// unless `--no-build` (acp-usage too when `with_acp_usage` and no `--acp-usage` is given).
fn binaries(args: &Args, with_acp_usage: bool) -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = workspace_root();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bins = if cfg!(debug_assertions) {
        eprintln!(
            "note: this runner is a debug build; it measures the release binaries in target/release (use cargo run --release)"
        );
        target_dir.join("release")
    } else {
        std::env::current_exe()?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| target_dir.join("release"))
    };

    if !args.no_build {
        let mut cargo = vec!["build", "--release", "-p", "acp-usage-bench", "--bins"];
        if args.acp_usage.is_none() && with_acp_usage {
            cargo.extend(["-p", "acp-usage"]);
        }
        eprintln!("building: cargo {}", cargo.join(" "));
        let ok = Command::new(cargo_bin())
            .args(&cargo)
            .current_dir(&root)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("note: the build failed; using the binaries already in {}", bins.display());
        }
    }
    Ok((bins, target_dir))
}

/// The start-up benchmark: the agent alone, through acp-usage, and through it as Claude Code
/// with and without the tap.
/// The start-up benchmark and (`usage`) the `/usage` one, which start the same commands.
fn run_startup(args: &Args, runs: usize, startup: bool, usage: bool) -> anyhow::Result<()> {
    let (bins, target_dir) = binaries(args, true)?;
    let agent: OsString = existing(bins.join("bench-agent"))?.into();
    let path: OsString =
        existing(args.acp_usage.clone().unwrap_or_else(|| bins.join("acp-usage")))?.into();
    let state = target_dir.join("bench-logs").join(format!("startup-{}", std::process::id()));
    let target = |argv: Vec<OsString>| Target {
        argv,
        // As the relay scenarios run it: the ledger in a scratch directory, no state file.
        env: vec![
            ("ACP_USAGE_LEDGER".into(), state.join("ledger.db").into()),
            ("ACP_USAGE_STATE_DIR".into(), "off".into()),
        ],
        stderr: None,
        byte_exact: true,
        measure: false,
        timeout: Duration::from_secs(args.timeout),
    };
    let subjects = [
        Subject { name: "direct", target: target(vec![agent.clone()]) },
        Subject {
            name: "acp-usage",
            target: target(vec![path.clone(), "--".into(), agent.clone()]),
        },
        // The bench agent has no profile, so acp-usage starts no tap for it; as Claude Code the
        // tap starts (bound before the agent, serving beside it) and the agent is pointed at it.
        Subject {
            name: "acp-usage --profile claude (tap on)",
            target: target(vec![
                path.clone(),
                "--profile".into(),
                "claude".into(),
                "--".into(),
                agent.clone(),
            ]),
        },
        // The same profile without the tap: what the tap itself costs, apart from what the
        // profile does (for a generic agent `--tap off` changes nothing: it has no tap).
        Subject {
            name: "acp-usage --profile claude --tap off",
            target: target(vec![
                path.clone(),
                "--profile".into(),
                "claude".into(),
                "--tap".into(),
                "off".into(),
                "--".into(),
                agent.clone(),
            ]),
        },
        // Without the guard process between acp-usage and the agent (a fork of acp-usage made
        // first thing in its `main`): what the guard costs.
        Subject {
            name: "acp-usage, ACP_USAGE_GUARD=0",
            target: Target {
                env: [target(Vec::new()).env, vec![("ACP_USAGE_GUARD".into(), "0".into())]]
                    .concat(),
                ..target(vec![path.clone(), "--".into(), agent.clone()])
            },
        },
    ];
    if usage {
        let prompts = if args.quick { 50 } else { 200 } * runs;
        eprintln!("/usage: {prompts} prompts through acp-usage");
        let times = client::usage_command_round_trips(&subjects[1].target, prompts);
        println!("{}", startup::usage_table(&startup::millis(&times?)));
    }
    if startup {
        let rounds = if args.quick { 20 } else { 50 } * runs;
        eprintln!("start-up: {rounds} rounds of {} commands", subjects.len());
        let times = startup::measure(&subjects, rounds);
        println!("{}", startup::table(&subjects, &times?));
        let (acp_usage, agent) = (path.clone(), agent.clone());
        let timeout = Duration::from_secs(args.timeout);
        println!("{}", startup::remembered_windows(&acp_usage, &agent, &state, timeout, rounds)?);
    }
    let _ = std::fs::remove_dir_all(&state);
    Ok(())
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).map(Path::to_path_buf).unwrap_or(manifest)
}

fn cargo_bin() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn existing(p: PathBuf) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(
        p.is_file(),
        "{} not found (build it with `cargo build --release -p acp-usage -p acp-usage-bench --bins`)",
        p.display()
    );
    Ok(p)
}

/// The conductor's binary, installing it when missing; `None` (with a note) when unavailable.
fn conductor(args: &Args, root: &Path, target_dir: &Path) -> Option<PathBuf> {
    if let Some(p) = &args.conductor {
        if p.is_file() {
            return Some(p.clone());
        }
        eprintln!("note: {} does not exist", p.display());
        return None;
    }
    let tools = target_dir.join("bench-tools");
    let path = tools.join("bin").join(CONDUCTOR);
    if path.is_file() {
        return Some(path);
    }
    if args.no_build {
        eprintln!("note: {} is not installed (--no-build)", path.display());
        return None;
    }
    let root_arg = tools.to_string_lossy().into_owned();
    let install =
        ["install", CONDUCTOR, "--version", CONDUCTOR_VERSION, "--locked", "--root", &root_arg];
    eprintln!("installing the official conductor: cargo {}", install.join(" "));
    let ok = Command::new(cargo_bin())
        .args(install)
        .current_dir(root)
        .status()
        .is_ok_and(|s| s.success());
    if ok && path.is_file() {
        Some(path)
    } else {
        eprintln!("note: cargo install {CONDUCTOR} {CONDUCTOR_VERSION} failed (offline?)");
        None
    }
}
