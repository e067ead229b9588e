//! Long agent lines streamed on as they arrive (in process, real child agents). What these
//! tests guarantee:
//!
//! - A 16 MiB `agent_message_chunk` line written by the agent in 4 KiB pieces reaches the editor
//!   byte for byte, and so do the lines around it; it is not held whole (with a 1 MiB line
//!   limit it still passes: the limit applies to lines acp-usage must hold).
//! - A long line acp-usage owns (the agent's `usage_update`) is still held whole and rewritten.
//! - An over-long line that is not streamed (not JSON) is still dropped and the session goes on.
//! - A prompt result held for the session's transcript is not overtaken by a long line the agent
//!   wrote right after it.
//! - A streamed line without a final newline (the agent's last) is forwarded as it came.
//! - A streamed `agent_message_chunk` counts in the turn's output: its estimate from the bytes
//!   after its prefix is within a few tokens of what the held line's decoded text gives.

use crate::support::*;
use acp_usage::agents::Profile;
use acp_usage_core::estimate::{self, Family};
use serde_json::json;

/// An agent that answers `initialize`, `session/new` and `session/prompt`; on a prompt it
/// writes a small chunk, the result, then the lines in the files named by the prompt's text,
/// each in 4 KiB writes. `_test/write` writes the files named in `params.files` the same way.
const AGENT: &str = r#"
import json, os, sys, time
inp = sys.stdin.buffer
def put(b):
    for i in range(0, len(b), 4096):
        os.write(1, b[i:i+4096])
        if i % (64 * 4096) == 0:
            time.sleep(0.001)
def files(names):
    for name in names:
        with open(name, "rb") as f:
            put(f.read())
while True:
    raw = inp.readline()
    if not raw:
        break
    msg = json.loads(raw)
    m = msg.get("method")
    if m == "initialize":
        put(json.dumps({"jsonrpc":"2.0","id":msg["id"],"result":{"protocolVersion":1,"agentInfo":{"name":"test-agent","version":"0.0.0"}}}).encode() + b"\n")
    elif m == "session/new":
        put(json.dumps({"jsonrpc":"2.0","id":msg["id"],"result":{"sessionId":"S"}}).encode() + b"\n")
    elif m == "session/prompt":
        chunk = {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}
        put(json.dumps(chunk).encode() + b"\n")
        result = json.dumps({"jsonrpc":"2.0","id":msg["id"],"result":{"stopReason":"end_turn"}}).encode() + b"\n"
        name = msg["params"]["prompt"][0]["text"]
        if name.startswith("before:"):
            # The long lines are part of the turn.
            with open(name[7:], "rb") as f:
                put(f.read())
            put(result)
        else:
            # The result and the start of the long line reach the relay together.
            with open(name, "rb") as f:
                rest = f.read()
            put(result + rest)
    elif m == "_test/write":
        files(msg["params"]["files"])
    elif m == "_test/exit":
        os._exit(0)
"#;

fn agent() -> Vec<String> {
    // Written once per test process, as the puppet is: every test used to write it again in
    // place, and a test whose python3 read it while another had just truncated it ran an empty
    // script, which exits at once (the relay ended, and the editor's write failed with EPIPE).
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let path = PATH.get_or_init(|| {
        let path = scratch_dir().join("streaming_agent.py");
        std::fs::write(&path, AGENT).expect("writing the streaming agent");
        path
    });
    vec!["python3".into(), "-u".into(), path.display().to_string()]
}

/// A `session/update` line of `kind` for session `S` whose text is `len` varied bytes with
/// escapes, without its newline.
fn long_update(kind: &str, len: usize) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"{kind}","content":{{"type":"text","text":""#
    )
    .into_bytes();
    let start = line.len();
    line.extend((0..len).map(|i| b'a' + (i % 23) as u8));
    for i in (start..line.len()).step_by(1000) {
        line[i] = b'\\';
        line[i + 1] = b'n';
    }
    line.extend_from_slice(br#""}}}}"#);
    line
}

fn write_file(name: &str, bytes: &[u8]) -> String {
    let path = scratch_dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

async fn start(opts: acp_usage::relay::Options) -> Editor {
    let mut ed = Editor::start(opts);
    ed.send_line(&req("0", "initialize", json!({"protocolVersion":1}))).await;
    ed.expect_line().await;
    ed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_line_in_small_pieces_is_streamed_byte_for_byte() {
    let mut opts = options(&agent());
    // Held whole, the line would be over the limit and dropped.
    opts.max_line = 1 << 20;
    let mut ed = start(opts).await;
    let big = long_update("agent_message_chunk", 16 << 20);
    let before = notif("_x/before", json!({}));
    let after = notif("_x/after", json!({}));
    let mut file = before.clone().into_bytes();
    file.push(b'\n');
    file.extend_from_slice(&big);
    file.push(b'\n');
    file.extend_from_slice(after.as_bytes());
    file.push(b'\n');
    // A tool_call_update over CRLF, and a last line without a newline.
    let mut crlf = long_update("tool_call_update", 3 << 20);
    crlf.extend_from_slice(b"\r\n");
    file.extend_from_slice(&crlf);
    let last = long_update("agent_thought_chunk", 2 << 20);
    file.extend_from_slice(&last);
    let name = write_file("stream-16m", &file);
    ed.send_line(&notif("_test/write", json!({"files":[name]}))).await;
    ed.send_line(&notif("_test/exit", json!({}))).await;
    let got = ed.read_to_end().await;
    assert_same_bytes(&got, &file, "what the editor got");
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_line_acp_usage_owns_is_still_held_and_rewritten() {
    let mut ed = start(options(&agent())).await;
    // The agent's usage_update with a 2 MiB `_meta`: held whole, rewritten in place.
    let blob = "m".repeat(2 << 20);
    let line = notif(
        "session/update",
        json!({"sessionId":"S","update":{"sessionUpdate":"usage_update","used":10,"size":1000,"_meta":{"blob":blob}}}),
    );
    let mut file = line.clone().into_bytes();
    file.push(b'\n');
    let marker = notif("_x/marker", json!({}));
    file.extend_from_slice(marker.as_bytes());
    file.push(b'\n');
    let name = write_file("owned-2m", &file);
    ed.send_line(&notif("_test/write", json!({"files":[name]}))).await;
    let got = ed.expect_line().await;
    assert_ne!(got, line.as_bytes(), "the usage_update was not rewritten");
    let v = parse(&got);
    assert_eq!(v["params"]["update"]["_meta"]["blob"].as_str().map(str::len), Some(2 << 20));
    assert!(
        v["params"]["update"]["_meta"]["acpUsage"].is_object(),
        "{:.200}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(ed.expect_line().await, marker.as_bytes());
    ed.send_line(&notif("_test/exit", json!({}))).await;
    assert_eq!(ed.rest().await, Vec::<Vec<u8>>::new());
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_line_that_must_be_held_is_dropped() {
    let mut opts = options(&agent());
    opts.max_line = 1 << 20;
    let mut ed = start(opts).await;
    let mut file = Vec::new();
    // Not streamable: a response (the prefix cannot say whether acp-usage owns it), and
    // an update whose method comes only after its long params.
    let mut resp = br#"{"jsonrpc":"2.0","id":"x","result":{"blob":""#.to_vec();
    resp.extend(std::iter::repeat_n(b'r', 2 << 20));
    resp.extend_from_slice(b"\"}}\n");
    file.extend_from_slice(&resp);
    let mut late = br#"{"jsonrpc":"2.0","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""#.to_vec();
    late.extend(std::iter::repeat_n(b'l', 2 << 20));
    late.extend_from_slice(b"\"}}},\"method\":\"session/update\"}\n");
    file.extend_from_slice(&late);
    let marker = notif("_x/marker", json!({}));
    file.extend_from_slice(marker.as_bytes());
    file.push(b'\n');
    let name = write_file("over-held", &file);
    ed.send_line(&notif("_test/write", json!({"files":[name]}))).await;
    assert_eq!(ed.expect_line().await, marker.as_bytes());
    ed.send_line(&notif("_test/exit", json!({}))).await;
    assert_eq!(ed.rest().await, Vec::<Vec<u8>>::new());
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_result_is_not_overtaken_by_a_long_line_after_it() {
    let dir = scratch_dir().join("held-claude");
    std::fs::create_dir_all(&dir).unwrap();
    let mut opts = options(&agent());
    opts.settings.forced_profile = Some(Profile::named("claude").unwrap());
    opts.settings.transcripts = true;
    let claude = Profile::named("claude").unwrap().transcripts().unwrap();
    opts.transcripts =
        Some(acp_usage::sources::transcripts::Locations::default().with(claude, dir));
    opts.transcript_wait = std::time::Duration::from_millis(300);
    let mut ed = start(opts).await;
    ed.send_line(&req("1", "session/new", new_params())).await;
    let mut got = Vec::new();
    while !got.iter().any(|l: &Vec<u8>| parse(l)["id"] == 1) {
        got.push(ed.expect_line().await);
    }
    let big = long_update("agent_message_chunk", 16 << 20);
    let mut file = big.clone();
    file.push(b'\n');
    let name = write_file("after-held", &file);
    ed.send_line(&req(
        "2",
        "session/prompt",
        json!({"sessionId":"S","prompt":[{"type":"text","text":name}]}),
    ))
    .await;
    let mut lines = Vec::new();
    loop {
        let line = ed.expect_line().await;
        let done = line == big;
        lines.push(line);
        if done {
            break;
        }
    }
    let result =
        lines.iter().position(|l| l.len() < 4096 && parse(l)["id"] == 2).unwrap_or_else(|| {
            panic!("no result before the long line: {:?}", lossy(&lines[..lines.len() - 1]))
        });
    assert!(result < lines.len() - 1);
    ed.send_line(&notif("_test/exit", json!({}))).await;
    let rest = ed.rest().await;
    assert!(rest.iter().all(|l| parse(l)["id"] != 2), "a second result");
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_chunk_counts_in_the_turns_output() {
    let mut ed = start(options(&agent())).await;
    ed.send_line(&req("1", "session/new", new_params())).await;
    while parse(&ed.expect_line().await)["id"] != 1 {}
    // 4 MiB of text with a `\n` escape every 1000 bytes, streamed (not held).
    const LEN: usize = 4 << 20;
    let big = long_update("agent_message_chunk", LEN);
    let mut file = big.clone();
    file.push(b'\n');
    let name = write_file("in-turn", &file);
    let prompt =
        json!({"sessionId":"S","prompt":[{"type":"text","text":format!("before:{name}")}]});
    ed.send_line(&req("2", "session/prompt", prompt)).await;
    let mut result = None;
    while result.is_none() {
        let line = ed.expect_line().await;
        if line.len() < 4096 && parse(&line)["id"] == 2 {
            result = Some(parse(&line));
        }
    }
    let r = result.unwrap();
    let escapes = LEN.div_ceil(1000);
    let held = estimate::count("hi", Family::Other)
        + estimate::by_bytes((LEN - escapes) as u64, Family::Other);
    let got = u64_at(&r, "/result/usage/outputTokens");
    // The prefix ends at `sessionUpdate`'s value: the rest holds ~40 bytes of JSON around the text.
    let slack = estimate::by_bytes(64, Family::Other);
    assert!(got >= held && got <= held + slack, "output {got}, held line {held}: {r}");
    ed.send_line(&notif("_test/exit", json!({}))).await;
    ed.rest().await;
    assert_eq!(ed.finish().await, 0);
}
