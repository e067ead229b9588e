//! acp-usage: a relay between an editor and an ACP agent that adds what the agent leaves out of
//! token usage, context-window use and cost.
//!
//! `main` parses the command line ([`cli`], the one module that knows clap) and runs one of: the
//! relay ([`relay`], with [`record`] and live validation, fed by the [`sources`] of exact
//! numbers, writing to the [`sinks`]: the ledger), or one of the [`commands`]: the demo, the
//! catalog query, `validate` and `schema`, the ledger's `report`, `import`, `watch` and
//! `status`, and `doctor`.

pub mod agents;
pub mod catalog_file;
pub mod cli;
pub mod commands;
pub mod config;
pub mod logging;
pub mod numbers;
pub mod procfs;
pub mod record;
pub mod relay;
pub mod sinks;
pub mod sources;
#[cfg(test)]
mod test_support;

/// Entry point shared by `main.rs`.
pub fn main() -> std::process::ExitCode {
    // The guard between a relay and its agent is this same executable (see relay::guard).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = relay::guard::run_if_asked(&args) {
        return code;
    }
    cli::main()
}
