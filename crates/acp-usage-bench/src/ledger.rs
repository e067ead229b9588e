//! The ledger's own cost, in process: how many settled calls per second SQLite takes the way
//! the relay writes them (one short transaction per turn), with several writers on one file (as
//! several acp-usage processes are), and how long the relay's side of a write takes (queueing it
//! for the writer thread, which is all the relay ever waits for).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use acp_usage::sinks::ledger::{Origin, SessionRef, Sink, Store, Write};
use acp_usage_core::{AccountedCall, Role, Source, TokenRecord};

use crate::stats::{median, thousands};

/// What one benchmark run measures.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// Turns written by each writer.
    pub turns: usize,
    /// Calls per turn (one transaction each).
    pub calls_per_turn: usize,
    /// Concurrent writers, each with its own connection.
    pub writers: usize,
    /// Rounds; medians are shown.
    pub rounds: usize,
}

impl LedgerOptions {
    /// The defaults (`quick`: a smoke run).
    pub fn new(quick: bool, rounds: usize) -> LedgerOptions {
        LedgerOptions {
            turns: if quick { 200 } else { 2_000 },
            calls_per_turn: 3,
            writers: 4,
            rounds,
        }
    }
}

fn call(k: usize) -> AccountedCall {
    AccountedCall {
        record: TokenRecord {
            input: 12_000 + k as u64,
            cache_read: 11_000,
            output: 300,
            model: Some("claude-sonnet-4-5".into()),
            ..TokenRecord::default()
        },
        calls: 1,
        role: Role::Main,
        provider: Some("anthropic".into()),
        source: Source::Tap,
        cost: Some(0.0123),
        cost_stated: false,
        key: Some(format!("msg_{k:012}")),
        in_turn: true,
    }
}

/// Writes `turns` turns of `per_turn` calls into `path` as one writer; returns the elapsed time.
fn writer(path: &Path, id: usize, turns: usize, per_turn: usize) -> anyhow::Result<Duration> {
    let mut store = Store::open(path)?;
    let s = SessionRef { id: format!("bench-{id}"), agent: "claude".into() };
    let start = Instant::now();
    for t in 0..turns {
        let calls: Vec<AccountedCall> = (0..per_turn).map(|c| call(t * per_turn + c)).collect();
        let turn = acp_usage::sinks::ledger::TurnRow {
            started: t as i64,
            ended: t as i64 + 1,
            stop_reason: Some("end_turn".into()),
        };
        store.calls(&s, Some(&turn), &calls, None, None, Origin::Relay, t as i64)?;
    }
    Ok(start.elapsed())
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("acp-usage-bench-ledger-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("ledger.db")
}

/// Runs the benchmark and prints its table; returns false when a call was lost.
pub fn run(o: &LedgerOptions) -> anyhow::Result<(String, bool)> {
    let mut one = Vec::new();
    let mut many = Vec::new();
    let mut queue_ns = Vec::new();
    let mut ok = true;
    for round in 0..o.rounds {
        // One writer.
        let path = scratch(&format!("one-{round}"));
        let took = writer(&path, 0, o.turns, o.calls_per_turn)?;
        one.push((o.turns * o.calls_per_turn) as f64 / took.as_secs_f64());
        // Several writers on one file at once.
        let path = scratch(&format!("many-{round}"));
        Store::open(&path)?;
        let start = Instant::now();
        let results: Vec<anyhow::Result<Duration>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..o.writers)
                .map(|w| {
                    let path = path.clone();
                    s.spawn(move || writer(&path, w, o.turns, o.calls_per_turn))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("writer thread")).collect()
        });
        let took = start.elapsed();
        for r in results {
            r?;
        }
        let want = (o.writers * o.turns * o.calls_per_turn) as i64;
        let got: i64 =
            Store::open_read(&path)?
                .conn()
                .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))?;
        if got != want {
            ok = false;
            eprintln!("ledger: {got} calls recorded of {want} written");
        }
        many.push(want as f64 / took.as_secs_f64());
        // The relay's side: queueing a turn's write for the writer thread.
        let path = scratch(&format!("sink-{round}"));
        let sink = Sink::start(path);
        let n = o.turns;
        let s = SessionRef { id: "bench-sink".into(), agent: "claude".into() };
        let start = Instant::now();
        for t in 0..n {
            let calls: Vec<AccountedCall> =
                (0..o.calls_per_turn).map(|c| call(t * o.calls_per_turn + c)).collect();
            sink.send(Write::Calls { session: s.clone(), turn: None, calls, figures: None, at: 0 });
        }
        queue_ns.push(start.elapsed().as_nanos() as f64 / n as f64);
        sink.finish(Duration::from_secs(60));
    }
    let table = format!(
        "| ledger (SQLite, WAL, one transaction per turn of {} calls) | median of {} |\n\
         |---|---|\n\
         | calls/s, one writer | {} |\n\
         | calls/s, {} writers on one file at once | {} |\n\
         | the relay's side of a turn's write (queueing it) | {:.1} µs |\n",
        o.calls_per_turn,
        o.rounds,
        thousands(median(&one).unwrap_or(f64::NAN)),
        o.writers,
        thousands(median(&many).unwrap_or(f64::NAN)),
        median(&queue_ns).unwrap_or(f64::NAN) / 1000.0,
    );
    Ok((table, ok))
}
