//! opencode's session store: a SQLite database (WAL mode) that opencode (1.18) writes as a
//! session runs, read here strictly read-only.
//!
//! What matters of its schema (research/agents-usage.md §3.7, checked against 1.18.33):
//! - `session(id, parent_id, ...)`: a subagent (the `task` tool) runs in a child session whose
//!   `parent_id` is the session that called it;
//! - `message(id, session_id, time_created, time_updated, data)`: one row per user message and
//!   one per assistant message, i.e. per model call. `data` is JSON: `role`, `time.created`,
//!   `time.completed` (once the call and its tools are done), `finish` (`stop`, `tool-calls`,
//!   ...), `modelID`, `providerID`, `cost`, and `tokens {input, output, reasoning, cache {read,
//!   write}}` with Anthropic's convention whatever the provider: `input` leaves the cache out,
//!   `output` leaves reasoning out;
//! - `part(id, message_id, session_id, ..., data)`: a message's pieces; a user message's
//!   `{"type":"text","text":...}` parts hold the prompt.
//!
//! An assistant row is written when its call starts, with zero tokens; the counts arrive when the
//! call's step finishes (a tool it asked for has run by then), `time.completed` a moment later.
//! Every row of a turn is committed before opencode answers `session/prompt`. The title that
//! opencode generates with a small model is recorded nowhere but the session's title.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_usage_core::TokenRecord;
use acp_usage_core::transcript::{Call, Event};
use anyhow::Context as _;
use rusqlite::{Connection, OpenFlags};
use serde::Deserialize;

/// How long a read waits for opencode's write lock (a WAL reader rarely needs to).
const BUSY_TIMEOUT: Duration = Duration::from_millis(200);

/// Rows updated this long before the newest one seen are read again: opencode's clock stamps a
/// row before its transaction commits, so a row may become visible after a newer-stamped one.
const SLACK_MS: i64 = 2_000;

/// opencode's database, followed for one or more sessions.
#[derive(Debug)]
pub struct OpencodeDb {
    path: PathBuf,
    conn: Connection,
    sessions: HashMap<String, Cursor>,
}

/// What was read of one session (and its child sessions) so far.
#[derive(Debug, Default)]
struct Cursor {
    /// The newest `time_updated` seen; `None` before the first read.
    newest: Option<i64>,
    /// The record last reported per assistant message.
    calls: HashMap<String, TokenRecord>,
    /// User messages already reported as prompts.
    prompts: HashSet<String>,
    /// User messages whose text was not written yet, to report when it is.
    pending_prompts: Vec<(String, Option<i64>)>,
    /// Assistant messages whose end of turn was reported.
    ended: HashSet<String>,
}

/// A session of the main agent as `session` lists it (see [`OpencodeDb::root_sessions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSession {
    /// opencode's session id (the ACP session id).
    pub id: String,
    /// Its working directory.
    pub directory: Option<String>,
    /// Its title (opencode generates one after the first prompt).
    pub title: Option<String>,
    /// When it was created, Unix ms.
    pub created_ms: i64,
    /// When it last changed, Unix ms.
    pub updated_ms: i64,
}

/// A `message` row.
#[derive(Debug)]
struct Row {
    id: String,
    session: String,
    time_updated: i64,
    data: String,
    /// When the message's session was created.
    session_created: i64,
}

/// The part of a message's `data` that usage needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageData {
    role: String,
    #[serde(default)]
    time: Times,
    #[serde(default)]
    finish: Option<String>,
    #[serde(default, rename = "modelID")]
    model_id: Option<String>,
    #[serde(default)]
    tokens: Option<Tokens>,
    #[serde(default, rename = "parentID")]
    parent_id: Option<String>,
    /// A compaction's summary message.
    #[serde(default)]
    summary: Option<serde_json::Value>,
    #[serde(default)]
    mode: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Times {
    #[serde(default)]
    created: Option<i64>,
    #[serde(default)]
    completed: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct Tokens {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    reasoning: u64,
    #[serde(default)]
    cache: CacheTokens,
}

#[derive(Debug, Default, Deserialize)]
struct CacheTokens {
    #[serde(default)]
    read: u64,
    #[serde(default)]
    write: u64,
}

impl Tokens {
    fn record(&self, model: Option<&str>) -> TokenRecord {
        let mut rec = TokenRecord::from_anthropic(
            self.input,
            self.cache.read,
            self.cache.write,
            0,
            self.output + self.reasoning,
        );
        rec.thought = self.reasoning;
        rec.model = model.map(str::to_string);
        rec
    }
}

/// A session and its descendants (subagents may start subagents).
const MESSAGES: &str = "
    WITH RECURSIVE tree(id) AS (
        SELECT ?1
        UNION SELECT s.id FROM session s JOIN tree t ON s.parent_id = t.id
    )
    SELECT m.id, m.session_id, m.time_updated, m.data, s.time_created
    FROM message m JOIN session s ON s.id = m.session_id
    WHERE m.session_id IN tree AND m.time_updated >= ?2
    ORDER BY m.time_created, m.id";

const PROMPT_TEXT: &str = "SELECT data FROM part WHERE message_id = ?1 ORDER BY id";

impl OpencodeDb {
    /// Opens the database read-only. It must exist (opencode creates it on its first session).
    pub fn open(path: &Path) -> anyhow::Result<OpencodeDb> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = format!("file:{}?mode=ro", uri_path(path));
        let conn = Connection::open_with_flags(&uri, flags)
            .with_context(|| format!("opening {} read-only", path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // The schema is opencode's; a missing table means a format this reader does not know.
        let known: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('session', 'message', 'part')",
            [],
            |row| row.get(0),
        )?;
        anyhow::ensure!(known == 3, "{} has no opencode session tables", path.display());
        Ok(OpencodeDb { path: path.to_path_buf(), conn, sessions: HashMap::new() })
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every session that is not a subagent's (what `acp-usage import` reads, each with
    /// [`OpencodeDb::read_new`]), oldest first. Its last update is the latest of its own, its
    /// subagents' sessions' and every message's of them (a message's counts are written when its
    /// answer ends, which need not touch the session's row): `import` reads a session again
    /// only when this moved.
    pub fn root_sessions(&self) -> anyhow::Result<Vec<RootSession>> {
        let mut stmt = self.conn.prepare(
            "WITH RECURSIVE tree(id, root) AS (
                SELECT id, id FROM session WHERE parent_id IS NULL
                UNION SELECT s.id, t.root FROM session s JOIN tree t ON s.parent_id = t.id
             ),
             latest(root, t) AS (
                SELECT t.root, s.time_updated FROM tree t JOIN session s ON s.id = t.id
                UNION ALL
                SELECT t.root, MAX(m.time_updated) FROM tree t JOIN message m ON m.session_id = t.id
                GROUP BY t.root
             )
             SELECT s.id, s.directory, s.title, s.time_created, MAX(l.t) FROM session s
             JOIN latest l ON l.root = s.id
             WHERE s.parent_id IS NULL GROUP BY s.id ORDER BY s.time_created, s.id",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok(RootSession {
                id: row.get(0)?,
                directory: row.get(1)?,
                title: row.get(2)?,
                created_ms: row.get(3)?,
                updated_ms: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Events for `session` (and its child sessions, as subagent calls: `main` false) written or
    /// updated since the last call; the first call returns the whole history.
    pub fn read_new(&mut self, session: &str, out: &mut Vec<Event>) -> anyhow::Result<()> {
        let cursor = self.sessions.entry(session.to_string()).or_default();
        let since = cursor.newest.map_or(i64::MIN, |t| t.saturating_sub(SLACK_MS));
        // One short read transaction: a consistent view, no lock kept between calls.
        let tx = self.conn.unchecked_transaction()?;
        let parsed = messages(&tx, session, since)?;
        // A user message whose text is not written yet counts as a prompt once its answer
        // has started.
        let answered: HashSet<&str> =
            parsed.iter().filter_map(|(_, d)| d.parent_id.as_deref()).collect();
        let text_of = |id: &str| -> anyhow::Result<Option<String>> {
            let mut stmt = tx.prepare_cached(PROMPT_TEXT)?;
            let parts = stmt.query_map([id], |row| row.get::<_, String>(0))?;
            let mut text = String::new();
            for part in parts {
                let part: serde_json::Value = serde_json::from_str(&part?).unwrap_or_default();
                if part["type"] == "text" && part["synthetic"] != true {
                    text.push_str(part["text"].as_str().unwrap_or(""));
                }
            }
            Ok((!text.is_empty()).then_some(text))
        };

        // Prompts left pending by the last read come first: they precede everything newer.
        let pending = std::mem::take(&mut cursor.pending_prompts);
        for (id, at_ms) in pending {
            if cursor.prompts.contains(&id) {
                continue;
            }
            match text_of(&id)? {
                Some(text) => {
                    cursor.prompts.insert(id);
                    out.push(Event::Prompt { at_ms, text: Some(text) });
                }
                None if answered.contains(id.as_str()) => {
                    cursor.prompts.insert(id);
                    out.push(Event::Prompt { at_ms, text: None });
                }
                None => cursor.pending_prompts.push((id, at_ms)),
            }
        }

        for (row, data) in &parsed {
            cursor.newest =
                Some(cursor.newest.map_or(row.time_updated, |t| t.max(row.time_updated)));
            if data.time.created.is_some_and(|t| t < row.session_created) {
                // A copy of another session's message (a fork starts with its parent's history,
                // keeping each message's creation time, cost 0): its call was billed to the
                // parent, not again.
                continue;
            }
            let main = row.session == session;
            match data.role.as_str() {
                "user" if main => {
                    if cursor.prompts.contains(&row.id)
                        || cursor.pending_prompts.iter().any(|(id, _)| *id == row.id)
                    {
                        continue;
                    }
                    let at_ms = data.time.created;
                    match text_of(&row.id)? {
                        Some(text) => {
                            cursor.prompts.insert(row.id.clone());
                            out.push(Event::Prompt { at_ms, text: Some(text) });
                        }
                        None if answered.contains(row.id.as_str()) => {
                            cursor.prompts.insert(row.id.clone());
                            out.push(Event::Prompt { at_ms, text: None });
                        }
                        None => cursor.pending_prompts.push((row.id.clone(), at_ms)),
                    }
                }
                "assistant" => assistant_events(cursor, row, data, main, out),
                _ => {}
            }
        }
        tx.finish()?;
        Ok(())
    }
}

/// The messages of `session` and its child sessions written or updated since `since` (Unix ms),
/// parsed.
fn messages(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    since: i64,
) -> anyhow::Result<Vec<(Row, MessageData)>> {
    let rows = {
        let mut stmt = tx.prepare_cached(MESSAGES)?;
        let rows = stmt.query_map(rusqlite::params![session, since], |row| {
            Ok(Row {
                id: row.get(0)?,
                session: row.get(1)?,
                time_updated: row.get(2)?,
                data: row.get(3)?,
                session_created: row.get(4)?,
            })
        })?;
        rows.collect::<Result<Vec<Row>, _>>()?
    };
    let mut parsed = Vec::with_capacity(rows.len());
    for row in rows {
        let data: MessageData = serde_json::from_str(&row.data)
            .with_context(|| format!("message {} is not an opencode message", row.id))?;
        parsed.push((row, data));
    }
    Ok(parsed)
}

/// What an assistant message says: its call, once its counts are known or whenever they
/// change, and the turn's end once the message finished without asking for tools.
fn assistant_events(
    cursor: &mut Cursor,
    row: &Row,
    data: &MessageData,
    main: bool,
    out: &mut Vec<Event>,
) {
    let tokens = data.tokens.as_ref();
    let rec = tokens.map(|t| t.record(data.model_id.as_deref()));
    // A call in flight has zero counts until its step finishes.
    if let Some(rec) = rec.filter(|r| r.total() > 0)
        && cursor.calls.get(&row.id) != Some(&rec)
    {
        cursor.calls.insert(row.id.clone(), rec.clone());
        // A compaction's summary call is billed, but what it read is not what
        // is in context afterwards.
        let compaction = data.summary.as_ref().and_then(|s| s.as_bool()) == Some(true)
            || data.mode.as_deref() == Some("compaction");
        out.push(Event::Call(Call {
            key: row.id.clone(),
            record: rec,
            at_ms: data.time.created,
            main: main && !compaction,
        }));
    }
    let done =
        data.time.completed.is_some() && data.finish.as_deref().is_none_or(|f| f != "tool-calls");
    if main && done && cursor.ended.insert(row.id.clone()) {
        out.push(Event::TurnEnd { at_ms: data.time.completed });
    }
}

/// A path as the path part of a `file:` URI (`?`, `#` and `%` escaped).
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// opencode 1.18.33's DDL of the tables the reader uses.
    const DDL: &str = "
        CREATE TABLE `message` (
          `id` text PRIMARY KEY,
          `session_id` text NOT NULL,
          `time_created` integer NOT NULL,
          `time_updated` integer NOT NULL,
          `data` text NOT NULL,
          CONSTRAINT `fk_message_session_id_session_id_fk` FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON DELETE CASCADE
        );
        CREATE TABLE `part` (
          `id` text PRIMARY KEY,
          `message_id` text NOT NULL,
          `session_id` text NOT NULL,
          `time_created` integer NOT NULL,
          `time_updated` integer NOT NULL,
          `data` text NOT NULL,
          CONSTRAINT `fk_part_message_id_message_id_fk` FOREIGN KEY (`message_id`) REFERENCES `message`(`id`) ON DELETE CASCADE
        );
        CREATE TABLE `session` (
          `id` text PRIMARY KEY,
          `project_id` text NOT NULL,
          `workspace_id` text,
          `parent_id` text,
          `slug` text NOT NULL,
          `directory` text NOT NULL,
          `path` text,
          `title` text NOT NULL,
          `version` text NOT NULL,
          `share_url` text,
          `summary_additions` integer,
          `summary_deletions` integer,
          `summary_files` integer,
          `summary_diffs` text,
          `metadata` text,
          `cost` real DEFAULT 0 NOT NULL,
          `tokens_input` integer DEFAULT 0 NOT NULL,
          `tokens_output` integer DEFAULT 0 NOT NULL,
          `tokens_reasoning` integer DEFAULT 0 NOT NULL,
          `tokens_cache_read` integer DEFAULT 0 NOT NULL,
          `tokens_cache_write` integer DEFAULT 0 NOT NULL,
          `revert` text,
          `permission` text,
          `agent` text,
          `model` text,
          `time_created` integer NOT NULL,
          `time_updated` integer NOT NULL,
          `time_compacting` integer,
          `time_archived` integer
        );
        CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
        CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
        CREATE INDEX `session_parent_idx` ON `session` (`parent_id`);";

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let dir = std::env::temp_dir()
                .join(format!("acp-usage-opencode-{name}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// opencode's side: writes rows the way it does (WAL mode, one transaction per write).
    struct Writer(Connection);

    impl Writer {
        fn create(path: &Path) -> Writer {
            let conn = Connection::open(path).unwrap();
            conn.pragma_update(None, "journal_mode", "wal").unwrap();
            conn.execute_batch(DDL).unwrap();
            Writer(conn)
        }

        fn session(&self, id: &str, parent: Option<&str>) {
            self.0
                .execute(
                    "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated)
                     VALUES (?1, 'global', ?2, 's', '/w', 't', '1.18.33', 1, 1)",
                    rusqlite::params![id, parent],
                )
                .unwrap();
        }

        fn message(&self, id: &str, session: &str, created: i64, updated: i64, data: &str) {
            self.0
                .execute(
                    "INSERT INTO message (id, session_id, time_created, time_updated, data)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (id) DO UPDATE SET time_updated = excluded.time_updated, data = excluded.data",
                    rusqlite::params![id, session, created, updated, data],
                )
                .unwrap();
        }

        fn text(&self, id: &str, message: &str, session: &str, text: &str) {
            let data = serde_json::json!({"type": "text", "text": text}).to_string();
            self.0
                .execute(
                    "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
                     VALUES (?1, ?2, ?3, 1, 1, ?4)",
                    rusqlite::params![id, message, session, data],
                )
                .unwrap();
        }
    }

    fn user(created: i64) -> String {
        serde_json::json!({"role": "user", "time": {"created": created}, "agent": "build"})
            .to_string()
    }

    fn assistant(
        parent: &str,
        created: i64,
        tokens: [u64; 5],
        finish: Option<&str>,
        completed: Option<i64>,
    ) -> String {
        let [input, output, reasoning, read, write] = tokens;
        let mut data = serde_json::json!({
            "parentID": parent, "role": "assistant", "mode": "build", "agent": "build",
            "cost": 0.01, "modelID": "claude-sonnet-4-5", "providerID": "anthropic",
            "tokens": {"input": input, "output": output, "reasoning": reasoning,
                       "cache": {"read": read, "write": write}},
            "time": {"created": created},
        });
        if let Some(finish) = finish {
            data["finish"] = finish.into();
        }
        if let Some(completed) = completed {
            data["time"]["completed"] = completed.into();
        }
        data.to_string()
    }

    fn read(db: &mut OpencodeDb, session: &str) -> Vec<Event> {
        let mut out = Vec::new();
        db.read_new(session, &mut out).unwrap();
        out
    }

    fn call(key: &str, tokens: [u64; 5], at_ms: i64, main: bool) -> Event {
        let [input, output, reasoning, read, write] = tokens;
        let mut record = TokenRecord::from_anthropic(input, read, write, 0, output + reasoning);
        record.thought = reasoning;
        record.model = Some("claude-sonnet-4-5".into());
        Event::Call(Call { key: key.into(), record, at_ms: Some(at_ms), main })
    }

    #[test]
    fn follows_a_session_as_opencode_writes_it() {
        let dir = Scratch::new("live");
        let path = dir.0.join("opencode.db");
        let w = Writer::create(&path);
        w.session("ses_main", None);
        w.session("ses_other", None);
        let mut db = OpencodeDb::open(&path).unwrap();
        assert_eq!(read(&mut db, "ses_main"), vec![]);

        // The prompt's row lands before its text part; it is reported once the text is there.
        w.message("msg_u1", "ses_main", 100, 100, &user(100));
        assert_eq!(read(&mut db, "ses_main"), vec![]);
        w.text("prt_1", "msg_u1", "ses_main", "Say hi.");
        // The assistant row starts with zero counts: a call in flight.
        w.message("msg_a1", "ses_main", 110, 110, &assistant("msg_u1", 110, [0; 5], None, None));
        w.message("msg_x", "ses_other", 111, 111, &assistant("msg_y", 111, [1; 5], None, None));
        assert_eq!(
            read(&mut db, "ses_main"),
            vec![Event::Prompt { at_ms: Some(100), text: Some("Say hi.".into()) }]
        );
        // The step finishes (a tool call), then the row completes: one call, no end of turn.
        let t1 = [15, 61, 0, 12_000, 200];
        w.message(
            "msg_a1",
            "ses_main",
            110,
            150,
            &assistant("msg_u1", 110, t1, Some("tool-calls"), None),
        );
        assert_eq!(read(&mut db, "ses_main"), vec![call("msg_a1", t1, 110, true)]);
        w.message(
            "msg_a1",
            "ses_main",
            110,
            151,
            &assistant("msg_u1", 110, t1, Some("tool-calls"), Some(151)),
        );
        assert_eq!(read(&mut db, "ses_main"), vec![]);

        // A subagent in a child session (and its own prompt, which is no turn of the session).
        w.session("ses_child", Some("ses_main"));
        w.message("msg_cu", "ses_child", 160, 160, &user(160));
        w.text("prt_2", "msg_cu", "ses_child", "Look.");
        let tc = [40, 8, 4, 0, 5000];
        w.message(
            "msg_ca",
            "ses_child",
            161,
            170,
            &assistant("msg_cu", 161, tc, Some("stop"), Some(170)),
        );
        // The last call, with reasoning; the turn ends when it completes.
        let t2 = [9, 23, 5, 12_200, 350];
        w.message(
            "msg_a2",
            "ses_main",
            180,
            190,
            &assistant("msg_u1", 180, t2, Some("stop"), Some(190)),
        );
        assert_eq!(
            read(&mut db, "ses_main"),
            vec![
                call("msg_ca", tc, 161, false),
                call("msg_a2", t2, 180, true),
                Event::TurnEnd { at_ms: Some(190) },
            ]
        );
        let Event::Call(c) = &call("msg_a2", t2, 180, true) else { unreachable!() };
        assert_eq!((c.record.input, c.record.output, c.record.thought), (12_559, 28, 5));

        // opencode touches the prompt row again at the end of the turn: nothing new.
        w.message("msg_u1", "ses_main", 100, 195, &user(100));
        assert_eq!(read(&mut db, "ses_main"), vec![]);

        // A fresh reader gets the whole history.
        let mut fresh = OpencodeDb::open(&path).unwrap();
        assert_eq!(read(&mut fresh, "ses_main").len(), 5);
    }

    #[test]
    fn a_prompt_without_text_counts_once_answered() {
        let dir = Scratch::new("notext");
        let path = dir.0.join("opencode.db");
        let w = Writer::create(&path);
        w.session("ses_main", None);
        let mut db = OpencodeDb::open(&path).unwrap();
        w.message("msg_u1", "ses_main", 100, 100, &user(100));
        assert_eq!(read(&mut db, "ses_main"), vec![]);
        w.message("msg_a1", "ses_main", 110, 110, &assistant("msg_u1", 110, [0; 5], None, None));
        assert_eq!(read(&mut db, "ses_main"), vec![Event::Prompt { at_ms: Some(100), text: None }]);
    }

    #[test]
    fn never_writes() {
        let dir = Scratch::new("ro");
        let path = dir.0.join("opencode.db");
        let w = Writer::create(&path);
        w.session("ses_main", None);
        let db = OpencodeDb::open(&path).unwrap();
        assert!(db.conn.execute("DELETE FROM session", []).is_err());
        assert!(OpencodeDb::open(&dir.0.join("missing.db")).is_err());
        let other = dir.0.join("other.db");
        Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
        assert!(OpencodeDb::open(&other).is_err());
    }

    /// kilo 7.7.7 (opencode's schema) after a session, its load, resume and fork: the fork's
    /// session holds copies of the parent's 11 messages (created before the fork, cost 0); only
    /// its own call is the fork's. The mock billed 6 calls to the parent and 1 to the fork.
    #[test]
    fn a_forks_copied_history_is_not_its_calls() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kilo/forked.db");
        let mut db = OpencodeDb::open(&path).unwrap();
        let calls = |db: &mut OpencodeDb, id: &str| {
            read(db, id).into_iter().filter(|e| matches!(e, Event::Call(_))).count()
        };
        assert_eq!(calls(&mut db, "ses_de959cd2dffeMXbOi34WLA79TM"), 6);
        assert_eq!(calls(&mut db, "ses_de958e304ffeMw445Y1yYg11tz"), 1);
    }

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode").join(name)
    }

    const MAIN: &str = "ses_dfe851c35ffeJNFH2h2yXhPT2V";

    /// A real database of opencode 1.18.33 against the mock, copied while a subagent's tool
    /// ran (`in-progress.db`) and after the turn (`complete.db`): a plain turn, a tool turn and
    /// a turn whose `task` tool ran a subagent in a child session.
    #[test]
    fn real_database() {
        let dir = Scratch::new("real");
        let path = dir.0.join("opencode.db");
        std::fs::copy(fixture("in-progress.db"), &path).unwrap();
        let mut db = OpencodeDb::open(&path).unwrap();
        let events = read(&mut db, MAIN);
        let kinds: Vec<String> = events
            .iter()
            .map(|e| match e {
                Event::Prompt { text, .. } => format!("prompt {}", text.as_deref().unwrap_or("")),
                Event::Call(c) => format!("call {} {} {}", c.record.input, c.record.output, c.main),
                Event::TurnEnd { .. } => "end".into(),
                Event::Window(w) => format!("window {w}"),
                Event::Limits(l) => format!("limits {}", l.len()),
            })
            .collect();
        // The third turn's first call and the subagent's call are in flight: not reported.
        assert_eq!(
            kinds,
            [
                "prompt Say hi.",
                "call 12520 42 true",
                "end",
                "prompt Read README.md.",
                "call 12215 61 true",
                "call 12559 23 true",
                "end",
                "prompt Ask a subagent to wait and say hi.",
            ]
        );

        // opencode finishes the turn (the complete copy's rows written over the live file).
        let w = Connection::open(&path).unwrap();
        w.execute("ATTACH ?1 AS done", [fixture("complete.db").to_str().unwrap()]).unwrap();
        w.execute_batch(
            "INSERT OR REPLACE INTO main.session SELECT * FROM done.session;
             INSERT OR REPLACE INTO main.message SELECT * FROM done.message;
             INSERT OR REPLACE INTO main.part SELECT * FROM done.part;",
        )
        .unwrap();
        let events = read(&mut db, MAIN);
        let calls: Vec<(u64, u64, u64, u64, bool)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Call(c) => Some((
                    c.record.input,
                    c.record.cache_read,
                    c.record.cache_write_5m,
                    c.record.output,
                    c.main,
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            [
                (12_803, 12_700, 90, 29, true),
                (5_040, 0, 5_000, 8, false),
                (5_063, 5_000, 60, 6, false),
                (12_876, 12_800, 70, 9, true),
            ]
        );
        assert!(matches!(events.last(), Some(Event::TurnEnd { .. })));
        assert_eq!(events.iter().filter(|e| matches!(e, Event::TurnEnd { .. })).count(), 1);
        assert_eq!(read(&mut db, MAIN), vec![]);
    }
}
