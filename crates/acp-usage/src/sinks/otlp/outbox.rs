//! The ledger as the exporter's outbox: which calls a destination has acknowledged (a cursor
//! on call ids, which only grow in commit order), who is exporting to it now (a lease, so that
//! several acp-usage processes on one machine never send the same call twice), and the rows
//! and sums an export is made of. Every figure is read from the ledger as it is; nothing is
//! priced or merged here.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// One call as the ledger holds it, with its session's attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// The ledger's id of the call.
    pub id: i64,
    /// When it was recorded (Unix ms).
    pub at: i64,
    /// The ACP session id.
    pub session_id: String,
    /// The agent's profile (`claude`, ...).
    pub agent: String,
    /// The agent's own name and version, when it gave them.
    pub agent_name: Option<String>,
    /// See `agent_name`.
    pub agent_version: Option<String>,
    /// The session's working directory.
    pub project: Option<String>,
    /// `main`, `subagent`, `side`.
    pub role: String,
    /// The model.
    pub model: Option<String>,
    /// The model's provider.
    pub provider: Option<String>,
    /// Prompt-side tokens, cache included.
    pub input: i64,
    /// Cache reads.
    pub cache_read: i64,
    /// Cache writes (5-minute and 1-hour).
    pub cache_write: i64,
    /// Generated tokens, reasoning included.
    pub output: i64,
    /// Reasoning tokens.
    pub thought: i64,
    /// How many model calls the row stands for.
    pub calls: i64,
    /// USD, `None` when unpriced.
    pub cost: Option<f64>,
    /// Whether the cost was stated rather than priced from the catalog.
    pub cost_stated: bool,
    /// Whether the counts are exact.
    pub exact: bool,
    /// The provider's message id or the transcript's key.
    pub key: Option<String>,
}

/// How long a claim on a destination holds before another process may take it over (a
/// process that died mid-export).
pub const LEASE_MS: i64 = 30_000;

/// Claims the next calls for `destination` (at most `limit`, oldest first): `None` when
/// another process holds the destination now. The claim lasts [`LEASE_MS`]; [`ack`] ends it.
pub fn claim(
    conn: &mut Connection,
    destination: &str,
    owner: &str,
    now: i64,
    limit: usize,
) -> rusqlite::Result<Option<Vec<CallRow>>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("INSERT OR IGNORE INTO exports(destination) VALUES (?1)", [destination])?;
    let (acked, lease_owner, lease_until): (i64, Option<String>, Option<i64>) = tx.query_row(
        "SELECT acked, lease_owner, lease_until FROM exports WHERE destination = ?1",
        [destination],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    if lease_owner.as_deref().is_some_and(|o| o != owner) && lease_until.is_some_and(|u| u > now) {
        return Ok(None);
    }
    let rows = {
        let mut stmt = tx.prepare_cached(
            "SELECT c.id, c.at, s.session_id, s.agent, s.agent_name, s.agent_version, s.project,
                    c.role, c.model, c.provider, c.input, c.cache_read,
                    c.cache_write_5m + c.cache_write_1h, c.output, c.thought, c.calls, c.cost,
                    c.cost_stated, c.exact, c.key
             FROM calls c JOIN sessions s ON s.id = c.session
             WHERE c.id > ?1 AND c.provisional IS NULL ORDER BY c.id LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![acked, limit as i64], |r| {
            Ok(CallRow {
                id: r.get(0)?,
                at: r.get(1)?,
                session_id: r.get(2)?,
                agent: r.get(3)?,
                agent_name: r.get(4)?,
                agent_version: r.get(5)?,
                project: r.get(6)?,
                role: r.get(7)?,
                model: r.get(8)?,
                provider: r.get(9)?,
                input: r.get(10)?,
                cache_read: r.get(11)?,
                cache_write: r.get(12)?,
                output: r.get(13)?,
                thought: r.get(14)?,
                calls: r.get(15)?,
                cost: r.get(16)?,
                cost_stated: r.get(17)?,
                exact: r.get(18)?,
                key: r.get(19)?,
            })
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    tx.execute(
        "UPDATE exports SET lease_owner = ?2, lease_until = ?3 WHERE destination = ?1",
        params![destination, owner, now + LEASE_MS],
    )?;
    tx.commit()?;
    Ok(Some(rows))
}

/// The destination acknowledged every call up to `upto`: the cursor moves on, and `owner`'s
/// claim ends.
pub fn ack(conn: &Connection, destination: &str, owner: &str, upto: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE exports SET acked = MAX(acked, ?3),
            lease_owner = CASE WHEN lease_owner = ?2 THEN NULL ELSE lease_owner END,
            lease_until = CASE WHEN lease_owner = ?2 THEN NULL ELSE lease_until END
         WHERE destination = ?1",
        params![destination, owner, upto],
    )?;
    Ok(())
}

/// Ends `owner`'s claim without moving the cursor (the export failed; the calls stay queued).
pub fn release(conn: &Connection, destination: &str, owner: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE exports SET lease_owner = NULL, lease_until = NULL
         WHERE destination = ?1 AND lease_owner = ?2",
        params![destination, owner],
    )?;
    Ok(())
}

/// How many calls wait for `destination`.
pub fn backlog(conn: &Connection, destination: &str) -> rusqlite::Result<i64> {
    let acked: i64 = conn
        .query_row("SELECT acked FROM exports WHERE destination = ?1", [destination], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    conn.query_row(
        "SELECT COUNT(*) FROM calls WHERE id > ?1 AND provisional IS NULL",
        [acked],
        |r| r.get(0),
    )
}

/// The attributes a call-based series is kept by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// The agent's own name, else its profile.
    pub agent: String,
    /// Its version.
    pub agent_version: Option<String>,
    /// The project.
    pub project: Option<String>,
    /// The call's role.
    pub role: String,
    /// The model.
    pub model: Option<String>,
    /// Its provider.
    pub provider: Option<String>,
    /// Exact or estimated.
    pub exact: bool,
}

/// A call-based series' cumulative sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sums {
    /// The series' first call (Unix ms): its start time.
    pub first: i64,
    /// Model calls.
    pub calls: i64,
    /// Tokens by kind.
    pub input: i64,
    /// See `input`.
    pub output: i64,
    /// See `input`.
    pub cache_read: i64,
    /// See `input`.
    pub cache_write: i64,
    /// See `input`.
    pub reasoning: i64,
    /// USD of the priced calls.
    pub cost: f64,
    /// Per-call token counts in histogram buckets: (input, output) counts per bucket.
    pub input_buckets: Vec<u64>,
    /// See `input_buckets`.
    pub output_buckets: Vec<u64>,
}

/// The explicit bucket bounds of `gen_ai.client.token.usage` (the GenAI conventions' advice).
pub const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

fn bucket(v: i64) -> usize {
    TOKEN_BOUNDS.iter().position(|b| (v as f64) <= *b).unwrap_or(TOKEN_BOUNDS.len())
}

/// Every settled call summed per series: the cumulative values of the call-based metrics.
pub fn series(conn: &Connection) -> rusqlite::Result<Vec<(SeriesKey, Sums)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT COALESCE(s.agent_name, s.agent), s.agent_version, s.project, c.role, c.model,
                c.provider, c.exact, c.at, c.calls, c.input, c.output, c.cache_read,
                c.cache_write_5m + c.cache_write_1h, c.thought, c.cost
         FROM calls c JOIN sessions s ON s.id = c.session WHERE c.provisional IS NULL",
    )?;
    let mut out: std::collections::BTreeMap<SeriesKey, Sums> = Default::default();
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let key = SeriesKey {
            agent: r.get(0)?,
            agent_version: r.get(1)?,
            project: r.get(2)?,
            role: r.get(3)?,
            model: r.get(4)?,
            provider: r.get(5)?,
            exact: r.get(6)?,
        };
        let at: i64 = r.get(7)?;
        let s = out.entry(key).or_insert_with(|| Sums {
            first: at,
            input_buckets: vec![0; TOKEN_BOUNDS.len() + 1],
            output_buckets: vec![0; TOKEN_BOUNDS.len() + 1],
            ..Sums::default()
        });
        let (input, output): (i64, i64) = (r.get(9)?, r.get(10)?);
        s.first = s.first.min(at);
        s.calls += r.get::<_, i64>(8)?;
        s.input += input;
        s.output += output;
        s.cache_read += r.get::<_, i64>(11)?;
        s.cache_write += r.get::<_, i64>(12)?;
        s.reasoning += r.get::<_, i64>(13)?;
        s.cost += r.get::<_, Option<f64>>(14)?.unwrap_or(0.0);
        s.input_buckets[bucket(input)] += 1;
        s.output_buckets[bucket(output)] += 1;
    }
    Ok(out.into_iter().collect())
}

/// Turns of one agent, version and project.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSeries {
    /// The agent's own name, else its profile.
    pub agent: String,
    /// Its version.
    pub agent_version: Option<String>,
    /// The project.
    pub project: Option<String>,
    /// How many turns.
    pub turns: i64,
    /// The first turn's start (Unix ms).
    pub first: i64,
}

/// Turns per agent, version and project, with the first turn's start.
pub fn turns(conn: &Connection) -> rusqlite::Result<Vec<TurnSeries>> {
    let mut stmt = conn.prepare_cached(
        "SELECT COALESCE(s.agent_name, s.agent), s.agent_version, s.project, COUNT(*),
                MIN(t.started)
         FROM turns t JOIN sessions s ON s.id = t.session
         GROUP BY 1, 2, 3",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(TurnSeries {
            agent: r.get(0)?,
            agent_version: r.get(1)?,
            project: r.get(2)?,
            turns: r.get(3)?,
            first: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// A running session's context figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRow {
    /// The ACP session id.
    pub session_id: String,
    /// The agent's own name, else its profile.
    pub agent: String,
    /// The project.
    pub project: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// Tokens in context.
    pub used: i64,
    /// The window.
    pub size: i64,
}

/// The sessions open in a live acp-usage process now, with their last `used`/`size`.
pub fn running(conn: &Connection) -> rusqlite::Result<Vec<ContextRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, COALESCE(agent_name, agent), project, model, used, size, pid,
                pid_start
         FROM sessions WHERE pid IS NOT NULL AND used IS NOT NULL AND size IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            ContextRow {
                session_id: r.get(0)?,
                agent: r.get(1)?,
                project: r.get(2)?,
                model: r.get(3)?,
                used: r.get(4)?,
                size: r.get(5)?,
            },
            (r.get::<_, i64>(6)?, r.get::<_, Option<i64>>(7)?),
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (row, (pid, started)) = row?;
        if crate::sinks::ledger::process_alive(pid, started) {
            out.push(row);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::ledger::{Origin, SessionRef, Settled, Store};
    use acp_usage_core::{AccountedCall, Role, Source, TokenRecord};

    fn call(input: u64) -> AccountedCall {
        AccountedCall {
            record: TokenRecord { input, output: 7, ..TokenRecord::default() },
            calls: 1,
            role: Role::Main,
            provider: Some("anthropic".into()),
            source: Source::Tap,
            cost: Some(0.5),
            cost_stated: false,
            modifiers_unpriced: false,
            key: None,
            in_turn: true,
        }
    }

    fn ledger(name: &str, calls: usize) -> Store {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-outbox-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir.join("ledger.db")).unwrap();
        let s = SessionRef { id: "S".into(), agent: "claude".into() };
        let batch: Vec<AccountedCall> = (0..calls).map(|k| call(k as u64 + 1)).collect();
        store.calls(&s, Settled { calls: &batch, ..Default::default() }, Origin::Relay, 1).unwrap();
        store
    }

    #[test]
    fn one_owner_at_a_time_and_the_cursor_moves_only_on_ack() {
        let mut store = ledger("lease", 5);
        let conn = store.conn_mut();
        let a = claim(conn, "d", "A", 1000, 3).unwrap().expect("A claims");
        assert_eq!(a.iter().map(|r| r.input).collect::<Vec<_>>(), vec![1, 2, 3]);
        // B waits while A's lease holds.
        assert_eq!(claim(conn, "d", "B", 1001, 3).unwrap(), None);
        // A's export failed: released, nothing acknowledged; B gets the same calls.
        release(conn, "d", "A").unwrap();
        let b = claim(conn, "d", "B", 1002, 3).unwrap().expect("B claims");
        assert_eq!(b.first().map(|r| r.id), a.first().map(|r| r.id));
        ack(conn, "d", "B", b.last().unwrap().id).unwrap();
        assert_eq!(backlog(conn, "d").unwrap(), 2);
        let rest = claim(conn, "d", "A", 1003, 10).unwrap().unwrap();
        assert_eq!(rest.iter().map(|r| r.input).collect::<Vec<_>>(), vec![4, 5]);
        ack(conn, "d", "A", rest.last().unwrap().id).unwrap();
        assert_eq!(backlog(conn, "d").unwrap(), 0);
        // Another destination has its own cursor.
        assert_eq!(backlog(conn, "e").unwrap(), 5);
    }

    #[test]
    fn a_dead_owners_lease_runs_out() {
        let mut store = ledger("expiry", 2);
        let conn = store.conn_mut();
        claim(conn, "d", "A", 1000, 10).unwrap().unwrap();
        assert_eq!(claim(conn, "d", "B", 1000 + LEASE_MS - 1, 10).unwrap(), None);
        let b = claim(conn, "d", "B", 1000 + LEASE_MS + 1, 10).unwrap().unwrap();
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn series_sum_every_settled_call_with_their_histogram_buckets() {
        let store = ledger("series", 3);
        let s = series(store.conn()).unwrap();
        assert_eq!(s.len(), 1);
        let (k, v) = &s[0];
        assert_eq!((k.agent.as_str(), k.role.as_str(), k.exact), ("claude", "main", true));
        assert_eq!((v.calls, v.input, v.output), (3, 6, 21));
        assert!((v.cost - 1.5).abs() < 1e-12);
        // Inputs 1, 2, 3: one in the first bucket (<= 1), two in the second (<= 4).
        assert_eq!(&v.input_buckets[..3], &[1, 2, 0]);
        assert_eq!(v.output_buckets.iter().sum::<u64>(), 3);
    }
}
