//! Reading the agents' own transcripts as they grow: the exact per-call numbers behind a session.
//!
//! ```text
//! relay loop --Command (track, poll, hold, forget)--> worker thread --Update (events, eof)--> relay loop
//!                                        inotify ---^   (tails files, queries opencode's db)
//! ```
//! The relay never touches the files: a worker thread finds each session's transcript (by the
//! agent's environment, which is acp-usage's own since the agent inherits it), tails it from the
//! offset it reached last time, runs the format's parser (`acp_usage_core::transcript`) and sends
//! the events back. It reads when told to (the turn's traffic, a held result), when a watched
//! directory changes, and on a slow tick. A session whose transcript cannot be read (missing,
//! format changed, permission) is reported once as failed: the relay then uses the ACP numbers.

pub mod locate;
pub mod opencode;
pub mod tail;
pub mod worker;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use locate::{Found, Locator};
pub use worker::{Command, Update, UpdateKind, Worker};

use acp_usage_core::transcript::Parser;

/// A transcript format: where an agent keeps its records and how they are read. Each agent's
/// file in `agents/` defines its own as a `static`, so a new format changes nothing here.
pub struct Format {
    /// The format's name in logs (the agent's name).
    pub name: &'static str,
    /// Where the records are for an agent started with an environment (`env` reads it): a
    /// directory for files, the file of a database.
    pub location: LocationFn,
    /// How the records are kept.
    pub store: Store,
    /// Whether the format records the end of a turn (see
    /// [`acp_usage_core::transcript::Event::TurnEnd`]).
    pub marks_turn_end: bool,
}

/// Where a format's records are, given a reader of the agent's environment.
pub type LocationFn = fn(&dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf>;

/// A transcript started beside `main` for the same session: given the main file, the ones known
/// already and since when (Unix ms).
pub type RestartedFn = fn(&Path, &[&Path], i64) -> Option<PathBuf>;

/// How a format keeps its records.
#[derive(Debug, Clone, Copy)]
pub enum Store {
    /// Files, tailed as they grow (or read whole when rewritten whole).
    Files(Files),
    /// An SQLite database with opencode's schema (opencode, and forks of it such as kilo).
    OpencodeDb,
}

/// A format kept in files: how a session's files are found and read.
#[derive(Debug, Clone, Copy)]
pub struct Files {
    /// A fresh parser of the format's lines.
    pub parser: fn() -> Box<dyn Parser>,
    /// Whether each subagent file needs a parser of its own (a Codex rollout does not say which
    /// thread a line belongs to), rather than the session's shared one (formats whose dedup
    /// spans files).
    pub parser_per_file: bool,
    /// Whether the session's file is one document rewritten whole rather than appended lines.
    pub whole_document: bool,
    /// The files of one session, by the ACP session id, under the format's location.
    pub find: fn(&mut Locator, &Path, &str) -> Found,
    /// Every session under the format's location, with its files (what `import` reads): a
    /// subagent's file is attached to its session, never listed as one.
    pub all: fn(&mut Locator, &Path) -> Vec<(String, Found)>,
    /// What a line of a session's main file says of the session besides calls (`import` shows
    /// the project and title); lines are seen before they are parsed.
    pub facts: fn(&mut Facts, &[u8]),
    /// The project and title from files beside the session's (cline's, Gemini CLI's), given the
    /// format's location, the session id and its files.
    pub side_facts: fn(&Path, &str, &Found) -> Facts,
    /// A transcript the agent started beside the session's main one for the same session
    /// (Claude Code after a `/clear`): given the main file, the ones known already and since
    /// when (Unix ms).
    pub restarted: Option<RestartedFn>,
    /// Whether a line may hold a call, for `import`, which reads calls only: a line it says no
    /// to is not parsed (it still goes to `facts`). `None`: every line is parsed. Only for a
    /// format whose calls never depend on the lines around them.
    pub may_hold_call: Option<fn(&[u8]) -> bool>,
}

impl Files {
    /// No facts in the lines.
    pub fn no_facts(_: &mut Facts, _: &[u8]) {}

    /// No side files.
    pub fn no_side_facts(_: &Path, _: &str, _: &Found) -> Facts {
        Facts::default()
    }
}

/// What a session's records say of it besides calls.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Its working directory.
    pub cwd: Option<String>,
    /// Its title, with the rank of the record that gave it (a title the user gave beats one the
    /// agent generated, which beats a summary).
    pub title: Option<(u8, String)>,
}

impl Facts {
    /// Takes `title` unless a title of a higher rank is known (a later one of the same rank
    /// replaces an earlier one).
    pub fn set_title(&mut self, rank: u8, title: Option<String>) {
        if let Some(title) = title
            && self.title.as_ref().is_none_or(|(known, _)| *known <= rank)
        {
            self.title = Some((rank, title));
        }
    }

    /// The title, without its rank.
    pub fn title(self) -> Option<String> {
        self.title.map(|(_, t)| t)
    }
}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

impl Format {
    /// Whether the session's file is one document rewritten whole rather than appended lines.
    pub fn whole_document(&self) -> bool {
        matches!(self.store, Store::Files(Files { whole_document: true, .. }))
    }
}

/// Reads the environment the agents run in (acp-usage's own: the agent inherits it).
type Env = std::sync::Arc<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

/// Where each agent keeps its transcripts: the environment the agent runs in, and locations
/// set outright (tests).
#[derive(Clone, Default)]
pub struct Locations {
    env: Option<Env>,
    fixed: Vec<(&'static str, PathBuf)>,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locations")
            .field("env", &self.env.is_some())
            .field("fixed", &self.fixed)
            .finish()
    }
}

impl Locations {
    /// The locations an agent started with `env` uses.
    pub fn from_env(env: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static) -> Locations {
        Locations { env: Some(std::sync::Arc::new(env)), fixed: Vec::new() }
    }

    /// The locations of this process's environment (the agent inherits it).
    pub fn from_process() -> Locations {
        Locations::from_env(|name| std::env::var_os(name))
    }

    /// These locations with `format`'s set to `path`.
    pub fn with(mut self, format: &'static Format, path: PathBuf) -> Locations {
        self.fixed.push((format.name, path));
        self
    }

    /// Where `format`'s records are.
    pub fn of(&self, format: &Format) -> Option<PathBuf> {
        if let Some((_, path)) = self.fixed.iter().rev().find(|(name, _)| *name == format.name) {
            return Some(path.clone());
        }
        let env = self.env.as_ref()?;
        (format.location)(&|name| env(name))
    }
}

/// `$var`, else `$HOME/<under_home>`: where most agents keep their files.
pub fn var_or_home(
    env: &dyn Fn(&str) -> Option<OsString>,
    var: &str,
    under_home: &str,
) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set(var).or_else(|| set("HOME").map(|h| h.join(under_home)))
}

/// A string at `path` in a JSON line, when it is one and not empty.
pub fn string_at(line: &[u8], path: &[&str]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    let mut at = &v;
    for key in path {
        at = at.get(key)?;
    }
    at.as_str().filter(|s| !s.is_empty()).map(String::from)
}
