//! Fuzz target over the relay's line splitter, envelope view and session observer.
//!
//! Input layout: a 10-byte header, then the wire bytes.
//!
//! - byte 0: bits 0-1 the forced profile (claude, codex, gemini, or detected from the command),
//!   bit 2 `keep_agent_usage`, bits 3-7 the reader's buffer capacity (1..=31 bytes, 31 = 64 KiB),
//!   so line boundaries fall at every place within a chunk;
//! - byte 1: the line limit, `(b + 1) * 32` bytes (32 ..= 8192);
//! - bytes 2-9: a 64-bit mask; line `i` comes from the agent when bit `i % 64` is set, else from
//!   the editor.
//!
//! What is checked, for any input:
//!
//! - the splitter gives the input back exactly: every `Line` is the next bytes of the input up
//!   to (not including) a `\n`, no longer than the limit; a `TooLong(n)` stands for exactly `n`
//!   bytes over the limit without a `\n`; only the last line may lack its `\n`; `Eof` comes at
//!   the end of the input and nothing is read after it;
//! - the observer never panics, and for agent lines it does not own (anything that is not a
//!   response to a pending editor request or a `session/update` notification) its outcome is
//!   empty: the line is forwarded byte for byte, nothing is added;
//! - whatever it writes is one line: lines it adds before or after are JSON objects, a
//!   replacement of a line that was valid JSON is a JSON object too; a replaced response keeps
//!   its `id`, a replaced notification stays a `session/update`;
//! - it tracks exactly the editor's requests that have not been answered.

#![no_main]

use std::cell::RefCell;
use std::collections::HashSet;

use acp_usage::agents::Profile;
use acp_usage::relay::envelope::{Envelope, Kind};
use acp_usage::relay::lines::{Line, LineReader, Read};
use acp_usage::relay::observer::{Observer, Outcome, Settings};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const HEADER: usize = 10;

thread_local! {
    static RUNTIME: RefCell<tokio::runtime::Runtime> = RefCell::new(
        tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime"),
    );
}

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER {
        return;
    }
    let (header, wire) = data.split_at(HEADER);
    let profile = match header[0] & 3 {
        0 => Profile::named("claude"),
        1 => Profile::named("codex"),
        2 => Profile::named("gemini"),
        _ => None,
    };
    let keep_agent_usage = header[0] & 4 != 0;
    let cap = match header[0] >> 3 {
        31 => 64 * 1024,
        n => usize::from(n) + 1,
    };
    let max = (usize::from(header[1]) + 1) * 32;
    let mask = u64::from_le_bytes(header[2..10].try_into().expect("8 bytes"));

    let lines = RUNTIME.with(|rt| rt.borrow().block_on(split(wire, cap, max)));
    check_split(wire, max, &lines);

    let settings = Settings {
        forced_profile: profile,
        // What the command named before the agent started: nothing here ("fuzz-agent"), so
        // a profile comes from the header or from `initialize`'s agentInfo in the lines.
        launched_as: Profile::generic(),
        command: vec!["fuzz-agent".to_string()],
        keep_agent_usage,
        catalog: Default::default(),
        default_window: 200_000,
        learned: Default::default(),
        ledger: None,
        budgets: Default::default(),
        // The command's merges and answers are reachable from lines.
        usage_command: Some("usage".to_string()),
        // Transcripts are files on disk: not part of what a line can reach.
        transcripts: false,
        // The tap's calls come from HTTP, not from ACP lines.
        tap: false,
        // Not wanted either: the late-recognition warning is a log line, nothing on the wire.
        tap_wanted: false,
    };
    let mut observer = Observer::new(settings);
    // The editor requests not answered yet, by id key.
    let mut pending: HashSet<String> = HashSet::new();
    let mut index = 0u32;
    for read in &lines {
        let Read::Line(Line { bytes, .. }) = read else { continue };
        let from_agent = mask & (1u64 << (index % 64)) != 0;
        index += 1;
        let env = Envelope::parse(bytes);
        if from_agent {
            let owned = match &env {
                Some(e) if e.kind() == Kind::Response => {
                    pending.remove(&e.id_key().expect("responses have ids"))
                }
                Some(e) if e.kind() == Kind::Notification => {
                    e.method.as_deref() == Some("session/update")
                }
                _ => false,
            };
            let out = observer.from_agent(bytes);
            if !owned {
                assert_eq!(
                    out,
                    Outcome::default(),
                    "a line the observer does not own was changed or added to: {}",
                    String::from_utf8_lossy(bytes)
                );
            }
            check_outcome(bytes, env.as_ref(), &out);
        } else {
            if let Some(e) = &env
                && e.kind() == Kind::Request
            {
                pending.insert(e.id_key().expect("requests have ids"));
            }
            observer.from_editor(bytes);
        }
        assert_eq!(observer.pending_ids().len(), pending.len(), "pending requests out of step");
    }
});

async fn split(wire: &[u8], cap: usize, max: usize) -> Vec<Read> {
    let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(cap, wire), max);
    let mut out = Vec::new();
    loop {
        let read = reader.next().await.expect("reading from memory cannot fail");
        let eof = read == Read::Eof;
        out.push(read);
        if eof {
            // Once at the end, the reader stays there.
            let again = reader.next().await.expect("reading from memory cannot fail");
            assert_eq!(again, Read::Eof, "something was read after the end");
            return out;
        }
    }
}

/// The lines, put back together, are the input.
fn check_split(wire: &[u8], max: usize, lines: &[Read]) {
    let mut at = 0usize;
    let last = lines.len() - 1;
    for (i, read) in lines.iter().enumerate() {
        match read {
            Read::Line(Line { bytes, newline }) => {
                assert!(bytes.len() <= max, "a line of {} bytes over the limit {max}", bytes.len());
                assert_eq!(&wire[at..at + bytes.len()], &bytes[..], "a line differs from the input");
                at += bytes.len();
                if *newline {
                    assert_eq!(wire.get(at), Some(&b'\n'), "a line ended where there is no newline");
                    at += 1;
                } else {
                    assert_eq!(at, wire.len(), "a line without newline before the end");
                    assert_eq!(i + 1, last, "a line without newline is not the last");
                }
            }
            Read::TooLong(n) => {
                assert!(*n > max, "a dropped line of {n} bytes is within the limit {max}");
                let dropped = &wire[at..at + n];
                assert!(!dropped.contains(&b'\n'), "a dropped line spans a newline");
                at += n;
                match wire.get(at) {
                    Some(b'\n') => at += 1,
                    Some(_) => panic!("a dropped line stopped before its newline"),
                    None => {}
                }
            }
            Read::Eof => {
                assert_eq!(i, last);
                assert_eq!(at, wire.len(), "end of stream before the end of the input");
            }
        }
    }
    assert_eq!(lines.last(), Some(&Read::Eof));
}

/// Whatever the observer writes is one JSON object per line; replacements keep what identifies
/// the message.
fn check_outcome(line: &[u8], env: Option<&Envelope<'_>>, out: &Outcome) {
    for extra in out.before.iter().chain(&out.after) {
        let v = json_line(extra);
        assert_eq!(v["jsonrpc"], "2.0", "an added line is not JSON-RPC 2.0: {v}");
    }
    let Some(new) = &out.replace else { return };
    // The envelope view skips fields it does not read without checking them (a stray invalid
    // UTF-8 byte in a string there goes unnoticed), and a rewrite keeps those fields as they
    // came: only a line that was valid JSON must give valid JSON.
    if serde_json::from_slice::<Value>(line).is_err() {
        assert!(!new.contains(&b'\n'), "a replacement holds a newline");
        return;
    }
    let v = json_line(new);
    let env = env.expect("only JSON objects are replaced");
    let new_env = Envelope::parse(new).expect("a replacement has an envelope");
    assert_eq!(new_env.kind(), env.kind(), "a replacement changed the message's kind: {v}");
    match env.kind() {
        Kind::Response => assert_eq!(
            new_env.id_key(),
            env.id_key(),
            "a replaced response lost its id: {} became {v}",
            String::from_utf8_lossy(line)
        ),
        Kind::Notification => assert_eq!(new_env.method, env.method, "method changed: {v}"),
        kind => panic!("a {kind:?} was replaced: {}", String::from_utf8_lossy(line)),
    }
}

fn json_line(bytes: &[u8]) -> Value {
    assert!(!bytes.contains(&b'\n'), "an emitted line holds a newline");
    let v: Value = serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!("an emitted line is not JSON ({e}): {}", String::from_utf8_lossy(bytes))
    });
    assert!(v.is_object(), "an emitted line is not an object: {v}");
    v
}
