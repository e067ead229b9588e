//! `--record FILE`: the built binary records a session, and the recording is checked against
//! what actually crossed the relay. What these tests guarantee:
//!
//! - Every line is recorded once, in order per direction, with its direction; `seq` counts
//!   1, 2, 3, … and `t` never goes back. Agent-side records (forwarded, rewritten, injected) are
//!   exactly the editor's stdout, line for line and byte for byte; editor-side records are
//!   exactly what the editor sent.
//! - Lines acp-usage adds are `injected`; prompt results it changed are `rewritten`.
//! - Secrets (`authenticate` params, `apiKey`-like members, key-shaped strings in JSON, plain
//!   text and non-UTF-8 lines) are redacted in the file, while the agent still gets the original
//!   bytes (`cat` as the agent echoes what it got).
//! - A recording that cannot be created is a clear error (exit 2); one that cannot be written
//!   is logged and the session goes on untouched.

use crate::support::run_binary as run;
use std::path::PathBuf;

use acp_usage::commands::demo::agent::{CWD, SECOND_MODEL, SESSION_ID, TURNS};
use acp_usage::record::{Dir, Entry};
use serde_json::{Value, json};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("record-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}-{}.jsonl", std::process::id()))
}

fn read_recording(path: &PathBuf) -> Vec<Entry> {
    let text = std::fs::read(path).expect("reading the recording");
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            Entry::parse(l)
                .unwrap_or_else(|e| panic!("not a record ({e}): {}", String::from_utf8_lossy(l)))
        })
        .collect()
}

/// The lines of a byte stream, without their `\n`.
fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    if v.last().is_some_and(Vec::is_empty) {
        v.pop();
    }
    v
}

fn req(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn prompt(id: u64, text: &str) -> String {
    req(
        id,
        "session/prompt",
        json!({"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": text}]}),
    )
}

fn assert_seq_and_time(rec: &[Entry]) {
    let mut last_t = 0.0;
    for (i, e) in rec.iter().enumerate() {
        assert_eq!(e.seq, Some(i as u64 + 1), "seq of record {i}");
        let t = e.t.expect("t");
        assert!(t >= last_t, "t goes back at seq {}: {t} < {last_t}", i + 1);
        last_t = t;
    }
}

#[test]
fn a_demo_session_is_recorded_line_for_line() {
    let exe = env!("CARGO_BIN_EXE_acp-usage");
    let path = scratch("demo");
    let sent = [
        req(0, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}})),
        req(1, "session/new", json!({"cwd": CWD, "mcpServers": []})),
        prompt(2, TURNS[0].prompt),
        req(
            3,
            "session/set_config_option",
            json!({"sessionId": SESSION_ID, "configId": "model", "value": SECOND_MODEL}),
        ),
        prompt(4, TURNS[1].prompt),
    ];
    let input: String = sent.iter().map(|l| format!("{l}\n")).collect();
    let out = run(&["--record", path.to_str().unwrap(), "--", exe, "demo-agent"], input.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let rec = read_recording(&path);
    assert_seq_and_time(&rec);
    assert!(rec.iter().all(|e| !e.redacted), "nothing secret in this session");

    // The editor side: exactly what was sent, in order.
    let from_editor: Vec<&[u8]> =
        rec.iter().filter(|e| e.dir == Dir::EditorToAgent).map(|e| e.line.as_slice()).collect();
    let sent_bytes: Vec<&[u8]> = sent.iter().map(|l| l.as_bytes()).collect();
    assert_eq!(from_editor, sent_bytes);

    // The agent side, injected lines included: exactly the editor's stdout.
    let to_editor: Vec<&Entry> = rec.iter().filter(|e| e.dir != Dir::EditorToAgent).collect();
    let stdout = lines(&out.stdout);
    assert_eq!(to_editor.len(), stdout.len());
    for (e, l) in to_editor.iter().zip(&stdout) {
        assert_eq!(&e.line, l, "record {:?} differs from what the editor got", e.seq);
    }

    // Injected: the usage_updates acp-usage adds (after session/new, per turn, after the model
    // change), the list of its own `/usage` command after session/new (the demo agent lists no
    // commands), and nothing else.
    let mut injected: Vec<Value> = to_editor
        .iter()
        .filter(|e| e.dir == Dir::Injected)
        .map(|e| serde_json::from_slice(&e.line).unwrap())
        .collect();
    let kind = |v: &Value| v.pointer("/params/update/sessionUpdate").cloned();
    let lists = injected.iter().filter(|v| kind(v) == Some(json!("available_commands_update")));
    assert_eq!(lists.count(), 1, "{injected:?}");
    injected.retain(|v| kind(v) != Some(json!("available_commands_update")));
    assert!(injected.len() >= 4, "{injected:?}");
    for v in &injected {
        assert_eq!(v.pointer("/params/update/sessionUpdate"), Some(&json!("usage_update")), "{v}");
    }

    // Rewritten: exactly the two prompt results (per-turn usage added), each right after an
    // injected end-of-turn update; the agent's other lines are forwarded as they were.
    let rewritten: Vec<usize> = (0..to_editor.len()).filter(|&i| to_editor[i].rewritten).collect();
    assert_eq!(rewritten.len(), 2, "{rewritten:?}");
    for (&i, id) in rewritten.iter().zip([2, 4]) {
        let v: Value = serde_json::from_slice(&to_editor[i].line).unwrap();
        assert_eq!(v["id"], id);
        assert!(v["result"]["usage"].is_object(), "{v}");
        assert_eq!(to_editor[i].dir, Dir::AgentToEditor);
        assert_eq!(to_editor[i - 1].dir, Dir::Injected);
    }
    assert!(
        to_editor.iter().filter(|e| e.rewritten).all(|e| e.dir == Dir::AgentToEditor),
        "only agent lines are rewritten"
    );
}

#[test]
fn secrets_are_redacted_in_the_recording_but_not_on_the_wire() {
    let path = scratch("secrets");
    let aiza = format!("AIza{}", "Q".repeat(35));
    let secrets = [
        "sk-ant-api03-SECRETSECRETSECRETSECRET",
        "sk-ant-abc123def456ghi789jkl012",
        "hunter2-is-my-pass",
        "plain-value-no-pattern",
        "sk-proj-SECRETSECRETSECRET1234",
        aiza.as_str(),
        "abcdefghijklmnopqrstuvwxyz0123",
    ];
    let plain = r#"{"jsonrpc":"2.0","method":"_x/plain","params":{"inputTokens":12,"text":"nothing to hide"}}"#;
    let sent: Vec<Vec<u8>> = vec![
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{{"methodId":"anthropic-api-key","apiKey":"{}","_meta":{{"note":"{}"}}}}}}"#,
            secrets[0], secrets[2]
        )
        .into_bytes(),
        format!(
            r#"{{"jsonrpc":"2.0","method":"_x/config","params":{{"apiKey":"{}","mcpServers":[{{"name":"gh","command":"gh-mcp","args":[],"env":[{{"name":"GITHUB_TOKEN","value":"{}"}}]}}]}}}}"#,
            secrets[1], secrets[3]
        )
        .into_bytes(),
        format!("export OPENAI_API_KEY={} && run it", secrets[4]).into_bytes(),
        [b"\xff\xfe not utf-8, key ".as_slice(), secrets[5].as_bytes(), b" \x80"].concat(),
        format!(
            r#"{{"jsonrpc":"2.0","method":"_x/log","params":{{"text":"curl -H 'Authorization: Bearer {}' https://x"}}}}"#,
            secrets[6]
        )
        .into_bytes(),
        plain.as_bytes().to_vec(),
    ];
    let input: Vec<u8> = sent.iter().flat_map(|l| l.iter().copied().chain([b'\n'])).collect();
    let out = run(&["--record", path.to_str().unwrap(), "--", "cat"], &input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // On the wire: `cat` got (and echoed) every original byte. After the echo, the relay
    // answers the unanswered `authenticate` with an error of its own.
    assert_eq!(&out.stdout[..input.len()], input.as_slice(), "the agent got other bytes");

    let file = std::fs::read(&path).unwrap();
    let rec = read_recording(&path);
    assert_seq_and_time(&rec);
    for secret in secrets {
        let found = file.windows(secret.len()).any(|w| w == secret.as_bytes())
            || rec.iter().any(|e| e.line.windows(secret.len()).any(|w| w == secret.as_bytes()));
        assert!(!found, "{secret} is in the recording:\n{}", String::from_utf8_lossy(&file));
    }

    for dir in [Dir::EditorToAgent, Dir::AgentToEditor] {
        let side: Vec<&Entry> = rec.iter().filter(|e| e.dir == dir).collect();
        assert_eq!(side.len(), sent.len(), "{dir:?}");
        for (e, s) in side[..5].iter().zip(&sent) {
            assert!(e.redacted, "{dir:?} {}", String::from_utf8_lossy(s));
            assert!(e.line.windows(10).any(|w| w == b"[redacted]"));
        }
        // Nothing secret: recorded byte for byte.
        assert!(!side[5].redacted);
        assert_eq!(side[5].line, sent[5]);
        // authenticate keeps its method id (so the recording still validates) and its shape.
        let auth: Value = serde_json::from_slice(&side[0].line).unwrap();
        assert_eq!(
            auth["params"],
            json!({"methodId": "anthropic-api-key", "apiKey": "[redacted]", "_meta": {"note": "[redacted]"}})
        );
        // Non-JSON text keeps everything but the key.
        assert_eq!(side[2].line, b"export OPENAI_API_KEY=[redacted] && run it");
        assert_eq!(side[3].line, b"\xff\xfe not utf-8, key [redacted] \x80");
        assert!(String::from_utf8_lossy(&side[4].line).contains("Bearer [redacted]' https://x"));
    }
    // The error the relay added for the unanswered request is recorded as injected.
    let injected: Vec<&Entry> = rec.iter().filter(|e| e.dir == Dir::Injected).collect();
    assert_eq!(injected.len(), 1);
    assert_eq!(lines(&out.stdout[input.len()..]), vec![injected[0].line.clone()]);
}

#[test]
fn a_recording_that_cannot_be_created_is_a_clear_error() {
    let out = run(&["--record", "/nonexistent-dir/rec.jsonl", "--", "cat"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot create the recording /nonexistent-dir/rec.jsonl"), "{err}");
}

#[test]
fn a_recording_that_cannot_be_written_does_not_break_the_session() {
    let input: Vec<u8> = (0..2000)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","method":"_x/n","params":{{"i":{i}}}}}"#) + "\n")
        .collect::<String>()
        .into_bytes();
    let out = run(&["--record", "/dev/full", "--", "cat"], &input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, input);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("cannot write the recording /dev/full").count(), 1, "{err}");
}
