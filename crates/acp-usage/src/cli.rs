//! Command line: `acp-usage [OPTIONS] -- AGENT [ARGS...]`, plus the `demo`, `models`, `validate`
//! and `schema` commands.
//!
//! The one module that knows clap: it parses the arguments into its own types and hands the
//! relay and the commands plain values ([`RelayOptions`] and the like), so nothing else depends
//! on how the options were given.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::commands;
use crate::relay::{self, RelayOptions, profiles::Profile};

/// Wraps an ACP agent and makes its token usage, context-window use and cost right.
///
/// Put it in front of the agent's command in the editor's agent settings, e.g.
/// `acp-usage -- claude-agent-acp`. stdout carries only ACP messages; logs go to stderr (level from
/// ACP_USAGE_LOG, e.g. `ACP_USAGE_LOG=debug`) or to --log-file.
#[derive(Debug, Parser)]
#[command(name = "acp-usage", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub relay: RelayArgs,
}

/// Options of the relay (the default mode).
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// A model catalog to use on top of the embedded one: a newer LiteLLM
    /// `model_prices_and_context_window.json`, or a small TOML/JSON file of overrides.
    #[arg(long, value_name = "FILE", global = true)]
    pub catalog: Option<PathBuf>,

    /// The user config file (default: $ACP_USAGE_CONFIG, else $XDG_CONFIG_HOME/acp-usage/config.toml).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// What to do with usage figures the agent itself sends: replace them with normalised ones
    /// (keeping the agent's originals in `_meta`), or leave them untouched.
    #[arg(long, value_enum, default_value_t = AgentUsage::Normalize)]
    pub agent_usage: AgentUsage,

    /// The agent profile; `auto` recognises it from `initialize` and the command.
    #[arg(long, value_enum, default_value_t = ProfileArg::Auto)]
    pub profile: ProfileArg,

    /// Write logs to this file instead of stderr.
    #[arg(long, value_name = "FILE", global = true)]
    pub log_file: Option<PathBuf>,

    /// How long to wait for the agent to exit after the editor closed its side, before ending the
    /// agent's whole process group.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub grace_ms: u64,

    /// Longest line accepted in either direction, in MiB; longer lines are dropped with a log line.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    pub max_line_mib: usize,

    /// Record every line that crosses the relay to FILE (JSONL: seq, t, dir, line; secrets
    /// redacted); see `acp-usage validate` to check a recording.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Validate the live traffic against the ACP schema and log violations (warn level) without
    /// touching the traffic.
    #[arg(long)]
    pub validate: bool,

    /// Read the agent's own transcripts (Claude Code, Codex, Gemini CLI, opencode) for exact
    /// per-call numbers; `off` uses only what the agent reports over ACP.
    #[arg(long, value_enum, default_value_t = Transcripts::On)]
    pub transcripts: Transcripts,

    /// Send the agent's LLM API calls through a tap on 127.0.0.1 that reads every call's usage
    /// (exact, side calls included): the agent is started with its base-URL variables pointed
    /// at the tap, which forwards each request unchanged to where it would have gone. Also
    /// `tap = true` in the config file.
    #[arg(long, env = "ACP_USAGE_TAP", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub tap: bool,

    /// Longest a turn's result waits for the agent's transcript to catch up, in milliseconds.
    #[arg(long, value_name = "MS", env = "ACP_USAGE_TRANSCRIPT_WAIT_MS", default_value_t = 1000)]
    pub transcript_wait_ms: u64,

    /// The agent command and its arguments.
    #[arg(last = true, value_name = "AGENT")]
    pub agent: Vec<String>,
}

/// `--transcripts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transcripts {
    /// Read them.
    On,
    /// Don't.
    Off,
}

/// Subcommands besides the relay.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a complete metered session with a built-in scripted agent and client, and print the
    /// annotated traffic.
    Demo(DemoArgs),
    /// Show what the model catalog knows: context windows and prices.
    Models(ModelsArgs),
    /// Check a recording (`--record`) or a raw NDJSON stream against the ACP schema: exit 0 when
    /// clean, 1 on violations, 2 when the input could not be read.
    Validate(ValidateArgs),
    /// Print the JSON Schema of the ACP messages acp-usage reads and writes (schema/schema.json).
    Schema,
    /// Internal: the scripted agent that `demo` wraps.
    #[command(hide = true)]
    DemoAgent,
}

/// Options of `acp-usage demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Print the raw JSON lines too.
    #[arg(long)]
    pub raw: bool,
}

/// Options of `acp-usage models`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelsArgs {
    /// Part of a model id (e.g. `sonnet`, `gpt-5`); all models when absent.
    pub query: Option<String>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options of `acp-usage validate`.
#[derive(Debug, Clone, clap::Args)]
pub struct ValidateArgs {
    /// A recording made with `--record`, or with `--from` a raw NDJSON stream; `-` or nothing
    /// reads stdin.
    #[arg(value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// The input is a raw NDJSON stream of messages sent by this side, not a recording.
    #[arg(long, value_enum, value_name = "SIDE")]
    pub from: Option<FromSide>,
    /// Print one JSON object per finding and a final summary object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `validate --from` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FromSide {
    /// Messages the agent sent (to the client).
    Agent,
    /// Messages the client (the editor) sent (to the agent).
    Client,
}

/// `--agent-usage` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentUsage {
    /// Replace the agent's figures with normalised ones, keeping the originals in `_meta`.
    Normalize,
    /// Leave the agent's own figures untouched; only add what is missing.
    Keep,
}

/// `--profile` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    /// Recognise the agent from `initialize`'s `agentInfo` and the command.
    Auto,
    /// claude-agent-acp (Claude Code).
    Claude,
    /// codex-acp.
    Codex,
    /// gemini-cli `--acp`.
    Gemini,
    /// opencode `acp`.
    Opencode,
    /// qwen-code `qwen --acp`.
    Qwen,
    /// GitHub Copilot CLI `copilot --acp`.
    Copilot,
    /// cline `cline --acp`.
    Cline,
    /// Any other agent.
    Generic,
}

impl From<RelayArgs> for RelayOptions {
    fn from(a: RelayArgs) -> RelayOptions {
        RelayOptions {
            catalog: a.catalog,
            config: a.config,
            agent_usage: a.agent_usage.into(),
            profile: a.profile.profile(),
            log_file: a.log_file,
            grace: Duration::from_millis(a.grace_ms),
            max_line_mib: a.max_line_mib,
            record: a.record,
            validate: a.validate,
            transcripts: a.transcripts.into(),
            tap: a.tap,
            transcript_wait: Duration::from_millis(a.transcript_wait_ms),
            agent: a.agent,
        }
    }
}

impl From<AgentUsage> for relay::AgentUsage {
    fn from(a: AgentUsage) -> relay::AgentUsage {
        match a {
            AgentUsage::Normalize => relay::AgentUsage::Normalize,
            AgentUsage::Keep => relay::AgentUsage::Keep,
        }
    }
}

impl From<Transcripts> for relay::Transcripts {
    fn from(t: Transcripts) -> relay::Transcripts {
        match t {
            Transcripts::On => relay::Transcripts::On,
            Transcripts::Off => relay::Transcripts::Off,
        }
    }
}

impl From<FromSide> for commands::validate::FromSide {
    fn from(f: FromSide) -> commands::validate::FromSide {
        match f {
            FromSide::Agent => commands::validate::FromSide::Agent,
            FromSide::Client => commands::validate::FromSide::Client,
        }
    }
}

impl ProfileArg {
    /// The profile forced by `--profile`, if any.
    pub fn profile(self) -> Option<Profile> {
        match self {
            ProfileArg::Auto => None,
            ProfileArg::Claude => Some(Profile::Claude),
            ProfileArg::Codex => Some(Profile::Codex),
            ProfileArg::Gemini => Some(Profile::Gemini),
            ProfileArg::Opencode => Some(Profile::Opencode),
            ProfileArg::Qwen => Some(Profile::Qwen),
            ProfileArg::Copilot => Some(Profile::Copilot),
            ProfileArg::Cline => Some(Profile::Cline),
            ProfileArg::Generic => Some(Profile::Generic),
        }
    }
}

/// Parses the command line and runs.
pub fn main() -> ExitCode {
    let args = Args::parse();
    let log_file = args.relay.log_file.clone();
    if let Err(err) = crate::logging::init(log_file.as_deref()) {
        eprintln!("acp-usage: cannot open the log: {err:#}");
        return ExitCode::from(2);
    }
    let options = RelayOptions::from(args.relay);
    let res = match args.command {
        Some(Command::Models(m)) => commands::models::run(&options, m.query.as_deref(), m.json),
        Some(Command::Demo(d)) => commands::demo::run(&options, d.raw),
        Some(Command::DemoAgent) => commands::demo::agent::run(),
        Some(Command::Validate(v)) => {
            commands::validate::run(v.input.as_deref(), v.from.map(Into::into), v.json)
        }
        Some(Command::Schema) => commands::validate::print_schema(),
        None => {
            if options.agent.is_empty() {
                eprintln!(
                    "acp-usage: no agent given. Usage: acp-usage [OPTIONS] -- AGENT [ARGS...]\n\
                     Try `acp-usage demo` to see what it does, or `acp-usage --help`."
                );
                return ExitCode::from(2);
            }
            relay::run(options)
        }
    };
    match res {
        Ok(code) => code,
        Err(err) => {
            if log_file.is_some() {
                tracing::error!("{err:#}");
            }
            eprintln!("acp-usage: {err:#}");
            ExitCode::from(2)
        }
    }
}
