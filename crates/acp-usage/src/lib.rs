//! acp-usage: a relay between an editor and an ACP agent that adds what the agent leaves out of
//! token usage, context-window use and cost.
//!
//! `main` parses the command line ([`cli`], the one module that knows clap) and runs one of: the
//! relay ([`relay`], with [`record`] and live validation, fed by the [`sources`] of exact
//! numbers, writing to the [`sinks`]: the ledger), or one of the [`commands`]: the demo, the
//! catalog query, `validate` and `schema`, the ledger's `report`, `import`, `watch` and
//! `status`, and `doctor`.

pub mod accounts;
pub mod agents;
pub mod catalog_file;
pub mod cli;
pub mod cli_reference;
pub mod commands;
pub mod config;
pub mod logging;
pub mod numbers;
pub mod options;
pub mod procfs;
pub mod record;
pub mod relay;
pub mod sinks;
pub mod sources;
#[cfg(test)]
mod test_support;

/// Entry point shared by `main.rs`.
pub fn main() -> std::process::ExitCode {
    // Started by codex-acp as its Codex (the tap points its app server so): Codex replaces
    // this process at once.
    if let Some(spec) = std::env::var_os(agents::codex_app_server::VAR) {
        return agents::codex_app_server::run(&spec);
    }
    // First, while the process has one thread, and so that it is ready before the relay knows
    // the agent's command (see relay::guard).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let guard = relay::guard::early(&args);
    cli::main(&args, guard)
}

/// Lowers the calling thread's priority, for work that runs while the agent starts (opening
/// the ledger): on a machine with few cores it would take turns with the agent's start and the
/// relay's, which the editor waits for. Linux only (elsewhere a nice value is the whole
/// process's).
pub(crate) fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority have no memory-safety preconditions; on Linux a thread id
    // given to PRIO_PROCESS sets that thread's nice value alone.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}
