//! The ledger's own cost, in process: how many settled calls per second SQLite takes the way
//! the relay writes them (one short transaction per turn), with several writers on one file (as
//! several acp-usage processes are), how long the relay's side of a write takes (queueing it
//! for the writer thread, which is all the relay ever waits for), and how many calls per second
//! the OTLP exporter sends from it to a collector on 127.0.0.1 that accepts everything.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acp_usage::sinks::ledger::{Origin, SessionRef, Settled, Store, Write, Writer};
use acp_usage::sinks::otlp::{Exporter, OtlpConfig};
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
        modifiers_unpriced: false,
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
        store.calls(
            &s,
            Settled { turn: Some(&turn), calls: &calls, ..Default::default() },
            Origin::Relay,
            t as i64,
        )?;
    }
    Ok(start.elapsed())
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("acp-usage-bench-ledger-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("ledger.db")
}

/// A collector stand-in on 127.0.0.1 that reads each request whole and answers 200: what the
/// exporter costs, not what a collector does. Returns its base URL and the bytes it received.
pub fn accept_all() -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = bytes.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    let mut any = false;
                    while reader.read_line(&mut line).unwrap_or(0) > 0 {
                        any = true;
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        line.clear();
                    }
                    if !any {
                        return;
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    counted.fetch_add(length as u64, Ordering::Relaxed);
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((url, bytes))
}

/// Sends everything in `path` with a fresh exporter; returns calls per second.
fn export_all(path: &Path, url: &str, calls: usize) -> anyhow::Result<f64> {
    let cfg = OtlpConfig {
        metrics_url: format!("{url}/v1/metrics"),
        logs_url: format!("{url}/v1/logs"),
        headers: Vec::new(),
        resource: vec![("service.name".into(), "acp-usage-bench".into())],
        interval: Duration::from_secs(60),
        ca_file: None,
    };
    let mut exporter = Exporter::new(cfg, path.to_path_buf())?;
    let start = Instant::now();
    let mut sent = 0;
    while sent < calls as u64 {
        let f = exporter.export(None)?;
        if f.calls == 0 {
            anyhow::bail!("the exporter sent {sent} of {calls} calls and then nothing");
        }
        sent += f.calls;
    }
    Ok(sent as f64 / start.elapsed().as_secs_f64())
}

/// Runs the benchmark and prints its table; returns false when a call was lost.
pub fn run(o: &LedgerOptions) -> anyhow::Result<(String, bool)> {
    let mut one = Vec::new();
    let mut many = Vec::new();
    let mut queue_ns = Vec::new();
    let mut exported = Vec::new();
    let (url, _) = accept_all()?;
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
        // The exporter: every call of that ledger to the stand-in collector.
        exported.push(export_all(&path, &url, want as usize)?);
        // The relay's side: queueing a turn's write for the writer thread.
        let path = scratch(&format!("sink-{round}"));
        let sink = Writer::start(path);
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
         | the relay's side of a turn's write (queueing it) | {:.1} µs |\n\
         | calls/s exported over OTLP/HTTP (log records in batches of 1,000, then the metrics) | {} |\n",
        o.calls_per_turn,
        o.rounds,
        thousands(median(&one).unwrap_or(f64::NAN)),
        o.writers,
        thousands(median(&many).unwrap_or(f64::NAN)),
        median(&queue_ns).unwrap_or(f64::NAN) / 1000.0,
        thousands(median(&exported).unwrap_or(f64::NAN)),
    );
    Ok((table, ok))
}
