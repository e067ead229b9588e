//! The observer: follows requests, sessions and turns in the traffic, feeds the ledgers, and
//! says what to add or rewrite. It does no I/O: the relay hands it lines and writes what it
//! answers, which keeps every protocol decision testable in process.
//!
//! Correlation is by the id's exact wire text (`1` and `"1"` differ; `null` is an id). Only
//! requests from the editor to the agent are tracked, since only their responses carry what
//! acp-usage reads; an agent's own requests to the editor pass untouched.

use std::collections::{HashMap, VecDeque};

use acp_usage_core::account::{Account, Context, Role};
use acp_usage_core::estimate::Family;
use acp_usage_core::{Catalog, Source, TokenRecord};
use serde_json::Value;

use super::content;
use super::emit::{self, Trigger};
use super::envelope::{self, Envelope, Kind};
use super::follow::{Awaiting, Follow};
use crate::agents::{AgentUpdate, Profile};
use crate::sinks::ledger::Write;
use crate::sinks::ledger::learned::{Entry, Learned, SessionEntry};
use crate::sources::transcripts::{Command, Format, Update, UpdateKind};

mod alerts;
mod limits;
mod models;
mod requests;
mod responses;
mod tapped;
mod updates;
mod usage_command;
mod usage_text;
mod writes;

pub use requests::EditorOutcome;
pub use usage_command::{Invocation, invocation, merge_commands};
pub use usage_text::View;

/// Results released because the transcript was late, in a row, before it is given up.
const MAX_TIMEOUTS_IN_A_ROW: u32 = 3;

/// What the observer needs to know up front.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A profile forced on the command line.
    pub forced_profile: Option<Profile>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Initialize,
    New,
    Load,
    Resume,
    Fork,
    Prompt,
    SetConfigOption,
    SetModel,
    Close,
    Delete,
    /// Any other request: tracked only to answer it if the agent dies.
    Other,
}

impl Method {
    /// The method acp-usage reads that `name` is; `None` for any other.
    fn from_name(name: &str) -> Option<Method> {
        Some(match name {
            "initialize" => Method::Initialize,
            "session/new" => Method::New,
            "session/load" => Method::Load,
            "session/resume" => Method::Resume,
            "session/fork" => Method::Fork,
            "session/prompt" => Method::Prompt,
            "session/set_config_option" => Method::SetConfigOption,
            "session/set_model" => Method::SetModel,
            "session/close" => Method::Close,
            "session/delete" => Method::Delete,
            _ => return None,
        })
    }
}

#[derive(Debug)]
struct Pending {
    method: Method,
    /// The id as the editor wrote it, to echo in an error response.
    raw_id: String,
    session: Option<String>,
    model: Option<String>,
    /// `cwd` of `session/new`, `load`, `resume`, `fork`: the session's project.
    cwd: Option<String>,
}

#[derive(Debug)]
struct Session {
    account: Account,
    /// A `session/load` is replaying history: its updates are not new usage.
    loading: bool,
    /// The selected model option value, to notice real changes.
    model_value: Option<String>,
    /// Estimated tokens of the summary of a compaction in progress.
    compaction_summary: u64,
    /// Whether the missing price of the session's model was already logged.
    unpriced_logged: bool,
    /// The prompt request (id wire text) whose turn is in progress.
    turn_owner: Option<String>,
    /// Prompts sent while a turn was in progress, with their estimated tokens.
    queued: VecDeque<(String, u64)>,
    /// The session's transcript, when it is followed.
    follow: Option<Follow>,
    /// The tokenizer family of the session's model, for the profile it was resolved with
    /// (resolving a model per chunk would cost two allocations).
    family: Option<(Profile, Family)>,
    /// The window the agent reports for each of its models (qwen-code's `contextLimit`), by
    /// model option value.
    model_windows: HashMap<String, u64>,
    /// Model calls a `session/load` replay reported (qwen-code replays its per-call usage):
    /// the session's history when no transcript is followed.
    replayed_calls: Vec<(TokenRecord, bool)>,
    /// What attributes the tap's calls to this session.
    tap: tapped::TapState,
    /// When the turn in progress started (Unix ms).
    turn_started: Option<i64>,
}

impl Session {
    fn new(account: Account) -> Session {
        Session {
            account,
            loading: false,
            model_value: None,
            compaction_summary: 0,
            unpriced_logged: false,
            turn_owner: None,
            queued: VecDeque::new(),
            follow: None,
            family: None,
            replayed_calls: Vec::new(),
            model_windows: HashMap::new(),
            tap: tapped::TapState::default(),
            turn_started: None,
        }
    }

    /// The tokenizer family of the session's model, cached until the model or profile changes.
    fn family(&mut self, profile: Profile) -> Family {
        match self.family {
            Some((p, f)) if p == profile => f,
            _ => {
                let f = family_of(profile, self.model_value.as_deref());
                self.family = Some((profile, f));
                f
            }
        }
    }

    fn begin_turn(&mut self, tokens: u64) {
        self.turn_started = Some(now_ms());
        self.account.begin_turn();
        self.account.prompt_tokens(tokens);
        if let Some(f) = &mut self.follow {
            f.begin_turn(now_ms());
        }
    }
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

/// Whether a prompt result says the turn made no model call (all its usage is zero).
fn no_model_call(result: &Value) -> bool {
    let zero = |v: Option<&Value>| v.and_then(Value::as_u64) == Some(0);
    zero(result.pointer("/usage/totalTokens"))
        || zero(result.pointer("/_meta/quota/token_count/input_tokens"))
}

/// The tokenizer family of a model option value under a profile.
fn family_of(profile: Profile, model_value: Option<&str>) -> Family {
    match model_value.and_then(|m| profile.resolve_model(m).0) {
        Some(m) => match Family::of(Some(&m)) {
            Family::Other => profile.default_family(),
            f => f,
        },
        None => profile.default_family(),
    }
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
    /// The client shows `notice` session updates (it said so in `initialize`).
    notices: bool,
    /// Notices to send the editor after the line being handled.
    notices_out: Vec<Vec<u8>>,
    /// Crossings to tell in the chat of a client without notices, per session, until one of
    /// its turns is in flight (see [`alerts`]).
    chat_out: HashMap<String, Vec<String>>,
    /// What each session crossed of its context window and session budget.
    alerts: HashMap<String, alerts::SessionAlerts>,
    /// What the day's and month's spending crossed, per period (its start, Unix ms).
    period_alerts: HashMap<(acp_usage_core::budget::Scope, i64), acp_usage_core::budget::Crossings>,
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
    /// Prompts seen so far (orders sessions by their latest prompt, for the tap).
    tap_prompts: u64,
    /// Calls the tap saw before any session existed.
    tap_unclaimed: Vec<crate::sources::tap::TapCall>,
    /// Sessions with calls counted between turns that no update has shown yet.
    between_turns: Vec<String>,
    /// The subscription windows seen, the latest of each, and the lines each has reached.
    limit_board: acp_usage_core::limits::LimitBoard,
    /// acp-usage's own `/usage` command: the sessions with an agent's list, calls by role.
    usage: usage_command::CommandState,
}

impl Observer {
    /// The ledger was opened (after the `initialize` exchange, perhaps): its path, and what
    /// earlier runs learned under what this run learned already.
    pub fn ledger_opened(&mut self, path: std::path::PathBuf, mut learned: Learned) {
        learned.agents.append(&mut self.learned.agents);
        learned.sessions.append(&mut self.learned.sessions);
        self.learned = learned;
        self.settings.ledger = Some(path);
    }

    /// A new observer.
    pub fn new(mut settings: Settings) -> Observer {
        let learned = std::mem::take(&mut settings.learned);
        let profile =
            settings.forced_profile.unwrap_or_else(|| Profile::detect(None, &settings.command));
        let limit_lines = settings.budgets.limits_warn_at.clone();
        Observer {
            settings,
            profile,
            pending: HashMap::new(),
            sessions: HashMap::new(),
            learned,
            writes: Vec::new(),
            notices: false,
            notices_out: Vec::new(),
            chat_out: HashMap::new(),
            alerts: HashMap::new(),
            period_alerts: HashMap::new(),
            counters: Counters::default(),
            commands: Vec::new(),
            releasing: false,
            agent_name: None,
            agent_version: None,
            tap_prompts: 0,
            tap_unclaimed: Vec::new(),
            between_turns: Vec::new(),
            limit_board: acp_usage_core::limits::LimitBoard::new(limit_lines),
            usage: usage_command::CommandState::default(),
        }
    }

    /// A call was counted in `id` between its turns: the editor is to see it (see
    /// [`Observer::between_turn_updates`]).
    fn counted_between_turns(&mut self, id: &str) {
        if !self.between_turns.iter().any(|s| s == id) {
            self.between_turns.push(id.to_owned());
        }
    }

    /// Whether calls were counted between turns that no update has shown yet.
    pub fn has_between_turn_updates(&self) -> bool {
        !self.between_turns.is_empty()
    }

    /// A `usage_update` for each session with calls counted between turns since its last
    /// update, so the figures the editor is left showing cover every billed call. A session
    /// whose turn started since gets none: the turn's own update will show them.
    pub fn between_turn_updates(&mut self) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        for id in std::mem::take(&mut self.between_turns) {
            let idle = self.sessions.get(&id).is_some_and(|s| !s.account.in_turn());
            if idle {
                lines.push(self.update_line(&id, Trigger::BetweenTurns));
            }
        }
        // A notice an update gave rise to (a context threshold) goes with it.
        lines.append(&mut self.notices_out);
        lines
    }

    /// Commands for the transcript worker since the last call.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// The transcript format of the agent, when its transcripts are followed.
    fn format(&self) -> Option<&'static Format> {
        if !self.settings.transcripts {
            return None;
        }
        self.profile.transcripts()
    }

    /// Starts following a session's transcript (`history`: it has one to read first).
    fn follow(&mut self, id: &str, history: bool) {
        let Some(format) = self.format() else { return };
        let Some(s) = self.sessions.get_mut(id) else { return };
        if s.follow.as_ref().is_some_and(|f| !f.failed) {
            // Reopened: its history is read again (the worker's offsets are where they were).
            if history {
                let f = s.follow.as_mut().expect("checked");
                *f = Follow::new(true, format.marks_turn_end, now_ms());
                self.commands.push(Command::Forget(id.to_string()));
            } else {
                return;
            }
        } else {
            s.follow = Some(Follow::new(history, format.marks_turn_end, now_ms()));
        }
        self.commands.push(Command::Track { session: id.to_string(), format });
    }

    /// What the transcript worker read.
    pub fn transcript_update(&mut self, update: Update) {
        let cx = ledger_context(&self.settings, self.context_parts(&update.session));
        let Some(s) = self.sessions.get_mut(&update.session) else { return };
        let Some(f) = &mut s.follow else { return };
        match update.kind {
            UpdateKind::Failed(why) => {
                tracing::debug!(session = update.session, why, "transcript given up");
                f.failed = true;
            }
            UpdateKind::Events { events, found, at_end, settled } => {
                let windows: Vec<u64> = events
                    .iter()
                    .filter_map(|e| match e {
                        acp_usage_core::transcript::Event::Window(w) => Some(*w),
                        _ => None,
                    })
                    .collect();
                let limits: Vec<acp_usage_core::limits::Limit> = events
                    .iter()
                    .filter_map(|e| match e {
                        acp_usage_core::transcript::Event::Limits(l) => Some(l.clone()),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                let newly_found = found && !f.found;
                let mut between = false;
                for o in f.events(events, found, at_end, settled) {
                    s.account.record_outside_turn(o.record, Source::Transcript, o.main, &cx);
                    between = true;
                }
                if newly_found {
                    s.account.follow_transcript();
                }
                for w in windows {
                    s.account.agent_window(w);
                }
                if between {
                    self.counted_between_turns(&update.session);
                }
                self.limits_observed(limits, Some(&update.session));
            }
        }
    }

    /// Whether the result held for `session` may go on.
    pub fn hold_ready(&self, session: &str) -> bool {
        let Some(f) = self.sessions.get(session).and_then(|s| s.follow.as_ref()) else {
            return true;
        };
        f.awaiting().is_none_or(|what| f.ready(what))
    }

    /// The result held for `session` goes on: `timed_out` when the wait ran out. Hand the held
    /// line to [`Observer::from_agent_released`] next.
    pub fn release(&mut self, session: &str, timed_out: bool) {
        self.commands.push(Command::Release(session.to_string()));
        let Some(f) = self.sessions.get_mut(session).and_then(|s| s.follow.as_mut()) else {
            return;
        };
        if timed_out {
            tracing::debug!(
                session,
                found = f.found,
                "the transcript did not catch up in time; using the ACP numbers for this answer"
            );
        }
        f.released(timed_out, now_ms());
        if f.timeouts_in_a_row >= MAX_TIMEOUTS_IN_A_ROW && !f.failed {
            f.failed = true;
            let why =
                if f.found { "it stopped showing the turns' ends" } else { "it never appeared" };
            tracing::warn!(
                session,
                "giving up the agent's transcript ({why}); using the numbers the agent reports over ACP"
            );
            self.commands.push(Command::Forget(session.to_string()));
        }
    }

    /// [`Observer::from_agent`] for a line that was held: it is not held again.
    pub fn from_agent_released(&mut self, line: &[u8]) -> Outcome {
        self.releasing = true;
        let out = self.from_agent(line);
        self.releasing = false;
        out
    }

    /// Whether a response must wait for the session's transcript; starts the wait.
    fn hold_for(&mut self, env: &Envelope<'_>, p: &Pending) -> Option<String> {
        if self.releasing || env.error.is_some() {
            return None;
        }
        let (id, what) = match p.method {
            Method::Prompt => {
                let id = p.session.clone()?;
                // Only a followed session's result is parsed here.
                self.sessions.get(&id)?.follow.as_ref().filter(|f| !f.failed)?;
                let result = env.result.and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
                if result.as_ref().is_some_and(no_model_call) {
                    // A local command (`/clear`, `/context`): nothing will be written to wait for.
                    return None;
                }
                let reported = result.and_then(|r| self.profile.reported_turn_input(&r));
                if let (Some(n), Some(f)) =
                    (reported, self.sessions.get_mut(&id).and_then(|s| s.follow.as_mut()))
                {
                    f.reported_input(n);
                }
                (id, Awaiting::TurnEnd)
            }
            Method::Load | Method::Resume => (p.session.clone()?, Awaiting::History),
            Method::Fork => {
                // The fork's id is in the result: follow it now, so its history is read.
                let r: Value = serde_json::from_str(env.result?.get()).ok()?;
                let id = r.get("sessionId")?.as_str()?.to_string();
                self.format()?;
                self.forked_session(p.session.as_deref(), &id);
                self.follow(&id, true);
                // The fork's transcript repeats its parent's calls: they are history.
                let inherited = p
                    .session
                    .as_ref()
                    .and_then(|parent| self.sessions.get(parent)?.follow.as_ref())
                    .map(Follow::calls);
                if let (Some(calls), Some(f)) =
                    (inherited, self.sessions.get_mut(&id).and_then(|s| s.follow.as_mut()))
                {
                    f.inherit(calls);
                }
                (id, Awaiting::History)
            }
            _ => return None,
        };
        let f = self.sessions.get_mut(&id)?.follow.as_mut().filter(|f| !f.failed)?;
        if f.ready(what) {
            return None;
        }
        f.await_(what);
        self.commands.push(Command::Hold(id.clone()));
        Some(id)
    }

    /// The session a `session/update` is about (made if unknown); its traffic during a turn says
    /// its transcript is growing, so a read is asked for, now and then.
    fn updated_session(&mut self, id: &str) -> &mut Session {
        if !self.sessions.contains_key(id) {
            self.sessions.insert(id.to_string(), Session::new(Account::restored()));
        }
        let s = self.sessions.get_mut(id).expect("just made");
        if s.account.in_turn() && s.follow.as_mut().is_some_and(Follow::poll_due) {
            self.commands.push(Command::Poll(id.to_string()));
        }
        s
    }

    /// The session's traffic says its transcript is growing: ask for a read, now and then.
    fn poll(&mut self, id: &str) {
        if self.sessions.get_mut(id).and_then(|s| s.follow.as_mut()).is_some_and(Follow::poll_due) {
            self.commands.push(Command::Poll(id.to_string()));
        }
    }

    /// The profile in use.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Ids (as the editor wrote them) of editor requests the agent has not answered yet.
    pub fn pending_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.pending.values().map(|p| p.raw_id.clone()).collect();
        ids.sort();
        ids
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
            out.before.append(&mut self.notices_out);
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

    /// A session being reopened: the one this run knows, else what an earlier run carried, else a
    /// restored account whose history is unknown.
    fn reopened(&mut self, id: &str) -> &mut Session {
        let carried = match self.sessions.contains_key(id) {
            true => None,
            false => self.carried(id).map(|e| e.to_carried()),
        };
        self.sessions.entry(id.to_string()).or_insert_with(|| match carried {
            Some(c) => {
                tracing::info!(session = id, "continuing the accounting of an earlier run");
                Session::new(Account::carried_over(c))
            }
            None => Session::new(Account::restored()),
        })
    }

    /// The session a `session/fork` of `parent` created: it starts from its parent's context and
    /// carries its cost, as agents do. An agent that replays the parent's history under the new
    /// id before its response (kilo) made the session known already, with nothing in it.
    fn forked_session(&mut self, parent: Option<&str>, id: &str) -> &mut Session {
        let account = match parent.and_then(|parent| self.sessions.get(parent)) {
            Some(parent) => parent.account.fork(),
            None => Account::restored(),
        };
        let s =
            self.sessions.entry(id.to_string()).or_insert_with(|| Session::new(account.clone()));
        if !s.account.has_turns() && !s.account.in_turn() {
            s.account = account;
        }
        s
    }

    fn session(&mut self, id: &str, make: fn() -> Account) -> &mut Session {
        self.sessions.entry(id.to_string()).or_insert_with(|| Session::new(make()))
    }

    fn family(&mut self, id: &str) -> Family {
        let profile = self.profile;
        match self.sessions.get_mut(id) {
            Some(s) => s.family(profile),
            None => family_of(profile, None),
        }
    }

    /// The key of what is learned for a session's agent and model.
    fn learned_key(&self, id: &str) -> String {
        let model = self.sessions.get(id).and_then(|s| s.model_value.as_deref());
        format!("{}/{}", self.profile.name(), model.unwrap_or("default"))
    }

    fn context_parts(&self, id: &str) -> (u64, Option<u64>) {
        let remembered = self.learned.agents.get(&self.learned_key(id)).and_then(|e| e.size);
        (self.profile.window_percent(), remembered)
    }

    /// Gives the session the baseline learned for its agent and model.
    fn sync_baseline(&mut self, id: &str) {
        let baseline = self.learned.agents.get(&self.learned_key(id)).and_then(|e| e.baseline);
        if let (Some(b), Some(s)) = (baseline, self.sessions.get_mut(id)) {
            s.account.set_baseline(b);
        }
    }

    fn snapshot(&mut self, id: &str) -> acp_usage_core::Snapshot {
        self.sync_baseline(id);
        let cx = ledger_context(&self.settings, self.context_parts(id));
        let s = self.sessions.get(id).expect("session exists");
        let snap = s.account.snapshot(&cx);
        if matches!(snap.size_source, Source::Agent | Source::Catalog) && s.model_value.is_some() {
            let key = self.learned_key(id);
            let entry = self.learned.agents.entry(key.clone()).or_default();
            if entry.size != Some(snap.size) {
                entry.size = Some(snap.size);
                self.record_agent(key, Entry { baseline: None, size: Some(snap.size) });
            }
        }
        let s = self.sessions.get_mut(id).expect("session exists");
        if snap.unpriced_calls > 0 && snap.cost.is_none() && !s.unpriced_logged {
            s.unpriced_logged = true;
            tracing::warn!(session = id, model = ?snap.model, "the catalog has no price for this model; cost left out");
        }
        snap
    }

    fn update_line(&mut self, id: &str, trigger: Trigger) -> Vec<u8> {
        // Whatever was counted between turns, this update shows.
        self.between_turns.retain(|s| s != id);
        let snap = self.snapshot(id);
        self.context_alert(id, snap.used, snap.size, snap.model.as_deref());
        emit::usage_update(id, &snap, &self.label(), trigger)
    }

    /// The agent's profile and the side calls it makes that no source records.
    fn label(&self) -> emit::AgentLabel {
        emit::AgentLabel {
            profile: self.profile.name(),
            unrecorded: if self.settings.tap {
                &[]
            } else {
                self.profile.unrecorded_side_calls(self.agent_name.as_deref())
            },
            limits: self.current_limits(),
        }
    }
}
