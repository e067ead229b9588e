//! Helpers for the torture suite: the built `acp-usage` binary as a child process, synthetic
//! agents (python3 and sh scripts written to a fresh directory per test), and what `/proc` says
//! about processes.
//!
//! Nothing here waits on a clock to decide an outcome: deadlines only turn a hang into a failure.

#![allow(dead_code)]

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Long enough that only a hung relay or agent reaches it.
pub const HUNG: Duration = Duration::from_secs(120);

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "torture-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    dir
}

/// Writes `text` to `dir/name` and returns its path as a string.
pub fn write_script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a script");
    path.display().to_string()
}

/// `acp-usage` running as a child, with its stderr in a file.
#[derive(Debug)]
pub struct Relay {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr_path: PathBuf,
    /// Pid files of agent processes to kill if the test fails.
    reap: Vec<PathBuf>,
}

/// Starts `acp-usage ARGS -- AGENT` with no user config, no state and `log` as its log filter.
pub fn start(dir: &Path, args: &[&str], agent: &[&str], log: &str) -> Relay {
    let stderr_path = dir.join("acp-usage.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("creating the stderr file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(args)
        .arg("--")
        .args(agent)
        .env("ACP_USAGE_CONFIG", "/dev/null")
        .env("ACP_USAGE_STATE_DIR", "off")
        .env("ACP_USAGE_LOG", log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("starting acp-usage");
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    Relay { child, stdin, stdout, stderr_path, reap: Vec::new() }
}

impl Relay {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Kill the processes whose pids are in `pidfile` if the test fails.
    pub fn reap_on_failure(&mut self, pidfile: PathBuf) {
        self.reap.push(pidfile);
    }

    /// Writes and flushes bytes to acp-usage's stdin.
    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        stdin.write_all(bytes).expect("writing to acp-usage");
        stdin.flush().expect("flushing to acp-usage");
    }

    /// Closes acp-usage's stdin (the editor goes away).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Reads stdout on a thread; the handle gives everything up to end of stream.
    pub fn read_all_in_background(&mut self) -> std::thread::JoinHandle<Vec<u8>> {
        let mut stdout = self.stdout.take().expect("stdout already taken");
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            stdout.read_to_end(&mut buf).expect("reading acp-usage's stdout");
            buf
        })
    }

    /// Waits for acp-usage to exit; a relay still running after `within` fails the test.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let end = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().expect("waiting for acp-usage") {
                return st;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("acp-usage hung: still running after {within:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// acp-usage's exit code (panics if a signal ended it).
    pub fn exit_code(&mut self, within: Duration) -> i32 {
        let st = self.wait(within);
        st.code().unwrap_or_else(|| panic!("acp-usage was ended by a signal: {st:?}"))
    }

    /// What acp-usage logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends `signal` to acp-usage itself.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill has no memory-safety preconditions.
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.pid());
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for file in &self.reap {
            for pid in read_pids(file) {
                kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Kills `pid` (acp-usage) if it still runs after `within`, so a test blocked reading from a
/// hung relay gets end of stream and fails instead of hanging; dropping the guard disarms it.
#[must_use]
pub fn watchdog(pid: i32, within: Duration) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(within) {
            eprintln!("watchdog: acp-usage (pid {pid}) still running after {within:?}; killing it");
            kill(pid, libc::SIGKILL);
        }
    });
    tx
}

/// Sends `signal` to `pid`, ignoring a process that is already gone.
pub fn kill(pid: i32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}

/// The pids in a file written by an agent (whitespace separated); empty if it is missing.
pub fn read_pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits for a file of pids to hold at least `n` of them.
pub fn wait_pids(path: &Path, n: usize) -> Vec<i32> {
    let end = Instant::now() + HUNG;
    loop {
        let pids = read_pids(path);
        if pids.len() >= n {
            return pids;
        }
        assert!(Instant::now() < end, "{} never listed {n} pids", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `/proc/PID/stat`: (state, process group), `None` when the process does not exist.
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: parse after the last ')'.
    let mut rest = text.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let _ppid = rest.next()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether `pid` is gone: no such process, or a zombie (dead, only not reaped; this machine's
/// pid 1 may never reap orphans).
pub fn gone(pid: i32) -> bool {
    !matches!(stat(pid), Some((state, _)) if state != 'Z' && state != 'X')
}

/// Live processes (not zombies) whose process group is `pgid`.
/// The process group `pid` is in (the guard's, when the relay runs its agent under one).
pub fn group_of(pid: i32) -> i32 {
    stat(pid).map(|(_, pgrp)| pgrp).unwrap_or(pid)
}

pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some((state, pgrp)) = stat(pid)
            && pgrp == pgid
            && state != 'Z'
            && state != 'X'
        {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until every pid is gone and nothing is left in `pgid`; returns what is still alive
/// after `within` (empty when all went).
pub fn wait_all_gone(pids: &[i32], pgid: i32, within: Duration) -> Vec<i32> {
    let end = Instant::now() + within;
    loop {
        let mut alive: Vec<i32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
        for p in group_members(pgid) {
            if !alive.contains(&p) {
                alive.push(p);
            }
        }
        if alive.is_empty() || Instant::now() > end {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process's peak resident set (`VmHWM`), in KiB; `None` once it is gone.
pub fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Splits bytes into lines without their `\n` (a last piece without one is a line too).
pub fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// Checks the JSON-RPC error responses the relay owes the editor for `ids` (raw wire text),
/// each naming `status` (e.g. "signal 9", "exit status 55").
#[track_caller]
pub fn assert_error_responses(lines: &[&[u8]], ids: &[&str], status: &str) {
    let mut left: Vec<&str> = ids.to_vec();
    for line in lines {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!("not a JSON error response ({e}): {}", String::from_utf8_lossy(line))
        });
        let id = serde_json::to_string(&v["id"]).expect("serialises");
        let pos = left
            .iter()
            .position(|want| serde_json::from_str::<serde_json::Value>(want).unwrap() == v["id"])
            .unwrap_or_else(|| panic!("an error for id {id} nobody is waiting for: {v}"));
        left.remove(pos);
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        let message = v["error"]["message"].as_str().unwrap_or_else(|| panic!("no message: {v}"));
        assert!(message.contains(status), "the error does not name {status:?}: {v}");
        assert!(v["error"]["code"].as_i64().is_some(), "no error code: {v}");
    }
    assert!(left.is_empty(), "no error response for the pending requests {left:?}");
}

/// Reads lines from `r` and calls `f` with each (without its `\n`); returns what was left after
/// the last newline (a line without terminator) at end of stream.
pub fn for_each_line(r: impl Read, mut f: impl FnMut(&[u8])) -> Vec<u8> {
    let mut r = std::io::BufReader::with_capacity(1 << 20, r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf).expect("reading acp-usage's stdout");
        if n == 0 {
            return Vec::new();
        }
        if buf.last() != Some(&b'\n') {
            return buf;
        }
        buf.pop();
        f(&buf);
    }
}
