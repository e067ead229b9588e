//! Command line: `acp-usage [OPTIONS] -- AGENT [ARGS...]`, plus the `demo`, `models`, `validate`,
//! `schema`, `report`, `import`, `export`, `watch`, `status`, `setup` and `doctor` commands.
//!
//! The one module that knows clap: it parses the arguments into its own types and hands the
//! relay and the commands plain values ([`RelayOptions`] and the like), so nothing else depends
//! on how the options were given.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
use clap::{Parser, Subcommand, ValueEnum};

use crate::agents::Profile;
use crate::commands;
use crate::options::{self, RelayOptions};
use crate::relay;

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

    /// The agent profile; `auto` recognises it from the command (through npx, npm exec, pnpm dlx,
    /// bunx, uvx, pipx run, env, node, sh -c and symlinks) before the agent starts, else from
    /// `initialize`'s agentInfo, which is too late to point the tap: name the profile for an agent
    /// started through a wrapper acp-usage cannot see through (a warning says so).
    #[arg(long, value_name = "PROFILE", default_value = "auto", value_parser = profile_parser())]
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

    // The help names the agents whose transcripts are read, from their profiles.
    #[arg(long, value_enum, default_value_t = Transcripts::On, help = transcripts_help())]
    pub transcripts: Transcripts,

    /// The LLM-API tap, on by default for every agent acp-usage has a profile for: the agent
    /// is started with its base-URL settings pointed at a proxy on 127.0.0.1 that forwards each
    /// request unchanged to where it would have gone and reads every call's usage (exact, side
    /// calls included). `--tap off` (or `tap = false` in the config file) turns it off. `--tap on`
    /// (a bare `--tap`, ACP_USAGE_TAP=1) also taps an agent without a profile, through the
    /// well-known base-URL variables (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL;
    /// a value the user set is where the calls go on to), named on stderr; without it an unknown
    /// agent runs untapped.
    #[arg(long, env = "ACP_USAGE_TAP", value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    pub tap: Option<bool>,

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
    /// Sum the calls the ledger recorded per day, week, month, session, project, agent or
    /// model: tokens, calls and cost (USD), as a table or JSON.
    ///
    /// It first imports what the agents' transcripts on disk added since the last import (as
    /// `acp-usage import` does, quietly; only changed files are read), so the report is current;
    /// `--no-import` answers from the ledger as it is. An import that fails is one warning line;
    /// the report still answers.
    Report(ReportArgs),
    /// A live view of the sessions running now and in the last hour, and today's total cost.
    ///
    /// Every acp-usage process's sessions, from the ledger: context use, turns, cost, project,
    /// last activity, redrawn as the ledger changes. r reads the ledger again at once; q, Esc or
    /// Ctrl-C quits. When stdout is not a terminal (or with --once) it prints one plain-text
    /// snapshot and exits.
    Watch(WatchArgs),
    /// Print one line for status bars and prompts: the latest session and today's total cost.
    ///
    /// For tmux, starship or PS1: the most recently active session's figures and today's total,
    /// e.g. `claude · 42% of 200k · $0.31 · today $4.20`. Never creates the ledger; with no
    /// session yet it prints --empty and exits 0.
    Status(StatusArgs),
    // The agents it reads come from their profiles.
    #[command(about = import_about(), long_about = import_about())]
    Import(ImportArgs),
    /// Send what the ledger holds that the OpenTelemetry collector has not acknowledged
    /// (OTEL_EXPORTER_OTLP_ENDPOINT or the config's [otlp]), once, and exit.
    Export(ExportArgs),
    /// Check what acp-usage will do for each agent installed here, and what stands in the way.
    ///
    /// For every agent found (on PATH, in npm's global prefix, in ~/.local/bin): the profile
    /// it gets, where its transcripts are, whether the LLM-API tap can point it and what
    /// defeats it (a base URL in the agent's own settings, a login whose URL is fixed in the
    /// agent); then the config file, the ledger (path, writable, size), the OTLP collector
    /// (reachable within 1 s) and the catalog's age (old after 90 days). One line per finding:
    /// `ok`, `info` (neutral), `warn` (works, with less than it could) or `FAIL` (will not work
    /// as expected), then the agent (or `acp-usage`), the check and what was found. A setting
    /// that sends an agent's calls past the tap (a base URL in Claude Code's settings files or
    /// in qwen-code's modelProviders) is FAIL whether the tap is on here or not. It only looks:
    /// it creates no file and runs no agent.
    ///
    /// Exit status: 0 when nothing will fail (warnings allowed), 1 when any finding is FAIL,
    /// 2 when doctor itself could not run.
    ///
    /// --json prints one JSON document: `agents` (profile names found), `findings` (each with
    /// `agent` (a profile name, or null for acp-usage's own), `check` (found, transcripts, tap,
    /// agents, config, ledger, otlp, catalog), `status` (ok, info, warn, fail), `message` and
    /// `path` (or null)), `summary` (counts per status) and `exit`.
    Doctor(DoctorArgs),
    /// Add a metered entry for each agent installed here to Zed's or JetBrains' agent settings.
    ///
    /// Finds the agents on PATH, in npm's global prefix, in ~/.local/bin and where Zed installs
    /// them, and adds one entry per agent, "<agent> (metered)", that runs the agent through
    /// acp-usage: `acp-usage` when it is installed on PATH, else `npx -y acp-usage@<version>`
    /// (JetBrains gets absolute paths). Every other byte of the file stays as it was, comments
    /// included; a second run changes nothing; --remove takes setup's entries out and gives the
    /// file back as it was.
    ///
    /// On a terminal it shows the change and asks first (--yes applies it without asking); when
    /// stdin or stdout is not a terminal (a script, `npx acp-usage setup zed` in CI) it applies
    /// the change. A file that does not parse is left as it is. Exit status: 0 done or nothing
    /// to do, 1 no agent found or the change declined, 2 an error.
    Setup(SetupArgs),
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

/// Options of `acp-usage setup`.
#[derive(Debug, Clone, clap::Args)]
pub struct SetupArgs {
    /// The editor whose agent settings to change.
    #[arg(value_enum)]
    pub editor: SetupEditor,
    /// The settings file to change (default: Zed's ~/.config/zed/settings.json, on Linux under
    /// $XDG_CONFIG_HOME when it is set; JetBrains' ~/.jetbrains/acp.json).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Print the change as a diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Take out the entries setup added; entries you wrote yourself stay.
    #[arg(long)]
    pub remove: bool,
    /// Apply the change without asking, even on a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Leave Zed's plan-usage meter setting (`agent.show_usage_status`) as it is: setup turns it
    /// on (and `--remove` off again) otherwise.
    #[arg(long)]
    pub no_meter: bool,
}

/// `setup` editors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SetupEditor {
    /// Zed: `agent_servers` in settings.json.
    Zed,
    /// JetBrains IDEs (AI Assistant): `agent_servers` in ~/.jetbrains/acp.json.
    Jetbrains,
}

impl From<SetupArgs> for commands::setup::Options {
    fn from(a: SetupArgs) -> commands::setup::Options {
        commands::setup::Options {
            editor: match a.editor {
                SetupEditor::Zed => commands::setup::Editor::Zed,
                SetupEditor::Jetbrains => commands::setup::Editor::JetBrains,
            },
            settings: a.settings,
            dry_run: a.dry_run,
            remove: a.remove,
            yes: a.yes,
            meter: !a.no_meter,
        }
    }
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

/// Options of `acp-usage export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// Export over OTLP/HTTP to the configured collector.
    #[arg(long)]
    pub otlp: bool,
    /// The ledger to export (default: $ACP_USAGE_LEDGER, else the data directory's).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
}

/// Options of `acp-usage doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON document instead of lines (fields in `acp-usage doctor --help`).
    #[arg(long)]
    pub json: bool,
}

/// Options of `acp-usage import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// Only calls made on or after DATE (YYYY-MM-DD or YYYYMMDD, local midnight; or an RFC 3339
    /// time); files last changed before it are not read.
    #[arg(long, value_name = "DATE", value_parser = commands::import::parse_since)]
    pub since: Option<i64>,
    /// Only this agent's transcripts (repeatable); all agents when absent.
    #[arg(long, value_name = "AGENT", value_parser = import_agent_parser())]
    pub agent: Vec<Profile>,
    /// The ledger to fill (default: $ACP_USAGE_LEDGER, else $XDG_DATA_HOME/acp-usage/ledger.db).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
}

/// `--transcripts`' help: the agents whose transcripts the relay reads.
fn transcripts_help() -> String {
    let names: Vec<&str> =
        Profile::all().filter(|p| p.transcripts().is_some()).map(|p| p.name()).collect();
    format!(
        "Read the agent's own transcripts ({}) for exact per-call numbers; `off` uses only what \
         the agent reports over ACP (and the tap)",
        names.join(", ")
    )
}

/// `import`'s help: the agents whose records it reads.
fn import_about() -> String {
    let names: Vec<&str> = commands::import::agents().map(|p| p.name()).collect();
    format!(
        "Fill the ledger from the agents' records already on disk ({}), so reports cover \
         sessions that never ran through acp-usage. Safe to run again: a call already in the \
         ledger is not counted twice.",
        names.join(", ")
    )
}

/// `status --format`'s help: its placeholders and its default line.
fn status_format_help() -> String {
    let names: Vec<String> = commands::status::placeholders().map(|n| format!("{{{n}}}")).collect();
    format!(
        "The line, with placeholders {}; `{{{{` and `}}}}` are literal braces. Default: `{}`, \
         leaving out the parts that are unknown.",
        names.join(" "),
        commands::status::DEFAULT_FORMAT
    )
}

/// `import --agent` values: the agents whose records `import` reads.
fn import_agent_parser() -> impl clap::builder::TypedValueParser<Value = Profile> {
    let names = commands::import::agents().map(|p| PossibleValue::new(p.name()).help(p.about()));
    PossibleValuesParser::new(names.collect::<Vec<_>>())
        .map(|name| Profile::named(&name).expect("a listed profile"))
}

impl From<ImportArgs> for commands::import::ImportOptions {
    fn from(a: ImportArgs) -> commands::import::ImportOptions {
        commands::import::ImportOptions {
            ledger: a.ledger,
            since: a.since,
            agents: a.agent,
            threads: None,
        }
    }
}

/// Options of `acp-usage report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// One row per day, ISO week (labelled by its Monday), month, session, project, agent or
    /// model.
    #[arg(value_enum, default_value_t = ReportBy::Daily)]
    pub by: ReportBy,
    /// First day counted, inclusive (YYYY-MM-DD or YYYYMMDD).
    #[arg(long, value_name = "DATE", value_parser = commands::report::parse_date)]
    pub since: Option<chrono::NaiveDate>,
    /// Last day counted, inclusive (YYYY-MM-DD or YYYYMMDD).
    #[arg(long, value_name = "DATE", value_parser = commands::report::parse_date)]
    pub until: Option<chrono::NaiveDate>,
    /// Only sessions whose agent (profile such as `claude`, or the agent's own name) contains
    /// TEXT, ignoring case.
    #[arg(long, value_name = "TEXT")]
    pub agent: Option<String>,
    /// Only sessions whose project (working directory) contains TEXT, ignoring case.
    #[arg(long, value_name = "TEXT")]
    pub project: Option<String>,
    /// Only calls whose model id contains TEXT, ignoring case.
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,
    /// Break each row down per model.
    #[arg(long)]
    pub breakdown: bool,
    /// Print one JSON object (`rows` and `totals`) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write one self-contained HTML page to FILE instead (`-`: stdout): cost per day by model,
    /// tokens per day by kind, how exact each day's cost is, the costliest sessions. It loads
    /// nothing from the network.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "breakdown"])]
    pub html: Option<PathBuf>,
    /// Days in UTC rather than the local time zone.
    #[arg(long)]
    pub utc: bool,
    /// The ledger to read (default: $ACP_USAGE_LEDGER, else $XDG_DATA_HOME/acp-usage/ledger.db).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
    /// `report limits`: one row per window and day, or per hour.
    #[arg(long, value_enum, default_value_t = LimitsPer::Day)]
    pub per: LimitsPer,
    /// Answer from the ledger as it is, without importing first what the agents' transcripts
    /// on disk added since the last import.
    #[arg(long)]
    pub no_import: bool,
}

/// `report limits --per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LimitsPer {
    Day,
    Hour,
}

/// `report` groupings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportBy {
    /// Per calendar day.
    Daily,
    /// Per ISO week (Monday to Sunday).
    Weekly,
    /// Per calendar month.
    Monthly,
    /// Per ACP session.
    Session,
    /// Per project (working directory).
    Project,
    /// Per agent.
    Agent,
    /// Per model.
    Model,
    /// Subscription windows (Claude's 5-hour and weekly limits, Codex's windows, Gemini's
    /// quota): how each filled, per day or hour (`--per`).
    Limits,
}

impl From<ReportArgs> for commands::report::ReportOptions {
    fn from(a: ReportArgs) -> commands::report::ReportOptions {
        use commands::report::{Group, Zone};
        commands::report::ReportOptions {
            group: match a.by {
                ReportBy::Daily => Group::Daily,
                ReportBy::Weekly => Group::Weekly,
                ReportBy::Monthly => Group::Monthly,
                ReportBy::Session => Group::Session,
                ReportBy::Project => Group::Project,
                ReportBy::Agent => Group::Agent,
                ReportBy::Model => Group::Model,
                ReportBy::Limits => Group::Limits,
            },
            since: a.since,
            until: a.until,
            agent: a.agent,
            project: a.project,
            model: a.model,
            breakdown: a.breakdown,
            json: a.json,
            zone: if a.utc { Zone::Utc } else { Zone::Local },
            ledger: a.ledger,
            per: match a.per {
                LimitsPer::Day => commands::report::Per::Day,
                LimitsPer::Hour => commands::report::Per::Hour,
            },
            html: a.html,
        }
    }
}

/// Options of `acp-usage watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Print one plain-text snapshot and exit, even on a terminal (the default when stdout is
    /// not one). Exit 1 when there is no ledger yet.
    #[arg(long)]
    pub once: bool,
    /// The ledger to read (default: $ACP_USAGE_LEDGER, else $XDG_DATA_HOME/acp-usage/ledger.db).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
}

/// Options of `acp-usage status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    // The placeholders and the default come from `status` itself.
    #[arg(long, value_name = "TEMPLATE", help = status_format_help())]
    pub format: Option<String>,
    /// What to print when the ledger holds no session yet (or there is no ledger).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub empty: String,
    /// The ledger to read (default: $ACP_USAGE_LEDGER, else $XDG_DATA_HOME/acp-usage/ledger.db).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
}

impl From<WatchArgs> for commands::watch::Options {
    fn from(a: WatchArgs) -> commands::watch::Options {
        commands::watch::Options { ledger: a.ledger, once: a.once }
    }
}

impl From<StatusArgs> for commands::status::Options {
    fn from(a: StatusArgs) -> commands::status::Options {
        commands::status::Options { ledger: a.ledger, format: a.format, empty: a.empty }
    }
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

/// A `--profile` value: `auto`, or a profile of the agents' list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileArg(Option<Profile>);

/// `--profile` values: `auto`, then every profile.
fn profile_parser() -> impl clap::builder::TypedValueParser<Value = ProfileArg> {
    let auto = PossibleValue::new("auto")
        .help("Recognise the agent from `initialize`'s `agentInfo` and the command");
    let names = Profile::all().map(|p| PossibleValue::new(p.name()).help(p.about()));
    PossibleValuesParser::new(std::iter::once(auto).chain(names).collect::<Vec<_>>())
        .map(|name| ProfileArg(Profile::named(&name)))
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

impl From<AgentUsage> for options::AgentUsage {
    fn from(a: AgentUsage) -> options::AgentUsage {
        match a {
            AgentUsage::Normalize => options::AgentUsage::Normalize,
            AgentUsage::Keep => options::AgentUsage::Keep,
        }
    }
}

impl From<Transcripts> for options::Transcripts {
    fn from(t: Transcripts) -> options::Transcripts {
        match t {
            Transcripts::On => options::Transcripts::On,
            Transcripts::Off => options::Transcripts::Off,
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
        self.0
    }
}

/// Parses the command line and runs; `guard` is the relay's agent guard, forked already (see
/// `relay::guard::early`), which any other command lets go.
pub fn main(
    argv: &[std::ffi::OsString],
    guard: Option<std::io::Result<crate::relay::guard::Guard>>,
) -> ExitCode {
    let args = Args::parse_from(argv);
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
        Some(Command::Watch(w)) => commands::watch::run(&w.into()),
        Some(Command::Status(s)) => commands::status::run(&s.into()),
        Some(Command::Import(i)) => commands::import::run(&options, &i.into()),
        Some(Command::Export(e)) => commands::export::run(
            &options,
            &commands::export::ExportOptions { otlp: e.otlp, ledger: e.ledger },
        ),
        Some(Command::Report(r)) => {
            let import = !r.no_import;
            let opts = commands::report::ReportOptions::from(r);
            // Subscription windows come from relayed traffic only; every other report sums
            // calls, which an import brings up to date.
            if import && opts.group != commands::report::Group::Limits {
                commands::import::before_report(&options, opts.ledger.clone());
            }
            commands::report::run(&opts)
        }
        Some(Command::Doctor(d)) => commands::doctor::run(&commands::doctor::Options {
            json: d.json,
            config: options.config.clone(),
            catalog: options.catalog.clone(),
            tap: options.tap,
        }),
        Some(Command::Setup(s)) => commands::setup::run(&s.into()),
        None => {
            if options.agent.is_empty() {
                eprintln!(
                    "acp-usage: no agent given. Usage: acp-usage [OPTIONS] -- AGENT [ARGS...]\n\
                     Try `acp-usage demo` to see what it does, or `acp-usage --help`."
                );
                return ExitCode::from(2);
            }
            relay::run(options, guard)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tap_of(args: &[&str]) -> Option<bool> {
        let argv = ["acp-usage"].iter().chain(args).chain(&["--", "agent"]);
        Args::try_parse_from(argv).expect("parses").relay.tap
    }

    #[test]
    fn the_tap_flag_takes_on_and_off_and_a_bare_flag_is_on() {
        // Unset: the config file decides, else on (`Config::tap_on`).
        if std::env::var_os("ACP_USAGE_TAP").is_none() {
            assert_eq!(tap_of(&[]), None);
        }
        assert_eq!(tap_of(&["--tap"]), Some(true));
        assert_eq!(tap_of(&["--tap", "off"]), Some(false));
        assert_eq!(tap_of(&["--tap=0"]), Some(false));
        assert_eq!(tap_of(&["--tap", "on"]), Some(true));
        assert!(Args::try_parse_from(["acp-usage", "--tap", "maybe", "--", "a"]).is_err());
    }
}
