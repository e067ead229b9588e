//! Subscription limits with real agents: the mock answers each main call with the provider's
//! rate-limit headers (names and value formats from the agents' shipped code: Anthropic's
//! `anthropic-ratelimit-unified-5h-*` as a fraction and Unix seconds, Codex's
//! `x-codex-primary-*`/`-secondary-*` as a percent, minutes and Unix seconds), the window
//! filling 50%, 80%, then 95% over three turns.
//!
//! Guarantees checked, without any flag (the tap is on by default):
//! - every turn's `usage_update` carries `_meta.acpUsage.limits` with the window's
//!   `usedPercent` (50, 80, 95), its length and its reset time;
//! - one `notice` when it crosses 75% and one at 90%, each saying when it resets;
//! - `acp-usage status --format '{limit}'` prints the window, and `report limits --json`
//!   has every observation.

use std::path::Path;
use std::process::Command;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::{Script, Step};
use acp_usage_tests::relay::relay_binary;
use serde_json::{Value, json};

use crate::flows;
use crate::support;

/// The window's fill after each turn, as the provider's headers state it.
pub(crate) const FILLS: [f64; 3] = [0.50, 0.80, 0.95];

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
/// limits of `window` in each turn's updates, the notices, `status` and `report limits`.
fn three_turns(lab: &Lab, provider: &str, window: &str, minutes: u64, reset: i64) {
    let ledger = lab.scratch.path("ledger.db");
    let client = lab.relayed().expect("relay");
    let caps =
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "session": {"notices": {}}});
    client
        .request("initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}))
        .expect("initialize");
    let id = flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap();
    let mut notices: Vec<Value> = Vec::new();
    for (k, fill) in FILLS.iter().enumerate() {
        let turn = run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn");
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

    // What the ledger kept, as `status` and `report limits` read it.
    let status = run(&ledger, &["status", "--format", "{limit}"]);
    assert_eq!(status.trim(), "5h 95%");
    let report: Value = serde_json::from_str(&run(&ledger, &["report", "limits", "--json"]))
        .expect("report limits --json");
    let row = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["window"] == window))
        .unwrap_or_else(|| panic!("no {window} row: {report:#}"));
    assert_eq!(row["peakUsedPercent"].as_f64(), Some(95.0), "{row}");
    assert!(row["observations"].as_u64().unwrap_or(0) >= 3, "{row}");
}

/// Runs `acp-usage ARGS --ledger LEDGER`; its stdout.
fn run(ledger: &Path, args: &[&str]) -> String {
    let out = Command::new(relay_binary().expect("binary"))
        .args(args)
        .arg("--ledger")
        .arg(ledger)
        .output()
        .expect("acp-usage runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn claude_five_hour_window_from_anthropic_headers() {
    let agent = Agent::Claude;
    let _lock = support::agent_lock(agent);
    let reset = reset_in(5 * 3600 - 600);
    let script = script_with(agent, |k| {
        vec![
            ("anthropic-ratelimit-unified-status", "allowed".to_owned()),
            ("anthropic-ratelimit-unified-5h-utilization", FILLS[k].to_string()),
            ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
            ("anthropic-ratelimit-unified-5h-status", "allowed".to_owned()),
            ("anthropic-ratelimit-unified-7d-utilization", "0.2".to_owned()),
            ("anthropic-ratelimit-unified-7d-reset", reset_in(5 * 86_400).to_string()),
            ("anthropic-ratelimit-unified-representative-claim", "five_hour".to_owned()),
        ]
    });
    let lab = lab(agent, script);
    three_turns(&lab, "anthropic", "five_hour", 300, reset);
}

#[test]
fn codex_primary_window_from_codex_headers() {
    let agent = Agent::CodexTs;
    let _lock = support::agent_lock(agent);
    let reset = reset_in(5 * 3600 - 600);
    let script = script_with(agent, |k| codex_headers(k, reset));
    let lab = lab(agent, script);
    three_turns(&lab, "openai", "primary", 300, reset);
}

/// Codex's rate-limit headers for step `k`: the primary (5-hour) window at `FILLS[k]`, resetting
/// at `reset`, the secondary (weekly) at 12%.
pub(crate) fn codex_headers(k: usize, reset: i64) -> Vec<(&'static str, String)> {
    vec![
        ("x-codex-primary-used-percent", (FILLS[k] * 100.0).to_string()),
        ("x-codex-primary-window-minutes", "300".to_owned()),
        ("x-codex-primary-reset-at", reset.to_string()),
        ("x-codex-secondary-used-percent", "12".to_owned()),
        ("x-codex-secondary-window-minutes", "10080".to_owned()),
        ("x-codex-secondary-reset-at", reset_in(6 * 86_400).to_string()),
    ]
}
