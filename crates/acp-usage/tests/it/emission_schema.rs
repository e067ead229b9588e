//! Every line acp-usage injects or rewrites validates against `schema/schema.json`, at every
//! emission point (after new/load/resume/fork, at each turn's end, after a model change, after a
//! compaction, an agent's own `usage_update` rewritten, a prompt result with `usage`), in every
//! agent profile, including error results and sessions with estimated figures only.

use crate::support::settings_for;
use acp_usage::agents::Profile;
use acp_usage::relay::observer::Observer;
use acp_usage_schema::validate::{Direction, MessageValidator, Verdict};
use serde_json::{Value, json};

fn line(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

/// Runs a scripted session through an observer and validates everything the client would see.
/// Returns how many lines acp-usage emitted or rewrote.
fn run(
    profile: Profile,
    agent_lines_per_turn: &dyn Fn(&str) -> Vec<Value>,
    result: Value,
) -> usize {
    let mut o = Observer::new(settings_for(profile));
    let mut v = MessageValidator::new();
    let mut owned = 0;
    let mut failures = Vec::new();
    let editor = |o: &mut Observer, v: &mut MessageValidator, msg: Value| {
        let l = line(msg);
        o.from_editor(&l);
        let c = v.check(Direction::ClientToAgent, &l);
        assert_eq!(c.verdict, Verdict::Valid, "the test's own editor line is invalid: {c:?}");
    };
    let mut agent =
        |o: &mut Observer, v: &mut MessageValidator, msg: Value, failures: &mut Vec<String>| {
            let l = line(msg);
            let out = o.from_agent(&l);
            let rewritten = out.replace.is_some();
            let sent: Vec<(bool, Vec<u8>)> = out
                .before
                .into_iter()
                .map(|b| (true, b))
                .chain(std::iter::once((rewritten, out.replace.unwrap_or(l))))
                .chain(out.after.into_iter().map(|a| (true, a)))
                .collect();
            for (ours, bytes) in sent {
                let c = v.check(Direction::AgentToClient, &bytes);
                if ours {
                    owned += 1;
                    if c.verdict != Verdict::Valid {
                        failures.push(format!(
                            "{:?}: {}\n  {:?}",
                            profile,
                            String::from_utf8_lossy(&bytes),
                            c
                        ));
                    }
                }
            }
        };
    let model = json!([{"id":"model","name":"Model","category":"model","type":"select","currentValue":"m1","options":[
        {"value":"m1","name":"M1"},{"value":"m2","name":"M2"}]}]);
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}),
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}),
        &mut failures,
    );
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}),
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"S","configOptions":model}}),
        &mut failures,
    );
    for (id, text) in [(2, "first"), (3, "second")] {
        editor(
            &mut o,
            &mut v,
            json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":text}]}}),
        );
        for l in agent_lines_per_turn("S") {
            agent(&mut o, &mut v, l, &mut failures);
        }
        agent(
            &mut o,
            &mut v,
            json!({"jsonrpc":"2.0","id":id,"result":result.clone()}),
            &mut failures,
        );
    }
    // A failed turn still gets its usage_update.
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"x"}]}}),
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"boom"}}),
        &mut failures,
    );
    // Model change, both ways.
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":5,"method":"session/set_config_option","params":{"sessionId":"S","configId":"model","value":"m2"}}),
    );
    let changed = json!([{"id":"model","name":"Model","category":"model","type":"select","currentValue":"m2","options":[]}]);
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":5,"result":{"configOptions":changed}}),
        &mut failures,
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"config_option_update","configOptions":model}}}),
        &mut failures,
    );
    // Compaction.
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"We talked."}]}}}),
        &mut failures,
    );
    // Load, resume and fork.
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":6,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[]}}),
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"first"}}}}),
        &mut failures,
    );
    agent(&mut o, &mut v, json!({"jsonrpc":"2.0","id":6,"result":null}), &mut failures);
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":7,"method":"session/resume","params":{"sessionId":"T","cwd":"/w"}}),
    );
    agent(&mut o, &mut v, json!({"jsonrpc":"2.0","id":7,"result":{}}), &mut failures);
    editor(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":8,"method":"session/fork","params":{"sessionId":"S","cwd":"/w"}}),
    );
    agent(
        &mut o,
        &mut v,
        json!({"jsonrpc":"2.0","id":8,"result":{"sessionId":"F"}}),
        &mut failures,
    );
    assert!(
        failures.is_empty(),
        "acp-usage emitted lines that violate schema.json:\n{}",
        failures.join("\n")
    );
    // The same validator does reject a broken update, so "valid" above means something.
    let broken = line(
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"usage_update","used":"12019","size":200000}}}),
    );
    assert!(matches!(v.check(Direction::AgentToClient, &broken).verdict, Verdict::Invalid(_)));
    owned
}

#[test]
fn claude_style_emissions_validate() {
    let turn = |s: &str| {
        vec![
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hi."}}}}),
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"usage_update","used":12013,"size":200000}}}),
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"usage_update","used":12019,"size":1000000,"cost":{"amount":0.023485,"currency":"USD"},"_meta":{"_claude/model":"claude-opus-4-8"}}}}),
        ]
    };
    let result = json!({"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":7,"cachedReadTokens":9000,"cachedWriteTokens":3000,"totalTokens":12019}});
    assert!(run(Profile::named("claude").unwrap(), &turn, result) >= 14);
}

#[test]
fn codex_style_emissions_validate() {
    let turn = |s: &str| {
        vec![
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"Thinking."}}}}),
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls","kind":"execute","status":"completed","rawInput":{"cmd":"ls"},"content":[{"type":"content","content":{"type":"text","text":"a b"}}]}}}),
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"usage_update","used":5040,"size":258400}}}),
        ]
    };
    assert!(run(Profile::named("codex").unwrap(), &turn, json!({"stopReason":"end_turn"})) >= 12);
}

#[test]
fn gemini_style_emissions_validate() {
    let turn = |s: &str| {
        vec![
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello from mock."}}}}),
        ]
    };
    let result = json!({"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":8000,"output_tokens":9},"model_usage":[{"model":"gemini-2.5-pro","token_count":{"input_tokens":8000,"output_tokens":9}}]}}});
    assert!(run(Profile::named("gemini").unwrap(), &turn, result) >= 12);
}

#[test]
fn generic_estimate_only_emissions_validate() {
    let turn = |s: &str| {
        vec![
            json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello."}}}}),
        ]
    };
    assert!(
        run(Profile::named("generic").unwrap(), &turn, json!({"stopReason":"cancelled"})) >= 12
    );
}
