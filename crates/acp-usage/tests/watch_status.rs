//! `acp-usage status` and `acp-usage watch --once`, run as the built binary. What these tests
//! guarantee:
//!
//! - A session relayed now (`acp-usage -- acp-usage demo-agent`) shows in `status` and in
//!   `watch` as running while its relay lives, and as ended once the relay is gone.
//! - `status` prints its default line and `--format` templates; an unknown placeholder exits 2
//!   with the list of known ones; no ledger prints `--empty` (exit 0) and creates nothing.
//! - `watch` with stdout not a terminal prints one snapshot; with no ledger it says so, exit 1.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use acp_usage::sinks::ledger::{SessionInfo, SessionRef, Store};
use serde_json::{Value, json};

const EXE: &str = env!("CARGO_BIN_EXE_acp-usage");

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("acp-usage-watch-status-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(ledger: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("ACP_USAGE_LEDGER", ledger)
        .stdin(Stdio::null())
        .output()
        .expect("running acp-usage")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// The relay wrapping the scripted demo agent, driven line by line.
struct Relay {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Relay {
    fn start(ledger: &Path) -> Relay {
        let mut child = Command::new(EXE)
            .args(["--", EXE, "demo-agent"])
            .env("ACP_USAGE_LEDGER", ledger)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the relay");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Relay { child, stdin, stdout, next_id: 0 }
    }

    /// Sends a request and reads up to its response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the relay closed its stdout");
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg.get("method").is_none() && msg["id"] == json!(id) {
                return msg;
            }
        }
    }

    /// Closes the relay's stdin and waits for it to exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn a_relayed_session_runs_then_ends() {
    let dir = scratch("live");
    let ledger = dir.join("ledger.db");
    let mut relay = Relay::start(&ledger);
    relay.request("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    let new = relay.request("session/new", json!({"cwd": "/home/you/hello-rs", "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    for text in ["Write hello world in Rust", "Run it"] {
        let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]});
        relay.request("session/prompt", prompt);
    }
    // The ledger's writer thread does not hold up the relay; give it a moment.
    let mut line = String::new();
    for _ in 0..50 {
        line = stdout(&run(&ledger, &["status", "--format", "{state} {turns} {project} {cost}"]));
        if line.starts_with("running 2 ") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(line.starts_with("running 2 hello-rs $0.0"), "{line}");

    let watch = run(&ledger, &["watch"]);
    assert!(watch.status.success());
    let text = stdout(&watch);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("today $0.0")
            && lines[0].ends_with("· 1 running · 0 more in the last hour"),
        "{text}"
    );
    assert!(lines[1].starts_with("STATE"), "{text}");
    assert!(lines[2].starts_with("running  acp-usage-demo-agent"), "{text}");
    assert!(lines[2].contains("/home/you/hello-rs"), "{text}");

    relay.finish();
    let text = stdout(&run(&ledger, &["watch", "--once"]));
    assert!(text.contains("· 0 running · 1 more in the last hour"), "{text}");
    assert!(text.lines().nth(2).unwrap().starts_with("ended"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_ledger_and_bad_templates() {
    let dir = scratch("missing");
    let ledger = dir.join("none/ledger.db");

    let out = run(&ledger, &["status"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "\n");
    let out = run(&ledger, &["status", "--empty", "no sessions"]);
    assert_eq!(stdout(&out), "no sessions\n");
    assert!(!dir.join("none").exists(), "status must not create the ledger");

    let out = run(&ledger, &["status", "--format", "{agent} {cots}"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown placeholder `{cots}`") && err.contains("{cost}"), "{err}");

    let out = run(&ledger, &["watch", "--once"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ledger at"));
    assert!(!dir.join("none").exists(), "watch must not create the ledger");

    // `--ledger` wins over the environment.
    let other = dir.join("other.db");
    let mut store = Store::open(&other).unwrap();
    let s = SessionRef { id: "s1".into(), agent: "codex".into() };
    store.session(&s, &SessionInfo::default(), None, acp_usage::sinks::ledger::now_ms()).unwrap();
    drop(store);
    let out = Command::new(EXE)
        .args(["status", "--format", "{agent} {turns} {cost} {today}", "--ledger"])
        .arg(&other)
        .env("ACP_USAGE_LEDGER", "off")
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "codex 0 $0.00 $0.00\n");
    let out = Command::new(EXE).args(["watch"]).env("ACP_USAGE_LEDGER", "off").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ledger"));
    let _ = std::fs::remove_dir_all(&dir);
}
