//! The Codex codex-acp would run, found from the adapter's own process when it starts its app
//! server: however the adapter was launched (`npx`, `npm exec`, a shell wrapper, Zed's
//! registry), by then its script is on disk and its process names it.
//!
//! The adapter runs `process.execPath` with `require.resolve("@openai/codex/bin/codex.js")`
//! from its script. So: the nearest process above acp-usage that runs a script on Node or Bun
//! (its
//! `/proc/<pid>/cmdline`, relative paths from its `/proc/<pid>/cwd`, symlinks followed as Node
//! follows its main module's) is the adapter, its executable (`/proc/<pid>/exe`) the
//! interpreter, and Codex is looked for the way Node resolves a package: `node_modules` in the
//! script's directory and each one above it, then `NODE_PATH` and Node's global folders. A
//! layout Node resolves otherwise (Yarn's Plug'n'Play, an `exports` map) is left to Node itself
//! (see `super::run`).

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// What the adapter asks Node for.
const CODEX_JS: &str = "@openai/codex/bin/codex.js";

/// How many processes up the adapter may be (it starts its Codex itself: one).
const MAX_HOPS: usize = 4;

/// A process, as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Process {
    /// The program it runs (an interpreter: Node).
    pub exe: PathBuf,
    pub cwd: PathBuf,
    /// Its command line, the program's own name first.
    pub args: Vec<OsString>,
    pub parent: Option<u32>,
}

/// What the processes above acp-usage say about the adapter's Codex.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// The adapter's interpreter and the Codex launcher Node would resolve from its script.
    Codex { node: PathBuf, codex: PathBuf },
    /// The adapter's interpreter and script, from which no `node_modules` holds Codex: Node is
    /// to resolve it.
    Script { node: PathBuf, script: PathBuf },
    /// No process above runs a script acp-usage can read.
    Nothing,
}

/// The adapter's Codex, from the processes above `first` (acp-usage's parent) as `read` shows
/// them; `var` reads the environment the adapter gave its Codex (its own).
pub(super) fn find(
    first: u32,
    read: &dyn Fn(u32) -> Option<Process>,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Found {
    let mut pid = Some(first);
    for _ in 0..MAX_HOPS {
        let Some(process) = pid.and_then(read) else { break };
        // A shell running a script file (a wrapper) is no adapter; the adapter runs on Node
        // (or Bun, `bunx`).
        let scripts = if runs_javascript(&process.exe) { scripts(&process) } else { Vec::new() };
        if let Some(first_script) = scripts.first() {
            let codex = scripts.iter().find_map(|script| {
                resolve(script.parent().unwrap_or(Path::new("/")), &process.exe, var)
            });
            return match codex {
                Some(codex) => Found::Codex { node: process.exe, codex },
                None => Found::Script { node: process.exe, script: first_script.clone() },
            };
        }
        pid = process.parent;
    }
    Found::Nothing
}

/// The files a process's arguments name, as their real paths (Node resolves from its main
/// module's real path): the adapter's own script first, then the others in order (a
/// `--require`d file, a script run from source).
fn scripts(process: &Process) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = process
        .args
        .iter()
        .skip(1)
        .filter(|a| !a.as_encoded_bytes().starts_with(b"-"))
        .map(|a| process.cwd.join(a))
        .filter(|p| p.is_file())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    found.sort_by_key(|script| !in_adapter_package(script));
    found
}

/// Whether `exe` is a JavaScript runtime: Node (`node`, `nodejs`, `node22`) or Bun.
fn runs_javascript(exe: &Path) -> bool {
    exe.file_name()
        .and_then(OsStr::to_str)
        .is_some_and(|name| name.starts_with("node") || name.starts_with("bun"))
}

/// Whether `path` lies in `@agentclientprotocol/codex-acp`.
fn in_adapter_package(path: &Path) -> bool {
    let parts: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    parts.windows(2).any(|w| w[0] == "@agentclientprotocol" && w[1] == "codex-acp")
}

/// `@openai/codex/bin/codex.js` as Node resolves it from a module in `dir` run by `node`: each
/// `node_modules` from `dir` up (none inside a `node_modules` itself), then `NODE_PATH`, then
/// `~/.node_modules`, `~/.node_libraries` and `<prefix>/lib/node`.
pub(super) fn resolve(
    dir: &Path,
    node: &Path,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    let local = dir
        .ancestors()
        .filter(|d| d.file_name().is_none_or(|n| n != "node_modules"))
        .map(|d| d.join("node_modules"));
    let node_path: Vec<PathBuf> =
        var("NODE_PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    let home = var("HOME").map(PathBuf::from);
    let globals = home
        .iter()
        .flat_map(|h| [h.join(".node_modules"), h.join(".node_libraries")])
        .chain(node.parent().and_then(Path::parent).map(|prefix| prefix.join("lib/node")));
    local
        .chain(node_path.into_iter().filter(|d| d.is_absolute()))
        .chain(globals)
        .map(|d| d.join(CODEX_JS))
        .find(|p| p.is_file())
}

/// A process as Linux's `/proc` shows it; `None` elsewhere, or when it is gone.
pub(super) fn proc(pid: u32) -> Option<Process> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(dir.join("exe")).ok()?;
    let cwd = std::fs::read_link(dir.join("cwd")).ok()?;
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let args = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| os_string(a.to_vec()))
        .collect();
    let parent = crate::procfs::stat_fields(i64::from(pid))
        .and_then(|fields| fields.get(1)?.parse().ok())
        .filter(|&ppid: &u32| ppid > 1);
    Some(Process { exe, cwd, args, parent })
}

#[cfg(unix)]
fn os_string(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt as _;
    OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn os_string(bytes: Vec<u8>) -> OsString {
    String::from_utf8_lossy(&bytes).into_owned().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{executable, scratch};

    fn no_var(_: &str) -> Option<OsString> {
        None
    }

    /// npx's layout: `_npx/<hash>/node_modules` with the adapter, its `.bin` link and Codex.
    #[cfg(unix)]
    #[test]
    fn the_adapter_above_finds_the_codex_node_resolves_from_its_script() {
        let root = scratch("codex-adapter", "npx");
        let modules = root.join("_npx/1f2e/node_modules");
        let script = modules.join("@agentclientprotocol/codex-acp/dist/index.js");
        executable(&script);
        let codex = modules.join("@openai/codex/bin/codex.js");
        executable(&codex);
        std::fs::create_dir_all(modules.join(".bin")).unwrap();
        let link = modules.join(".bin/codex-acp");
        std::os::unix::fs::symlink("../@agentclientprotocol/codex-acp/dist/index.js", link)
            .unwrap();
        let node = PathBuf::from("/opt/node/bin/node");
        // The adapter started by its `.bin` link (`#!/usr/bin/env node`), a relative path from
        // its working directory; its parent a shell (`sh -c codex-acp`, npm's way).
        let adapter = Process {
            exe: node.clone(),
            cwd: modules.clone(),
            args: vec!["node".into(), "--no-warnings".into(), ".bin/codex-acp".into()],
            parent: Some(10),
        };
        let shell = Process {
            exe: "/bin/sh".into(),
            cwd: root.clone(),
            args: vec!["sh".into(), "-c".into(), "codex-acp".into()],
            parent: None,
        };
        let table = |pid: u32| match pid {
            11 => Some(adapter.clone()),
            10 => Some(shell.clone()),
            _ => None,
        };
        let want = Found::Codex { node: node.clone(), codex: codex.canonicalize().unwrap() };
        assert_eq!(find(11, &table, &no_var), want);

        // A process that runs no script, or a shell running one (a wrapper), is passed over.
        let wrapper = Process {
            exe: "/bin/sh".into(),
            cwd: root.clone(),
            args: vec!["sh".into(), script.clone().into_os_string()],
            parent: Some(11),
        };
        let table2 = |pid: u32| if pid == 12 { Some(wrapper.clone()) } else { table(pid) };
        assert!(matches!(find(12, &table2, &no_var), Found::Codex { .. }));

        // Codex in no node_modules above: the script is left to Node; no script: nothing.
        std::fs::remove_file(&codex).unwrap();
        assert_eq!(
            find(11, &table, &no_var),
            Found::Script { node, script: script.canonicalize().unwrap() }
        );
        assert_eq!(find(10, &table, &no_var), Found::Nothing);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn node_resolution_order() {
        let root = scratch("codex-adapter", "order");
        let dir = root.join("app/node_modules/@agentclientprotocol/codex-acp/dist");
        std::fs::create_dir_all(&dir).unwrap();
        let node = root.join("prefix/bin/node");
        let global = root.join("prefix/lib/node").join(CODEX_JS);
        executable(&global);
        assert_eq!(resolve(&dir, &node, &no_var), Some(global.clone()));
        let home = root.join("home");
        let in_home = home.join(".node_modules").join(CODEX_JS);
        executable(&in_home);
        let home_var = |name: &str| (name == "HOME").then(|| home.clone().into_os_string());
        assert_eq!(resolve(&dir, &node, &home_var), Some(in_home));
        let path_dir = root.join("node-path");
        let in_node_path = path_dir.join(CODEX_JS);
        executable(&in_node_path);
        let node_path = |name: &str| match name {
            "NODE_PATH" => Some(path_dir.clone().into_os_string()),
            "HOME" => Some(home.clone().into_os_string()),
            _ => None,
        };
        assert_eq!(resolve(&dir, &node, &node_path), Some(in_node_path));
        // The adapter's own node_modules, then the one above it (npm's hoisting), first.
        let hoisted = root.join("app/node_modules").join(CODEX_JS);
        executable(&hoisted);
        assert_eq!(resolve(&dir, &node, &node_path), Some(hoisted.clone()));
        let nested = root.join("app/node_modules/@agentclientprotocol/codex-acp/node_modules");
        let nested = nested.join(CODEX_JS);
        executable(&nested);
        assert_eq!(resolve(&dir, &node, &node_path), Some(nested.clone()));
        // No `node_modules/node_modules`.
        let doubled = root.join("app/node_modules/node_modules").join(CODEX_JS);
        executable(&doubled);
        std::fs::remove_file(&nested).unwrap();
        std::fs::remove_file(root.join("app/node_modules").join(CODEX_JS)).unwrap();
        assert_eq!(resolve(&dir, &node, &node_path), Some(path_dir.join(CODEX_JS)));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_reads_this_process() {
        let me = proc(std::process::id()).unwrap();
        assert_eq!(me.exe, std::env::current_exe().unwrap());
        assert_eq!(me.cwd, std::env::current_dir().unwrap());
        assert_eq!(me.args, std::env::args_os().collect::<Vec<_>>());
    }
}
