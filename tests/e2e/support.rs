//! Shared pieces of the end-to-end tests: scripts, fixtures, catalog prices, the checks of what
//! the relay sends against what the mock served, and the figures report.
//!
//! Tests share no state and run in parallel, those of one agent too: each has its own scratch
//! HOME, project and TMPDIR and its own mock LLM on an ephemeral port; the agents' installs are
//! only read, and what tests write outside their scratch (the figures report, fixtures with
//! `ACP_USAGE_UPDATE_FIXTURES`) goes to files of their own or is appended. How many run at once (heavy processes) is the test runner's
//! thread count, `RUST_TEST_THREADS`.
//!
//! Checks are soft: a test collects every discrepancy and fails once at the end with the whole
//! list, so that one run shows the lead every figure that is off, not just the first.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::{AcpClient, Dir};
use acp_usage_tests::mock_llm::{Call, Script, Usage};
use serde_json::Value;

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The mock script of `agent`'s tests, `fixtures/scripts/<agent>.json` (also usable with
/// `mock-llm --script`).
pub fn script(agent: Agent) -> Script {
    let path = fixtures_dir().join("scripts").join(format!("{}.json", agent.name()));
    Script::from_file(&path).unwrap_or_else(|err| panic!("reading {}: {err:#}", path.display()))
}

/// Writes `tests/fixtures/<name>` when `ACP_USAGE_UPDATE_FIXTURES` is set; runs never touch the
/// checked-in fixtures otherwise.
pub fn save_fixture(name: &str, contents: &str) {
    if std::env::var_os("ACP_USAGE_UPDATE_FIXTURES").is_none() {
        return;
    }
    let path = fixtures_dir().join(name);
    std::fs::write(&path, contents)
        .unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    eprintln!("fixture written: {}", path.display());
}

/// The mock's calls as JSON lines (request bodies left out).
pub fn calls_jsonl(calls: &[Call]) -> String {
    calls.iter().map(|call| serde_json::to_string(call).unwrap_or_default() + "\n").collect()
}

pub fn u64_at(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// Prices in USD per token, every one resolved (a cache price the catalog leaves out is the
/// input price, as acp-usage bills it).
#[derive(Debug, Clone, Copy)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write_5m: f64,
    pub cache_write_1h: f64,
}

/// The embedded catalog's prices of `model` for a request with `prompt` input tokens (its
/// long-context tier when the prompt passes it): the catalog acp-usage prices with, so a model
/// an agent starts using is priced here the day it is there. Fails the test for a model the
/// catalog does not price: a cost check is never skipped.
pub fn price(model: &str, prompt: u64) -> Price {
    let info = acp_usage_core::Catalog::embedded().lookup(model).unwrap_or_else(|| {
        panic!("the catalog has no model {model:?}: its cost cannot be checked")
    });
    let prices =
        info.prices.as_ref().unwrap_or_else(|| panic!("the catalog has no prices for {model:?}"));
    let p = acp_usage_core::pricing::prices_for_prompt(prices, prompt);
    Price {
        input: p.input,
        output: p.output,
        cache_read: p.cache_read.unwrap_or(p.input),
        cache_write_5m: p.cache_write_5m.unwrap_or(p.input),
        cache_write_1h: p.cache_write_1h.unwrap_or(p.input),
    }
}

/// What the catalog says `calls` cost, each at the prices of its own prompt's size. A billed
/// call without a model, or with one the catalog does not price, fails the test.
pub fn catalog_cost<'a>(calls: impl IntoIterator<Item = &'a Call>) -> f64 {
    let mut total = 0.0;
    for call in calls {
        let Some(usage) = call.usage else { continue };
        let model = call
            .model
            .as_deref()
            .unwrap_or_else(|| panic!("call {} has usage and no model: {call:?}", call.seq));
        let price = price(model, usage.input);
        let uncached = usage.input - usage.cache_read - usage.cache_write();
        total += uncached as f64 * price.input
            + usage.cache_read as f64 * price.cache_read
            + usage.cache_write_5m as f64 * price.cache_write_5m
            + usage.cache_write_1h as f64 * price.cache_write_1h
            + usage.output as f64 * price.output;
    }
    total
}

pub fn sum(calls: &[&Call]) -> Usage {
    calls.iter().filter_map(|call| call.usage).sum()
}

/// What must be exact in a per-turn `usage` even when the relay marks it estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The agent reports every call's total (Codex's `used`), so the turn's total is known.
    Total,
    /// The agent reports the turn's prompt tokens (Gemini's `_meta.quota`).
    Input,
    /// acp-usage reads every call from the agent's transcript: every figure must be exact and
    /// marked exact.
    Everything,
}

/// Soft checks plus the figures table for the lead.
#[derive(Debug)]
pub struct Checks {
    agent: Agent,
    failures: Vec<String>,
    rows: Vec<String>,
    /// Every `used` and `cost` must be exact and marked exact ([`Known::Everything`]).
    pub exact_everything: bool,
    /// Side calls the relay may or may not see (Claude Code's titles, which only its per-model
    /// counts show, and not on a resumed process's first turn): exact figures may exceed what
    /// the checks expect by at most these, and a cost may be the agent's (partial).
    pub slack: Slack,
}

/// What side calls the relay may have counted beyond the expected figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slack {
    /// The turn's side calls.
    pub turn: Usage,
    /// The session's side calls so far.
    pub session: Usage,
    /// Their catalog cost.
    pub cost: f64,
}

impl Checks {
    pub fn new(agent: Agent) -> Checks {
        Checks {
            agent,
            failures: Vec::new(),
            rows: Vec::new(),
            exact_everything: false,
            slack: Slack::default(),
        }
    }

    pub fn fail(&mut self, message: String) {
        eprintln!("CHECK FAILED: {message}");
        self.failures.push(message);
    }

    pub fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.fail(message());
        }
    }

    /// One row of the figures table: what the relay said against what the mock served (`NAN`:
    /// no expectation, shown as `?`).
    pub fn row(
        &mut self,
        phase: &str,
        figure: &str,
        relay: Option<f64>,
        mock: f64,
        exact: Option<bool>,
    ) {
        let relay_text = relay.map_or("-".to_owned(), |value| format!("{value}"));
        let error = match relay {
            _ if mock.is_nan() => "-".to_owned(),
            Some(value) if mock != 0.0 => format!("{:+.1}%", (value - mock) / mock * 100.0),
            Some(0.0) => "0%".to_owned(),
            _ => "-".to_owned(),
        };
        let exact = exact.map_or("-", |exact| if exact { "exact" } else { "estimate" });
        let mock = if mock.is_nan() { "?".to_owned() } else { mock.to_string() };
        self.rows.push(format!(
            "{:<7} {:<22} {:<16} relay={:<14} mock={:<14} {:<8} err={}",
            self.agent.name(),
            phase,
            figure,
            relay_text,
            mock,
            exact,
            error
        ));
    }

    /// Prints the table, adds it to `target/tmp/e2e-figures.txt` (rewritten by each test run),
    /// and fails with every discrepancy found.
    pub fn finish(self) {
        let mut table = String::new();
        for row in &self.rows {
            let _ = writeln!(table, "{row}");
        }
        if !table.is_empty() {
            eprintln!("--- figures ({}) ---\n{table}", self.agent.name());
            let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-figures.txt");
            // One report per test run. Under nextest each test is a process of its own: the
            // run's command removes the report before it starts (.ci/test.sh). Under libtest
            // the first table of the process starts the file afresh.
            static FRESH: std::sync::Once = std::sync::Once::new();
            FRESH.call_once(|| {
                if std::env::var_os("NEXTEST_RUN_ID").is_none() {
                    let _ = std::fs::remove_file(&path);
                }
            });
            if let Ok(mut file) = std::fs::File::options().create(true).append(true).open(&path) {
                use std::io::Write;
                let _ = file.write_all(table.as_bytes());
            }
        }
        if !self.failures.is_empty() {
            panic!("{} check(s) failed:\n- {}", self.failures.len(), self.failures.join("\n- "));
        }
    }

    /// A per-turn `usage` (the `session/prompt` result's) against the sum of the turn's calls.
    pub fn turn_usage(&mut self, phase: &str, usage: &Value, served: Usage, known: Known) {
        let (Some(total), Some(input), Some(output)) = (
            u64_at(usage, "totalTokens"),
            u64_at(usage, "inputTokens"),
            u64_at(usage, "outputTokens"),
        ) else {
            self.fail(format!(
                "{phase}: result has no per-turn usage with total/input/output: {usage}"
            ));
            return;
        };
        self.check(total == input + output, || {
            format!("{phase}: totalTokens {total} != input {input} + output {output}")
        });
        let meta = &usage["_meta"]["acpUsage"];
        let exact = meta["exact"].as_bool();
        self.check(exact.is_some(), || {
            format!("{phase}: usage._meta.acpUsage.exact missing: {usage}")
        });
        self.check(meta["source"].is_string(), || {
            format!("{phase}: usage._meta.acpUsage.source missing: {usage}")
        });
        let exact = exact.unwrap_or(false);
        if known == Known::Everything {
            // Per-call records: the tap's, the transcript's, or the agent's own per-call
            // reports (qwen).
            let per_call = ["tap", "transcript", "agent"].iter().any(|s| meta["source"] == *s);
            self.check(exact && per_call, || {
                format!("{phase}: the turn's usage should be exact, from per-call records: {usage}")
            });
        }
        let cached_read = u64_at(usage, "cachedReadTokens");
        let cached_write = u64_at(usage, "cachedWriteTokens");
        let thought = u64_at(usage, "thoughtTokens");
        self.row(phase, "turn.input", Some(input as f64), served.input as f64, Some(exact));
        self.row(phase, "turn.output", Some(output as f64), served.output as f64, Some(exact));
        self.row(phase, "turn.total", Some(total as f64), served.total() as f64, Some(exact));
        self.row(
            phase,
            "turn.cachedRead",
            cached_read.map(|n| n as f64),
            served.cache_read as f64,
            Some(exact),
        );
        self.row(
            phase,
            "turn.cachedWrite",
            cached_write.map(|n| n as f64),
            served.cache_write() as f64,
            Some(exact),
        );
        self.row(
            phase,
            "turn.thought",
            thought.map(|n| n as f64),
            served.thought as f64,
            Some(exact),
        );

        if exact {
            let s = self.slack.turn;
            let expect = [
                ("inputTokens", Some(input), served.input, s.input),
                ("outputTokens", Some(output), served.output, s.output),
                ("cachedReadTokens", cached_read, served.cache_read, s.cache_read),
                ("cachedWriteTokens", cached_write, served.cache_write(), s.cache_write()),
                ("thoughtTokens", thought, served.thought, s.thought),
            ];
            for (field, got, want, slack) in expect {
                // A zero subset may be left out; a non-zero one may not.
                let ok = got.is_some_and(|got| got >= want && got <= want + slack)
                    || (got.is_none() && want == 0);
                self.check(ok, || {
                    format!("{phase}: exact usage {field} = {got:?}, mock served {want}")
                });
            }
            return;
        }
        match known {
            Known::Total => self.check(total == served.total(), || {
                format!("{phase}: estimated usage must still have the exact total {} (sum of the calls' totals), got {total}", served.total())
            }),
            Known::Input => self.check(input == served.input, || {
                format!("{phase}: estimated usage must still have the exact inputTokens {} (from _meta.quota), got {input}", served.input)
            }),
            Known::Everything => {}
        }
        self.check(within(input, served.input, 0.5, 2.0), || {
            format!("{phase}: estimated input {input} too far from {}", served.input)
        });
        self.check(output > 0 && output <= served.output * 20 + 200, || {
            format!("{phase}: estimated output {output} not sane (mock {})", served.output)
        });
        for (field, got, whole) in [
            ("cachedReadTokens", cached_read, input),
            ("cachedWriteTokens", cached_write, input),
            ("thoughtTokens", thought, output),
        ] {
            self.check(got.is_none_or(|got| got <= whole), || {
                format!("{phase}: {field} {got:?} exceeds its total {whole}")
            });
        }
    }

    /// A `usage_update`: `used` against the last main call, `size` against the expected window,
    /// `cost` against the expected cumulative cost (`None`: not priced by this check).
    pub fn usage_update(
        &mut self,
        phase: &str,
        update: &Value,
        last_call: Option<&Usage>,
        size: Option<u64>,
        cost: Option<f64>,
    ) {
        let (Some(used), Some(got_size)) = (u64_at(update, "used"), u64_at(update, "size")) else {
            self.fail(format!("{phase}: usage_update without used/size: {update}"));
            return;
        };
        let meta = &update["_meta"]["acpUsage"];
        self.check(meta.is_object(), || {
            format!("{phase}: usage_update has no _meta.acpUsage: {update}")
        });
        self.check(got_size > 0, || format!("{phase}: usage_update with size 0: {update}"));
        if let Some(last) = last_call {
            let exact = meta["used"]["exact"].as_bool();
            if self.exact_everything {
                self.check(exact == Some(true), || {
                    format!("{phase}: used should be exact: {update}")
                });
            }
            self.row(phase, "used", Some(used as f64), last.in_context() as f64, exact);
            match exact {
                Some(true) => self.check(used == last.in_context(), || {
                    format!(
                        "{phase}: exact used {used} != last call's input + output - thought = {}",
                        last.in_context()
                    )
                }),
                _ => self.check(within(used, last.in_context(), 0.5, 2.0), || {
                    format!("{phase}: estimated used {used} too far from {}", last.in_context())
                }),
            }
        }
        let size_exact = meta["size"]["exact"].as_bool();
        match size {
            Some(size) => {
                self.row(phase, "size", Some(got_size as f64), size as f64, size_exact);
                self.check(got_size == size, || {
                    format!("{phase}: size {got_size}, expected {size}")
                });
            }
            None => self.row(phase, "size", Some(got_size as f64), f64::NAN, size_exact),
        }
        if let Some(want) = cost {
            let got = update["cost"]["amount"].as_f64();
            let exact = meta["cost"]["exact"].as_bool();
            let slack = self.slack.cost;
            if slack > 0.0 {
                // Some side calls may be unseen: the cost lies between what the relay must have
                // seen and everything billed, exact or the agent's own figure (partial).
                self.row(phase, "cost (USD)", got, want, exact);
                let got = got.unwrap_or(-1.0);
                // Above everything the checks know of, it can only be the agent's own statement
                // (which may include side calls made between turns, in no turn's window).
                let stated = meta["cost"]["agentStated"].as_f64();
                let agents = stated.is_some_and(|s| (s - got).abs() < 1e-9);
                self.check(got >= want - 1e-9 && (got <= want + slack + 1e-9 || agents), || {
                    format!(
                        "{phase}: cost {got} outside [{want}, {}] and not the agent's: {update}",
                        want + slack
                    )
                });
                self.check(exact == Some(true) || meta["cost"]["partial"] == true, || {
                    format!("{phase}: an inexact cost must be marked partial: {update}")
                });
                return;
            }
            if self.exact_everything {
                self.check(exact == Some(true), || {
                    format!("{phase}: cost should be exact: {update}")
                });
            }
            self.row(phase, "cost (USD)", got, want, exact);
            self.check(update["cost"]["currency"] == "USD" || got.is_none(), || {
                format!("{phase}: cost currency is not USD: {update}")
            });
            match (got, exact) {
                (None, _) => self.fail(format!(
                    "{phase}: usage_update has no cost (expected {want:.6}): {update}"
                )),
                (Some(got), Some(true)) => {
                    self.check(close(got, want), || format!("{phase}: exact cost {got} != {want}"))
                }
                (Some(got), _) => self
                    .check(got > 0.0 && got <= want * 4.0 && got >= want / 4.0, || {
                        format!("{phase}: estimated cost {got} too far from {want}")
                    }),
            }
        }
    }

    /// `_meta.usage` of a `usage_update`: the session's cumulative breakdown in the ACP `Usage`
    /// shape, against the sum of every billed call of the session. It carries no provenance of
    /// its own, so it must be exact where the per-turn figures are (`exact`), and in what the
    /// agent reports (`known`); otherwise it is only reported.
    pub fn cumulative(
        &mut self,
        phase: &str,
        update: &Value,
        served: Usage,
        exact: bool,
        known: Known,
    ) {
        let usage = &update["_meta"]["usage"];
        let (Some(total), Some(input), Some(output)) = (
            u64_at(usage, "totalTokens"),
            u64_at(usage, "inputTokens"),
            u64_at(usage, "outputTokens"),
        ) else {
            self.fail(format!("{phase}: usage_update has no cumulative _meta.usage: {update}"));
            return;
        };
        self.check(total == input + output, || {
            format!("{phase}: cumulative total {total} != {input} + {output}")
        });
        self.row(phase, "session.input", Some(input as f64), served.input as f64, Some(exact));
        self.row(phase, "session.total", Some(total as f64), served.total() as f64, Some(exact));
        let s = self.slack.session;
        let must_match = [
            ("inputTokens", input, served.input, s.input, exact || known == Known::Input),
            ("outputTokens", output, served.output, s.output, exact),
            ("totalTokens", total, served.total(), s.total(), exact || known == Known::Total),
        ];
        for (field, got, want, slack, must) in must_match {
            if must {
                self.check(got >= want && got <= want + slack, || {
                    format!("{phase}: cumulative _meta.usage.{field} {got} != the session's {want}")
                });
            }
        }
    }
}

fn within(got: u64, want: u64, low: f64, high: f64) -> bool {
    let (got, want) = (got as f64, want as f64);
    got >= want * low && got <= want * high
}

/// Equal up to float noise (costs are sums of products of small prices).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 + 1e-9 * b.abs()
}

/// The `usage_update` the relay sends after the response to request `id` (for `session/new`,
/// `session/load`, `session/resume`), waiting a little since it follows the response.
pub fn update_after_response(
    client: &AcpClient,
    id: &Value,
    session_id: &str,
) -> anyhow::Result<Value> {
    let lines = client.all_lines();
    let Some(response) = lines.iter().find(|line| line.dir == Dir::In && line.is_response_to(id))
    else {
        anyhow::bail!("no response to id {id}");
    };
    let line = client.wait_for_line(response.seq + 1, Duration::from_secs(15), |line| {
        line.dir == Dir::In
            && line.session_update().is_some_and(|update| update["sessionUpdate"] == "usage_update")
            && line.json.as_ref().is_some_and(|json| json["params"]["sessionId"] == session_id)
    })?;
    Ok(line.session_update().cloned().unwrap_or_default())
}

/// The id of the last request this client sent with `method`.
pub fn last_request_id(client: &AcpClient, method: &str) -> Value {
    let lines = client.all_lines();
    let line =
        lines.iter().rev().find(|line| line.dir == Dir::Out && line.method() == Some(method));
    line.and_then(|line| line.json.as_ref()).map(|json| json["id"].clone()).unwrap_or_default()
}

/// Waits until the last `usage_update` the client holds satisfies `done` (given `None` while
/// there is none), for at most `timeout`: each new line from the relay is a new chance, and a
/// quiet relay is looked at again every 200 ms (what `done` reads, the mock's record, may grow
/// meanwhile). The last `usage_update` then, if any.
pub fn wait_for_last_update(
    client: &AcpClient,
    timeout: Duration,
    mut done: impl FnMut(Option<&Value>) -> bool,
) -> Option<Value> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let mark = client.mark();
        let last = client.updates_since(0, "usage_update").pop();
        let now = std::time::Instant::now();
        if done(last.as_ref()) || now >= deadline {
            return last;
        }
        let _ =
            client.wait_for_line(mark, (deadline - now).min(Duration::from_millis(200)), |_| true);
    }
}

/// The `session/update` lines between the last `session/prompt` request and its result, and
/// whether the last of them (right before the result) is a `usage_update`.
pub fn usage_update_before_result(client: &AcpClient) -> Option<Value> {
    let id = last_request_id(client, "session/prompt");
    let lines = client.all_lines();
    let result = lines.iter().rposition(|line| line.dir == Dir::In && line.is_response_to(&id))?;
    let previous =
        lines[..result].iter().rev().find(|line| line.dir == Dir::In && line.method().is_some())?;
    match previous.session_update() {
        Some(update) if update["sessionUpdate"] == "usage_update" => Some(update.clone()),
        _ => None,
    }
}

/// How long the relays of a lab held turn results for the agent's transcript: `(ms, timed out)`
/// per held result, read from the relays' debug logs (`held result released`).
pub fn transcript_waits(scratch: &std::path::Path) -> Vec<(f64, bool)> {
    let mut waits = Vec::new();
    let Ok(entries) = std::fs::read_dir(scratch) else { return waits };
    let mut logs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.to_string_lossy().contains("-relay-") && p.extension().is_some_and(|e| e == "stderr")
        })
        .collect();
    logs.sort();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("held result released")) {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .map(|v| v.trim_matches(|c: char| c == ',' || c == '"').to_owned())
            };
            if let Some(ms) = field("waited_ms=").and_then(|v| v.parse::<f64>().ok()) {
                waits.push((ms, field("timed_out=").as_deref() == Some("true")));
            }
        }
    }
    waits
}

impl Checks {
    /// Figures rows for the time results waited for the transcript (reported, never asserted:
    /// a late transcript shows up as figures that are not exact).
    pub fn transcript_waits(&mut self, phase: &str, scratch: &std::path::Path) {
        let waits = transcript_waits(scratch);
        if waits.is_empty() {
            return;
        }
        let n = waits.len() as f64;
        let mean = waits.iter().map(|(ms, _)| ms).sum::<f64>() / n;
        let max = waits.iter().map(|(ms, _)| *ms).fold(0.0, f64::max);
        let timed_out = waits.iter().filter(|(_, t)| *t).count();
        self.row(phase, "held ms (mean)", Some((mean * 100.0).round() / 100.0), f64::NAN, None);
        self.row(phase, "held ms (max)", Some((max * 100.0).round() / 100.0), f64::NAN, None);
        self.row(phase, "held, timed out", Some(timed_out as f64), 0.0, None);
    }
}

/// Runs `acp-usage ARGS --ledger LEDGER` (a report, `status`) and returns its stdout; fails the
/// test when it fails.
pub fn on_ledger(ledger: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(
        acp_usage_tests::relay::relay_binary().expect("the acp-usage binary"),
    )
    .args(args)
    .arg("--ledger")
    .arg(ledger)
    .output()
    .expect("acp-usage runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}
