//! The relay scenarios' results as people read them: one line per run on stderr ([`brief`]), and
//! the table of medians with each relay's ratio to the raw byte copy ([`Table`]).

use std::collections::BTreeMap;

use acp_usage_bench::client::Measurement;
use acp_usage_bench::scenario::{Kind, Scenario};
use acp_usage_bench::stats::{median, percentile, thousands};

fn msgs_per_s(m: &Measurement) -> f64 {
    m.messages as f64 / m.elapsed.as_secs_f64()
}

fn mb_per_s(m: &Measurement) -> f64 {
    m.bytes as f64 / m.elapsed.as_secs_f64() / 1e6
}

fn cpu_per_msg_us(m: &Measurement) -> Option<f64> {
    Some(m.cpu?.as_secs_f64() * 1e6 / m.messages.max(1) as f64)
}

/// One line of progress.
pub(crate) fn brief(sc: &Scenario, m: &Measurement) -> String {
    let cpu = m.cpu.map(|c| format!(", cpu {:.2} s", c.as_secs_f64())).unwrap_or_default();
    let rss = m.hwm_kib.map(|k| format!(", peak RSS {}", mib(k as f64))).unwrap_or_default();
    let main = match sc.kind {
        Kind::RoundTrip { .. } => format!(
            "p50 {:.1} µs, p99 {:.1} µs",
            percentile(&m.rtts_us, 50.0).unwrap_or(f64::NAN),
            percentile(&m.rtts_us, 99.0).unwrap_or(f64::NAN)
        ),
        _ if sc.is_bulk() => format!("{:.0} MB/s", mb_per_s(m)),
        Kind::Slow { .. } => format!("{} chunks, {:.1} s", m.messages, m.elapsed.as_secs_f64()),
        _ => format!("{} msg/s", thousands(msgs_per_s(m))),
    };
    format!("{main}{cpu}{rss}, {} usage_update, {}", m.usage_updates, m.exit)
}

/// A ratio with enough digits to tell small ones apart.
fn times(r: f64) -> String {
    if r >= 0.095 { format!("{r:.2}x") } else { format!("{r:.4}x") }
}

fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

/// One column of the summary: a title and the cell of a relay.
type Column<'a> = Box<dyn Fn(&str) -> String + 'a>;

/// Formats the medians.
pub(crate) struct Table<'a> {
    pub(crate) relays: &'a [&'a str],
    pub(crate) results: &'a BTreeMap<(&'a str, &'a str), Vec<Measurement>>,
    pub(crate) failed: &'a BTreeMap<(&'a str, &'a str), String>,
}

impl Table<'_> {
    /// The median of `f` over the runs of `relay` in `sc`.
    fn med(&self, relay: &str, sc: &str, f: impl Fn(&Measurement) -> Option<f64>) -> Option<f64> {
        let runs = self.results.get(&(relay, sc))?;
        median(&runs.iter().filter_map(f).collect::<Vec<_>>())
    }

    fn cell(
        &self,
        relay: &str,
        sc: &str,
        value: Option<f64>,
        fmt: impl Fn(f64) -> String,
    ) -> String {
        match value {
            Some(v) => fmt(v),
            None if self.failed.contains_key(&(relay, sc)) => "FAILED".into(),
            None => "–".into(),
        }
    }

    /// A value with its ratio to the raw copy's.
    fn ratio(
        &self,
        relay: &str,
        sc: &str,
        f: impl Fn(&Measurement) -> Option<f64> + Copy,
        unit: &str,
    ) -> String {
        let v = self.med(relay, sc, f);
        let raw = self.med("raw-copy", sc, f);
        self.cell(relay, sc, v, |v| match raw {
            Some(r) if r > 0.0 && relay != "raw-copy" => {
                format!("{}{unit} ({})", thousands(v), times(v / r))
            }
            _ => format!("{}{unit}", thousands(v)),
        })
    }

    fn rss(&self, relay: &str, sc: &str) -> String {
        let v = self.med(relay, sc, |m| m.hwm_kib.map(|k| k as f64));
        self.cell(relay, sc, v, mib)
    }

    fn cpu(&self, relay: &str, sc: &str) -> String {
        let v = self.med(relay, sc, cpu_per_msg_us);
        self.cell(relay, sc, v, |v| format!("{v:.2} µs"))
    }

    fn rtt(&self, relay: &str, sc: &str) -> String {
        let p = |q: f64| self.med(relay, sc, move |m| percentile(&m.rtts_us, q));
        let raw50 = self.med("raw-copy", sc, |m| percentile(&m.rtts_us, 50.0));
        let (p50, p99) = (p(50.0), p(99.0));
        self.cell(relay, sc, p50, |v| {
            let diff = match raw50 {
                Some(r) if relay != "raw-copy" => format!(" ({:+.1})", v - r),
                _ => String::new(),
            };
            format!("{v:.1} µs{diff} / p99 {:.1} µs", p99.unwrap_or(f64::NAN))
        })
    }

    pub(crate) fn scenario(&self, sc: &Scenario) {
        let runs = self
            .relays
            .iter()
            .filter_map(|r| self.results.get(&(*r, sc.name)))
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        println!("## {sc} (median of {runs})\n");
        match sc.kind {
            Kind::RoundTrip { .. } => {
                println!("| relay | round trip p50 (vs raw) / p99 | peak RSS |\n|---|---|---|");
                for r in self.relays {
                    println!("| {r} | {} | {} |", self.rtt(r, sc.name), self.rss(r, sc.name));
                }
            }
            Kind::Slow { chunks, size, .. } => {
                println!(
                    "| relay | checked chunks | time | peak RSS | peak RSS / burst |\n|---|---|---|---|---|"
                );
                let burst = (chunks * size as u64) as f64 / 1024.0;
                for r in self.relays.iter().filter(|r| **r != "direct") {
                    let n = self.med(r, sc.name, |m| Some(m.messages as f64));
                    let t = self.med(r, sc.name, |m| Some(m.elapsed.as_secs_f64()));
                    let h = self.med(r, sc.name, |m| m.hwm_kib.map(|k| k as f64));
                    println!(
                        "| {r} | {} | {} | {} | {} |",
                        self.cell(r, sc.name, n, thousands),
                        self.cell(r, sc.name, t, |t| format!("{t:.1} s")),
                        self.rss(r, sc.name),
                        self.cell(r, sc.name, h, |h| format!("{:.0}%", 100.0 * h / burst)),
                    );
                }
            }
            _ => {
                println!(
                    "| relay | messages/s | MB/s | relay CPU/msg | peak RSS | usage_update |\n|---|---|---|---|---|---|"
                );
                for r in self.relays {
                    let u = self.med(r, sc.name, |m| Some(m.usage_updates as f64));
                    println!(
                        "| {r} | {} | {} | {} | {} | {} |",
                        self.ratio(r, sc.name, |m| Some(msgs_per_s(m)), ""),
                        self.ratio(r, sc.name, |m| Some(mb_per_s(m)), ""),
                        self.cpu(r, sc.name),
                        self.rss(r, sc.name),
                        self.cell(r, sc.name, u, thousands),
                    );
                }
            }
        }
        let altered: Vec<String> = self
            .relays
            .iter()
            .filter_map(|r| {
                let n: u64 = self.results.get(&(*r, sc.name))?.iter().map(|m| m.altered).sum();
                (n > 0).then(|| format!("{r}: {n} chunks re-serialised (not byte for byte)"))
            })
            .collect();
        if !altered.is_empty() {
            println!("\nnote: {}", altered.join("; "));
        }
        println!();
    }

    pub(crate) fn summary(&self, scenarios: &[Scenario]) {
        let has = |n: &str| scenarios.iter().any(|s| s.name == n);
        let mut cols: Vec<(&str, Column<'_>)> = Vec::new();
        if has("small") {
            cols.push((
                "messages/s (200 B)",
                Box::new(|r| self.ratio(r, "small", |m| Some(msgs_per_s(m)), "")),
            ));
        }
        for (n, title) in [
            ("large-64k", "MB/s 64 KiB lines"),
            ("large-1m", "MB/s 1 MiB"),
            ("large-16m", "MB/s 16 MiB"),
        ] {
            if has(n) {
                cols.push((title, Box::new(move |r| self.ratio(r, n, |m| Some(mb_per_s(m)), ""))));
            }
        }
        if has("rtt") {
            cols.push(("round trip p50 (vs raw) / p99", Box::new(|r| self.rtt(r, "rtt"))));
        }
        cols.push((
            "peak RSS (max over scenarios)",
            Box::new(|r| {
                let v = scenarios
                    .iter()
                    .filter(|s| !matches!(s.kind, Kind::Slow { .. }))
                    .filter_map(|s| self.med(r, s.name, |m| m.hwm_kib.map(|k| k as f64)))
                    .reduce(f64::max);
                v.map(mib).unwrap_or_else(|| "–".into())
            }),
        ));
        if has("small") {
            cols.push(("CPU/msg (200 B)", Box::new(|r| self.cpu(r, "small"))));
        }
        if has("sessions") {
            cols.push((
                "100 sessions msgs/s",
                Box::new(|r| self.ratio(r, "sessions", |m| Some(msgs_per_s(m)), "")),
            ));
        }
        if has("load") {
            cols.push((
                "load replay msgs/s",
                Box::new(|r| self.ratio(r, "load", |m| Some(msgs_per_s(m)), "")),
            ));
        }
        if has("slow") {
            cols.push(("slow editor peak RSS", Box::new(|r| self.rss(r, "slow"))));
        }
        println!("## Summary (medians; ratios to the raw copy)\n");
        let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
        println!("| relay | {} |", head.join(" | "));
        println!("|---|{}", "---|".repeat(cols.len()));
        for r in self.relays {
            let cells: Vec<String> = cols.iter().map(|c| (c.1)(r)).collect();
            println!("| {r} | {} |", cells.join(" | "));
        }
        println!(
            "\nscenario sizes: {}",
            scenarios.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
        );
    }
}
