//! The ledger's tables, and the migrations that bring any earlier version of the file to the
//! current one (`PRAGMA user_version` is the version).
//!
//! Token columns follow [`acp_usage_core::TokenRecord`]: `input` counts every prompt-side token,
//! cache reads and writes included; `output` counts every generated token, thoughts included.
//! Times are Unix milliseconds. Call ids only grow (`AUTOINCREMENT`), in commit order: the OTLP
//! exporter's cursor per destination (`exports.acked`) relies on it. A call row with `provisional` set (the writing run's token) was
//! seen during a turn still in progress; the turn's settled calls replace it at the turn's end,
//! and a run killed before then leaves it, so that its calls are not lost.

use rusqlite::Connection;

/// Each migration takes the file from the version before it to its own (index + 1).
const MIGRATIONS: &[&str] = &[
    // 1: sessions, turns, calls, and what `learned.json` held.
    "
    CREATE TABLE sessions (
        id            INTEGER PRIMARY KEY,
        session_id    TEXT NOT NULL UNIQUE,
        agent         TEXT NOT NULL,
        agent_name    TEXT,
        agent_version TEXT,
        project       TEXT,
        title         TEXT,
        model         TEXT,
        first_seen    INTEGER NOT NULL,
        last_seen     INTEGER NOT NULL,
        turns         INTEGER NOT NULL DEFAULT 0,
        used          INTEGER,
        size          INTEGER,
        pid           INTEGER,
        carried       TEXT
    );
    CREATE INDEX sessions_last_seen ON sessions(last_seen);
    CREATE TABLE turns (
        id          INTEGER PRIMARY KEY,
        session     INTEGER NOT NULL REFERENCES sessions(id),
        started     INTEGER NOT NULL,
        ended       INTEGER,
        stop_reason TEXT
    );
    CREATE INDEX turns_session ON turns(session);
    CREATE TABLE calls (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        session        INTEGER NOT NULL REFERENCES sessions(id),
        turn           INTEGER REFERENCES turns(id),
        at             INTEGER NOT NULL,
        role           TEXT NOT NULL,
        model          TEXT,
        provider       TEXT,
        input          INTEGER NOT NULL,
        cache_read     INTEGER NOT NULL,
        cache_write_5m INTEGER NOT NULL,
        cache_write_1h INTEGER NOT NULL,
        output         INTEGER NOT NULL,
        thought        INTEGER NOT NULL,
        calls          INTEGER NOT NULL DEFAULT 1,
        cost           REAL,
        cost_stated    INTEGER NOT NULL DEFAULT 0,
        exact          INTEGER NOT NULL,
        source         TEXT NOT NULL,
        origin         TEXT NOT NULL,
        key            TEXT,
        provisional    TEXT
    );
    CREATE UNIQUE INDEX calls_key ON calls(session, key) WHERE key IS NOT NULL;
    CREATE INDEX calls_at ON calls(at);
    CREATE INDEX calls_session ON calls(session);
    CREATE TABLE agents (
        key      TEXT PRIMARY KEY,
        baseline INTEGER,
        size     INTEGER,
        updated  INTEGER NOT NULL
    );
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE exports (
        destination TEXT PRIMARY KEY,
        acked       INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until INTEGER
    );
    ",
    // 2: when the process in `pid` started, so a pid the system gave to a new process after
    // a relay was killed does not keep that relay's sessions "running".
    "
    ALTER TABLE sessions ADD COLUMN pid_start INTEGER;
    ",
    // 3: subscription windows, one row per observation (`used_percent` 0-100, `resets_at`
    // Unix seconds, `limit_id` '' when the provider has no limit families).
    "
    CREATE TABLE limits (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        provider       TEXT NOT NULL,
        limit_id       TEXT NOT NULL DEFAULT '',
        window         TEXT NOT NULL,
        window_minutes INTEGER,
        used_percent   REAL NOT NULL,
        resets_at      INTEGER,
        status         TEXT,
        source         TEXT NOT NULL,
        session        TEXT,
        at             INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX limits_observation ON limits(provider, limit_id, window, source, at);
    CREATE INDEX limits_at ON limits(at);
    ",
    // 4: the request modifiers a call was billed with (`fast`, `us_only`, comma-separated; NULL
    // for a standard call), so a report can tell a fast-mode call's cost from a standard one's.
    "
    ALTER TABLE calls ADD COLUMN modifiers TEXT;
    ",
    // 5: what `import` read of each transcript file, so the next import reads only what changed
    // (`commands/import/state.rs`): identity (`dev`, `ino`), `size`, `mtime` (Unix ns; for
    // opencode's sessions, their last update in Unix ms), `offset` (the byte after the last
    // complete line read) and `head` (a hash of the first 4 KiB of a document its agent
    // rewrites in place; NULL for appended files). And call keys indexed across sessions: a
    // session read again asks whether the ledger has its keys in any session.
    "
    CREATE INDEX calls_by_key ON calls(key) WHERE key IS NOT NULL;
    CREATE TABLE import_files (
        agent   TEXT NOT NULL,
        session TEXT NOT NULL,
        path    TEXT NOT NULL,
        dev     INTEGER NOT NULL,
        ino     INTEGER NOT NULL,
        size    INTEGER NOT NULL,
        mtime   INTEGER NOT NULL,
        offset  INTEGER NOT NULL,
        head    INTEGER,
        PRIMARY KEY (agent, session, path)
    );
    ",
    // 6: the calls a run keeps provisionally, indexed: every relay asks for those of runs that
    // were killed when it opens the ledger, which without it read the whole table (30 ms for
    // 400,000 calls, at every agent start).
    "
    CREATE INDEX calls_provisional ON calls(provisional) WHERE provisional IS NOT NULL;
    ",
    // 7: whose each window is (`account`: `acct:…`, `org:…` or a keyed credential fingerprint
    // `key:…`; '' for observations made before, whose account nobody knows), and one row per
    // window with its latest observation and the first of its current period, so a relay
    // loads the windows at start without reading a year of observations. Windows already
    // observed begin there with their latest observation as their first. And the credits and
    // plan a provider states (Codex's; a balance in its own unit, as text), one row each time;
    // and the account a response named for a credential fingerprint (`account_aliases`).
    "
    ALTER TABLE limits ADD COLUMN account TEXT NOT NULL DEFAULT '';
    CREATE TABLE limit_windows (
        account        TEXT NOT NULL,
        provider       TEXT NOT NULL,
        limit_id       TEXT NOT NULL,
        window         TEXT NOT NULL,
        window_minutes INTEGER,
        used_percent   REAL NOT NULL,
        resets_at      INTEGER,
        status         TEXT,
        source         TEXT NOT NULL,
        at             INTEGER NOT NULL,
        first_at       INTEGER NOT NULL,
        first_used     REAL NOT NULL,
        PRIMARY KEY (account, provider, limit_id, window)
    );
    CREATE TABLE credits (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        account     TEXT NOT NULL,
        provider    TEXT NOT NULL,
        has_credits INTEGER,
        unlimited   INTEGER,
        balance     TEXT,
        plan_type   TEXT,
        at          INTEGER NOT NULL
    );
    CREATE INDEX credits_at ON credits(at);
    CREATE TABLE account_aliases (
        credential TEXT PRIMARY KEY,
        account    TEXT NOT NULL,
        at         INTEGER NOT NULL
    );
    INSERT INTO limit_windows
    SELECT '', provider, limit_id, window, window_minutes, used_percent, resets_at, status,
           source, at, at, used_percent
    FROM limits l
    WHERE id = (SELECT id FROM limits m
                WHERE m.provider = l.provider AND m.limit_id = l.limit_id AND m.window = l.window
                ORDER BY at DESC, id DESC LIMIT 1);
    ",
];

/// The version this build writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version the file is at: 0 for a file no acp-usage has written a schema to yet.
/// Opening for reading never migrates, so readers of an older file ask this.
pub fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings the file to [`VERSION`]. Several processes may open a new file at once: the
/// migration runs in an immediate transaction, and each re-reads the version inside it.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let version = self::version(conn)?;
    if version == VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version = self::version(&tx)?;
    if version > VERSION {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
            Some(format!(
                "the ledger was written by a newer acp-usage (schema {version}, this one knows {VERSION})"
            )),
        ));
    }
    for sql in &MIGRATIONS[version as usize..] {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory ledger as version `v` of the schema left it.
    fn ledger_at(v: usize) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..v] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", v as i64).unwrap();
        conn
    }

    #[test]
    fn a_version_3_ledger_gains_the_modifiers_column_and_keeps_its_calls() {
        let mut conn = ledger_at(3);
        conn.execute_batch(
            "INSERT INTO sessions(session_id, agent, first_seen, last_seen) VALUES ('s', 'a', 0, 0);
             INSERT INTO calls(session, at, role, input, cache_read, cache_write_5m,
                 cache_write_1h, output, thought, exact, source, origin)
             VALUES (1, 0, 'main', 10, 0, 0, 0, 5, 0, 1, 'tap', 'relay');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn).unwrap(), VERSION);
        const { assert!(VERSION >= 4) };
        conn.execute("UPDATE calls SET modifiers = 'fast' WHERE input = 10", []).unwrap();
        let (input, modifiers): (i64, Option<String>) = conn
            .query_row("SELECT input, modifiers FROM calls", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((input, modifiers.as_deref()), (10, Some("fast")));
    }

    #[test]
    fn a_version_4_ledger_gains_the_import_files_table() {
        let mut conn = ledger_at(4);
        migrate(&mut conn).unwrap();
        const { assert!(VERSION >= 5) };
        conn.execute(
            "INSERT INTO import_files(agent, session, path, dev, ino, size, mtime, offset)
             VALUES ('claude', 's', '/t.jsonl', 1, 2, 3, 4, 3)",
            [],
        )
        .unwrap();
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM import_files", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn a_version_6_ledgers_windows_are_kept_and_each_has_its_latest_row() {
        let mut conn = ledger_at(6);
        conn.execute_batch(
            "INSERT INTO limits(provider, window, window_minutes, used_percent, resets_at,
                 source, at)
             VALUES ('anthropic', 'five_hour', 300, 40, 1000, 'tap', 1),
                    ('anthropic', 'five_hour', 300, 60, 1000, 'tap', 2),
                    ('openai', 'primary', 10080, 5, 9000, 'tap', 3);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn).unwrap(), VERSION);
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM limits", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 3, "every observation kept");
        let rows: Vec<(String, f64, i64)> = conn
            .prepare("SELECT window, used_percent, first_at FROM limit_windows ORDER BY window")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, [("five_hour".into(), 60.0, 2), ("primary".into(), 5.0, 3)]);
    }

    #[test]
    fn the_killed_runs_calls_are_found_through_an_index() {
        let mut conn = ledger_at(5);
        migrate(&mut conn).unwrap();
        // The query `Store::adopt_orphans` runs at every relay start.
        let plan: Vec<String> = conn
            .prepare(
                "EXPLAIN QUERY PLAN
                 SELECT DISTINCT provisional FROM calls WHERE provisional IS NOT NULL",
            )
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(plan.iter().any(|step| step.contains("calls_provisional")), "{plan:?}");
        assert!(!plan.iter().any(|step| step.starts_with("SCAN calls")), "{plan:?}");
    }
}
