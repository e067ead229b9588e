//! The ledger opens beside the agent's start, not before the editor's first answer. What these
//! tests guarantee, running the built binary over the scripted demo agent:
//!
//! - the editor's `initialize` is answered while the ledger cannot be opened yet (another
//!   process holds it locked);
//! - nothing else is passed on until the ledger is open and in place: the `session/new` sent
//!   meanwhile is answered once the lock is gone, and the session is in the ledger afterwards.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use acp_usage::sinks::ledger::Store;
use serde_json::{Value, json};

const EXE: &str = env!("CARGO_BIN_EXE_acp-usage");

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("acp-usage-ledger-open-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The next line the relay writes whose `id` is `id`, within `within`; the lines before it
/// (notifications) are skipped.
fn response(lines: &mpsc::Receiver<Value>, id: u64, within: Duration) -> Option<Value> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        let line = lines.recv_timeout(left).ok()?;
        if line["id"] == json!(id) {
            return Some(line);
        }
    }
}

#[test]
fn initialize_is_answered_while_the_ledger_is_locked_and_a_session_waits_for_it() {
    let dir = scratch("locked");
    let ledger = dir.join("ledger.db");
    drop(Store::open(&ledger).expect("a new ledger"));
    // Another process's lock on the whole file: every other connection waits for it.
    let holder = rusqlite::Connection::open(&ledger).unwrap();
    holder
        .execute_batch(
            "PRAGMA locking_mode = EXCLUSIVE;
             BEGIN EXCLUSIVE;
             INSERT OR REPLACE INTO meta(key, value) VALUES ('held by a test', '1');
             COMMIT;",
        )
        .unwrap();
    let probe = rusqlite::Connection::open(&ledger).unwrap();
    probe.busy_timeout(Duration::ZERO).unwrap();
    let blocked = probe.query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get::<_, i64>(0));
    assert!(blocked.is_err(), "the test's lock does not hold the ledger: {blocked:?}");

    let mut relay = Command::new(EXE)
        .args(["--", EXE, "demo-agent"])
        .env("ACP_USAGE_LEDGER", &ledger)
        .env("ACP_USAGE_STATE_DIR", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the relay");
    let mut stdin = relay.stdin.take().unwrap();
    let stdout = BufReader::new(relay.stdout.take().unwrap());
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).expect("a JSON line"));
        }
    });
    let mut send = move |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };

    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    let init = response(&lines, 0, Duration::from_secs(5)).expect("initialize answered");
    assert!(init["result"]["protocolVersion"].is_number(), "{init}");

    send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": dir.to_str().unwrap(), "mcpServers": []}}));
    // Held while the ledger is locked (the relay's open waits up to its 10 s busy timeout).
    assert_eq!(response(&lines, 1, Duration::from_millis(700)), None, "session/new passed early");
    drop(probe);
    drop(holder);
    let new = response(&lines, 1, Duration::from_secs(10)).expect("session/new answered");
    let session = new["result"]["sessionId"].as_str().expect("a session id").to_owned();

    drop(send);
    assert!(relay.wait().unwrap().success());
    let conn = rusqlite::Connection::open(&ledger).unwrap();
    let recorded: i64 = conn
        .query_row("SELECT COUNT(*) FROM sessions WHERE session_id = ?1", [&session], |r| r.get(0))
        .unwrap();
    assert_eq!(recorded, 1, "the session is in the ledger");
}
