//! Reading the ledger for a report: one SQL query sums the matching calls per session, model
//! and quarter hour, and Rust folds those sums into the report's rows in the chosen time zone.
//!
//! SQLite cannot group by a local day (it knows no time zones but the C library's), so the
//! query leaves the days to chrono; the quarter-hour buckets keep what crosses from SQLite to
//! Rust small on a big ledger. Every time zone in use is a whole number of quarter hours off
//! UTC, so no bucket straddles a local midnight.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use rusqlite::params;

use super::{Group, ReportOptions, monday_of};
use crate::sinks::ledger::Store;

/// What a set of calls adds up to. Every field is a sum of one ledger column (or two: cache
/// writes are the 5-minute and 1-hour ones).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sums {
    /// Model calls the rows stand for (the `calls` column).
    pub calls: u64,
    /// Prompt-side tokens, cache reads and writes included.
    pub input: u64,
    /// Cache reads (part of `input`).
    pub cache_read: u64,
    /// Cache writes, 5-minute and 1-hour (part of `input`).
    pub cache_write: u64,
    /// Generated tokens, thoughts included.
    pub output: u64,
    /// Thought tokens (part of `output`).
    pub thought: u64,
    /// The cost of the priced calls, USD.
    pub priced_cost: f64,
    /// The part of `priced_cost` whose counts and cost are exact.
    pub exact_cost: f64,
    /// Model calls with no price (a model the catalog did not know).
    pub unpriced_calls: u64,
    /// Their tokens, input + output.
    pub unpriced_tokens: u64,
    priced_rows: u64,
    unpriced_rows: u64,
}

impl Sums {
    /// Adds another set of calls.
    pub fn add(&mut self, o: &Sums) {
        self.calls += o.calls;
        self.input += o.input;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
        self.output += o.output;
        self.thought += o.thought;
        self.priced_cost += o.priced_cost;
        self.exact_cost += o.exact_cost;
        self.unpriced_calls += o.unpriced_calls;
        self.unpriced_tokens += o.unpriced_tokens;
        self.priced_rows += o.priced_rows;
        self.unpriced_rows += o.unpriced_rows;
    }

    /// Input + output, as ACP's `totalTokens`.
    pub fn total_tokens(&self) -> u64 {
        self.input + self.output
    }

    /// The cost, `None` when every call is unpriced (never a cost of zero for calls nobody
    /// priced); calls with no price are left out of a partly priced sum (`unpriced_calls`).
    pub fn cost(&self) -> Option<f64> {
        if self.priced_rows == 0 && self.unpriced_rows > 0 { None } else { Some(self.priced_cost) }
    }
}

/// What the ledger knows of a session besides its calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionMeta {
    /// The agent profile (`claude`, `codex`, ...).
    pub agent: String,
    /// The working directory.
    pub project: Option<String>,
    /// The title the agent gave it.
    pub title: Option<String>,
}

/// One row of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The group's value (`2026-11-23`, a session id, a model...), `None` when the ledger does
    /// not know it (a session without a project, a call without a model).
    pub key: Option<String>,
    /// The session, for a per-session report.
    pub session: Option<SessionMeta>,
    /// The row's figures.
    pub sums: Sums,
    /// The same per model, most expensive first.
    pub models: Vec<(Option<String>, Sums)>,
    /// The row's first call (Unix ms).
    pub first_at: i64,
    /// The row's last call (Unix ms).
    pub last_at: i64,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// How the rows are grouped.
    pub group: Group,
    /// Days, weeks and months in order; sessions by their first call; projects, agents and
    /// models most expensive first.
    pub rows: Vec<Row>,
    /// Every row together.
    pub totals: Sums,
    /// The models of the calls left unpriced (`None`: a call with no model).
    pub unpriced_models: BTreeSet<Option<String>>,
}

impl Report {
    /// A report of no calls.
    pub fn empty(group: Group) -> Report {
        Report {
            group,
            rows: Vec::new(),
            totals: Sums::default(),
            unpriced_models: BTreeSet::new(),
        }
    }
}

/// One session's calls of one model in one quarter hour, summed by SQLite.
struct Bucket {
    session_id: String,
    meta: SessionMeta,
    model: Option<String>,
    first_at: i64,
    last_at: i64,
    sums: Sums,
}

const QUERY: &str = "
    SELECT s.session_id, s.agent, s.project, s.title, c.model, MIN(c.at), MAX(c.at),
        SUM(c.calls), SUM(c.input), SUM(c.cache_read), SUM(c.cache_write_5m + c.cache_write_1h),
        SUM(c.output), SUM(c.thought),
        COALESCE(SUM(c.cost), 0), COALESCE(SUM(CASE WHEN c.exact THEN c.cost END), 0),
        COUNT(c.cost), SUM(c.cost IS NULL), SUM(CASE WHEN c.cost IS NULL THEN c.calls ELSE 0 END),
        SUM(CASE WHEN c.cost IS NULL THEN c.input + c.output ELSE 0 END)
    FROM calls c JOIN sessions s ON s.id = c.session
    WHERE c.at >= ?1 AND c.at < ?2
        AND (?3 IS NULL OR instr(lower(s.agent), lower(?3)) > 0
            OR instr(lower(COALESCE(s.agent_name, '')), lower(?3)) > 0)
        AND (?4 IS NULL OR instr(lower(COALESCE(s.project, '')), lower(?4)) > 0)
        AND (?5 IS NULL OR instr(lower(COALESCE(c.model, '')), lower(?5)) > 0)
    GROUP BY c.session, c.model, c.at / 900000";

/// Reads and folds the calls `opts` selects.
pub fn read(store: &Store, opts: &ReportOptions) -> rusqlite::Result<Report> {
    let conn = store.conn();
    // A file no acp-usage has written a schema to yet holds no calls.
    if crate::sinks::ledger::schema::version(conn)? == 0 {
        return Ok(Report::empty(opts.group));
    }
    let since = opts.since.map_or(i64::MIN, |d| opts.zone.start_of(d));
    let until = opts.until.and_then(|d| d.succ_opt()).map_or(i64::MAX, |d| opts.zone.start_of(d));
    let mut stmt = conn.prepare(QUERY)?;
    let buckets =
        stmt.query_map(params![since, until, opts.agent, opts.project, opts.model], |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            Ok(Bucket {
                session_id: r.get(0)?,
                meta: SessionMeta { agent: r.get(1)?, project: r.get(2)?, title: r.get(3)? },
                model: r.get(4)?,
                first_at: r.get(5)?,
                last_at: r.get(6)?,
                sums: Sums {
                    calls: n(7)?,
                    input: n(8)?,
                    cache_read: n(9)?,
                    cache_write: n(10)?,
                    output: n(11)?,
                    thought: n(12)?,
                    priced_cost: r.get(13)?,
                    exact_cost: r.get(14)?,
                    priced_rows: n(15)?,
                    unpriced_rows: n(16)?,
                    unpriced_calls: n(17)?,
                    unpriced_tokens: n(18)?,
                },
            })
        })?;
    let mut folded = Fold::default();
    for b in buckets {
        folded.add(b?, opts);
    }
    Ok(folded.finish(opts.group))
}

/// A row being summed.
struct Acc {
    session: Option<SessionMeta>,
    sums: Sums,
    models: BTreeMap<Option<String>, Sums>,
    first_at: i64,
    last_at: i64,
}

#[derive(Default)]
struct Fold {
    rows: BTreeMap<Option<String>, Acc>,
    totals: Sums,
    unpriced_models: BTreeSet<Option<String>>,
}

impl Fold {
    fn add(&mut self, b: Bucket, opts: &ReportOptions) {
        let day = || opts.zone.date_of(b.first_at);
        let key = match opts.group {
            // `report limits` reads no calls (`limits.rs`); grouped by day if it ever did.
            Group::Daily | Group::Limits => Some(day().format("%Y-%m-%d").to_string()),
            Group::Weekly => Some(monday_of(day()).format("%Y-%m-%d").to_string()),
            Group::Monthly => Some(day().format("%Y-%m").to_string()),
            Group::Session => Some(b.session_id.clone()),
            Group::Project => b.meta.project.clone(),
            Group::Agent => Some(b.meta.agent.clone()),
            Group::Model => b.model.clone(),
        };
        let acc = self.rows.entry(key).or_insert_with(|| Acc {
            session: (opts.group == Group::Session).then(|| b.meta.clone()),
            sums: Sums::default(),
            models: BTreeMap::new(),
            first_at: b.first_at,
            last_at: b.last_at,
        });
        acc.sums.add(&b.sums);
        acc.models.entry(b.model.clone()).or_default().add(&b.sums);
        acc.first_at = acc.first_at.min(b.first_at);
        acc.last_at = acc.last_at.max(b.last_at);
        self.totals.add(&b.sums);
        if b.sums.unpriced_rows > 0 {
            self.unpriced_models.insert(b.model);
        }
    }

    fn finish(self, group: Group) -> Report {
        let mut rows: Vec<Row> = self
            .rows
            .into_iter()
            .map(|(key, acc)| {
                let mut models: Vec<_> = acc.models.into_iter().collect();
                models.sort_by(|a, b| dearest(&a.1, &b.1).then_with(|| a.0.cmp(&b.0)));
                Row {
                    key,
                    session: acc.session,
                    sums: acc.sums,
                    models,
                    first_at: acc.first_at,
                    last_at: acc.last_at,
                }
            })
            .collect();
        match group {
            // The map already holds them in calendar order (ISO dates sort as text).
            Group::Daily | Group::Weekly | Group::Monthly | Group::Limits => {}
            Group::Session => {
                rows.sort_by(|a, b| a.first_at.cmp(&b.first_at).then(a.key.cmp(&b.key)))
            }
            Group::Project | Group::Agent | Group::Model => {
                rows.sort_by(|a, b| dearest(&a.sums, &b.sums).then_with(|| a.key.cmp(&b.key)))
            }
        }
        Report { group, rows, totals: self.totals, unpriced_models: self.unpriced_models }
    }
}

/// Most expensive first; then most tokens.
pub(super) fn dearest(a: &Sums, b: &Sums) -> Ordering {
    b.priced_cost.total_cmp(&a.priced_cost).then(b.total_tokens().cmp(&a.total_tokens()))
}
