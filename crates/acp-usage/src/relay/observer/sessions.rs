//! Sessions and the editor's requests awaiting their responses: what the observer keeps per
//! session (its account, its transcript, its turn), how a request's method is told, and how a
//! session is found or made (new, reopened, forked, first seen in an update).

use std::collections::{HashMap, VecDeque};

use acp_usage_core::TokenRecord;
use acp_usage_core::account::Account;
use acp_usage_core::estimate::Family;

use super::{Observer, now_ms, tapped};
use crate::agents::Profile;
use crate::relay::follow::Follow;
use crate::sources::transcripts::Command;

/// An editor request's method, as far as acp-usage reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
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
    pub(super) fn from_name(name: &str) -> Option<Method> {
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

/// An editor request the agent has not answered yet: what its response is read against.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) method: Method,
    /// The id as the editor wrote it, to echo in an error response.
    pub(super) raw_id: String,
    pub(super) session: Option<String>,
    pub(super) model: Option<String>,
    /// `cwd` of `session/new`, `load`, `resume`, `fork`: the session's project.
    pub(super) cwd: Option<String>,
}

/// What the observer keeps of one session.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) account: Account,
    /// A `session/load` is replaying history: its updates are not new usage.
    pub(super) loading: bool,
    /// The selected model option value, to notice real changes.
    pub(super) model_value: Option<String>,
    /// Estimated tokens of the summary of a compaction in progress.
    pub(super) compaction_summary: u64,
    /// Whether the missing price of the session's model was already logged.
    pub(super) unpriced_logged: bool,
    /// The prompt request (id wire text) whose turn is in progress.
    pub(super) turn_owner: Option<String>,
    /// Prompts sent while a turn was in progress, with their estimated tokens and when each
    /// arrived (a queued turn's calls can begin before the turn ahead of it has ended).
    pub(super) queued: VecDeque<(String, u64, i64)>,
    /// The session's transcript, when it is followed.
    pub(super) follow: Option<Follow>,
    /// The tokenizer family of the session's model, for the profile it was resolved with
    /// (resolving a model per chunk would cost two allocations).
    pub(super) family: Option<(Profile, Family)>,
    /// The window the agent reports for each of its models (qwen-code's `contextLimit`), by
    /// model option value.
    pub(super) model_windows: HashMap<String, u64>,
    /// Model calls a `session/load` replay reported (qwen-code replays its per-call usage):
    /// the session's history when no transcript is followed.
    pub(super) replayed_calls: Vec<(TokenRecord, bool)>,
    /// What attributes the tap's calls to this session.
    pub(super) tap: tapped::TapState,
    /// When the turn in progress started (Unix ms).
    pub(super) turn_started: Option<i64>,
}

impl Session {
    pub(super) fn new(account: Account) -> Session {
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
    pub(super) fn family(&mut self, profile: Profile) -> Family {
        match self.family {
            Some((p, f)) if p == profile => f,
            _ => {
                let f = family_of(profile, self.model_value.as_deref());
                self.family = Some((profile, f));
                f
            }
        }
    }

    /// A turn begins, its prompt sent at `sent_ms`: a tapped call that began before that is
    /// not the turn's (a title the previous turn started, still streaming).
    pub(super) fn begin_turn(&mut self, tokens: u64, sent_ms: i64) {
        self.turn_started = Some(sent_ms);
        self.account.begin_turn();
        self.account.prompt_tokens(tokens);
        if let Some(f) = &mut self.follow {
            f.begin_turn(now_ms());
        }
    }
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

impl Observer {
    /// The session a `session/update` is about (made if unknown); its traffic during a turn says
    /// its transcript is growing, so a read is asked for, now and then.
    pub(super) fn updated_session(&mut self, id: &str) -> &mut Session {
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
    pub(super) fn poll(&mut self, id: &str) {
        if self.sessions.get_mut(id).and_then(|s| s.follow.as_mut()).is_some_and(Follow::poll_due) {
            self.commands.push(Command::Poll(id.to_string()));
        }
    }

    /// Ids (as the editor wrote them) of editor requests the agent has not answered yet.
    pub fn pending_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.pending.values().map(|p| p.raw_id.clone()).collect();
        ids.sort();
        ids
    }

    /// A session being reopened: the one this run knows, else what an earlier run carried, else a
    /// restored account whose history is unknown.
    pub(super) fn reopened(&mut self, id: &str) -> &mut Session {
        let carried = match self.sessions.contains_key(id) {
            true => None,
            false => self.carried(id).map(|e| e.to_carried()),
        };
        if carried.is_some() {
            self.remembered_roles(id);
        }
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
    pub(super) fn forked_session(&mut self, parent: Option<&str>, id: &str) -> &mut Session {
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

    pub(super) fn session(&mut self, id: &str, make: fn() -> Account) -> &mut Session {
        self.sessions.entry(id.to_string()).or_insert_with(|| Session::new(make()))
    }

    pub(super) fn family(&mut self, id: &str) -> Family {
        let profile = self.profile;
        match self.sessions.get_mut(id) {
            Some(s) => s.family(profile),
            None => family_of(profile, None),
        }
    }
}
