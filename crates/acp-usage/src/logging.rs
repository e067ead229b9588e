//! Logging setup: `tracing` to stderr or a file, level from `ACP_USAGE_LOG`.
//!
//! stdout is the protocol channel, so nothing here ever writes to it.

use std::path::Path;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// Environment variable holding the log filter (e.g. `info`, `acp_usage=debug`).
pub const LOG_ENV: &str = "ACP_USAGE_LOG";

/// Installs the global subscriber; default level `warn` on stderr, `info` in a file.
pub fn init(file: Option<&Path>) -> anyhow::Result<()> {
    let default = if file.is_some() { "info" } else { "warn" };
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            builder.with_ansi(false).with_writer(std::sync::Mutex::new(f)).init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}
