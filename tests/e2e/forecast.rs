//! Ahead of the wall, with claude-agent-acp against the Anthropic mock and one ledger shared by
//! three runs of acp-usage (no flag; the tap is on by default):
//! - a fast window: the 5-hour window began two hours ago and the mock states it 10%, 40%,
//!   then 70% full over three turns; at that pace it fills in under an hour, three before it
//!   resets: exactly one `notice` says it runs out, the last update's window carries
//!   `runsOutAt` before its `resetsAt`, and `/usage limits` says it on the window's line;
//! - remembered: a second run on the same ledger, with the same key, shows the windows (and
//!   Zed's meter) in the first `usage_update` after `session/new`, before the mock serves any
//!   model call of that run; the responses named their organisation
//!   (`anthropic-organization-id`), which the ledger paired with the key, so the windows are the
//!   organisation's;
//!   And `/usage` in it, on the first run's session loaded, counts that history's calls by role;
//! - per account: a third run with another API key shows none of the first key's windows.
//!
//! The steady case (a window filling slowly, or seen for seconds only) is `e2e::limits`: its
//! three turns fill 50-95% of a window that began ten minutes before, and get no forecast.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::{AcpClient, Line};
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::zed_meter;
use serde_json::{Value, json};
use std::time::Duration;

use crate::flows;
use crate::limits::{lab, reset_in, script_with};

/// The organisation the mock's responses name (Anthropic's `anthropic-organization-id`).
const ORG: &str = "8d3f0c2e-0000-4000-8000-mockorg00001";

/// The 5-hour window's fill after each turn.
const FILLS: [f64; 3] = [0.10, 0.40, 0.70];

/// A client that shows notices, initialized.
fn client(lab: &Lab) -> AcpClient {
    let client = lab.relayed().expect("relay");
    crate::ledger::initialize(&client, true);
    client
}

/// The first `usage_update` after `session/new`, waited for; and whether the mock had served a
/// main call by then.
fn first_update(client: &AcpClient, lab: &Lab) -> (Value, usize) {
    let served = lab.mock.mark();
    let mark = client.mark();
    client.new_session(&lab.scratch.work()).expect("new");
    let is_usage =
        |l: &Line| l.session_update().is_some_and(|u| u["sessionUpdate"] == "usage_update");
    let line = client
        .wait_for_line(mark, Duration::from_secs(20), is_usage)
        .unwrap_or_else(|e| panic!("no usage_update after session/new: {e}"));
    let main_calls = lab.mock.main_since(served).len();
    (line.session_update().cloned().unwrap_or_default(), main_calls)
}

fn five_hour(update: &Value) -> Option<&Value> {
    update["_meta"]["acpUsage"]["limits"]
        .as_array()?
        .iter()
        .find(|l| l["provider"] == "anthropic" && l["window"] == "five_hour")
}

#[test]
fn claude_window_forecast_remembered_per_account() {
    let reset = reset_in(3 * 3600);
    let week_reset = reset_in(4 * 86_400);
    let script = script_with(Agent::Claude, |k| {
        vec![
            ("anthropic-ratelimit-unified-status", "allowed".to_owned()),
            ("anthropic-ratelimit-unified-5h-utilization", FILLS[k].to_string()),
            ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
            ("anthropic-ratelimit-unified-7d-utilization", "0.2".to_owned()),
            ("anthropic-ratelimit-unified-7d-reset", week_reset.to_string()),
            ("anthropic-organization-id", ORG.to_owned()),
        ]
    });
    let mut lab = lab(Agent::Claude, script);

    // 1. Three turns: one run-out notice, at the third.
    let run = client(&lab);
    let id = flows::session_id(&run.new_session(&lab.scratch.work()).expect("new")).unwrap();
    let mut warned = Vec::new();
    let mut last = Value::Null;
    for (k, fill) in FILLS.iter().enumerate() {
        let turn = run_turn(&run, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn");
        last = turn.usage_updates().last().map(|u| (*u).clone()).expect("a usage_update");
        let shown = five_hour(&last).unwrap_or_else(|| panic!("turn {k}: no window: {last:#}"));
        assert_eq!(shown["usedPercent"].as_f64(), Some(fill * 100.0), "turn {k}");
        assert_eq!(shown.get("runsOutAt").is_some(), k == 2, "turn {k}: {shown}");
        warned.extend(
            turn.updates
                .iter()
                .filter(|u| {
                    u["sessionUpdate"] == "notice" && u["_meta"]["acpUsage"]["runsOut"] == true
                })
                .map(|u| (k, u.clone())),
        );
    }
    assert_eq!(warned.len(), 1, "one run-out notice: {warned:#?}");
    let (k, notice) = &warned[0];
    assert_eq!(*k, 2, "at the turn whose pace runs out: {notice}");
    let title = notice["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("Claude's 5-hour limit runs out at "), "{title}");
    let shown = five_hour(&last).unwrap();
    let out = shown["runsOutAt"].as_str().and_then(acp_usage_core::limits::parse_rfc3339);
    let out = out.expect("runsOutAt is RFC 3339");
    // 70% in two hours: the rest in about 51 minutes (the turns took a few seconds more).
    let now = reset_in(0);
    assert!(out < reset && (out - now - 51 * 60).abs() < 120, "{shown}: now {now}");

    let first_run_main_calls = lab.mock.main_since(0).len();
    let served = lab.mock.mark();
    let mark = run.mark();
    run.prompt(&id, "/usage limits").expect("/usage limits");
    assert!(lab.mock.calls_since(served).is_empty(), "/usage reached the mock");
    let text: String = run
        .notifications_since(mark)
        .iter()
        .filter_map(|p| p["update"]["content"]["text"].as_str().map(str::to_owned))
        .collect();
    let line = text.lines().find(|l| l.contains("Claude 5-hour")).unwrap_or_default();
    assert!(line.contains("70% used, at this pace runs out at "), "{text}");
    drop(run);

    // 2. A second run, the same key: the windows before any model call.
    let second = client(&lab);
    let (update, main_calls) = first_update(&second, &lab);
    assert_eq!(main_calls, 0, "the mock served a main call before the first update");
    let shown = five_hour(&update).unwrap_or_else(|| panic!("not remembered: {update:#}"));
    assert_eq!(shown["usedPercent"].as_f64(), Some(70.0), "{shown}");
    assert!(shown["observedAt"].is_string() && shown.get("runsOutAt").is_some(), "{shown}");
    // The organisation the responses named, found at start from the key they named it for.
    assert_eq!(shown["account"], "org 8d3f0c", "{shown}");
    let meter = zed_meter::parse(&update["_meta"][zed_meter::KEY])
        .unwrap_or_else(|| panic!("Zed reads no meter: {update:#}"));
    let five = meter.five_hour.expect("Zed's 5-hour window");
    assert_eq!((five.utilization, five.resets_at), (Some(0.7), Some(reset)));
    // The first run's session reopened here: `/usage` counts its history's calls by role.
    let load = json!({"sessionId": id, "cwd": lab.scratch.work(), "mcpServers": []});
    second.request("session/load", load).expect("session/load");
    let mark = second.mark();
    second.prompt(&id, "/usage").expect("/usage");
    let text: String = second
        .notifications_since(mark)
        .iter()
        .filter_map(|p| p["update"]["content"]["text"].as_str().map(str::to_owned))
        .collect();
    let calls = text.lines().find(|l| l.starts_with("Calls ")).unwrap_or_default();
    let main = first_run_main_calls;
    assert!(calls.contains(&format!(" {main} main")), "{main} main calls served; {text}");
    drop(second);

    // 3. Another key: none of the first key's windows, and no meter.
    lab.spec.set_env("ANTHROPIC_API_KEY", "sk-ant-api03-another-account-7a1f");
    let third = client(&lab);
    let (update, _) = first_update(&third, &lab);
    assert!(five_hour(&update).is_none(), "another account's window: {update:#}");
    assert!(update["_meta"].get(zed_meter::KEY).is_none(), "{update:#}");
}
