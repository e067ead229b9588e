//! The relay in process (`acp_usage::relay::relay` over in-memory editor pipes, with real child
//! agents), and the `acp-usage` command line. What these tests guarantee:
//!
//! - Lines acp-usage does not modify pass byte for byte both ways: odd whitespace, key order,
//!   unicode escapes, huge and odd numbers, unknown methods, extensions, `$/cancel_request`,
//!   unknown update kinds, malformed lines, invalid UTF-8, arrays, empty and CRLF lines,
//!   garbage, and a last line without a newline.
//! - A 64 MiB line passes both ways intact; a line over `max_line` is dropped in either direction
//!   and the session goes on.
//! - Responses are matched to requests by id: `1`, `"1"`, `null`, negative, large and escaped ids
//!   stay apart, each prompt result gets its own session's usage, concurrent sessions in one
//!   agent don't mix.
//! - An agent that dies with requests pending: one JSON-RPC error per pending request (ids echoed
//!   as sent, the exit named), and the relay ends with the agent's code (128+N for signal N).
//! - Editor EOF: the agent's stdin is closed; an agent that exits gets its status returned at
//!   once, one that doesn't is ended with its whole process group after the grace period; a
//!   grandchild holding stdout open cannot keep the relay alive.
//! - Emission order: an injected `usage_update` follows the response to `session/new`/`load`
//!   and model changes, precedes a `session/prompt` result (error results too, which stay
//!   unchanged); replayed history is not usage; the agent's own `usage_update` is rewritten in
//!   place (its `_meta` kept, originals under `_meta.acpUsage.agent`) or, with
//!   `keep_agent_usage`, forwarded byte for byte; `size` is never 0.
//! - The command line: no agent → exit 2 and usage on stderr; an agent that cannot start → a
//!   clear message and a non-zero exit; otherwise the agent's exit code.

use std::time::{Duration, Instant};

use crate::support::*;
use acp_usage_core::estimate::{self, Family};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---------------------------------------------------------------------------------------------
// Byte-exact forwarding.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmodified_lines_pass_byte_for_byte_both_ways() {
    let parts: &[&[u8]] = &[
        // A session/update with escapes, huge and odd numbers.
        br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"caf\u00e9 \ud83d\ude00 \"q\" \/"}},"n":1e400,"f":0.10000000000000001,"big":123456789012345678901234567890,"neg":-0.0}}"#,
        b"\n",
        // Odd whitespace and key order, an extension.
        b"  {  \"params\" : { \"x\" :[ 1 , 2 ] } ,\t\"method\":\"_zed.dev/foo\" , \"jsonrpc\" : \"2.0\" }  \n",
        br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}"#,
        b"\n",
        br#"{"jsonrpc":"2.0","method":"unknown/method","params":null}"#,
        b"\n",
        br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"some_future_kind","x":[1,{"y":2}]}}}"#,
        b"\n",
        // A response to nothing the editor asked.
        br#"{"jsonrpc":"2.0","id":"r1","result":{"ok":true}}"#,
        b"\n",
        // Malformed, invalid UTF-8, an array, an empty line, CRLF, garbage.
        b"{\"jsonrpc\":\"2.0\", \"method\":\n",
        b"\xff\xfe\x80 not utf-8 \xc3\x28\n",
        b"[1,2,{\"a\":3}]\n",
        b"\n",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"_x/crlf\",\"params\":{}}\r\n",
        b"garbage between messages }{\n",
        b"   \t \n",
        // The last line has no newline.
        br#"{"jsonrpc":"2.0","method":"_x/last","params":{}}"#,
    ];
    let input: Vec<u8> = parts.concat();
    let (mut tx, mut rx, relay) = start_raw(options(&["cat"]));
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        rx.read_to_end(&mut got).await.expect("reading from the relay");
        got
    });
    tx.write_all(&input).await.unwrap();
    tx.shutdown().await.unwrap();
    let got =
        tokio::time::timeout(READ_TIMEOUT, reader).await.expect("relay output in time").unwrap();
    assert_same_bytes(&got, &input, "what the editor got");
    assert_eq!(relay_code(relay, READ_TIMEOUT).await, 0);
}

// ---------------------------------------------------------------------------------------------
// Line sizes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_line_passes_both_ways_intact() {
    let mut big = br#"{"jsonrpc":"2.0","method":"_x/big","params":{"blob":""#.to_vec();
    let body = big.len();
    big.resize(body + (64 << 20), b'a');
    // Vary the content so a shifted or truncated copy cannot compare equal.
    for (i, b) in big[body..].iter_mut().enumerate().step_by(4093) {
        *b = b'a' + (i % 26) as u8;
    }
    big.extend_from_slice(b"\"}}\n");
    let after = b"{\"jsonrpc\":\"2.0\",\"method\":\"_x/after\"}\n";
    let mut input = big.clone();
    input.extend_from_slice(after);

    let (mut tx, mut rx, relay) = start_raw(options(&["cat"]));
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        rx.read_to_end(&mut got).await.expect("reading from the relay");
        got
    });
    tx.write_all(&input).await.unwrap();
    tx.shutdown().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(300), reader)
        .await
        .expect("relay output in time")
        .unwrap();
    assert_eq!(got.len(), input.len());
    assert!(got == input, "the 64 MiB line came back changed");
    assert_eq!(relay_code(relay, READ_TIMEOUT).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_lines_are_dropped_both_ways_and_the_session_goes_on() {
    // The agent first writes a 2 MiB line and a short one, then echoes.
    let script = r#"head -c 2097152 /dev/zero; echo; printf '%s\n' '{"after":"agent"}'; exec cat"#;
    let mut opts = options(&["sh", "-c", script]);
    opts.max_line = 1 << 20;
    let mut ed = Editor::start(opts);
    let mut long = vec![b'y'; 2 << 20];
    long.push(b'\n');
    ed.send(&long).await;
    ed.send_line(r#"{"after":"editor"}"#).await;
    assert_eq!(ed.expect_line().await, br#"{"after":"agent"}"#);
    assert_eq!(ed.expect_line().await, br#"{"after":"editor"}"#);
    // A line of exactly the limit still passes.
    let mut exact = vec![b'z'; 1 << 20];
    exact.push(b'\n');
    ed.send(&exact).await;
    assert_eq!(ed.expect_line().await.len(), 1 << 20);
    ed.close().await;
    assert_eq!(ed.rest().await, Vec::<Vec<u8>>::new());
    assert_eq!(ed.finish().await, 0);
}

// ---------------------------------------------------------------------------------------------
// Ids and sessions.

/// Two `session/new` requests outstanding at once, answered in reverse order.
async fn two_sessions(ed: &mut Editor, id_a: &str, id_b: &str) {
    ed.send_line(&req(id_a, "session/new", new_params())).await;
    ed.send_line(&req(id_b, "session/new", new_params())).await;
    let resp_b = resp(id_b, json!({"sessionId": "B"}));
    let resp_a = resp(id_a, json!({"sessionId": "A"}));
    let got = ed.emit(&[&resp_b, &resp_a]).await;
    assert_eq!(got.len(), 4, "{:#?}", lossy(&got));
    assert_eq!(got[0], resp_b.as_bytes());
    assert_eq!(usage_update_of(&got[1], "B")["_meta"]["acpUsage"]["trigger"], "session/new");
    assert_eq!(got[2], resp_a.as_bytes());
    assert_eq!(usage_update_of(&got[3], "A")["_meta"]["acpUsage"]["trigger"], "session/new");
}

/// Prompts `id_a` in session A and `id_b` in session B at once; the agent reports `used_a` and
/// `used_b`, answers B first, and each result must carry its own session's figures.
async fn crossed_prompts(ed: &mut Editor, id_a: &str, id_b: &str, used_a: u64, used_b: u64) {
    ed.send_line(&req(id_a, "session/prompt", prompt_params("A", "first question"))).await;
    ed.send_line(&req(id_b, "session/prompt", prompt_params("B", "second question"))).await;
    let lines = [
        chunk("A", "answer a"),
        chunk("B", "answer b"),
        agent_usage("B", used_b, None, None),
        agent_usage("A", used_a, None, None),
        end_turn(id_b),
        end_turn(id_a),
    ];
    let got = ed.emit(&lines).await;
    assert_eq!(got.len(), 8, "{:#?}", lossy(&got));
    assert_eq!(got[0], lines[0].as_bytes());
    assert_eq!(got[1], lines[1].as_bytes());
    assert_eq!(u64_at(&usage_update_of(&got[2], "B"), "/used"), used_b);
    assert_eq!(u64_at(&usage_update_of(&got[3], "A"), "/used"), used_a);
    for (upd, res, session, id, used) in [(4, 5, "B", id_b, used_b), (6, 7, "A", id_a, used_a)] {
        let u = usage_update_of(&got[upd], session);
        assert_eq!(u["_meta"]["acpUsage"]["trigger"], "turn");
        assert_eq!(u64_at(&u, "/used"), used, "session {session}");
        assert_id(&got[res], id);
        let r = parse(&got[res]);
        assert_eq!(r["result"]["stopReason"], "end_turn");
        assert_eq!(u64_at(&r, "/result/usage/totalTokens"), used, "result for id {id}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_are_matched_by_exact_id() {
    let mut ed = Editor::start(options(&puppet()));
    two_sessions(&mut ed, "-7", "18446744073709551615").await;
    // `1` and `"1"` are different requests.
    crossed_prompts(&mut ed, "1", r#""1""#, 12_345, 777).await;
    // `null`, and a string id with escapes.
    crossed_prompts(&mut ed, "null", r#""a\"b\\c\u00e9\n\/""#, 2_000, 3_000).await;
    // Integers that differ only beyond double precision; the extremes of i64.
    crossed_prompts(&mut ed, "9007199254740993", "9007199254740992", 4_000, 5_000).await;
    crossed_prompts(&mut ed, "-9223372036854775808", "9223372036854775807", 6_000, 7_000).await;
    // Ids as strings that look like numbers, and the empty string.
    crossed_prompts(&mut ed, r#""""#, r#""-7""#, 8_000, 9_000).await;
    ed.close().await;
    assert_eq!(ed.rest().await, Vec::<Vec<u8>>::new(), "nothing was left pending");
    assert_eq!(ed.finish().await, 0);
}

/// JSON-RPC ids beyond 64 bits are still ids; a rewritten prompt result must echo them
/// exactly, or the editor cannot match its response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_beyond_64_bits_survive_a_rewritten_result() {
    let mut ed = Editor::start(options(&puppet()));
    two_sessions(&mut ed, "1", "2").await;
    crossed_prompts(&mut ed, "18446744073709551617", "-18446744073709551617", 100, 200).await;
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

/// An agent may re-encode a string id (`"\u0041"` → `"A"`): JSON-RPC ids are values, so the
/// response still answers the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_matched_by_value_not_spelling() {
    let mut ed = Editor::start(options(&puppet()));
    two_sessions(&mut ed, "1", "2").await;
    ed.send_line(&req(r#""\u0041""#, "session/prompt", prompt_params("A", "hi"))).await;
    let got = ed.emit(&[agent_usage("A", 321, None, None), end_turn(r#""A""#)]).await;
    assert_eq!(got.len(), 3, "a usage_update must precede the result: {:#?}", lossy(&got));
    assert_eq!(u64_at(&usage_update_of(&got[1], "A"), "/used"), 321);
    assert_eq!(u64_at(&parse(&got[2]), "/result/usage/totalTokens"), 321);
    // The request was answered: no error for it when the agent goes.
    ed.puppet_exit(0).await;
    assert_eq!(lossy(&ed.rest().await), Vec::<String>::new());
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_keep_their_own_usage() {
    let mut ed = Editor::start(options(&puppet()));
    two_sessions(&mut ed, "1", "2").await;
    ed.send_line(&req("3", "session/prompt", prompt_params("A", "a question"))).await;
    ed.send_line(&req("4", "session/prompt", prompt_params("B", "b question"))).await;
    let lines = [
        chunk("A", "Let me look."),
        chunk("B", "Thinking about b."),
        agent_usage("A", 1_000, None, None),
        agent_usage("B", 50_000, Some(128_000), None),
        update(
            "A",
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "execute", "status": "pending", "rawInput": {"command": "ls"}}),
        ),
        update(
            "A",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "a.txt b.txt"}}]}),
        ),
        chunk("A", "Two files."),
        agent_usage("A", 2_000, None, None),
        end_turn("4"),
        end_turn("3"),
    ];
    let got = ed.emit(&lines).await;
    assert_eq!(got.len(), lines.len() + 2, "{:#?}", lossy(&got));
    // The agent's own updates, rewritten with their own session's figures.
    assert_eq!(u64_at(&usage_update_of(&got[2], "A"), "/used"), 1_000);
    let b = usage_update_of(&got[3], "B");
    assert_eq!((u64_at(&b, "/used"), u64_at(&b, "/size")), (50_000, 128_000));
    let a = usage_update_of(&got[7], "A");
    assert_eq!(
        (u64_at(&a, "/used"), u64_at(&a, "/size")),
        (2_000, DEFAULT_WINDOW),
        "B's size leaked into A"
    );
    // B's turn.
    let b = usage_update_of(&got[8], "B");
    assert_eq!((u64_at(&b, "/used"), u64_at(&b, "/size")), (50_000, 128_000));
    assert_eq!(u64_at(&b, "/_meta/usage/totalTokens"), 50_000);
    let rb = parse(&got[9]);
    assert_eq!(rb["id"], 4);
    assert_eq!(u64_at(&rb, "/result/usage/totalTokens"), 50_000);
    // A's turn: two calls, 1000 + 2000.
    let a = usage_update_of(&got[10], "A");
    assert_eq!((u64_at(&a, "/used"), u64_at(&a, "/size")), (2_000, DEFAULT_WINDOW));
    assert_eq!(u64_at(&a, "/_meta/usage/totalTokens"), 3_000);
    let ra = parse(&got[11]);
    assert_eq!(ra["id"], 3);
    assert_eq!(u64_at(&ra, "/result/usage/totalTokens"), 3_000);
    assert_eq!(u64_at(&ra, "/result/usage/_meta/acpUsage/calls"), 2);

    // A second turn in A with nothing reported starts from A's context, not B's.
    ed.send_line(&req("5", "session/prompt", prompt_params("A", "and now?"))).await;
    let got = ed.emit(&[chunk("A", "Done."), end_turn("5")]).await;
    assert_eq!(got.len(), 3, "{:#?}", lossy(&got));
    let r = parse(&got[2]);
    let input = u64_at(&r, "/result/usage/inputTokens");
    assert!((2_000..50_000).contains(&input), "A's next turn input is {input}: {r}");
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

// ---------------------------------------------------------------------------------------------
// The agent going away.

/// Parses the error responses the relay sent for pending requests.
fn error_responses(lines: &[Vec<u8>], ids: &[&str], status: &str) {
    assert_eq!(lines.len(), ids.len(), "one error per pending request: {:#?}", lossy(lines));
    for id in ids {
        let line = lines.iter().find(|l| raw_id(l) == *id).unwrap_or_else(|| {
            panic!("no error response with id {id} exactly: {:#?}", lossy(lines))
        });
        let v = parse(line);
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v.get("result").is_none(), "{v}");
        assert!(v["error"]["code"].is_i64(), "{v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(status), "the message should name {status:?}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_agent_leaves_no_request_unanswered() {
    let mut ed = Editor::start(options(&["sh", "-c", "read a; read b; read c; exit 7"]));
    ed.send_line(&req("1", "session/new", new_params())).await;
    ed.send_line(&notif("session/cancel", json!({"sessionId": "S"}))).await;
    ed.send_line(&req(r#""p\u0031""#, "session/prompt", prompt_params("S", "hello"))).await;
    let lines = ed.rest().await;
    error_responses(&lines, &["1", r#""p\u0031""#], "exit status 7");
    assert_eq!(ed.finish().await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_by_a_signal_ends_the_relay_with_128_plus_the_signal() {
    let mut ed = Editor::start(options(&["sh", "-c", "read a; kill -9 $$"]));
    ed.send_line(&req("-1", "session/prompt", prompt_params("S", "hello"))).await;
    let lines = ed.rest().await;
    error_responses(&lines, &["-1"], "signal 9");
    assert_eq!(ed.finish().await, 128 + 9);
}

/// Every editor request the agent never answered gets an error, whatever its method: an editor
/// waiting on `authenticate` or `session/set_mode` must not hang either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_agent_leaves_no_request_of_any_method_unanswered() {
    let mut ed = Editor::start(options(&["sh", "-c", "read a; read b; read c; exit 7"]));
    ed.send_line(&req("10", "authenticate", json!({"methodId": "x"}))).await;
    ed.send_line(&req("11", "session/set_mode", json!({"sessionId": "S", "modeId": "ask"}))).await;
    ed.send_line(&req(r#""ext""#, "_zed.dev/extension", json!({}))).await;
    let lines = ed.rest().await;
    error_responses(&lines, &["10", "11", r#""ext""#], "exit status 7");
    assert_eq!(ed.finish().await, 7);
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

/// Waits up to `within` for `pid` to go (a SIGKILL takes effect asynchronously).
async fn wait_gone(pid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    loop {
        if gone(pid) {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// On a failing test, kills what is left of the agent's processes listed in a pid file, so a
/// stray `sleep` does not outlive the test run (or hold the harness's pipes).
struct ReapOnFailure(std::path::PathBuf);

impl Drop for ReapOnFailure {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let pids = std::fs::read_to_string(&self.0).unwrap_or_default();
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            if !gone(pid) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn read_pids(path: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .split_whitespace()
        .map(|p| p.parse().expect("a pid"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_eof_closes_the_agents_stdin_and_returns_its_status_at_once() {
    let mut ed = Editor::start(options(&["sh", "-c", r#"cat; exit 5"#]));
    ed.send_line(r#"{"jsonrpc":"2.0","method":"_x/ping"}"#).await;
    assert_eq!(ed.expect_line().await, br#"{"jsonrpc":"2.0","method":"_x/ping"}"#);
    let t = Instant::now();
    ed.close().await;
    assert_eq!(ed.rest().await, Vec::<Vec<u8>>::new());
    assert_eq!(ed.finish().await, 5);
    // The grace period is 20 s: the relay did not wait for it.
    assert!(t.elapsed() < Duration::from_secs(10), "took {:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_ignoring_editor_eof_is_ended_with_its_group_after_the_grace() {
    let pidfile = scratch_dir().join("ignores-eof.pids");
    let _ = std::fs::remove_file(&pidfile);
    // The shell ignores SIGTERM (and so does its `sleep`, which inherits that), never reads
    // stdin, and keeps stdout open through the grandchild.
    let _reap = ReapOnFailure(pidfile.clone());
    // (The grandchild's stderr goes to /dev/null: only the agent's stdout pipe may be held.)
    let script = r#"trap "" TERM; sleep 1000 2>/dev/null & echo "$! $$" > "$0"; echo '{"ready":true}'; wait"#;
    let mut opts = options(&["sh", "-c", script, &pidfile.display().to_string()]);
    let grace = Duration::from_millis(300);
    opts.grace = grace;
    let mut ed = Editor::start(opts);
    assert_eq!(ed.expect_line().await, br#"{"ready":true}"#);
    let pids = read_pids(&pidfile);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| !gone(*p)), "the agent is running");
    let t = Instant::now();
    ed.close().await;
    let code = ed.finish().await;
    let took = t.elapsed();
    assert!(took >= grace, "ended after {took:?}, before the grace period");
    assert!(took < grace + Duration::from_secs(10), "took {took:?}");
    assert_eq!(code, 128 + 9, "SIGTERM is ignored, so SIGKILL ended it");
    for pid in pids {
        assert!(
            wait_gone(pid, Duration::from_secs(5)).await,
            "process {pid} of the agent's group survived"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_holding_stdout_does_not_keep_the_relay_alive() {
    let pidfile = scratch_dir().join("grandchild.pids");
    let _ = std::fs::remove_file(&pidfile);
    let _reap = ReapOnFailure(pidfile.clone());
    let script = r#"sleep 1000 2>/dev/null & echo "$!" > "$0"; exit 4"#;
    let mut ed = Editor::start(options(&["sh", "-c", script, &pidfile.display().to_string()]));
    // The editor stays open; the agent exited; its grandchild holds stdout.
    assert_eq!(ed.finish().await, 4);
    assert_eq!(ed.read_to_end().await, b"");
    for pid in read_pids(&pidfile) {
        assert!(
            wait_gone(pid, Duration::from_secs(5)).await,
            "grandchild {pid} survived the relay"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Emission order and rewrites.

/// Creates session `id` with the puppet and checks the update that follows the response.
async fn new_session(
    ed: &mut Editor,
    req_id: &str,
    session: &str,
    result_extra: serde_json::Value,
) {
    ed.send_line(&req(req_id, "session/new", new_params())).await;
    let mut result = json!({"sessionId": session});
    if let (Some(r), Some(extra)) = (result.as_object_mut(), result_extra.as_object()) {
        r.extend(extra.clone());
    }
    let response = resp(req_id, result);
    let got = ed.emit(&[&response]).await;
    assert_eq!(got.len(), 2, "{:#?}", lossy(&got));
    assert_eq!(
        got[0],
        response.as_bytes(),
        "the session/new response is forwarded unchanged, first"
    );
    let u = usage_update_of(&got[1], session);
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "session/new");
    assert_eq!(u64_at(&u, "/used"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_follow_session_responses_and_precede_prompt_results() {
    let mut ed = Editor::start(options(&puppet()));
    new_session(&mut ed, "1", "S", json!({})).await;

    // A turn: the chunk as it came, then our update, then the result with usage.
    ed.send_line(&req("2", "session/prompt", prompt_params("S", "Hello from mock."))).await;
    let chunk_line = chunk("S", "The answer is forty-two.");
    let got = ed.emit(&[chunk_line.clone(), end_turn("2")]).await;
    assert_eq!(got.len(), 3, "{:#?}", lossy(&got));
    assert_eq!(got[0], chunk_line.as_bytes());
    let u = usage_update_of(&got[1], "S");
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "turn");
    assert_eq!(u64_at(&u, "/size"), DEFAULT_WINDOW);
    assert_eq!(u["_meta"]["acpUsage"]["size"]["source"], "default");
    let r = parse(&got[2]);
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let usage = &r["result"]["usage"];
    let (p, o) = (
        estimate::count("Hello from mock.", Family::Other),
        estimate::count("The answer is forty-two.", Family::Other),
    );
    assert_eq!((u64_at(usage, "/inputTokens"), u64_at(usage, "/outputTokens")), (p, o));
    assert_eq!(u64_at(usage, "/totalTokens"), p + o);
    assert_eq!(usage["_meta"]["acpUsage"]["source"], "estimate");
    assert_eq!(u64_at(&u, "/used"), p + o);

    // A failed turn: our update first, then the error exactly as the agent sent it.
    ed.send_line(&req("3", "session/prompt", prompt_params("S", "again"))).await;
    let error = err_resp("3", -32603, "boom \u{e9}");
    let got = ed.emit(&[&error]).await;
    assert_eq!(got.len(), 2, "{:#?}", lossy(&got));
    assert_eq!(usage_update_of(&got[0], "S")["_meta"]["acpUsage"]["trigger"], "turn");
    assert_eq!(got[1], error.as_bytes());

    // An error response to session/new creates nothing and is forwarded unchanged.
    ed.send_line(&req("4", "session/new", new_params())).await;
    let error = err_resp("4", -32000, "auth required");
    assert_eq!(ed.emit(&[&error]).await, vec![error.into_bytes()]);
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_history_of_session_load_is_not_usage() {
    let mut ed = Editor::start(options(&puppet()));
    ed.send_line(&req(
        "1",
        "session/load",
        json!({"sessionId": "L", "cwd": "/tmp", "mcpServers": []}),
    ))
    .await;
    let old_answer = "An old answer. ".repeat(300);
    let replay = [
        update(
            "L",
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "An old question?"}}),
        ),
        chunk("L", &old_answer),
        thought("L", &old_answer),
        resp("1", json!({})),
    ];
    let got = ed.emit(&replay).await;
    assert_eq!(got.len(), 5, "{:#?}", lossy(&got));
    for (g, want) in got.iter().zip(&replay) {
        assert_eq!(g, want.as_bytes(), "replayed lines are forwarded unchanged");
    }
    let u = usage_update_of(&got[4], "L");
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "session/load");
    assert!(u64_at(&u, "/used") > 0, "the replayed history fills the context: {u}");
    assert_eq!(u64_at(&u, "/_meta/usage/totalTokens"), 0, "history is not usage: {u}");

    ed.send_line(&req("2", "session/prompt", prompt_params("L", "next"))).await;
    let got = ed.emit(&[chunk("L", "short reply"), end_turn("2")]).await;
    assert_eq!(got.len(), 3, "{:#?}", lossy(&got));
    let r = parse(&got[2]);
    let reply = estimate::count("short reply", Family::Other);
    assert_eq!(u64_at(&r, "/result/usage/outputTokens"), reply, "{r}");
    let u = usage_update_of(&got[1], "L");
    assert_eq!(u64_at(&u, "/_meta/usage/outputTokens"), reply, "{u}");
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_usage_update_is_rewritten_in_place() {
    let mut ed = Editor::start(options(&puppet()));
    new_session(&mut ed, "1", "S", json!({})).await;
    new_session(&mut ed, "2", "Z", json!({})).await;
    ed.send_line(&req("3", "session/prompt", prompt_params("S", "hi"))).await;
    let own = update(
        "S",
        json!({"sessionUpdate": "usage_update", "used": 1234, "size": 100000,
               "cost": {"amount": 0.5, "currency": "USD"},
               "_meta": {"vendor": {"k": "v"}, "n": 1}}),
    );
    let got = ed.emit(&[&own]).await;
    assert_eq!(got.len(), 1, "rewritten in place, nothing added: {:#?}", lossy(&got));
    let u = usage_update_of(&got[0], "S");
    assert_eq!((u64_at(&u, "/used"), u64_at(&u, "/size")), (1234, 100_000));
    assert_eq!(u["cost"], json!({"amount": 0.5, "currency": "USD"}));
    assert_eq!(u["_meta"]["vendor"], json!({"k": "v"}), "the agent's _meta is kept");
    assert_eq!(u["_meta"]["n"], 1);
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "agent");
    assert_eq!(
        u["_meta"]["acpUsage"]["agent"],
        json!({"used": 1234, "size": 100000, "cost": {"amount": 0.5, "currency": "USD"}})
    );

    // An agent's size 0 is not forwarded as ours.
    let zero = agent_usage("Z", 10, Some(0), None);
    let got = ed.emit(&[&zero]).await;
    assert_eq!(got.len(), 1);
    let u = usage_update_of(&got[0], "Z");
    assert_eq!(u64_at(&u, "/size"), DEFAULT_WINDOW);
    assert_eq!(u["_meta"]["acpUsage"]["agent"]["size"], 0);
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

/// The agent's other fields survive a rewrite verbatim, numbers included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_lines_keep_the_agents_other_fields_verbatim() {
    let mut ed = Editor::start(options(&puppet()));
    new_session(&mut ed, "1", "S", json!({})).await;
    ed.send_line(&req("2", "session/prompt", prompt_params("S", "hi"))).await;
    let own = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"usage_update","used":10,"size":1000,"_meta":{"big":18446744073709551616,"id":12345678901234567890123}}}}"#;
    let result = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","_meta":{"big":18446744073709551616}}}"#;
    let got = ed.emit(&[own, result]).await;
    assert_eq!(got.len(), 3, "{:#?}", lossy(&got));
    let text = String::from_utf8_lossy(&got[0]);
    assert!(text.contains(r#""big":18446744073709551616"#), "{text}");
    assert!(text.contains(r#""id":12345678901234567890123"#), "{text}");
    let text = String::from_utf8_lossy(&got[2]);
    assert!(text.contains(r#""usage":"#), "{text}");
    assert!(text.contains(r#""big":18446744073709551616"#), "{text}");
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_agent_usage_forwards_the_agents_figures_byte_for_byte() {
    let mut opts = options(&puppet());
    opts.settings.keep_agent_usage = true;
    let mut ed = Editor::start(opts);
    new_session(&mut ed, "1", "K", json!({})).await;
    ed.send_line(&req("2", "session/prompt", prompt_params("K", "hi"))).await;
    let own = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"K","update":{ "sessionUpdate":"usage_update", "used": 4321,"size":128000,"cost":{"amount":0.50,"currency":"USD"}}}}"#;
    let result = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}}"#;
    let got = ed.emit(&[own, result]).await;
    assert_eq!(got.len(), 3, "{:#?}", lossy(&got));
    assert_eq!(got[0], own.as_bytes());
    // What is missing is still added: an update before the result.
    let u = usage_update_of(&got[1], "K");
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "turn");
    assert_eq!((u64_at(&u, "/used"), u64_at(&u, "/size")), (4321, 128_000));
    assert_eq!(got[2], result.as_bytes());
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_changes_emit_an_update_and_other_config_changes_none() {
    let options_with = |model: &str, mode: &str| {
        json!({"configOptions": [
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": model, "options": []},
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": mode, "options": []},
        ]})
    };
    let mut ed = Editor::start(options(&puppet()));
    new_session(&mut ed, "1", "S", options_with("m1", "ask")).await;

    ed.send_line(&req(
        "2",
        "session/set_config_option",
        json!({"sessionId": "S", "configId": "model", "value": "m2"}),
    ))
    .await;
    let response = resp("2", options_with("m2", "ask"));
    let got = ed.emit(&[&response]).await;
    assert_eq!(got.len(), 2, "{:#?}", lossy(&got));
    assert_eq!(got[0], response.as_bytes());
    let u = usage_update_of(&got[1], "S");
    assert_eq!(u["_meta"]["acpUsage"]["trigger"], "model_change");
    assert_eq!(u["_meta"]["acpUsage"]["model"], "m2");

    ed.send_line(&req(
        "3",
        "session/set_config_option",
        json!({"sessionId": "S", "configId": "mode", "value": "code"}),
    ))
    .await;
    let response = resp("3", options_with("m2", "code"));
    assert_eq!(
        ed.emit(&[&response]).await,
        vec![response.into_bytes()],
        "the model did not change"
    );

    // The agent changing the model on its own.
    let mut change = options_with("m3", "code");
    change["sessionUpdate"] = json!("config_option_update");
    let notice = update("S", change);
    let got = ed.emit(&[&notice]).await;
    assert_eq!(got.len(), 2, "{:#?}", lossy(&got));
    assert_eq!(got[0], notice.as_bytes());
    assert_eq!(usage_update_of(&got[1], "S")["_meta"]["acpUsage"]["model"], "m3");

    // Legacy session/set_model.
    ed.send_line(&req("4", "session/set_model", json!({"sessionId": "S", "modelId": "m4"}))).await;
    let response = resp("4", json!({}));
    let got = ed.emit(&[&response]).await;
    assert_eq!(got.len(), 2, "{:#?}", lossy(&got));
    assert_eq!(got[0], response.as_bytes());
    assert_eq!(usage_update_of(&got[1], "S")["_meta"]["acpUsage"]["model"], "m4");
    ed.close().await;
    assert_eq!(ed.finish().await, 0);
}

// ---------------------------------------------------------------------------------------------
// The command line.

async fn run_cli(args: &[&str]) -> std::process::Output {
    let home = scratch_dir().join("cli-config");
    std::fs::create_dir_all(&home).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(args)
        .env_remove("ACP_USAGE_CONFIG")
        .env_remove("ACP_USAGE_LOG")
        .env("XDG_CONFIG_HOME", &home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting acp-usage");
    tokio::time::timeout(READ_TIMEOUT, child.wait_with_output())
        .await
        .expect("acp-usage did not end in time")
        .expect("running acp-usage")
}

#[tokio::test]
async fn cli_without_an_agent_exits_2_with_usage() {
    let out = run_cli(&[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.to_lowercase().contains("usage"), "{stderr}");
    assert!(stderr.contains("--"), "the usage shows where the agent goes: {stderr}");
    assert!(out.stdout.is_empty(), "stdout is the protocol channel");
}

#[tokio::test]
async fn cli_with_an_agent_that_cannot_start_says_so() {
    let out = run_cli(&["--", "/nonexistent/acp-usage-test-agent", "--acp"]).await;
    assert!(!out.status.success());
    assert!(out.status.code().is_some(), "exited, not killed: {:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/acp-usage-test-agent"), "names the agent: {stderr}");
    assert!(stderr.contains("cannot start"), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout is the protocol channel");
}

#[tokio::test]
async fn cli_exits_with_the_agents_code() {
    let out = run_cli(&["--", "sh", "-c", "exit 3"]).await;
    assert_eq!(out.status.code(), Some(3), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
}
