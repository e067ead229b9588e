//! What finding the installed agents reports (a program, where it was found, the registry
//! entry it came from, notes) and the file-system helpers the finders share. `installed.rs`
//! and `zed_registry.rs` both build on it; it names neither, so they do not name each other
//! back.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Launch, Profile};

/// A way to read an environment variable (the process's, or a test's).
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// Where a program was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A directory of `PATH`: the editor can start it by name.
    Path,
    /// npm's global prefix (`npm install -g`).
    NpmGlobal,
    /// The directory pipx and `uv tool` install entry points into.
    PythonTools,
    /// A directory an editor installs registry agents into; the editor's name.
    Editor(String),
    /// An entry of the editor's settings that names an ACP registry agent, started the way
    /// the registry's index says; the editor's name.
    EditorRegistry(String),
}

impl Place {
    /// How a person would say where it is.
    pub fn describe(&self) -> String {
        match self {
            Place::Path => "on PATH".to_owned(),
            Place::NpmGlobal => "in npm's global prefix".to_owned(),
            Place::PythonTools => "in ~/.local/bin (pipx, uv tool)".to_owned(),
            Place::Editor(editor) => format!("installed by {editor}"),
            Place::EditorRegistry(editor) => format!("added in {editor} from the ACP registry"),
        }
    }
}

/// An agent found on this machine.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its profile.
    pub profile: Profile,
    /// The way it is started.
    pub launch: &'static Launch,
    /// The executable found; for a registry agent with no program file of its own (npx, uvx),
    /// the editor's settings file that names it.
    pub path: PathBuf,
    /// Where it was found.
    pub place: Place,
    /// How the editor starts it, when it was added from the ACP registry.
    pub registry: Option<Registered>,
    /// Variables the editor's own entry for this agent sets (a Zed registry entry's `env`, an
    /// API key say), kept when an installed program is started instead of that entry.
    pub editor_env: BTreeMap<String, String>,
}

/// An agent an editor added from the ACP registry, as the registry's index starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// Its id in the registry (the key of the editor's entry).
    pub id: String,
    /// How the index distributes it.
    pub distribution: Distribution,
    /// The whole command.
    pub argv: Vec<String>,
    /// What the editor adds to its environment: the index's variables, then the entry's own.
    pub env: BTreeMap<String, String>,
}

/// How the ACP registry distributes an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// An npm package, run by `npx`.
    Npx,
    /// An archive per platform, which the editor extracts.
    Binary,
    /// A PyPI package, run by `uvx`.
    Uvx,
}

impl Distribution {
    /// The index's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Npx => "npx",
            Distribution::Binary => "binary",
            Distribution::Uvx => "uvx",
        }
    }
}

/// A registry agent the search could not turn into a command, or a file it could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The agent's profile, when it has one.
    pub profile: Option<Profile>,
    /// The registry id it is about; `None` when it is about a file as a whole.
    pub id: Option<String>,
    /// What and why, for a person.
    pub message: String,
    /// The file it is about.
    pub path: Option<PathBuf>,
}

/// The agents found, and what could not be made into one.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// In the order of the profiles, each one's programs (`PATH` first) before its registry
    /// entries.
    pub found: Vec<Found>,
    /// Registry entries that could not be started from here, and files that could not be
    /// read.
    pub notes: Vec<Note>,
}

impl Found {
    /// The command that starts it as an ACP server: the registry's command for an agent an
    /// editor added from there; else the bare program name when it is on `PATH` (so an
    /// upgrade that moves it keeps working), else the full path.
    pub fn command(&self) -> Vec<String> {
        if let Some(registered) = &self.registry {
            return registered.argv.clone();
        }
        let program = match self.place {
            Place::Path => self.launch.program.to_owned(),
            _ => self.path.display().to_string(),
        };
        std::iter::once(program).chain(self.launch.args.iter().map(|a| (*a).to_owned())).collect()
    }

    /// The variables the editor sets for it beyond its own environment (a registry entry's
    /// `env`): an entry that runs it through acp-usage must set them too.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut env = self.editor_env.clone();
        if let Some(r) = &self.registry {
            env.extend(r.env.clone());
        }
        env
    }
}

/// A variable that names a directory: set, and absolute (a relative one is ignored, as the
/// XDG base directory specification says of its variables).
pub(crate) fn dir_var(vars: Vars, name: &str) -> Option<PathBuf> {
    vars(name).filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// The home directory (`USERPROFILE` on Windows when `HOME` is not set).
pub(crate) fn home(vars: Vars) -> Option<PathBuf> {
    dir_var(vars, "HOME")
        .or_else(|| if cfg!(windows) { dir_var(vars, "USERPROFILE") } else { None })
}

/// The first executable `program` in the directories of `path` that `dirs` keeps.
pub(crate) fn on_path(
    path: &std::ffi::OsStr,
    program: &str,
    dirs: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    std::env::split_paths(path).filter(|d| dirs(d)).find_map(|d| executable_in(&d, program))
}

/// `dir/program` (or its Windows shims) when it is an executable file.
pub(crate) fn executable_in(dir: &Path, program: &str) -> Option<PathBuf> {
    let names: &[String] = if cfg!(windows) {
        &[format!("{program}.exe"), format!("{program}.cmd"), program.to_owned()]
    } else {
        &[program.to_owned()]
    };
    names.iter().map(|n| dir.join(n)).find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}
