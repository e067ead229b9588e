//! `acp-usage demo`: a complete metered session through the real relay, no external agent.
//! (Stub; the full implementation replaces this file.)

pub mod agent;

use std::process::ExitCode;

use crate::cli::{DemoArgs, RelayArgs};

/// Runs the demo.
pub fn run(_args: &RelayArgs, _d: &DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
