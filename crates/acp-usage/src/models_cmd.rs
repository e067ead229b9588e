//! `acp-usage models [QUERY]`: print what the catalog knows.
//! (Stub; the full implementation replaces this file.)

use std::process::ExitCode;

use crate::cli::{ModelsArgs, RelayArgs};

/// Runs the command.
pub fn run(_args: &RelayArgs, _m: &ModelsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
