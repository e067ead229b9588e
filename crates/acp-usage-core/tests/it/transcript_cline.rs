//! The cline session-document parser against real `<id>.messages.json` files (cline 3.0.65 run
//! offline against a mock LLM; see `fixtures/transcripts/cline/README.md`), and documents edited from them.

use crate::common::calls;

use acp_usage_core::tokens::{TokenRecord, TokenTotals};
use acp_usage_core::transcript::cline::ClineParser;
use acp_usage_core::transcript::{Call, Event, FileRole, FormatError, Parser};
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5";

fn fixture(name: &str) -> String {
    crate::common::fixture("cline", name)
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).expect("a JSON fixture")
}

/// Feeds the whole document, as the caller does each time the file changed.
fn feed(parser: &mut ClineParser, role: FileRole, doc: &str) -> Vec<Event> {
    crate::common::feed(parser, role, [doc])
}

fn parse(doc: &str) -> Vec<Event> {
    feed(&mut ClineParser::default(), FileRole::Main, doc)
}

fn try_parse(doc: &str) -> Result<Vec<Event>, FormatError> {
    let mut out = Vec::new();
    ClineParser::default().line(FileRole::Main, doc.as_bytes(), &mut out).map(|()| out)
}

/// The fixture document with its messages replaced, pretty-printed as cline writes it.
fn with_messages(name: &str, messages: &[Value]) -> String {
    let mut doc = fixture_json(name);
    doc["messages"] = Value::Array(messages.to_vec());
    serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
}

fn messages(name: &str) -> Vec<Value> {
    fixture_json(name)["messages"].as_array().expect("a messages list").clone()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|event| match event {
            Event::Call(call) if call.main => "call",
            Event::Call(_) => "side",
            Event::Prompt { .. } => "prompt",
            Event::TurnEnd { .. } => "end",
            Event::Window(_) => "window",
            Event::Limits(_) => "limits",
        })
        .collect()
}

/// The events other than calls (prompts and turn ends), in order.
fn turns(events: &[Event]) -> Vec<Event> {
    events.iter().filter(|event| !matches!(event, Event::Call(_))).cloned().collect()
}

fn keys(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Call(call) => Some(call.key.clone()),
            _ => None,
        })
        .collect()
}

fn prompt(at_ms: i64, text: &str) -> Event {
    Event::Prompt { at_ms: Some(at_ms), text: Some(text.to_owned()) }
}

fn end(at_ms: i64) -> Event {
    Event::TurnEnd { at_ms: Some(at_ms) }
}

/// What the mock served as call `n` (Anthropic counters), as cline records it.
fn served(n: u64) -> TokenRecord {
    TokenRecord {
        model: Some(MODEL.to_owned()),
        ..TokenRecord::from_anthropic(100 * n + 1, 10000 * n + 3, 1000 * n + 2, 0, 10 * n + 4)
    }
}

/// The session totals cline keeps in the metadata document beside the conversation (it does
/// not count calls).
fn metadata_totals(name: &str, calls: u64) -> TokenTotals {
    let usage = &fixture_json(name)["metadata"]["usage"];
    let count = |field: &str| usage[field].as_u64().expect("a counter");
    TokenTotals {
        input: count("inputTokens"),
        cache_read: count("cacheReadTokens"),
        cache_write: count("cacheWriteTokens"),
        output: count("outputTokens"),
        thought: 0,
        calls,
    }
}

fn totals(calls: &[Call]) -> TokenTotals {
    let mut sum = TokenTotals::default();
    for call in calls {
        sum += &call.record;
    }
    sum
}

#[test]
fn every_call_with_the_session_totals() {
    let events = parse(&fixture("tool-turn-and-load.messages.json"));
    let calls = calls(&events);
    let keys: Vec<&str> = calls.iter().map(|call| call.key.as_str()).collect();
    assert_eq!(
        keys,
        ["cline:msg_9xHNw1r3", "cline:msg_OOEn3aeL", "cline:msg_IIYjMBXk", "cline:msg_5A_yDPvZ"]
    );
    let records: Vec<&TokenRecord> = calls.iter().map(|call| &call.record).collect();
    assert_eq!(records, [&served(1), &served(2), &served(3), &served(4)]);
    // 101 + 10003 read + 1002 written: cline's inputTokens is the whole prompt.
    assert_eq!(calls[0].record.input, 11106);
    assert_eq!(calls[0].record.uncached_input(), 101);
    // cline's `cost` is its own estimate, not a stated price.
    assert!(calls.iter().all(|call| call.record.stated_cost.is_none()));
    assert!(calls.iter().all(|call| call.main));
    let at: Vec<Option<i64>> = calls.iter().map(|call| call.at_ms).collect();
    assert_eq!(
        at,
        [Some(1795456654163), Some(1795456655735), Some(1795456655788), Some(1795456670786)]
    );
    assert_eq!(totals(&calls), metadata_totals("tool-turn-and-load.json", 4));
    assert_eq!(
        totals(&calls),
        TokenTotals {
            input: 111024,
            cache_read: 100012,
            cache_write: 10008,
            output: 116,
            thought: 0,
            calls: 4
        }
    );
}

#[test]
fn prompts_and_turn_ends_in_order() {
    let events = parse(&fixture("tool-turn-and-load.messages.json"));
    // "Say hello." (call 1); the tool turn (call 2 asks for run_commands, call 3 answers); after
    // session/load in a new process, one more prompt (call 4).
    assert_eq!(
        kinds(&events),
        ["prompt", "call", "end", "prompt", "call", "call", "end", "prompt", "call", "end"]
    );
    assert_eq!(
        turns(&events),
        [
            prompt(1795456654097, "Say hello."),
            end(1795456654163),
            prompt(1795456655705, "Please USE_TOOL to list files, then answer."),
            end(1795456655788),
            prompt(1795456670660, "Third turn after load."),
            end(1795456670786),
        ]
    );
}

#[test]
fn a_reread_replaces_the_calls_and_reports_no_turn_again() {
    let doc = fixture("tool-turn-and-load.messages.json");
    let mut parser = ClineParser::default();
    let first = feed(&mut parser, FileRole::Main, &doc);
    let again = feed(&mut parser, FileRole::Main, &doc);
    assert_eq!(kinds(&again), ["call"; 4]);
    assert_eq!(keys(&again), keys(&first));
    assert_eq!(calls(&again), calls(&first));
    // The same document written compactly reads the same.
    let compact = serde_json::to_string(&fixture_json("tool-turn-and-load.messages.json")).unwrap();
    assert_eq!(feed(&mut parser, FileRole::Main, &compact), again);
    assert_eq!(parse(&compact), first);
}

#[test]
fn a_longer_document_reports_only_what_is_new() {
    let all = messages("tool-turn-and-load.messages.json");
    let whole = parse(&fixture("tool-turn-and-load.messages.json"));
    let mut parser = ClineParser::default();

    // The file as session/new writes it, then after each turn.
    assert_eq!(
        feed(&mut parser, FileRole::Main, &with_messages("tool-turn-and-load.messages.json", &[])),
        []
    );
    let turn1 = feed(
        &mut parser,
        FileRole::Main,
        &with_messages("tool-turn-and-load.messages.json", &all[..2]),
    );
    assert_eq!(kinds(&turn1), ["prompt", "call", "end"]);
    let turn2 = feed(
        &mut parser,
        FileRole::Main,
        &with_messages("tool-turn-and-load.messages.json", &all[..6]),
    );
    assert_eq!(kinds(&turn2), ["call", "prompt", "call", "call", "end"]);
    assert_eq!(keys(&turn2)[0], "cline:msg_9xHNw1r3");
    assert_eq!(
        turns(&turn2),
        [prompt(1795456655705, "Please USE_TOOL to list files, then answer."), end(1795456655788)]
    );
    let turn3 = feed(&mut parser, FileRole::Main, &fixture("tool-turn-and-load.messages.json"));
    assert_eq!(kinds(&turn3), ["call", "call", "call", "prompt", "call", "end"]);

    // One message at a time (the tool round's call before its result, the result alone) adds
    // up to the same turns and calls as one read of the whole.
    let mut parser = ClineParser::default();
    let mut events = Vec::new();
    for n in 0..=all.len() {
        events.extend(feed(
            &mut parser,
            FileRole::Main,
            &with_messages("tool-turn-and-load.messages.json", &all[..n]),
        ));
    }
    assert_eq!(turns(&events), turns(&whole));
    assert_eq!(calls(&events), calls(&whole));
}

#[test]
fn a_half_written_document_is_not_complete_yet() {
    let doc = fixture("tool-turn-and-load.messages.json");
    let complete = doc.trim_end().len();
    let mut parser = ClineParser::default();
    for len in (0..complete).filter(|&len| doc.is_char_boundary(len)) {
        let mut out = Vec::new();
        parser
            .line(FileRole::Main, &doc.as_bytes()[..len], &mut out)
            .unwrap_or_else(|err| panic!("{len} bytes: {err}"));
        assert_eq!(out, [], "{len} bytes");
    }
    // Caught while cline rewrote a longer file: the new document, then the old one's tail.
    let mixed = format!("{doc}  \"cacheWriteTokens\": 4002\n  }}\n}}\n");
    assert_eq!(feed(&mut parser, FileRole::Main, &mixed), []);
    assert_eq!(feed(&mut parser, FileRole::Main, "  \n"), []);
    // Nothing was taken as seen meanwhile.
    assert_eq!(feed(&mut parser, FileRole::Main, &doc), parse(&doc));
}

#[test]
fn valid_json_of_another_shape_is_a_format_error() {
    let bad = [
        "{}",
        "{\"messages\": 3}",
        "{\"messages\": [3]}",
        "\"a string\"",
        "{\"messages\": [{\"id\": \"m\", \"role\": \"assistant\", \"metrics\": \
         {\"inputTokens\": \"many\", \"outputTokens\": 1}}]}",
        "{\"messages\": [{\"id\": \"m\", \"role\": \"assistant\", \"metrics\": \
         {\"inputTokens\": 10}}]}",
        "{\"messages\": [{\"id\": \"m\", \"role\": \"user\", \"content\": 3}]}",
        "{\"messages\": [{\"id\": \"m\", \"role\": \"user\", \"content\": [\"text\"]}]}",
    ];
    for doc in bad {
        assert!(try_parse(doc).is_err(), "{doc}");
    }
    // A failed read leaves nothing seen: the next good document reads in full.
    let mut all = messages("tool-turn-and-load.messages.json");
    let good = with_messages("tool-turn-and-load.messages.json", &all);
    all.push(json!({"id": "m", "role": "user", "content": 3}));
    let broken = with_messages("tool-turn-and-load.messages.json", &all);
    let mut parser = ClineParser::default();
    let mut out = Vec::new();
    assert!(parser.line(FileRole::Main, broken.as_bytes(), &mut out).is_err());
    assert_eq!(out, []);
    assert_eq!(feed(&mut parser, FileRole::Main, &good), parse(&good));
    // cline's own reader also takes a bare list of messages.
    let list = serde_json::to_string(&messages("tool-turn-and-load.messages.json")).unwrap();
    assert_eq!(parse(&list), parse(&good));
}

#[test]
fn openai_compatible_provider() {
    let events = parse(&fixture("openai.messages.json"));
    assert_eq!(kinds(&events), ["prompt", "call", "end", "prompt", "call", "call", "end"]);
    let calls = calls(&events);
    // prompt_tokens (cached included), cached_tokens, completion_tokens; no reasoning count.
    let records: Vec<TokenRecord> = calls.iter().map(|call| call.record.clone()).collect();
    let served = |n: u64| TokenRecord {
        model: Some("gpt-4o".to_owned()),
        ..TokenRecord::from_openai(10100 * n + 4, 10000 * n + 3, 10 * n + 4, 0)
    };
    assert_eq!(records, [served(1), served(2), served(3)]);
    assert_eq!(totals(&calls), metadata_totals("openai.json", 3));
}

#[test]
fn subagent_documents_are_not_the_main_agent() {
    // cline 3.0.65 marks an ACP session's own file `"agent": "subagent"` now and then (seen in
    // the e2e tests): fed as the session's file, it is still the main agent's.
    let mut doc = fixture_json("tool-turn-and-load.messages.json");
    doc["agent"] = json!("subagent");
    doc["taskType"] = json!("subagent_task");
    let events = parse(&serde_json::to_string_pretty(&doc).unwrap());
    assert_eq!(
        kinds(&events),
        ["prompt", "call", "end", "prompt", "call", "call", "end", "prompt", "call", "end"]
    );
    // A subagent's file, as the caller feeds it.
    let lead = fixture("tool-turn-and-load.messages.json");
    let events = feed(&mut ClineParser::default(), FileRole::Subagent, &lead);
    assert_eq!(kinds(&events), ["side"; 4]);
    assert_eq!(
        calls(&events).iter().map(|c| c.record.clone()).collect::<Vec<_>>(),
        [served(1), served(2), served(3), served(4)]
    );
}

#[test]
fn a_failed_run_ends_its_turn_once() {
    let all = messages("tool-turn-and-load.messages.json");
    let error = |id: &str, ts: i64| {
        json!({
            "id": id, "role": "assistant", "ts": ts,
            "content": [{"type": "text", "text": "Request failed: 400"}],
            "metadata": {"displayOnly": true, "displayRole": "error"},
            "modelInfo": {"id": MODEL, "provider": "anthropic"}
        })
    };
    // The call after the tool result failed: the tool round, then cline's error notice.
    let mut failed = all[..5].to_vec();
    failed.push(error("error_1", 1795456655800));
    let mut parser = ClineParser::default();
    let events = feed(
        &mut parser,
        FileRole::Main,
        &with_messages("tool-turn-and-load.messages.json", &failed),
    );
    assert_eq!(kinds(&events), ["prompt", "call", "end", "prompt", "call", "end"]);
    assert_eq!(events.last(), Some(&end(1795456655800)));
    // A notice after an answer that already ended the turn ends nothing more.
    let mut after = all.clone();
    after.push(error("error_2", 1795456670900));
    let events = parse(&with_messages("tool-turn-and-load.messages.json", &after));
    assert_eq!(turns(&events), turns(&parse(&fixture("tool-turn-and-load.messages.json"))));
}

#[test]
fn only_the_users_input_is_a_prompt() {
    let doc = with_messages(
        "tool-turn-and-load.messages.json",
        &[
            // cline keeps a prompt without attachments as a plain string.
            json!({"id": "u1", "role": "user", "ts": 1, "content": "<user_input mode=\"plan\">Plan it.</user_input>"}),
            json!({"id": "a1", "role": "assistant", "ts": 2, "content": [
                {"type": "thinking", "thinking": "…"},
                {"type": "text", "text": "Plan."}
            ], "metrics": {"inputTokens": 5, "outputTokens": 1}}),
            // Runtime notices and a compaction summary are the runtime's, not the user's.
            json!({"role": "user", "content": [{"type": "text", "text": "You seem to be looping."}]}),
            json!({"id": "c1", "role": "user", "ts": 3, "content": [{"type": "text", "text": "Context summary: …"}],
                "metadata": {"kind": "compaction_summary", "displayRole": "system"}}),
            // Input with an attached image and a file.
            json!({"id": "u2", "role": "user", "ts": 4, "content": [
                {"type": "text", "text": "<user_input mode=\"act\">Look.</user_input>"},
                {"type": "image", "data": "…", "mediaType": "image/png"},
                {"type": "text", "text": "<file_content path=\"a.rs\">\nfn main() {}\n</file_content>"}
            ]}),
            json!({"role": "assistant", "ts": 5, "content": "Done.", "metrics": {"inputTokens": 9, "outputTokens": 2, "cacheReadTokens": 4}}),
        ],
    );
    let events = parse(&doc);
    assert_eq!(turns(&events), [prompt(1, "Plan it."), end(2), prompt(4, "Look."), end(5)]);
    // A message without an id is known by its position.
    assert_eq!(keys(&events), ["cline:a1", "cline:#5"]);
    let calls = calls(&events);
    assert_eq!(
        calls[1].record,
        TokenRecord { input: 9, cache_read: 4, output: 2, ..TokenRecord::default() }
    );
    assert_eq!(calls[1].record.model, None);
}
