//! Finding a session's transcript files from the agent's locations and the ACP session id.
//!
//! Every agent keeps one main file per session, named or tagged by the session id the ACP
//! session carries (research/agents-usage.md §6.6), and its subagents' files beside it:
//! - Claude Code: `<config>/projects/<escaped cwd>/<id>.jsonl`, subagents in
//!   `<config>/projects/<escaped cwd>/<id>/subagents/*.jsonl`. The escaped cwd is not needed:
//!   the id is unique, so every project directory is looked in.
//! - Codex: `<home>/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl` (or `.jsonl.zst`); a
//!   subagent's rollout is another thread whose `session_meta` names the session as its parent.
//! - Gemini CLI: `<dir>/tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl` whose first
//!   line carries the whole `sessionId` (another session can share the 8 characters);
//!   subagents in `<dir>/tmp/<project>/chats/<id>/*.jsonl`.

use std::collections::HashMap;
use std::io::{BufRead, Read as _};
use std::path::{Path, PathBuf};

use acp_usage_core::transcript::gemini::session_id_of_first_line;

use super::{Format, Locations};

/// The files of one session found so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// The session's own transcript.
    pub main: Option<PathBuf>,
    /// Its subagents' transcripts.
    pub subagents: Vec<PathBuf>,
}

/// Finds files, remembering what it learned of files it opened (Codex rollouts' parents).
#[derive(Debug, Default)]
pub struct Locator {
    /// First-line facts of Codex rollouts already looked at: the parent thread, if any.
    codex_parents: HashMap<PathBuf, Option<String>>,
}

impl Locator {
    /// The files of `session` in `format`, as they are now.
    pub fn find(&mut self, locs: &Locations, format: Format, session: &str) -> Found {
        match format {
            Format::Claude => locs.claude.as_deref().map(|d| claude(d, session)),
            Format::Codex => locs.codex.as_deref().map(|d| self.codex(d, session)),
            Format::Gemini => locs.gemini.as_deref().map(|d| gemini(d, session)),
            Format::Opencode => None,
            Format::Copilot => locs.copilot.as_deref().map(|d| copilot(d, session)),
            Format::Cline => locs.cline.as_deref().map(|d| cline(d, session)),
        }
        .unwrap_or_default()
    }

    /// Every session of `format` on disk, by session id, each with its files (what `acp-usage
    /// import` reads): a subagent's file is attached to its session, never listed as one,
    /// except a Codex subagent rollout whose parent rollout is gone (its calls were billed all
    /// the same). opencode keeps its sessions in a database: see
    /// [`super::opencode::OpencodeDb::root_sessions`].
    pub fn all(&mut self, locs: &Locations, format: Format) -> Vec<(String, Found)> {
        let mut all = match format {
            Format::Claude => locs.claude.as_deref().map(claude_all),
            Format::Codex => locs.codex.as_deref().map(|d| self.codex_all(d)),
            Format::Gemini => locs.gemini.as_deref().map(gemini_all),
            Format::Opencode => None,
            Format::Copilot => locs.copilot.as_deref().map(|home| {
                let states = dirs(&home.join("session-state"));
                states.into_iter().filter_map(|d| one_file(&d, |_| "events.jsonl".into())).collect()
            }),
            Format::Cline => locs.cline.as_deref().map(|data| {
                let sessions = dirs(&data.join("sessions"));
                sessions
                    .into_iter()
                    .filter_map(|d| one_file(&d, |id| format!("{id}.messages.json")))
                    .collect()
            }),
        }
        .unwrap_or_default();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    fn codex_all(&mut self, home: &Path) -> Vec<(String, Found)> {
        let mut rollouts: Vec<PathBuf> = Vec::new();
        // Archived threads keep their rollouts, flat or in day folders.
        for root in [home.join("sessions"), home.join("archived_sessions")] {
            rollouts.extend(files(&root));
            for day in day_dirs(&root) {
                rollouts.extend(files(&day));
            }
        }
        rollouts.sort();
        let mut sessions: std::collections::BTreeMap<String, Found> = Default::default();
        let mut children: Vec<(String, String, PathBuf)> = Vec::new();
        for path in rollouts {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let Some(stem) =
                name.strip_suffix(".jsonl").or_else(|| name.strip_suffix(".jsonl.zst"))
            else {
                continue;
            };
            // `rollout-<time>-<thread uuid>`: the id is the last 36 characters.
            let Some(id) =
                stem.strip_prefix("rollout-").and_then(|s| s.get(s.len().checked_sub(36)?..))
            else {
                continue;
            };
            let parent = self
                .codex_parents
                .entry(path.clone())
                .or_insert_with(|| codex_parent(&path))
                .clone();
            match parent {
                Some(parent) => children.push((parent, id.to_string(), path)),
                None => {
                    let found = sessions.entry(id.to_string()).or_default();
                    // A plain file wins over a compressed copy of it.
                    if found.main.as_ref().is_none_or(|m| m.extension().is_some_and(|e| e == "zst"))
                    {
                        found.main = Some(path);
                    }
                }
            }
        }
        for (parent, id, path) in children {
            match sessions.get_mut(&parent) {
                Some(found) if found.main.is_some() => found.subagents.push(path),
                _ => {
                    sessions.entry(id).or_default().main.get_or_insert(path);
                }
            }
        }
        sessions.into_iter().collect()
    }

    fn codex(&mut self, home: &Path, session: &str) -> Found {
        let mut found = Found::default();
        let suffixes = [format!("-{session}.jsonl"), format!("-{session}.jsonl.zst")];
        for day in day_dirs(&home.join("sessions")) {
            for path in files(&day) {
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
                if !name.starts_with("rollout-") {
                    continue;
                }
                if suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                    // A plain file wins over a compressed copy of it.
                    if found.main.as_ref().is_none_or(|m| m.extension().is_some_and(|e| e == "zst"))
                    {
                        found.main = Some(path);
                    }
                    continue;
                }
                let parent = self
                    .codex_parents
                    .entry(path.clone())
                    .or_insert_with(|| codex_parent(&path))
                    .as_deref();
                if parent == Some(session) {
                    found.subagents.push(path);
                }
            }
        }
        found.subagents.sort();
        found
    }
}

fn claude(config: &Path, session: &str) -> Found {
    let mut found = Found::default();
    let file = format!("{session}.jsonl");
    for project in dirs(&config.join("projects")) {
        let main = project.join(&file);
        if main.is_file() {
            found.main = Some(main);
            found.subagents = jsonl_files(&project.join(session).join("subagents"));
            break;
        }
    }
    found
}

/// Every `<config>/projects/<escaped cwd>/<id>.jsonl`, with its subagents.
fn claude_all(config: &Path) -> Vec<(String, Found)> {
    let mut all = Vec::new();
    for project in dirs(&config.join("projects")) {
        for main in jsonl_files(&project) {
            let Some(id) = main.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            let subagents = jsonl_files(&project.join(&id).join("subagents"));
            all.push((id, Found { main: Some(main), subagents }));
        }
    }
    all
}

/// Every chat file under `<dir>/tmp/<project>/chats/`, by the session id its first line names
/// (the larger of two files of one id: see [`gemini`]); also older versions' whole-document
/// `session-*.json` files.
fn gemini_all(dir: &Path) -> Vec<(String, Found)> {
    let mut all: std::collections::BTreeMap<String, Found> = Default::default();
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    for project in dirs(&dir.join("tmp")) {
        let chats = project.join("chats");
        for path in files(&chats) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if !name.starts_with("session-") {
                continue;
            }
            let head = if name.ends_with(".jsonl") {
                first_line(&path)
            } else if name.ends_with(".json") {
                // One document: its metadata and messages together (bounded: see first_line).
                std::fs::File::open(&path).ok().and_then(|f| {
                    let mut doc = Vec::new();
                    f.take(64 << 20).read_to_end(&mut doc).ok().map(|_| doc)
                })
            } else {
                None
            };
            let Some(id) = head.and_then(|l| session_id_of_first_line(&l)) else { continue };
            let found = all.entry(id.clone()).or_default();
            if found.main.as_deref().is_none_or(|m| size(&path) > size(m)) {
                found.main = Some(path);
                found.subagents = jsonl_files(&chats.join(&id));
            }
        }
    }
    all.into_iter().collect()
}

/// A session directory holding one file, named by `name` from the directory's name (the
/// session id).
fn one_file(dir: &Path, name: impl Fn(&str) -> String) -> Option<(String, Found)> {
    let id = dir.file_name()?.to_str()?.to_string();
    let file = dir.join(name(&id));
    file.is_file().then(|| (id, Found { main: Some(file), subagents: Vec::new() }))
}

/// Copilot CLI keeps one directory per session; subagents (its `task` tool) write into the
/// same `events.jsonl`.
fn copilot(home: &Path, session: &str) -> Found {
    let events = home.join("session-state").join(session).join("events.jsonl");
    Found { main: events.is_file().then_some(events), subagents: Vec::new() }
}

/// cline keeps one directory per session with its conversation in one JSON document.
fn cline(data: &Path, session: &str) -> Found {
    let doc = data.join("sessions").join(session).join(format!("{session}.messages.json"));
    Found { main: doc.is_file().then_some(doc), subagents: Vec::new() }
}

fn gemini(dir: &Path, session: &str) -> Found {
    let mut found = Found::default();
    let Some(short) = session.get(..8) else { return found };
    let suffix = format!("-{short}.jsonl");
    for project in dirs(&dir.join("tmp")) {
        let chats = project.join("chats");
        for path in files(&chats) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if name.starts_with("session-")
                && name.ends_with(&suffix)
                && first_line(&path)
                    .is_some_and(|l| session_id_of_first_line(&l).as_deref() == Some(session))
            {
                // A process that loads the session first writes a stub file of the same id,
                // then appends to the original: the larger file is the conversation.
                let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
                if found.main.as_deref().is_none_or(|m| size(&path) > size(m)) {
                    found.main = Some(path);
                }
            }
        }
        if found.main.is_some() {
            found.subagents = jsonl_files(&chats.join(session));
            break;
        }
    }
    found
}

/// A transcript Claude Code started beside `main` for the same session after a `/clear`: a
/// `.jsonl` in the same project directory, changed since `since_ms`, not one of `known`, whose
/// first records are the `/clear` command.
pub fn claude_restart(main: &Path, known: &[&Path], since_ms: i64) -> Option<PathBuf> {
    let dir = main.parent()?;
    let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(since_ms.max(0) as u64)
        - std::time::Duration::from_secs(1);
    files(dir).into_iter().find(|path| {
        path.extension().is_some_and(|e| e == "jsonl")
            && path != main
            && !known.contains(&path.as_path())
            && std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t >= since)
            && starts_with_clear(path)
    })
}

/// Whether one of a Claude transcript's first records is the `/clear` command.
fn starts_with_clear(path: &Path) -> bool {
    const CLEAR: &[u8] = b"<command-name>/clear</command-name>";
    let Ok(file) = std::fs::File::open(path) else { return false };
    std::io::BufReader::new(file)
        .take(1 << 20)
        .split(b'\n')
        .take(8)
        .filter_map(Result::ok)
        .any(|line| line.windows(CLEAR.len()).any(|w| w == CLEAR))
}

/// The parent thread a Codex rollout's `session_meta` names, if it is a subagent's.
fn codex_parent(path: &Path) -> Option<String> {
    if path.extension().is_some_and(|e| e == "zst") {
        return None;
    }
    let line = first_line(path)?;
    let v: serde_json::Value = serde_json::from_slice(&line).ok()?;
    let spawn = v.pointer("/payload/source/subagent/thread_spawn")?;
    spawn.get("parent_thread_id")?.as_str().map(String::from)
}

/// `sessions/YYYY/MM/DD` directories, newest first.
fn day_dirs(sessions: &Path) -> Vec<PathBuf> {
    let mut days = Vec::new();
    for year in dirs(sessions) {
        for month in dirs(&year) {
            days.extend(dirs(&month));
        }
    }
    days.sort();
    days.reverse();
    days
}

fn first_line(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    // Metadata lines are small; a bound keeps a strange file from being read whole.
    std::io::BufReader::new(file).take(1 << 20).read_until(b'\n', &mut line).ok()?;
    Some(line)
}

fn dirs(path: &Path) -> Vec<PathBuf> {
    entries(path, |t| t.is_dir())
}

fn files(path: &Path) -> Vec<PathBuf> {
    entries(path, |t| t.is_file())
}

fn jsonl_files(path: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        files(path).into_iter().filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
    v.sort();
    v
}

fn entries(path: &Path, keep: fn(&std::fs::FileType) -> bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(path) else { return Vec::new() };
    rd.filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| keep(&t)))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-locate-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn claude_files_by_session_id_in_any_project() {
        let root = scratch("claude");
        let id = "1939d985-76a4-4c11-bc40-5be2531ae4d2";
        write(&root.join("projects/-tmp-a/other.jsonl"), "{}\n");
        write(&root.join(format!("projects/-tmp-b/{id}.jsonl")), "{}\n");
        write(&root.join(format!("projects/-tmp-b/{id}/subagents/agent-1.jsonl")), "{}\n");
        let locs = Locations { claude: Some(root.clone()), ..Locations::default() };
        let found = Locator::default().find(&locs, Format::Claude, id);
        assert_eq!(found.main, Some(root.join(format!("projects/-tmp-b/{id}.jsonl"))));
        assert_eq!(
            found.subagents,
            vec![root.join(format!("projects/-tmp-b/{id}/subagents/agent-1.jsonl"))]
        );
        assert_eq!(Locator::default().find(&locs, Format::Claude, "nope"), Found::default());
    }

    #[test]
    fn codex_rollouts_and_their_subagents() {
        let root = scratch("codex");
        let id = "01a200d9-cdc3-7573-aab2-6025b6a1748f";
        let day = root.join("sessions/2026/11/22");
        write(&day.join(format!("rollout-2026-11-22T01-23-23-{id}.jsonl")), "{}\n");
        write(
            &day.join("rollout-2026-11-22T01-24-00-sub.jsonl"),
            &format!(
                "{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"sub\",\"source\":{{\"subagent\":{{\"thread_spawn\":{{\"parent_thread_id\":\"{id}\"}}}}}}}}}}\n"
            ),
        );
        write(&root.join("sessions/2026/11/21/rollout-x-other.jsonl"), "{}\n");
        let locs = Locations { codex: Some(root.clone()), ..Locations::default() };
        let found = Locator::default().find(&locs, Format::Codex, id);
        assert_eq!(found.main, Some(day.join(format!("rollout-2026-11-22T01-23-23-{id}.jsonl"))));
        assert_eq!(found.subagents, vec![day.join("rollout-2026-11-22T01-24-00-sub.jsonl")]);
    }

    #[test]
    fn gemini_matches_the_whole_session_id_not_its_prefix() {
        let root = scratch("gemini");
        let id = "445bceee-81d3-49d1-b035-fb98d9e51289";
        let chats = root.join("tmp/work/chats");
        write(
            &chats.join("session-2026-11-22T01-23-445bceee.jsonl"),
            "{\"sessionId\":\"445bceee-0000-0000-0000-000000000000\",\"kind\":\"main\"}\n",
        );
        write(
            &chats.join("session-2026-11-22T01-24-445bceee.jsonl"),
            &format!("{{\"sessionId\":\"{id}\",\"kind\":\"main\"}}\n"),
        );
        write(&chats.join(format!("{id}/sub-1.jsonl")), "{}\n");
        let locs = Locations { gemini: Some(root.clone()), ..Locations::default() };
        let found = Locator::default().find(&locs, Format::Gemini, id);
        assert_eq!(found.main, Some(chats.join("session-2026-11-22T01-24-445bceee.jsonl")));
        assert_eq!(found.subagents, vec![chats.join(format!("{id}/sub-1.jsonl"))]);
    }
}
