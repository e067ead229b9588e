//! Finding a session's transcript files: what every format's finder shares (the files found,
//! a memory of facts read from files, directory walks). Each agent's own rules (where its
//! files are, how they are named after the session id) are in its file in `agents/`.

use std::collections::HashMap;
use std::io::{BufRead, Read as _};
use std::path::{Path, PathBuf};

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
    /// Facts of files already looked at (a Codex rollout's parent thread, if any).
    facts: HashMap<PathBuf, Option<String>>,
}

impl Locator {
    /// A fact read from `path` (e.g. the parent thread a Codex rollout names), read once.
    pub fn remembered(
        &mut self,
        path: &Path,
        read: impl FnOnce(&Path) -> Option<String>,
    ) -> Option<String> {
        self.facts.entry(path.to_path_buf()).or_insert_with(|| read(path)).clone()
    }
}

/// A session directory holding one file, named by `name` from the directory's name (the
/// session id).
pub fn one_file(dir: &Path, name: impl Fn(&str) -> String) -> Option<(String, Found)> {
    let id = dir.file_name()?.to_str()?.to_string();
    let file = dir.join(name(&id));
    file.is_file().then(|| (id, Found { main: Some(file), subagents: Vec::new() }))
}

/// The one file of a session, when it exists.
pub fn only(path: PathBuf) -> Found {
    Found { main: path.is_file().then_some(path), subagents: Vec::new() }
}

/// `sessions/YYYY/MM/DD` directories, newest first.
pub fn day_dirs(sessions: &Path) -> Vec<PathBuf> {
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

pub fn first_line(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    // Metadata lines are small; a bound keeps a strange file from being read whole.
    std::io::BufReader::new(file).take(1 << 20).read_until(b'\n', &mut line).ok()?;
    Some(line)
}

pub fn dirs(path: &Path) -> Vec<PathBuf> {
    entries(path, |t| t.is_dir())
}

pub fn files(path: &Path) -> Vec<PathBuf> {
    entries(path, |t| t.is_file())
}

pub fn jsonl_files(path: &Path) -> Vec<PathBuf> {
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

/// Every entry of a directory, sorted.
pub fn sorted_entries(path: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(path) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    v.sort();
    v
}
