//! The LLM-API tap's benchmark: the same HTTP workload sent straight to an LLM upstream and
//! through acp-usage's tap, interleaved in one run, in this process.
//!
//! An upstream of the benchmark's own ([`upstream`]) serves Anthropic-style event streams on
//! 127.0.0.1; the tap (`acp_usage::sources::tap`, started as acp-usage starts it, on threads of
//! its own) gets one route to it; one keep-alive client ([`measure`]) measures time to first
//! byte of small calls, MB/s of a long stream, small calls per second with several clients, and
//! whether the first event of a stream whose upstream holds back the rest gets through. Every
//! reply is checked against the bytes served, and every call the tap reports is checked against
//! the usage the upstream stated, so the figures are those of a tap that copies and reads.
//! The same two figures (first byte, stream MB/s) are then taken over a WebSocket ([`ws`]),
//! direct and through the tap's tunnel.

pub mod measure;
pub mod upstream;
pub mod ws;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_usage::sources::tap::{Route, Tap, TapCall, TapConfig};

use crate::procfs;
use crate::stats::{median, percentile, thousands};
use measure::{Client, Via};
use upstream::{Long, Upstream};

// What every reply states, here because both the HTTP upstream and its WebSocket mode
// (`upstream.rs`, `ws.rs`) and the checks below read them.
/// The prompt side every reply states (`message_start.usage.input_tokens`).
pub const INPUT_TOKENS: u64 = 25;
/// The output a small reply states.
pub const SMALL_OUTPUT_TOKENS: u64 = 12;
/// The size the long stream's frames are filled to: a TLS record's worth, the most a real
/// provider's response arrives in at once.
pub const FRAME_TARGET: usize = 16 * 1024;

/// The tap's threads (runtime workers and the thread that runs it), as `acp_usage` names them.
const TAP_THREAD: &str = "acp-usage-tap";
/// The frames of the stream read whole for the byte check (about 1 MiB).
const WHOLE_FRAMES: u64 = 64;

/// Sizes of the tap benchmark.
#[derive(Debug, Clone)]
pub struct TapOptions {
    /// Rounds; each measures every figure direct and tapped, in alternating order.
    pub rounds: usize,
    /// Small calls timed for time to first byte, each way, over all rounds.
    pub requests: usize,
    /// Concurrent clients for calls per second.
    pub clients: usize,
    /// The long stream's size, in MiB.
    pub stream_mib: u64,
    /// How long each calls-per-second measurement lasts, each way, each round.
    pub rate_time: Duration,
}

impl TapOptions {
    /// The default sizes, or a smoke run's.
    pub fn new(quick: bool, rounds: usize) -> TapOptions {
        TapOptions {
            rounds: rounds.max(1),
            requests: if quick { 300 } else { 2000 },
            clients: 8,
            stream_mib: if quick { 16 } else { 256 },
            rate_time: Duration::from_millis(if quick { 300 } else { 2000 }),
        }
    }
}

/// One way's figures.
#[derive(Debug, Default)]
pub struct Side {
    /// Time to first byte of each small call, in microseconds.
    pub ttfb_us: Vec<f64>,
    /// MB/s of each long stream.
    pub mb_per_s: Vec<f64>,
    /// Small calls per second, each round.
    pub calls_per_s: Vec<f64>,
    /// When the first event of the held reply arrived; `None`: it did not (buffered).
    pub first_event: Option<Duration>,
}

/// What the tap reported, as the benchmark checks it.
#[derive(Debug, Default)]
struct Seen {
    calls: u64,
    /// Output tokens expected of the long streams, by message id (others are small replies).
    long_expected: HashMap<String, u64>,
    /// (served, read) output tokens of the long streams the tap reported.
    long_read: Vec<(u64, u64)>,
    /// Calls whose usage was not what the upstream stated.
    wrong: Vec<String>,
}

/// Everything one run measured.
#[derive(Debug)]
pub struct TapResults {
    /// The sizes it ran with.
    pub options: TapOptions,
    /// Client to upstream.
    pub direct: Side,
    /// Client to tap to upstream.
    pub tapped: Side,
    /// The process's RSS before the tapped long streams, and its peak while they ran (KiB);
    /// `peak_since_start`: the kernel would not reset the peak, so it is the process's own.
    pub rss_before_kib: Option<u64>,
    pub rss_peak_kib: Option<u64>,
    pub peak_since_start: bool,
    /// The tap's CPU time per small call and per MB streamed, in microseconds.
    pub tap_cpu_per_call_us: Option<f64>,
    pub tap_cpu_per_mb_us: Option<f64>,
    /// Calls the tap reported, and responses the client received through it.
    pub tap_calls: u64,
    pub tapped_responses: u64,
    /// (served, read) output tokens of the tapped long streams.
    pub long_usage: Vec<(u64, u64)>,
    /// Replies (or their checked parts) compared byte for byte with what was served.
    pub compared: u64,
    /// What the tap got wrong: a call not reported, usage not as served.
    pub problems: Vec<String>,
    /// Time to first byte and stream MB/s over a WebSocket, direct and through the tunnel.
    pub ws: ws::WsFigures,
}

/// Runs the tap benchmark; progress goes to stderr. Errors are real failures: a request that
/// failed, a reply whose bytes differ from what was served.
pub fn run(options: &TapOptions) -> anyhow::Result<TapResults> {
    let upstream = Upstream::start()?;
    let (tx, calls) = tokio::sync::mpsc::unbounded_channel();
    let config = TapConfig {
        routes: vec![Route { name: "bench".into(), upstream: upstream.base_url() }],
        session_headers: Vec::new(),
        alternates: Vec::new(),
        notices: Vec::new(),
    };
    // The bench's upstream states no subscription windows: nothing arrives on this channel.
    let (limits_tx, _limits) = tokio::sync::mpsc::unbounded_channel();
    let tap = Tap::start(config, tx, limits_tx, Arc::new(tokio::sync::Notify::new()))?;
    let client = Arc::new(Client::new(&upstream.base_url(), &tap.base_url("bench"))?);
    // `http://127.0.0.1:PORT/<secret>/bench`: the tap's address and its path for the WebSocket.
    let tap_base = tap.base_url("bench");
    let tap_path = tap_base.splitn(4, '/').nth(3).map(|p| format!("/{p}{}", ws::PATH));
    let ws_ends = ((upstream.addr, ws::PATH.to_owned()), (tap.addr, tap_path.unwrap_or_default()));
    // The client gets two workers, as the upstream and the tap do.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-client")
        .enable_all()
        .build()?;
    runtime.block_on(measure_all(options, &upstream, &client, calls, ws_ends))
}

/// Reads the tap's calls as the relay would, checking each against what was served.
async fn drain(mut calls: tokio::sync::mpsc::UnboundedReceiver<TapCall>, seen: Arc<Mutex<Seen>>) {
    while let Some(call) = calls.recv().await {
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        s.calls += 1;
        let id = call.id.clone().unwrap_or_default();
        let long = s.long_expected.get(&id).copied();
        let output = long.unwrap_or(SMALL_OUTPUT_TOKENS);
        if let Some(served) = long {
            s.long_read.push((served, call.record.output));
        }
        let r = &call.record;
        if r.input != INPUT_TOKENS || r.output != output || !call.complete || id.is_empty() {
            if s.wrong.len() < 5 {
                s.wrong.push(format!(
                    "call {id:?}: read input {} output {} complete {}, served input {INPUT_TOKENS} output {output}",
                    r.input, r.output, call.complete
                ));
            } else if s.wrong.len() == 5 {
                s.wrong.push("(more)".into());
            }
        }
    }
}

fn expect_long(seen: &Mutex<Seen>, seq: u64, long: &Long) {
    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
    s.long_expected.insert(upstream::message_id(seq), long.output_tokens);
}

/// Sum of (tap CPU, work) over tapped measurements, for a per-unit figure.
#[derive(Debug, Default)]
struct CpuTally {
    cpu: Duration,
    work: f64,
    known: bool,
}

impl CpuTally {
    fn add(&mut self, before: Option<Duration>, after: Option<Duration>, work: f64) {
        if let (Some(b), Some(a)) = (before, after) {
            self.cpu += a.saturating_sub(b);
            self.work += work;
            self.known = true;
        }
    }

    fn per_unit_us(&self) -> Option<f64> {
        (self.known && self.work > 0.0).then(|| self.cpu.as_secs_f64() * 1e6 / self.work)
    }
}

async fn measure_all(
    o: &TapOptions,
    upstream: &Upstream,
    client: &Arc<Client>,
    calls: tokio::sync::mpsc::UnboundedReceiver<TapCall>,
    ws_ends: ((std::net::SocketAddr, String), (std::net::SocketAddr, String)),
) -> anyhow::Result<TapResults> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let drainer = tokio::spawn(drain(calls, seen.clone()));
    let (mut direct, mut tapped) = (Side::default(), Side::default());
    let frames = Long::frames_for_mib(o.stream_mib);

    // Correctness first, untimed: a stream read whole, and the held reply, each way.
    for via in [Via::Direct, Via::Tapped] {
        let seq = client.next_seq();
        expect_long(&seen, seq, &Long::new(seq, WHOLE_FRAMES));
        client.long_whole(via, seq, WHOLE_FRAMES).await?;
        let first = client.held(upstream, via, measure::HOLD_WAIT).await?;
        match via {
            Via::Direct => direct.first_event = first,
            Via::Tapped => tapped.first_event = first,
        }
    }
    eprintln!(
        "tap: replies identical; first event of a held stream: direct {}, tapped {}",
        arrival(direct.first_event),
        arrival(tapped.first_event)
    );

    // Warm both ways up: connections (one per concurrent client), pools, caches.
    for i in 0..100 {
        for via in Via::order(i % 2 == 0) {
            client.small(via).await?;
        }
    }
    for via in Via::order(true) {
        client.rate(via, o.clients, Duration::from_millis(100)).await?;
    }

    let (mut rss_before, mut rss_peak, mut peak_since_start) = (None, None, false);
    let (mut call_cpu, mut stream_cpu) = (CpuTally::default(), CpuTally::default());
    for round in 0..o.rounds {
        let first_direct = round % 2 == 0;
        // Time to first byte: one call each way in turn, the order flipping every pair.
        let n = o.requests / o.rounds + usize::from(round < o.requests % o.rounds);
        for i in 0..n {
            for via in Via::order((round + i) % 2 == 0) {
                let t = client.small(via).await?;
                let us = t.as_secs_f64() * 1e6;
                match via {
                    Via::Direct => direct.ttfb_us.push(us),
                    Via::Tapped => tapped.ttfb_us.push(us),
                }
            }
        }
        for via in Via::order(first_direct) {
            let seq = client.next_seq();
            let long = Long::new(seq, frames);
            expect_long(&seen, seq, &long);
            let cpu = procfs::threads_cpu(TAP_THREAD);
            if via == Via::Tapped {
                // The peak of this stream only, when the kernel allows resetting it.
                peak_since_start |= !procfs::reset_own_peak();
                let now = procfs::own_memory().map(|(rss, _)| rss);
                rss_before = rss_before.or(now);
            }
            let s = client.long(via, seq, frames).await?;
            match via {
                Via::Direct => direct.mb_per_s.push(s.mb_per_s()),
                Via::Tapped => {
                    tapped.mb_per_s.push(s.mb_per_s());
                    let hwm = procfs::own_memory().map(|(_, hwm)| hwm);
                    rss_peak = rss_peak.max(hwm);
                    stream_cpu.add(cpu, procfs::threads_cpu(TAP_THREAD), s.bytes as f64 / 1e6);
                }
            }
        }
        for via in Via::order(!first_direct) {
            let cpu = procfs::threads_cpu(TAP_THREAD);
            let (count, took) = client.rate(via, o.clients, o.rate_time).await?;
            let rate = count as f64 / took.as_secs_f64();
            match via {
                Via::Direct => direct.calls_per_s.push(rate),
                Via::Tapped => {
                    tapped.calls_per_s.push(rate);
                    call_cpu.add(cpu, procfs::threads_cpu(TAP_THREAD), count as f64);
                }
            }
        }
        let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
        eprintln!(
            "tap round {}/{}: TTFB p50 {:.3} / {:.3} ms; {:.0} / {:.0} MB/s; {} / {} calls/s (direct / tapped)",
            round + 1,
            o.rounds,
            percentile(&direct.ttfb_us[direct.ttfb_us.len() - n..], 50.0).unwrap_or(f64::NAN) / 1e3,
            percentile(&tapped.ttfb_us[tapped.ttfb_us.len() - n..], 50.0).unwrap_or(f64::NAN) / 1e3,
            last(&direct.mb_per_s),
            last(&tapped.mb_per_s),
            thousands(last(&direct.calls_per_s)),
            thousands(last(&tapped.calls_per_s)),
        );
    }

    // Each call is sent before the last bytes of its reply are forwarded, so all should be in;
    // a moment is allowed for the drain task to be scheduled.
    let tapped_responses = client.tapped_responses();
    let deadline = Instant::now() + Duration::from_secs(2);
    while seen.lock().unwrap_or_else(|e| e.into_inner()).calls < tapped_responses
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drainer.abort();
    let s = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let mut problems = s.wrong.clone();
    if s.calls != tapped_responses {
        problems.push(format!(
            "the tap reported {} calls for {tapped_responses} responses it forwarded",
            s.calls
        ));
    }
    // Over a WebSocket, after the HTTP figures (the tap's calls are no longer counted).
    let ws = ws::measure(ws_ends.0, ws_ends.1, o.requests, 2 * o.rounds, frames).await?;
    eprintln!(
        "tap over a WebSocket: TTFB p50 {:.3} / {:.3} ms; {:.0} / {:.0} MB/s (direct / tapped)",
        percentile(&ws.ttfb_direct_us, 50.0).unwrap_or(f64::NAN) / 1e3,
        percentile(&ws.ttfb_tapped_us, 50.0).unwrap_or(f64::NAN) / 1e3,
        median(&ws.mb_per_s_direct).unwrap_or(f64::NAN),
        median(&ws.mb_per_s_tapped).unwrap_or(f64::NAN),
    );
    Ok(TapResults {
        options: o.clone(),
        direct,
        tapped,
        rss_before_kib: rss_before,
        rss_peak_kib: rss_peak,
        peak_since_start,
        tap_cpu_per_call_us: call_cpu.per_unit_us(),
        tap_cpu_per_mb_us: stream_cpu.per_unit_us(),
        tap_calls: s.calls,
        tapped_responses,
        long_usage: s.long_read,
        compared: client.compared(),
        problems,
        ws,
    })
}

fn arrival(t: Option<Duration>) -> String {
    match t {
        Some(t) => format!("after {:.2} ms", t.as_secs_f64() * 1e3),
        None => "never (held back)".into(),
    }
}

fn ms(us: Option<f64>) -> String {
    us.map_or_else(|| "–".into(), |us| format!("{:.3} ms", us / 1e3))
}

fn ratio(tapped: Option<f64>, direct: Option<f64>) -> Option<f64> {
    match (tapped, direct) {
        (Some(t), Some(d)) if d > 0.0 => Some(t / d),
        _ => None,
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl TapResults {
    /// The figures as Markdown, in the style of the relay tables.
    pub fn table(&self) -> String {
        let o = &self.options;
        let (d, t) = (&self.direct, &self.tapped);
        let p = |s: &Side, q: f64| percentile(&s.ttfb_us, q);
        let (p50d, p50t, p99d, p99t) = (p(d, 50.0), p(t, 50.0), p(d, 99.0), p(t, 99.0));
        let diff = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:+.3} ms", (a - b) / 1e3),
            _ => "–".into(),
        };
        let (mbd, mbt) = (median(&d.mb_per_s), median(&t.mb_per_s));
        let (cpsd, cpst) = (median(&d.calls_per_s), median(&t.calls_per_s));
        let times = |r: Option<f64>| r.map_or_else(|| "–".into(), |r| format!("{r:.2}x"));
        let num = |v: Option<f64>| v.map_or_else(|| "–".into(), thousands);
        let unbuffered = t.first_event.is_some();

        let mut out = String::new();
        let _ = writeln!(
            out,
            "## LLM-API tap: direct vs through the tap, 127.0.0.1, interleaved ({} round(s))\n",
            o.rounds
        );
        let _ = writeln!(out, "| figure | direct | through the tap | tap vs direct |");
        let _ = writeln!(out, "|---|---|---|---|");
        let mut row = |name: String, a: String, b: String, c: String| {
            let _ = writeln!(out, "| {name} | {a} | {b} | {c} |");
        };
        let n = d.ttfb_us.len();
        row(
            format!("time to first byte p50 ({n} small calls)"),
            ms(p50d),
            ms(p50t),
            diff(p50t, p50d),
        );
        row("time to first byte p99".into(), ms(p99d), ms(p99t), diff(p99t, p99d));
        row(
            format!(
                "streaming, a {} MiB SSE response (median of {})",
                o.stream_mib,
                t.mb_per_s.len()
            ),
            format!("{} MB/s", num(mbd)),
            format!("{} MB/s", num(mbt)),
            times(ratio(mbt, mbd)),
        );
        row(
            format!(
                "small calls/s, {} clients (median of {} × {:.1} s)",
                o.clients,
                t.calls_per_s.len(),
                o.rate_time.as_secs_f64()
            ),
            num(cpsd),
            num(cpst),
            times(ratio(cpst, cpsd)),
        );
        let w = &self.ws;
        let (wd, wt) = (percentile(&w.ttfb_direct_us, 50.0), percentile(&w.ttfb_tapped_us, 50.0));
        row(
            format!("WebSocket: time to first byte p50 ({} small replies)", w.ttfb_direct_us.len()),
            ms(wd),
            ms(wt),
            diff(wt, wd),
        );
        let (wmd, wmt) = (median(&w.mb_per_s_direct), median(&w.mb_per_s_tapped));
        row(
            format!(
                "WebSocket: streaming, a {} MiB reply in 16 KiB text frames (median of {})",
                o.stream_mib,
                w.mb_per_s_tapped.len()
            ),
            format!("{} MB/s", num(wmd)),
            format!("{} MB/s", num(wmt)),
            times(ratio(wmt, wmd)),
        );
        row(
            "first event of a held stream".into(),
            arrival(d.first_event),
            arrival(t.first_event),
            format!("unbuffered: {}", yes(unbuffered)),
        );

        let _ = writeln!(out);
        let usage = match self.long_usage.last() {
            Some((served, read)) => format!(
                "usage read from each tapped long stream: {} of {} matched (last: {} output tokens read, {} served)",
                self.long_usage.iter().filter(|(s, r)| s == r).count(),
                self.long_usage.len(),
                thousands(*read as f64),
                thousands(*served as f64)
            ),
            None => "usage of the long stream: not reported by the tap".into(),
        };
        let _ = writeln!(
            out,
            "- tap calls read: {} for {} tapped responses; {usage}",
            thousands(self.tap_calls as f64),
            thousands(self.tapped_responses as f64)
        );
        let _ = writeln!(
            out,
            "- {} replies (or head and tail of each long stream) compared byte for byte with what the upstream served: identical",
            thousands(self.compared as f64)
        );
        let cpu = |v: Option<f64>, unit: &str| {
            v.map_or_else(
                || "–".into(),
                |v| {
                    if v >= 100.0 {
                        format!("{} µs {unit}", thousands(v))
                    } else {
                        format!("{v:.1} µs {unit}")
                    }
                },
            )
        };
        let _ = writeln!(
            out,
            "- tap CPU (its threads): {}, {}",
            cpu(self.tap_cpu_per_call_us, "per small call"),
            cpu(self.tap_cpu_per_mb_us, "per MB streamed")
        );
        let mib = |k: Option<u64>| {
            k.map_or_else(|| "–".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
        };
        let _ = writeln!(
            out,
            "- peak RSS of this process (client, upstream and tap) while streaming {} MiB through the tap: {} (RSS before: {}){}",
            o.stream_mib,
            mib(self.rss_peak_kib),
            mib(self.rss_before_kib),
            if self.peak_since_start {
                "; the peak could not be reset, so it is the process's"
            } else {
                ""
            }
        );
        let within = match (p50t, p50d) {
            (Some(a), Some(b)) => yes(a - b <= 1000.0),
            _ => "–",
        };
        let _ = writeln!(
            out,
            "- goals: TTFB p50 within 1 ms of direct: {within}; >= 90% of direct MB/s: {}; no response buffered: {}",
            ratio(mbt, mbd).map_or("–", |r| yes(r >= 0.9)),
            yes(unbuffered)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny run end to end: the tap forwards every byte, reports every call with the usage
    /// served, and lets a held stream's first event through. Timings are not looked at.
    #[test]
    fn a_tiny_run_checks_out() {
        let options = TapOptions {
            rounds: 2,
            requests: 20,
            clients: 2,
            stream_mib: 1,
            rate_time: Duration::from_millis(50),
        };
        let r = run(&options).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert!(r.tapped.first_event.is_some() && r.direct.first_event.is_some());
        assert_eq!((r.direct.ttfb_us.len(), r.tapped.ttfb_us.len()), (20, 20));
        assert_eq!(r.tapped.mb_per_s.len(), 2);
        assert!(r.tap_calls > 40 && r.tap_calls == r.tapped_responses);
        assert!(r.long_usage.len() == 3 && r.long_usage.iter().all(|(s, r)| s == r));
        assert!(r.table().contains("unbuffered: yes"));
    }
}
