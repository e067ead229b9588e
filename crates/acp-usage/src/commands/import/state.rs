//! What `import` remembers of each file it read (the ledger's `import_files`, schema 5), so that
//! the next import reads only sessions that changed.
//!
//! Per file: its identity (device and inode), size, modification time, how far the read got
//! (the byte offset after the last complete line) and, for files their agent rewrites rather
//! than appends to (cline's `messages.json`, Gemini CLI's older `session-*.json`), a hash of its
//! first 4 KiB, so that a document rewritten in place with the same size and a coarse
//! modification time is noticed. For opencode's database, each session is one row whose
//! "modification time" is the session's last update.
//!
//! A session is unchanged when each of its files is remembered with the state it has now: then
//! it is not read at all. Anything else (a file that grew, shrank, was replaced or rewritten, a
//! new subagent file) reads the whole session again: see [`super::read`] for why. A file that
//! is gone adds nothing to read; its row stays, unused. Rows are per file, so two copies of a
//! session under one id (the same transcript in two project folders) do not undo each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::params;

use crate::sinks::ledger::Store;

/// How much of a rewritten document's head is hashed.
const HEAD: usize = 4096;

/// What a file's `stat` (and, for a rewritten document, its head) said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The device.
    pub dev: i64,
    /// The inode.
    pub ino: i64,
    /// The size in bytes.
    pub size: i64,
    /// The modification time, Unix ns (opencode: the session's last update, Unix ms).
    pub mtime: i64,
    /// FNV-1a of the first 4 KiB, for files their agent rewrites in place.
    pub head: Option<i64>,
}

impl Seen {
    /// An opencode session last updated at `updated_ms`.
    pub fn updated(updated_ms: i64) -> Seen {
        Seen { dev: 0, ino: 0, size: 0, mtime: updated_ms, head: None }
    }

    /// The modification time in Unix ms (for a file's [`Seen`]).
    pub fn mtime_ms(&self) -> i64 {
        self.mtime / 1_000_000
    }
}

/// Whether `path` is a document its agent rewrites whole (the same rule the reader follows).
pub fn rewritten(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// A file's state now; `None` when it cannot be looked at (it will be read, and named when that
/// fails too).
pub fn stat(path: &Path) -> Option<Seen> {
    let meta = std::fs::metadata(path).ok()?;
    let (dev, ino, mtime) = identity(&meta)?;
    let head = if rewritten(path) { Some(head(path)?) } else { None };
    Some(Seen { dev, ino, size: meta.len() as i64, mtime, head })
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(i64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev() as i64, meta.ino() as i64, meta.mtime() * 1_000_000_000 + meta.mtime_nsec()))
}

/// Without device and inode (std has the Windows ones only on nightly), size, time and head
/// tell.
#[cfg(not(unix))]
fn identity(meta: &std::fs::Metadata) -> Option<(i64, i64, i64)> {
    let t = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some((0, 0, t.as_nanos() as i64))
}

/// FNV-1a (64 bits) of the file's first [`HEAD`] bytes.
fn head(path: &Path) -> Option<i64> {
    use std::io::Read as _;
    let mut buf = Vec::with_capacity(HEAD);
    std::fs::File::open(path).ok()?.take(HEAD as u64).read_to_end(&mut buf).ok()?;
    Some(fnv1a(&buf) as i64)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// What the ledger remembers, per (agent, session id): each file's path and state.
#[derive(Debug, Default)]
pub struct Remembered(HashMap<(String, String), Vec<(PathBuf, Seen)>>);

impl Remembered {
    /// Every row of `import_files`.
    pub fn load(store: &Store) -> rusqlite::Result<Remembered> {
        let mut stmt = store.conn().prepare(
            "SELECT agent, session, path, dev, ino, size, mtime, head FROM import_files",
        )?;
        let rows = stmt.query_map([], |r| {
            let seen = Seen {
                dev: r.get(3)?,
                ino: r.get(4)?,
                size: r.get(5)?,
                mtime: r.get(6)?,
                head: r.get(7)?,
            };
            Ok(((r.get(0)?, r.get(1)?), (PathBuf::from(r.get::<_, String>(2)?), seen)))
        })?;
        let mut map: HashMap<(String, String), Vec<(PathBuf, Seen)>> = HashMap::new();
        for row in rows {
            let (key, file) = row?;
            map.entry(key).or_default().push(file);
        }
        Ok(Remembered(map))
    }

    /// Whether `agent`'s session `id`, whose files are now `files`, is as it was last read.
    pub fn unchanged(&self, agent: &str, id: &str, files: &[(PathBuf, Option<Seen>)]) -> bool {
        let Some(known) = self.0.get(&(agent.to_owned(), id.to_owned())) else { return false };
        !files.is_empty()
            && files.iter().all(|(path, now)| {
                now.is_some_and(|now| known.iter().any(|(p, seen)| p == path && *seen == now))
            })
    }
}

/// Remembers that `agent`'s session `id` was read with its files in the states `files` (as
/// stat saw them before the read), each read up to `offsets` (the byte after its last complete
/// line; opencode: 0). Replaces what was remembered of those files.
pub fn save(
    store: &mut Store,
    agent: &str,
    id: &str,
    files: &[(PathBuf, Option<Seen>)],
    offsets: &[(PathBuf, u64)],
) -> rusqlite::Result<()> {
    let tx = crate::sinks::ledger::store::WriteTx::begin(store.conn_mut())?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR REPLACE INTO import_files(agent, session, path, dev, ino, size, mtime,
                offset, head)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for (path, seen) in files {
            // A file that could not be looked at is not remembered: the next import reads the
            // session again.
            let Some(s) = seen else { continue };
            let offset = offsets.iter().find(|(p, _)| p == path).map_or(0, |(_, o)| *o as i64);
            stmt.execute(params![
                agent,
                id,
                path.to_string_lossy(),
                s.dev,
                s.ino,
                s.size,
                s.mtime,
                offset,
                s.head
            ])?;
        }
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_document_of_the_same_size_and_time_has_another_head() {
        let dir = crate::test_support::scratch("import-state", "head");
        let path = dir.join("s.messages.json");
        std::fs::write(&path, b"{\"messages\":[1]}").unwrap();
        let before = stat(&path).unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"{\"messages\":[2]}").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
        let after = stat(&path).unwrap();
        assert_eq!((before.size, before.mtime, before.ino), (after.size, after.mtime, after.ino));
        assert_ne!(before.head, after.head);
        // Appended lines are not hashed: a stat is all it takes.
        let jsonl = dir.join("s.jsonl");
        std::fs::write(&jsonl, b"{}\n").unwrap();
        assert_eq!(stat(&jsonl).unwrap().head, None);
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
