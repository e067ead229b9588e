//! Shared helpers for the relay and observer tests: settings, JSON-RPC line builders, a puppet
//! agent, and an in-process editor that drives `acp_usage::relay::relay` over in-memory pipes.
//!
//! The puppet agent writes to its stdout exactly the lines the test tells it to, when it is told:
//! the editor sends `{"method":"_test/emit","params":{"lines":[...]}}` (an extension notification
//! that the relay forwards untouched) and the puppet writes each string as one line. Every
//! [`Editor::emit`] ends its batch with a unique marker notification and reads up to it, so
//! "what the editor got for these agent lines" is exact without any sleeping: the marker is the
//! barrier.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use acp_usage::agents::Profile;
use acp_usage::relay::Options;
use acp_usage::relay::observer::Settings;
use acp_usage_core::Catalog;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

/// Helpers for the torture suite (the built binary as a child process, synthetic agents).
pub mod torture;

/// How long any single read may take before the test fails instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The default window the tests configure.
pub const DEFAULT_WINDOW: u64 = 200_000;

/// Observer settings: empty catalog, 200k default window, profile from `command`.
pub fn settings(command: &[&str]) -> Settings {
    let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    Settings {
        forced_profile: None,
        launched_as: Profile::detect_before_start(&command),
        command,
        keep_agent_usage: false,
        catalog: Catalog::default(),
        default_window: DEFAULT_WINDOW,
        learned: Default::default(),
        ledger: None,
        budgets: Default::default(),
        // acp-usage's own `/usage` command adds lines after every session's opening; the tests
        // of it turn it on.
        usage_command: None,
        // Transcripts are followed by the relay's worker; in-process tests feed none.
        transcripts: false,
        tap: false,
        tap_wanted: false,
    }
}

/// Observer settings with a forced profile.
pub fn settings_for(profile: Profile) -> Settings {
    Settings { forced_profile: Some(profile), ..settings(&["agent"]) }
}

/// Relay options for `argv` with a long grace period and a 256 MiB line limit.
pub fn options<S: AsRef<str>>(argv: &[S]) -> Options {
    let argv: Vec<String> = argv.iter().map(|s| s.as_ref().to_string()).collect();
    let command: Vec<&str> = argv.iter().map(String::as_str).collect();
    Options {
        settings: settings(&command),
        argv,
        grace: Duration::from_secs(20),
        max_line: 256 * 1024 * 1024,
        otlp: None,
        transcripts: None,
        transcript_wait: Duration::from_millis(500),
        ledger_to_open: None,
        tap_asked: false,
    }
}

/// A scratch directory for this test process, shared by every test of the binary: what a test
/// puts there is named after the test (two tests writing one name would race).
pub fn scratch_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("acp-usage-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    dir
}

const PUPPET: &str = r#"
import json, os, sys
out = sys.stdout.buffer
inp = sys.stdin.buffer
while True:
    raw = inp.readline()
    if not raw:
        break
    try:
        msg = json.loads(raw)
    except Exception:
        continue
    if not isinstance(msg, dict):
        continue
    method = msg.get("method")
    params = msg.get("params") or {}
    if method == "_test/emit":
        for line in params.get("lines", []):
            out.write(line.encode("utf-8") + b"\n")
        out.flush()
    elif method == "_test/exit":
        out.flush()
        os._exit(int(params.get("code", 0)))
    elif method == "_test/signal":
        out.flush()
        os.kill(os.getpid(), int(params["signal"]))
sys.exit(0)
"#;

/// The puppet agent's command line.
pub fn puppet() -> Vec<String> {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    let path = PATH.get_or_init(|| {
        let path = scratch_dir().join("puppet_agent.py");
        std::fs::write(&path, PUPPET).expect("writing the puppet agent");
        path
    });
    vec!["python3".into(), "-u".into(), path.display().to_string()]
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC lines. Ids are given as raw wire text so a test controls their exact spelling.

/// A request line.
pub fn req(id: &str, method: &str, params: Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// A notification line.
pub fn notif(method: &str, params: Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params}}}"#)
}

/// A success response line.
pub fn resp(id: &str, result: Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// An error response line.
pub fn err_resp(id: &str, code: i64, message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
        json!(message)
    )
}

/// `session/new` params.
pub fn new_params() -> Value {
    json!({"cwd": "/tmp", "mcpServers": []})
}

/// `session/prompt` params with one text block.
pub fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// A prompt result with `stopReason` only.
pub fn end_turn(id: &str) -> String {
    resp(id, json!({"stopReason": "end_turn"}))
}

/// A `session/update` notification.
pub fn update(session: &str, update: Value) -> String {
    notif("session/update", json!({"sessionId": session, "update": update}))
}

/// An `agent_message_chunk`.
pub fn chunk(session: &str, text: &str) -> String {
    update(
        session,
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
    )
}

/// An `agent_thought_chunk`.
pub fn thought(session: &str, text: &str) -> String {
    update(
        session,
        json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}),
    )
}

/// The agent's own `usage_update`.
pub fn agent_usage(session: &str, used: u64, size: Option<u64>, cost: Option<f64>) -> String {
    let mut u = json!({"sessionUpdate": "usage_update", "used": used});
    if let Some(size) = size {
        u["size"] = size.into();
    }
    if let Some(amount) = cost {
        u["cost"] = json!({"amount": amount, "currency": "USD"});
    }
    update(session, u)
}

/// Parses a line as JSON, with the line in the panic message.
pub fn parse(line: &[u8]) -> Value {
    serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(line)))
}

/// Whether a parsed message is a `usage_update` notification.
pub fn is_usage_update(v: &Value) -> bool {
    v["method"] == "session/update"
        && v.pointer("/params/update/sessionUpdate") == Some(&json!("usage_update"))
}

/// Checks that `line` is a `usage_update` for `session` with a usable size, and returns its
/// `update` object.
pub fn usage_update_of(line: &[u8], session: &str) -> Value {
    let v = parse(line);
    assert!(is_usage_update(&v), "expected a usage_update, got {v}");
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v.pointer("/params/sessionId"), Some(&json!(session)), "wrong session in {v}");
    let u = v.pointer("/params/update").cloned().expect("update");
    let size = u["size"].as_u64().unwrap_or_else(|| panic!("size is not a u64 in {v}"));
    assert!(size > 0, "size 0 sent: {v}");
    assert!(u["used"].as_u64().is_some(), "used is not a u64 in {v}");
    u
}

/// Reads a JSON pointer as a u64, with the value in the panic message.
pub fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no u64 at {pointer} in {v}"))
}

/// The raw wire text of a message's `id`.
pub fn raw_id(line: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
    }
    let id: Id<'_> = serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("no id ({e}): {}", String::from_utf8_lossy(line)));
    id.id.get().to_string()
}

/// Whether two raw ids denote the same JSON-RPC id: strings compare by value (escapes may be
/// spelled differently), numbers and `null` by their exact text (no precision may be lost).
pub fn same_id(sent: &str, got: &str) -> bool {
    match (serde_json::from_str::<Value>(sent), serde_json::from_str::<Value>(got)) {
        (Ok(Value::String(a)), Ok(Value::String(b))) => a == b,
        _ => sent == got,
    }
}

/// Asserts a line's id is the one sent.
#[track_caller]
pub fn assert_id(line: &[u8], sent: &str) {
    let got = raw_id(line);
    assert!(same_id(sent, &got), "id {sent} came back as {got}: {}", String::from_utf8_lossy(line));
}

/// Panics with the first difference of two byte strings, escaped and in context.
#[track_caller]
pub fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    let ctx = |b: &[u8]| {
        let lo = at.saturating_sub(60);
        let hi = (at + 60).min(b.len());
        b[lo..hi].escape_ascii().to_string()
    };
    panic!(
        "{what}: bytes differ at offset {at} (got {} bytes, want {}):\n got: …{}…\nwant: …{}…",
        got.len(),
        want.len(),
        ctx(got),
        ctx(want)
    );
}

// ---------------------------------------------------------------------------------------------
// The in-process editor.

/// The editor's two pipe ends and the relay task.
pub fn start_raw(opts: Options) -> (DuplexStream, DuplexStream, JoinHandle<anyhow::Result<u8>>) {
    let (editor_tx, relay_in) = tokio::io::duplex(1 << 20);
    let (relay_out, editor_rx) = tokio::io::duplex(1 << 20);
    let relay = tokio::spawn(acp_usage::relay::relay(relay_in, relay_out, opts));
    (editor_tx, editor_rx, relay)
}

/// Awaits the relay's exit code.
pub async fn relay_code(relay: JoinHandle<anyhow::Result<u8>>, within: Duration) -> u8 {
    tokio::time::timeout(within, relay)
        .await
        .expect("the relay did not end in time")
        .expect("the relay task panicked")
        .expect("the relay failed")
}

/// An editor talking to an in-process relay.
#[derive(Debug)]
pub struct Editor {
    tx: Option<DuplexStream>,
    rx: BufReader<DuplexStream>,
    relay: Option<JoinHandle<anyhow::Result<u8>>>,
    markers: u64,
}

impl Editor {
    /// Starts the relay with `opts`.
    pub fn start(opts: Options) -> Editor {
        let (tx, rx, relay) = start_raw(opts);
        Editor { tx: Some(tx), rx: BufReader::new(rx), relay: Some(relay), markers: 0 }
    }

    /// Writes raw bytes.
    pub async fn send(&mut self, bytes: &[u8]) {
        let tx = self.tx.as_mut().expect("the editor's side is closed");
        tx.write_all(bytes).await.expect("writing to the relay");
        tx.flush().await.expect("flushing to the relay");
    }

    /// Writes one line (adds the newline).
    pub async fn send_line(&mut self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.send(&bytes).await;
    }

    /// The next line without its `\n`; `None` at end of stream.
    pub async fn line(&mut self) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        let n = tokio::time::timeout(READ_TIMEOUT, self.rx.read_until(b'\n', &mut buf))
            .await
            .expect("no line from the relay in time")
            .expect("reading from the relay");
        if n == 0 {
            return None;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Some(buf)
    }

    /// The next line; panics at end of stream.
    pub async fn expect_line(&mut self) -> Vec<u8> {
        self.line().await.expect("the relay closed the editor's stdin")
    }

    /// Everything until the relay closes the editor's side, split into lines.
    pub async fn rest(&mut self) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        while let Some(line) = self.line().await {
            lines.push(line);
        }
        lines
    }

    /// Tells the puppet agent to write `lines`, then reads what the editor gets for them, up to
    /// (not including) the marker that ends the batch.
    pub async fn emit<S: AsRef<str>>(&mut self, lines: &[S]) -> Vec<Vec<u8>> {
        self.markers += 1;
        let marker = notif("_test/marker", json!({"n": self.markers}));
        let mut all: Vec<&str> = lines.iter().map(AsRef::as_ref).collect();
        all.push(&marker);
        self.send_line(&notif("_test/emit", json!({"lines": all}))).await;
        let mut got = Vec::new();
        loop {
            let line = self.line().await.unwrap_or_else(|| {
                panic!("the relay closed before the marker; got so far: {:?}", lossy(&got))
            });
            if line == marker.as_bytes() {
                return got;
            }
            got.push(line);
        }
    }

    /// Tells the puppet agent to exit with `code`.
    pub async fn puppet_exit(&mut self, code: i32) {
        self.send_line(&notif("_test/exit", json!({"code": code}))).await;
    }

    /// Closes the editor's side (the relay reads end of stream).
    pub async fn close(&mut self) {
        if let Some(mut tx) = self.tx.take() {
            tx.shutdown().await.expect("closing the editor's side");
        }
    }

    /// Waits for the relay to end and returns its exit code.
    pub async fn finish(&mut self) -> u8 {
        relay_code(self.relay.take().expect("finished twice"), READ_TIMEOUT).await
    }

    /// Reads raw bytes until the relay closes the editor's side.
    pub async fn read_to_end(&mut self) -> Vec<u8> {
        let mut buf = Vec::new();
        tokio::time::timeout(READ_TIMEOUT, self.rx.read_to_end(&mut buf))
            .await
            .expect("the relay did not close the editor's side in time")
            .expect("reading from the relay");
        buf
    }
}

/// Lines as text, for messages.
pub fn lossy(lines: &[Vec<u8>]) -> Vec<String> {
    lines.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect()
}

/// Runs the built binary with `args` (no user config, no state file, warn-level logs), feeding
/// `input` from a thread (the binary's output must be read while it is written) and closing stdin.
pub fn run_binary(args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(args)
        .env("ACP_USAGE_CONFIG", "/dev/null")
        .env("ACP_USAGE_STATE_DIR", "off")
        .env("ACP_USAGE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting acp-usage");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("waiting for acp-usage");
    writer.join().unwrap();
    out
}
