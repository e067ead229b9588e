//! A seeded generator of Claude Code and Codex histories whose true bill is known call by call,
//! for the reports benchmark and the test that holds `report` to the bill.
//!
//! The files have the shapes the agents write (research/agents-usage.md, the ccusage notes in
//! research/pricing-and-tokens.md): Claude Code's assistant lines repeat one usage per content
//! block, some streamed with a partial output count first; 1-hour cache writes; `[1m]` Sonnet 4.5
//! sessions whose prompts pass 200k (billed whole at the long-context rates); Opus 4.6 fast mode
//! (6x); subagents in `<id>/subagents/`; forks that start with a copy of their parent's lines;
//! Codex rollouts whose `token_count` is sometimes re-emitted unchanged. The truth is priced here
//! from the providers' list prices, independently of acp-usage's catalog, so a bench or test that
//! compares the two checks something.
//!
//! Everything is in UTC: run the tools with `TZ=UTC` so their days are these days.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The seed: the same spec writes the same bytes.
    pub seed: u64,
    /// Sessions (Claude Code and Codex; forks and subagents on top).
    pub sessions: usize,
    /// Days the sessions spread over, from 2026-10-01 (UTC).
    pub days: u32,
    /// Bytes of tool output in each user line (what makes real transcripts large).
    pub filler: usize,
    /// Some Sonnet 4.5 calls in fast mode, which has no published multiplier for it: priced at
    /// 1x in the truth too, and kept apart in [`Truth::inexact`] (a tool must not call them
    /// exact).
    pub unknown_modifier: bool,
}

impl Spec {
    /// A small history for tests: every shape, a few MB.
    pub fn small(seed: u64) -> Spec {
        Spec { seed, sessions: 24, days: 5, filler: 2_000, unknown_modifier: true }
    }

    /// About `bytes` of history: sessions of ~2 MB, as a long Claude Code session is.
    pub fn sized(seed: u64, bytes: u64) -> Spec {
        let filler = 20_000;
        // Measured: ~100 lines' worth of `filler` and ~1.3 KB of assistant lines per session,
        // subagents, forks and Codex's shorter rollouts included.
        let per_session = 100 * (filler as u64 + 1_300);
        let sessions = (bytes / per_session).max(1) as usize;
        Spec { seed, sessions, days: 30, filler, unknown_modifier: false }
    }
}

/// One day's and one model's share of the bill.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bill {
    /// USD.
    pub cost: f64,
    /// Billed calls.
    pub calls: u64,
    /// Input tokens, cached ones included.
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
}

impl Bill {
    fn add(&mut self, other: &Bill) {
        self.cost += other.cost;
        self.calls += other.calls;
        self.input += other.input;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.output += other.output;
    }
}

/// The true bill of a generated history.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Per UTC day (`YYYY-MM-DD`) and model.
    pub by_day_model: BTreeMap<(String, String), Bill>,
    /// What each modifier added to the bill: fast mode, the long-context tier, and 1-hour
    /// cache writes (over the 5-minute rate).
    pub fast_extra: f64,
    pub long_context_extra: f64,
    pub one_hour_extra: f64,
    /// The cost of the calls whose modifier has no known multiplier (priced at 1x), per day
    /// and model: part of `by_day_model`, and never exact.
    pub inexact: BTreeMap<(String, String), f64>,
    /// Files written and their bytes.
    pub files: usize,
    pub bytes: u64,
}

impl Truth {
    pub fn total(&self) -> Bill {
        let mut t = Bill::default();
        self.by_day_model.values().for_each(|b| t.add(b));
        t
    }

    /// Per day, every model summed.
    pub fn by_day(&self) -> BTreeMap<String, Bill> {
        let mut out: BTreeMap<String, Bill> = BTreeMap::new();
        for ((day, _), b) in &self.by_day_model {
            out.entry(day.clone()).or_default().add(b);
        }
        out
    }

    /// Per model, every day summed.
    pub fn by_model(&self) -> BTreeMap<String, Bill> {
        let mut out: BTreeMap<String, Bill> = BTreeMap::new();
        for ((_, model), b) in &self.by_day_model {
            out.entry(model.clone()).or_default().add(b);
        }
        out
    }
}

/// List prices, USD per million tokens (Anthropic's and OpenAI's pricing pages, as
/// research/pricing-and-tokens.md records them).
struct Price {
    input: f64,
    output: f64,
    cache_read: f64,
    write_5m: f64,
    write_1h: f64,
    /// Above 200k prompt tokens, the whole request at these (input, output, read, 5m, 1h).
    long: Option<[f64; 5]>,
    /// Fast mode's multiplier; `None`: none published for the model.
    fast: Option<f64>,
}

const SONNET: &str = "claude-sonnet-4-5-20250929";
const OPUS: &str = "claude-opus-4-6";
const HAIKU: &str = "claude-haiku-4-5-20251001";
const CODEX: &str = "gpt-5.2-codex";

fn price(model: &str) -> Price {
    match model {
        SONNET => Price {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            write_5m: 3.75,
            write_1h: 6.0,
            long: Some([6.0, 22.5, 0.6, 7.5, 12.0]),
            fast: None,
        },
        OPUS => Price {
            input: 5.0,
            output: 25.0,
            cache_read: 0.5,
            write_5m: 6.25,
            write_1h: 10.0,
            long: None,
            fast: Some(6.0),
        },
        HAIKU => Price {
            input: 1.0,
            output: 5.0,
            cache_read: 0.1,
            write_5m: 1.25,
            write_1h: 2.0,
            long: None,
            fast: None,
        },
        // OpenAI: input includes the cached part; no cache-write charge.
        _ => Price {
            input: 1.75,
            output: 14.0,
            cache_read: 0.175,
            write_5m: 1.75,
            write_1h: 1.75,
            long: None,
            fast: None,
        },
    }
}

/// One model call's counts, disjoint (Anthropic's way): uncached input, reads, writes, output.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    uncached: u64,
    read: u64,
    write_5m: u64,
    write_1h: u64,
    output: u64,
}

impl Counts {
    fn prompt(&self) -> u64 {
        self.uncached + self.read + self.write_5m + self.write_1h
    }
}

/// The bill of one call, and what each modifier added to it; `None` as the second when the
/// call's modifier has no known multiplier (priced without it).
fn bill(model: &str, c: &Counts, fast: bool, truth: &mut Truth) -> (f64, bool) {
    let p = price(model);
    let rates = |r: [f64; 5]| {
        (c.uncached as f64 * r[0]
            + c.output as f64 * r[1]
            + c.read as f64 * r[2]
            + c.write_5m as f64 * r[3]
            + c.write_1h as f64 * r[4])
            / 1e6
    };
    let base = [p.input, p.output, p.cache_read, p.write_5m, p.write_1h];
    let standard = rates(base);
    let tiered = match p.long {
        Some(long) if c.prompt() > 200_000 => rates(long),
        _ => standard,
    };
    let (multiplier, known) = match (fast, p.fast) {
        (false, _) => (1.0, true),
        (true, Some(m)) => (m, true),
        (true, None) => (1.0, false),
    };
    let cost = tiered * multiplier;
    truth.long_context_extra += (tiered - standard) * multiplier;
    truth.fast_extra += cost - tiered;
    truth.one_hour_extra += c.write_1h as f64 * (p.write_1h - p.write_5m) / 1e6;
    (cost, known)
}

/// SplitMix64: small, seedable, and the same everywhere (no dependency for a generator).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }

    fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        while s.len() < n {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(n);
        s
    }

    fn uuid(&mut self) -> String {
        let h = self.hex(32);
        format!("{}-{}-4{}-a{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
    }
}

/// Where the files go under a home directory, and the text that fills the user lines.
struct Writer {
    home: PathBuf,
    filler: String,
    truth: Truth,
    unknown_modifier: bool,
}

/// 2026-10-01T00:00:00Z.
const EPOCH_MS: i64 = 1_790_812_800_000;

fn stamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a time in range")
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn day(ms: i64) -> String {
    stamp(ms)[..10].to_owned()
}

/// Writes a history under `home` (`.claude/projects/…`, `.codex/sessions/…`) and returns its
/// true bill.
pub fn generate(home: &Path, spec: &Spec) -> std::io::Result<Truth> {
    let mut rng = Rng(spec.seed);
    let mut filler = String::with_capacity(spec.filler);
    while filler.len() < spec.filler {
        filler.push_str(&format!("line {:x} of a tool's output\\n", rng.next()));
    }
    filler.truncate(spec.filler);
    let mut w = Writer {
        home: home.to_owned(),
        filler,
        truth: Truth::default(),
        unknown_modifier: spec.unknown_modifier,
    };
    // Forks copy a parent Claude Code session written earlier.
    let mut parents: Vec<(Vec<String>, i64)> = Vec::new();
    for n in 0..spec.sessions {
        let day = rng.range(0, spec.days as u64 - 1) as i64;
        let start = EPOCH_MS + (day * 86_400 + rng.range(0, 80_000) as i64) * 1000;
        if n % 5 == 4 {
            w.codex_session(&mut rng, start)?;
        } else {
            let fork_of = if n % 7 == 6 && !parents.is_empty() {
                let i = rng.range(0, parents.len() as u64 - 1) as usize;
                Some(parents[i].clone())
            } else {
                None
            };
            // A fork goes on from where its copy of the parent ends.
            let start = fork_of.as_ref().map_or(start, |(_, last)| start.max(*last));
            let copied = fork_of.as_ref().map(|(lines, _)| lines.as_slice());
            if let Some(lines) = w.claude_session(&mut rng, start, copied)? {
                parents.push(lines);
                if parents.len() > 8 {
                    parents.remove(0);
                }
            }
        }
    }
    Ok(w.truth)
}

impl Writer {
    fn create(&mut self, path: &Path) -> std::io::Result<BufWriter<fs::File>> {
        fs::create_dir_all(path.parent().expect("a file in a directory"))?;
        self.truth.files += 1;
        Ok(BufWriter::new(fs::File::create(path)?))
    }

    fn line(&mut self, out: &mut impl Write, value: &Value) -> std::io::Result<()> {
        let text = serde_json::to_string(value).expect("JSON");
        self.truth.bytes += text.len() as u64 + 1;
        writeln!(out, "{text}")
    }

    fn count(&mut self, at_ms: i64, model: &str, c: &Counts, fast: bool) {
        let (cost, known) = bill(model, c, fast, &mut self.truth);
        let key = (day(at_ms), model.to_owned());
        if !known {
            *self.truth.inexact.entry(key.clone()).or_default() += cost;
        }
        let b = self.truth.by_day_model.entry(key).or_default();
        b.add(&Bill {
            cost,
            calls: 1,
            input: c.prompt(),
            cache_read: c.read,
            cache_write: c.write_5m + c.write_1h,
            output: c.output,
        });
    }

    /// A Claude Code session (and its subagents); a fork starts with a copy of `fork_of`'s
    /// lines, whose calls are the parent's. Returns its lines when it may be forked later.
    fn claude_session(
        &mut self,
        rng: &mut Rng,
        start: i64,
        fork_of: Option<&[String]>,
    ) -> std::io::Result<Option<(Vec<String>, i64)>> {
        let id = rng.uuid();
        let (model, long) = match rng.range(0, 9) {
            0..=3 => (SONNET, false),
            4..=5 => (SONNET, true),
            _ => (OPUS, false),
        };
        let fast_session = model == OPUS && rng.chance(0.5);
        let project = format!("/home/dev/project-{}", rng.range(1, 6));
        let slug = project.replace('/', "-");
        let path = self.home.join(".claude/projects").join(&slug).join(format!("{id}.jsonl"));
        let mut out = self.create(&path)?;
        let mut kept = Vec::new();
        let mut kept_until = start;
        if let Some(parent) = fork_of {
            for text in parent {
                self.truth.bytes += text.len() as u64 + 1;
                writeln!(out, "{text}")?;
            }
        }
        let calls = rng.range(20, 170);
        let mut context = rng.range(12_000, 20_000);
        let mut at = start;
        let mut parent_uuid = Value::Null;
        for n in 0..calls {
            at += rng.range(3, 40) as i64 * 1000;
            let user_uuid = rng.uuid();
            let user = json!({
                "parentUuid": parent_uuid, "isSidechain": false, "type": "user",
                "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": format!("toolu_{}", rng.hex(24)),
                     "content": self.filler}]},
                "uuid": user_uuid, "timestamp": stamp(at), "sessionId": id, "cwd": project,
                "version": "2.1.185", "userType": "external",
            });
            self.line(&mut out, &user)?;
            at += rng.range(1, 20) as i64 * 1000;
            // The prompt grows; a long session is driven past 200k.
            let grow = if long { rng.range(2_000, 9_000) } else { rng.range(300, 2_500) };
            let write = grow.min(context);
            let one_hour = rng.chance(0.6);
            let c = Counts {
                uncached: rng.range(1, 12),
                read: context,
                write_5m: if one_hour { 0 } else { write },
                write_1h: if one_hour { write } else { 0 },
                output: rng.range(20, 1_800),
            };
            context += write;
            if !long && context > 150_000 {
                // Compacted: a fresh, short context.
                context = rng.range(12_000, 20_000);
            }
            let fast = (fast_session && n % 3 != 2)
                || (self.unknown_modifier && model == SONNET && n % 10 == 9);
            let message_id = format!("msg_{}", rng.hex(24));
            let request_id = format!("req_{}", rng.hex(24));
            let blocks = rng.range(1, 3);
            let partial = rng.chance(0.3);
            let mut previous = Value::String(user_uuid);
            for b in 0..blocks {
                let output =
                    if partial && b == 0 && blocks > 1 { c.output / 4 + 1 } else { c.output };
                let uuid = rng.uuid();
                let block = match b {
                    0 if blocks > 1 => {
                        json!({"type": "thinking", "thinking": "Considering.", "signature": rng.hex(40)})
                    }
                    b if b + 1 == blocks => json!({"type": "text", "text": "Done with that step."}),
                    _ => {
                        json!({"type": "tool_use", "id": format!("toolu_{}", rng.hex(24)), "name": "Bash", "input": {"command": "ls"}})
                    }
                };
                let line = json!({
                    "parentUuid": previous, "isSidechain": false, "type": "assistant",
                    "requestId": request_id, "uuid": uuid, "timestamp": stamp(at + b as i64 * 200),
                    "sessionId": id, "cwd": project, "version": "2.1.185", "userType": "external",
                    "message": {
                        "id": message_id, "type": "message", "role": "assistant", "model": model,
                        "content": [block], "stop_reason": null,
                        "usage": anthropic_usage(&c, output, fast),
                    },
                });
                self.line(&mut out, &line)?;
                if fork_of.is_none() && n < 6 {
                    kept.push(serde_json::to_string(&line).expect("JSON"));
                    kept_until = at + 1_000;
                }
                previous = Value::String(uuid);
            }
            self.count(at, model, &c, fast);
            parent_uuid = previous;
            if n % 60 == 17 {
                self.subagent(rng, &path, &id, &project, at)?;
            }
        }
        out.flush()?;
        Ok(if fork_of.is_none() { Some((kept, kept_until)) } else { None })
    }

    /// A Task subagent's transcript beside its session: Haiku, its own calls.
    fn subagent(
        &mut self,
        rng: &mut Rng,
        session_file: &Path,
        session: &str,
        project: &str,
        mut at: i64,
    ) -> std::io::Result<()> {
        let dir = session_file.with_extension("").join("subagents");
        let mut out = self.create(&dir.join(format!("agent-{}.jsonl", rng.hex(8))))?;
        let mut context = rng.range(4_000, 9_000);
        for _ in 0..rng.range(3, 12) {
            at += rng.range(2, 10) as i64 * 1000;
            let c = Counts {
                uncached: rng.range(1, 30),
                read: context,
                write_5m: 900,
                write_1h: 0,
                output: rng.range(40, 600),
            };
            context += 900;
            let line = json!({
                "parentUuid": null, "isSidechain": true, "type": "assistant",
                "requestId": format!("req_{}", rng.hex(24)), "uuid": rng.uuid(),
                "timestamp": stamp(at), "sessionId": session, "cwd": project,
                "version": "2.1.185", "agentId": rng.hex(8),
                "message": {
                    "id": format!("msg_{}", rng.hex(24)), "type": "message", "role": "assistant",
                    "model": HAIKU, "content": [{"type": "text", "text": "Found it."}],
                    "usage": anthropic_usage(&c, c.output, false),
                },
            });
            self.line(&mut out, &line)?;
            self.count(at, HAIKU, &c, false);
        }
        out.flush()
    }

    /// A Codex rollout: `token_count` after each call, some re-emitted unchanged.
    fn codex_session(&mut self, rng: &mut Rng, start: i64) -> std::io::Result<()> {
        let id = rng.uuid();
        let name = stamp(start).replace(':', "-");
        let path = self
            .home
            .join(".codex/sessions")
            .join(day(start).replace('-', "/"))
            .join(format!("rollout-{}-{id}.jsonl", &name[..19]));
        let mut out = self.create(&path)?;
        let cwd = format!("/home/dev/project-{}", rng.range(1, 6));
        self.line(&mut out, &json!({"timestamp": stamp(start), "type": "session_meta",
            "payload": {"id": id, "timestamp": stamp(start), "cwd": cwd, "originator": "codex_cli_rs",
                        "cli_version": "0.137.0", "source": "cli", "model_provider": "openai"}}))?;
        self.line(
            &mut out,
            &json!({"timestamp": stamp(start), "type": "turn_context",
            "payload": {"cwd": cwd, "model": CODEX, "approval_policy": "on-request"}}),
        )?;
        let (mut total_in, mut total_cached, mut total_out, mut total_reason) = (0u64, 0, 0, 0);
        let mut context = rng.range(8_000, 14_000);
        let mut at = start;
        for _ in 0..rng.range(15, 120) {
            at += rng.range(5, 60) as i64 * 1000;
            self.line(&mut out, &json!({"timestamp": stamp(at), "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": format!("call_{}", rng.hex(20)),
                            "output": self.filler}}))?;
            let grow = rng.range(400, 3_000);
            let cached = context / 1024 * 1024;
            let input = context + grow;
            let reasoning = rng.range(0, 400);
            let output = rng.range(30, 1_500) + reasoning;
            context = if input > 200_000 { rng.range(8_000, 14_000) } else { input };
            total_in += input;
            total_cached += cached;
            total_out += output;
            total_reason += reasoning;
            let event = json!({"timestamp": stamp(at), "type": "event_msg", "payload": {
                "type": "token_count",
                "info": {
                    "total_token_usage": {"input_tokens": total_in, "cached_input_tokens": total_cached,
                        "output_tokens": total_out, "reasoning_output_tokens": total_reason,
                        "total_tokens": total_in + total_out},
                    "last_token_usage": {"input_tokens": input, "cached_input_tokens": cached,
                        "output_tokens": output, "reasoning_output_tokens": reasoning,
                        "total_tokens": input + output},
                    "model_context_window": 258_400},
                "rate_limits": null}});
            self.line(&mut out, &event)?;
            if rng.chance(0.25) {
                // Codex re-emits the last count (after a turn ends, on resume): one call.
                self.line(&mut out, &event)?;
            }
            let c =
                Counts { uncached: input - cached, read: cached, write_5m: 0, write_1h: 0, output };
            self.count(at, CODEX, &c, false);
        }
        out.flush()
    }
}

/// Claude Code's `message.usage` for `c`, with `output` as this line's output count.
fn anthropic_usage(c: &Counts, output: u64, fast: bool) -> Value {
    json!({
        "input_tokens": c.uncached,
        "cache_creation_input_tokens": c.write_5m + c.write_1h,
        "cache_read_input_tokens": c.read,
        "output_tokens": output,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {"ephemeral_1h_input_tokens": c.write_1h, "ephemeral_5m_input_tokens": c.write_5m},
        "inference_geo": "",
        "speed": if fast { "fast" } else { "standard" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_writes_the_same_history_and_bill() {
        let a = tempdir("a");
        let b = tempdir("b");
        let ta = generate(&a, &Spec::small(7)).unwrap();
        let tb = generate(&b, &Spec::small(7)).unwrap();
        assert_eq!(ta.by_day_model, tb.by_day_model);
        assert_eq!(ta.bytes, tb.bytes);
        assert!(ta.files > 24, "subagents and sessions: {}", ta.files);
        // Every shape the bench means to hold the tools to is in the small history.
        assert!(ta.fast_extra > 0.0 && ta.long_context_extra > 0.0 && ta.one_hour_extra > 0.0);
        assert!(!ta.inexact.is_empty(), "no call with an unpriceable modifier");
        let models = ta.by_model();
        for m in [SONNET, OPUS, HAIKU, CODEX] {
            assert!(models.contains_key(m), "{m} missing: {:?}", models.keys());
        }
        let _ = fs::remove_dir_all(a);
        let _ = fs::remove_dir_all(b);
    }

    #[test]
    fn a_long_request_is_billed_whole_at_the_premium_and_fast_multiplies_it_all() {
        let mut t = Truth::default();
        let long =
            Counts { uncached: 10, read: 190_000, write_5m: 0, write_1h: 20_000, output: 1_000 };
        let (cost, known) = bill(SONNET, &long, false, &mut t);
        assert!(known);
        let want = (10.0 * 6.0 + 190_000.0 * 0.6 + 20_000.0 * 12.0 + 1_000.0 * 22.5) / 1e6;
        assert!((cost - want).abs() < 1e-12, "{cost} != {want}");
        let short = Counts { read: 100_000, ..long };
        let (cost, _) = bill(OPUS, &short, true, &mut t);
        let want = 6.0 * (10.0 * 5.0 + 100_000.0 * 0.5 + 20_000.0 * 10.0 + 1_000.0 * 25.0) / 1e6;
        assert!((cost - want).abs() < 1e-12, "{cost} != {want}");
    }

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "acp-usage-history-{tag}-{}-{}",
            std::process::id(),
            line!()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }
}
