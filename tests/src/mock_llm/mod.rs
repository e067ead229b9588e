//! A scripted mock of four LLM APIs (Anthropic Messages, OpenAI Responses and Chat Completions,
//! Gemini) on 127.0.0.1.
//!
//! Real agents run against it offline. It answers main-agent calls from a [`Script`] in order,
//! answers auxiliary calls (title generation, next-speaker checks) from a separate default so they
//! never shift the script, and records every request with the usage it served, so a test knows
//! exactly what the agent was billed for.
//!
//! ```no_run
//! use acp_usage_tests::mock_llm::{MockLlm, Script, Step, Usage};
//! let mock = MockLlm::start(Script::new(vec![
//!     Step::tool("Let me look.", Usage::anthropic(10, 2000, 8000, 30)),
//!     Step::text("Done.", Usage::anthropic(20, 100, 10_000, 5)),
//! ]))
//! .unwrap();
//! let base_url = mock.url(); // http://127.0.0.1:PORT
//! let mark = mock.mark();
//! // ... drive an agent ...
//! let billed = mock.billed_since(mark);
//! # let _ = (base_url, billed);
//! ```

mod anthropic;
mod chat;
mod codeassist;
mod gemini;
pub mod http;
mod openai;
pub mod record;
pub mod script;
#[cfg(test)]
mod tests;
pub mod websocket;

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use self::http::lock;
pub use self::http::{Request, Response};
pub use self::record::{Call, CallKind, Provider, Received, sum_usage};
pub use self::script::{Script, Step, ToolCall, Usage};

/// A running mock server; stops when dropped.
#[derive(Debug)]
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    stopping: AtomicBool,
    /// Distinguishes this server's message ids from any other run's.
    tag: String,
    /// Serve the Responses WebSocket (`MockLlm::enable_websocket`); otherwise an upgrade is
    /// declined with 426.
    websocket: AtomicBool,
    /// The other ports it serves on ([`MockLlm::listen_also`]), stopped with it.
    more: Mutex<Vec<SocketAddr>>,
}

#[derive(Debug)]
struct State {
    script: Script,
    next_step: usize,
    next_id: u64,
    calls: Vec<Call>,
    log: Option<File>,
    /// Every request's credentials, in arrival order: in memory only, never logged.
    received: Vec<Received>,
    /// Echo a one-line summary of each call to stderr (the `mock-llm` binary).
    echo: bool,
}

/// How a provider module classified a request.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub provider: Provider,
    pub kind: CallKind,
    pub model: Option<String>,
    pub streamed: bool,
    pub declared_tools: Vec<String>,
}

/// What a provider module answered.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub response: Response,
    pub native_usage: Option<Value>,
    pub tool_call: Option<Value>,
}

impl MockLlm {
    /// Binds an ephemeral port on 127.0.0.1 and serves `script`.
    pub fn start(script: Script) -> anyhow::Result<MockLlm> {
        MockLlm::start_on(0, script)
    }

    /// Binds `port` on 127.0.0.1 (0 = ephemeral).
    pub fn start_on(port: u16, script: Script) -> anyhow::Result<MockLlm> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                script,
                next_step: 0,
                next_id: 0,
                calls: Vec::new(),
                log: None,
                received: Vec::new(),
                echo: false,
            }),
            stopping: AtomicBool::new(false),
            websocket: AtomicBool::new(false),
            more: Mutex::new(Vec::new()),
            tag: format!("{:x}{:05x}", std::process::id(), nanos & 0xfffff),
        });
        let accept_shared = Arc::clone(&shared);
        thread::Builder::new().name(format!("mock-llm-{}", addr.port())).spawn(move || {
            http::accept_each(
                listener,
                accept_shared,
                "mock-llm",
                |s| &s.stopping,
                serve_connection,
            )
        })?;
        Ok(MockLlm { addr, shared })
    }

    /// Serves the same script and call log on another port of 127.0.0.1 as well (an agent's
    /// second base URL, whose calls a test tells apart by [`Call::port`]); its
    /// `http://127.0.0.1:PORT`.
    pub fn listen_also(&self) -> anyhow::Result<String> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        lock(&self.shared.more).push(addr);
        let shared = Arc::clone(&self.shared);
        thread::Builder::new().name(format!("mock-llm-{}", addr.port())).spawn(move || {
            http::accept_each(listener, shared, "mock-llm", |s| &s.stopping, serve_connection)
        })?;
        Ok(format!("http://{addr}"))
    }

    /// Also append every call (without request bodies) to `path` as JSON lines.
    pub fn log_to(&self, path: &Path) -> anyhow::Result<()> {
        let file = File::options().create(true).append(true).open(path)?;
        self.state().log = Some(file);
        Ok(())
    }

    /// Serves OpenAI Responses over a WebSocket too (`GET …/responses` with `Upgrade:
    /// websocket`), as OpenAI's API does for Codex's built-in provider. Off by default: an
    /// upgrade is then declined with 426 and the client stays on HTTP.
    pub fn enable_websocket(&self) {
        self.shared.websocket.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Print a summary line per call to stderr.
    pub fn echo_to_stderr(&self) {
        self.state().echo = true;
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL of the Mistral flavour of Chat Completions, `http://127.0.0.1:PORT/mistral/v1`
    /// (usage always on the finishing chunk, each tool call whole in one delta).
    pub fn mistral_url(&self) -> String {
        format!("http://{}{}v1", self.addr, chat::MISTRAL_PREFIX)
    }

    /// Replaces the remaining script: the next main call gets `steps[0]`.
    pub fn set_script(&self, script: Script) {
        let mut state = self.state();
        state.script = script;
        state.next_step = 0;
    }

    /// Appends steps to the script.
    pub fn push_steps(&self, steps: impl IntoIterator<Item = Step>) {
        self.state().script.steps.extend(steps);
    }

    /// Script steps not served yet.
    pub fn steps_left(&self) -> usize {
        let state = self.state();
        state.script.steps.len().saturating_sub(state.next_step)
    }

    /// A position in the call log, for [`MockLlm::calls_since`].
    pub fn mark(&self) -> usize {
        self.state().calls.len()
    }

    /// Every request received so far (model calls, listings, setup calls, declined upgrades),
    /// with the credentials it carried. For assertions only: never print a credential.
    pub fn received(&self) -> Vec<Received> {
        self.state().received.clone()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    pub fn calls_since(&self, mark: usize) -> Vec<Call> {
        self.state().calls[mark..].to_vec()
    }

    /// The calls since `mark` that the provider bills (main and auxiliary model calls).
    pub fn billed_since(&self, mark: usize) -> Vec<Call> {
        self.calls_since(mark).into_iter().filter(|call| call.kind.is_billed()).collect()
    }

    /// The main-agent model calls since `mark`.
    pub fn main_since(&self, mark: usize) -> Vec<Call> {
        self.calls_since(mark).into_iter().filter(|call| call.kind == CallKind::Main).collect()
    }

    /// Requests the mock could not serve (404), since `mark`.
    pub fn unhandled_since(&self, mark: usize) -> Vec<Call> {
        self.calls_since(mark).into_iter().filter(|call| call.kind == CallKind::Unhandled).collect()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        http::stop(&self.addr, &self.shared.stopping);
        for addr in lock(&self.shared.more).iter() {
            http::stop(addr, &self.shared.stopping);
        }
    }
}

fn serve_connection(stream: &TcpStream, shared: &Shared) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let Some(request) = http::read_request(stream)? else { return Ok(()) };
    note_credentials(shared, &request);
    if websocket::is_upgrade(&request) {
        return websocket::serve(stream, &request, shared);
    }
    let port = stream.local_addr().map_or(0, |a| a.port());
    let (reply, response_id, step_headers) = answer(request, shared, false, port);
    let mut headers = vec![("request-id", format!("req_mock_{response_id}"))];
    headers.extend(step_headers.iter().map(|(k, v)| (k.as_str(), v.clone())));
    http::write_response(stream, &reply.response, &headers)?;
    Ok(())
}

/// Answers one model-API request (`websocket`: a `response.create` message, served as a
/// stream) that came to `port` and records the call; returns the reply, the call's response id,
/// and the scripted step's own response headers (rate limits; the default answers have none).
fn answer(
    request: Request,
    shared: &Shared,
    websocket: bool,
    port: u16,
) -> (Reply, String, Vec<(String, String)>) {
    let body = request_json(&request);
    let route = anthropic::route(&request, &body)
        .or_else(|| openai::route(&request, &body))
        .or_else(|| chat::route(&request, &body))
        .or_else(|| gemini::route(&request, &body))
        .or_else(|| codeassist::route(&request, &body))
        .unwrap_or(Route {
            provider: Provider::Unknown,
            kind: CallKind::Unhandled,
            model: None,
            streamed: false,
            declared_tools: Vec::new(),
        });

    // Take the step and an id under one lock, so concurrent main calls get distinct steps.
    let (id, step_index, step) = {
        let mut state = lock(&shared.state);
        state.next_id += 1;
        let id = state.next_id;
        let (step_index, step) = match route.kind {
            CallKind::Main => {
                let index = state.next_step;
                match state.script.steps.get(index).cloned() {
                    Some(step) => {
                        state.next_step += 1;
                        (Some(index), Some(step))
                    }
                    None => (None, Some(state.script.default.clone())),
                }
            }
            CallKind::Auxiliary => (None, Some(Step::text("Mock title", state.script.auxiliary))),
            CallKind::Warmup => (None, Some(Step::text("", openai::WARMUP_USAGE))),
            _ => (None, None),
        };
        (id, step_index, step)
    };
    let response_id = format!("{}_{id:04}", shared.tag);

    let mut route = route;
    // Every answer on a WebSocket is a stream of events, whatever `stream` says.
    route.streamed |= websocket;
    let reply = match route.provider {
        Provider::Anthropic => {
            anthropic::respond(&route, &request, &body, step.as_ref(), &response_id)
        }
        Provider::OpenAi => openai::respond(&route, &request, &body, step.as_ref(), &response_id),
        Provider::OpenAiChat => chat::respond(&route, &request, &body, step.as_ref(), &response_id),
        Provider::Gemini => gemini::respond(&route, &request, &body, step.as_ref(), &response_id),
        Provider::CodeAssist => {
            codeassist::respond(&route, &request, &body, step.as_ref(), &response_id)
        }
        Provider::Unknown => Reply {
            response: Response::error(
                404,
                &format!("mock-llm serves no {} {}", request.method, request.target),
            ),
            native_usage: None,
            tool_call: None,
        },
    };
    let mut reply = reply;
    if let (Some(_), Some((status, body))) =
        (step_index, step.as_ref().and_then(|s| s.refusal.clone()))
    {
        reply.response = Response::Json { status, body };
        reply.native_usage = None;
        reply.tool_call = None;
    }
    let status = match &reply.response {
        Response::Json { status, .. } => *status,
        Response::Sse(_) => 200,
    };
    let usage = match (route.kind.is_billed(), status) {
        (true, 200) => step.as_ref().map(|step| step.usage),
        _ => None,
    };
    let mut call = Call {
        seq: 0,
        unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis(),
        method: request.method.clone(),
        target: request.target.clone(),
        provider: route.provider,
        kind: route.kind,
        model: route.model.clone(),
        streamed: route.streamed,
        status,
        usage,
        native_usage: reply.native_usage.clone(),
        script_step: step_index,
        tool_call: reply.tool_call.clone(),
        declared_tools: route.declared_tools.clone(),
        user_agent: request.header("user-agent").map(str::to_owned),
        headers: request
            .headers
            .iter()
            .filter(|(name, _)| NOTED_HEADERS.contains(&name.as_str()))
            .cloned()
            .collect(),
        response_id: response_id.clone(),
        websocket,
        port,
        request_body: body,
        request_bytes: request.body.clone(),
    };

    // Record before answering: once the agent has the response, a test may look for the call.
    {
        let mut state = lock(&shared.state);
        call.seq = state.calls.len();
        if let Some(log) = state.log.as_mut() {
            let _ = writeln!(log, "{}", serde_json::to_string(&call).unwrap_or_default());
        }
        if state.echo {
            eprintln!("{}", summary(&call));
        }
        state.calls.push(call);
    }
    let step_headers = match (step_index, &step) {
        (Some(_), Some(step)) => step.headers.clone(),
        _ => Vec::new(),
    };
    (reply, response_id, step_headers)
}

/// Keeps `request`'s credentials for [`MockLlm::received`].
fn note_credentials(shared: &Shared, request: &Request) {
    let received = Received::of(request);
    lock(&shared.state).received.push(received);
}

/// The request body as JSON, decoded first when it came compressed (Codex signed in with
/// ChatGPT sends its Responses requests as zstd); `Value::Null` when it is no JSON.
fn request_json(request: &Request) -> Value {
    if !request.header("content-encoding").is_some_and(|e| e.eq_ignore_ascii_case("zstd")) {
        return request.json();
    }
    let mut source = request.body.as_slice();
    let mut plain = Vec::new();
    let Ok(mut decoder) = ruzstd::decoding::StreamingDecoder::new(&mut source) else {
        return Value::Null;
    };
    match std::io::Read::read_to_end(&mut decoder, &mut plain) {
        Ok(_) => serde_json::from_slice(&plain).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Headers worth keeping in the call log (the rest is noise or secrets).
const NOTED_HEADERS: &[&str] = &[
    "anthropic-beta",
    "anthropic-version",
    "x-app",
    "originator",
    "x-goog-api-client",
    "content-encoding",
];

/// One line per call, for humans.
pub fn summary(call: &Call) -> String {
    let usage = match &call.usage {
        Some(usage) => format!(
            "in={} (cache r={} w={}) out={} (thought={})",
            usage.input,
            usage.cache_read,
            usage.cache_write(),
            usage.output,
            usage.thought
        ),
        None => "-".to_owned(),
    };
    // A Chat Completions stream without `include_usage`: billed, but the agent saw no number.
    let unsent =
        if call.usage.is_some() && call.native_usage.is_none() { " (not sent)" } else { "" };
    let tool = call.tool_call.as_ref().and_then(|tool| tool["name"].as_str()).unwrap_or("");
    format!(
        "#{} {} {} {:?} model={} stream={} status={} usage: {usage}{unsent} {}{}",
        call.seq,
        call.method,
        call.target,
        call.kind,
        call.model.as_deref().unwrap_or("?"),
        call.streamed,
        call.status,
        if tool.is_empty() { "" } else { "tool=" },
        tool,
    )
}
