//! `acp-usage export --otlp`: sends what the ledger holds that the collector has not
//! acknowledged, once, and exits (for a cron job, or a machine where no agent runs now). The
//! same exporter the relay runs; several at once never send a call twice.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::options::RelayOptions;
use crate::sinks::ledger;
use crate::sinks::otlp::{Exporter, config};

/// What `export` was asked for.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// `--otlp`: the one destination there is.
    pub otlp: bool,
    /// `--ledger FILE`.
    pub ledger: Option<PathBuf>,
}

/// Runs `acp-usage export`.
pub fn run(relay: &RelayOptions, opts: &ExportOptions) -> anyhow::Result<ExitCode> {
    if !opts.otlp {
        bail!(
            "say where to export: --otlp (the OTEL_EXPORTER_OTLP_* variables or [otlp] say where)"
        );
    }
    let user_config = relay.load_config()?;
    let cfg = config::resolve(|k| std::env::var(k).ok(), user_config.otlp.as_ref())?.context(
        "no OTLP endpoint is configured: set OTEL_EXPORTER_OTLP_ENDPOINT (or [otlp] endpoint in the config file)",
    )?;
    let path = match &opts.ledger {
        Some(p) => p.clone(),
        None => ledger::path().context("no ledger (ACP_USAGE_LEDGER=off, or no home directory)")?,
    };
    if !path.exists() {
        bail!("no ledger at {}: nothing to export", path.display());
    }
    let mut exporter = Exporter::new(cfg, path.clone())?;
    let mut sent = 0;
    // Batches until nothing is left; another process exporting at the same time leaves some
    // for itself, which is fine.
    loop {
        let f = exporter.export(None)?;
        sent += f.calls;
        if f.calls == 0 || f.left == 0 {
            eprintln!(
                "acp-usage: exported {sent} calls and the metrics of {} to {}; {} calls still queued",
                path.display(),
                crate::sinks::otlp::exporter::redact(&exporter.config().logs_url),
                f.left
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
}
