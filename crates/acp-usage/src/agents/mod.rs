//! Everything acp-usage knows about each agent, one file per agent, and [`ALL`], the one list.
//!
//! An agent's file says how it is recognised (`initialize`'s `agentInfo.name`, its command
//! line), how its ACP numbers are read (its `usage_update`s, its prompt results, per-call
//! reports), its model aliases and window rules, the side calls it makes and how to tell them,
//! how the tap is pointed at it, and where its transcripts are and which of the core's parsers
//! reads them (the relay follows them, `import` walks them). The relay, the tap, the transcript
//! worker and `import` ask the [`Profile`] of the agent at hand; none of them names an agent.
//! The CLI's `--profile` and `import --agent` choices come from [`ALL`].
//!
//! Adding an agent is its file, its `mod` line and one line in [`ALL`], and (for a new
//! transcript format) its parser in the core.

pub mod acp;
pub mod command;

use acp_usage_core::TokenRecord;
use acp_usage_core::account::{Account, Role};
use acp_usage_core::estimate::Family;
use serde_json::Value;

pub use acp::{AgentUpdate, CostView, UpdateMeta};

mod found;
pub mod installed;
pub mod table;
/// acp-usage as codex-acp's Codex app server (see `codex::app_server`).
pub(crate) use codex::app_server as codex_app_server;
pub mod zed_registry;

use crate::sources::tap::point::{Env, Pointing};
use crate::sources::transcripts::Format;

// Each agent's file. Declared here rather than by the list's macro, so that `cargo fmt` sees
// them (it does not follow modules a macro declares).
mod auggie;
mod claude;
mod cline;
mod codex;
mod copilot;
mod droid;
mod gemini;
mod generic;
mod kilo;
mod opencode;
mod pi;
mod qoder;
mod qwen;
mod vibe;

/// Builds [`ALL`] from one list of `module::Agent` entries.
macro_rules! agents {
    ($($module:ident :: $agent:ident,)*) => {
        /// Every agent acp-usage has a profile for, in the order `import` reads them and
        /// detection tries them; the generic profile, for any other agent, is last.
        pub static ALL: &[&dyn Agent] = &[$(&$module::$agent),*];
    };
}

// The one list: adding an agent is one line here, its `mod` line above, and its file.
agents! {
    claude::Claude,
    codex::Codex,
    gemini::Gemini,
    opencode::Opencode,
    qwen::Qwen,
    copilot::Copilot,
    cline::Cline,
    kilo::Kilo,
    vibe::Vibe,
    pi::Pi,
    droid::Droid,
    auggie::Auggie,
    qoder::Qoder,
    generic::Generic,
}

/// What acp-usage knows about one agent. Every method but [`Agent::name`] and
/// [`Agent::recognises`] has the generic reading as its default.
pub trait Agent: Sync + 'static {
    /// The profile's name in logs, `_meta`, the ledger and the CLI's choices.
    fn name(&self) -> &'static str;

    /// What `--profile` and `import --agent` say of it.
    fn about(&self) -> &'static str;

    /// Whether `initialize`'s `agentInfo.name`, or a word of the command line (a program's
    /// file name, a path segment), lowercased, names this agent.
    fn recognises(&self, word: &str) -> bool;

    /// The share of a catalog window the agent lets the model use.
    fn window_percent(&self) -> u64 {
        100
    }

    /// The tokenizer family to estimate with when the model is unknown.
    fn default_family(&self) -> Family {
        Family::Other
    }

    /// Maps a selected model option value to a catalog id and the window the agent's alias
    /// rules give it.
    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        (Some(acp::split_bracket(value).0.to_string()), None)
    }

    /// Like [`Agent::resolve_model`], with the model option the value was selected from (its
    /// `options` with their names and descriptions), which can name the concrete model behind
    /// an alias.
    fn resolve_option(&self, value: &str, option: &Value) -> (Option<String>, Option<u64>) {
        let _ = option;
        self.resolve_model(value)
    }

    /// The model option value the agent runs a reopened session on when its `session/load` or
    /// `session/resume` response names none (Mistral Vibe's `session/resume` answers `{}`).
    fn reopened_model(&self) -> Option<String> {
        None
    }

    /// The windows the agent reports per model in a `session/new`/`load`/`resume` result, when
    /// its profile knows where, by model option value.
    fn reported_windows(&self, result: &Value) -> Vec<(String, u64)> {
        let _ = result;
        Vec::new()
    }

    /// A model call the agent reports inside an `agent_message_chunk`, with who made it.
    /// `params` is the notification's raw `params`.
    fn call_in_chunk(&self, params: &str) -> Option<(TokenRecord, Role)> {
        let _ = params;
        None
    }

    /// Side calls the agent is known to make that no source acp-usage reads records (without
    /// the tap): the cost leaves them out, and `_meta` says so. `agent_name` is `agentInfo.name`.
    fn unrecorded_side_calls(&self, agent_name: Option<&str>) -> &'static [&'static str] {
        let _ = agent_name;
        &[]
    }

    /// Text that a side call's request body always carries, for side calls the agent makes
    /// while declaring its main tools (to share the prompt cache).
    fn side_call_markers(&self) -> &'static [&'static str] {
        &[]
    }

    /// Reads the agent's own `usage_update` into the account.
    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        acp::plain_usage_update(account, update, false);
    }

    /// Reads the agent's per-turn report from a `session/prompt` result.
    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        if !acp::prompt_usage(account, result) {
            acp::quota(account, result);
        }
    }

    /// The prompt tokens the agent says its main agent sent in the turn, when it says (gemini-cli's
    /// `_meta.quota`): a transcript that shows fewer is not complete yet.
    fn reported_turn_input(&self, result: &Value) -> Option<u64> {
        result.pointer("/_meta/quota/token_count/input_tokens").and_then(Value::as_u64)
    }

    /// Whether a prompt starting with `first_word` makes the agent start a new transcript for
    /// the same ACP session (Claude Code's `/clear`).
    fn restarts_transcript(&self, first_word: &str) -> bool {
        let _ = first_word;
        false
    }

    /// Points the agent's calls at the tap (see `sources::tap::point`); nothing when the
    /// profile does not know the agent's settings.
    fn point(&self, p: &mut Pointing, env: &Env) {
        let _ = (p, env);
    }

    /// Points at the tap what the agent's command line decides (`command`: the whole of it),
    /// after [`Agent::point`]: the program an adapter runs underneath, found from the adapter's
    /// own files (codex-acp's Codex app server). Nothing by default.
    fn point_command(&self, p: &mut Pointing, command: &[String], env: &Env) {
        let _ = (p, command, env);
    }

    /// What of the agent's calls the tap cannot see however it is pointed, for `doctor`: a
    /// login whose endpoint is fixed in the agent, a base URL only the agent's own files hold.
    /// (A setting of the user's that sends calls past the pointed variables is a warning of
    /// [`Agent::point`].)
    fn untapped(&self, env: &Env) -> Vec<Untapped> {
        let _ = env;
        Vec::new()
    }

    /// Request headers that carry the agent's session id, lowercase.
    fn session_headers(&self) -> &'static [&'static str] {
        &[]
    }

    /// The transcripts the relay follows for a session of this agent.
    fn transcripts(&self) -> Option<&'static Format> {
        None
    }

    /// The records `import` reads (by default the ones the relay follows).
    fn import_format(&self) -> Option<&'static Format> {
        self.transcripts()
    }

    /// How the agent is started as an ACP server, for `setup` and `doctor` to find it: one
    /// entry per program that serves it (an agent may have had more than one adapter).
    fn launches(&self) -> &'static [Launch] {
        &[]
    }

    /// The subscription the agent's own login draws on, for an agent with one login of its
    /// own (Claude Code, Codex, Gemini CLI); none for agents that sign in anywhere.
    fn plan(&self) -> Option<Plan> {
        None
    }

    /// The credentials of the plan's login the agent will find at start (its variables, its
    /// credential files), which tell whose windows to show before a response does
    /// ([`crate::accounts`]). None by default.
    fn credentials(&self, env: &Env) -> Vec<crate::accounts::Credential> {
        let _ = env;
        Vec::new()
    }
}

/// The subscription an agent's own login draws on, as the windows the providers state it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The provider whose windows the agent's sessions fill (`Limit::provider`: `anthropic`).
    pub provider: &'static str,
    /// What people call those windows by (`Claude`'s 5-hour limit).
    pub word: &'static str,
    /// The id of the window family the provider states for the agent itself (Codex's
    /// `codex`): the one a report leaves unsaid, as the family goes without saying.
    pub own_family: Option<&'static str>,
}

impl Plan {
    /// The plan whose windows `provider` states, when an agent's login draws on it.
    pub fn of_provider(provider: &str) -> Option<Plan> {
        ALL.iter().filter_map(|a| a.plan()).find(|p| p.provider == provider)
    }

    /// Whether `limit_id` is the family an agent's own plan is stated under.
    pub fn is_own_family(limit_id: &str) -> bool {
        ALL.iter().filter_map(|a| a.plan()).any(|p| p.own_family == Some(limit_id))
    }
}

/// Calls of an agent that the tap cannot see (see [`Agent::untapped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untapped {
    /// Which calls, and why the tap cannot see them.
    pub why: String,
    /// Whether the agent's own records (its transcripts, its ACP reports) still count each of
    /// them exactly.
    pub recorded: bool,
}

/// One way an agent is started as an ACP server: the program, its arguments, and where it is
/// installed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// What the editor's entry is called ("Claude Agent" becomes "Claude Agent (metered)").
    pub title: &'static str,
    /// The program, as installed on PATH (npm's `bin`, a Python entry point).
    pub program: &'static str,
    /// The arguments that make it speak ACP on stdio.
    pub args: &'static [&'static str],
    /// Where it is installed from.
    pub package: Package,
    /// Its id in the ACP registry, when it is listed there.
    pub registry_id: Option<&'static str>,
}

/// The package an agent's program comes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Package {
    /// An npm package (its `bin` has the program).
    Npm(&'static str),
    /// A PyPI package (an entry point of a pipx / uv tool install).
    PyPi(&'static str),
}

impl Package {
    /// The package's name.
    pub fn name(self) -> &'static str {
        match self {
            Package::Npm(name) | Package::PyPi(name) => name,
        }
    }
}

/// The agent at hand: a handle on its entry in [`ALL`].
#[derive(Clone, Copy)]
pub struct Profile(&'static dyn Agent);

impl std::ops::Deref for Profile {
    type Target = dyn Agent;

    fn deref(&self) -> &(dyn Agent + 'static) {
        self.0
    }
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

impl PartialEq for Profile {
    fn eq(&self, other: &Profile) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Profile {}

impl std::hash::Hash for Profile {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name().hash(state);
    }
}

impl PartialOrd for Profile {
    fn partial_cmp(&self, other: &Profile) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Profile {
    /// In the order of [`ALL`].
    fn cmp(&self, other: &Profile) -> std::cmp::Ordering {
        self.index().cmp(&other.index())
    }
}

impl Profile {
    /// Every profile, in the order of [`ALL`].
    pub fn all() -> impl Iterator<Item = Profile> {
        ALL.iter().map(|a| Profile(*a))
    }

    /// The profile of that name.
    pub fn named(name: &str) -> Option<Profile> {
        Profile::all().find(|p| p.name() == name)
    }

    /// The profile of any agent acp-usage does not know.
    pub fn generic() -> Profile {
        Profile(&generic::Generic)
    }

    /// Whether this is the generic profile.
    pub fn is_generic(self) -> bool {
        self == Profile::generic()
    }

    fn index(self) -> usize {
        ALL.iter().position(|a| a.name() == self.name()).unwrap_or(usize::MAX)
    }

    /// Recognises the agent from `initialize`'s `agentInfo.name`, else from its command line
    /// (see [`Profile::detect_before_start`]).
    pub fn detect(agent_name: Option<&str>, command: &[String]) -> Profile {
        agent_name
            .and_then(Profile::by_name)
            .unwrap_or_else(|| Profile::detect_before_start(command))
    }

    /// The profile `initialize`'s `agentInfo.name` names, if any.
    pub fn by_name(agent_name: &str) -> Option<Profile> {
        let word = agent_name.to_ascii_lowercase();
        Profile::specific().find(|p| p.recognises(&word))
    }

    /// The profile the command line names before the agent has said its name (the tap must
    /// point the agent before it starts), read as its launchers read it (see [`command`]).
    pub fn detect_before_start(command: &[String]) -> Profile {
        Profile::detect_launch(command, &|_| None)
    }

    /// [`Profile::detect_before_start`], with `real_path` saying what a path in the command
    /// resolves to (a symlink to the agent's program), when it is another file.
    pub fn detect_launch(command: &[String], real_path: command::RealPath) -> Profile {
        command::names(command, real_path)
            .iter()
            .find_map(Profile::named_by)
            .unwrap_or_else(Profile::generic)
    }

    /// The profile one command's names name: a Zed registry id, a package or a program a
    /// profile launches, exactly; else a program, then a package's whole name (`@factory/cli`,
    /// a second package of Droid's), then its name without its scope, that a profile recognises.
    fn named_by(names: &command::Names) -> Option<Profile> {
        let launching = |is: &dyn Fn(&Launch) -> bool| {
            Profile::specific().find(|p| p.launches().iter().any(is))
        };
        let recognising = |word: &str| Profile::specific().find(|p| p.recognises(word));
        let bare = |package: &str| package.rsplit('/').next().unwrap_or(package).to_owned();
        (names.registry_ids.iter())
            .find_map(|id| launching(&|l| l.registry_id == Some(id.as_str())))
            .or_else(|| names.packages.iter().find_map(|n| launching(&|l| l.package.name() == n)))
            .or_else(|| names.programs.iter().find_map(|n| launching(&|l| l.program == n)))
            .or_else(|| names.programs.iter().find_map(|n| recognising(n)))
            .or_else(|| names.packages.iter().find_map(|n| recognising(n)))
            .or_else(|| names.packages.iter().find_map(|n| recognising(&bare(n))))
    }

    /// Every profile but the generic one.
    fn specific() -> impl Iterator<Item = Profile> {
        Profile::all().filter(|p| !p.is_generic())
    }

    /// Whether a request body is one of the side calls the agent makes for itself while
    /// declaring its main tools, by the text it always carries.
    pub fn is_side_call(self, body: &[u8]) -> bool {
        self.side_call_markers().iter().any(|m| memchr::memmem::find(body, m.as_bytes()).is_some())
    }
}

/// An agent's settings file, read the way the agents read theirs: JSON that may carry comments
/// and trailing commas (Gemini CLI and qwen-code strip comments before parsing; a strict reader
/// would miss every setting in a commented file).
pub(crate) fn settings_json(text: &str) -> Option<Value> {
    jsonc_parser::parse_to_serde_value(text, &Default::default()).ok()
}

/// Where the agent's calls would go, and how to send them to the tap instead. `env` reads the
/// environment acp-usage was started with (the agent inherits it), `read_file` a file.
pub fn point(
    profile: Profile,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) -> Pointing {
    point_command(profile, &[], env, read_file)
}

/// [`point`] for the agent started by `command` (its program and arguments), which can decide
/// more of it ([`Agent::point_command`]).
pub fn point_command(
    profile: Profile,
    command: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) -> Pointing {
    let env = Env { var: env, read_file };
    let mut p = Pointing::default();
    profile.point(&mut p, &env);
    profile.point_command(&mut p, command, &env);
    p.session_headers = profile.session_headers().iter().map(|h| (*h).to_owned()).collect();
    p.finish_common(&env);
    p
}

#[cfg(test)]
mod tests;
