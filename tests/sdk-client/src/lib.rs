//! An ACP client built on the official Rust SDK (`agent-client-protocol` 5.2.0), for end-to-end tests.
//!
//! It spawns an agent command (the relay, or any ACP agent) on stdio, runs `initialize`,
//! `session/new`, one `session/prompt` per scripted prompt and optionally `session/load`, answers
//! the agent's requests (permission: allow; `fs/*`: the real file system) and records everything.
//!
//! Every message is parsed by the SDK's typed handlers, so a run that succeeds proves the SDK
//! accepts what the agent sent. The typed types are forgiving in places (`PromptResponse.usage`,
//! `UsageUpdate.cost` and every `_meta` fall back to `None` on a malformed value), so the raw
//! wire JSON is recorded as well, next to the typed value re-serialised, and [`lost_fields`]
//! lists what the typed parse dropped or changed.
//!
//! This crate is a workspace of its own (see its Cargo.toml): the end-to-end tests
//! (`acp_usage_tests::sdk_client`) run its `sdk-client` binary, which writes the
//! [`SdkTranscript`] as JSON (`--transcript FILE`).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use acp_usage_sdk_client::{SdkScript, run_session};
//! let cmd = vec!["acp-usage".to_owned(), "--".to_owned(), "my-agent".to_owned()];
//! let t = run_session(&cmd, &[], std::path::Path::new("/tmp"), &SdkScript::new().prompt("hi"))?;
//! assert!(t.usage_updates().next().is_some());
//! assert!(t.lost().is_empty());
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, FileSystemCapabilities, Implementation, InitializeRequest,
    LoadSessionRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
    ReadTextFileRequest, ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, TextContent,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{Agent, Client, JsonRpcMessage as _, Lines, UntypedMessage};
use anyhow::{Context as _, anyhow, bail};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

mod run;
pub use run::{SdkResponse, SdkScript, SdkTranscript, SdkUpdate};

/// The `clientInfo.name` this client sends in `initialize`.
pub const CLIENT_NAME: &str = "acp-usage-sdk-client";

/// Lists what `typed` (a value parsed by the SDK and serialised again) lacks or changed compared
/// with `raw` (the wire JSON), as JSON paths with a short reason. Keys whose raw value is `null`
/// may be absent from `typed`; numbers compare by value (`1` equals `1.0`).
#[must_use]
pub fn lost_fields(raw: &Value, typed: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff("$", raw, typed, &mut out);
    out
}

fn diff(path: &str, raw: &Value, typed: &Value, out: &mut Vec<String>) {
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, rv) in r {
                let p = format!("{path}.{k}");
                match t.get(k) {
                    Some(tv) => diff(&p, rv, tv, out),
                    None if rv.is_null() => {}
                    None => out.push(format!("{p}: dropped ({rv})")),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            if r.len() != t.len() {
                out.push(format!("{path}: {} items became {}", r.len(), t.len()));
            }
            for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                diff(&format!("{path}[{i}]"), rv, tv, out);
            }
        }
        (Value::Number(r), Value::Number(t)) => {
            let same = match (r.as_u64(), t.as_u64(), r.as_i64(), t.as_i64()) {
                (Some(a), Some(b), _, _) => a == b,
                (_, _, Some(a), Some(b)) => a == b,
                _ => r.as_f64() == t.as_f64(),
            };
            if !same {
                out.push(format!("{path}: {r} became {t}"));
            }
        }
        // `session/load` answered `null` reads as an empty response.
        (Value::Null, Value::Object(t)) if t.is_empty() => {}
        (r, t) if r == t => {}
        (r, t) => out.push(format!("{path}: {r} became {t}")),
    }
}

/// Runs a session (blocking; creates its own tokio runtime). `command[0]` is the program;
/// `env` is added to the inherited environment; `cwd` is both the agent's working directory and
/// the session's `cwd` (made absolute).
pub fn run_session(
    command: &[String],
    env: &[(String, String)],
    cwd: &Path,
    script: &SdkScript,
) -> anyhow::Result<SdkTranscript> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot build a tokio runtime")?
        .block_on(run_session_async(command, env, cwd, script))
}

/// Direction of a wire line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// From the agent to us.
    In,
    /// From us to the agent.
    Out,
}

type WireLog = Arc<Mutex<Vec<(Dir, String)>>>;

fn push_line(log: &WireLog, dir: Dir, line: &str) {
    log.lock().unwrap_or_else(PoisonError::into_inner).push((dir, line.to_owned()));
}

/// What the typed side recorded, in dispatch order.
#[derive(Debug, Default)]
struct Typed {
    /// Each `session/update`: the typed update re-serialised, or the SDK's parse error.
    updates: Vec<Result<Value, String>>,
    /// label → typed response.
    responses: HashMap<String, Value>,
    session_id: Option<String>,
    loaded: bool,
}

/// [`run_session`] for async callers (needs a tokio runtime with IO and time enabled).
pub async fn run_session_async(
    command: &[String],
    env: &[(String, String)],
    cwd: &Path,
    script: &SdkScript,
) -> anyhow::Result<SdkTranscript> {
    let (program, args) = command.split_first().ok_or_else(|| anyhow!("empty agent command"))?;
    let cwd = std::path::absolute(cwd).with_context(|| format!("bad cwd {}", cwd.display()))?;
    // A relative path with a slash would be looked up in `cwd`; resolve it against ours instead.
    let program =
        if program.contains('/') { std::path::absolute(program)? } else { PathBuf::from(program) };
    let mut child = tokio::process::Command::new(&program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if script.inherit_stderr { Stdio::inherit() } else { Stdio::piped() })
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let stderr_task = child.stderr.take().map(|mut err| {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf).await;
            String::from_utf8_lossy(&buf).into_owned()
        })
    });

    let wire: WireLog = Arc::default();
    let typed: Arc<Mutex<Typed>> = Arc::default();
    let transport = lines_transport(stdin, stdout, &wire);

    let run = drive(transport, cwd.clone(), script.clone(), typed.clone());
    let outcome = match tokio::time::timeout(script.timeout, run).await {
        Ok(res) => res.map_err(|e| anyhow!("ACP error: {e}")),
        Err(_) => Err(anyhow!("timed out after {:?}", script.timeout)),
    };

    // The transport (and with it the agent's stdin) is gone now; give the agent a moment to exit.
    if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    let stderr = match stderr_task {
        Some(task) => tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => String::new(),
    };

    let wire = std::mem::take(&mut *wire.lock().unwrap_or_else(PoisonError::into_inner));
    let typed = std::mem::take(&mut *typed.lock().unwrap_or_else(PoisonError::into_inner));
    if let Err(err) = outcome {
        return Err(err.context(failure_context(&wire, &stderr)));
    }
    build_transcript(&wire, typed, stderr).map_err(|e| e.context(failure_context(&wire, "")))
}

/// The last wire lines and stderr, for error messages.
fn failure_context(wire: &[(Dir, String)], stderr: &str) -> String {
    let start = wire.len().saturating_sub(12);
    let mut s = String::from("last ACP lines:");
    for (dir, line) in &wire[start..] {
        let arrow = if *dir == Dir::In { "agent→client" } else { "client→agent" };
        let short: String = line.chars().take(600).collect();
        s.push_str(&format!("\n  {arrow} {short}"));
    }
    if !stderr.is_empty() {
        let tail: String =
            stderr.chars().rev().take(4000).collect::<Vec<_>>().into_iter().rev().collect();
        s.push_str(&format!("\nagent stderr (tail):\n{tail}"));
    }
    s
}

/// The SDK's `Lines` transport over the child's pipes, logging every line both ways.
fn lines_transport(
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    wire: &WireLog,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let out_log = wire.clone();
    let outgoing = Box::pin(futures::sink::unfold(stdin, move |mut stdin, line: String| {
        push_line(&out_log, Dir::Out, &line);
        async move {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await?;
            Ok::<_, std::io::Error>(stdin)
        }
    }));
    let in_log = wire.clone();
    let reader = Some(BufReader::new(stdout).lines());
    let incoming = Box::pin(futures::stream::unfold(reader, move |reader| {
        let in_log = in_log.clone();
        async move {
            let mut lines = reader?;
            match lines.next_line().await {
                Ok(Some(line)) => {
                    push_line(&in_log, Dir::In, &line);
                    Some((Ok(line), Some(lines)))
                }
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        }
    }));
    Lines::new(outgoing, incoming)
}

fn lock(typed: &Mutex<Typed>) -> std::sync::MutexGuard<'_, Typed> {
    typed.lock().unwrap_or_else(PoisonError::into_inner)
}

fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value)
        .unwrap_or_else(|e| Value::String(format!("<cannot serialise: {e}>")))
}

/// The SDK client proper.
async fn drive(
    transport: impl agent_client_protocol::ConnectTo<Client> + 'static,
    cwd: PathBuf,
    script: SdkScript,
    typed: Arc<Mutex<Typed>>,
) -> agent_client_protocol::Result<()> {
    let typed_updates = typed.clone();
    Client
        .v1()
        .name(CLIENT_NAME)
        .on_receive_notification(
            // Untyped, then parsed with the very function the SDK's typed `SessionNotification`
            // handler uses: a typed handler never sees a notification that fails to parse (the SDK
            // logs and drops it), and we want to record those too.
            async move |msg: UntypedMessage, _cx| {
                if SessionNotification::matches_method(&msg.method) {
                    let parsed = SessionNotification::parse_message(&msg.method, &msg.params)
                        .map(|n| to_json(&n.update))
                        .map_err(|e| e.to_string());
                    lock(&typed_updates).updates.push(parsed);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest, responder, _cx| {
                let allow = [PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways]
                    .iter()
                    .find_map(|kind| req.options.iter().find(|o| o.kind == *kind));
                let outcome = match allow {
                    Some(o) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        o.option_id.clone(),
                    )),
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ReadTextFileRequest, responder, _cx| match read_text(&req) {
                Ok(content) => responder.respond(ReadTextFileResponse::new(content)),
                Err(e) => responder.respond_with_error(
                    agent_client_protocol::Error::internal_error()
                        .data(format!("{}: {e}", req.path.display())),
                ),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: WriteTextFileRequest, responder, _cx| {
                let res = req.path.parent().map_or(Ok(()), std::fs::create_dir_all);
                match res.and_then(|()| std::fs::write(&req.path, &req.content)) {
                    Ok(()) => responder.respond(WriteTextFileResponse::new()),
                    Err(e) => responder.respond_with_error(
                        agent_client_protocol::Error::internal_error()
                            .data(format!("{}: {e}", req.path.display())),
                    ),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let init = cx
                .send_request(
                    InitializeRequest::new(ProtocolVersion::V1)
                        .client_capabilities(
                            ClientCapabilities::new()
                                .fs(FileSystemCapabilities::new()
                                    .read_text_file(true)
                                    .write_text_file(true))
                                .terminal(false),
                        )
                        .client_info(Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION"))),
                )
                .block_task()
                .await?;
            let can_load = init.agent_capabilities.load_session;
            lock(&typed).responses.insert("initialize".into(), to_json(&init));

            let new = cx.send_request(NewSessionRequest::new(cwd.clone())).block_task().await?;
            let session_id = new.session_id.clone();
            {
                let mut t = lock(&typed);
                t.responses.insert("session/new".into(), to_json(&new));
                t.session_id = Some(session_id.0.to_string());
            }

            for (i, text) in script.prompts.iter().enumerate() {
                let prompt = vec![ContentBlock::Text(TextContent::new(text.clone()))];
                let resp = cx
                    .send_request(PromptRequest::new(session_id.clone(), prompt))
                    .block_task()
                    .await?;
                lock(&typed).responses.insert(format!("session/prompt#{i}"), to_json(&resp));
            }

            if script.load && can_load {
                let resp = cx
                    .send_request(LoadSessionRequest::new(session_id.clone(), cwd.clone()))
                    .block_task()
                    .await?;
                let mut t = lock(&typed);
                t.responses.insert("session/load".into(), to_json(&resp));
                t.loaded = true;
            }
            tokio::time::sleep(script.linger).await;
            Ok(())
        })
        .await
}

/// `fs/read_text_file`: `line` is 1-based, `limit` a number of lines.
fn read_text(req: &ReadTextFileRequest) -> std::io::Result<String> {
    let text = std::fs::read_to_string(&req.path)?;
    if req.line.is_none() && req.limit.is_none() {
        return Ok(text);
    }
    let skip = req.line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = req.limit.map_or(usize::MAX, |l| l as usize);
    Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
}

/// Turns the wire log and the typed records into a transcript.
fn build_transcript(
    wire: &[(Dir, String)],
    typed: Typed,
    stderr: String,
) -> anyhow::Result<SdkTranscript> {
    // Our requests: id → (method, label).
    let mut sent: HashMap<String, (String, String)> = HashMap::new();
    let mut prompt_count = 0usize;
    let mut responses: HashMap<String, SdkResponse> = HashMap::new();
    let mut updates = Vec::new();
    let mut events = Vec::new();
    let mut after = String::from("(start)");
    let mut typed_updates = typed.updates.into_iter();

    for (dir, line) in wire {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            if *dir == Dir::In {
                events.push(serde_json::json!({"kind": "garbage", "line": line}));
            }
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|id| !id.is_null()).map(Value::to_string);
        match (dir, method, id) {
            (Dir::Out, Some(method), Some(id)) => {
                let label = if method == "session/prompt" {
                    prompt_count += 1;
                    format!("session/prompt#{}", prompt_count - 1)
                } else {
                    method.to_owned()
                };
                sent.insert(id, (method.to_owned(), label));
            }
            (Dir::Out, ..) => {}
            (Dir::In, Some("session/update"), None) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let raw = params.get("update").cloned().unwrap_or(Value::Null);
                let parsed = typed_updates.next().ok_or_else(|| {
                    anyhow!("the SDK did not deliver session/update #{}", updates.len())
                })?;
                let (typed, lost) = match parsed {
                    Ok(typed) => {
                        let lost = lost_fields(&raw, &typed);
                        (typed, lost)
                    }
                    Err(e) => (
                        Value::Null,
                        vec![format!("$: rejected by the SDK (a typed client never sees it): {e}")],
                    ),
                };
                let session_id =
                    params.get("sessionId").and_then(Value::as_str).unwrap_or("").to_owned();
                events.push(serde_json::json!({
                    "kind": "update", "after": after, "sessionId": session_id, "update": raw, "lost": lost,
                }));
                updates.push(SdkUpdate { after: after.clone(), session_id, raw, typed, lost });
            }
            (Dir::In, Some(method), None) => {
                events.push(serde_json::json!({"kind": "notification", "method": method, "params": msg.get("params")}));
            }
            (Dir::In, Some(method), Some(_)) => {
                events.push(serde_json::json!({
                    "kind": "request", "method": method, "id": msg.get("id"), "params": msg.get("params"),
                }));
            }
            (Dir::In, None, id) => {
                let Some((method, label)) = id.as_ref().and_then(|id| sent.get(id)).cloned() else {
                    events.push(serde_json::json!({"kind": "unmatched_response", "message": msg}));
                    continue;
                };
                if let Some(err) = msg.get("error") {
                    events.push(serde_json::json!({"kind": "response", "method": method, "label": label, "error": err}));
                    bail!("{label} failed: {err}");
                }
                let raw = msg.get("result").cloned().unwrap_or(Value::Null);
                let typed = typed.responses.get(&label).cloned().unwrap_or(Value::Null);
                let lost = lost_fields(&raw, &typed);
                events.push(serde_json::json!({
                    "kind": "response", "method": method, "label": label, "result": raw, "lost": lost,
                }));
                after.clone_from(&label);
                responses.insert(label.clone(), SdkResponse { method, label, raw, typed, lost });
            }
        }
    }
    if typed_updates.next().is_some() {
        bail!("the SDK delivered more session/update notifications than the wire carried");
    }

    let mut take =
        |label: &str| responses.remove(label).ok_or_else(|| anyhow!("no response to {label}"));
    let initialize = take("initialize")?;
    let new_session = take("session/new")?;
    let prompts = (0..prompt_count)
        .map(|i| take(&format!("session/prompt#{i}")))
        .collect::<Result<_, _>>()?;
    let load = if typed.loaded { Some(take("session/load")?) } else { None };
    Ok(SdkTranscript {
        session_id: typed.session_id.unwrap_or_default(),
        initialize,
        new_session,
        prompts,
        load,
        updates,
        events,
        stderr,
    })
}
