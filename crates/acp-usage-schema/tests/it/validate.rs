//! The message validator: seeded violations with their exact pointers and messages, the
//! envelope cases, and real agents' recorded traffic.

use std::path::{Path, PathBuf};

use acp_usage_schema::validate::{
    self, Checked, Direction, Kind, MAX_VIOLATIONS, MessageValidator, Verdict, Violation,
};
use acp_usage_schema::{
    CostFigure, Figure, META_KEY, META_VERSION, SourceName, TurnUsageMeta, UsageBreakdown,
    UsageUpdateMeta, UsedSplit,
};
use serde_json::{Value, json};

use Direction::{AgentToClient as A2C, ClientToAgent as C2A};

fn check(v: &mut MessageValidator, dir: Direction, msg: Value) -> Checked {
    v.check(dir, &serde_json::to_vec(&msg).unwrap())
}

fn invalid(pointer: &str, message: &str) -> Verdict {
    Verdict::Invalid(vec![Violation { pointer: pointer.into(), message: message.into() }])
}

#[track_caller]
fn assert_valid(c: &Checked) {
    assert_eq!(c.verdict, Verdict::Valid, "{c:?}");
}

fn new_session(v: &mut MessageValidator, id: Value) {
    let c = check(
        v,
        C2A,
        json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}),
    );
    assert_valid(&c);
}

fn prompt(v: &mut MessageValidator, id: Value) {
    let c = check(
        v,
        C2A,
        json!({"jsonrpc":"2.0","id":id,"method":"session/prompt",
               "params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}),
    );
    assert_valid(&c);
}

// Seeded violations, one per kind of mistake.

#[test]
fn wrong_type() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":5,"mcpServers":[]}}),
    );
    assert_eq!(
        c,
        Checked {
            method: Some("session/new".into()),
            kind: Kind::Request,
            verdict: invalid("/params/cwd", "5 is not of type \"string\""),
        }
    );
}

#[test]
fn missing_required_field() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}),
    );
    assert_eq!(c.verdict, invalid("/params", "\"prompt\" is a required property"));
}

#[test]
fn unknown_stop_reason() {
    let mut v = MessageValidator::new();
    prompt(&mut v, json!(7));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":7,"result":{"stopReason":"done"}}));
    assert_eq!(
        c,
        Checked {
            method: Some("session/prompt".into()),
            kind: Kind::Response,
            verdict: invalid(
                "/result/stopReason",
                "\"done\" is not one of \"end_turn\", \"max_tokens\", \"max_turn_requests\", \"refusal\", \"cancelled\"",
            ),
        }
    );
}

#[test]
fn usage_update_with_a_string_used() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",
               "update":{"sessionUpdate":"usage_update","used":"53000","size":200000}}}),
    );
    assert_eq!(
        c,
        Checked {
            method: Some("session/update".into()),
            kind: Kind::Notification,
            verdict: invalid("/params/update/used", "\"53000\" is not of type \"integer\""),
        }
    );
}

#[test]
fn response_that_does_not_match_its_request() {
    let mut v = MessageValidator::new();
    new_session(&mut v, json!(3));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}));
    assert_eq!(c.method.as_deref(), Some("session/new"));
    assert_eq!(c.verdict, invalid("/result", "\"sessionId\" is a required property"));
}

#[test]
fn error_with_a_string_code() {
    let mut v = MessageValidator::new();
    new_session(&mut v, json!(4));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":4,"error":{"code":"-32603","message":"boom"}}),
    );
    assert_eq!(
        c,
        Checked {
            method: Some("session/new".into()),
            kind: Kind::Error,
            verdict: invalid("/error/code", "\"-32603\" is not of type \"integer\""),
        }
    );
    // A well-formed error answers any request, known code or not.
    new_session(&mut v, json!(5));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"Authentication required"}}),
    );
    assert_eq!((c.kind, c.verdict), (Kind::Error, Verdict::Valid));
    new_session(&mut v, json!(6));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":6,"error":{"code":1234,"message":"x","data":{"a":[1]}}}),
    );
    assert_valid(&c);
    // A missing message.
    new_session(&mut v, json!(8));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":8,"error":{"code":-32603}}));
    assert_eq!(c.verdict, invalid("/error", "\"message\" is a required property"));
}

#[test]
fn errors_inside_unions_point_inside_the_meant_alternative() {
    let mut v = MessageValidator::new();
    let update = |update: Value| json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":update}});
    // Inside an optional value (`Cost | null`).
    let c = check(
        &mut v,
        A2C,
        update(
            json!({"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":"0.5","currency":"USD"}}),
        ),
    );
    assert_eq!(
        c.verdict,
        invalid("/params/update/cost/amount", "\"0.5\" is not of type \"number\"")
    );
    // Inside a union nested in a union (content blocks are tagged by `type`).
    let c = check(
        &mut v,
        A2C,
        update(json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":5}})),
    );
    assert_eq!(c.verdict, invalid("/params/update/content/text", "5 is not of type \"string\""));
    // An unknown tag names the known ones.
    let c = check(&mut v, A2C, update(json!({"sessionUpdate":"usage","used":1,"size":2})));
    let Verdict::Invalid(violations) = c.verdict else { panic!("{c:?}") };
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].pointer, "/params/update/sessionUpdate");
    assert!(
        violations[0].message.starts_with("\"usage\" is not one of \"user_message_chunk\", ")
            && violations[0].message.contains("\"usage_update\""),
        "{violations:?}"
    );
    // A missing tag is what every alternative objects to.
    let c = check(&mut v, A2C, update(json!({"used":1,"size":2})));
    assert_eq!(c.verdict, invalid("/params/update", "\"sessionUpdate\" is a required property"));
    // A negative count.
    let c = check(&mut v, A2C, update(json!({"sessionUpdate":"usage_update","used":-1,"size":2})));
    assert_eq!(c.verdict, invalid("/params/update/used", "-1 is less than the minimum of 0"));
}

#[test]
fn violations_are_capped() {
    let mut v = MessageValidator::new();
    let prompt: Vec<Value> = (0..50).map(|i| json!({"type":"text","text":i})).collect();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":prompt}}),
    );
    let Verdict::Invalid(violations) = c.verdict else { panic!("{c:?}") };
    assert_eq!(violations.len(), MAX_VIOLATIONS);
    assert_eq!(violations[0].pointer, "/params/prompt/0/text");
}

// Envelopes, methods, ids.

#[test]
fn not_json_rpc_at_all() {
    let mut v = MessageValidator::new();
    for (line, what) in [
        (
            &b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]"[..],
            "a JSON array (a batch): ACP does not use JSON-RPC batches",
        ),
        (b"{\"jsonrpc\":\"2.0\",", "not JSON: EOF while parsing a value at line 1 column 17"),
        (b"42", "a JSON number, not an object"),
        (b"\r\n", "an empty line"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1}",
            "no `method`, `result` or `error`: not a request, a notification or a response",
        ),
        (b"{\"jsonrpc\":\"2.0\",\"method\":7}", "`method` is a number, not a string"),
        (b"{\"jsonrpc\":\"2.0\",\"result\":{}}", "a response without an `id`"),
    ] {
        let c = v.check(C2A, line);
        assert_eq!(
            c,
            Checked { method: None, kind: Kind::Other, verdict: Verdict::Malformed(what.into()) },
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn extensions_need_only_a_valid_envelope() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","method":"_zed.dev/x","params":{"anything":[1,2]}}),
    );
    assert_eq!(
        c,
        Checked {
            method: Some("_zed.dev/x".into()),
            kind: Kind::Notification,
            verdict: Verdict::Extension
        }
    );
    // An extension request, and its answer.
    let c = check(&mut v, C2A, json!({"jsonrpc":"2.0","id":"x1","method":"_acme/ping"}));
    assert_eq!((c.kind, &c.verdict), (Kind::Request, &Verdict::Extension));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":"x1","result":42}));
    assert_eq!(
        (c.method.as_deref(), c.kind, &c.verdict),
        (Some("_acme/ping"), Kind::Response, &Verdict::Extension)
    );
    // A bad envelope is still a violation.
    let c = check(&mut v, A2C, json!({"jsonrpc":"1.0","method":"_zed.dev/x"}));
    assert_eq!(c.verdict, invalid("/jsonrpc", "`jsonrpc` must be \"2.0\""));
    let c = check(&mut v, A2C, json!({"method":"_zed.dev/x","id":[1]}));
    assert_eq!(
        c.verdict,
        Verdict::Invalid(vec![
            Violation { pointer: "".into(), message: "\"jsonrpc\" is a required property".into() },
            Violation {
                pointer: "/id".into(),
                message: "[1] is not a valid request id (null, an integer or a string)".into()
            },
        ])
    );
}

#[test]
fn unknown_methods_are_unknown_not_invalid() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":9,"method":"session/frobnicate","params":{"x":1}}),
    );
    assert_eq!(
        c,
        Checked {
            method: Some("session/frobnicate".into()),
            kind: Kind::Request,
            verdict: Verdict::UnknownMethod
        }
    );
    // Its answer is paired with it, and is as unknown.
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":9,"result":{"y":2}}));
    assert_eq!(
        (c.method.as_deref(), &c.verdict),
        (Some("session/frobnicate"), &Verdict::UnknownMethod)
    );
    // The removed `session/set_model` is unknown to v1 now.
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":10,"method":"session/set_model","params":{}}),
    );
    assert_eq!(c.verdict, Verdict::UnknownMethod);
}

#[test]
fn unmatched_responses() {
    let mut v = MessageValidator::new();
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":99,"result":{}}));
    assert_eq!(
        c,
        Checked { method: None, kind: Kind::Response, verdict: Verdict::UnmatchedResponse }
    );
    // A response in the same direction as its request does not answer it.
    new_session(&mut v, json!(1));
    let c = check(&mut v, C2A, json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}));
    assert_eq!(c.verdict, Verdict::UnmatchedResponse);
    // Answered once; a second answer matches nothing.
    assert_valid(&check(&mut v, A2C, json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}})));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}));
    assert_eq!(c.verdict, Verdict::UnmatchedResponse);
    // JSON-RPC answers an unreadable request with an error whose id is null: its shape is checked.
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}),
    );
    assert_eq!(c, Checked { method: None, kind: Kind::Error, verdict: Verdict::Valid });
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32700,"message":"Parse error"}}),
    );
    assert_eq!(c.verdict, Verdict::UnmatchedResponse);
}

#[test]
fn ids_are_compared_by_value() {
    let mut v = MessageValidator::new();
    new_session(&mut v, json!(1));
    // `"1"` is not `1`.
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":"1","result":{"sessionId":"s"}}));
    assert_eq!(c.verdict, Verdict::UnmatchedResponse);
    assert_valid(&check(&mut v, A2C, json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}})));
    // Escapes are read: "\u0041" is "A".
    assert_valid(&v.check(C2A, br#"{"jsonrpc":"2.0","id":"\u0041","method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#));
    let c = v.check(A2C, br#"{"jsonrpc":"2.0","id":"A","result":{"sessionId":"s"}}"#);
    assert_eq!((c.method.as_deref(), &c.verdict), (Some("session/new"), &Verdict::Valid));
    // Both sides may use the same id at once.
    new_session(&mut v, json!(2));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}),
    );
    assert_valid(&c);
    let c = check(&mut v, C2A, json!({"jsonrpc":"2.0","id":2,"result":{"content":"x"}}));
    assert_eq!((c.method.as_deref(), &c.verdict), (Some("fs/read_text_file"), &Verdict::Valid));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}));
    assert_eq!((c.method.as_deref(), &c.verdict), (Some("session/new"), &Verdict::Valid));
    // A null id is an id; a fractional one is not.
    new_session(&mut v, Value::Null);
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":null,"result":{"sessionId":"s"}}));
    assert_eq!(c.method.as_deref(), Some("session/new"));
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":1.5,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}),
    );
    assert_eq!(
        c.verdict,
        invalid("/id", "1.5 is not a valid request id (null, an integer or a string)")
    );
}

#[test]
fn methods_go_one_way() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":1,"size":2}}}),
    );
    assert_eq!(c.verdict, invalid("/method", "`session/update` is not sent by the client"));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}),
    );
    assert_eq!(c.verdict, invalid("/method", "`session/prompt` is not sent by the agent"));
    // `$/cancel_request` goes both ways.
    for dir in [C2A, A2C] {
        assert_valid(&check(
            &mut v,
            dir,
            json!({"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}),
        ));
    }
    // A request needs an id; a notification has none.
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","method":"session/new","params":{"cwd":"/","mcpServers":[]}}),
    );
    assert_eq!(
        (c.kind, c.verdict),
        (Kind::Notification, invalid("", "`session/new` is a request: it needs an `id`"))
    );
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":3,"method":"session/cancel","params":{"sessionId":"s"}}),
    );
    assert_eq!(
        (c.kind, c.verdict),
        (Kind::Request, invalid("/id", "`session/cancel` is a notification: it has no `id`"))
    );
}

/// What the official crate reads from `null` (or absent params) is accepted as such.
#[test]
fn null_where_the_official_crate_reads_a_default() {
    let mut v = MessageValidator::new();
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}),
    );
    assert_valid(&c);
    assert_valid(&check(&mut v, A2C, json!({"jsonrpc":"2.0","id":1,"result":null})));
    assert_valid(&check(&mut v, C2A, json!({"jsonrpc":"2.0","id":2,"method":"session/list"})));
    assert_valid(&check(&mut v, A2C, json!({"jsonrpc":"2.0","id":2,"result":{"sessions":[]}})));
    // Not where it does not.
    let c = check(&mut v, C2A, json!({"jsonrpc":"2.0","id":3,"method":"session/new"}));
    assert_eq!(c.verdict, invalid("", "\"params\" is a required property"));
    let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":3,"result":null}));
    assert_eq!(c.verdict, invalid("/result", "null is not of type \"object\""));
    let c =
        check(&mut v, C2A, json!({"jsonrpc":"2.0","id":4,"method":"session/prompt","params":null}));
    assert_eq!(c.verdict, invalid("/params", "null is not of type \"object\""));
}

#[test]
fn the_new_methods_validate() {
    let mut v = MessageValidator::new();
    let opts = json!([{"id":"model","name":"Model","category":"model","type":"select","currentValue":"m1",
                       "options":[{"value":"m1","name":"M1"}]}]);
    for (method, params, result) in [
        (
            "session/fork",
            json!({"sessionId":"s","cwd":"/"}),
            json!({"sessionId":"s2","configOptions":opts}),
        ),
        ("session/resume", json!({"sessionId":"s","cwd":"/"}), json!({})),
        ("session/close", json!({"sessionId":"s"}), json!({})),
        ("session/delete", json!({"sessionId":"s"}), json!({})),
        ("session/set_mode", json!({"sessionId":"s","modeId":"plan"}), json!({})),
        (
            "session/set_config_option",
            json!({"sessionId":"s","configId":"model","value":"m1"}),
            json!({"configOptions":opts}),
        ),
        (
            "session/list",
            json!({"cwd":"/"}),
            json!({"sessions":[{"sessionId":"s","cwd":"/"}],"nextCursor":"c"}),
        ),
    ] {
        assert_valid(&check(
            &mut v,
            C2A,
            json!({"jsonrpc":"2.0","id":method,"method":method,"params":params}),
        ));
        let c = check(&mut v, A2C, json!({"jsonrpc":"2.0","id":method,"result":result}));
        assert_eq!((c.method.as_deref(), &c.verdict), (Some(method), &Verdict::Valid));
    }
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":"t","method":"terminal/create","params":{"sessionId":"s","command":"ls"}}),
    );
    assert_valid(&c);
    let c = check(&mut v, C2A, json!({"jsonrpc":"2.0","id":"t","result":{"terminalId":7}}));
    assert_eq!(c.verdict, invalid("/result/terminalId", "7 is not of type \"string\""));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"s",
               "toolCall":{"toolCallId":"t1"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}),
    );
    assert_valid(&c);
    let c = check(
        &mut v,
        C2A,
        json!({"jsonrpc":"2.0","id":"p","result":{"outcome":{"outcome":"selected","optionId":"a"}}}),
    );
    assert_valid(&c);
}

// What acp-usage itself writes.

fn our_update_meta() -> UsageUpdateMeta {
    UsageUpdateMeta {
        version: META_VERSION,
        profile: "claude".into(),
        used: Figure { source: SourceName::Agent, exact: true },
        size: Figure { source: SourceName::Catalog, exact: true },
        cost: Some(CostFigure {
            source: SourceName::Estimate,
            exact: false,
            unpriced_calls: 1,
            partial: true,
            agent_stated: Some(0.05),
            unrecorded_side_calls: vec!["session title".into()],
        }),
        model: Some("claude-sonnet-4-5".into()),
        used_split: Some(UsedSplit { prompt: 52000, output: 1000 }),
        trigger: "turn".into(),
        agent: Some(json!({"used":53001,"size":200000})),
        limits: vec![acp_usage_schema::LimitWindow {
            provider: "anthropic".into(),
            window: "five_hour".into(),
            limit_id: None,
            window_minutes: Some(300),
            used_percent: 73.0,
            resets_at: Some("2026-11-26T14:00:00Z".into()),
            status: Some("allowed".into()),
            source: "tap".into(),
            observed_at: "2026-11-26T10:00:00Z".into(),
            runs_out_at: Some("2026-11-26T12:30:00Z".into()),
            account: Some("key 3f9a1c".into()),
        }],
        credits: Some(acp_usage_schema::CreditsInfo {
            provider: "openai".into(),
            has_credits: Some(true),
            unlimited: Some(false),
            balance: Some("12.5".into()),
            plan_type: Some("plus".into()),
            account: Some("acct user12".into()),
            observed_at: "2026-11-26T10:00:00Z".into(),
        }),
    }
}

fn our_breakdown(meta: Option<Value>) -> UsageBreakdown {
    UsageBreakdown {
        total_tokens: 53000,
        input_tokens: 50000,
        output_tokens: 3000,
        thought_tokens: Some(500),
        cached_read_tokens: Some(40000),
        cached_write_tokens: None,
        meta: meta.map(|m| serde_json::from_value(m).unwrap()),
    }
}

#[test]
fn what_acp_usage_writes_validates() {
    let mut v = MessageValidator::new();
    let update_meta = serde_json::to_value(our_update_meta()).unwrap();
    let cumulative = serde_json::to_value(our_breakdown(None)).unwrap();
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{
            "sessionUpdate":"usage_update","used":53000,"size":200000,"cost":{"amount":0.045,"currency":"USD"},
            "_meta":{META_KEY: update_meta, "usage": cumulative, "claudeCode":{"x":1}}}}}),
    );
    assert_valid(&c);
    prompt(&mut v, json!(1));
    let turn_meta = TurnUsageMeta {
        version: META_VERSION,
        source: SourceName::Estimate,
        exact: false,
        calls: Some(2),
        model: Some("gpt-5.2-codex".into()),
        cost: Some(0.0123),
        modifiers: vec!["fast".into()],
        roles: Some([("main".to_string(), our_breakdown(None))].into_iter().collect()),
        agent: None,
    };
    let usage = serde_json::to_value(our_breakdown(Some(json!({META_KEY: turn_meta})))).unwrap();
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","usage":usage}}),
    );
    assert_eq!((c.method.as_deref(), &c.verdict), (Some("session/prompt"), &Verdict::Valid));

    // Our payloads against their own definitions.
    assert_eq!(validate::check_definition("AcpUsageUpdateMeta", &update_meta), Some(vec![]));
    assert_eq!(validate::check_definition("AcpUsageBreakdown", &usage), Some(vec![]));
    let turn = serde_json::to_value(&turn_meta).unwrap();
    assert_eq!(validate::check_definition("AcpUsageTurnMeta", &turn), Some(vec![]));
    let mut broken = update_meta.clone();
    broken["used"]["source"] = json!("guess");
    let violations = validate::check_definition("AcpUsageUpdateMeta", &broken).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].pointer, "/used/source");
    assert!(violations[0].message.starts_with("\"guess\" is not one of \"tap\""), "{violations:?}");
    assert_eq!(validate::check_definition("NoSuchThing", &json!({})), None);

    // A per-turn usage without the required totals is caught where the relay would write it.
    prompt(&mut v, json!(2));
    let c = check(
        &mut v,
        A2C,
        json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":2}}}),
    );
    assert_eq!(c.verdict, invalid("/result/usage", "\"totalTokens\" is a required property"));
}

#[test]
fn validators_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let v = MessageValidator::new();
    send(&v);
    let handle = std::thread::spawn(move || {
        let mut v = v;
        check(
            &mut v,
            C2A,
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}),
        )
        .verdict
    });
    assert_eq!(handle.join().unwrap(), Verdict::Valid);
}

// Real agents' traffic.

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.jsonl` recording: this crate's probe recordings and the end-to-end fixtures.
fn recordings() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (dir, keep) in [
        (Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings"), ".probe.jsonl"),
        (workspace_root().join("tests/fixtures"), ".jsonl"),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // `*.mock.jsonl` are HTTP requests to the mock LLM, not ACP.
            if name.ends_with(keep)
                && (name.contains(".probe.")
                    || name.contains("-direct") && !name.ends_with(".mock.jsonl"))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Runs one recording through a validator; returns every message that is not plainly valid,
/// as `file:line method verdict`.
fn not_valid(path: &Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy();
    let mut v = MessageValidator::new();
    let mut found = Vec::new();
    let mut count = 0;
    for (n, line) in text.lines().enumerate() {
        let record: Value = serde_json::from_str(line).unwrap();
        let dir = match record["dir"].as_str() {
            Some("out") => C2A,
            Some("in") => A2C,
            other => panic!("{name}:{}: direction {other:?}", n + 1),
        };
        let c = v.check(dir, &serde_json::to_vec(&record["msg"]).unwrap());
        count += 1;
        if c.verdict != Verdict::Valid {
            found.push(format!(
                "{name}:{} {} {:?}",
                n + 1,
                c.method.unwrap_or_default(),
                c.verdict
            ));
        }
    }
    (count, found)
}

/// The recorded sessions of claude-agent-acp 0.101.0, codex-acp 0.16.0 (zed, Rust) and 2.6.0
/// (TypeScript), gemini-cli 0.61.0, opencode 1.18.33, qwen-code 0.24.4, Copilot CLI 1.0.102 and
/// cline 3.0.65 follow the schema; every message that does not validate plainly is listed here.
#[test]
fn real_agents_follow_the_schema() {
    let files = recordings();
    assert!(files.len() >= 14, "{files:?}");
    let mut messages = 0;
    let mut found = Vec::new();
    for path in &files {
        let (count, not_valid) = not_valid(path);
        messages += count;
        found.extend(not_valid);
    }
    eprintln!("{messages} messages in {} recordings; not plainly valid:", files.len());
    for f in &found {
        eprintln!("  {f}");
    }
    assert_eq!(
        found,
        [
            // claude-agent-acp 0.101.0 and codex-acp 2.6.0 (TypeScript) announce their auth
            // state with an extension notification: allowed, and not checked beyond its envelope.
            "claude-direct-load.jsonl:11 _auth/status_update Extension",
            "claude-direct-resume.jsonl:4 _auth/status_update Extension",
            "claude-direct.jsonl:4 _auth/status_update Extension",
            "codex-ts-direct-load.jsonl:4 _auth/status_update Extension",
            "codex-ts-direct-resume.jsonl:4 _auth/status_update Extension",
            "codex-ts-direct.jsonl:4 _auth/status_update Extension",
            // qwen-code 0.24.4 asks the client for queued prompts mid-turn with a custom method
            // that lacks the `_` prefix ACP requires of extensions.
            "qwen-direct.jsonl:29 craft/drainMidTurnQueue UnknownMethod",
            "acp-codexts.probe.jsonl:4 _auth/status_update Extension",
        ]
    );
    assert!(messages > 200, "{messages}");
}
