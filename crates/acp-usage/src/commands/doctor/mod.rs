//! `acp-usage doctor [--json]`: what acp-usage will do for each agent installed here, and what
//! stands in the way.
//!
//! For every agent found (`agents::installed`): the program and the profile it gets, where its
//! transcripts are, whether the tap can point it and what defeats it; then what kept an agent
//! added in Zed from the ACP registry from being found (`registry`); whether Zed's plan-usage
//! meter is on (`zed`). Then acp-usage's own parts: the config file, the ledger, the OTLP
//! collector, the catalog's age. One finding per
//! line, each with a status: `ok`, `info` (neutral: not configured, not applicable), `warn`
//! (works, with less than it could), `FAIL` (will not work as the user expects). Exit 1 when
//! any finding is `FAIL`, else 0.
//!
//! The findings are gathered from [`Inputs`]: the environment as functions (variables, a file
//! reader) and the agents found, so tests give any machine they like; rendering is `render.rs`.
//! Doctor only looks: it creates no file (not the ledger either), runs no agent, and never
//! shows a header value or a token.

mod agent;
mod own;
mod render;
mod show;
#[cfg(test)]
mod tests;
mod zed;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::agents::Profile;
use crate::agents::installed::{self, Found, Note, Search};

/// What `doctor` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One JSON document instead of lines.
    pub json: bool,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--catalog`.
    pub catalog: Option<PathBuf>,
    /// `--tap on|off` or `ACP_USAGE_TAP` (the config's `tap` is read with the config; unset
    /// is on).
    pub tap: Option<bool>,
}

/// How a finding bears on the user, mildest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works.
    Ok,
    /// Neutral: not configured, or nothing to do.
    Info,
    /// Works, with less than it could (an estimate where a record could be exact).
    Warn,
    /// Will not work as the user expects.
    Fail,
}

impl Status {
    /// The line's first word: plain ASCII, so it survives a pipe and `grep FAIL`.
    pub fn mark(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// One thing doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The agent's profile name; `None` for acp-usage's own parts.
    pub agent: Option<&'static str>,
    /// What was checked: `found`, `transcripts`, `tap`, `registry`, `agents`, `zed`, `config`,
    /// `ledger`, `otlp`, `catalog`.
    pub check: &'static str,
    pub status: Status,
    /// What and where, for a person.
    pub message: String,
    /// The file or directory the finding is about, when there is one.
    pub path: Option<PathBuf>,
}

impl Finding {
    fn new(
        agent: Option<&'static str>,
        check: &'static str,
        status: Status,
        message: String,
    ) -> Self {
        Finding { agent, check, status, message, path: None }
    }

    fn at(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// What doctor looks at: the environment acp-usage (and so the agent) runs in, and the agents
/// found in it.
pub struct Inputs<'a> {
    /// A variable of the environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// A file's text (the agents' settings files).
    pub read_file: &'a dyn Fn(&Path) -> Option<String>,
    /// The agents' programs found.
    pub found: Vec<Found>,
    /// What the search could not make into an agent (a registry entry it cannot start, a file
    /// it cannot read).
    pub notes: Vec<Note>,
    /// Where they were looked for (said when none is found).
    pub search: Search,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--catalog`.
    pub catalog: Option<PathBuf>,
    /// `--tap on|off` or `ACP_USAGE_TAP`.
    pub tap: Option<bool>,
    /// Now, for ages.
    pub now: SystemTime,
    /// How long a connection to the OTLP collector may take.
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("found", &self.found)
            .field("notes", &self.notes)
            .field("search", &self.search)
            .field("config", &self.config)
            .field("catalog", &self.catalog)
            .field("tap", &self.tap)
            .finish_non_exhaustive()
    }
}

/// Every finding, agents first (in the profiles' order), then acp-usage's own.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The profiles of the agents found, in order.
    pub agents: Vec<&'static str>,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether anything will not work.
    pub fn failed(&self) -> bool {
        self.findings.iter().any(|f| f.status == Status::Fail)
    }

    /// 1 when anything will not work, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.failed())
    }
}

/// Looks at everything.
pub fn gather(inputs: &Inputs) -> Report {
    // The config first: whether the tap is on, and the OTLP table, come from it.
    let (config, config_finding) = own::config(inputs);
    let tap_on = config.tap_on(inputs.tap);

    let mut findings = Vec::new();
    let mut agents: Vec<&'static str> = Vec::new();
    for profile in Profile::all() {
        let found: Vec<&Found> = inputs.found.iter().filter(|f| f.profile == profile).collect();
        if found.is_empty() {
            continue;
        }
        agents.push(profile.name());
        agent::check(profile, &found, inputs, tap_on, &mut findings);
    }
    findings.extend(inputs.notes.iter().map(agent::note));
    if agents.is_empty() {
        findings.push(agent::none_found(&inputs.search));
    }
    findings.extend(zed::meter(inputs));

    findings.push(config_finding);
    let (ledger, ledger_on) = own::ledger(inputs);
    findings.push(ledger);
    findings.extend(own::otlp(inputs, config.otlp.as_ref(), ledger_on));
    findings.extend(own::catalog(&config, inputs.now));
    Report { agents, findings }
}

/// Runs the command on this machine.
pub fn run(opts: &Options) -> anyhow::Result<ExitCode> {
    let env = |name: &str| std::env::var(name).ok();
    let read_file = |path: &Path| std::fs::read_to_string(path).ok();
    let search = Search::from_env();
    let findings = installed::find(&search);
    let inputs = Inputs {
        env: &env,
        read_file: &read_file,
        found: findings.found,
        notes: findings.notes,
        search,
        config: opts.config.clone(),
        catalog: opts.catalog.clone(),
        tap: opts.tap,
        now: SystemTime::now(),
        connect_timeout: Duration::from_secs(1),
    };
    let report = gather(&inputs);
    let text = if opts.json { render::json(&report) } else { render::text(&report) };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        // `acp-usage doctor | head` closes the pipe early; the verdict still stands.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => {}
        Err(err) => return Err(err.into()),
    }
    Ok(ExitCode::from(report.exit_code()))
}
