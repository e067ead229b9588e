//! Subscription limits with real agents: the mock answers each main call with the provider's
//! rate-limit headers (names and value formats from the agents' shipped code: Anthropic's
//! `anthropic-ratelimit-unified-5h-*`/`7d-*` as a fraction and Unix seconds, Codex's
//! `x-codex-primary-*`/`-secondary-*` as a percent, minutes and Unix seconds; over Codex's
//! WebSocket the same windows as a `codex.rate_limits` event), the 5-hour window filling 50%,
//! 80%, then 95% and the weekly one 10%, 11%, then 12% over three turns.
//!
//! Guarantees checked, without any flag (the tap is on by default):
//! - every turn's `usage_update` carries `_meta.acpUsage.limits` with the window's
//!   `usedPercent` (50, 80, 95), its length and its reset time;
//! - every `usage_update` from the first response on carries `_meta["_claude/rateLimit"]`, which
//!   Zed's parser (`acp_usage_tests::zed_meter`) reads as the 5-hour and 7-day windows the mock
//!   stated last (Codex's 300- and 10,080-minute windows too): a turn's updates show its own
//!   call's windows or, before its call, the previous one's; its last update its own;
//! - one `notice` when it crosses 75% and one at 90%, each saying when it resets;
//! - no forecast: the 5-hour window began ten minutes before (too little of it has run for a
//!   pace) and the weekly one, two days in, fills at 6% a day (it lasts);
//! - `acp-usage status --format '{limit}'` prints the window, and `report limits --json`
//!   has every observation.

use acp_usage_tests::agents::{self, Agent};
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::{CallKind, Script, Step};
use acp_usage_tests::zed_meter;
use serde_json::Value;

use crate::flows;
use crate::support;

/// The window's fill after each turn, as the provider's headers state it.
pub(crate) const FILLS: [f64; 3] = [0.50, 0.80, 0.95];
/// The weekly window's fill after each turn: two days into the week, a pace that lasts it.
const WEEK_FILLS: [f64; 3] = [0.10, 0.11, 0.12];
/// How far the weekly reset moves from one call to the next, in seconds (providers round it;
/// within two minutes it is the same window).
const WEEK_RESET_STEP: i64 = 30;

/// What the mock stated in step `k`, as Zed's meter should show it: the 5-hour window's fraction
/// and reset, the weekly one's.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shown {
    five: (f32, i64),
    week: (f32, i64),
}

/// The windows of the three steps.
pub(crate) struct Windows {
    five_reset: i64,
    week_reset: i64,
}

impl Windows {
    pub(crate) fn new() -> Windows {
        Windows { five_reset: reset_in(5 * 3600 - 600), week_reset: reset_in(5 * 86_400) }
    }

    fn week_reset(&self, k: usize) -> i64 {
        self.week_reset + WEEK_RESET_STEP * k as i64
    }

    fn shown(&self, k: usize) -> Shown {
        Shown {
            five: (FILLS[k] as f32, self.five_reset),
            week: (WEEK_FILLS[k] as f32, self.week_reset(k)),
        }
    }

    /// Codex's headers for step `k` (percent, minutes, Unix seconds).
    pub(crate) fn codex_headers(&self, k: usize) -> Vec<(&'static str, String)> {
        vec![
            ("x-codex-primary-used-percent", (FILLS[k] * 100.0).to_string()),
            ("x-codex-primary-window-minutes", "300".to_owned()),
            ("x-codex-primary-reset-at", self.five_reset.to_string()),
            ("x-codex-secondary-used-percent", (WEEK_FILLS[k] * 100.0).to_string()),
            ("x-codex-secondary-window-minutes", "10080".to_owned()),
            ("x-codex-secondary-reset-at", self.week_reset(k).to_string()),
        ]
    }
}

/// The script's text-only steps (one model call per turn), each answered with `headers(k)`.
pub(crate) fn script_with(
    agent: Agent,
    headers: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Script {
    let base = support::script(agent);
    let steps: Vec<Step> = base
        .steps
        .into_iter()
        .filter(|s| s.tool.is_none())
        .take(FILLS.len())
        .enumerate()
        .map(|(k, s)| s.with_headers(&headers(k)))
        .collect();
    assert_eq!(steps.len(), FILLS.len(), "the {} script has three text steps", agent.name());
    Script::new(steps)
}

/// A reset five hours from now, in Unix seconds (Claude Code drops windows whose reset is past).
pub(crate) fn reset_in(seconds: i64) -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    now.as_secs() as i64 + seconds
}

/// A lab whose relays write the ledger in its scratch directory.
pub(crate) fn lab(agent: Agent, script: Script) -> Lab {
    let mut lab = Lab::new(agent, script).expect("lab");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    lab
}

/// Three turns through acp-usage (no flag) with a client that shows notices; checks the
/// limits of `window` in each turn's updates, Zed's meter, the notices, `status` and `report
/// limits`. Returns how many of the agent's own `_claude/rateLimit` values were replaced.
fn three_turns(lab: &Lab, provider: &str, window: &str, minutes: u64, windows: &Windows) -> usize {
    let reset = windows.five_reset;
    let ledger = lab.scratch.path("ledger.db");
    let client = lab.relayed().expect("relay");
    let id = crate::ledger::open(lab, &client, true);
    let mut notices: Vec<Value> = Vec::new();
    let mut meter = MeterCheck::default();
    for (k, fill) in FILLS.iter().enumerate() {
        let turn = run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn");
        meter.turn(k, &turn.usage_updates(), windows);
        let last = turn.usage_updates().last().cloned().cloned().unwrap_or_else(|| {
            panic!("turn {k}: no usage_update; stderr: {}", client.stderr_tail(30))
        });
        let limits = last["_meta"]["acpUsage"]["limits"].as_array().cloned().unwrap_or_default();
        let ours = limits
            .iter()
            .find(|l| l["provider"] == provider && l["window"] == window)
            .unwrap_or_else(|| panic!("turn {k}: no {provider} {window} in {last:#}"));
        let want = (fill * 100.0).round();
        assert_eq!(ours["usedPercent"].as_f64(), Some(want), "turn {k}: {ours}");
        assert_eq!(ours["windowMinutes"], minutes, "turn {k}: {ours}");
        let resets = ours["resetsAt"].as_str().and_then(acp_usage_core::limits::parse_rfc3339);
        assert_eq!(resets, Some(reset), "turn {k}: {ours}");
        assert_eq!(ours["source"], "tap", "turn {k}: {ours}");
        for l in &limits {
            assert!(l.get("runsOutAt").is_none(), "turn {k}: a forecast on a steady window: {l}");
        }
        // acp-usage's own notices (the agents send some of their own).
        notices.extend(
            turn.updates
                .iter()
                .filter(|u| u["sessionUpdate"] == "notice" && u["_meta"]["acpUsage"].is_object())
                .cloned(),
        );
    }
    let lines: Vec<f64> =
        notices.iter().filter_map(|n| n["_meta"]["acpUsage"]["fraction"].as_f64()).collect();
    assert_eq!(lines, [0.75, 0.9], "one notice at 75% and one at 90%: {notices:#?}");
    for n in &notices {
        let text = n["description"].as_str().unwrap_or_default();
        assert!(text.starts_with("It resets at ") && text.contains("UTC (in 4 h"), "{n}");
        assert_eq!(n["_meta"]["acpUsage"]["limit"]["window"], window, "{n}");
    }
    drop(client);
    eprintln!(
        "{provider}: {} updates read by Zed's parser, {} of them the agent's own rate limit replaced",
        meter.read, meter.replaced
    );

    // What the ledger kept, as `status` and `report limits` read it.
    let status = support::on_ledger(&ledger, &["status", "--format", "{limit}"]);
    assert_eq!(status.trim(), "5h 95%");
    let report: Value =
        serde_json::from_str(&support::on_ledger(&ledger, &["report", "limits", "--json"]))
            .expect("report limits --json");
    let row = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["window"] == window))
        .unwrap_or_else(|| panic!("no {window} row: {report:#}"));
    assert_eq!(row["peakUsedPercent"].as_f64(), Some(95.0), "{row}");
    assert!(row["observations"].as_u64().unwrap_or(0) >= 3, "{row}");
    meter.replaced
}

/// Zed's meter, read off a session's updates turn by turn.
#[derive(Default)]
struct MeterCheck {
    /// Zed's meter as it stands after the updates so far.
    zed: zed_meter::Meter,
    /// Updates that carried a value Zed read.
    read: usize,
    /// Updates that rewrote an agent's own `_claude/rateLimit` (kept in `_meta.acpUsage.agent`).
    replaced: usize,
}

impl MeterCheck {
    /// Checks the `usage_update`s of turn `k`: each one from the first response on reads as
    /// step `k`'s windows or (before the turn's call answered) step `k - 1`'s; the last as `k`'s.
    fn turn(&mut self, k: usize, updates: &[&Value], windows: &Windows) {
        assert!(!updates.is_empty(), "turn {k}: no usage_update");
        for (n, u) in updates.iter().enumerate() {
            let value = &u["_meta"][zed_meter::KEY];
            let Some(read) = zed_meter::parse(value) else {
                // Only the first turn's updates before its response may have none.
                assert!(
                    k == 0 && self.read == 0,
                    "turn {k} update {n}: Zed reads no meter in {u:#}"
                );
                continue;
            };
            assert!(self.zed.apply(&u["_meta"]), "turn {k} update {n}: {value}");
            self.read += 1;
            if u["_meta"]["acpUsage"]["agent"].get(zed_meter::KEY).is_some() {
                self.replaced += 1;
            }
            let shown =
                shown(&read).unwrap_or_else(|| panic!("turn {k}: not both windows: {value}"));
            let ok = shown == windows.shown(k) || (k > 0 && shown == windows.shown(k - 1));
            assert!(ok, "turn {k} update {n}: {shown:?}, want {:?}: {value}", windows.shown(k));
            for w in [&read.five_hour, &read.seven_day].into_iter().flatten() {
                assert_eq!(w.status, zed_meter::Status::Allowed, "turn {k}: {value}");
            }
        }
        assert_eq!(
            shown(&self.zed),
            Some(windows.shown(k)),
            "turn {k}: the meter after its last update"
        );
    }
}

/// Both windows of a meter, when it has both with their resets.
fn shown(m: &zed_meter::Meter) -> Option<Shown> {
    let window = |w: &Option<zed_meter::Window>| {
        let w = w.as_ref()?;
        Some((w.utilization?, w.resets_at?))
    };
    Some(Shown { five: window(&m.five_hour)?, week: window(&m.seven_day)? })
}

/// Claude Code on the Anthropic mock, its 5-hour and weekly windows in the unified headers.
fn claude_lab(windows: &Windows) -> Lab {
    let agent = Agent::Claude;
    let script = script_with(agent, |k| {
        vec![
            ("anthropic-ratelimit-unified-status", "allowed".to_owned()),
            ("anthropic-ratelimit-unified-5h-utilization", FILLS[k].to_string()),
            ("anthropic-ratelimit-unified-5h-reset", windows.five_reset.to_string()),
            ("anthropic-ratelimit-unified-5h-status", "allowed".to_owned()),
            ("anthropic-ratelimit-unified-7d-utilization", WEEK_FILLS[k].to_string()),
            ("anthropic-ratelimit-unified-7d-reset", windows.week_reset(k).to_string()),
            ("anthropic-ratelimit-unified-representative-claim", "five_hour".to_owned()),
        ]
    });
    lab(agent, script)
}

#[test]
fn claude_five_hour_window_from_anthropic_headers() {
    let windows = Windows::new();
    three_turns(&claude_lab(&windows), "anthropic", "five_hour", 300, &windows);
}

/// Signed in (an OAuth token, as a subscriber runs it), Claude Code reads the windows itself
/// and claude-agent-acp forwards them in `usage_update`s of its own, which acp-usage rewrites:
/// the meter Zed reads is still the latest the mock stated.
#[test]
fn claude_subscription_windows_through_the_agents_own_updates() {
    let windows = Windows::new();
    let mut lab = claude_lab(&windows);
    lab.spec.env.retain(|(name, _)| {
        !matches!(name.as_str(), "ANTHROPIC_API_KEY" | "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")
    });
    lab.spec.set_env("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-mock-login-token-5d1c");
    let replaced = three_turns(&lab, "anthropic", "five_hour", 300, &windows);
    assert!(replaced > 0, "claude-agent-acp sent no _claude/rateLimit of its own to replace");
}

/// codex-acp with a custom provider: its calls go over HTTP, the windows in `x-codex-*` headers.
#[test]
fn codex_primary_window_from_codex_headers() {
    let agent = Agent::CodexTs;
    let windows = Windows::new();
    let script = script_with(agent, |k| windows.codex_headers(k));
    let lab = lab(agent, script);
    three_turns(&lab, "openai", "primary", 300, &windows);
}

/// codex-acp with Codex's built-in provider: its calls go over the Responses WebSocket, the
/// windows in the server's `codex.rate_limits` events.
#[test]
fn codex_windows_over_the_websocket() {
    let agent = Agent::CodexTs;
    let windows = Windows::new();
    let script = script_with(agent, |k| windows.codex_headers(k));
    let mut lab = lab(agent, script);
    lab.mock.enable_websocket();
    let url = lab.mock.url();
    agents::use_codex_builtin_openai(&lab.scratch, &mut lab.spec, &url).expect("an API-key login");
    three_turns(&lab, "openai", "primary", 300, &windows);
    let calls = lab.mock.calls();
    assert!(
        calls.iter().filter(|c| c.kind == CallKind::Main).all(|c| c.websocket),
        "model calls over HTTP, not the WebSocket: {calls:#?}"
    );
}
