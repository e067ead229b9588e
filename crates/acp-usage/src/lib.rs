//! acp-usage: a relay between an editor and an ACP agent that adds what the agent leaves out of
//! token usage, context-window use and cost.
//!
//! `main` parses the command line ([`cli`]) and runs one of: the relay ([`relay`], with
//! [`record`] and live validation), the demo ([`demo`]), the catalog query ([`models_cmd`]), or
//! `validate` and `schema` ([`validate_cmd`]).

pub mod catalog_file;
pub mod cli;
pub mod config;
pub mod demo;
pub mod logging;
pub mod models_cmd;
pub mod record;
pub mod relay;
pub mod state;
pub mod transcripts;
pub mod validate_cmd;

/// Entry point shared by `main.rs`.
pub fn main() -> std::process::ExitCode {
    cli::main()
}
