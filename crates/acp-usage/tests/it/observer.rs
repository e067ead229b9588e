//! The observer, pure: scripts of (direction, line) and what it must answer for each agent line.
//! What these tests guarantee, per agent profile:
//!
//! - claude-style: per-turn `usage` whose `totalTokens` is the sum of all four counts is read
//!   as Anthropic's (input without cache) and sent with `inputTokens` including the cache, the
//!   agent's original kept in `usage._meta.acpUsage.agent`; a `usage_update` with a cost makes its
//!   `size` trusted, one without a cost does not.
//! - codex-style: `used` per model call, `size` 258400 trusted, no cost: the per-turn usage is
//!   the sum of the calls' `used`, marked estimate; a `usage` on the result (codex-acp 2.6 sums
//!   the turn's calls) is read as the turn's.
//! - gemini-style: `_meta.quota.token_count` gives exact input, thoughts are estimated from
//!   `agent_thought_chunk`s, the turn is marked estimate, `used` leaves thoughts out.
//! - qwen-style: each model's `contextLimit` from the model list is the window of that model,
//!   from `session/new` on and after a switch.
//! - generic with nothing reported: everything estimated from the visible content, `size` the
//!   default 200000 with `_meta.acpUsage.size.source == "default"`.
//! - Across profiles: every emitted line is one JSON line, every `usage_update` has a `size` > 0
//!   and the right `sessionId`; lines the observer does not own are never replaced; requests are
//!   tracked by exact id and only the editor's; `session/load` replay is not usage;
//!   `keep_agent_usage` leaves the agent's figures alone and still adds what is missing.

/// Warnings in the chat for clients without notices.
mod chat;
/// acp-usage's own `/usage` command.
mod usage_command;

use crate::support::*;
use acp_usage::agents::Profile;
use acp_usage::relay::observer::{Observer, Outcome, Settings};
use acp_usage_core::estimate::{self, Family};
use serde_json::{Value, json};

/// What a line at a JSON pointer must be.
#[derive(Debug, Clone)]
enum Want {
    Eq(Value),
    Absent,
    Positive,
}

type Checks = Vec<(String, Want)>;

fn eq(pointer: &str, v: impl Into<Value>) -> (String, Want) {
    (pointer.to_string(), Want::Eq(v.into()))
}

fn absent(pointer: &str) -> (String, Want) {
    (pointer.to_string(), Want::Absent)
}

fn positive(pointer: &str) -> (String, Want) {
    (pointer.to_string(), Want::Positive)
}

/// Pointers into a `usage_update`'s `update` object.
fn up(rest: &str) -> String {
    format!("/params/update{rest}")
}

/// Pointers into a prompt result's `usage`.
fn us(rest: &str) -> String {
    format!("/result/usage{rest}")
}

enum Dir {
    Editor,
    Agent,
}

struct Step {
    dir: Dir,
    line: String,
    before: Vec<Checks>,
    replace: Option<Checks>,
    after: Vec<Checks>,
}

/// A line from the editor.
fn ed(line: impl Into<String>) -> Step {
    Step { dir: Dir::Editor, line: line.into(), before: vec![], replace: None, after: vec![] }
}

/// A line from the agent that must pass untouched (unless `before`/`replaced`/`after` say).
fn ag(line: impl Into<String>) -> Step {
    Step { dir: Dir::Agent, line: line.into(), before: vec![], replace: None, after: vec![] }
}

impl Step {
    fn before(mut self, checks: Vec<(String, Want)>) -> Step {
        self.before.push(checks);
        self
    }
    fn replaced(mut self, checks: Vec<(String, Want)>) -> Step {
        self.replace = Some(checks);
        self
    }
    fn after(mut self, checks: Vec<(String, Want)>) -> Step {
        self.after.push(checks);
        self
    }
}

fn check_line(what: &str, bytes: &[u8], checks: &Checks) {
    assert!(!bytes.contains(&b'\n'), "{what}: an emitted line holds a newline");
    let v = parse(bytes);
    if is_usage_update(&v) {
        let session = v.pointer("/params/sessionId").and_then(Value::as_str).expect("sessionId");
        usage_update_of(bytes, session);
    }
    for (pointer, want) in checks {
        let got = v.pointer(pointer);
        match want {
            Want::Eq(w) => assert_eq!(got, Some(w), "{what}: {pointer} in {v}"),
            Want::Absent => assert!(got.is_none(), "{what}: {pointer} should be absent in {v}"),
            Want::Positive => {
                assert!(
                    got.and_then(Value::as_u64).is_some_and(|n| n > 0),
                    "{what}: {pointer} should be > 0 in {v}"
                )
            }
        }
    }
}

fn check_outcome(i: usize, step: &Step, out: &Outcome) {
    let what = |part: &str| format!("step {i} ({part}) for {}", step.line);
    let shown = |lines: &[Vec<u8>]| lossy(lines);
    assert_eq!(
        out.before.len(),
        step.before.len(),
        "{}: {:#?}",
        what("before"),
        shown(&out.before)
    );
    assert_eq!(out.after.len(), step.after.len(), "{}: {:#?}", what("after"), shown(&out.after));
    match (&out.replace, &step.replace) {
        (None, None) => {}
        (Some(got), Some(checks)) => check_line(&what("replace"), got, checks),
        (got, _) => panic!(
            "{}: replace expected {}, got {:?}",
            what("replace"),
            step.replace.is_some(),
            got.as_deref().map(String::from_utf8_lossy)
        ),
    }
    for (line, checks) in out.before.iter().zip(&step.before) {
        check_line(&what("before"), line, checks);
    }
    for (line, checks) in out.after.iter().zip(&step.after) {
        check_line(&what("after"), line, checks);
    }
}

/// Runs a script and returns the observer for further questions.
fn run(settings: Settings, script: Vec<Step>) -> Observer {
    let mut obs = Observer::new(settings);
    for (i, step) in script.iter().enumerate() {
        match step.dir {
            Dir::Editor => assert!(obs.from_editor(step.line.as_bytes()).forward, "step {i}"),
            Dir::Agent => {
                let out = obs.from_agent(step.line.as_bytes());
                check_outcome(i, step, &out);
            }
        }
    }
    obs
}

fn initialize(agent_name: &str) -> [Step; 2] {
    [
        ed(req("0", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}))),
        ag(resp(
            "0",
            json!({"protocolVersion": 1, "agentInfo": {"name": agent_name, "version": "1.0.0"}, "agentCapabilities": {}}),
        )),
    ]
}

fn usage_update_with_meta(
    session: &str,
    used: u64,
    size: u64,
    cost: Option<f64>,
    meta: Value,
) -> String {
    let mut u = json!({"sessionUpdate": "usage_update", "used": used, "size": size});
    if let Some(amount) = cost {
        u["cost"] = json!({"amount": amount, "currency": "USD"});
    }
    u["_meta"] = meta;
    update(session, u)
}

#[test]
fn claude_style() {
    let mut script: Vec<Step> = initialize("@agentclientprotocol/claude-agent-acp").into();
    script.extend([
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "c1", "models": {"currentModelId": "default", "availableModels": []}})))
            .after(vec![
                eq("/params/sessionId", "c1"),
                eq(&up("/used"), 0),
                eq(&up("/size"), 200_000),
                eq(&up("/_meta/acpUsage/size/source"), "default"),
                eq(&up("/_meta/acpUsage/profile"), "claude"),
                eq(&up("/_meta/acpUsage/trigger"), "session/new"),
                absent(&up("/cost")),
            ]),
        // Turn 1: an update without cost carries a window the agent reports (not one it
        // enforces): it beats acp-usage's default guess.
        ed(req("2", "session/prompt", prompt_params("c1", "hi"))),
        ag(chunk("c1", "Hello.")),
        ag(usage_update_with_meta("c1", 5_000, 1_000_000, None, json!({"claudeCode": {"k": 1}}))).replaced(vec![
            eq(&up("/used"), 5_000),
            eq(&up("/size"), 1_000_000),
            eq(&up("/_meta/acpUsage/size/source"), "agent"),
            eq(&up("/_meta/acpUsage/trigger"), "agent"),
            eq(&up("/_meta/acpUsage/agent"), json!({"used": 5_000, "size": 1_000_000})),
            eq(&up("/_meta/claudeCode"), json!({"k": 1})),
            absent(&up("/cost")),
        ]),
        // Anthropic-style per-turn usage: total = the sum of all four counts.
        ag(resp(
            "2",
            json!({"stopReason": "end_turn", "usage": {"totalTokens": 12019, "inputTokens": 12, "outputTokens": 7, "cachedReadTokens": 9000, "cachedWriteTokens": 3000}}),
        ))
        .before(vec![
            eq(&up("/used"), 5_000),
            eq(&up("/size"), 1_000_000),
            eq(&up("/_meta/acpUsage/trigger"), "turn"),
            eq(&up("/_meta/usage/inputTokens"), 12_012),
            eq(&up("/_meta/usage/totalTokens"), 12_019),
        ])
        .replaced(vec![
            eq("/id", 2),
            eq("/result/stopReason", "end_turn"),
            eq(&us("/inputTokens"), 12_012),
            eq(&us("/outputTokens"), 7),
            eq(&us("/totalTokens"), 12_019),
            eq(&us("/cachedReadTokens"), 9_000),
            eq(&us("/cachedWriteTokens"), 3_000),
            eq(&us("/_meta/acpUsage/source"), "agent"),
            eq(&us("/_meta/acpUsage/exact"), true),
            eq(&us("/_meta/acpUsage/agent/inputTokens"), 12),
            eq(&us("/_meta/acpUsage/agent/totalTokens"), 12_019),
            absent(&us("/_meta/acpUsage/cost")),
        ]),
        // Turn 2: the update after the SDK's result states a cost: its size is the real window.
        ed(req("3", "session/prompt", prompt_params("c1", "more"))),
        ag(usage_update_with_meta("c1", 15_000, 1_000_000, Some(0.25), json!({}))).replaced(vec![
            eq(&up("/used"), 15_000),
            eq(&up("/size"), 1_000_000),
            eq(&up("/_meta/acpUsage/size/source"), "agent"),
            eq(&up("/cost"), json!({"amount": 0.25, "currency": "USD"})),
            eq(&up("/_meta/acpUsage/cost/source"), "agent"),
        ]),
        ag(resp(
            "3",
            json!({"stopReason": "end_turn", "usage": {"totalTokens": 3040, "inputTokens": 10, "outputTokens": 30, "cachedReadTokens": 3000, "cachedWriteTokens": 0}}),
        ))
        .before(vec![
            eq(&up("/used"), 15_000),
            eq(&up("/size"), 1_000_000),
            eq(&up("/cost/amount"), 0.25),
            eq(&up("/_meta/usage/totalTokens"), 12_019 + 3_040),
        ])
        .replaced(vec![
            eq(&us("/inputTokens"), 3_010),
            eq(&us("/totalTokens"), 3_040),
            eq(&us("/cachedReadTokens"), 3_000),
            eq(&us("/_meta/acpUsage/cost"), 0.25),
        ]),
    ]);
    let obs = run(settings(&["npx", "some-wrapper"]), script);
    assert_eq!(obs.profile(), Profile::named("claude").unwrap());
    assert_eq!(obs.pending_ids(), Vec::<String>::new());
}

#[test]
fn claude_openai_style_usage_keeps_input() {
    // A per-turn usage whose total is input + output already has the cache inside input.
    let script = vec![
        ed(req("2", "session/prompt", prompt_params("c1", "hi"))),
        ag(resp(
            "2",
            json!({"stopReason": "end_turn", "usage": {"totalTokens": 5040, "inputTokens": 5000, "outputTokens": 40, "cachedReadTokens": 4096, "thoughtTokens": 16}}),
        ))
        .before(vec![eq("/params/sessionId", "c1")])
        .replaced(vec![
            eq(&us("/inputTokens"), 5_000),
            eq(&us("/outputTokens"), 40),
            eq(&us("/totalTokens"), 5_040),
            eq(&us("/cachedReadTokens"), 4_096),
            eq(&us("/thoughtTokens"), 16),
        ]),
    ];
    run(settings_for(Profile::named("claude").unwrap()), script);
}

#[test]
fn codex_style() {
    let mut script: Vec<Step> = initialize("codex-acp").into();
    script.extend([
        ed(req("1", "session/new", new_params())),
        ag(resp(
            "1",
            json!({"sessionId": "x1", "models": {"currentModelId": "gpt-5.2-codex/medium", "availableModels": []}}),
        ))
        .after(vec![
            eq(&up("/_meta/acpUsage/profile"), "codex"),
            eq(&up("/_meta/acpUsage/model"), "gpt-5.2-codex"),
            eq(&up("/used"), 0),
        ]),
        ed(req("2", "session/prompt", prompt_params("x1", "list the files"))),
        ag(chunk("x1", "Let me look.")),
        ag(agent_usage("x1", 3_000, Some(258_400), None)).replaced(vec![
            eq(&up("/used"), 3_000),
            eq(&up("/size"), 258_400),
            eq(&up("/_meta/acpUsage/size/source"), "agent"),
            eq(&up("/_meta/acpUsage/size/exact"), true),
            eq(&up("/_meta/acpUsage/agent"), json!({"used": 3_000, "size": 258_400})),
            absent(&up("/cost")),
        ]),
        ag(update(
            "x1",
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "execute", "status": "pending", "rawInput": {"command": ["ls"]}}),
        )),
        ag(update(
            "x1",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "a.txt\nb.txt"}}]}),
        )),
        ag(chunk("x1", "Two files.")),
        ag(agent_usage("x1", 4_500, Some(258_400), None)).replaced(vec![eq(&up("/used"), 4_500)]),
        ag(end_turn("2"))
            .before(vec![
                eq(&up("/used"), 4_500),
                eq(&up("/size"), 258_400),
                eq(&up("/_meta/acpUsage/trigger"), "turn"),
                eq(&up("/_meta/usage/totalTokens"), 7_500),
                absent(&up("/cost")),
            ])
            .replaced(vec![
                eq(&us("/totalTokens"), 7_500),
                positive(&us("/outputTokens")),
                positive(&us("/inputTokens")),
                eq(&us("/_meta/acpUsage/source"), "estimate"),
                eq(&us("/_meta/acpUsage/exact"), false),
                eq(&us("/_meta/acpUsage/calls"), 2),
                absent(&us("/cachedReadTokens")),
                absent(&us("/thoughtTokens")),
            ]),
        // codex-acp 2.6 (TS) puts the turn's summed usage on the result: it is read.
        ed(req("3", "session/prompt", prompt_params("x1", "again"))),
        ag(agent_usage("x1", 6_000, Some(258_400), None)).replaced(vec![eq(&up("/used"), 6_000)]),
        ag(resp(
            "3",
            json!({"stopReason": "end_turn", "usage": {"totalTokens": 999, "inputTokens": 900, "outputTokens": 99}}),
        ))
        .before(vec![eq(&up("/used"), 6_000)])
        .replaced(vec![
            eq(&us("/totalTokens"), 999),
            eq(&us("/_meta/acpUsage/source"), "agent"),
            eq(&us("/_meta/acpUsage/agent/totalTokens"), 999),
        ]),
    ]);
    let obs = run(settings(&["codex-acp"]), script);
    assert_eq!(obs.profile(), Profile::named("codex").unwrap());
}

#[test]
fn gemini_style() {
    let thinking = "I should greet the user back, kindly. ".repeat(10);
    let thoughts = estimate::count(&thinking, Family::Gemini);
    assert!(thoughts > 0);
    let quota = json!({"quota": {
        "token_count": {"input_tokens": 8000, "output_tokens": 9},
        "model_usage": [{"model": "gemini-2.5-pro", "token_count": {"input_tokens": 8000, "output_tokens": 9}}],
    }});
    let mut script: Vec<Step> = initialize("gemini-cli").into();
    script.extend([
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "g1", "models": {"currentModelId": "gemini-2.5-pro", "availableModels": []}})))
            .after(vec![
                eq(&up("/size"), 1_048_576),
                eq(&up("/_meta/acpUsage/size/source"), "catalog"),
                eq(&up("/_meta/acpUsage/profile"), "gemini"),
                eq(&up("/_meta/acpUsage/model"), "gemini-2.5-pro"),
            ]),
        ed(req("2", "session/prompt", prompt_params("g1", "Hello from mock."))),
        ag(thought("g1", &thinking)),
        ag(chunk("g1", "Hi!")),
        ag(resp("2", json!({"stopReason": "end_turn", "_meta": quota})))
            .before(vec![
                // Input and visible output of the one call; thoughts leave the context.
                eq(&up("/used"), 8_009),
                eq(&up("/_meta/acpUsage/used/source"), "estimate"),
                eq(&up("/size"), 1_048_576),
                eq(&up("/_meta/acpUsage/trigger"), "turn"),
            ])
            .replaced(vec![
                eq(&us("/inputTokens"), 8_000),
                eq(&us("/thoughtTokens"), thoughts),
                eq(&us("/outputTokens"), 9 + thoughts),
                eq(&us("/totalTokens"), 8_009 + thoughts),
                absent(&us("/cachedReadTokens")),
                eq(&us("/_meta/acpUsage/source"), "estimate"),
                eq(&us("/_meta/acpUsage/exact"), false),
                eq(&us("/_meta/acpUsage/model"), "gemini-2.5-pro"),
                eq("/result/_meta/quota/token_count/input_tokens", 8_000),
                eq("/result/stopReason", "end_turn"),
            ]),
    ]);
    let obs = run(settings(&["node", "/x/bin/gemini", "--experimental-acp"]), script);
    assert_eq!(obs.profile(), Profile::named("gemini").unwrap());
}

#[test]
fn generic_with_nothing_reported() {
    let (prompt, reply) = ("Hello from mock.", "The answer is forty-two, as computed.");
    let p = estimate::count(prompt, Family::Other);
    let o = estimate::count(reply, Family::Other);
    let mut script: Vec<Step> = initialize("my-agent").into();
    script.extend([
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "s1"}))).after(vec![
            eq(&up("/used"), 0),
            eq(&up("/size"), 200_000),
            eq(&up("/_meta/acpUsage/size/source"), "default"),
            eq(&up("/_meta/acpUsage/size/exact"), false),
            eq(&up("/_meta/acpUsage/profile"), "generic"),
            eq(&up("/_meta/acpUsage/trigger"), "session/new"),
            absent(&up("/cost")),
            absent(&up("/_meta/acpUsage/model")),
        ]),
        ed(req("2", "session/prompt", prompt_params("s1", prompt))),
        ag(chunk("s1", reply)),
        ag(end_turn("2"))
            .before(vec![
                eq(&up("/used"), p + o),
                eq(&up("/_meta/acpUsage/used/source"), "estimate"),
                eq(&up("/_meta/acpUsage/used/exact"), false),
                eq(&up("/size"), 200_000),
                eq(&up("/_meta/acpUsage/size/source"), "default"),
                eq(&up("/_meta/usage/totalTokens"), p + o),
                absent(&up("/cost")),
            ])
            .replaced(vec![
                eq(&us("/inputTokens"), p),
                eq(&us("/outputTokens"), o),
                eq(&us("/totalTokens"), p + o),
                eq(&us("/_meta/acpUsage/source"), "estimate"),
                eq(&us("/_meta/acpUsage/exact"), false),
                eq(&us("/_meta/acpUsage/calls"), 1),
                absent(&us("/thoughtTokens")),
                absent(&us("/cachedReadTokens")),
                absent(&us("/cachedWriteTokens")),
            ]),
        // A failed turn still gets its update first; the error itself is not touched.
        ed(req("3", "session/prompt", prompt_params("s1", "again"))),
        ag(err_resp("3", -32603, "boom")).before(vec![eq(&up("/_meta/acpUsage/trigger"), "turn")]),
        ed(req(r#""late""#, "session/prompt", prompt_params("s1", "never answered"))),
    ]);
    let obs = run(settings(&["my-agent", "--stdio"]), script);
    assert_eq!(obs.profile(), Profile::named("generic").unwrap());
    assert_eq!(obs.pending_ids(), vec![r#""late""#.to_string()]);
}

#[test]
fn only_the_editors_requests_are_tracked_by_exact_id() {
    let script = vec![
        ed(req("1", "session/new", new_params())),
        ed(req(r#""1""#, "session/new", new_params())),
        // The agent's own request with the same id, and the editor's answer to it.
        ag(req("1", "fs/read_text_file", json!({"sessionId": "x", "path": "/a"}))),
        ed(resp("1", json!({"content": "text"}))),
        ag(resp(r#""1""#, json!({"sessionId": "quoted"})))
            .after(vec![eq("/params/sessionId", "quoted")]),
        ag(resp("1", json!({"sessionId": "plain"}))).after(vec![eq("/params/sessionId", "plain")]),
        // Answered already: a second response is not tracked.
        ag(resp("1", json!({"sessionId": "plain"}))),
        // Lines that are not JSON-RPC objects pass untouched.
        ag("not json"),
        ag("[1,2]"),
        ag(""),
        ag(r#"{"jsonrpc":"2.0","id":1}"#),
    ];
    let obs = run(settings(&["agent"]), script);
    assert_eq!(obs.pending_ids(), Vec::<String>::new());
}

#[test]
fn session_load_replay_is_not_usage() {
    let old = "An old answer that the agent replays. ".repeat(50);
    let script = vec![
        ed(req("1", "session/load", json!({"sessionId": "L", "cwd": "/tmp", "mcpServers": []}))),
        ag(update(
            "L",
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "An old question?"}}),
        )),
        ag(chunk("L", &old)),
        ag(resp("1", json!({}))).after(vec![
            eq(&up("/_meta/acpUsage/trigger"), "session/load"),
            positive(&up("/used")),
            eq(&up("/_meta/usage/totalTokens"), 0),
        ]),
        ed(req("2", "session/prompt", prompt_params("L", "next"))),
        ag(chunk("L", "short")),
        ag(end_turn("2"))
            .before(vec![eq(
                &up("/_meta/usage/outputTokens"),
                estimate::count("short", Family::Other),
            )])
            .replaced(vec![eq(&us("/outputTokens"), estimate::count("short", Family::Other))]),
    ];
    run(settings(&["agent"]), script);
}

#[test]
fn keep_agent_usage_leaves_the_agents_figures_alone() {
    let settings = Settings { keep_agent_usage: true, ..settings(&["agent"]) };
    let script = vec![
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "k"}))).after(vec![eq(&up("/used"), 0)]),
        ed(req("2", "session/prompt", prompt_params("k", "hi"))),
        ag(agent_usage("k", 4_321, Some(128_000), Some(0.5))),
        ag(resp("2", json!({"stopReason": "end_turn", "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}})))
            .before(vec![eq(&up("/used"), 4_321), eq(&up("/size"), 128_000), eq(&up("/cost/amount"), 0.5)]),
        // Without an agent usage, acp-usage's is added.
        ed(req("3", "session/prompt", prompt_params("k", "hi"))),
        ag(end_turn("3")).before(vec![eq("/params/sessionId", "k")]).replaced(vec![positive(&us("/totalTokens"))]),
    ];
    run(settings, script);
}

#[test]
fn model_changes_are_noticed_once() {
    let opts = |model: &str| json!({"configOptions": [{"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": model, "options": []}]});
    let script = vec![
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "m"}))).after(vec![absent(&up("/_meta/acpUsage/model"))]),
        ed(req(
            "2",
            "session/set_config_option",
            json!({"sessionId": "m", "configId": "model", "value": "a"}),
        )),
        ag(resp("2", opts("a"))).after(vec![
            eq(&up("/_meta/acpUsage/trigger"), "model_change"),
            eq(&up("/_meta/acpUsage/model"), "a"),
        ]),
        ed(req(
            "3",
            "session/set_config_option",
            json!({"sessionId": "m", "configId": "model", "value": "a"}),
        )),
        ag(resp("3", opts("a"))),
        ed(req(
            "4",
            "session/set_config_option",
            json!({"sessionId": "m", "configId": "model", "value": "b"}),
        )),
        ag(err_resp("4", -32602, "no such model")),
        ed(req("5", "session/set_model", json!({"sessionId": "m", "modelId": "b"}))),
        ag(resp("5", json!({}))).after(vec![eq(&up("/_meta/acpUsage/model"), "b")]),
        ed(req("6", "session/set_model", json!({"sessionId": "m", "modelId": "b"}))),
        ag(resp("6", json!({}))),
    ];
    run(settings(&["agent"]), script);
}

/// qwen-code: each model's window comes with the model list (`_meta.contextLimit`); it is the
/// session's window from `session/new` on, and a model switch brings the new model's window,
/// never the previous one.
#[test]
fn qwen_reported_windows_follow_the_selected_model() {
    let models = json!({"currentModelId": "gpt-5.2(openai)", "availableModels": [
        {"modelId": "gpt-5.2(openai)", "name": "GPT 5.2", "_meta": {"contextLimit": 272_000}},
        {"modelId": "mock-small(openai)", "name": "Mock Small", "_meta": {"contextLimit": 100_000}}]});
    let script = vec![
        ed(req("1", "session/new", new_params())),
        ag(resp("1", json!({"sessionId": "q", "models": models}))).after(vec![
            eq(&up("/size"), 272_000),
            eq(&up("/_meta/acpUsage/size/source"), "agent"),
            eq(&up("/_meta/acpUsage/profile"), "qwen"),
            absent(&up("/cost")),
        ]),
        ed(req(
            "2",
            "session/set_model",
            json!({"sessionId": "q", "modelId": "mock-small(openai)"}),
        )),
        ag(resp("2", json!({}))).after(vec![
            eq(&up("/size"), 100_000),
            eq(&up("/_meta/acpUsage/trigger"), "model_change"),
            eq(&up("/_meta/acpUsage/model"), "mock-small"),
        ]),
        // A model the list gave no window for: the catalog (empty here) or a guess, never the
        // previous model's report.
        ed(req("3", "session/set_model", json!({"sessionId": "q", "modelId": "gpt-5.4-mini"}))),
        ag(resp("3", json!({}))).after(vec![
            eq(&up("/size"), DEFAULT_WINDOW),
            eq(&up("/_meta/acpUsage/size/source"), "default"),
        ]),
    ];
    let obs = run(settings(&["qwen", "--acp"]), script);
    assert_eq!(obs.profile(), Profile::named("qwen").unwrap());
}

/// An agent that reports its usage while a session loads (goose sends one at session setup):
/// the report is the agent's own `usage_update`, rewritten in place and read like any other.
#[test]
fn an_agents_usage_update_during_load_is_read_and_rewritten() {
    let script = vec![
        ed(req("1", "session/load", json!({"sessionId": "L", "cwd": "/tmp", "mcpServers": []}))),
        ag(chunk("L", "An old answer.")),
        ag(agent_usage("L", 12_000, Some(128_000), None)).replaced(vec![
            eq(&up("/_meta/acpUsage/trigger"), "agent"),
            eq(&up("/size"), 128_000),
            eq(&up("/_meta/acpUsage/agent"), json!({"used": 12_000, "size": 128_000})),
        ]),
        ag(resp("1", json!({}))).after(vec![
            eq(&up("/_meta/acpUsage/trigger"), "session/load"),
            eq(&up("/size"), 128_000),
            eq(&up("/_meta/usage/totalTokens"), 0),
        ]),
    ];
    run(settings(&["agent"]), script);
}
