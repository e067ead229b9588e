//! At the wall, with real agents: the mock answers a turn's call with the provider's refusal
//! (a 429 whose headers say the window is used up), and acp-usage tells it once, at once, in the
//! turn in flight (a `notice` saying when the window resets), and Zed's meter says `rejected`;
//! what the agent does with the refusal is what it does without acp-usage (the same result, the
//! same words, compared with a direct run of the same script). And Codex's plan details: a
//! weekly-only account (one primary window of 10,080 minutes) fills Zed's 7-day window alone,
//! and the credits and plan its headers state are in `_meta.acpUsage.credits` and `/usage`.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use acp_usage_tests::lab::Lab;
use acp_usage_tests::mock_llm::Script;
use acp_usage_tests::zed_meter;
use serde_json::{Value, json};

use crate::flows;
use crate::limits::{lab, reset_in};
use crate::support;

/// What a turn gave the editor: the response (result or error, acp-usage's `usage` left out),
/// the agent's own message text, acp-usage's notices and chat lines, and its last
/// `usage_update`.
struct Seen {
    response: Value,
    text: String,
    ours: Vec<Value>,
    last_update: Option<Value>,
}

fn turn(client: &AcpClient, id: &str) -> Seen {
    let mark = client.mark();
    let params =
        json!({"sessionId": id, "prompt": [{"type": "text", "text": flows::PLAIN_PROMPT}]});
    let mut response = client.request_response("session/prompt", params).expect("an answer");
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result.remove("usage");
    }
    response.as_object_mut().map(|r| r.remove("id"));
    let updates: Vec<Value> =
        client.notifications_since(mark).into_iter().map(|p| p["update"].clone()).collect();
    let ours =
        |u: &Value| u["_meta"]["acpUsage"].is_object() && u["sessionUpdate"] != "usage_update";
    let text = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk" && !ours(u))
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    Seen {
        response,
        text,
        ours: updates.iter().filter(|u| ours(u)).cloned().collect(),
        last_update: updates.iter().rfind(|u| u["sessionUpdate"] == "usage_update").cloned(),
    }
}

/// A client that shows notices, with a session open.
fn open(client: &AcpClient, lab: &Lab) -> String {
    crate::ledger::open(lab, client, true)
}

/// The two turns (an answer, then the refusal) directly and through acp-usage, from the same
/// script; returns what the relayed second turn showed.
fn refused_both_ways(lab: &Lab, script: &Script) -> Seen {
    let direct = lab.direct().expect("direct");
    let id = open(&direct, lab);
    turn(&direct, &id);
    let alone = turn(&direct, &id);
    drop(direct);

    lab.mock.set_script(script.clone());
    let relayed = lab.relayed().expect("relay");
    let id = open(&relayed, lab);
    turn(&relayed, &id);
    let seen = turn(&relayed, &id);
    assert_eq!(seen.response, alone.response, "the refusal's answer differs through acp-usage");
    assert_eq!(seen.text, alone.text, "the agent's words differ through acp-usage");
    eprintln!("the agent's answer to the refusal: {} {:?}", seen.response, seen.text);
    seen
}

/// One notice at the limit, saying when it resets; Zed's meter `rejected`.
fn told_once(seen: &Seen, title: &str) {
    let notices: Vec<&Value> =
        seen.ours.iter().filter(|u| u["sessionUpdate"] == "notice").collect();
    assert_eq!(notices.len(), 1, "{:#?}", seen.ours);
    assert_eq!(notices[0]["title"], title, "{}", notices[0]);
    assert_eq!(notices[0]["severity"], "error", "{}", notices[0]);
    let said = notices[0]["description"].as_str().unwrap_or_default();
    assert!(said.starts_with("It resets ") && said.contains(" UTC (in "), "{said}");
    let update = seen.last_update.as_ref().expect("a usage_update in the refused turn");
    let meter = zed_meter::parse(&update["_meta"][zed_meter::KEY]).expect("Zed reads a meter");
    let rejected = [&meter.five_hour, &meter.seven_day]
        .into_iter()
        .flatten()
        .any(|w| w.status == zed_meter::Status::Rejected);
    assert!(rejected, "the meter is not rejected: {update:#}");
}

#[test]
fn claude_at_the_wall() {
    let reset = reset_in(3 * 3600);
    let window = |fill: &str, status: &str| {
        vec![
            ("anthropic-ratelimit-unified-status", status.to_owned()),
            ("anthropic-ratelimit-unified-5h-utilization", fill.to_owned()),
            ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
            ("anthropic-ratelimit-unified-5h-status", status.to_owned()),
            ("anthropic-ratelimit-unified-representative-claim", "five_hour".to_owned()),
        ]
    };
    let base = support::script(Agent::Claude);
    let text = base.steps.iter().find(|s| s.tool.is_none()).cloned().expect("a text step");
    let mut refused = window("1.0", "rejected");
    refused.push(("x-should-retry", "false".to_owned()));
    let error = json!({"type": "error", "error": {"type": "rate_limit_error",
        "message": "This request would exceed your account's rate limit. Please try again later."}});
    let steps = vec![
        text.clone().with_headers(&window("0.97", "allowed")),
        text.clone().with_headers(&refused).refused(429, error),
        // What a retry of the refused call (if the agent makes one) gets.
        text.with_headers(&refused),
    ];
    let script = Script::new(steps);
    let lab = lab(Agent::Claude, script.clone());
    let seen = refused_both_ways(&lab, &script);
    told_once(&seen, "Claude's 5-hour limit reached");
}

#[test]
fn codex_weekly_only_plan_credits_and_the_wall() {
    let reset = reset_in(5 * 86_400);
    let window = |used: &str| {
        vec![
            ("x-codex-primary-used-percent", used.to_owned()),
            ("x-codex-primary-window-minutes", "10080".to_owned()),
            ("x-codex-primary-reset-at", reset.to_string()),
            ("x-codex-credits-has-credits", "true".to_owned()),
            ("x-codex-credits-unlimited", "false".to_owned()),
            ("x-codex-credits-balance", "12.5".to_owned()),
            ("x-codex-plan-type", "plus".to_owned()),
        ]
    };
    let base = support::script(Agent::CodexTs);
    let text = base.steps.iter().find(|s| s.tool.is_none()).cloned().expect("a text step");
    let mut refused = window("100");
    refused.push(("x-codex-rate-limit-reached-type", "rate_limit_reached".to_owned()));
    let error = json!({"error": {"type": "usage_limit_reached",
        "message": "The usage limit has been reached", "plan_type": "plus", "resets_at": reset}});
    let steps = vec![
        text.clone().with_headers(&window("40")),
        text.clone().with_headers(&refused).refused(429, error),
        text.with_headers(&refused),
    ];
    let script = Script::new(steps);
    let lab = lab(Agent::CodexTs, script.clone());

    // The weekly-only account and its credits, after the first turn.
    let client = lab.relayed().expect("relay");
    let id = open(&client, &lab);
    let first = turn(&client, &id);
    let update = first.last_update.expect("a usage_update");
    let meter = zed_meter::parse(&update["_meta"][zed_meter::KEY]).expect("Zed reads a meter");
    assert!(meter.five_hour.is_none(), "a 5-hour window Codex never stated: {update:#}");
    let week = meter.seven_day.expect("the weekly window in Zed's 7-day place");
    assert_eq!((week.utilization, week.resets_at), (Some(0.4), Some(reset)));
    let credits = &update["_meta"]["acpUsage"]["credits"];
    assert_eq!(credits["balance"], "12.5", "{update:#}");
    assert_eq!(credits["planType"], "plus", "{credits}");
    assert_eq!(credits["hasCredits"], true, "{credits}");
    let mark = client.mark();
    client.prompt(&id, "/usage limits").expect("/usage limits");
    let text: String = client
        .notifications_since(mark)
        .iter()
        .filter_map(|p| p["update"]["content"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(text.contains("Codex weekly   40% used, resets on "), "{text}");
    assert!(text.contains("Codex credits  12.5 credits (plan plus)"), "{text}");
    drop(client);

    // The refusal, directly and through acp-usage.
    lab.mock.set_script(script.clone());
    let seen = refused_both_ways(&lab, &script);
    told_once(&seen, "Codex's weekly limit reached");
}
