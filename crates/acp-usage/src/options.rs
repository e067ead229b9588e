//! What the user asked of the relay ([`RelayOptions`]): the command line and environment in
//! plain Rust types, filled in by `cli.rs`. Outside `relay/` because the commands read it too
//! (`demo`, `models`, `import`, `export` and the reports' import), and `load_config` is how
//! each of them reads the config file with `--config` and `--catalog`.

use std::path::PathBuf;
use std::time::Duration;

use crate::agents::Profile;
use crate::config::Config;

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
    /// the config file's `tap`, and else it is on. `Some(true)` (asked for) also taps an agent
    /// without a profile.
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

impl RelayOptions {
    /// The config file's decisions, with the catalog layered (`--config`, `--catalog`).
    pub fn load_config(&self) -> anyhow::Result<Config> {
        crate::config::load(self.config.as_deref(), self.catalog.as_deref())
    }
}
