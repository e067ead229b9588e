//! Finding every session the agents keep on disk and reading its calls, with the relay's own
//! locations, readers and parsers (`sources::transcripts`, `acp_usage_core::transcript`).
//!
//! A session's files are read whole, in the order the relay reads them (the main file, then
//! its subagents' files through the same parser, except Codex rollouts, which need one each),
//! so a call revised by a later line or replayed by another file is one call, the last record
//! of its key winning. Besides the calls, the few facts a report shows are picked up on the
//! way: the project (the session's working directory) and the title.
//!
//! A session whose files changed since the last import is read whole again, never from where
//! the last read stopped: the parsers need what came before. Claude Code writes one message
//! over several lines (one per content block, each repeating the usage, the streamed partial
//! output count revised by later lines) and replays a sidechain's records; Codex's per-call
//! counts come from `token_count` records whose history a subagent's rollout replays first;
//! Gemini CLI rewinds (`$rewindTo`) and re-appends records; Copilot CLI ends a turn on what
//! the rounds before it requested. Feeding a parser only the new lines would count a revised
//! call twice or lose a rewind; keeping every parser's state in the ledger would bind the file
//! to each parser's internals. Only live sessions change, so the cost is reading those again;
//! the ledger's keys make the re-read add only the new calls (and update the grown ones).

use super::state::{self, Seen};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use acp_usage_core::transcript::{Event, FileRole, Parser};
use acp_usage_core::{Role, TokenRecord};
use memchr::memmem;

use crate::agents::Profile;
use crate::sources::transcripts::locate::{Found, Locator};
use crate::sources::transcripts::opencode::{OpencodeDb, RootSession};
use crate::sources::transcripts::tail::Tail;
use crate::sources::transcripts::{Facts, Files, Locations, Store};

/// One session to read.
#[derive(Debug)]
pub struct Source {
    /// Whose.
    pub agent: Profile,
    /// The agent's session id (the ACP session id).
    pub id: String,
    /// Where it is.
    pub place: Place,
    /// How many files it spans (opencode's sessions count one).
    pub files: usize,
    /// The newest modification time among its files (opencode: its last update), Unix ms.
    pub mtime_ms: i64,
    /// When it started as far as a cheap look tells (the first time its main file records),
    /// else `mtime_ms`: sessions are written in this order, so that when a call is in several
    /// (a Claude Code fork starts with a copy of its parent's), the older session owns it.
    pub started_ms: i64,
    /// The project and title known before reading (opencode's table, cline's and Gemini CLI's
    /// side files, read by [`prepare`]).
    pub project: Option<String>,
    /// See `project`.
    pub title: Option<String>,
    /// Each file's state as listed (opencode: the database's path and the session's update
    /// time), what [`state`] compares and remembers.
    pub seen: Vec<(PathBuf, Option<Seen>)>,
    /// Where the agent's records are (for its side files).
    location: PathBuf,
}

/// Where a session's records are.
#[derive(Debug)]
pub enum Place {
    /// Transcript files.
    Files(Found),
    /// A session in a database of opencode's schema (`Sources::databases`).
    Database,
}

/// A file or database that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub why: String,
}

/// Lines of a file that were skipped as unreadable, the file read all the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLines {
    /// The file.
    pub path: PathBuf,
    /// How many lines.
    pub lines: u32,
    /// The first line's error.
    pub first: String,
}

/// What was found on disk.
#[derive(Debug, Default)]
pub struct Sources {
    /// Every session, by agent, oldest first within an agent.
    pub list: Vec<Source>,
    /// The databases of opencode's schema, open, by agent, when they have sessions.
    pub databases: Vec<(Profile, OpencodeDb)>,
    /// Stores that could not be opened.
    pub unreadable: Vec<Unreadable>,
}

/// One call as imported.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportCall {
    /// The parser's key of the call (stable within the session).
    pub key: String,
    /// Its counts.
    pub record: TokenRecord,
    /// When it was made (the file's modification time when the format does not record it).
    pub at_ms: i64,
    /// Who made it.
    pub role: Role,
}

/// A session as read.
#[derive(Debug, Default)]
pub struct Session {
    /// Its working directory, when the records say.
    pub project: Option<String>,
    /// Its title, when the records say.
    pub title: Option<String>,
    /// Its calls, in the order they were first recorded.
    pub calls: Vec<ImportCall>,
    /// Files of the session that could not be read (a main file's failure leaves no calls).
    pub unreadable: Vec<Unreadable>,
    /// Files read with some lines skipped.
    pub skipped: Vec<SkippedLines>,
    /// Each file read, and the byte after the last complete line read of it.
    pub offsets: Vec<(PathBuf, u64)>,
}

/// Lists the sessions of `agents` under `locs`, skipping those whose files are all older than
/// `since` (Unix ms), with a `stat` of each file: nothing is read but what finding the files
/// needs. [`prepare`] reads what ordering and reporting a session needs, for the sessions to
/// be read.
pub fn sources(locs: &Locations, agents: &[Profile], since: Option<i64>) -> Sources {
    let mut out = Sources::default();
    let mut locator = Locator::default();
    for &agent in agents {
        let Some(format) = agent.import_format() else { continue };
        let Some(location) = locs.of(format) else { continue };
        let mut list = Vec::new();
        match format.store {
            Store::OpencodeDb => database_sources(agent, &location, &mut out, &mut list),
            Store::Files(files) => {
                for (id, found) in (files.all)(&mut locator, &location) {
                    list.push(file_source(agent, id, found, location.clone()));
                }
            }
        }
        list.retain(|s| since.is_none_or(|since| s.mtime_ms >= since));
        out.list.extend(list);
    }
    out
}

fn database_sources(agent: Profile, path: &Path, out: &mut Sources, list: &mut Vec<Source>) {
    if !path.exists() {
        return;
    }
    let db = OpencodeDb::open(path).and_then(|db| Ok((db.root_sessions()?, db)));
    match db {
        Ok((sessions, db)) => {
            for RootSession { id, directory, title, created_ms, updated_ms } in sessions {
                list.push(Source {
                    agent,
                    id,
                    place: Place::Database,
                    files: 1,
                    mtime_ms: updated_ms,
                    started_ms: created_ms,
                    project: directory.filter(|d| !d.is_empty()),
                    title: title.filter(|t| !t.is_empty()),
                    seen: vec![(path.to_path_buf(), Some(Seen::updated(updated_ms)))],
                    location: path.to_path_buf(),
                });
            }
            out.databases.push((agent, db));
        }
        Err(err) => {
            out.unreadable.push(Unreadable { path: path.to_path_buf(), why: format!("{err:#}") })
        }
    }
}

fn file_source(agent: Profile, id: String, found: Found, location: PathBuf) -> Source {
    let seen: Vec<(PathBuf, Option<Seen>)> = found
        .main
        .iter()
        .chain(found.subagents.iter())
        .map(|p| (p.clone(), state::stat(p)))
        .collect();
    let mtime_ms = seen.iter().filter_map(|(_, s)| s.map(|s| s.mtime_ms())).max().unwrap_or(0);
    Source {
        agent,
        id,
        place: Place::Files(found),
        files: seen.len(),
        mtime_ms,
        started_ms: mtime_ms,
        project: None,
        title: None,
        seen,
        location,
    }
}

/// Reads what a session to be read needs before it is read: when it started (for the order
/// sessions are written in) and its side files' project and title.
pub fn prepare(source: &mut Source) {
    let Place::Files(found) = &source.place else { return };
    let Some(Store::Files(files)) = source.agent.import_format().map(|f| f.store) else { return };
    if let Some(t) = found.main.as_deref().and_then(first_time) {
        source.started_ms = t;
    }
    let Facts { cwd, title } = (files.side_facts)(&source.location, &source.id, found);
    source.project = cwd;
    source.title = title.map(|(_, t)| t);
}

/// The first time a JSONL file records near its start (`"timestamp"`, Gemini CLI's
/// `"startTime"`).
fn first_time(path: &Path) -> Option<i64> {
    use std::io::Read as _;
    let mut head = Vec::new();
    std::fs::File::open(path).ok()?.take(64 << 10).read_to_end(&mut head).ok()?;
    let at = |pattern: &[u8]| -> Option<(usize, i64)> {
        let start = memmem::find(&head, pattern)? + pattern.len();
        let end = start + head[start..].iter().position(|&b| b == b'"')?;
        let time = std::str::from_utf8(&head[start..end]).ok()?;
        Some((start, acp_usage_core::transcript::parse_timestamp(time)?))
    };
    let found = [at(b"\"timestamp\":\""), at(b"\"startTime\":\"")];
    found.into_iter().flatten().min_by_key(|(pos, _)| *pos).map(|(_, t)| t)
}

/// Reads one session's calls (`db`: the open database of its agent, for a session in one).
pub fn read(source: &Source, db: Option<&mut OpencodeDb>) -> Session {
    let mut session = Session {
        project: source.project.clone(),
        title: source.title.clone(),
        ..Session::default()
    };
    let mut events = Vec::new();
    let mut side = std::collections::HashSet::new();
    match &source.place {
        Place::Database => {
            let Some(db) = db else { return session };
            if let Err(err) = db.read_new(&source.id, &mut events) {
                session.unreadable.push(Unreadable {
                    path: db.path().to_path_buf(),
                    why: format!("session {}: {err:#}", source.id),
                });
                return session;
            }
        }
        Place::Files(found) => {
            let Some(main) = found.main.as_deref() else { return session };
            let Some(format) = source.agent.import_format() else { return session };
            let Store::Files(files) = format.store else { return session };
            let mut facts = Facts::default();
            let mut shared = (files.parser)();
            let ok = read_file(
                main,
                FileRole::Main,
                shared.as_mut(),
                files.may_hold_call,
                Some((&files, &mut facts)),
                &mut events,
                &mut session,
            );
            if !ok {
                return session;
            }
            for path in &found.subagents {
                // A format whose lines do not say which file they are from (Codex's) needs a
                // parser per file.
                let mut own = files.parser_per_file.then(|| (files.parser)());
                let parser = match own.as_mut() {
                    Some(p) => p.as_mut(),
                    None => shared.as_mut(),
                };
                let keep = files.may_hold_call;
                read_file(path, FileRole::Subagent, parser, keep, None, &mut events, &mut session);
            }
            let (cwd, title) = shared.session_facts();
            session.project = session.project.take().or(facts.cwd.take()).or(cwd);
            session.title = session.title.take().or(facts.title()).or(title);
            for event in &events {
                if let Event::Call(call) = event
                    && shared.is_side_call(&call.key)
                {
                    side.insert(call.key.clone());
                }
            }
        }
    }
    // The last record of a key wins, in the place its first record had.
    let mut index: HashMap<String, usize> = HashMap::new();
    for event in events {
        let Event::Call(call) = event else { continue };
        let role = if side.contains(&call.key) {
            Role::Side
        } else if call.main {
            Role::Main
        } else {
            Role::Subagent
        };
        let c = ImportCall {
            at_ms: call.at_ms.unwrap_or(source.mtime_ms),
            key: call.key,
            record: call.record,
            role,
        };
        match index.get(&c.key) {
            Some(&i) => session.calls[i] = c,
            None => {
                index.insert(c.key.clone(), session.calls.len());
                session.calls.push(c);
            }
        }
    }
    session
}

/// Feeds a whole file to `parser`; false when it could not be read at all, or when every line
/// it had failed (the format changed). Either is noted in `session`.
fn read_file(
    path: &Path,
    role: FileRole,
    parser: &mut dyn Parser,
    may_hold_call: Option<fn(&[u8]) -> bool>,
    mut facts: Option<(&Files, &mut Facts)>,
    events: &mut Vec<Event>,
    session: &mut Session,
) -> bool {
    // cline rewrites one document; Gemini CLI's older versions wrote one `session-*.json`.
    let whole = path.extension().is_some_and(|e| e == "json");
    let mut tail =
        if whole { Tail::whole(path.to_path_buf()) } else { Tail::new(path.to_path_buf()) };
    let (mut good, mut bad, mut first_error) = (0u32, 0u32, None);
    let mut document = 0;
    loop {
        let chunk = match tail.read() {
            Ok(c) => c,
            Err(err) => {
                session
                    .unreadable
                    .push(Unreadable { path: path.to_path_buf(), why: err.to_string() });
                return false;
            }
        };
        for line in chunk.lines() {
            document = line.len() as u64;
            if let Some((files, facts)) = facts.as_mut() {
                (files.facts)(facts, line);
            }
            if may_hold_call.is_some_and(|may| !may(line)) {
                good += 1;
                continue;
            }
            match parser.line(role, line, events) {
                Ok(()) => good += 1,
                Err(err) => {
                    bad += 1;
                    first_error.get_or_insert(err.0);
                }
            }
        }
        if chunk.at_end {
            break;
        }
    }
    let offset = if whole { document } else { tail.consumed() };
    session.offsets.push((path.to_path_buf(), offset));
    match (bad, first_error) {
        (0, _) | (_, None) => true,
        (_, Some(why)) if good == 0 => {
            session.unreadable.push(Unreadable { path: path.to_path_buf(), why });
            false
        }
        (lines, Some(first)) => {
            session.skipped.push(SkippedLines { path: path.to_path_buf(), lines, first });
            true
        }
    }
}
