//! The ledger file: opening it (WAL, a busy timeout, the schema migrated, `learned.json`
//! imported once), writing what the relay and `import` settled, and the reads the relay needs
//! (a reopened session's carried figures, learned baselines, what was spent since a time).
//!
//! Every write is one short transaction, so several acp-usage processes write at once (SQLite
//! serialises them; a writer waits up to [`BUSY_TIMEOUT`] for another) and a `kill -9` loses at
//! most what had not been handed to SQLite yet.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use acp_usage_core::AccountedCall;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::learned::{Entry, Learned, SessionEntry};
use super::schema;

/// How long a write waits for another process's write to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Which session a write is about, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    /// The ACP session id.
    pub id: String,
    /// The agent's profile name (`claude`, `codex`, ...).
    pub agent: String,
}

/// What is known of a session besides its calls (each `None` keeps what the ledger has).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionInfo {
    /// `initialize`'s `agentInfo.name`.
    pub agent_name: Option<String>,
    /// `initialize`'s `agentInfo.version`.
    pub agent_version: Option<String>,
    /// The session's working directory.
    pub project: Option<String>,
    /// Its title, when the agent gave one.
    pub title: Option<String>,
    /// The model in use.
    pub model: Option<String>,
}

/// A session's figures after a turn or a call between turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// What a later run continues from.
    pub carried: SessionEntry,
    /// `used` and `size` as last sent to the editor.
    pub used: u64,
    /// See `used`.
    pub size: u64,
    /// The model in use, when known.
    pub model: Option<String>,
}

/// A turn as the relay saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRow {
    /// When the prompt was sent (Unix ms).
    pub started: i64,
    /// When its result came (Unix ms).
    pub ended: i64,
    /// The result's `stopReason`, or `error`.
    pub stop_reason: Option<String>,
}

/// What [`Store::calls`] records for a session: settled calls, with the turn they end, their
/// times and the session's figures after them when the writer has them (the relay has a turn
/// and figures, `import` has times). Named fields, because three of them are optional and
/// a call site reads better saying which it gives.
#[derive(Debug, Default, Clone, Copy)]
pub struct Settled<'a> {
    /// The turn the calls belong to, recorded with them.
    pub turn: Option<&'a TurnRow>,
    pub calls: &'a [AccountedCall],
    /// Each call's own time, in the order of `calls`; else they are stamped with `at`.
    pub times: Option<&'a [i64]>,
    /// The session's figures after the calls.
    pub figures: Option<&'a Figures>,
}

/// Where a call row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A session acp-usage relayed.
    Relay,
    /// `acp-usage import`, from a transcript on disk.
    Import,
}

/// An open ledger.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    /// This run's token for provisional rows (see [`Store::provisional`]).
    run: String,
}

/// A write transaction of the caller's own (`BEGIN IMMEDIATE`, as every writer of the ledger
/// takes one), or a savepoint inside one already open on the connection: `import` opens one
/// around a batch of sessions, so that its thousands of small writes commit a few times rather
/// than once each (every commit rewrites the index pages it touched into the WAL).
#[derive(Debug)]
pub enum WriteTx<'c> {
    Own(Transaction<'c>),
    Nested(rusqlite::Savepoint<'c>),
}

impl<'c> WriteTx<'c> {
    pub fn begin(conn: &'c mut Connection) -> rusqlite::Result<WriteTx<'c>> {
        if conn.is_autocommit() {
            conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map(WriteTx::Own)
        } else {
            conn.savepoint().map(WriteTx::Nested)
        }
    }

    pub fn commit(self) -> rusqlite::Result<()> {
        match self {
            WriteTx::Own(tx) => tx.commit(),
            WriteTx::Nested(sp) => sp.commit(),
        }
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        match self {
            WriteTx::Own(tx) => tx,
            WriteTx::Nested(sp) => sp,
        }
    }
}

impl Store {
    /// Opens (creating when missing) the ledger at `path`, migrated to this build's schema.
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers never wait for a writer, and a crash loses no committed transaction. The
        // mode is kept in the file; switching a new file to it takes a lock that SQLite does not
        // wait for, so two processes creating the ledger at once retry instead of failing.
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            retry_busy(|| {
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            })?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&mut conn)?;
        Ok(Store { conn, run: run_token() })
    }

    /// Opens the ledger for reading only (never creates it, never migrates it).
    pub fn open_read(path: &Path) -> rusqlite::Result<Store> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Ok(Store { conn, run: run_token() })
    }

    /// The connection, for queries of the commands that read the ledger.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, for a transaction of a sink that keeps its own state in the ledger (the
    /// OTLP exporter's cursor).
    pub fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Imports the old `learned.json` once per ledger: its baselines, windows and sessions'
    /// carried figures. Entries the ledger already has win.
    pub fn import_learned(&mut self, learned: &Learned) -> rusqlite::Result<bool> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done: Option<String> = tx
            .query_row("SELECT value FROM meta WHERE key = 'learned_json'", [], |r| r.get(0))
            .optional()?;
        if done.is_some() {
            return Ok(false);
        }
        for (key, e) in &learned.agents {
            tx.execute(
                "INSERT OR IGNORE INTO agents(key, baseline, size, updated) VALUES (?1, ?2, ?3, 0)",
                params![key, e.baseline.map(|b| b as i64), e.size.map(|s| s as i64)],
            )?;
        }
        for (key, entry) in &learned.sessions {
            // `<profile>/<session id>`.
            let Some((agent, id)) = key.split_once('/') else { continue };
            let at = entry.updated as i64 * 1000;
            let json = serde_json::to_string(entry).expect("session entry serialises");
            tx.execute(
                "INSERT OR IGNORE INTO sessions(session_id, agent, first_seen, last_seen, carried)
                 VALUES (?1, ?2, ?3, ?3, ?4)",
                params![id, agent, at, json],
            )?;
        }
        tx.execute("INSERT INTO meta(key, value) VALUES ('learned_json', 'imported')", [])?;
        tx.commit()?;
        Ok(true)
    }

    /// Records that a session is open in process `pid` (its row made when missing), with the
    /// process's start time so a reused pid is not taken for it.
    pub fn session(
        &mut self,
        s: &SessionRef,
        info: &SessionInfo,
        pid: Option<u32>,
        at: i64,
    ) -> rusqlite::Result<()> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let row = session_row(&tx, s, at)?;
        tx.execute(
            "UPDATE sessions SET
                agent_name = COALESCE(?2, agent_name), agent_version = COALESCE(?3, agent_version),
                project = COALESCE(?4, project), title = COALESCE(?5, title),
                model = COALESCE(?6, model), pid = COALESCE(?7, pid),
                pid_start = CASE WHEN ?7 IS NULL THEN pid_start ELSE ?9 END,
                last_seen = MAX(last_seen, ?8)
             WHERE id = ?1",
            params![
                row,
                info.agent_name,
                info.agent_version,
                info.project,
                info.title,
                info.model,
                pid,
                at,
                pid.and_then(super::process_start)
            ],
        )?;
        tx.commit()
    }

    /// Records settled calls of a session (a turn's, when `turn` is given) and the session's
    /// figures after them, in one transaction. Each call is stamped with its own time when
    /// `times` gives one, else `at`. A call whose key the session already has is not counted
    /// again. Returns how many call rows were added.
    pub fn calls(
        &mut self,
        s: &SessionRef,
        settled: Settled<'_>,
        origin: Origin,
        at: i64,
    ) -> rusqlite::Result<usize> {
        let Settled { turn, calls, times, figures } = settled;
        let tx = WriteTx::begin(&mut self.conn)?;
        let row = session_row(&tx, s, at)?;
        let turn_id = match turn {
            Some(t) => {
                tx.execute(
                    "INSERT INTO turns(session, started, ended, stop_reason) VALUES (?1, ?2, ?3, ?4)",
                    params![row, t.started, t.ended, t.stop_reason],
                )?;
                tx.execute("UPDATE sessions SET turns = turns + 1 WHERE id = ?1", [row])?;
                Some(tx.last_insert_rowid())
            }
            None => None,
        };
        if turn.is_some() {
            // The turn's settled calls replace what this run kept of it as it went.
            tx.execute(
                "DELETE FROM calls WHERE session = ?1 AND provisional = ?2",
                params![row, self.run],
            )?;
        }
        let rows = CallRows { session: row, turn: turn_id, times, origin, provisional: None, at };
        let added = insert_calls(&tx, &rows, calls)?;
        if let Some(f) = figures {
            let json = serde_json::to_string(&f.carried).expect("session entry serialises");
            tx.execute(
                "UPDATE sessions SET carried = ?2, used = ?3, size = ?4,
                    model = COALESCE(?5, model), last_seen = MAX(last_seen, ?6)
                 WHERE id = ?1",
                params![row, json, f.used as i64, f.size as i64, f.model, at],
            )?;
        } else {
            tx.execute(
                "UPDATE sessions SET last_seen = MAX(last_seen, ?2) WHERE id = ?1",
                params![row, at],
            )?;
        }
        tx.commit()?;
        Ok(added)
    }

    /// Replaces the counts, model, modifiers and cost of calls `import` wrote to session `s`
    /// before (by key) with `calls`' (a call read while its session was live, read again once
    /// it grew). Rows the relay wrote are never changed. Returns how many rows changed.
    pub fn update_imported(
        &mut self,
        s: &SessionRef,
        calls: &[AccountedCall],
    ) -> rusqlite::Result<usize> {
        let tx = WriteTx::begin(&mut self.conn)?;
        let mut changed = 0;
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE calls SET model = ?3, provider = ?4, input = ?5, cache_read = ?6,
                    cache_write_5m = ?7, cache_write_1h = ?8, output = ?9, thought = ?10,
                    cost = ?11, cost_stated = ?12, exact = ?13, modifiers = ?14
                 WHERE session = (SELECT id FROM sessions WHERE session_id = ?1) AND key = ?2
                    AND origin = 'import'",
            )?;
            for c in calls {
                let r = &c.record;
                changed += stmt.execute(params![
                    s.id,
                    c.key,
                    r.model,
                    c.provider,
                    r.input as i64,
                    r.cache_read as i64,
                    r.cache_write_5m as i64,
                    r.cache_write_1h as i64,
                    r.output as i64,
                    r.thought as i64,
                    c.cost,
                    c.cost_stated,
                    c.exact(),
                    r.modifiers.to_text(),
                ])?;
            }
        }
        tx.commit()?;
        Ok(changed)
    }

    /// Keeps calls of a turn still in progress, marked as this run's provisional rows: the
    /// turn's settled calls replace them ([`Store::calls`] with its turn), and a run killed
    /// before then leaves them as the best record of those calls.
    pub fn provisional(
        &mut self,
        s: &SessionRef,
        calls: &[AccountedCall],
        at: i64,
    ) -> rusqlite::Result<usize> {
        let tx = WriteTx::begin(&mut self.conn)?;
        let row = session_row(&tx, s, at)?;
        let run = self.run.clone();
        let rows = CallRows {
            session: row,
            turn: None,
            times: None,
            origin: Origin::Relay,
            provisional: Some(&run),
            at,
        };
        let added = insert_calls(&tx, &rows, calls)?;
        tx.commit()?;
        Ok(added)
    }

    /// Settles the provisional rows of runs whose process is gone (killed mid-turn): they are
    /// the best record of those calls, and as settled rows (with new ids) they are exported.
    /// Returns how many rows were settled.
    pub fn adopt_orphans(&mut self) -> rusqlite::Result<usize> {
        let tokens: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare("SELECT DISTINCT provisional FROM calls WHERE provisional IS NOT NULL")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut adopted = 0;
        for token in tokens {
            // `pid:ms` (older runs) or `pid:ms:start`.
            let mut parts = token.split(':');
            let pid = parts.next().and_then(|p| p.parse::<i64>().ok());
            let started = parts.nth(1).and_then(|p| p.parse::<i64>().ok());
            if token == self.run || pid.is_some_and(|pid| super::process_alive(pid, started)) {
                continue;
            }
            let tx =
                self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            const COLS: &str = "session, turn, at, role, model, provider, input, cache_read,
                cache_write_5m, cache_write_1h, output, thought, calls, cost, cost_stated, exact,
                source, origin, key, modifiers";
            tx.execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS orphan AS SELECT * FROM calls WHERE 0;
                 DELETE FROM temp.orphan;",
            )?;
            tx.execute(
                "INSERT INTO temp.orphan SELECT * FROM calls WHERE provisional = ?1",
                [&token],
            )?;
            tx.execute("DELETE FROM calls WHERE provisional = ?1", [&token])?;
            adopted += tx.execute(
                &format!(
                    "INSERT OR IGNORE INTO calls({COLS}) SELECT {COLS} FROM temp.orphan ORDER BY id"
                ),
                [],
            )?;
            tx.commit()?;
        }
        Ok(adopted)
    }

    /// Remembers an agent's and model's baseline or window (each `None` keeps the ledger's).
    pub fn agent(&mut self, key: &str, e: Entry, at: i64) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO agents(key, baseline, size, updated) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(key) DO UPDATE SET baseline = COALESCE(?2, baseline),
                size = COALESCE(?3, size), updated = ?4",
            params![key, e.baseline.map(|b| b as i64), e.size.map(|s| s as i64), at],
        )?;
        Ok(())
    }

    /// The session is no longer open in `pid` (closed, or the process is ending).
    pub fn closed(&mut self, session_id: Option<&str>, pid: u32) -> rusqlite::Result<()> {
        match session_id {
            Some(id) => self.conn.execute(
                "UPDATE sessions SET pid = NULL, pid_start = NULL WHERE session_id = ?1 AND pid = ?2",
                params![id, pid],
            )?,
            None => self.conn.execute(
                "UPDATE sessions SET pid = NULL, pid_start = NULL WHERE pid = ?1",
                [pid],
            )?,
        };
        Ok(())
    }

    /// The editor deleted the session: nothing is carried to a later run (its calls stay, they
    /// were billed).
    pub fn forget(&mut self, session_id: &str) -> rusqlite::Result<()> {
        self.conn
            .execute("UPDATE sessions SET carried = NULL WHERE session_id = ?1", [session_id])?;
        Ok(())
    }

    /// A session's calls in the ledger, by role (every run's, provisional rows of a run still
    /// going included): what `/usage` shows for a session reopened in a new process.
    pub fn roles(&self, session_id: &str) -> rusqlite::Result<acp_usage_core::account::RoleTotals> {
        use acp_usage_core::account::{Role, RoleTotals};
        let mut q = self.conn.prepare(
            "SELECT c.role, SUM(c.calls), SUM(c.input), SUM(c.cache_read),
                    SUM(c.cache_write_5m + c.cache_write_1h), SUM(c.output), SUM(c.thought)
             FROM calls c JOIN sessions s ON s.id = c.session
             WHERE s.session_id = ?1 GROUP BY c.role",
        )?;
        let rows = q.query_map([session_id], |r| {
            let role: String = r.get(0)?;
            let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            let totals = acp_usage_core::TokenTotals {
                calls: n(1)?,
                input: n(2)?,
                cache_read: n(3)?,
                cache_write: n(4)?,
                output: n(5)?,
                thought: n(6)?,
            };
            Ok((role, totals))
        })?;
        let mut out = RoleTotals::default();
        for row in rows {
            let (role, totals) = row?;
            let role = match role.as_str() {
                "main" => Role::Main,
                "subagent" => Role::Subagent,
                "side" => Role::Side,
                _ => continue,
            };
            out.roles.push((role, totals));
        }
        out.roles.sort_by_key(|(r, _)| *r);
        Ok(out)
    }

    /// What an earlier run accounted for a session.
    pub fn carried(&self, session_id: &str) -> rusqlite::Result<Option<SessionEntry>> {
        let json: Option<Option<String>> = self
            .conn
            .query_row("SELECT carried FROM sessions WHERE session_id = ?1", [session_id], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(json.flatten().and_then(|j| serde_json::from_str(&j).ok()))
    }

    /// Every agent's and model's learned baseline and window.
    pub fn agents(&self) -> rusqlite::Result<BTreeMap<String, Entry>> {
        let mut stmt = self.conn.prepare("SELECT key, baseline, size FROM agents")?;
        let rows = stmt.query_map([], |r| {
            let b: Option<i64> = r.get(1)?;
            let s: Option<i64> = r.get(2)?;
            Ok((
                r.get::<_, String>(0)?,
                Entry { baseline: b.map(|b| b as u64), size: s.map(|s| s as u64) },
            ))
        })?;
        rows.collect()
    }

    /// The cost of every call made at or after `since` (Unix ms), every session and process.
    ///
    /// This process's own provisional rows are left out: they are calls of a turn in progress
    /// whose settled rows this process writes at the turn's end, and until those land the
    /// relay counts them from its own pending writes; counted here too, a turn's calls were
    /// counted twice, and a day budget's first crossing went unnoticed.
    pub fn spent_since(&self, since: i64) -> rusqlite::Result<f64> {
        self.conn.query_row(
            "SELECT COALESCE(SUM(cost), 0) FROM calls
             WHERE at >= ?1 AND (provisional IS NULL OR provisional != ?2)",
            params![since, self.run],
            |r| r.get(0),
        )
    }

    /// The cost of a session's calls.
    pub fn session_spent(&self, session_id: &str) -> rusqlite::Result<f64> {
        self.conn.query_row(
            "SELECT COALESCE(SUM(c.cost), 0) FROM calls c JOIN sessions s ON s.id = c.session
             WHERE s.session_id = ?1",
            [session_id],
            |r| r.get(0),
        )
    }
}

/// Runs `f` again while the file is busy or locked, up to [`BUSY_TIMEOUT`]: for the statements
/// SQLite's busy handler does not cover.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match f() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// What tells this run's provisional rows from another's: the process id, the time this token
/// was made, and the process's start time when known (see [`super::process_alive`]).
fn run_token() -> String {
    use std::sync::OnceLock;
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| {
        let pid = std::process::id();
        match super::process_start(pid) {
            Some(start) => format!("{pid}:{}:{start}", super::now_ms()),
            None => format!("{pid}:{}", super::now_ms()),
        }
    })
    .clone()
}

/// The session's row id, the row made when missing.
fn session_row(tx: &Connection, s: &SessionRef, at: i64) -> rusqlite::Result<i64> {
    tx.execute(
        "INSERT OR IGNORE INTO sessions(session_id, agent, first_seen, last_seen) VALUES (?1, ?2, ?3, ?3)",
        params![s.id, s.agent, at],
    )?;
    tx.query_row("SELECT id FROM sessions WHERE session_id = ?1", [&s.id], |r| r.get(0))
}

/// Where [`insert_calls`] puts its rows and how it stamps them.
struct CallRows<'a> {
    session: i64,
    turn: Option<i64>,
    /// Each call's own time, when known; else `at`.
    times: Option<&'a [i64]>,
    origin: Origin,
    /// The run whose provisional rows these are (`None`: settled rows).
    provisional: Option<&'a str>,
    at: i64,
}

fn insert_calls(
    tx: &Connection,
    rows: &CallRows<'_>,
    calls: &[AccountedCall],
) -> rusqlite::Result<usize> {
    let CallRows { session, turn, times, origin, provisional, at } = *rows;
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO calls(session, turn, at, role, model, provider, input, cache_read,
            cache_write_5m, cache_write_1h, output, thought, calls, cost, cost_stated, exact,
            source, origin, key, provisional, modifiers)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                 ?19, ?20, ?21)",
    )?;
    let origin = match origin {
        Origin::Relay => "relay",
        Origin::Import => "import",
    };
    let mut added = 0;
    for (k, c) in calls.iter().enumerate() {
        let r = &c.record;
        let at = times.and_then(|t| t.get(k)).copied().unwrap_or(at);
        added += stmt.execute(params![
            session,
            turn,
            at,
            c.role.as_str(),
            r.model,
            c.provider,
            r.input as i64,
            r.cache_read as i64,
            r.cache_write_5m as i64,
            r.cache_write_1h as i64,
            r.output as i64,
            r.thought as i64,
            c.calls as i64,
            c.cost,
            c.cost_stated,
            c.exact(),
            c.source.as_str(),
            origin,
            c.key,
            provisional,
            r.modifiers.to_text(),
        ])?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acp_usage_core::{Role, Source, TokenRecord};

    fn call(input: u64, key: Option<&str>) -> AccountedCall {
        AccountedCall {
            record: TokenRecord { input, output: 10, ..TokenRecord::default() },
            calls: 1,
            role: Role::Main,
            provider: None,
            source: Source::Tap,
            cost: Some(input as f64 * 1e-6),
            cost_stated: false,
            modifiers_unpriced: false,
            key: key.map(str::to_string),
            in_turn: true,
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("ledger.db")
    }

    fn inputs(store: &Store) -> Vec<(i64, bool)> {
        let mut stmt = store
            .conn()
            .prepare("SELECT input, provisional IS NOT NULL FROM calls ORDER BY input")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn a_calls_modifiers_and_their_exactness_are_stored() {
        let path = scratch("modifiers");
        let s = SessionRef { id: "S".into(), agent: "claude".into() };
        let mut store = Store::open(&path).unwrap();
        let mut fast = call(100, Some("msg_fast"));
        fast.record.modifiers.fast = true;
        // A fast call on a model whose multiplier is unknown: priced at 1x, not exact.
        let mut unknown = call(200, Some("msg_unknown"));
        unknown.record.modifiers.fast = true;
        unknown.modifiers_unpriced = true;
        store.provisional(&s, &[call(50, Some("msg_std")), fast, unknown], 1).unwrap();
        let mut stmt = store
            .conn()
            .prepare("SELECT input, modifiers, exact FROM calls ORDER BY input")
            .unwrap();
        let rows: Vec<(i64, Option<String>, bool)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let fast = Some("fast".to_string());
        assert_eq!(rows, [(50, None, true), (100, fast.clone(), true), (200, fast, false)]);
    }

    #[test]
    fn a_turns_settled_calls_replace_this_runs_provisional_ones_only() {
        let path = scratch("provisional");
        let s = SessionRef { id: "S".into(), agent: "claude".into() };
        // A run killed mid-turn left a call it had seen.
        let mut killed = Store::open(&path).unwrap();
        killed.run = "1:1".into();
        killed.provisional(&s, &[call(100, Some("msg_a"))], 1).unwrap();
        drop(killed);

        let mut store = Store::open(&path).unwrap();
        store.provisional(&s, &[call(200, Some("msg_b")), call(300, None)], 2).unwrap();
        assert_eq!(inputs(&store), vec![(100, true), (200, true), (300, true)]);
        // What was spent leaves out this run's own provisional rows (it still counts them
        // itself), not another run's.
        let spent = store.spent_since(0).unwrap();
        assert!((spent - 100e-6).abs() < 1e-12, "{spent}");
        // The turn ends: its settled calls (the tap's merged with the transcript's) replace this
        // run's provisional rows, keys included; the killed run's row stays.
        let turn = TurnRow { started: 2, ended: 3, stop_reason: Some("end_turn".into()) };
        let settled = [call(200, Some("msg_b")), call(300, None)];
        store
            .calls(
                &s,
                Settled { turn: Some(&turn), calls: &settled, ..Default::default() },
                Origin::Relay,
                3,
            )
            .unwrap();
        assert_eq!(inputs(&store), vec![(100, true), (200, false), (300, false)]);
        let spent = store.spent_since(0).unwrap();
        assert!((spent - 600e-6).abs() < 1e-12, "{spent}");
        // Writing the same keyed call again counts it once.
        store
            .calls(
                &s,
                Settled { calls: &[call(200, Some("msg_b"))], ..Default::default() },
                Origin::Relay,
                4,
            )
            .unwrap();
        assert_eq!(inputs(&store).len(), 3);
    }

    // Process start times come from /proc.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_dead_runs_provisional_rows_are_settled_with_new_ids() {
        let path = scratch("orphans");
        let s = SessionRef { id: "S".into(), agent: "claude".into() };
        let mut dead = Store::open(&path).unwrap();
        // No process has this id (above the kernel's pid limit).
        dead.run = "999999999:1".into();
        dead.provisional(&s, &[call(100, Some("msg_a")), call(200, None)], 1).unwrap();
        // A run whose pid the system has since given to another process (ours, which started
        // at another time).
        let me = std::process::id();
        let started = super::super::process_start(me).unwrap();
        dead.run = format!("{me}:1:{}", started + 1);
        dead.provisional(&s, &[call(250, None)], 1).unwrap();
        drop(dead);
        let mut alive = Store::open(&path).unwrap();
        alive.provisional(&s, &[call(300, None)], 2).unwrap();
        let before: i64 =
            alive.conn().query_row("SELECT MAX(id) FROM calls", [], |r| r.get(0)).unwrap();
        assert_eq!(alive.adopt_orphans().unwrap(), 3);
        // This run's own provisional row is left alone; the dead runs' are settled, after
        // every id the ledger had (an exporter's cursor past them still sees them).
        assert_eq!(inputs(&alive), vec![(100, false), (200, false), (250, false), (300, true)]);
        let min_new: i64 = alive
            .conn()
            .query_row("SELECT MIN(id) FROM calls WHERE provisional IS NULL", [], |r| r.get(0))
            .unwrap();
        assert!(min_new > before);
        assert_eq!(alive.adopt_orphans().unwrap(), 0);
    }

    #[test]
    fn a_new_ledger_opened_by_several_writers_at_once_opens_for_each() {
        for round in 0..5 {
            let path = scratch(&format!("fresh-{round}"));
            std::thread::scope(|scope| {
                let opens: Vec<_> = (0..6)
                    .map(|_| {
                        let path = path.clone();
                        scope.spawn(move || Store::open(&path).map(|_| ()))
                    })
                    .collect();
                for o in opens {
                    o.join().unwrap().expect("every writer opens the new ledger");
                }
            });
        }
    }

    #[test]
    fn two_connections_write_at_once_and_lose_nothing() {
        let path = scratch("concurrent");
        Store::open(&path).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4 {
                let path = path.clone();
                scope.spawn(move || {
                    let mut store = Store::open(&path).unwrap();
                    let s = SessionRef { id: format!("S{t}"), agent: "codex".into() };
                    for i in 0..50 {
                        store
                            .calls(
                                &s,
                                Settled { calls: &[call(1, None)], ..Default::default() },
                                Origin::Relay,
                                i,
                            )
                            .unwrap();
                    }
                });
            }
        });
        let n: i64 = Store::open_read(&path)
            .unwrap()
            .conn()
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 200);
    }
}
