//! `sdk-client`: runs one ACP session through the official Rust SDK and prints what came back.
//!
//! ```text
//! sdk-client [--prompt TEXT]... [--load] [--cwd DIR] [--timeout SECS] [--strict] -- CMD ARGS...
//! ```
//!
//! Prints one JSON line per message received from the agent (`{"kind":"update",…}`,
//! `{"kind":"response",…}`, …; see `acp_usage_tests::sdk_client::SdkTranscript::events`), then
//! exits 0; on failure (including anything the SDK could not parse) prints the error to stderr and
//! exits 1. What the SDK's typed parse dropped (or rejected) is listed on stderr; with `--strict` that
//! is a failure too. The agent's stderr goes straight to ours.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use acp_usage_tests::sdk_client::{SdkScript, run_session};
use anyhow::{Context as _, anyhow, bail};

const USAGE: &str = "usage: sdk-client [--prompt TEXT]... [--load] [--cwd DIR] [--timeout SECS] [--strict] -- CMD ARGS...";

fn run() -> anyhow::Result<()> {
    let mut script = SdkScript::new().inherit_stderr(true);
    let mut cwd = std::env::current_dir()?;
    let mut args = std::env::args().skip(1);
    let mut command = Vec::new();
    let mut strict = false;
    while let Some(arg) = args.next() {
        let mut value =
            |name: &str| args.next().ok_or_else(|| anyhow!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--prompt" => script = script.prompt(value("--prompt")?),
            "--load" => script = script.load(true),
            "--strict" => strict = true,
            "--cwd" => cwd = PathBuf::from(value("--cwd")?),
            "--timeout" => {
                let secs: f64 = value("--timeout")?.parse().context("--timeout: seconds")?;
                script = script.timeout(Duration::from_secs_f64(secs));
            }
            "--" => {
                command.extend(args.by_ref());
                break;
            }
            "-h" | "--help" => {
                writeln!(std::io::stdout().lock(), "{USAGE}")?;
                return Ok(());
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    if command.is_empty() {
        bail!("no agent command\n{USAGE}");
    }
    let transcript = run_session(&command, &[], &cwd, &script)?;
    let mut out = std::io::stdout().lock();
    for event in &transcript.events {
        writeln!(out, "{event}")?;
    }
    out.flush()?;
    let lost = transcript.lost();
    if !lost.is_empty() {
        eprintln!("sdk-client: the SDK's typed parse lost:\n  {}", lost.join("\n  "));
        if strict {
            bail!("--strict: the SDK's typed parse lost {} item(s)", lost.len());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sdk-client: {err:#}");
            ExitCode::FAILURE
        }
    }
}
