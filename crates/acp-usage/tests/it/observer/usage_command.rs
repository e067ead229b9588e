//! acp-usage's own `/usage` command in the observer: listed after a session opens and merged
//! into the agent's lists, answered without the agent (text, then an all-zero `end_turn`
//! result with the request's id as it came), forwarded while a turn runs, renamed or off.

use crate::support::*;
use acp_usage::relay::observer::{Observer, Settings};
use acp_usage_core::Catalog;
use serde_json::{Value, json};

fn with_command(name: Option<&str>) -> Settings {
    Settings {
        usage_command: name.map(str::to_owned),
        catalog: Catalog::embedded().clone(),
        ..settings(&["claude-agent-acp"])
    }
}

/// An observer with session `s1` open; what came after the `session/new` response.
fn opened(settings: Settings) -> (Observer, Vec<Value>) {
    let mut o = Observer::new(settings);
    assert!(
        o.from_editor(req("0", "initialize", json!({"protocolVersion": 1})).as_bytes()).forward
    );
    o.from_agent(resp("0", json!({"protocolVersion": 1})).as_bytes());
    assert!(o.from_editor(req("1", "session/new", new_params()).as_bytes()).forward);
    let out = o.from_agent(resp("1", json!({"sessionId": "s1"})).as_bytes());
    (o, out.after.iter().map(|l| parse(l)).collect())
}

fn commands_update(list: Value) -> String {
    update("s1", json!({"sessionUpdate": "available_commands_update", "availableCommands": list}))
}

fn names(v: &Value) -> Vec<String> {
    v.pointer("/params/update/availableCommands")
        .and_then(Value::as_array)
        .expect("a command list")
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

/// One turn of the claude profile: prompt, the agent's per-turn usage, its result.
fn turn(o: &mut Observer, id: &str) {
    assert!(
        o.from_editor(req(id, "session/prompt", prompt_params("s1", "Hi.")).as_bytes()).forward
    );
    o.from_agent(chunk("s1", "Hello there.").as_bytes());
    let usage = json!({"inputTokens": 100, "outputTokens": 20, "cachedReadTokens": 900,
                       "cachedWriteTokens": 0, "totalTokens": 1020});
    o.from_agent(resp(id, json!({"stopReason": "end_turn", "usage": usage})).as_bytes());
}

#[test]
fn a_list_of_its_own_after_the_session_opens_then_merged_into_the_agents() {
    let (mut o, after) = opened(with_command(Some("usage")));
    assert_eq!(after.len(), 2, "{after:#?}");
    assert_eq!(after[0].pointer("/params/update/sessionUpdate"), Some(&json!("usage_update")));
    assert_eq!(names(&after[1]), ["usage"]);
    assert_eq!(after[1].pointer("/params/sessionId"), Some(&json!("s1")));

    let agents = commands_update(json!([{"name": "usage", "description": "the agent's"},
                                        {"name": "compact", "description": "Compact"}]));
    let out = o.from_agent(agents.as_bytes());
    let merged = parse(out.replace.as_deref().expect("merged"));
    assert_eq!(names(&merged), ["compact", "usage"]);
    assert!(out.before.is_empty() && out.after.is_empty());

    // Reloaded after the agent listed its commands: its list will come again, none of ours.
    assert!(
        o.from_editor(
            req("2", "session/load", json!({"sessionId": "s1", "cwd": "/w", "mcpServers": []}))
                .as_bytes()
        )
        .forward
    );
    let out = o.from_agent(resp("2", json!({})).as_bytes());
    assert_eq!(out.after.len(), 1, "only the usage_update: {:?}", lossy(&out.after));
}

#[test]
fn a_list_of_its_own_after_a_fork_and_a_resume() {
    let (mut o, _) = opened(with_command(Some("usage")));
    let fork = json!({"sessionId": "s1", "cwd": "/w", "mcpServers": []});
    assert!(o.from_editor(req("2", "session/fork", fork).as_bytes()).forward);
    let out = o.from_agent(resp("2", json!({"sessionId": "s2"})).as_bytes());
    let lists: Vec<Value> = out.after.iter().map(|l| parse(l)).skip(1).collect();
    assert_eq!(lists.len(), 1, "{:?}", lossy(&out.after));
    assert_eq!(lists[0].pointer("/params/sessionId"), Some(&json!("s2")));
    assert_eq!(names(&lists[0]), ["usage"]);
    let resume = json!({"sessionId": "s3", "cwd": "/w", "mcpServers": []});
    assert!(o.from_editor(req("3", "session/resume", resume).as_bytes()).forward);
    let out = o.from_agent(resp("3", json!({})).as_bytes());
    assert_eq!(out.after.len(), 2, "{:?}", lossy(&out.after));
    assert_eq!(names(&parse(&out.after[1])), ["usage"]);
    // A failed resume opens nothing.
    let resume = json!({"sessionId": "s4", "cwd": "/w", "mcpServers": []});
    assert!(o.from_editor(req("4", "session/resume", resume).as_bytes()).forward);
    let out = o.from_agent(err_resp("4", -32002, "no such session").as_bytes());
    assert!(out.after.is_empty(), "{:?}", lossy(&out.after));
}

#[test]
fn renamed_and_off() {
    let (mut o, after) = opened(with_command(Some("cost")));
    assert_eq!(names(&after[1]), ["cost"]);
    let agents = commands_update(json!([{"name": "usage", "description": "the agent's"}]));
    let merged = parse(o.from_agent(agents.as_bytes()).replace.as_deref().unwrap());
    assert_eq!(names(&merged), ["usage", "cost"]);
    let answered =
        o.from_editor(req("5", "session/prompt", prompt_params("s1", "/cost")).as_bytes());
    assert!(!answered.forward);
    assert!(
        o.from_editor(req("6", "session/prompt", prompt_params("s1", "/usage")).as_bytes()).forward
    );

    let (mut o, after) = opened(with_command(None));
    assert_eq!(after.len(), 1, "only the usage_update");
    let out = o.from_agent(agents.as_bytes());
    assert_eq!(out.replace, None);
    let out = o.from_editor(req("5", "session/prompt", prompt_params("s1", "/usage")).as_bytes());
    assert!(out.forward && out.to_editor.is_empty());
}

#[test]
fn usage_is_answered_with_the_figures_of_the_last_update() {
    let (mut o, _) = opened(with_command(Some("usage")));
    turn(&mut o, "2");
    turn(&mut o, "3");
    let raw_id = r#""the \u0070rompt""#;
    let out =
        o.from_editor(req(raw_id, "session/prompt", prompt_params("s1", "/usage")).as_bytes());
    assert!(!out.forward, "not for the agent");
    assert_eq!(out.to_editor.len(), 3, "{:?}", lossy(&out.to_editor));
    let update = parse(&out.to_editor[0]);
    assert_eq!(update.pointer("/params/update/sessionUpdate"), Some(&json!("usage_update")));
    assert_eq!(update.pointer("/params/update/_meta/acpUsage/trigger"), Some(&json!("command")));
    let chunk = parse(&out.to_editor[1]);
    assert_eq!(chunk.pointer("/params/update/sessionUpdate"), Some(&json!("agent_message_chunk")));
    let text = chunk.pointer("/params/update/content/text").and_then(Value::as_str).unwrap();
    let used = update.pointer("/params/update/used").and_then(Value::as_u64).unwrap();
    let size = update.pointer("/params/update/size").and_then(Value::as_u64).unwrap();
    assert!(used > 0);
    let context = format!(
        "Context     {} of {} tokens",
        acp_usage::numbers::thousands(used),
        acp_usage::numbers::thousands(size)
    );
    assert!(text.contains(&context), "{context:?} in\n{text}");
    assert!(text.contains("\nCalls       2 main\n"), "{text}");
    assert!(
        text.contains("\nInput       2,000 tokens (cache read 1,800, cache write 0)\n"),
        "{text}"
    );
    assert!(text.contains("\nToday       not available (no ledger in this run)\n"), "{text}");
    // The result: the id exactly as it came, `end_turn`, all-zero usage.
    let result = String::from_utf8(out.to_editor[2].clone()).unwrap();
    assert!(result.contains(r#""id":"the \u0070rompt""#), "{result}");
    let result = parse(result.as_bytes());
    assert_eq!(result.pointer("/result/stopReason"), Some(&json!("end_turn")));
    let usage = result.pointer("/result/usage").and_then(Value::as_object).unwrap();
    assert!(usage.values().all(|v| v == &json!(0)) && usage.len() == 6, "{usage:?}");
    assert!(o.pending_ids().is_empty(), "nothing waits for the agent");
    // The next turn counts as usual.
    turn(&mut o, "4");
    assert!(o.pending_ids().is_empty());
}

#[test]
fn a_ledger_that_cannot_be_read_leaves_the_sessions_figures() {
    let dir = scratch_dir().join("no-such-dir");
    let settings = Settings { ledger: Some(dir.join("ledger.db")), ..with_command(Some("usage")) };
    let (mut o, _) = opened(settings);
    turn(&mut o, "2");
    let out = o.from_editor(req("3", "session/prompt", prompt_params("s1", "/usage")).as_bytes());
    assert!(!out.forward);
    let chunk = parse(&out.to_editor[1]);
    let text = chunk.pointer("/params/update/content/text").and_then(Value::as_str).unwrap();
    assert!(text.contains("\nToday       not available (the ledger cannot be read)\n"), "{text}");
    assert!(text.contains("\nThis month  not available (the ledger cannot be read)\n"), "{text}");
    assert!(text.contains("\nCalls       1 main\n"), "{text}");
    assert!(text.contains("\nContext     1,"), "{text}");
}

#[test]
fn arguments_and_help() {
    let (mut o, _) = opened(with_command(Some("usage")));
    let text = |o: &mut Observer, prompt: &str| {
        let out = o.from_editor(req("9", "session/prompt", prompt_params("s1", prompt)).as_bytes());
        assert!(!out.forward, "{prompt}");
        parse(&out.to_editor[1])["params"]["update"]["content"]["text"].as_str().unwrap().to_owned()
    };
    assert!(text(&mut o, "/usage today").starts_with("**/usage**: today"));
    assert!(text(&mut o, "/usage month").starts_with("**/usage**: this month"));
    assert!(text(&mut o, "/usage limits").contains("No subscription window seen yet"));
    assert!(text(&mut o, "/usage foo").starts_with("`/usage` shows this session's context"));
    let other =
        o.from_editor(req("10", "session/prompt", prompt_params("s1", "/usagex")).as_bytes());
    assert!(other.forward && other.to_editor.is_empty(), "another command");
}

#[test]
fn while_a_turn_runs_it_goes_to_the_agent() {
    let (mut o, _) = opened(with_command(Some("usage")));
    assert!(
        o.from_editor(req("2", "session/prompt", prompt_params("s1", "Hi.")).as_bytes()).forward
    );
    let out = o.from_editor(req("3", "session/prompt", prompt_params("s1", "/usage")).as_bytes());
    assert!(out.forward && out.to_editor.is_empty());
    assert_eq!(o.pending_ids(), ["2", "3"]);
    // An unknown session is the agent's to answer too.
    let out = o.from_editor(req("4", "session/prompt", prompt_params("nope", "/usage")).as_bytes());
    assert!(out.forward);
}
