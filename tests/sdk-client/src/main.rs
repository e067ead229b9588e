//! `sdk-client`: runs one ACP session through the official Rust SDK and prints what came back.
//!
//! ```text
//! sdk-client [--prompt TEXT]... [--load] [--cwd DIR] [--timeout SECS] [--linger SECS]
//!            [--capture-stderr] [--transcript FILE] [--strict] -- CMD ARGS...
//! ```
//!
//! Prints one JSON line per message received from the agent (`{"kind":"update",…}`,
//! `{"kind":"response",…}`, …; see `acp_usage_sdk_client::SdkTranscript::events`), then
//! exits 0; on failure (including anything the SDK could not parse) prints the error to stderr and
//! exits 1. What the SDK's typed parse dropped (or rejected) is listed on stderr; with `--strict` that
//! is a failure too. The agent's stderr goes straight to ours, unless `--capture-stderr` records it
//! in the transcript. `--transcript FILE` writes the whole `SdkTranscript` to FILE as one JSON
//! document (what the end-to-end tests read); `--linger` is how long to listen after the last
//! response (default 0.25 s).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use acp_usage_sdk_client::{SdkScript, run_session};
use anyhow::{Context as _, anyhow, bail};

const USAGE: &str = "usage: sdk-client [--prompt TEXT]... [--load] [--cwd DIR] [--timeout SECS] \
                     [--linger SECS] [--capture-stderr] [--transcript FILE] [--strict] -- CMD ARGS...";

fn seconds(name: &str, value: &str) -> anyhow::Result<Duration> {
    let secs: f64 = value.parse().with_context(|| format!("{name}: seconds"))?;
    Duration::try_from_secs_f64(secs).with_context(|| format!("{name}: seconds"))
}

fn run() -> anyhow::Result<()> {
    let mut script = SdkScript::new().inherit_stderr(true);
    let mut cwd = std::env::current_dir()?;
    let mut args = std::env::args().skip(1);
    let mut command = Vec::new();
    let mut strict = false;
    let mut transcript_file = None;
    while let Some(arg) = args.next() {
        let mut value =
            |name: &str| args.next().ok_or_else(|| anyhow!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--prompt" => script = script.prompt(value("--prompt")?),
            "--load" => script = script.load(true),
            "--strict" => strict = true,
            "--capture-stderr" => script = script.inherit_stderr(false),
            "--cwd" => cwd = PathBuf::from(value("--cwd")?),
            "--transcript" => transcript_file = Some(PathBuf::from(value("--transcript")?)),
            "--timeout" => script = script.timeout(seconds("--timeout", &value("--timeout")?)?),
            "--linger" => script = script.linger(seconds("--linger", &value("--linger")?)?),
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
    if let Some(path) = &transcript_file {
        let json = serde_json::to_vec(&transcript).context("serialising the transcript")?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
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
