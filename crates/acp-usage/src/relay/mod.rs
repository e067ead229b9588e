//! The relay: spawn the agent, forward lines both ways, observe and add usage.

use std::process::ExitCode;

use crate::cli::RelayArgs;

/// Runs the relay until the agent exits or the editor goes away.
pub fn run(_args: RelayArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
