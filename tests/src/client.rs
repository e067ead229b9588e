//! A small ACP client for tests: spawns an agent (or the relay in front of one), sends requests,
//! answers the agent's requests, and keeps every line both ways, in order, for assertions.
//!
//! It is deliberately not built on an ACP SDK: it must see the exact bytes on the wire, including
//! lines an SDK would reject or reformat. Agent→client requests are answered on the reader thread:
//! permission prompts are allowed (allow-once first), `fs/*` works on the real file system, and
//! everything else gets `-32601`.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Default time to wait for a response: agents take seconds to start and a turn may run tools.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// A command to run, with its complete environment.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The child's whole environment: the tests' own is not inherited, so a developer's
    /// `ANTHROPIC_API_KEY` or `OPENAI_BASE_URL` can never reach a real provider.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Where the child's stderr goes.
    pub stderr_file: PathBuf,
}

impl CommandSpec {
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    pub fn set_env(&mut self, name: &str, value: impl Into<String>) {
        self.env.retain(|(key, _)| key != name);
        self.env.push((name.to_owned(), value.into()));
    }

    /// The same command behind `wrapper wrapper_args... -- program args...`.
    pub fn wrapped(&self, wrapper: &Path, wrapper_args: &[&str]) -> CommandSpec {
        let mut args: Vec<String> = wrapper_args.iter().map(|arg| (*arg).to_owned()).collect();
        args.push("--".to_owned());
        args.push(self.program.display().to_string());
        args.extend(self.args.iter().cloned());
        CommandSpec { program: wrapper.to_owned(), args, ..self.clone() }
    }
}

/// What the client tells the agent it can do.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientOptions {
    /// Advertise `fs.readTextFile`/`fs.writeTextFile` (agents then route file tools through us).
    pub fs: bool,
    /// Advertise `terminal` (requests are still refused: the tests run no terminals).
    pub terminal: bool,
}

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Written by this client to the child's stdin.
    Out,
    /// Read from the child's stdout.
    In,
}

/// One line on the wire, without its `\n`.
#[derive(Debug, Clone)]
pub struct Line {
    pub seq: usize,
    pub dir: Dir,
    pub bytes: Vec<u8>,
    /// The line parsed as JSON, when it is JSON.
    pub json: Option<Value>,
    pub at: Duration,
}

impl Line {
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }

    pub fn method(&self) -> Option<&str> {
        self.json.as_ref()?.get("method")?.as_str()
    }

    /// `params.update` of a `session/update` notification.
    pub fn session_update(&self) -> Option<&Value> {
        match self.method() {
            Some("session/update") => self.json.as_ref()?.get("params")?.get("update"),
            _ => None,
        }
    }

    /// Whether this is a response (a result or an error) to request `id`.
    pub fn is_response_to(&self, id: &Value) -> bool {
        self.json.as_ref().is_some_and(|json| {
            json.get("method").is_none()
                && json.get("id") == Some(id)
                && (json.get("result").is_some() || json.get("error").is_some())
        })
    }
}

#[derive(Debug)]
struct Shared {
    lines: Mutex<Vec<Line>>,
    changed: Condvar,
    stdin: Mutex<Option<ChildStdin>>,
    /// Set when the child's stdout reached EOF.
    closed: Mutex<bool>,
    started: Instant,
}

impl Shared {
    fn lines(&self) -> MutexGuard<'_, Vec<Line>> {
        self.lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, dir: Dir, bytes: Vec<u8>) {
        let json = serde_json::from_slice(&bytes).ok();
        let mut lines = self.lines();
        let seq = lines.len();
        lines.push(Line { seq, dir, bytes, json, at: self.started.elapsed() });
        drop(lines);
        self.changed.notify_all();
    }

    /// Records and writes one line; the record comes first so that a transcript never shows a
    /// response before the request it answers.
    fn send(&self, bytes: Vec<u8>) -> anyhow::Result<()> {
        let mut stdin = self.stdin.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(pipe) = stdin.as_mut() else { bail!("stdin already closed") };
        self.push(Dir::Out, bytes.clone());
        pipe.write_all(&bytes)?;
        pipe.write_all(b"\n")?;
        pipe.flush()?;
        Ok(())
    }
}

/// A running child speaking ACP on its stdio. Dropping it ends the child's process group.
#[derive(Debug)]
pub struct AcpClient {
    child: Child,
    shared: Arc<Shared>,
    next_id: AtomicI64,
    stderr_file: PathBuf,
    pub timeout: Duration,
    options: ClientOptions,
}

impl AcpClient {
    /// Spawns `spec` in its own process group with piped stdin/stdout and stderr to its file.
    pub fn spawn(spec: &CommandSpec, options: ClientOptions) -> anyhow::Result<AcpClient> {
        use std::os::unix::process::CommandExt;

        let stderr = File::create(&spec.stderr_file)
            .with_context(|| format!("creating {}", spec.stderr_file.display()))?;
        let mut child = Command::new(&spec.program)
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(key, value)| (key, value)))
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Its own group, so that drop can end the agent and everything it started.
            .process_group(0)
            .spawn()
            .with_context(|| format!("spawning {}", spec.program.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let shared = Arc::new(Shared {
            lines: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            stdin: Mutex::new(child.stdin.take()),
            closed: Mutex::new(false),
            started: Instant::now(),
        });
        let reader_shared = Arc::clone(&shared);
        thread::Builder::new().name("acp-client-reader".into()).spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut bytes = Vec::new();
                match reader.read_until(b'\n', &mut bytes) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if bytes.last() == Some(&b'\n') {
                    bytes.pop();
                }
                reader_shared.push(Dir::In, bytes.clone());
                if let Ok(message) = serde_json::from_slice::<Value>(&bytes) {
                    answer_agent_request(&reader_shared, &message, options);
                }
            }
            *reader_shared.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
            reader_shared.changed.notify_all();
        })?;
        Ok(AcpClient {
            child,
            shared,
            next_id: AtomicI64::new(0),
            stderr_file: spec.stderr_file.clone(),
            timeout: DEFAULT_TIMEOUT,
            options,
        })
    }

    /// Sends a request and waits for its result; a JSON-RPC error becomes `Err`.
    pub fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let response = self.request_response(method, params)?;
        match response.get("error") {
            Some(error) => bail!("{method} failed: {error}"),
            None => Ok(response["result"].clone()),
        }
    }

    /// Sends a request and waits for its whole response object (result or error).
    pub fn request_response(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = json!(self.next_id.fetch_add(1, Ordering::SeqCst));
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let start = self.mark();
        self.send_raw(message.to_string().as_bytes())?;
        self.wait_for_response(&id, start, self.timeout)
            .with_context(|| format!("waiting for the response to {method} (id {id})"))
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> anyhow::Result<()> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(message.to_string().as_bytes())
    }

    /// Writes one line exactly as given (a `\n` is appended).
    pub fn send_raw(&self, bytes: &[u8]) -> anyhow::Result<()> {
        self.shared.send(bytes.to_vec())
    }

    /// Waits for the response to `id` among lines from `start` on.
    pub fn wait_for_response(
        &self,
        id: &Value,
        start: usize,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let line = self
            .wait_for_line(start, timeout, |line| line.dir == Dir::In && line.is_response_to(id))?;
        Ok(line.json.unwrap_or_default())
    }

    /// Waits until a line from `start` on matches `wanted`; fails on timeout or when the child
    /// closes its stdout first.
    pub fn wait_for_line(
        &self,
        start: usize,
        timeout: Duration,
        wanted: impl Fn(&Line) -> bool,
    ) -> anyhow::Result<Line> {
        let deadline = Instant::now() + timeout;
        let mut lines = self.shared.lines();
        loop {
            if let Some(line) = lines.iter().skip(start).find(|line| wanted(line)) {
                return Ok(line.clone());
            }
            if *self.shared.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
                drop(lines);
                bail!("the child closed its stdout; stderr ends with:\n{}", self.stderr_tail(40));
            }
            let now = Instant::now();
            if now >= deadline {
                drop(lines);
                bail!("timed out after {timeout:?}; stderr ends with:\n{}", self.stderr_tail(40));
            }
            lines = self
                .shared
                .changed
                .wait_timeout(lines, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// A position in the transcript, for the `*_since` methods.
    pub fn mark(&self) -> usize {
        self.shared.lines().len()
    }

    pub fn all_lines(&self) -> Vec<Line> {
        self.shared.lines().clone()
    }

    pub fn lines_since(&self, mark: usize) -> Vec<Line> {
        self.shared.lines()[mark..].to_vec()
    }

    /// The `params` of every `session/update` the child sent since `mark`.
    pub fn notifications_since(&self, mark: usize) -> Vec<Value> {
        self.lines_since(mark)
            .into_iter()
            .filter(|line| line.dir == Dir::In && line.method() == Some("session/update"))
            .filter_map(|line| line.json.map(|json| json["params"].clone()))
            .collect()
    }

    /// The `update` objects of kind `kind` (e.g. `usage_update`) since `mark`.
    pub fn updates_since(&self, mark: usize, kind: &str) -> Vec<Value> {
        self.notifications_since(mark)
            .into_iter()
            .map(|params| params["update"].clone())
            .filter(|update| update["sessionUpdate"] == kind)
            .collect()
    }

    /// `initialize` with protocol version 1 and this client's capabilities.
    pub fn initialize(&self) -> anyhow::Result<Value> {
        self.request(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": self.options.fs, "writeTextFile": self.options.fs},
                    "terminal": self.options.terminal,
                },
                "clientInfo": {"name": "acp-usage-tests", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
    }

    /// `session/new` in `cwd`; returns the whole result.
    pub fn new_session(&self, cwd: &Path) -> anyhow::Result<Value> {
        self.request("session/new", json!({"cwd": cwd, "mcpServers": []}))
    }

    /// `session/prompt` with one text block; returns the whole result.
    pub fn prompt(&self, session_id: &str, text: &str) -> anyhow::Result<Value> {
        self.request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_file).unwrap_or_default()
    }

    pub fn stderr_tail(&self, n_lines: usize) -> String {
        let stderr = self.stderr();
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(n_lines)..].join("\n")
    }

    /// The transcript as JSON lines `{"dir":"out"|"in","msg":…}` (`"raw"` for non-JSON lines).
    pub fn transcript_jsonl(&self) -> String {
        let mut out = String::new();
        for line in self.all_lines() {
            let dir = match line.dir {
                Dir::Out => "out",
                Dir::In => "in",
            };
            let entry = match &line.json {
                Some(message) => json!({"dir": dir, "msg": message}),
                None => json!({"dir": dir, "raw": line.text()}),
            };
            out.push_str(&entry.to_string());
            out.push('\n');
        }
        out
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin (the editor went away) and waits up to `grace` for the child to exit.
    pub fn close_stdin_and_wait(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.shared.stdin.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        self.wait_exit(grace)
    }

    /// Waits up to `timeout` for the child to exit, its stdin left open (e.g. after a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends the child: stdin closed, then SIGTERM and SIGKILL to its process group.
    pub fn shutdown(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.close_stdin_and_wait(Duration::from_secs(3)) {
            kill_group(self.child.id(), libc::SIGKILL);
            return Some(status);
        }
        kill_group(self.child.id(), libc::SIGTERM);
        if let Some(status) = self.close_stdin_and_wait(Duration::from_secs(2)) {
            kill_group(self.child.id(), libc::SIGKILL);
            return Some(status);
        }
        kill_group(self.child.id(), libc::SIGKILL);
        self.child.wait().ok()
    }
}

impl Drop for AcpClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Signals the process group led by `pid` (we spawned it with `process_group(0)`). Leftovers of
/// an exited leader may still be in the group, which is why this runs even after a clean exit.
fn kill_group(pid: u32, signal: i32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    // SAFETY: kill(2) has no memory-safety preconditions; a stale group only yields ESRCH.
    unsafe {
        libc::kill(-pid, signal);
    }
}

/// Answers a request from the agent (it has both `method` and `id`); ignores everything else.
fn answer_agent_request(shared: &Shared, message: &Value, options: ClientOptions) {
    let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) else { return };
    let params = &message["params"];
    let outcome = match method {
        "session/request_permission" => Ok(choose_permission(params)),
        "fs/read_text_file" if options.fs => read_text_file(params),
        "fs/write_text_file" if options.fs => write_text_file(params),
        _ => Err((-32601, format!("Method not found: {method}"))),
    };
    let response = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    // The child may be gone; the transcript still records the attempt.
    let _ = shared.send(response.to_string().into_bytes());
}

/// Allow: once if offered, else always, else the first option.
fn choose_permission(params: &Value) -> Value {
    let options = params["options"].as_array().map(Vec::as_slice).unwrap_or_default();
    let pick = ["allow_once", "allow_always"]
        .iter()
        .find_map(|kind| options.iter().find(|option| option["kind"] == *kind))
        .or(options.first());
    match pick {
        Some(option) => json!({"outcome": {"outcome": "selected", "optionId": option["optionId"]}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

fn read_text_file(params: &Value) -> Result<Value, (i64, String)> {
    let path = params["path"].as_str().unwrap_or_default();
    let text = std::fs::read_to_string(path).map_err(|err| (-32002, format!("{path}: {err}")))?;
    // `line` is 1-based; `limit` counts lines.
    let skip = params["line"].as_u64().unwrap_or(1).saturating_sub(1) as usize;
    let take = params["limit"].as_u64().map_or(usize::MAX, |limit| limit as usize);
    let content: String = text.split_inclusive('\n').skip(skip).take(take).collect();
    Ok(json!({"content": content}))
}

fn write_text_file(params: &Value) -> Result<Value, (i64, String)> {
    let path = params["path"].as_str().unwrap_or_default();
    let content = params["content"].as_str().unwrap_or_default();
    std::fs::write(path, content).map_err(|err| (-32603, format!("{path}: {err}")))?;
    Ok(json!({}))
}
