//! `acp-usage demo`: a complete metered session through the real relay, with no external agent.
//!
//! The demo is the scripted *client* (the editor's side). It starts this same binary as the
//! relay wrapping the scripted agent (`acp-usage -- acp-usage demo-agent`, see [`agent`]),
//! drives a session over the relay's stdin/stdout, and prints every message for a human
//! ([`render`]): initialize, session/new, a plain question, a tool-use turn, a model switch, a
//! third prompt, session/load of the same session, a fourth prompt, and acp-usage's own `/usage`.
//! The agent reports a per-turn `usage` on its prompt results and, in the third turn, one
//! `usage_update` with its plan's windows (as claude-agent-acp on a subscription); every other
//! `usage_update` shown is one acp-usage added, and Zed's meter shows from the third turn on.
//!
//! This is the one command whose stdout is for humans. Every read has a timeout, so a broken
//! relay ends the demo with its stderr instead of a hang.

pub mod agent;
pub mod render;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::options::RelayOptions;
use agent::{CWD, SECOND_MODEL, SESSION_ID, TURNS};
use render::Printer;

/// Longest wait for any one message from the relay.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for the relay to exit once the demo closed its stdin.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the demo, printing to stdout (with the raw JSON lines too when `raw`). Of the relay's
/// options it passes on the catalog, the config file and the log file.
pub fn run(args: &RelayOptions, raw: bool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("finding the acp-usage binary")?;
    let mut relay = Relay::spawn(relay_command(&exe, args)).context("starting the relay")?;
    let mut printer = Printer::new(io::stdout().lock(), raw);
    let res = script(&mut relay, &mut printer).and_then(|()| relay.finish(&mut printer));
    let _ = printer.into_inner().flush();
    match res {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) if is_broken_pipe(&err) => {
            // `acp-usage demo | head`: the reader has seen enough.
            relay.abort();
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            relay.abort();
            let stderr = relay.stderr();
            let mut e = io::stderr().lock();
            let _ = writeln!(e, "acp-usage demo: {err:#}");
            if !stderr.trim().is_empty() {
                let _ = writeln!(e, "The relay's stderr:\n{}", stderr.trim_end());
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `<exe> [--catalog F] [--config F] [--log-file F] -- <exe> demo-agent`.
fn relay_command(exe: &Path, args: &RelayOptions) -> Command {
    let mut cmd = Command::new(exe);
    for (flag, value) in
        [("--catalog", &args.catalog), ("--config", &args.config), ("--log-file", &args.log_file)]
    {
        if let Some(v) = value {
            cmd.arg(flag).arg(v);
        }
    }
    cmd.arg("--").arg(exe).arg("demo-agent");
    // The demo's numbers must not depend on (or change) what earlier runs learned.
    cmd.env(crate::sinks::ledger::LEDGER_ENV, "off");
    cmd
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The scripted session.
fn script<W: Write>(relay: &mut Relay, p: &mut Printer<W>) -> anyhow::Result<()> {
    p.text("acp-usage demo: a scripted editor talks to a scripted agent through the real relay,")?;
    p.text("  editor (this demo) ⇄ acp-usage ⇄ agent (acp-usage demo-agent).")?;
    p.text("The agent reports a per-turn usage on its prompt results (Anthropic style, like")?;
    p.text(
        "claude-agent-acp), one usage_update with its plan's windows (as claude-agent-acp does",
    )?;
    p.text("on a subscription) and its command list. Lines marked INJECTED were added by")?;
    p.text("acp-usage (its usage updates, its own /usage command and the answers to it), lines")?;
    p.text("marked REWRITTEN were changed by it; everything else passed through unchanged.")?;

    let mut s = Session { relay, next_id: 0 };
    p.section("start")?;
    s.request(
        p,
        "initialize",
        json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
            "clientInfo": {"name": "acp-usage-demo-client", "version": env!("CARGO_PKG_VERSION")},
        }),
        false,
    )?;
    s.request(p, "session/new", json!({"cwd": CWD, "mcpServers": []}), true)?;
    // acp-usage lists its own command once the session is open (the agent sent no list yet).
    s.until(p, "session/new", "available_commands_update")?;

    p.section("prompt 1: a plain question (one model call)")?;
    s.prompt(p, 0)?;
    p.section("prompt 2: a tool-use turn (two model calls)")?;
    s.prompt(p, 1)?;
    p.section("switching the model")?;
    s.request(
        p,
        "session/set_config_option",
        json!({"sessionId": SESSION_ID, "configId": "model", "value": SECOND_MODEL}),
        true,
    )?;
    p.section("prompt 3: on the new model")?;
    s.prompt(p, 2)?;
    p.section("reloading the session (the agent replays its history)")?;
    s.request(
        p,
        "session/load",
        json!({"sessionId": SESSION_ID, "cwd": CWD, "mcpServers": []}),
        true,
    )?;
    p.section("prompt 4: after the reload")?;
    s.prompt(p, 3)?;
    p.section("/usage: answered by acp-usage itself (the agent never sees it; no tokens)")?;
    p.answering(true);
    let params = json!({"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": "/usage"}]});
    s.request(p, "session/prompt", params, false)?;
    p.summary()?;
    Ok(())
}

/// The client's side of the session.
struct Session<'a> {
    relay: &'a mut Relay,
    next_id: u64,
}

impl Session<'_> {
    fn prompt<W: Write>(&mut self, p: &mut Printer<W>, n: usize) -> anyhow::Result<()> {
        let params =
            json!({"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": TURNS[n].prompt}]});
        self.request(p, "session/prompt", params, false)
    }

    /// Sends a request and prints everything up to its response; with `update_after`, also up
    /// to the `usage_update` acp-usage sends right after that response.
    fn request<W: Write>(
        &mut self,
        p: &mut Printer<W>,
        method: &str,
        params: Value,
        update_after: bool,
    ) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let line = msg.to_string();
        p.editor(&line, &msg)?;
        self.relay.send(&line)?;
        loop {
            let (line, msg) = self.next(method)?;
            let is_response = msg.get("method").is_none() && msg.get("id") == Some(&json!(id));
            p.agent(&line, &msg, is_response.then_some(method))?;
            if is_response {
                if let Some(err) = msg.get("error") {
                    bail!("the agent answered {method} with an error: {err}");
                }
                break;
            }
        }
        if update_after {
            self.until(p, method, "usage_update")?;
        }
        Ok(())
    }

    /// Prints what comes up to the next session update of `kind` (after `method`'s answer).
    fn until<W: Write>(
        &mut self,
        p: &mut Printer<W>,
        method: &str,
        kind: &str,
    ) -> anyhow::Result<()> {
        loop {
            let (line, msg) = self.next(method)?;
            p.agent(&line, &msg, None)?;
            if msg.pointer("/params/update/sessionUpdate") == Some(&json!(kind)) {
                return Ok(());
            }
        }
    }

    fn next(&mut self, waiting_for: &str) -> anyhow::Result<(String, Value)> {
        let line = self
            .relay
            .next_line(READ_TIMEOUT)
            .with_context(|| format!("waiting for the answer to {waiting_for}"))?
            .ok_or_else(|| {
                anyhow!("the relay ended its output while the demo waited for {waiting_for}")
            })?;
        let msg: Value = serde_json::from_str(&line)
            .with_context(|| format!("the relay wrote a line that is not JSON: {line}"))?;
        Ok((line, msg))
    }
}

/// The relay child: its stdin, its stdout as lines (read on a thread, so reads can time out),
/// and its stderr collected on another thread.
struct Relay {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<io::Result<String>>,
    stderr: Receiver<String>,
}

impl Relay {
    fn spawn(mut cmd: Command) -> anyhow::Result<Relay> {
        let mut child =
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let end = line.is_err();
                if tx.send(line).is_err() || end {
                    return;
                }
            }
        });
        let (err_tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            let _ = err_tx.send(String::from_utf8_lossy(&buf).into_owned());
        });
        let stdin = child.stdin.take();
        Ok(Relay { child, stdin, lines, stderr: err_rx })
    }

    fn send(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the relay's stdin is closed")?;
        let res = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush());
        // A broken pipe here is the relay's, not ours: report it as the relay ending early.
        res.map_err(|e| anyhow!("writing to the relay: {e}"))
    }

    /// The next line of the relay's stdout; `None` at its end.
    fn next_line(&mut self, timeout: Duration) -> anyhow::Result<Option<String>> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(Some(line)),
            Ok(Err(e)) => Err(anyhow!("reading from the relay: {e}")),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => bail!("no message from the relay within {timeout:?}"),
        }
    }

    /// Closes the relay's stdin (the editor leaves), prints anything it still writes, and checks
    /// that it exits cleanly.
    fn finish<W: Write>(&mut self, p: &mut Printer<W>) -> anyhow::Result<()> {
        self.stdin = None;
        let deadline = Instant::now() + EXIT_TIMEOUT;
        while let Some(line) = self.next_line(deadline.saturating_duration_since(Instant::now()))? {
            let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            p.agent(&line, &msg, None)?;
        }
        loop {
            if let Some(status) = self.child.try_wait()? {
                if status.success() {
                    return Ok(());
                }
                bail!("the relay exited with {status}");
            }
            if Instant::now() >= deadline {
                bail!(
                    "the relay did not exit within {EXIT_TIMEOUT:?} of the demo closing its stdin"
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Ends the relay after a failure: close its stdin, give it a moment, then kill it.
    fn abort(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Everything the relay wrote to stderr (call after it ended; waits a second at most for a
    /// grandchild that still holds the pipe).
    fn stderr(&mut self) -> String {
        self.stderr.recv_timeout(Duration::from_secs(1)).unwrap_or_default()
    }
}
