//! `acp-usage import`: fills the ledger from the agents' transcripts already on disk (Claude
//! Code, Codex, Gemini CLI, opencode, qwen-code, Copilot CLI, cline), so that the first report
//! covers the months before acp-usage was installed.
//!
//! A call counts once, however often import runs and whatever the relay recorded:
//! 1. Every call has a key: the transcript parser's `Call::key`, stable for a call within a
//!    session (Claude Code's and opencode's are the provider's message id, the tap's key too).
//!    A call whose key the ledger already has, in any session, is not added: a second import
//!    adds nothing, and a call a Claude Code fork copied from its parent (same message id)
//!    stays the parent's (sessions are written oldest first, so the older one owns it).
//! 2. A session the relay recorded may hold calls under another key (the tap's response id
//!    for a Codex call) or none (what the agent reported over ACP). Per session, a transcript
//!    call left after rule 1 whose (input, cache read, output) equals that of a relay row not
//!    matched yet is that row's call: it is skipped, and the row is matched. Relay rows whose
//!    key is one of the session's transcript keys are matched by rule 1 already.
//! 3. A turn the relay settled from estimates or from the agent's per-turn sums has rows whose
//!    counts match no single transcript call. A transcript call left after rules 1 and 2 that
//!    was made during such a turn (between its start and end, with a second of slack) is that
//!    turn's: it is skipped. Estimates stay estimates; nothing counts twice.
//!
//! Sessions are keyed by the agent's session id, which is the ACP session id the relay records,
//! and filed under the relay's profile name (`claude`, `codex`, ...). Their project, title and
//! model fill what the ledger lacks; first and last seen stretch to the calls' times. Calls are
//! priced with [`acp_usage_core::account::price_call`], the relay's rule, and stamped with their
//! own time. No turn rows are written for imported calls (transcripts do not delimit turns the
//! same way in every format; reports count calls, tokens and cost), so an imported session
//! shows zero turns.
//!
//! A call imported while its session was live can have grown since (Claude Code writes a
//! streamed message's partial output count first and the final one later): when a session is
//! read again, an imported row of the session whose key the transcript now records with other
//! counts takes the new counts, re-priced with the same rule. Rows the relay wrote are never
//! changed.
//!
//! Import remembers each file it read (`state.rs`) and reads again only the sessions whose
//! files changed, so that an import with nothing new only looks at the files; that is what lets
//! `report` run it first. Sessions to read are read on every core (`parallel.rs`) and written
//! on this thread, oldest first, as from one thread.

mod output;
mod parallel;
mod read;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use acp_usage_core::account::price_call;
use acp_usage_core::{AccountedCall, Catalog, Source, TokenTotals};
use anyhow::Context as _;
use rusqlite::params;

use crate::agents::Profile;
use crate::options::RelayOptions;
use crate::sinks::ledger::{self, Origin, SessionRef, Settled, Store};
use crate::sources::transcripts::Locations;

pub use read::{SkippedLines, Unreadable};

/// The agents whose records import reads: every profile that names an import format.
pub fn agents() -> impl Iterator<Item = Profile> {
    Profile::all().filter(|p| p.import_format().is_some())
}

/// What to import, and into which ledger.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The ledger file; `None`: the one the relay writes ([`ledger::path`]).
    pub ledger: Option<PathBuf>,
    /// Only calls made at or after this time (Unix ms); files last changed before it are not
    /// read.
    pub since: Option<i64>,
    /// Only these agents; empty: all of them.
    pub agents: Vec<Profile>,
    /// Threads that read sessions; `None`: one per core.
    pub threads: Option<usize>,
}

/// Progress of a running import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Files read so far (an opencode session counts as one).
    pub files_done: usize,
    /// Files to read (those that changed since the last import).
    pub files_total: usize,
    /// Bytes of the files read so far.
    pub bytes_read: u64,
    /// Calls added so far.
    pub calls_added: u64,
}

/// What import did for one agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSummary {
    /// Sessions with at least one call in range.
    pub sessions: usize,
    /// Sessions that got at least one call.
    pub sessions_added: usize,
    /// Calls added.
    pub calls_added: u64,
    /// Calls the ledger already had (by key, or as a relay row with the same counts).
    pub calls_present: u64,
    /// Calls imported before whose counts changed since (a session read while it was live).
    pub calls_updated: u64,
    /// Tokens of the calls added.
    pub tokens: TokenTotals,
    /// Cost of the calls added, USD (unpriced calls left out).
    pub cost: f64,
    /// Calls added whose model has no price in the catalog.
    pub unpriced: u64,
}

/// What import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Per agent that had any session on disk.
    pub agents: BTreeMap<Profile, AgentSummary>,
    /// Files (or opencode's database) that could not be read, or whose every line failed.
    pub unreadable: Vec<Unreadable>,
    /// Files read with some lines skipped.
    pub skipped: Vec<SkippedLines>,
    /// Files found.
    pub files: usize,
    /// Files read (the files of every session with a file changed since the last import).
    pub files_read: usize,
    /// Files not read: their session's files are as the last import left them.
    pub files_unchanged: usize,
}

impl Summary {
    /// The sums over every agent.
    pub fn total(&self) -> AgentSummary {
        let mut t = AgentSummary::default();
        for a in self.agents.values() {
            t.sessions += a.sessions;
            t.sessions_added += a.sessions_added;
            t.calls_added += a.calls_added;
            t.calls_present += a.calls_present;
            t.calls_updated += a.calls_updated;
            t.tokens.input += a.tokens.input;
            t.tokens.cache_read += a.tokens.cache_read;
            t.tokens.cache_write += a.tokens.cache_write;
            t.tokens.output += a.tokens.output;
            t.tokens.thought += a.tokens.thought;
            t.tokens.calls += a.tokens.calls;
            t.cost += a.cost;
            t.unpriced += a.unpriced;
        }
        t
    }
}

/// Runs the command: imports into the ledger with the catalog the relay would use (`relay`'s
/// `--catalog`, `--config`), reporting progress and a summary on stderr.
pub fn run(relay: &RelayOptions, opts: &ImportOptions) -> anyhow::Result<ExitCode> {
    let path = match opts.ledger.clone().or_else(ledger::path) {
        Some(p) => p,
        None => anyhow::bail!(
            "no ledger: {} is `off` or no home directory is known; name one with --ledger PATH",
            ledger::LEDGER_ENV
        ),
    };
    let catalog = relay.load_config()?.catalog;
    let mut store =
        ledger::open(&path).with_context(|| format!("opening the ledger {}", path.display()))?;
    let locs = Locations::from_process();
    let mut bar = output::ProgressBar::new(std::io::stderr().is_terminal());
    let summary = import(&mut store, &locs, &catalog, opts, &mut |p| bar.show(p))
        .with_context(|| format!("writing to the ledger {}", path.display()));
    bar.clear();
    output::print_summary(&summary?, &path, opts);
    Ok(ExitCode::SUCCESS)
}

/// What `report` runs before it answers: an import into `ledger` (default: [`ledger::path`])
/// of what changed since the last one, quietly (a progress bar on a terminal only, warnings as
/// one line). It never fails the report: a ledger it cannot open or write (locked, read-only)
/// is one warning line, and the report answers from what the ledger holds.
pub fn before_report(relay: &RelayOptions, ledger: Option<PathBuf>) {
    let Some(path) = ledger.or_else(ledger::path) else { return };
    let mut bar = output::ProgressBar::new(std::io::stderr().is_terminal());
    let catalog = || Ok(relay.load_config()?.catalog);
    let res = refresh(&path, &Locations::from_process(), catalog, &mut |p| bar.show(p));
    bar.clear();
    match res {
        Ok(summary) => {
            if let Some(line) = summary.as_ref().and_then(output::warnings_line) {
                eprintln!("acp-usage report: warning: import: {line}");
            }
        }
        Err(err) => eprintln!(
            "acp-usage report: warning: import skipped ({err:#}); reporting what the ledger holds"
        ),
    }
}

/// The import [`before_report`] runs, into the ledger at `path` from `locs`; `None` when the
/// ledger does not exist and there is nothing to import (a report does not create it then).
fn refresh(
    path: &std::path::Path,
    locs: &Locations,
    catalog: impl FnOnce() -> anyhow::Result<Catalog>,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<Option<Summary>> {
    if !path.exists() && read::sources(locs, &agents().collect::<Vec<_>>(), None).list.is_empty() {
        return Ok(None);
    }
    let catalog = catalog()?;
    let mut store =
        ledger::open(path).with_context(|| format!("cannot open the ledger {}", path.display()))?;
    let summary = import(&mut store, locs, &catalog, &ImportOptions::default(), progress)
        .with_context(|| format!("cannot write to the ledger {}", path.display()))?;
    Ok(Some(summary))
}

/// Imports every session of `opts.agents` found under `locs` into `store` whose files changed
/// since the last import, calling `progress` after each session.
pub fn import(
    store: &mut Store,
    locs: &Locations,
    catalog: &Catalog,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> rusqlite::Result<Summary> {
    let agents: Vec<Profile> = if opts.agents.is_empty() {
        agents().collect()
    } else {
        agents().filter(|a| opts.agents.contains(a)).collect()
    };
    let mut found = read::sources(locs, &agents, opts.since);
    let mut summary = Summary {
        unreadable: std::mem::take(&mut found.unreadable),
        files: found.list.iter().map(|s| s.files).sum(),
        ..Summary::default()
    };
    // A first import inserts tens of thousands of calls under an index of their keys: with
    // SQLite's default 2 MB page cache it reads the same pages back from the system again and
    // again. 64 MB holds a year of a heavy user's ledger; it is freed when the command ends.
    store.conn().pragma_update(None, "cache_size", -65_536)?;
    store.conn().pragma_update(None, "wal_autocheckpoint", 16_384)?;
    let list = changed_sources(store, std::mem::take(&mut found.list), &agents, &mut summary)?;
    summary.files_read = list.iter().map(|s| s.files).sum();
    let mut p = Progress { files_total: summary.files_read, ..Progress::default() };
    progress(p);
    if list.is_empty() {
        return Ok(summary);
    }
    let threads =
        opts.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let databases = &mut found.databases;
    // opencode's sessions are read on the writing thread, from its one open database.
    let read_files = |i: usize| match list[i].place {
        read::Place::Files(_) => Some(read::read(&list[i], None)),
        read::Place::Database => None,
    };
    // Sessions are written in batches of about BATCH each, one transaction per batch: the
    // ledger's writers wait a moment at most, and a commit per session would rewrite the same
    // index pages into the WAL thousands of times. A batch cut short (a kill) leaves its
    // sessions unremembered, to be read again next time.
    const BATCH: std::time::Duration = std::time::Duration::from_millis(200);
    let mut batch: Option<std::time::Instant> = None;
    let written = parallel::in_order(list.len(), threads, read_files, |i, session| {
        if batch.is_none() {
            store.conn().execute_batch("BEGIN IMMEDIATE")?;
            batch = Some(std::time::Instant::now());
        }
        let source = &list[i];
        let mut session = session.unwrap_or_else(|| {
            let db = databases.iter_mut().find(|(a, _)| *a == source.agent).map(|(_, db)| db);
            read::read(source, db)
        });
        let complete = session.unreadable.is_empty();
        summary.unreadable.append(&mut session.unreadable);
        summary.skipped.append(&mut session.skipped);
        if let Some(since) = opts.since {
            session.calls.retain(|c| c.at_ms >= since);
        }
        let sums = summary.agents.entry(source.agent).or_default();
        if !session.calls.is_empty() {
            sums.sessions += 1;
            let sref = SessionRef { id: source.id.clone(), agent: source.agent.name().into() };
            p.calls_added += write_session(store, &sref, &session, catalog, sums)?;
        }
        // Remembered only when every file was read, and all of it: an import `--since` left
        // older calls out, which a later import without it must add.
        if complete && opts.since.is_none() {
            state::save(store, source.agent.name(), &source.id, &source.seen, &session.offsets)?;
        }
        p.files_done += source.files;
        p.bytes_read +=
            source.seen.iter().filter_map(|(_, s)| s.map(|s| s.size as u64)).sum::<u64>();
        if batch.is_some_and(|t| t.elapsed() >= BATCH) {
            store.conn().execute_batch("COMMIT")?;
            batch = None;
        }
        progress(p);
        Ok::<(), rusqlite::Error>(())
    });
    if batch.is_some() {
        match &written {
            Ok(()) => store.conn().execute_batch("COMMIT")?,
            Err(_) => {
                let _ = store.conn().execute_batch("ROLLBACK");
            }
        }
    }
    written?;
    Ok(summary)
}

/// The sessions whose files changed since the last import (the others counted as unchanged),
/// prepared, in the order they are written.
fn changed_sources(
    store: &Store,
    sources: Vec<read::Source>,
    agents: &[Profile],
    summary: &mut Summary,
) -> rusqlite::Result<Vec<read::Source>> {
    let remembered = state::Remembered::load(store)?;
    let mut list = Vec::new();
    for source in sources {
        if remembered.unchanged(source.agent.name(), &source.id, &source.seen) {
            summary.files_unchanged += source.files;
        } else {
            list.push(source);
        }
    }
    list.iter_mut().for_each(read::prepare);
    // Oldest first within an agent: when a call is in several sessions (a Claude Code fork
    // starts with a copy of its parent's), the older one owns it.
    let rank = |p: Profile| agents.iter().position(|a| *a == p);
    list.sort_by(|a, b| {
        (rank(a.agent), a.started_ms, &a.id).cmp(&(rank(b.agent), b.started_ms, &b.id))
    });
    Ok(list)
}

/// The counts of a call as the ledger keeps them: input, cache read, 5-minute and 1-hour cache
/// writes, output, thought; model; modifiers.
#[derive(Debug, PartialEq, Eq)]
struct Counts([i64; 6], Option<String>, Option<String>);

impl Counts {
    fn of(r: &acp_usage_core::TokenRecord) -> Counts {
        let n = |v: u64| v as i64;
        Counts(
            [
                n(r.input),
                n(r.cache_read),
                n(r.cache_write_5m),
                n(r.cache_write_1h),
                n(r.output),
                n(r.thought),
            ],
            r.model.clone(),
            r.modifiers.to_text(),
        )
    }
}

/// A transcript's call as the ledger's writer takes it, priced with the relay's rule.
fn accounted(c: &read::ImportCall, catalog: &Catalog) -> AccountedCall {
    let priced = price_call(&c.record, None, 1, catalog);
    AccountedCall {
        record: c.record.clone(),
        calls: 1,
        role: c.role,
        provider: priced.provider,
        source: Source::Transcript,
        cost: priced.cost,
        cost_stated: priced.stated,
        modifiers_unpriced: priced.modifiers_unpriced,
        key: Some(c.key.clone()),
        in_turn: true,
    }
}

/// Which of `keys` the ledger holds, in any session (through the index on `calls.key`, schema
/// 5: a session read again costs a look-up of its own keys, not a load of the ledger's).
fn known_keys<'k>(
    store: &Store,
    keys: impl Iterator<Item = &'k str>,
) -> rusqlite::Result<HashSet<String>> {
    const BATCH: usize = 500;
    let keys: Vec<&str> = keys.collect();
    let mut known = HashSet::new();
    for chunk in keys.chunks(BATCH) {
        let marks = vec!["?"; chunk.len()].join(",");
        let mut stmt = store.conn().prepare_cached(&format!(
            "SELECT key FROM calls WHERE key IS NOT NULL AND key IN ({marks})"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(chunk), |r| r.get::<_, String>(0))?;
        for key in rows {
            known.insert(key?);
        }
    }
    Ok(known)
}

/// Writes one session's calls that the ledger does not have (see the module's rules); returns
/// how many were added.
fn write_session(
    store: &mut Store,
    sref: &SessionRef,
    session: &read::Session,
    catalog: &Catalog,
    sums: &mut AgentSummary,
) -> rusqlite::Result<u64> {
    let own: HashSet<&str> = session.calls.iter().map(|c| c.key.as_str()).collect();
    // Rule 1: the keys the ledger has, in any session.
    let keys = known_keys(store, own.iter().copied())?;
    // What an earlier import wrote of this session, by key: a call read again with other
    // counts has grown since (and is updated); the relay's rows are never touched.
    let imported = imported_counts(store, sref)?;
    // Rule 2: the relay's rows of this session that no transcript key claims.
    let mut unmatched = unmatched_relay_rows(store, sref, &own)?;
    // Rule 3: the turns the relay settled from estimates or sums, as time windows. A turn
    // recorded call by call (exact rows of one call each) is left to rules 1 and 2: a transcript
    // call that matches none of its rows is one the relay did not see (qwen-code's memory
    // extraction, without the tap).
    let turns = relay_turns(store, sref)?;
    const SLACK_MS: i64 = 1000;
    let in_relay_turn =
        |at: i64| turns.iter().any(|(a, b)| at >= a - SLACK_MS && at <= b + SLACK_MS);
    let mut calls = Vec::new();
    let mut times = Vec::new();
    let mut grown = Vec::new();
    for c in &session.calls {
        if let Some(known) = imported.get(&c.key) {
            if *known == Counts::of(&c.record) {
                sums.calls_present += 1;
            } else {
                grown.push(accounted(c, catalog));
            }
            continue;
        }
        if keys.contains(&c.key) {
            sums.calls_present += 1;
            continue;
        }
        let counts = (c.record.input as i64, c.record.cache_read as i64, c.record.output as i64);
        if let Some(i) = unmatched.iter().position(|u| *u == counts) {
            unmatched.remove(i);
            sums.calls_present += 1;
            continue;
        }
        if in_relay_turn(c.at_ms) {
            sums.calls_present += 1;
            continue;
        }
        calls.push(accounted(c, catalog));
        times.push(c.at_ms);
    }
    if !grown.is_empty() {
        sums.calls_updated += store.update_imported(sref, &grown)? as u64;
    }
    let first = session.calls.iter().map(|c| c.at_ms).min().unwrap_or(0);
    let last = session.calls.iter().map(|c| c.at_ms).max().unwrap_or(first);
    let mut added = 0;
    if !calls.is_empty() {
        added = store.calls(
            sref,
            Settled { calls: &calls, times: Some(&times), ..Default::default() },
            Origin::Import,
            last,
        )? as u64;
        // Every key was checked above: a row not added is one that another process wrote
        // meanwhile.
        sums.calls_present += calls.len() as u64 - added;
        for c in &calls {
            sums.tokens += &c.record;
            match c.cost {
                Some(cost) => sums.cost += cost,
                None => sums.unpriced += 1,
            }
        }
        if added > 0 {
            sums.sessions_added += 1;
        }
        sums.calls_added += added;
    }
    // What the ledger lacks of the session; nothing the relay recorded is overwritten.
    let model = session.calls.iter().rev().find_map(|c| c.record.model.clone());
    store.conn().execute(
        "UPDATE sessions SET project = COALESCE(project, ?2), title = COALESCE(title, ?3),
            model = COALESCE(model, ?4), first_seen = MIN(first_seen, ?5),
            last_seen = MAX(last_seen, ?6)
         WHERE session_id = ?1",
        params![sref.id, session.project, session.title, model, first, last],
    )?;
    Ok(added)
}

/// What an earlier import wrote of session `sref`, by key.
fn imported_counts(store: &Store, sref: &SessionRef) -> rusqlite::Result<HashMap<String, Counts>> {
    let mut stmt = store.conn().prepare(
        "SELECT c.key, c.input, c.cache_read, c.cache_write_5m, c.cache_write_1h, c.output,
                c.thought, c.model, c.modifiers
         FROM calls c JOIN sessions s ON s.id = c.session
         WHERE s.session_id = ?1 AND c.origin = 'import' AND c.key IS NOT NULL",
    )?;
    let rows = stmt.query_map([&sref.id], |r| {
        let counts = Counts(
            [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?],
            r.get(7)?,
            r.get(8)?,
        );
        Ok((r.get::<_, String>(0)?, counts))
    })?;
    rows.collect()
}

/// The relay's rows of session `sref` that no key in `own` claims: their input, cache read and
/// output, oldest first.
fn unmatched_relay_rows(
    store: &Store,
    sref: &SessionRef,
    own: &HashSet<&str>,
) -> rusqlite::Result<Vec<(i64, i64, i64)>> {
    let mut stmt = store.conn().prepare(
        "SELECT c.key, c.input, c.cache_read, c.output FROM calls c
         JOIN sessions s ON s.id = c.session
         WHERE s.session_id = ?1 AND c.origin = 'relay' ORDER BY c.at, c.id",
    )?;
    let rows = stmt.query_map([&sref.id], |r| {
        Ok((r.get::<_, Option<String>>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
    })?;
    let rows: Vec<(Option<String>, (i64, i64, i64))> = rows.collect::<Result<_, _>>()?;
    Ok(rows
        .into_iter()
        .filter(|(key, _)| key.as_deref().is_none_or(|k| !own.contains(k)))
        .map(|(_, counts)| counts)
        .collect())
}

/// The turns of session `sref` the relay settled from estimates or sums: their start and end.
fn relay_turns(store: &Store, sref: &SessionRef) -> rusqlite::Result<Vec<(i64, i64)>> {
    let mut stmt = store.conn().prepare(
        "SELECT t.started, COALESCE(t.ended, t.started) FROM turns t
         JOIN sessions s ON s.id = t.session
         WHERE s.session_id = ?1 AND EXISTS (
            SELECT 1 FROM calls c WHERE c.turn = t.id AND (c.exact = 0 OR c.calls > 1))",
    )?;
    let rows = stmt.query_map([&sref.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Parses `--since`: a date (`2026-01-31` or `20260131`, local midnight) or an RFC 3339 time,
/// into Unix ms.
pub fn parse_since(s: &str) -> Result<i64, String> {
    if let Some(ms) = acp_usage_core::transcript::parse_timestamp(s) {
        return Ok(ms);
    }
    let date = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .or_else(|_| chrono::NaiveDate::parse_from_str(s.trim(), "%Y%m%d"))
        .map_err(|_| format!("`{s}` is not a date (YYYY-MM-DD) or an RFC 3339 time"))?;
    let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
    let local = midnight
        .and_local_timezone(chrono::Local)
        .earliest()
        .ok_or_else(|| format!("{s}: no local midnight that day"))?;
    Ok(local.timestamp_millis())
}
