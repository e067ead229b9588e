//! Finding the agents installed on this machine, for `setup` and `doctor`.
//!
//! Each profile names the programs that serve its agent ([`Launch`]); this module looks for
//! them where people and editors put them: the directories of `PATH`, npm's global prefix
//! (which is often not on the PATH an editor started from the desktop sees), the directory
//! pipx and `uv tool` install Python entry points into, and the places editors install
//! registry agents into (given by the caller). Agents added in Zed from the ACP registry that
//! leave no program to find (npx ones run out of npm's cache) come from Zed's own records of
//! them ([`zed_registry`](super::zed_registry)). It only reads the file system: it never runs
//! an agent, npm or a shell, so it is quick and safe to run anywhere.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use super::found::{Distribution, Findings, Found, Note, Place, Registered, Vars};
pub(crate) use super::found::{executable_in, home, on_path};
use super::zed_registry;
use super::{Launch, Package, Profile};

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// The `PATH` to search.
    pub path: Option<OsString>,
    /// The home directory (for `~/.local/bin` and `~/.npmrc`).
    pub home: Option<PathBuf>,
    /// npm's global prefix, when known (`NPM_CONFIG_PREFIX`, `~/.npmrc`'s `prefix`, else the
    /// directory above the `node` on `PATH`).
    pub npm_prefix: Option<PathBuf>,
    /// Directories an editor installs agents into, searched recursively (a few levels) for
    /// the agents' programs: the editor's name and the directory.
    pub editor_dirs: Vec<(String, PathBuf)>,
    /// Zed's settings and data directory, for the agents added in it from the ACP registry.
    pub zed: Option<zed_registry::Files>,
}

impl Search {
    /// The places of this process's environment.
    pub fn from_env() -> Search {
        let vars = |name: &str| std::env::var_os(name);
        let var = |name: &str| vars(name).filter(|v| !v.is_empty());
        let home = var("HOME").map(PathBuf::from);
        let path = var("PATH");
        let npm_prefix = var("NPM_CONFIG_PREFIX")
            .or_else(|| var("npm_config_prefix"))
            .map(PathBuf::from)
            .or_else(|| home.as_deref().and_then(npmrc_prefix))
            .or_else(|| node_prefix(path.as_deref()));
        // Zed's `external_agents` holds agents as programs: the registry's binary archives
        // under `registry/<id>/v_<version>_…/`, and its older built-in agents' npm installs
        // under `<name>/<version>/node_modules/.bin`. JetBrains does not say where it keeps
        // its own.
        let editor_dirs = zed_registry::data_dir(&vars)
            .map(|d| ("Zed".to_owned(), d.join("external_agents")))
            .into_iter()
            .collect();
        Search { path, home, npm_prefix, editor_dirs, zed: zed_registry::Files::locate(&vars) }
    }
}

/// The `prefix` set in `~/.npmrc`.
fn npmrc_prefix(home: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(home.join(".npmrc")).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        if key.trim() != "prefix" {
            return None;
        }
        let value = value.trim();
        Some(match value.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(value),
        })
    })
}

/// npm's default global prefix: the directory above the `bin` holding `node`.
fn node_prefix(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let node = on_path(path?, "node", |_| true)?;
    let node = std::fs::canonicalize(&node).unwrap_or(node);
    Some(node.parent()?.parent()?.to_path_buf())
}

/// Every installed program of every profile, in the order of the profiles, then of the places
/// (`PATH` first), then the profile's agents added in Zed from the registry. The same file
/// reached twice (a `PATH` entry that is npm's prefix) is listed once, under the first place;
/// a binary Zed extracted for a registry entry is listed once, as that entry.
pub fn find(search: &Search) -> Findings {
    let mut dirs: Vec<(Place, PathBuf)> = Vec::new();
    if let Some(path) = &search.path {
        dirs.extend(std::env::split_paths(path).map(|d| (Place::Path, d)));
    }
    if let Some(prefix) = &search.npm_prefix {
        dirs.push((Place::NpmGlobal, prefix.join("bin")));
        // Windows installs npm's shims in the prefix itself.
        dirs.push((Place::NpmGlobal, prefix.clone()));
    }
    if let Some(home) = &search.home {
        dirs.push((Place::PythonTools, home.join(".local").join("bin")));
    }
    for (editor, dir) in &search.editor_dirs {
        for bin in bin_dirs(dir, 4) {
            dirs.push((Place::Editor(editor.clone()), bin));
        }
    }

    let registry = match &search.zed {
        Some(files) => zed_registry::scan(files, search.path.as_deref()),
        None => Findings::default(),
    };
    let mut found: Vec<Found> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for profile in Profile::all() {
        let first = found.len();
        for (place, dir) in &dirs {
            for program in unique_programs(profile) {
                let Some(path) = executable_in(dir, program) else { continue };
                let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if seen.contains(&real) {
                    continue;
                }
                seen.push(real.clone());
                let launch = which_launch(profile, program, &real);
                found.push(Found {
                    profile,
                    launch,
                    path,
                    place: place.clone(),
                    registry: None,
                    editor_env: BTreeMap::new(),
                });
            }
        }
        for entry in registry.found.iter().filter(|f| f.profile == profile) {
            // What the directory scan found in the entry's own directory (`registry/<id>/`) is
            // the binary Zed extracted for it: the entry says how Zed starts it.
            let own_dir = search
                .zed
                .as_ref()
                .zip(entry.registry.as_ref())
                .map(|(files, r)| files.registry_dir().join(&r.id));
            let is_its_binary = |f: &Found| {
                f.profile == profile
                    && f.registry.is_none()
                    && matches!(f.place, Place::Editor(_))
                    && own_dir.as_ref().is_some_and(|d| f.path.starts_with(d))
            };
            match found[first..].iter().position(is_its_binary) {
                Some(i) => {
                    found[first + i] = entry.clone();
                    found.retain(|f| !is_its_binary(f));
                }
                None => found.push(entry.clone()),
            }
        }
    }
    Findings { found, notes: registry.notes }
}

/// The first program found for each agent (by profile and entry title): what `setup` adds.
pub fn one_per_agent(found: &[Found]) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for f in found {
        match out.iter_mut().find(|o| o.profile == f.profile && o.launch.title == f.launch.title) {
            // The editor's entry for an agent whose program wins: what it sets still applies.
            Some(kept) if kept.registry.is_none() && kept.editor_env.is_empty() => {
                kept.editor_env = f.env();
            }
            Some(_) => {}
            None => out.push(f.clone()),
        }
    }
    out
}

/// The profile's program names, each once.
fn unique_programs(profile: Profile) -> Vec<&'static str> {
    let mut programs: Vec<&'static str> = Vec::new();
    for l in profile.launches() {
        if !programs.contains(&l.program) {
            programs.push(l.program);
        }
    }
    programs
}

/// Of the launches that share a program name, the one whose package the file belongs to
/// (npm's `bin` links point into `node_modules/<package>/`), else the first.
fn which_launch(profile: Profile, program: &str, real: &Path) -> &'static Launch {
    let candidates: Vec<&'static Launch> =
        profile.launches().iter().filter(|l| l.program == program).collect();
    let text = real.to_string_lossy();
    candidates
        .iter()
        .find(|l| match l.package {
            Package::Npm(name) => text.contains(&format!("node_modules/{name}/")),
            Package::PyPi(_) => false,
        })
        .or(candidates.first())
        .copied()
        .expect("a program comes from one of the profile's launches")
}

/// The `bin` and `node_modules/.bin` directories under `root`, down to `depth` levels (an
/// editor's agent directory is `<agent>/<version>/node_modules/.bin` or `<agent>/<version>/`).
fn bin_dirs(root: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if depth == 0 {
        return out;
    }
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut children: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    // Newest version directory first, so a newer install wins.
    children.sort();
    children.reverse();
    for child in children {
        let name = child.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == "node_modules" {
            let bin = child.join(".bin");
            if bin.is_dir() {
                out.push(bin);
            }
            continue;
        }
        if name.starts_with('.') {
            continue;
        }
        out.extend(bin_dirs(&child, depth - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch("installed", name)
    }

    use crate::test_support::executable as touch_exe;

    #[test]
    fn finds_agents_on_path_in_npm_prefix_python_tools_and_editor_dirs() {
        let root = &scratch("find");
        let on_path = root.join("bin");
        touch_exe(&on_path.join("claude-agent-acp"));
        // Not executable: not an install.
        std::fs::write(on_path.join("gemini"), "").unwrap();
        // npm's prefix: bin links into node_modules/<package>/.
        let prefix = root.join("npm");
        let target = prefix.join("lib/node_modules/@zed-industries/codex-acp/bin/codex-acp.js");
        touch_exe(&target);
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, prefix.join("bin/codex-acp")).unwrap();
        let home = root.join("home");
        touch_exe(&home.join(".local/bin/vibe-acp"));
        let editor = root.join("zed/external_agents");
        touch_exe(&editor.join("pi-acp/0.0.34/node_modules/.bin/pi-acp"));
        touch_exe(&editor.join("pi-acp/0.0.30/node_modules/.bin/pi-acp"));

        let search = Search {
            path: Some(std::env::join_paths([&on_path, &prefix.join("bin")]).unwrap()),
            home: Some(home.clone()),
            npm_prefix: Some(prefix.clone()),
            editor_dirs: vec![("Zed".into(), editor.clone())],
            zed: None,
        };
        let found = find(&search).found;
        let names: Vec<(&str, &str, Place)> =
            found.iter().map(|f| (f.profile.name(), f.launch.program, f.place.clone())).collect();
        assert_eq!(
            names,
            vec![
                ("claude", "claude-agent-acp", Place::Path),
                // The prefix's bin is on PATH too: listed once, as on PATH.
                ("codex", "codex-acp", Place::Path),
                ("vibe", "vibe-acp", Place::PythonTools),
                ("pi", "pi-acp", Place::Editor("Zed".into())),
                ("pi", "pi-acp", Place::Editor("Zed".into())),
            ]
        );
        // The link points into the Zed adapter's package.
        assert_eq!(found[1].launch.package, Package::Npm("@zed-industries/codex-acp"));
        assert_eq!(found[0].command(), vec!["claude-agent-acp".to_string()]);
        let one = one_per_agent(&found);
        assert_eq!(one.len(), 4);
        // The newest version directory comes first.
        assert!(one[3].path.to_string_lossy().contains("0.0.34"), "{:?}", one[3].path);
        assert_eq!(one[3].command()[0], one[3].path.display().to_string());
    }

    #[test]
    fn npm_prefix_from_npmrc() {
        let home = scratch("npmrc");
        std::fs::write(home.join(".npmrc"), "fund=false\nprefix = ~/.npm-global\n").unwrap();
        assert_eq!(npmrc_prefix(&home), Some(home.join(".npm-global")));
    }

    #[test]
    fn every_profiled_agent_has_a_launch() {
        for p in Profile::all().filter(|p| !p.is_generic()) {
            assert!(!p.launches().is_empty(), "{} has no launch", p.name());
            for l in p.launches() {
                assert!(p.recognises(l.program) || p.recognises(l.title), "{} {l:?}", p.name());
            }
        }
    }
}
