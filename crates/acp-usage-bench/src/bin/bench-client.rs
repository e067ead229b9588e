//! `bench-client [--quick] [--scenario NAME] [--measure] -- COMMAND [ARGS...]`: runs one
//! scenario of the benchmark against any command (the agent, or a relay in front of it) and
//! prints what it measured; handy under a profiler, e.g.
//! `bench-client --scenario small -- valgrind --tool=callgrind acp-usage -- bench-agent`.

// Printing the measurement on stdout is this tool's job.
#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use acp_usage_bench::client::{self, Target};
use acp_usage_bench::scenario::{NAMES, Scenario};
use acp_usage_bench::stats::percentile;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let mut name = "small".to_string();
    let (mut quick, mut measure) = (false, false);
    let mut argv: Vec<OsString> = Vec::new();
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--quick") => quick = true,
            Some("--measure") => measure = true,
            Some("--scenario") => {
                name = args.next().and_then(|s| s.into_string().ok()).unwrap_or_default()
            }
            Some("--") => {
                argv = args.by_ref().collect();
            }
            _ => {
                eprintln!(
                    "usage: bench-client [--quick] [--measure] [--scenario NAME] -- COMMAND [ARGS...]"
                );
                eprintln!(
                    "scenarios: {}; --measure reads the command's CPU and RSS from /proc",
                    NAMES.join(", ")
                );
                return ExitCode::from(2);
            }
        }
    }
    let Some(sc) = Scenario::by_name(&name, quick) else {
        eprintln!("bench-client: unknown scenario {name:?} (known: {})", NAMES.join(", "));
        return ExitCode::from(2);
    };
    if argv.is_empty() {
        eprintln!("bench-client: no command after --");
        return ExitCode::from(2);
    }
    let target = Target {
        argv,
        env: Vec::new(),
        stderr: None,
        byte_exact: true,
        measure,
        timeout: Duration::from_secs(3600),
    };
    match client::run(&target, &sc) {
        Ok(m) => {
            let secs = m.elapsed.as_secs_f64();
            println!("{sc}");
            println!(
                "{} messages in {secs:.3} s: {:.0} msg/s, {:.1} MB/s",
                m.messages,
                m.messages as f64 / secs,
                m.bytes as f64 / secs / 1e6
            );
            if !m.rtts_us.is_empty() {
                let p = |q| percentile(&m.rtts_us, q).unwrap_or(f64::NAN);
                println!("round trip p50 {:.1} µs, p99 {:.1} µs", p(50.0), p(99.0));
            }
            if let (Some(cpu), Some(hwm)) = (m.cpu, m.hwm_kib) {
                println!("cpu {:.3} s, peak RSS {:.1} MiB", cpu.as_secs_f64(), hwm as f64 / 1024.0);
            }
            println!(
                "{} usage_update, {} other lines; the command {}",
                m.usage_updates, m.other_lines, m.exit
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-client: {e:#}");
            ExitCode::FAILURE
        }
    }
}
