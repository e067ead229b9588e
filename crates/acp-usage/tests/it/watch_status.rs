//! `acp-usage status` and `acp-usage watch --once`, run as the built binary. What these tests
//! guarantee:
//!
//! - A session relayed now (`acp-usage -- acp-usage demo-agent`) shows in `status` and in
//!   `watch` as running while its relay lives, and as ended once the relay is gone.
//! - `status` prints its default line and `--format` templates; an unknown placeholder exits 2
//!   with the list of known ones; no ledger prints `--empty` (exit 0) and creates nothing.
//! - `watch` with stdout not a terminal prints one snapshot; with no ledger it says so, exit 1.
//! - `watch` on a terminal, ended by SIGTERM, exits 143 with the terminal back in cooked mode
//!   and off the alternate screen.

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

/// The live view on a real pseudo-terminal, ended by SIGTERM (as `kill` or a closing terminal
/// window would): it exits 143 and leaves the terminal as it found it, out of raw mode and off
/// the alternate screen.
#[test]
fn live_watch_restores_the_terminal_on_sigterm() {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::mpsc;
    use std::time::Duration;

    let dir = scratch("live");
    let (mut master, mut slave) = (-1, -1);
    // A size, or the view has no cells to draw in.
    let size = libc::winsize { ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the given locations and only reads `size`
    // (no name buffer, default termios).
    let rc = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size)
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let termios = |fd: &OwnedFd| {
        // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is an open terminal descriptor and `t` lives across the call.
        assert_eq!(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut t) }, 0);
        t.c_lflag & (libc::ICANON | libc::ECHO)
    };
    let cooked = termios(&slave);
    assert_ne!(cooked, 0, "a new pty starts in cooked mode");

    let mut child = Command::new(EXE)
        .args(["watch", "--ledger"])
        .arg(dir.join("ledger.db"))
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()))
        .spawn()
        .expect("starting watch");

    // Everything the view writes, read on a thread; the test goes on once the first frame is in.
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let mut reader = std::fs::File::from(master);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    const ENTER_ALT: &[u8] = b"\x1b[?1049h";
    const LEAVE_ALT: &[u8] = b"\x1b[?1049l";
    let contains = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    let mut seen = Vec::new();
    // ratatui skips the cells a frame leaves blank, so words arrive apart: look for one.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(contains(&seen, ENTER_ALT) && contains(&seen, b"ledger")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!("no first frame in 30 s: {:?}", String::from_utf8_lossy(&seen)),
        }
    }
    assert_eq!(termios(&slave), 0, "raw mode while the view runs");

    // SAFETY: signalling our own child, which has not been waited for, so its pid is not reused.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert_eq!(termios(&slave), cooked, "canonical mode and echo are back");
    // With the last slave descriptor closed the reader gets EOF (or EIO) and hangs up.
    drop(slave);
    seen.extend(rx.iter().flatten());
    let entered = seen.windows(ENTER_ALT.len()).position(|w| w == ENTER_ALT).unwrap();
    assert!(contains(&seen[entered..], LEAVE_ALT), "left the alternate screen");
}
