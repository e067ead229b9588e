//! What setup knows of each editor: where its agent settings are, how an entry is written, where
//! it installs agents, and the command its entries start acp-usage with.
//!
//! Zed (checked against Zed's source, `crates/settings_content/src/agent.rs` and
//! `crates/paths/src/paths.rs` of its 2026 releases): `agent_servers` in `settings.json` maps an
//! entry's name to `{"type": "custom", "command", "args", "env"}` (the `type` tag is required
//! since the registry-agent work; `args` and `env` default to empty). Zed reads the file as JSON
//! with comments and trailing commas, and starts a custom entry with the environment of a login
//! shell, so a bare program name on the user's `PATH` works. JetBrains' AI Assistant reads
//! `~/.jetbrains/acp.json`, `{"agent_servers": {"<name>": {"command", "args", "env"}}}` with no
//! `type`; its documentation asks for absolute paths, as the IDE may not see the shell's `PATH`,
//! so setup writes absolute paths there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::edit::{Dialect, Wanted};
pub use crate::agents::installed::Vars as Env;
use crate::agents::installed::{self, Found, home};
use crate::agents::zed_registry;

/// An editor `setup` writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Editor {
    /// Zed's `settings.json`.
    Zed,
    /// JetBrains IDEs' `acp.json` (AI Assistant, Air).
    JetBrains,
}

impl Editor {
    /// Its name for people.
    pub fn name(self) -> &'static str {
        match self {
            Editor::Zed => "Zed",
            Editor::JetBrains => "JetBrains",
        }
    }

    /// How its file is written.
    pub fn dialect(self) -> Dialect {
        match self {
            Editor::Zed => Dialect { entry_type: Some("custom"), trailing_commas: true },
            // Whether acp.json may hold comments or trailing commas is not documented: setup
            // reads them but writes strict JSON.
            Editor::JetBrains => Dialect { entry_type: None, trailing_commas: false },
        }
    }

    /// Its agent settings file.
    pub fn settings_file(self, env: Env) -> Option<PathBuf> {
        match self {
            Editor::Zed => zed_registry::settings_file(env),
            Editor::JetBrains => Some(home(env)?.join(".jetbrains").join("acp.json")),
        }
    }

    /// The directories it installs agents into (searched for the agents' programs).
    pub fn agent_dirs(self, env: Env) -> Vec<(String, PathBuf)> {
        match self {
            // Registry agents that ship a binary, and the agents older releases installed.
            // npx agents run from npm's cache, which is no place to point an entry at.
            Editor::Zed => zed_registry::data_dir(env)
                .map(|d| vec![(self.name().to_owned(), d.join("external_agents"))])
                .unwrap_or_default(),
            // Where the IDEs keep the registry agents they install is not documented.
            Editor::JetBrains => Vec::new(),
        }
    }

    /// Its record of the agents added from the ACP registry, when it keeps one: Zed's settings
    /// (`settings`, the file setup edits) and its copy of the registry's index. JetBrains keeps
    /// its registry agents out of `acp.json`, and where it does keep them is not documented.
    pub fn registry_files(self, env: Env, settings: &Path) -> Option<zed_registry::Files> {
        match self {
            Editor::Zed => Some(zed_registry::Files {
                settings: settings.to_path_buf(),
                data: zed_registry::data_dir(env)?,
            }),
            Editor::JetBrains => None,
        }
    }

    /// The entry for `found`, started through `launcher`.
    pub fn wanted(self, found: &Found, launcher: &Launcher) -> Wanted {
        let mut agent = found.command();
        if self == Editor::JetBrains && found.registry.is_none() {
            agent[0] = found.path.display().to_string();
        }
        let mut args = launcher.args.clone();
        args.push("--".to_owned());
        args.extend(agent);
        Wanted {
            key: entry_key(found.launch.title),
            command: launcher.command.clone(),
            args,
            env: found.env(),
            program: found.launch.program.to_owned(),
        }
    }
}

/// An entry's name: the agent's, marked as going through acp-usage.
pub fn entry_key(title: &str) -> String {
    format!("{title} (metered)")
}

/// How an entry starts acp-usage: its command and the arguments before `--`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// `acp-usage` (or its absolute path), or `npx`.
    pub command: String,
    /// Nothing, or npx's `-y acp-usage@<version>`.
    pub args: Vec<String>,
}

impl Launcher {
    /// acp-usage as installed on `path` (by name for Zed, by absolute path for JetBrains),
    /// else through npx, pinned to this version. A directory of npm's cache or of a project's
    /// `node_modules/.bin` does not count: `npx acp-usage` puts one on the `PATH` it runs with,
    /// and an entry must not point into a cache npm may clear.
    pub fn find(editor: Editor, path: Option<&OsStr>) -> Launcher {
        let installed = find_program(path, "acp-usage");
        let npx = || Launcher {
            command: match editor {
                Editor::Zed => "npx".to_owned(),
                Editor::JetBrains => find_program(path, "npx")
                    .map_or_else(|| "npx".to_owned(), |p| p.display().to_string()),
            },
            args: vec!["-y".to_owned(), format!("acp-usage@{}", env!("CARGO_PKG_VERSION"))],
        };
        match (installed, editor) {
            (Some(_), Editor::Zed) => Launcher { command: "acp-usage".to_owned(), args: vec![] },
            (Some(p), Editor::JetBrains) => {
                Launcher { command: p.display().to_string(), args: vec![] }
            }
            (None, _) => npx(),
        }
    }
}

/// `program` in the directories of `path` that are not npm's.
fn find_program(path: Option<&OsStr>, program: &str) -> Option<PathBuf> {
    installed::on_path(path?, program, |d| d.is_absolute() && !is_npm_scratch(d))
}

/// npx's cache (`.../_npx/<hash>/node_modules/.bin`) or a project's `node_modules/.bin`.
fn is_npm_scratch(dir: &Path) -> bool {
    let names: Vec<&OsStr> = dir.iter().collect();
    names.contains(&OsStr::new("_npx"))
        || names.windows(2).any(|w| w[0] == "node_modules" && w[1] == ".bin")
}

#[cfg(all(test, unix))]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::agents::Profile;
    use crate::agents::installed::Place;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn settings_files() {
        let env = env_of(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/cfg")]);
        let zed = Editor::Zed.settings_file(&env).unwrap();
        if cfg!(target_os = "macos") {
            assert_eq!(zed, Path::new("/home/u/.config/zed/settings.json"));
        } else {
            assert_eq!(zed, Path::new("/cfg/zed/settings.json"));
        }
        let env = env_of(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "relative")]);
        let jetbrains = Editor::JetBrains.settings_file(&env).unwrap();
        assert_eq!(jetbrains, Path::new("/home/u/.jetbrains/acp.json"));
        if !cfg!(target_os = "macos") {
            // A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
            let zed = Editor::Zed.settings_file(&env).unwrap();
            assert_eq!(zed, Path::new("/home/u/.config/zed/settings.json"));
        }
        assert_eq!(Editor::JetBrains.settings_file(&env_of(&[])), None);
    }

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch("editors", name)
    }

    use crate::test_support::executable as exe;

    #[test]
    fn launcher_skips_npx_cache_and_falls_back_to_npx() {
        let root = scratch("launcher");
        let cache = root.join("npm-cache/_npx/1a2b/node_modules/.bin");
        exe(&cache.join("acp-usage"));
        let bin = root.join("bin");
        exe(&bin.join("npx"));
        let path = std::env::join_paths([&cache, &bin]).unwrap();
        let version = format!("acp-usage@{}", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            Launcher::find(Editor::Zed, Some(&path)),
            Launcher { command: "npx".into(), args: vec!["-y".into(), version.clone()] }
        );
        assert_eq!(
            Launcher::find(Editor::JetBrains, Some(&path)).command,
            bin.join("npx").display().to_string()
        );
        exe(&bin.join("acp-usage"));
        assert_eq!(
            Launcher::find(Editor::Zed, Some(&path)),
            Launcher { command: "acp-usage".into(), args: vec![] }
        );
        assert_eq!(
            Launcher::find(Editor::JetBrains, Some(&path)).command,
            bin.join("acp-usage").display().to_string()
        );
    }

    #[test]
    fn entries_run_the_agent_after_dashes() {
        let opencode = Profile::named("opencode").unwrap();
        let found = Found {
            profile: opencode,
            launch: &opencode.launches()[0],
            path: PathBuf::from("/usr/local/bin/opencode"),
            place: Place::Path,
            registry: None,
            editor_env: Default::default(),
        };
        let launcher = Launcher { command: "acp-usage".into(), args: vec![] };
        let zed = Editor::Zed.wanted(&found, &launcher);
        assert_eq!(zed.key, "OpenCode (metered)");
        assert_eq!(zed.args, ["--", "opencode", "acp"]);
        let jetbrains = Editor::JetBrains.wanted(&found, &launcher);
        assert_eq!(jetbrains.args, ["--", "/usr/local/bin/opencode", "acp"]);
        assert_eq!(jetbrains.program, "opencode");
        assert!(zed.env.is_empty());
    }

    #[test]
    fn a_registry_entry_runs_its_command_with_its_env() {
        let found = crate::test_support::claude_from_zed_registry(
            PathBuf::from("/home/u/.config/zed/settings.json"),
            &[("DISABLE_AUTOUPDATER", "1")],
        );
        let env = found.registry.as_ref().unwrap().env.clone();
        let launcher = Launcher { command: "acp-usage".into(), args: vec![] };
        let zed = Editor::Zed.wanted(&found, &launcher);
        assert_eq!(zed.key, "Claude Agent (metered)");
        assert_eq!(zed.args, ["--", "npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"]);
        assert_eq!(zed.env, env);
        // The settings file is where it was found, not a program to run.
        let jetbrains = Editor::JetBrains.wanted(&found, &launcher);
        assert_eq!(jetbrains.args[1], "npx");
    }
}
