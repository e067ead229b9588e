//! The agents a user added in Zed from the ACP registry, read from Zed's own files, and where
//! those files are.
//!
//! Zed records such an agent in its settings by its registry id alone
//! (`"agent_servers": {"claude-acp": {"type": "registry", "env": {...}}}`; `"extension"` in the
//! releases that migrated agent-server extensions to the registry), and keeps the copy of the
//! registry's index it installed from at `<data dir>/external_agents/registry/registry.json`.
//! The index says how the agent starts, and Zed follows it: a `binary` one is extracted under
//! `registry/<id>/v_<version>_…/` and preferred when the index has an archive for this platform;
//! an `npx` one runs out of npm's cache (`npm exec --yes -- <package> <args>`), which leaves no
//! program to point an entry at, so its command here is `npx -y <package> <args>`, pinned as the
//! index pins it. The index also lists `uvx` packages, run here by `uvx` when it is on `PATH`.
//!
//! Everything here only reads files, and the index is Zed's cached copy, never fetched: what
//! Zed itself would start is what an entry made from it starts.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::found::{self, Distribution, Findings, Found, Note, Place, Registered, Vars, dir_var};
use super::{Launch, Profile};

/// The editor's name, as places and notes say it.
const ZED: &str = "Zed";

/// Where Zed keeps the files read here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// Its user `settings.json`.
    pub settings: PathBuf,
    /// Its data directory (`external_agents/` is in it).
    pub data: PathBuf,
}

impl Files {
    /// Zed's files in the environment `vars`; `None` without the directories they are in.
    pub fn locate(vars: Vars) -> Option<Files> {
        Some(Files { settings: settings_file(vars)?, data: data_dir(vars)? })
    }

    /// Where Zed extracts registry agents and keeps its copy of the index.
    pub fn registry_dir(&self) -> PathBuf {
        self.data.join("external_agents").join("registry")
    }

    /// Its copy of the registry's index.
    pub fn index(&self) -> PathBuf {
        self.registry_dir().join("registry.json")
    }
}

/// Zed's user settings file: `settings.json` in its config directory, which is `~/.config/zed`
/// on macOS too (not Application Support), `%APPDATA%\Zed` on Windows, else
/// `$FLATPAK_XDG_CONFIG_HOME/zed`, `$XDG_CONFIG_HOME/zed` or `~/.config/zed`.
pub fn settings_file(vars: Vars) -> Option<PathBuf> {
    let config = if cfg!(target_os = "macos") {
        found::home(vars)?.join(".config")
    } else if cfg!(windows) {
        return Some(dir_var(vars, "APPDATA")?.join("Zed").join("settings.json"));
    } else {
        dir_var(vars, "FLATPAK_XDG_CONFIG_HOME")
            .or_else(|| dir_var(vars, "XDG_CONFIG_HOME"))
            .or_else(|| Some(found::home(vars)?.join(".config")))?
    };
    Some(config.join("zed").join("settings.json"))
}

/// Zed's data directory: `~/Library/Application Support/Zed` on macOS, `%LOCALAPPDATA%\Zed`
/// on Windows, else `$FLATPAK_XDG_DATA_HOME/zed`, `$XDG_DATA_HOME/zed` or `~/.local/share/zed`.
pub fn data_dir(vars: Vars) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        Some(found::home(vars)?.join("Library").join("Application Support").join("Zed"))
    } else if cfg!(windows) {
        Some(dir_var(vars, "LOCALAPPDATA")?.join("Zed"))
    } else {
        let base = dir_var(vars, "FLATPAK_XDG_DATA_HOME")
            .or_else(|| dir_var(vars, "XDG_DATA_HOME"))
            .or_else(|| Some(found::home(vars)?.join(".local").join("share")))?;
        Some(base.join("zed"))
    }
}

/// The registry agents added in Zed (per `files`) that have a profile, each with the command
/// and environment Zed would start it with; a note for each one that cannot be started from
/// here and for a file that cannot be read. `path` is the `PATH` to look for `uvx` on.
pub fn scan(files: &Files, path: Option<&OsStr>) -> Findings {
    let mut out = Findings::default();
    let file_note = |message: String, path: &Path| Note {
        profile: None,
        id: None,
        message,
        path: Some(path.to_path_buf()),
    };
    let settings = match std::fs::read_to_string(&files.settings) {
        Ok(text) => text,
        Err(e) => {
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                "not found".to_owned()
            } else {
                format!("cannot be read ({e})")
            };
            let message = format!(
                "{ZED}'s settings {} {why}: no agent added in {ZED} from the ACP registry is known",
                files.settings.display()
            );
            out.notes.push(file_note(message, &files.settings));
            return out;
        }
    };
    let entries = match registry_entries(&settings) {
        Ok(entries) => entries,
        Err(why) => {
            let message = format!(
                "{ZED}'s settings {} {why}: its ACP registry agents are not read",
                files.settings.display()
            );
            out.notes.push(file_note(message, &files.settings));
            return out;
        }
    };
    if entries.is_empty() {
        return out;
    }
    let index_path = files.index();
    let index = match read_index(&index_path) {
        Ok(index) => index,
        Err(why) => {
            let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
            let message = format!(
                "{ZED}'s copy of the ACP registry index {} {why}, so how it starts {} is not \
                 known (Zed writes it when it fetches the registry)",
                index_path.display(),
                ids.join(", ")
            );
            out.notes.push(file_note(message, &index_path));
            return out;
        }
    };
    let uvx = path.is_some_and(|p| found::on_path(p, "uvx", |_| true).is_some());
    for (id, env) in entries {
        let Some((profile, launch)) = launch_of(&id) else {
            out.notes.push(Note {
                profile: None,
                message: format!(
                    "{id}, added in {ZED} from the ACP registry, is no agent acp-usage has a \
                     profile for: setup adds no entry for it (an entry of your own can run it \
                     as `acp-usage -- <its command>`)"
                ),
                id: Some(id),
                path: Some(files.settings.clone()),
            });
            continue;
        };
        let note = |message: String, path: &Path| Note {
            profile: Some(profile),
            id: Some(id.clone()),
            message: format!("{id}, added in {ZED} from the ACP registry: {message}"),
            path: Some(path.to_path_buf()),
        };
        let Some(agent) = index.get(&id) else {
            let why =
                format!("not in {ZED}'s copy of the index, so {ZED} does not start it either");
            out.notes.push(note(why, &index_path));
            continue;
        };
        match start(&id, agent, &env, &files.registry_dir().join(&id), uvx) {
            Ok((registered, program)) => out.found.push(Found {
                profile,
                launch,
                path: program.unwrap_or_else(|| files.settings.clone()),
                place: Place::EditorRegistry(ZED.to_owned()),
                registry: Some(registered),
                editor_env: BTreeMap::new(),
            }),
            Err(why) => out.notes.push(note(why, &index_path)),
        }
    }
    out
}

/// A registry entry of Zed's settings: its id and `env`.
type Entry = (String, BTreeMap<String, String>);

/// The registry entries in Zed's settings text, in the file's order.
fn registry_entries(text: &str) -> Result<Vec<Entry>, String> {
    // Zed's reader takes comments and trailing commas; so does this one's default.
    let root: Value = jsonc_parser::parse_to_serde_value(text, &Default::default())
        .map_err(|e| format!("do not parse ({e})"))?;
    let servers = match root.get("agent_servers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(servers)) => servers,
        Some(_) => return Err("have an `agent_servers` that is not an object".to_owned()),
    };
    let entries = servers
        .iter()
        .filter(|(_, entry)| {
            matches!(entry.get("type").and_then(Value::as_str), Some("registry" | "extension"))
        })
        .map(|(id, entry)| {
            let env = entry
                .get("env")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect();
            (id.clone(), env)
        })
        .collect();
    Ok(entries)
}

/// The index's agents by id, each as it is written (one malformed entry spoils only itself).
fn read_index(path: &Path) -> Result<BTreeMap<String, Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "is not there".to_owned()
        } else {
            format!("cannot be read ({e})")
        }
    })?;
    let index: Value = serde_json::from_str(&text).map_err(|e| format!("does not parse ({e})"))?;
    let agents = index.get("agents").and_then(Value::as_array).ok_or("has no `agents` list")?;
    Ok(agents.iter().filter_map(|a| Some((a.get("id")?.as_str()?.to_owned(), a.clone()))).collect())
}

/// The profile and launch whose registry id is `id`.
fn launch_of(id: &str) -> Option<(Profile, &'static Launch)> {
    Profile::all()
        .find_map(|p| p.launches().iter().find(|l| l.registry_id == Some(id)).map(|l| (p, l)))
}

/// An index entry's `distribution`.
#[derive(Debug, Deserialize)]
struct Dist {
    npx: Option<Package>,
    uvx: Option<Package>,
    binary: Option<BTreeMap<String, Target>>,
}

/// An `npx` or `uvx` distribution.
#[derive(Debug, Deserialize)]
struct Package {
    package: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// A `binary` distribution's archive for one platform.
#[derive(Debug, Deserialize)]
struct Target {
    cmd: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// How Zed starts the index entry `agent` (the registry's `id`) whose settings entry sets
/// `env`: the command, and the program file when there is one. `dir` is where Zed extracts it.
fn start(
    id: &str,
    agent: &Value,
    env: &BTreeMap<String, String>,
    dir: &Path,
    uvx: bool,
) -> Result<(Registered, Option<PathBuf>), String> {
    let dist: Dist = agent
        .get("distribution")
        .map(|d| serde_json::from_value(d.clone()))
        .ok_or("its index entry has no `distribution`")?
        .map_err(|e| format!("its index entry's `distribution` cannot be read ({e})"))?;
    // Zed's order: the archive for this platform when the index has one, else npx.
    let registered = |distribution, argv, own_env: &BTreeMap<String, String>| {
        let mut all = own_env.clone();
        all.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Registered { id: id.to_owned(), distribution, argv, env: all }
    };
    let target = platform().and_then(|p| dist.binary.as_ref()?.get(p));
    let mut not_extracted = None;
    if let Some(target) = target {
        let version = agent.get("version").and_then(Value::as_str).unwrap_or("");
        match extracted(dir, version, &target.cmd) {
            Ok(program) => {
                let argv = std::iter::once(program.display().to_string())
                    .chain(target.args.iter().cloned())
                    .collect();
                return Ok((registered(Distribution::Binary, argv, &target.env), Some(program)));
            }
            // The same version from npm, when the index offers it, runs as well.
            Err(why) => not_extracted = Some(why),
        }
    }
    if let Some(npx) = &dist.npx {
        let argv = ["npx", "-y", &npx.package]
            .into_iter()
            .map(str::to_owned)
            .chain(npx.args.iter().cloned())
            .collect();
        return Ok((registered(Distribution::Npx, argv, &npx.env), None));
    }
    if let Some(why) = not_extracted {
        return Err(why);
    }
    if let Some(package) = &dist.uvx {
        if !uvx {
            return Err(format!(
                "the registry distributes it through uvx ({}), which is not on PATH",
                package.package
            ));
        }
        let argv = ["uvx", &package.package]
            .into_iter()
            .map(str::to_owned)
            .chain(package.args.iter().cloned())
            .collect();
        return Ok((registered(Distribution::Uvx, argv, &package.env), None));
    }
    Err(format!(
        "the index has no way to start it on this platform ({})",
        platform().unwrap_or("unknown")
    ))
}

/// The program `cmd` (`./<file>`) of the version directory Zed extracted the agent into
/// (`v_<version>_<hashes>` in `dir`): the one of `version` first, else the newest.
fn extracted(dir: &Path, version: &str, cmd: &str) -> Result<PathBuf, String> {
    let file = cmd.strip_prefix("./").filter(|f| !f.split(['/', '\\']).any(|c| c == ".."));
    let Some(file) = file else {
        return Err(format!("its command `{cmd}` is not a file of its archive"));
    };
    // Zed writes the version with every character outside `[A-Za-z0-9._-]` as `-`.
    let safe: String = version
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    let ours = format!("v_{safe}_");
    let mut dirs: Vec<(bool, std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            name.starts_with("v_").then(|| (name.starts_with(&ours), modified, e.path()))
        })
        .collect();
    dirs.sort_by_key(|(ours, modified, _)| std::cmp::Reverse((*ours, *modified)));
    dirs.iter()
        .find_map(|(_, _, d)| found::executable_in(d, file.trim_end_matches(".exe")))
        .ok_or_else(|| {
            format!(
                "{ZED} has not downloaded its {version} binary to {} yet (it does when the \
                 agent first starts there)",
                dir.display()
            )
        })
}

/// The index's name for this platform (`<os>-<arch>`).
fn platform() -> Option<&'static str> {
    Some(match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x86_64",
        ("linux", "aarch64") => "linux-aarch64",
        ("macos", "x86_64") => "darwin-x86_64",
        ("macos", "aarch64") => "darwin-aarch64",
        ("windows", "x86_64") => "windows-x86_64",
        ("windows", "aarch64") => "windows-aarch64",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
