//! The scripted demo agent (`acp-usage demo-agent`).
//! (Stub; the full implementation replaces this file.)

use std::process::ExitCode;

/// Runs the scripted agent on stdin/stdout.
pub fn run() -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
