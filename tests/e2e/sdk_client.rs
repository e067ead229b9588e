//! A real ACP client (the official Rust SDK: `tests/sdk-client`, run as a process through
//! `acp_usage_tests::sdk_client`, built on first use) against a scripted agent, directly and
//! through the relay: the SDK's typed types must accept `usage_update` (with `_meta`) and
//! `PromptResponse.usage` without dropping anything.

use std::time::Duration;

use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use acp_usage_tests::sdk_client::{SdkScript, SdkTranscript, run_session};
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_sdk-scripted-agent");

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("no integer {key} in {v}"))
}

/// Every `session/prompt` response carries `usage` with total = input + output, both as received
/// and as the SDK parsed it.
fn assert_prompt_usage(t: &SdkTranscript) {
    for p in &t.prompts {
        for (which, v) in [("raw", &p.raw), ("typed", &p.typed)] {
            let usage = v
                .get("usage")
                .filter(|u| !u.is_null())
                .unwrap_or_else(|| panic!("{}: no {which} usage in {v}", p.label));
            assert_eq!(
                u64_at(usage, "totalTokens"),
                u64_at(usage, "inputTokens") + u64_at(usage, "outputTokens"),
                "{}: {which} usage {usage}",
                p.label
            );
        }
    }
}

#[test]
fn sdk_client_reads_usage_from_scripted_agent() {
    let scratch = Scratch::new("sdk-direct").expect("scratch dir");
    let dir = scratch.work();
    std::fs::write(dir.join("in.txt"), "hello from disk\n").expect("write in.txt");
    let out = dir.join("sub/out.txt");
    let second = format!(
        "read {}\nwrite {} written by the agent\npermission",
        dir.join("in.txt").display(),
        out.display()
    );
    let script =
        SdkScript::new().prompt("hi").prompt(second).load(true).timeout(Duration::from_secs(30));

    let t = run_session(&[AGENT.to_owned()], &[], &dir, &script).expect("session runs");

    assert_eq!(t.lost(), Vec::<String>::new(), "the SDK lost something");
    assert_eq!(t.session_id, "sess-scripted-1");
    assert_eq!(t.initialize.typed["agentCapabilities"]["loadSession"], json!(true));
    assert_eq!(t.prompts.len(), 2);
    assert!(t.load.is_some(), "session/load was done");

    // Right after session/new.
    let first: Vec<_> =
        t.updates_after("session/new").filter(|u| u.kind() == "usage_update").collect();
    assert!(!first.is_empty(), "no usage_update after session/new: {:#?}", t.events);
    assert_eq!(first[0].typed["used"], json!(0));
    assert_eq!(first[0].typed["size"], json!(200_000));

    // One per turn, plus session/new and session/load.
    let usage: Vec<_> = t.usage_updates().collect();
    assert_eq!(usage.len(), 4, "{:#?}", t.events);
    let turn1 = &usage[1].typed;
    assert_eq!(turn1["used"], json!(1100));
    assert_eq!(turn1["size"], json!(200_000));
    assert_eq!(turn1["cost"]["amount"].as_f64(), Some(0.0125));
    assert_eq!(turn1["cost"]["currency"], json!("USD"));
    assert_eq!(turn1["cost"]["_meta"], json!({"sdk-scripted-agent/priced": true}));
    assert_eq!(turn1["_meta"], json!({"sdk-scripted-agent/turn": 1}));

    // PromptResponse.usage (unstable_end_turn_token_usage) and _meta, as the SDK parsed them.
    assert_prompt_usage(&t);
    for (i, p) in t.prompts.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(p.typed["stopReason"], json!("end_turn"));
        assert_eq!(
            p.typed["usage"],
            json!({
                "totalTokens": 1100 * n, "inputTokens": 1000 * n, "outputTokens": 100 * n,
                "thoughtTokens": 10 * n, "cachedReadTokens": 500 * n,
                "_meta": {"sdk-scripted-agent/source": "scripted"},
            })
        );
        assert_eq!(p.typed["_meta"], json!({"sdk-scripted-agent/turn": n}));
    }

    // The client's handlers: fs read/write on the real file system, permission allowed.
    assert_eq!(
        std::fs::read_to_string(&out).expect("agent wrote the file"),
        "written by the agent"
    );
    let chunks: String = t
        .updates_after("session/prompt#0")
        .filter(|u| u.kind() == "agent_message_chunk")
        .filter_map(|u| u.raw["content"]["text"].as_str())
        .collect();
    assert!(chunks.contains("read: hello from disk"), "{chunks}");
    assert!(chunks.contains(r#""optionId":"yes""#), "{chunks}");

    // session/load replays the turns before its response.
    let replay: Vec<_> = t.updates_after("session/prompt#1").map(|u| u.kind().to_owned()).collect();
    assert_eq!(
        replay,
        [
            "user_message_chunk",
            "agent_message_chunk",
            "user_message_chunk",
            "agent_message_chunk",
            "usage_update"
        ]
    );
}

/// The transcript notices what a typed SDK client silently loses: an unknown `sessionUpdate`
/// (the SDK logs and drops the whole notification), a malformed `cost` or `usage` (parsed as
/// absent), so the other tests' `lost().is_empty()` means something.
#[test]
fn sdk_client_notices_what_the_sdk_drops() {
    let scratch = Scratch::new("sdk-malformed").expect("scratch dir");
    let dir = scratch.work();
    let cmd = [AGENT.to_owned(), "--malformed".to_owned()];
    let t = run_session(
        &cmd,
        &[],
        &dir,
        &SdkScript::new().prompt("hi").timeout(Duration::from_secs(30)),
    )
    .expect("session runs");
    let lost = t.lost().join("\n");
    assert!(lost.contains("future_update") && lost.contains("rejected by the SDK"), "{lost}");
    assert!(lost.contains("$.cost: dropped"), "{lost}");
    assert!(lost.contains("session/prompt#0: $.usage: dropped"), "{lost}");
    assert!(t.prompts[0].typed.get("usage").is_none_or(Value::is_null));
}

/// The relay between the SDK client and an agent that reports no usage at all: the client must get
/// a `usage_update` after `session/new` and a `usage` on every prompt response, all parsed by the
/// SDK without loss.
#[test]
fn sdk_client_through_relay() {
    let relay = relay_binary().expect("the relay binary (set ACP_USAGE_BIN, or let it build)");
    let scratch = Scratch::new("sdk-relay").expect("scratch dir");
    let dir = scratch.work();
    let env = [
        ("HOME".to_owned(), scratch.home().display().to_string()),
        ("XDG_CONFIG_HOME".to_owned(), scratch.home().join(".config").display().to_string()),
    ];
    let cmd =
        [relay.display().to_string(), "--".to_owned(), AGENT.to_owned(), "--no-usage".to_owned()];
    let script = SdkScript::new()
        .prompt("Write a haiku about token counting.")
        // Answered by acp-usage itself: its text, its command lists and its result must parse.
        .prompt("/usage")
        .prompt("Now another one, about context windows.")
        .load(true)
        .timeout(Duration::from_secs(60));

    let t = run_session(&cmd, &env, &dir, &script)
        .unwrap_or_else(|e| panic!("session through the relay: {e:#}"));

    assert_eq!(t.lost(), Vec::<String>::new(), "the SDK lost something; events: {:#?}", t.events);
    assert_eq!(t.prompts.len(), 3);
    let first: Vec<_> =
        t.updates_after("session/new").filter(|u| u.kind() == "usage_update").collect();
    assert!(!first.is_empty(), "no usage_update after session/new: {:#?}", t.events);
    assert!(u64_at(&first[0].typed, "size") > 0, "{}", first[0].typed);
    // The agent lists no commands: acp-usage's own list comes after session/new and load.
    for after in ["session/new", "session/load"] {
        let lists: Vec<_> = t
            .updates_after(after)
            .filter(|u| u.kind() == "available_commands_update")
            .map(|u| u.typed["availableCommands"][0]["name"].clone())
            .collect();
        assert_eq!(lists, [json!("usage")], "after {after}: {:#?}", t.events);
    }
    let usage = &t.prompts[1].typed;
    assert_eq!(usage["stopReason"], json!("end_turn"), "{usage}");
    assert_eq!(usage["usage"]["totalTokens"], json!(0), "{usage}");
    let text: String = t
        .updates_after("session/prompt#0")
        .filter(|u| u.kind() == "agent_message_chunk")
        .filter_map(|u| u.typed["content"]["text"].as_str())
        .collect();
    assert!(text.starts_with("**/usage**") && text.contains("Context"), "{text}");
    // The agent replays the session on session/load; the relay reports the restored usage.
    assert!(t.load.is_some(), "session/load was done");
    assert!(
        t.updates_after("session/load").any(|u| u.kind() == "usage_update"),
        "no usage_update after session/load: {:#?}",
        t.events
    );
    for u in t.usage_updates() {
        assert!(u64_at(&u.typed, "size") > 0, "{}", u.typed);
        assert!(u64_at(&u.typed, "used") <= u64_at(&u.typed, "size"), "{}", u.typed);
    }
    assert_prompt_usage(&t);
}
