//! The observer: follows requests, sessions and turns in the traffic, feeds the ledgers, and
//! says what to add or rewrite. It does no I/O: the relay hands it lines and writes what it
//! answers, which keeps every protocol decision testable in process.
//!
//! Correlation is by the id's exact wire text (`1` and `"1"` differ; `null` is an id). Only
//! requests from the editor to the agent are tracked, since only their responses carry what
//! acp-usage reads; an agent's own requests to the editor pass untouched.

use std::collections::HashMap;

use acp_usage_core::account::{Account, Context, Role};
use acp_usage_core::{Catalog, Source};
use serde_json::Value;

use super::content;
use super::emit::{self, Trigger};
use super::envelope::{self, Envelope, Kind};
use super::follow::Follow;
use crate::agents::{AgentUpdate, Profile};
use crate::sinks::ledger::Write;
use crate::sinks::ledger::learned::{Entry, Learned, SessionEntry};
use crate::sources::transcripts::Command;

mod alerts;
mod holding;
mod limits;
mod models;
mod requests;
mod responses;
mod sessions;
mod tapped;
mod update_line;
mod updates;
mod usage_command;
mod usage_text;
mod writes;

use sessions::{Method, Pending, Session};

pub use requests::EditorOutcome;
/// The `/usage` entry acp-usage puts in command lists (the demo marks it by it).
pub use usage_command::command_entry;
pub use usage_command::{Invocation, invocation, merge_commands};
pub use usage_text::View;

/// What the observer needs to know up front.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A profile forced on the command line.
    pub forced_profile: Option<Profile>,
    /// The profile the agent's command names before it starts (`Profile::detect_launch`,
    /// symlinks resolved): the one the tap is pointed for, unless a profile is forced.
    pub launched_as: Profile,
    /// The agent's command line (for recognising it).
    pub command: Vec<String>,
    /// `--agent-usage keep`: leave the agent's own figures untouched.
    pub keep_agent_usage: bool,
    /// The model catalog.
    pub catalog: Catalog,
    /// The window used when nothing else is known.
    pub default_window: u64,
    /// What earlier runs learned: baselines and windows per agent and model (see
    /// [`crate::sinks::ledger::learned`]).
    pub learned: Learned,
    /// The ledger, where settled calls and session figures are written and a reopened
    /// session's are read (`None`: no ledger).
    pub ledger: Option<std::path::PathBuf>,
    /// Read the agents' transcripts (`--transcripts on`).
    pub transcripts: bool,
    /// The agent's model calls go through the LLM-API tap (`--tap`): every call is seen.
    pub tap: bool,
    /// The tap was wanted (`--tap`, the config file; on by default), whether or not it started.
    pub tap_wanted: bool,
    /// Budgets and the lines whose crossing is noticed.
    pub budgets: crate::config::Budgets,
    /// The name of the `/usage` command acp-usage answers itself (`None`: off).
    pub usage_command: Option<String>,
}

/// What an account needs from outside, for a session whose agent's parts are `(window percent,
/// remembered size)` (see `Observer::context_parts`). A free function, so that it borrows only
/// the settings while a session is borrowed mutably.
fn ledger_context(
    settings: &Settings,
    (window_percent, remembered_size): (u64, Option<u64>),
) -> Context<'_> {
    Context {
        catalog: &settings.catalog,
        default_window: settings.default_window,
        window_percent,
        remembered_size,
    }
}

/// What to write to the editor for one line from the agent.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// Lines to write before the agent's line.
    pub before: Vec<Vec<u8>>,
    /// A replacement for the agent's line (`None`: forward it as it came).
    pub replace: Option<Vec<u8>>,
    /// Lines to write after the agent's line.
    pub after: Vec<Vec<u8>>,
    /// Hold the agent's line (and what follows it) until the session's transcript has caught
    /// up, then hand it to [`Observer::from_agent_released`]. Nothing else is set then.
    pub hold: Option<String>,
}

/// Counts of lines the relay passed through without understanding them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Lines that are not a JSON object (malformed, arrays, garbage, empty).
    pub not_objects: u64,
    /// Requests and notifications with methods acp-usage does not read.
    pub other_methods: u64,
    /// `_`-prefixed extension methods.
    pub extensions: u64,
    /// Responses to ids acp-usage did not track.
    pub untracked_responses: u64,
}

/// Whether a `session/update` kind carries conversation content (what a replay repeats).
fn is_content_kind(kind: &str) -> bool {
    matches!(
        kind,
        "user_message_chunk"
            | "agent_message_chunk"
            | "agent_thought_chunk"
            | "tool_call"
            | "tool_call_update"
    )
}

/// Wall-clock time in Unix milliseconds (transcripts stamp calls with it).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The state of one relay.
#[derive(Debug)]
pub struct Observer {
    settings: Settings,
    profile: Profile,
    pending: HashMap<String, Pending>,
    sessions: HashMap<String, Session>,
    /// Baselines and windows learned per agent and model, in this run and earlier ones, and
    /// the figures of this run's sessions (for a reopening).
    learned: Learned,
    /// What the ledger is to record, taken by the relay.
    writes: Vec<Write>,
    /// What the editor is told beyond the figures: notices and chat lines for the crossings.
    alerting: alerts::Alerting,
    /// Lines passed through without being understood.
    pub counters: Counters,
    /// Commands for the transcript worker, taken by the relay.
    commands: Vec<Command>,
    /// The next agent line is a held one being released: do not hold it again.
    releasing: bool,
    /// `initialize`'s `agentInfo.name`, when the agent sent one.
    agent_name: Option<String>,
    /// `initialize`'s `agentInfo.version`.
    agent_version: Option<String>,
    /// What attributes the tap's calls to sessions across the run.
    tap: tapped::Attribution,
    /// Sessions with calls counted between turns that no update has shown yet.
    between_turns: Vec<String>,
    /// The subscription windows seen, the latest of each, and the lines each has reached.
    limit_board: acp_usage_core::limits::LimitBoard,
    /// The latest credits and plan stated, per provider.
    credits: std::collections::BTreeMap<String, acp_usage_core::limits::credits::Credits>,
    /// The credential-to-account pairings written to the ledger in this run.
    aliases_written: std::collections::HashSet<(String, String)>,
    /// acp-usage's own `/usage` command: the sessions with an agent's list, calls by role.
    usage: usage_command::CommandState,
}

impl Observer {
    /// The ledger was opened (after the `initialize` exchange, perhaps): its path, and what
    /// earlier runs learned under what this run learned already.
    pub fn ledger_opened(&mut self, path: std::path::PathBuf, mut learned: Learned) {
        learned.agents.append(&mut self.learned.agents);
        learned.sessions.append(&mut self.learned.sessions);
        let windows = std::mem::take(&mut learned.windows);
        let accounts = std::mem::take(&mut learned.accounts);
        self.learned = learned;
        self.settings.ledger = Some(path);
        self.use_accounts(&accounts);
        self.limits_remembered(windows);
    }

    /// The accounts the agent will use, per provider, as far as its credentials tell before it
    /// starts (`crate::accounts`): their windows are the ones shown until a response says whose
    /// they are.
    pub fn use_accounts(&mut self, accounts: &[(String, String)]) {
        for (provider, account) in accounts {
            self.limit_board.use_account(provider, Some(account));
        }
    }

    /// A new observer.
    pub fn new(mut settings: Settings) -> Observer {
        let learned = std::mem::take(&mut settings.learned);
        let profile = settings.forced_profile.unwrap_or(settings.launched_as);
        let limit_lines = settings.budgets.limits_warn_at.clone();
        Observer {
            settings,
            profile,
            pending: HashMap::new(),
            sessions: HashMap::new(),
            learned,
            writes: Vec::new(),
            alerting: alerts::Alerting::default(),
            counters: Counters::default(),
            commands: Vec::new(),
            releasing: false,
            agent_name: None,
            agent_version: None,
            tap: tapped::Attribution::default(),
            between_turns: Vec::new(),
            limit_board: acp_usage_core::limits::LimitBoard::new(limit_lines),
            credits: std::collections::BTreeMap::new(),
            aliases_written: std::collections::HashSet::new(),
            usage: usage_command::CommandState::default(),
        }
    }

    /// Commands for the transcript worker since the last call.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// The profile in use.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Observes a line from the agent and says what to write to the editor.
    pub fn from_agent(&mut self, line: &[u8]) -> Outcome {
        self.from_agent_parsed(line, Envelope::parse(line))
    }

    /// Whether acp-usage may change, add to or hold an agent line with this envelope (`None`:
    /// not a JSON object): a response to a tracked editor request, or a `session/update` that
    /// is rewritten (`usage_update`, `available_commands_update`) or followed by an update of
    /// ours (a model change, a compaction's end). Every other line is forwarded as it came, so the relay writes it
    /// first and observes it after ([`Observer::account`]).
    pub fn owns(&self, env: Option<&Envelope<'_>>) -> bool {
        let Some(env) = env else { return false };
        match env.kind() {
            Kind::Response => env.id_key().is_some_and(|k| self.pending.contains_key(&k)),
            Kind::Notification if env.method.as_deref() == Some("session/update") => {
                env.update.as_ref().is_some_and(|u| {
                    u.update
                        .session_update
                        .as_deref()
                        .is_some_and(|k| envelope::OWNED_UPDATES.contains(&k))
                })
            }
            _ => false,
        }
    }

    /// Observes an agent line that [`Observer::owns`] said is not owned, after it was
    /// forwarded. A response that became tracked in between (the editor reused the id after
    /// the agent answered) is counted as the untracked response it was when it was forwarded.
    pub fn account(&mut self, line: &[u8], env: Option<Envelope<'_>>) {
        match &env {
            Some(e) if e.kind() == Kind::Response => self.counters.untracked_responses += 1,
            _ => {
                // Notices queued meanwhile (a window the tap read) wait for an owned line.
                let out = self.agent_line(line, env);
                debug_assert_eq!(out, Outcome::default(), "an unowned line was changed");
            }
        }
    }

    /// Observes an agent line that was streamed on as it arrived (its first bytes said what it
    /// is, [`envelope::prefix`]), after it was forwarded; `text_bytes` is the length of what
    /// followed those bytes, escapes counted as one byte. What the whole line would have told
    /// is estimated from that: the tokens of a content update are the estimate by bytes for
    /// the session's family (for the OpenAI family too, where a held line is tokenized), all of
    /// a `tool_call`'s as its output.
    pub fn account_streamed(&mut self, prefix: &envelope::Prefix, text_bytes: u64) {
        let (id, kind) = match prefix {
            envelope::Prefix::Method(m) => return self.count_other(m),
            envelope::Prefix::Update { session, kind } => (session.as_str(), kind.as_str()),
        };
        let profile = self.profile;
        let s = self.updated_session(id);
        let family = s.family(profile);
        let tokens = acp_usage_core::estimate::by_bytes(text_bytes, family);
        let content_kind = is_content_kind(kind);
        if s.loading && content_kind {
            if !s.account.has_turns() {
                s.account.replayed(tokens);
            }
            return;
        }
        if content_kind && !s.account.in_turn() {
            return;
        }
        match kind {
            "user_message_chunk" => s.account.user_message_in_turn(),
            "agent_message_chunk" => s.account.output_tokens(tokens, false),
            "agent_thought_chunk" => s.account.output_tokens(tokens, true),
            "tool_call" => {
                s.account.tool_call(0);
                s.account.tool_output(tokens);
            }
            "tool_call_update" => s.account.tool_output(tokens),
            "compaction_summary_chunk" => s.compaction_summary += tokens,
            _ => {}
        }
    }

    /// [`Observer::from_agent`] with the line's envelope already parsed.
    pub fn from_agent_parsed(&mut self, line: &[u8], env: Option<Envelope<'_>>) -> Outcome {
        let mut out = self.agent_line(line, env);
        if out.hold.is_none() {
            // Before the line: a turn's notices reach the client before its result, which is
            // where many clients stop reading the turn.
            out.before.append(&mut self.alerting.notices_out);
        }
        out
    }

    fn agent_line(&mut self, line: &[u8], env: Option<Envelope<'_>>) -> Outcome {
        let Some(env) = env else {
            self.counters.not_objects += 1;
            return Outcome::default();
        };
        match env.kind() {
            Kind::Response => {
                let key = env.id_key().expect("responses have ids");
                if let Some(p) = self.pending.get(&key)
                    && matches!(
                        p.method,
                        Method::Prompt | Method::Load | Method::Resume | Method::Fork
                    )
                {
                    let p = Pending {
                        method: p.method,
                        raw_id: String::new(),
                        session: p.session.clone(),
                        model: None,
                        cwd: None,
                    };
                    if let Some(id) = self.hold_for(&env, &p) {
                        return Outcome { hold: Some(id), ..Outcome::default() };
                    }
                }
                match self.pending.remove(&key) {
                    Some(p) => self.on_response(line, &env, p),
                    None => {
                        self.counters.untracked_responses += 1;
                        Outcome::default()
                    }
                }
            }
            Kind::Notification if env.method.as_deref() == Some("session/update") => {
                self.on_session_update(line, &env)
            }
            Kind::Notification | Kind::Request => {
                self.count_other(env.method.as_deref().unwrap_or(""));
                Outcome::default()
            }
            Kind::Other => Outcome::default(),
        }
    }

    fn count_other(&mut self, method: &str) {
        if method.starts_with('_') {
            self.counters.extensions += 1;
        } else {
            self.counters.other_methods += 1;
        }
    }
}
