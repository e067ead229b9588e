//! The relay's options: what the user asked for ([`RelayOptions`], filled in from the command
//! line by `cli.rs`, and read by the config layering and the commands too), and what one relay
//! run uses ([`Options`], resolved from them with the config file and the state file).
//!
//! Plain Rust types only: the relay does not know how its options were given.

use std::path::PathBuf;
use std::time::Duration;

use super::observer::Settings;
use crate::agents::Profile;
use crate::config::Config;
use crate::sinks::ledger::learned::Learned;
use crate::sources::transcripts::Locations;

/// What the user asked of the relay: the command line and environment, before the config file is
/// read. The `demo` and `models` commands take it too (for the catalog they show and the relay
/// they start).
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// `--catalog`: a catalog file layered over the embedded one and the config file's.
    pub catalog: Option<PathBuf>,
    /// `--config`: the user config file (`None`: `$ACP_USAGE_CONFIG` or the default place).
    pub config: Option<PathBuf>,
    /// `--agent-usage`: what to do with the usage figures the agent sends itself.
    pub agent_usage: AgentUsage,
    /// `--profile`: the agent profile (`None`: recognise it from `initialize` and the command).
    pub profile: Option<Profile>,
    /// `--log-file`: where logs go instead of stderr.
    pub log_file: Option<PathBuf>,
    /// `--grace-ms`: how long the agent may take to exit after the editor closed its side.
    pub grace: Duration,
    /// `--max-line-mib`: the longest line accepted, in MiB.
    pub max_line_mib: usize,
    /// `--record`: where to record every line that crosses the relay.
    pub record: Option<PathBuf>,
    /// `--validate`: check the live traffic against the ACP schema.
    pub validate: bool,
    /// `--transcripts`: whether the agents' own transcripts are read.
    pub transcripts: Transcripts,
    /// `--tap on|off`: whether the agent's LLM API calls go through the tap; `None` leaves it to
    /// the config file's `tap`, and else it is on.
    pub tap: Option<bool>,
    /// `--transcript-wait-ms`: longest a turn's result waits for the transcript to catch up.
    pub transcript_wait: Duration,
    /// The agent command and its arguments.
    pub agent: Vec<String>,
}

/// What to do with usage figures the agent itself sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentUsage {
    /// Replace the agent's figures with normalised ones, keeping the originals in `_meta`.
    Normalize,
    /// Leave the agent's own figures untouched; only add what is missing.
    Keep,
}

/// Whether the agents' own transcripts are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transcripts {
    /// Read them.
    On,
    /// Don't.
    Off,
}

/// Options of one relay run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The agent command line.
    pub argv: Vec<String>,
    /// How long the agent may take to exit after the editor closed its side.
    pub grace: Duration,
    /// Longest accepted line.
    pub max_line: usize,
    /// Observer settings.
    pub settings: Settings,
    /// The ledger (`None`: none; see [`crate::sinks::ledger`]).
    pub ledger: Option<PathBuf>,
    /// Where the ledger is exported over OTLP (`None`: it is not).
    pub otlp: Option<crate::sinks::otlp::OtlpConfig>,
    /// Where the agents' transcripts are (`None`: not read).
    pub transcripts: Option<Locations>,
    /// Longest a turn's result waits for the transcript to catch up.
    pub transcript_wait: Duration,
    /// Start the agent under a guard that ends its tree if acp-usage dies ([`super::guard`]):
    /// only where this process is acp-usage itself (not a test harness relaying in-process).
    pub guard: bool,
}

impl RelayOptions {
    /// The config file's decisions, with the catalog layered (`--config`, `--catalog`).
    pub fn load_config(&self) -> anyhow::Result<Config> {
        crate::config::load(self.config.as_deref(), self.catalog.as_deref())
    }
}

impl Options {
    /// The options of a run on what the user asked for: reads the config file (layering the
    /// catalog) and what earlier runs learned.
    pub fn resolve(args: &RelayOptions) -> anyhow::Result<Options> {
        let config = args.load_config()?;
        // What earlier runs learned per agent and model. The ledger is made here when missing
        // (bringing in an old `learned.json`); one that cannot be opened is left out of the run.
        let (learned, ledger) = match crate::sinks::ledger::path() {
            Some(path) => match crate::sinks::ledger::open(&path).and_then(|s| s.agents()) {
                Ok(agents) => (Learned { agents, ..Learned::default() }, Some(path)),
                Err(err) => {
                    tracing::warn!(
                        "cannot open the ledger {}: {err}; going on without it",
                        path.display()
                    );
                    (Learned::default(), None)
                }
            },
            None => (Learned::default(), None),
        };
        let transcripts = args.transcripts == Transcripts::On;
        Ok(Options {
            argv: args.agent.clone(),
            grace: args.grace,
            max_line: args.max_line_mib.saturating_mul(1024 * 1024).max(1024),
            settings: Settings {
                forced_profile: args.profile,
                command: args.agent.clone(),
                keep_agent_usage: args.agent_usage == AgentUsage::Keep,
                catalog: config.catalog,
                default_window: config.default_window,
                learned,
                ledger: ledger.clone(),
                transcripts,
                tap: args.tap.or(config.tap).unwrap_or(true),
                budgets: config.budgets.clone(),
            },
            otlp: match crate::sinks::otlp::config::resolve(
                |k| std::env::var(k).ok(),
                config.otlp.as_ref(),
            ) {
                Ok(c) => c.filter(|_| ledger.is_some()),
                Err(err) => {
                    tracing::warn!("{err:#}; the ledger is not exported");
                    None
                }
            },
            ledger,
            transcripts: transcripts.then(Locations::from_process),
            transcript_wait: args.transcript_wait,
            guard: false,
        })
    }
}
