//! `acp-usage validate`, `acp-usage --validate` and `acp-usage schema`, run as the built binary.
//! What these tests guarantee:
//!
//! - The seeded violations of `tests/fixtures/seeded.jsonl` (wrong type, missing required field,
//!   a prompt result answering `session/new`, unknown stop reason, a string `used`, malformed)
//!   are found on their line with their pointer and the schema's message, exit 1; unknown
//!   methods and unmatched responses are reported but do not fail the run.
//! - A demo session recorded through the relay validates clean (exit 0), injected and
//!   rewritten lines included.
//! - A missing file, or a file that is not a recording, exits 2 with a clear message.
//! - `--from agent` reads a raw NDJSON stream of one side; `-` reads stdin; `--json` prints JSON
//!   lines, one per finding and a summary.
//! - `--validate` logs a violation of the live traffic on stderr and leaves stdout byte for
//!   byte as it is without it.
//! - `schema` prints the embedded schema.

use crate::support::run_binary as run;
use std::path::PathBuf;
use std::process::Output;

use acp_usage::commands::demo::agent::{CWD, SECOND_MODEL, SESSION_ID, TURNS};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// stderr without the colours the log may have.
fn stderr(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, up to a final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// The human output's line for input line `line`, with its pointer and kind.
fn finding<'a>(out: &'a str, line: u64, pointer: &str, kind: &str) -> &'a str {
    let prefix = format!("{line}  ");
    out.lines()
        .find(|l| l.starts_with(&prefix) && l.contains(&format!("  {pointer}  {kind}: ")))
        .unwrap_or_else(|| panic!("no {kind} finding at line {line}, {pointer}:\n{out}"))
}

#[test]
fn seeded_violations_are_found_where_they_are() {
    let out = run(&["validate", &fixture("seeded.jsonl")], b"");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));

    let wrong_type = finding(&text, 3, "/params/cwd", "invalid");
    assert!(wrong_type.contains("client->agent  session/new"), "{wrong_type}");
    assert!(wrong_type.contains(r#"42 is not of type "string""#), "{wrong_type}");

    // A prompt result answering session/new is checked as a session/new result.
    let mismatch = finding(&text, 4, "/result", "invalid");
    assert!(mismatch.contains("agent->client  session/new"), "{mismatch}");
    assert!(mismatch.contains(r#""sessionId" is a required property"#), "{mismatch}");

    let missing = finding(&text, 5, "/params", "invalid");
    assert!(missing.contains(r#""prompt" is a required property"#), "{missing}");

    let used = finding(&text, 6, "/params/update/used", "invalid");
    assert!(used.contains("session/update"), "{used}");
    assert!(used.contains(r#""12" is not of type "integer""#), "{used}");

    let stop = finding(&text, 8, "/result/stopReason", "invalid");
    assert!(stop.contains("session/prompt") && stop.contains(r#""bored""#), "{stop}");

    finding(&text, 9, "/method", "unknown method");
    finding(&text, 11, "/id", "unmatched response");
    finding(&text, 12, "(root)", "malformed");

    // Valid lines (the injected update, the extension) have no finding.
    for line in [1, 2, 7, 10] {
        assert!(!text.lines().any(|l| l.starts_with(&format!("{line}  "))), "line {line}:\n{text}");
    }
    let total = text.lines().find(|l| l.starts_with("total")).expect("a total row");
    let counts: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(counts, ["total", "12", "4", "6", "2"], "{text}");
    assert!(text.contains("6 violations in 6 messages"), "{text}");
    assert!(text.contains("messages/s"), "{text}");
}

#[test]
fn unknown_methods_and_unmatched_responses_are_reported_but_pass() {
    let out = run(&["validate", &fixture("unchecked_only.jsonl")], b"");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    finding(&text, 1, "/method", "unknown method");
    finding(&text, 2, "/id", "unmatched response");
}

#[test]
fn json_output_is_one_object_per_finding_and_a_summary() {
    let out = run(&["validate", "--json", &fixture("seeded.jsonl")], b"");
    assert_eq!(out.status.code(), Some(1));
    let values: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let (summary, findings) = values.split_last().unwrap();
    assert_eq!(findings.len(), 8);
    assert!(findings.iter().all(|f| f["type"] == "finding"));
    let used = findings.iter().find(|f| f["line"] == 6).unwrap();
    assert_eq!(used["pointer"], "/params/update/used");
    assert_eq!(used["method"], "session/update");
    assert_eq!(used["direction"], "agent_to_client");
    assert_eq!(used["kind"], "invalid");
    assert_eq!(used["violation"], true);
    assert_eq!(used["seq"], 6);
    let unknown = findings.iter().find(|f| f["line"] == 9).unwrap();
    assert_eq!(
        (&unknown["kind"], &unknown["violation"]),
        (&json!("unknown_method"), &json!(false))
    );

    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["messages"], 12);
    assert_eq!(summary["violations"], 6);
    assert_eq!(summary["invalid"], 6);
    assert_eq!(summary["unknown_methods"], 1);
    assert_eq!(summary["unmatched_responses"], 1);
    let update = summary["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "session/update")
        .unwrap();
    assert_eq!(
        (&update["kind"], &update["messages"], &update["valid"], &update["invalid"]),
        (&json!("notification"), &json!(2), &json!(1), &json!(1))
    );
}

#[test]
fn a_raw_agent_stream_is_checked_with_from() {
    let path = fixture("agent_stream.ndjson");
    let out = run(&["validate", "--from", "agent", &path], b"");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    finding(&text, 2, "/params/update/used", "invalid");
    let wrong_side = finding(&text, 5, "/method", "invalid");
    assert!(wrong_side.contains("not sent by the agent"), "{wrong_side}");
    finding(&text, 6, "/id", "unmatched response");
    assert!(text.lines().any(|l| l.starts_with("total") && l.contains(" 5 ")), "{text}");

    // The same from stdin.
    let input = std::fs::read(&path).unwrap();
    let piped = run(&["validate", "--from", "agent", "-"], &input);
    assert_eq!(piped.status.code(), Some(1));
    assert_eq!(
        stdout(&piped).lines().filter(|l| l.contains(": ")).count(),
        text.lines().filter(|l| l.contains(": ")).count()
    );

    // From the client side, the client's method is fine and the agent's are not.
    let client = stdout(&run(&["validate", "--from", "client", &path], b""));
    assert!(!client.lines().any(|l| l.starts_with("5  ")), "{client}");
    finding(&client, 4, "/method", "invalid");
}

#[test]
fn unreadable_input_exits_2() {
    let out = run(&["validate", "/nonexistent/rec.jsonl"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read /nonexistent/rec.jsonl"), "{}", stderr(&out));

    // A raw stream without --from is not a recording.
    let out = run(&["validate", &fixture("agent_stream.ndjson")], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("is not an acp-usage recording (line 1") && err.contains("--from"),
        "{err}"
    );

    // A broken record later on: what was found is printed, and the exit says the input was bad.
    let mut bad = std::fs::read(fixture("unchecked_only.jsonl")).unwrap();
    bad.extend_from_slice(b"{\"seq\":3,\"dir\":\"sideways\",\"line\":\"{}\"}\n");
    let out = run(&["validate", "-"], &bad);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("stdin:3: not a recording entry"), "{}", stderr(&out));
    assert!(stdout(&out).contains("unknown method"));
}

/// The demo session's lines, with `extra` appended to the first prompt's params.
fn demo_session(extra: Option<(&str, Value)>) -> Vec<u8> {
    let req = |id: u64, method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n"
    };
    let prompt = |id, text: &str| {
        json!({"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": text}]})
            .as_object()
            .cloned()
            .map(|mut p| {
                if let (Some((k, v)), 2) = (&extra, id) {
                    p.insert((*k).to_owned(), v.clone());
                }
                req(id, "session/prompt", Value::Object(p))
            })
            .unwrap()
    };
    [
        req(0, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}})),
        req(1, "session/new", json!({"cwd": CWD, "mcpServers": []})),
        prompt(2, TURNS[0].prompt),
        req(
            3,
            "session/set_config_option",
            json!({"sessionId": SESSION_ID, "configId": "model", "value": SECOND_MODEL}),
        ),
        prompt(4, TURNS[1].prompt),
        prompt(5, TURNS[2].prompt),
    ]
    .concat()
    .into_bytes()
}

#[test]
fn a_recorded_demo_session_validates_clean() {
    let exe = env!("CARGO_BIN_EXE_acp-usage");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("validate-clean-{}.jsonl", std::process::id()));
    let rec = path.to_str().unwrap();
    let out = run(&["--record", rec, "--", exe, "demo-agent"], &demo_session(None));
    assert!(out.status.success(), "{}", stderr(&out));
    let records = std::fs::read_to_string(&path).unwrap().lines().count();

    let checked = run(&["validate", rec], b"");
    let text = stdout(&checked);
    assert_eq!(checked.status.code(), Some(0), "{text}");
    let total = text.lines().find(|l| l.starts_with("total")).expect("a total row");
    let counts: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(counts, ["total", &records.to_string(), &records.to_string(), "0", "0"], "{text}");
    assert!(text.contains("session/update"), "{text}");
}

#[test]
fn live_validation_logs_violations_and_leaves_the_traffic_alone() {
    let exe = env!("CARGO_BIN_EXE_acp-usage");
    // `_meta` must be an object: a violation the demo agent does not care about.
    let input = demo_session(Some(("_meta", json!(5))));
    let plain = run(&["--", exe, "demo-agent"], &input);
    let live = run(&["--validate", "--", exe, "demo-agent"], &input);
    assert!(plain.status.success() && live.status.success(), "{}", stderr(&live));
    assert_eq!(live.stdout, plain.stdout, "--validate changed the traffic");
    let err = stderr(&live);
    let logged = err
        .lines()
        .find(|l| l.contains("/params/_meta"))
        .unwrap_or_else(|| panic!("no violation logged:\n{err}"));
    assert!(logged.contains("WARN") && logged.contains("session/prompt"), "{logged}");
    // The record number counts both directions, so where the agent's first answers fall between
    // the editor's pipelined lines (timing) moves it: only its presence is fixed.
    assert!(logged.contains("client->agent") && logged.contains("line="), "{logged}");
    // Nothing else was wrong, and the summary says so.
    assert_eq!(err.matches("ACP invalid").count(), 1, "{err}");
    assert!(err.contains("validation summary") && err.contains("violations=1"), "{err}");
}

#[test]
fn schema_prints_the_embedded_schema() {
    let out = run(&["schema"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), acp_usage_schema::SCHEMA_JSON.trim_end());
    let v: Value = serde_json::from_slice(&out.stdout).expect("the schema is JSON");
    assert!(v.is_object());
}
