//! `--record FILE`: a JSONL recording of every line that crosses the relay, written off its path.
//!
//! # Format
//!
//! One JSON object per line, in the order the relay forwarded the lines:
//!
//! ```text
//! {"seq":1,"t":0.000412,"dir":"editor_to_agent","line":"{\"jsonrpc\":\"2.0\",\"id\":0,...}"}
//! {"seq":7,"t":0.031337,"dir":"injected","line":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",...}"}
//! {"seq":8,"t":0.031340,"dir":"agent_to_editor","rewritten":true,"line":"{...}"}
//! ```
//!
//! - `seq`: 1, 2, 3, … over every line the relay forwarded or injected. A gap means records were
//!   dropped because the writer fell behind (the relay logs how many at exit).
//! - `t`: seconds since the relay started (monotonic clock, microsecond resolution).
//! - `dir`: `editor_to_agent`, `agent_to_editor`, or `injected` (a line acp-usage wrote to the
//!   editor on its own, e.g. a `usage_update`; for validation it counts as agent to client).
//! - `line`: the line as it was sent on, without its `\n` terminator (a `\r` before it stays).
//!   A line that is not valid UTF-8 is stored as `line_b64` (standard base64) instead.
//! - `rewritten: true` (only when true): an agent line acp-usage changed; `line` is what the
//!   editor received, not what the agent sent.
//! - `redacted: true` (only when true): secrets were taken out of `line` (see below); such a line
//!   may have been re-serialised, so it is no longer byte-exact.
//!
//! # Secrets
//!
//! Recordings get shared, keys must not be in them. In the recording only (never on the wire),
//! and in the writer thread (never on the relay's path):
//! - every string inside the `params` of an `authenticate` request becomes `"[redacted]"`, except
//!   `methodId` (one of the agent's own advertised auth method ids, needed to validate the request);
//!   strings are replaced rather than `params` as a whole so that the recording still validates;
//! - strings under keys named like a secret (`apiKey`, `api_key`, `*_TOKEN`, `authorization`,
//!   `password`, `secret`, `credentials`, `cookie`, …), and the `value` of a `{"name": …,
//!   "value": …}` pair whose name is such a key (MCP server `env` and `headers`), become
//!   `"[redacted]"`;
//! - anything in the line that looks like an API key (`sk-…`, `AIza…`, `ghp_…`, `github_pat_…`,
//!   `xox?-…`, `glpat-…`, `AKIA…`, a long `Bearer …` token) is replaced by `[redacted]` where it
//!   stands, in JSON and non-JSON lines alike.
//!
//! # Not slowing the relay
//!
//! The relay only copies the line and `try_send`s it to a bounded channel ([`DEPTH`] records);
//! a thread formats, redacts and writes through a buffer, flushing whenever the channel runs
//! empty and at the end. A full channel drops the record (counted, logged at exit). A write
//! error is logged once and ends the recording; the session goes on.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use base64::Engine;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

/// Depth of the channel between the relay and the writer, in records.
pub const DEPTH: usize = 4096;
/// Size of the writer's buffer.
const WRITE_BUFFER: usize = 256 * 1024;
/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the editor (the ACP client) to the agent.
    EditorToAgent,
    /// From the agent to the editor (possibly rewritten by acp-usage).
    AgentToEditor,
    /// Written to the editor by acp-usage itself.
    Injected,
}

impl Dir {
    /// The name used in recordings.
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::EditorToAgent => "editor_to_agent",
            Dir::AgentToEditor => "agent_to_editor",
            Dir::Injected => "injected",
        }
    }

    /// Parses a recording's `dir`.
    pub fn parse(s: &str) -> Option<Dir> {
        match s {
            "editor_to_agent" => Some(Dir::EditorToAgent),
            "agent_to_editor" => Some(Dir::AgentToEditor),
            "injected" => Some(Dir::Injected),
            _ => None,
        }
    }
}

/// One line copied off the relay's path, shared by the recorder and the live validator.
#[derive(Debug, Clone)]
pub struct CopiedLine {
    /// 1-based position among all lines the relay passed on.
    pub seq: u64,
    /// Seconds since the relay started.
    pub t: f64,
    /// Which way it went.
    pub dir: Dir,
    /// An agent line that acp-usage changed (`bytes` is the changed line).
    pub rewritten: bool,
    /// The line without its terminator.
    pub bytes: Arc<[u8]>,
}

/// The relay's end of a recording.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    tx: Option<mpsc::Sender<CopiedLine>>,
    dropped: u64,
    failed: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<u64>>,
}

impl Recorder {
    /// Creates (or truncates) `path` and starts the writer thread.
    pub fn create(path: &Path) -> anyhow::Result<Recorder> {
        let file = File::create(path)
            .with_context(|| format!("cannot create the recording {}", path.display()))?;
        Recorder::with_file(file, path)
    }

    /// Starts the writer thread on an open file (`path` names it in messages).
    fn with_file(file: File, path: &Path) -> anyhow::Result<Recorder> {
        let (tx, rx) = mpsc::channel(DEPTH);
        let failed = Arc::new(AtomicBool::new(false));
        let (p, f) = (path.to_path_buf(), failed.clone());
        let writer = std::thread::Builder::new()
            .name("acp-usage-record".into())
            .spawn(move || write_loop(file, &p, rx, &f))
            .context("starting the recording thread")?;
        Ok(Recorder {
            path: path.to_path_buf(),
            tx: Some(tx),
            dropped: 0,
            failed,
            writer: Some(writer),
        })
    }

    /// Hands a line to the writer without waiting; drops it (counted) when the writer is behind.
    pub fn offer(&mut self, line: &CopiedLine) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(line.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.dropped += 1,
            // The writer gave up (it logged why); stop copying.
            Err(TrySendError::Closed(_)) => self.tx = None,
        }
    }

    /// Records dropped so far because the channel was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Lets the writer finish what is queued, waits for it, and logs what happened.
    pub async fn finish(mut self) {
        self.tx = None;
        let written = match self.writer.take() {
            Some(w) => {
                tokio::task::spawn_blocking(move || w.join().unwrap_or(0)).await.unwrap_or(0)
            }
            None => 0,
        };
        if self.dropped > 0 {
            tracing::warn!(
                dropped = self.dropped,
                written,
                "recording {}: {} records dropped because the writer fell behind (gaps in seq)",
                self.path.display(),
                self.dropped
            );
        } else if !self.failed.load(Ordering::Relaxed) {
            tracing::info!(written, "recorded {} lines to {}", written, self.path.display());
        }
    }
}

/// The writer thread: format, redact, write; returns how many records were written.
fn write_loop(
    file: File,
    path: &Path,
    mut rx: mpsc::Receiver<CopiedLine>,
    failed: &AtomicBool,
) -> u64 {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER, file);
    let mut buf = Vec::with_capacity(1024);
    let mut written = 0u64;
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(TryRecvError::Empty) => {
                // Idle: make what we have visible (a user may `tail -f` the recording).
                if let Err(err) = out.flush() {
                    return give_up(path, &err, failed, written);
                }
                match rx.blocking_recv() {
                    Some(item) => item,
                    None => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        buf.clear();
        encode(&item, &mut buf);
        if let Err(err) = out.write_all(&buf) {
            return give_up(path, &err, failed, written);
        }
        written += 1;
    }
    if let Err(err) = out.flush() {
        return give_up(path, &err, failed, written);
    }
    written
}

fn give_up(path: &Path, err: &std::io::Error, failed: &AtomicBool, written: u64) -> u64 {
    failed.store(true, Ordering::Relaxed);
    tracing::warn!(
        written,
        "cannot write the recording {} ({err}); recording stopped",
        path.display()
    );
    // Returning drops the receiver: the relay sees the channel closed and stops copying.
    written
}

/// Formats one record (with its `\n`) into `out`.
pub fn encode(item: &CopiedLine, out: &mut Vec<u8>) {
    let redacted = redact(&item.bytes);
    let bytes: &[u8] = redacted.as_deref().unwrap_or(&item.bytes);
    // `write!` to a Vec cannot fail.
    let _ = write!(out, r#"{{"seq":{},"t":{:.6},"dir":"{}""#, item.seq, item.t, item.dir.as_str());
    if item.rewritten {
        out.extend_from_slice(br#","rewritten":true"#);
    }
    if redacted.is_some() {
        out.extend_from_slice(br#","redacted":true"#);
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            out.extend_from_slice(br#","line":"#);
            // Serialising a &str into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, text);
        }
        Err(_) => {
            out.extend_from_slice(br#","line_b64":""#);
            out.extend_from_slice(
                base64::engine::general_purpose::STANDARD.encode(bytes).as_bytes(),
            );
            out.push(b'"');
        }
    }
    out.extend_from_slice(b"}\n");
}

/// One record read back from a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `seq` (absent in hand-written files).
    pub seq: Option<u64>,
    /// `t`.
    pub t: Option<f64>,
    /// `dir`.
    pub dir: Dir,
    /// The line's bytes (from `line` or `line_b64`).
    pub line: Vec<u8>,
    /// `rewritten`.
    pub rewritten: bool,
    /// `redacted`.
    pub redacted: bool,
}

#[derive(serde::Deserialize)]
struct RawEntry {
    seq: Option<u64>,
    t: Option<f64>,
    dir: String,
    line: Option<String>,
    line_b64: Option<String>,
    #[serde(default)]
    rewritten: bool,
    #[serde(default)]
    redacted: bool,
}

impl Entry {
    /// Parses one line of a recording.
    pub fn parse(record: &[u8]) -> Result<Entry, String> {
        let raw: RawEntry = serde_json::from_slice(record).map_err(|e| e.to_string())?;
        let dir = Dir::parse(&raw.dir).ok_or_else(|| format!("unknown dir {:?}", raw.dir))?;
        let line = match (raw.line, raw.line_b64) {
            (Some(line), None) => line.into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| format!("line_b64: {e}"))?,
            _ => return Err("needs exactly one of `line` and `line_b64`".into()),
        };
        Ok(Entry {
            seq: raw.seq,
            t: raw.t,
            dir,
            line,
            rewritten: raw.rewritten,
            redacted: raw.redacted,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Redaction.

/// The line with its secrets replaced, or `None` when nothing looked secret.
pub fn redact(line: &[u8]) -> Option<Vec<u8>> {
    let scanned = redact_key_patterns(line);
    let current: &[u8] = scanned.as_deref().unwrap_or(line);
    // Parsing is the expensive part: only lines that mention a secret-like key or
    // `authenticate` need it.
    if might_name_a_secret(current)
        && let Ok(mut value) = serde_json::from_slice::<Value>(current)
        && redact_json(&mut value)
        && let Ok(bytes) = serde_json::to_vec(&value)
    {
        return Some(bytes);
    }
    scanned
}

/// Structural redaction of one parsed message; whether anything changed.
fn redact_json(msg: &mut Value) -> bool {
    let mut changed = false;
    if let Value::Object(map) = msg
        && map.get("method").and_then(Value::as_str) == Some("authenticate")
        && let Some(params) = map.get_mut("params")
    {
        changed |= match params {
            Value::Object(p) => {
                let mut c = false;
                for (k, v) in p.iter_mut() {
                    if k != "methodId" {
                        c |= redact_strings(v);
                    }
                }
                c
            }
            other => redact_strings(other),
        };
    }
    changed | redact_named(msg)
}

/// Replaces every string inside `v` by [`REDACTED`].
fn redact_strings(v: &mut Value) -> bool {
    match v {
        Value::String(s) if s != REDACTED => {
            *s = REDACTED.to_owned();
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| redact_strings(i) | c),
        Value::Object(map) => map.values_mut().fold(false, |c, i| redact_strings(i) | c),
        _ => false,
    }
}

/// Redacts strings under secret-like keys, and `value` of `{name: SECRET_NAME, value}` pairs.
fn redact_named(v: &mut Value) -> bool {
    match v {
        Value::Object(map) => {
            let named_secret = map.get("name").and_then(Value::as_str).is_some_and(is_secret_name);
            let mut changed = false;
            for (k, val) in map.iter_mut() {
                changed |= if is_secret_name(k) || (named_secret && k == "value") {
                    redact_strings(val)
                } else {
                    redact_named(val)
                };
            }
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| redact_named(i) | c),
        _ => false,
    }
}

/// Whether a key (or an environment variable or header name) names a secret. Only its string
/// values are redacted, so `inputTokens: 12` and the like are safe either way.
pub fn is_secret_name(name: &str) -> bool {
    let norm: String =
        name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    const CONTAINS: [&str; 8] = [
        "apikey",
        "secret",
        "password",
        "passwd",
        "privatekey",
        "accesskey",
        "credential",
        "cookie",
    ];
    const ENDS: [&str; 3] = ["token", "authorization", "auth"];
    CONTAINS.iter().any(|c| norm.contains(c)) || ENDS.iter().any(|e| norm.ends_with(e))
}

/// Whether the raw line mentions anything [`redact_json`] acts on (case-insensitive). May say
/// yes too often, never too rarely for keys spelled without escapes.
fn might_name_a_secret(line: &[u8]) -> bool {
    const HINTS: [&[u8]; 9] = [
        b"authenticate",
        b"key",
        b"token",
        b"secret",
        b"passw",
        b"credential",
        b"auth",
        b"cookie",
        b"bearer",
    ];
    line.iter().enumerate().any(|(i, &b)| {
        let b = b.to_ascii_lowercase();
        matches!(b, b'a' | b'k' | b't' | b's' | b'p' | b'c' | b'b')
            && HINTS.iter().any(|h| {
                h[0] == b
                    && line.len() >= i + h.len()
                    && line[i..i + h.len()].eq_ignore_ascii_case(h)
            })
    })
}

/// A key format: a fixed prefix, then a run of characters of one class.
struct KeyPattern {
    prefix: &'static [u8],
    /// Shortest run after the prefix that counts as a key.
    min: usize,
    /// The run must be exactly this long (and not followed by another key character).
    exact: bool,
    class: fn(u8) -> bool,
}

fn key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}
fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn slack_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}
fn bearer_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// Known key formats. A "Bearer " match redacts only the token after it.
const PATTERNS: &[KeyPattern] = &[
    // OpenAI (`sk-…`, `sk-proj-…`) and Anthropic (`sk-ant-api03-…`).
    KeyPattern { prefix: b"sk-", min: 16, exact: false, class: key_char },
    // Google API keys: `AIza` and 35 more.
    KeyPattern { prefix: b"AIza", min: 35, exact: true, class: key_char },
    // GitHub tokens.
    KeyPattern { prefix: b"ghp_", min: 20, exact: false, class: alnum },
    KeyPattern { prefix: b"gho_", min: 20, exact: false, class: alnum },
    KeyPattern { prefix: b"ghu_", min: 20, exact: false, class: alnum },
    KeyPattern { prefix: b"ghs_", min: 20, exact: false, class: alnum },
    KeyPattern { prefix: b"ghr_", min: 20, exact: false, class: alnum },
    KeyPattern { prefix: b"github_pat_", min: 20, exact: false, class: alnum_underscore },
    // Slack.
    KeyPattern { prefix: b"xoxb-", min: 10, exact: false, class: slack_char },
    KeyPattern { prefix: b"xoxp-", min: 10, exact: false, class: slack_char },
    KeyPattern { prefix: b"xoxa-", min: 10, exact: false, class: slack_char },
    KeyPattern { prefix: b"xoxr-", min: 10, exact: false, class: slack_char },
    KeyPattern { prefix: b"xoxs-", min: 10, exact: false, class: slack_char },
    // GitLab, Hugging Face, AWS access key ids.
    KeyPattern { prefix: b"glpat-", min: 20, exact: false, class: key_char },
    KeyPattern { prefix: b"hf_", min: 30, exact: false, class: alnum },
    KeyPattern { prefix: b"AKIA", min: 16, exact: true, class: upper_digit },
    // `Authorization: Bearer …` in headers, logs, commands.
    KeyPattern { prefix: b"Bearer ", min: 20, exact: false, class: bearer_char },
    KeyPattern { prefix: b"bearer ", min: 20, exact: false, class: bearer_char },
];

/// Whether a key may start at `i`: not in the middle of a word. A JSON escape such as `\n`
/// right before counts as a boundary.
fn at_boundary(line: &[u8], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    let prev = line[i - 1];
    if !prev.is_ascii_alphanumeric() && prev != b'_' {
        return true;
    }
    i >= 2 && line[i - 2] == b'\\' && matches!(prev, b'n' | b't' | b'r')
}

/// The end of a key starting at `i`, if one does.
fn key_at(line: &[u8], i: usize) -> Option<(usize, usize)> {
    for p in PATTERNS {
        if !line[i..].starts_with(p.prefix) {
            continue;
        }
        let start = i + p.prefix.len();
        let run = line[start..].iter().take_while(|&&b| (p.class)(b)).count();
        let ok = if p.exact { run == p.min } else { run >= p.min };
        if ok {
            // "Bearer " keeps its word; keys lose their prefix too.
            let from = if p.prefix.ends_with(b" ") { start } else { i };
            return Some((from, start + run));
        }
    }
    None
}

/// Replaces every key-shaped run in the raw bytes by `[redacted]`; everything else stays as it
/// was. Key characters include no `"` or `\`, so a JSON line stays valid JSON.
fn redact_key_patterns(line: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        // Cheap first filter on the first byte of every prefix.
        if matches!(b, b's' | b'A' | b'g' | b'x' | b'h' | b'B' | b'b')
            && at_boundary(line, i)
            && let Some((from, end)) = key_at(line, i)
        {
            let o = out.get_or_insert_with(|| Vec::with_capacity(line.len()));
            o.extend_from_slice(&line[copied..from]);
            o.extend_from_slice(REDACTED.as_bytes());
            copied = end;
            i = end;
            continue;
        }
        i += 1;
    }
    if let Some(o) = &mut out {
        o.extend_from_slice(&line[copied..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn red(line: &str) -> String {
        redact(line.as_bytes())
            .map(|b| String::from_utf8(b).unwrap())
            .unwrap_or_else(|| line.into())
    }

    const ANT: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

    #[test]
    fn plain_traffic_is_untouched() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":3,"totalTokens":15}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"the task-list has a risk-assessment step; keys are sk-short"}}}}"#,
            "not json at all, with a monkey",
        ] {
            assert_eq!(redact(line.as_bytes()), None, "{line}");
        }
    }

    #[test]
    fn authenticate_params_lose_every_string_but_the_method_id() {
        let line = r#"{"jsonrpc":"2.0","id":3,"method":"authenticate","params":{"methodId":"api-key","key":"hunter2","_meta":{"x":"y"}}}"#;
        let v: Value = serde_json::from_str(&red(line)).unwrap();
        assert_eq!(
            v["params"],
            json!({"methodId": "api-key", "key": REDACTED, "_meta": {"x": REDACTED}})
        );
        assert_eq!(v["id"], 3);
    }

    #[test]
    fn secret_keys_and_named_pairs_are_redacted() {
        let line = json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{
            "cwd":"/tmp",
            "apiKey":"hunter2",
            "mcpServers":[{"name":"gh","command":"x","args":[],
                "env":[{"name":"GITHUB_TOKEN","value":"abc"},{"name":"PATH","value":"/bin"}],
                "headers":{"Authorization":"Basic Zm9v"}}],
            "usage":{"inputTokens":5}}})
        .to_string();
        let v: Value = serde_json::from_str(&red(&line)).unwrap();
        let p = &v["params"];
        assert_eq!(p["apiKey"], REDACTED);
        assert_eq!(p["mcpServers"][0]["env"][0]["value"], REDACTED);
        assert_eq!(p["mcpServers"][0]["env"][1]["value"], "/bin");
        assert_eq!(p["mcpServers"][0]["headers"]["Authorization"], REDACTED);
        assert_eq!(p["usage"]["inputTokens"], 5);
        assert_eq!(p["cwd"], "/tmp");
    }

    #[test]
    fn key_shapes_are_cut_out_where_they_stand() {
        let aiza = format!("AIza{}", "x".repeat(35));
        let line = format!(
            r#"{{"text":"export OPENAI_API_KEY={ANT}\n{aiza} and ghp_{} plus Bearer abcdefghijklmnopqrstuvwxyz.123"}}"#,
            "a".repeat(36)
        );
        let out = red(&line);
        assert!(!out.contains("sk-ant") && !out.contains("AIza") && !out.contains("ghp_"), "{out}");
        assert!(out.contains("Bearer [redacted]"), "{out}");
        assert!(out.contains(r#"OPENAI_API_KEY=[redacted]\n[redacted] and"#), "{out}");
        serde_json::from_str::<Value>(&out).expect("still JSON");
        // Non-JSON and non-UTF-8 lines too, the rest byte for byte.
        let raw = [b"\xff key=".as_slice(), ANT.as_bytes(), b" \xfe"].concat();
        assert_eq!(redact(&raw).unwrap(), b"\xff key=[redacted] \xfe");
    }

    #[test]
    fn records_round_trip() {
        for (bytes, dir, rewritten) in [
            (b"{\"a\":\"\\u00e9\"}\r".to_vec(), Dir::EditorToAgent, false),
            (b"\xff\x00 raw".to_vec(), Dir::Injected, false),
            (b"{}".to_vec(), Dir::AgentToEditor, true),
        ] {
            let mut out = Vec::new();
            encode(
                &CopiedLine { seq: 7, t: 1.5, dir, rewritten, bytes: bytes.clone().into() },
                &mut out,
            );
            assert_eq!(out.last(), Some(&b'\n'));
            let e = Entry::parse(&out[..out.len() - 1]).unwrap();
            assert_eq!(
                (e.seq, e.t, e.dir, e.line, e.rewritten),
                (Some(7), Some(1.5), dir, bytes, rewritten)
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_writer_that_falls_behind_drops_and_counts_and_one_that_fails_stops() {
        use std::os::fd::FromRawFd;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just opened and are owned by nothing else.
        let (read_end, write_end) =
            unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let mut rec = Recorder::with_file(write_end, Path::new("pipe")).unwrap();
        // Nobody reads the pipe: the writer blocks once the pipe and its buffer are full, and
        // the queue fills up behind it. Offering never waits.
        let line = CopiedLine {
            seq: 0,
            t: 0.0,
            dir: Dir::AgentToEditor,
            rewritten: false,
            bytes: Arc::from(vec![b'x'; 1024].as_slice()),
        };
        let n = 2 * DEPTH as u64 + 1000;
        let started = std::time::Instant::now();
        for _ in 0..n {
            rec.offer(&line);
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(rec.dropped() > 0 && rec.dropped() < n, "dropped {}", rec.dropped());
        // The reader goes away: the blocked write fails, the writer stops, finishing returns.
        drop(read_end);
        rt.block_on(rec.finish());
    }

    #[test]
    fn secret_names() {
        for yes in [
            "apiKey",
            "api_key",
            "ANTHROPIC_API_KEY",
            "token",
            "GITHUB_TOKEN",
            "accessToken",
            "Authorization",
            "password",
            "client_secret",
            "credentials",
            "x-api-key",
        ] {
            assert!(is_secret_name(yes), "{yes}");
        }
        for no in [
            "inputTokens",
            "outputTokens",
            "totalTokens",
            "name",
            "value",
            "sessionId",
            "authMethods",
            "methodId",
            "key",
            "tokenizer",
        ] {
            assert!(!is_secret_name(no), "{no}");
        }
    }
}
