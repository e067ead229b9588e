//! The relay in front of a scripted fake agent (`fake-acp-agent`): what real agents cannot show
//! deterministically.
//!
//! Guarantees checked:
//! - every line acp-usage does not own reaches the other side byte for byte, in order, both ways
//!   (odd spacing, `\u` escapes, `1.50`, a non-JSON line, unknown methods and update kinds);
//! - nothing else appears on the client side but acp-usage's own `usage_update`s;
//! - a `usage_update` follows the `session/new`, `session/load` and `session/resume` responses and
//!   precedes the `session/prompt` result, which carries a per-turn `usage` that keeps the agent's
//!   original under `_meta.acpUsage.agent`, and keeps the result's own `_meta`;
//! - the agent's own `usage_update` is rewritten in place, keeping its `_meta` keys;
//! - `--agent-usage keep` leaves the agent's figures as they are;
//! - the relay exits when the editor closes its stdin.

use std::path::PathBuf;
use std::time::Duration;

use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec, Dir, Line};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::{Value, json};

use crate::support;

const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-acp-agent");
const SESSION: &str = "fake-session-1";
/// What the fake agent puts in its `session/prompt` result (a copy of its constant).
const AGENT_USAGE: &str = r#"{"totalTokens":1300,"inputTokens":1200,"outputTokens":100}"#;
/// Requests whose responses (and every `usage_update`) acp-usage may rewrite.
const OWNED: &[&str] = &[
    "initialize",
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
    "session/prompt",
];

#[derive(Debug)]
struct FakeRun {
    client: AcpClient,
    agent_log: PathBuf,
    // Last, so the directory outlives the processes writing into it.
    scratch: Scratch,
}

impl FakeRun {
    fn start(relay_args: &[&str]) -> FakeRun {
        let scratch = Scratch::new("fake").expect("scratch");
        let agent_log = scratch.path("agent-out.jsonl");
        let agent = CommandSpec {
            program: PathBuf::from(FAKE_AGENT),
            args: Vec::new(),
            env: vec![
                ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
                ("HOME".to_owned(), scratch.home().display().to_string()),
                ("FAKE_AGENT_LOG".to_owned(), agent_log.display().to_string()),
                (
                    "ACP_USAGE_LOG".to_owned(),
                    std::env::var("ACP_USAGE_LOG").unwrap_or_else(|_| "debug".to_owned()),
                ),
            ],
            cwd: scratch.work(),
            stderr_file: scratch.path("fake.stderr"),
        };
        let mut relayed = agent.wrapped(&relay_binary().expect("relay binary"), relay_args);
        relayed.stderr_file = scratch.path("relay.stderr");
        let mut client =
            AcpClient::spawn(&relayed, ClientOptions::default()).expect("start the relay");
        client.timeout = Duration::from_secs(30);
        FakeRun { client, agent_log, scratch }
    }

    /// The lines the fake agent wrote, exactly.
    fn agent_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.agent_log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Ids of the requests with an owned method that this client sent.
fn owned_ids(lines: &[Line]) -> Vec<Value> {
    lines
        .iter()
        .filter(|line| {
            line.dir == Dir::Out && line.method().is_some_and(|method| OWNED.contains(&method))
        })
        .filter_map(|line| line.json.as_ref().map(|json| json["id"].clone()))
        .collect()
}

fn is_owned(text: &str, owned_ids: &[Value]) -> bool {
    let Ok(message) = serde_json::from_str::<Value>(text) else { return false };
    // acp-usage's `usage_update`s and its command lists (`/usage`, merged or its own).
    let usage_update = message["method"] == "session/update"
        && ["usage_update", "available_commands_update"]
            .iter()
            .any(|kind| message["params"]["update"]["sessionUpdate"] == *kind);
    let owned_response = message.get("method").is_none()
        && message.get("id").is_some_and(|id| owned_ids.contains(id));
    usage_update || owned_response
}

#[test]
fn relay_fake_forwards_unowned_lines_byte_for_byte() {
    let mut run = FakeRun::start(&[]);
    let client = &run.client;
    client.initialize().expect("initialize");
    client.new_session(&run.scratch.work()).expect("session/new");
    // Client lines no serializer would write.
    let ext =
        r#"{"jsonrpc":"2.0", "id":"x-1", "method":"_fake/ext", "params":{"a":1.50,"b":"\u00e9"}}"#;
    let start = client.mark();
    client.send_raw(ext.as_bytes()).expect("send");
    client
        .wait_for_response(&json!("x-1"), start, Duration::from_secs(30))
        .expect("_fake/ext answered");
    client
        .send_raw(br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"x-0"}}"#)
        .expect("send");
    client.send_raw(b"not json from the client").expect("send");
    let unknown =
        client.request_response("_unknown/thing", json!({})).expect("unknown method answered");
    assert_eq!(unknown["error"]["code"], -32601, "the agent's error must come through: {unknown}");
    client.prompt(SESSION, "Hello").expect("session/prompt");
    // Closing stdin lets the fake agent finish and flush its log.
    run.client.close_stdin_and_wait(Duration::from_secs(10));

    let lines = run.client.all_lines();
    let received: Vec<&Line> = lines.iter().filter(|line| line.dir == Dir::In).collect();
    let owned = owned_ids(&lines);
    let agent_lines = run.agent_lines();
    assert!(agent_lines.len() > 10, "the fake agent wrote too little: {agent_lines:#?}");
    let mut failures = Vec::new();

    // Agent → client: every unowned agent line, verbatim and in order.
    let mut cursor = 0;
    for agent_line in agent_lines.iter().filter(|line| !is_owned(line, &owned)) {
        match received[cursor..].iter().position(|line| line.bytes == agent_line.as_bytes()) {
            Some(offset) => cursor += offset + 1,
            None => failures
                .push(format!("agent line not forwarded verbatim (or out of order): {agent_line}")),
        }
    }
    // Nothing else: each client-side line is an agent line, a rewritten owned line, a usage_update
    // or a command list.
    for line in &received {
        let text = line.text();
        let verbatim = agent_lines.iter().any(|agent_line| agent_line.as_bytes() == line.bytes);
        if !verbatim && !is_owned(&text, &owned) {
            failures.push(format!("line the agent never wrote reached the client: {text}"));
        }
    }
    // Client → agent: the fake agent echoes the raw text of every line it got.
    let echoed: Vec<String> = received
        .iter()
        .filter(|line| line.method() == Some("_fake/received"))
        .filter_map(|line| {
            line.json.as_ref().and_then(|json| json["params"]["raw"].as_str().map(str::to_owned))
        })
        .collect();
    for sent in
        lines.iter().filter(|line| line.dir == Dir::Out && line.method() != Some("initialize"))
    {
        let text = sent.text();
        if !echoed.iter().any(|raw| *raw == text) {
            failures.push(format!("client line not forwarded verbatim to the agent: {text}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} forwarding failure(s):\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}

#[test]
fn relay_fake_adds_usage_where_acp_wants_it() {
    let run = FakeRun::start(&[]);
    let client = &run.client;
    let mut failures: Vec<String> = Vec::new();
    client.initialize().expect("initialize");
    client.new_session(&run.scratch.work()).expect("session/new");
    let id = support::last_request_id(client, "session/new");
    match support::update_after_response(client, &id, SESSION) {
        Ok(update) => check_update_shape("after session/new", &update, &mut failures),
        Err(err) => failures.push(format!("no usage_update after session/new: {err:#}")),
    }

    let mark = client.mark();
    let result = client.prompt(SESSION, "Hello").expect("session/prompt");
    let usage = &result["usage"];
    let agent_usage: Value = serde_json::from_str(AGENT_USAGE).expect("agent usage");
    let (total, input, output) = (
        usage["totalTokens"].as_u64(),
        usage["inputTokens"].as_u64(),
        usage["outputTokens"].as_u64(),
    );
    match (total, input, output) {
        (Some(total), Some(input), Some(output)) if total == input + output => {}
        _ => failures.push(format!("per-turn usage malformed or total != input + output: {usage}")),
    }
    if usage["_meta"]["acpUsage"]["agent"] != agent_usage {
        failures.push(format!(
            "the agent's own usage is not kept under usage._meta.acpUsage.agent: {usage}"
        ));
    }
    if usage["_meta"]["acpUsage"]["exact"].as_bool().is_none()
        || !usage["_meta"]["acpUsage"]["source"].is_string()
    {
        failures.push(format!("usage._meta.acpUsage lacks source/exact: {usage}"));
    }
    if result["_meta"]["fake/keep"] != 1 {
        failures.push(format!("the result's own _meta was lost: {result}"));
    }
    match support::usage_update_before_result(client) {
        Some(update) => check_update_shape("before the prompt result", &update, &mut failures),
        None => {
            failures.push("the session/prompt result is not preceded by a usage_update".to_owned())
        }
    }
    // The agent's own usage_update, rewritten in place with its _meta kept.
    let updates = client.updates_since(mark, "usage_update");
    match updates.iter().find(|update| update["_meta"]["fake/extra"] == true) {
        Some(update) => {
            if !update["_meta"]["acpUsage"].is_object() {
                failures.push(format!("the agent's usage_update was not rewritten: {update}"));
            }
        }
        None => failures.push(format!(
            "the agent's usage_update (with _meta.fake/extra) is gone: {updates:#?}"
        )),
    }

    for method in ["session/load", "session/resume"] {
        let response = client.request_response(
            method,
            json!({"sessionId": SESSION, "cwd": run.scratch.work(), "mcpServers": []}),
        );
        let id = support::last_request_id(client, method);
        match response.map(|_| support::update_after_response(client, &id, SESSION)) {
            Ok(Ok(update)) => {
                check_update_shape(&format!("after {method}"), &update, &mut failures)
            }
            Ok(Err(err)) => failures.push(format!("no usage_update after {method}: {err:#}")),
            Err(err) => failures.push(format!("{method} failed: {err:#}")),
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n- {}", failures.len(), failures.join("\n- "));
}

fn check_update_shape(phase: &str, update: &Value, failures: &mut Vec<String>) {
    let size = update["size"].as_u64().unwrap_or(0);
    if size == 0 || update["used"].as_u64().is_none() {
        failures.push(format!("{phase}: usage_update needs used and a non-zero size: {update}"));
    }
    if !update["_meta"]["acpUsage"].is_object() {
        failures.push(format!("{phase}: usage_update has no _meta.acpUsage: {update}"));
    }
    if let Some(cost) = update.get("cost")
        && (cost["currency"] != "USD" || !cost["amount"].is_number())
    {
        failures.push(format!("{phase}: malformed cost: {update}"));
    }
}

#[test]
fn relay_fake_agent_usage_keep() {
    let run = FakeRun::start(&["--agent-usage", "keep"]);
    let client = &run.client;
    client.initialize().expect("initialize");
    client.new_session(&run.scratch.work()).expect("session/new");
    let mark = client.mark();
    let result = client.prompt(SESSION, "Hello").expect("session/prompt");
    let agent_usage: Value = serde_json::from_str(AGENT_USAGE).expect("agent usage");
    for field in ["totalTokens", "inputTokens", "outputTokens"] {
        assert_eq!(
            result["usage"][field], agent_usage[field],
            "--agent-usage keep changed {field}: {result}"
        );
    }
    let updates = client.updates_since(mark, "usage_update");
    let own = updates
        .iter()
        .find(|update| update["_meta"]["fake/extra"] == true)
        .expect("the agent's usage_update");
    assert_eq!(
        (own["used"].as_u64(), own["size"].as_u64()),
        (Some(1234), Some(200_000)),
        "--agent-usage keep changed it: {own}"
    );
}

#[test]
fn relay_fake_exits_when_editor_closes() {
    let mut run = FakeRun::start(&[]);
    run.client.initialize().expect("initialize");
    let status = run.client.close_stdin_and_wait(Duration::from_secs(15));
    match status {
        Some(status) => assert!(
            status.success(),
            "the relay exited with {status}; stderr:\n{}",
            run.client.stderr_tail(30)
        ),
        None => panic!("the relay did not exit within 15 s of its stdin closing"),
    }
}
