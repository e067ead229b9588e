//! The LLM-API tap: a reverse proxy on 127.0.0.1 that the agent's model calls go through, and
//! the usage read from a copy of each response.
//!
//! acp-usage starts the agent with its base-URL settings pointed at
//! `http://127.0.0.1:PORT/<secret>/<route>` (each agent's file in `agents/` says which settings;
//! `point.rs` holds what they share). Each route stands for one upstream: the base URL the agent
//! had, or the provider's public endpoint.
//! A request is forwarded unchanged (`proxy.rs`, on the state and helpers of `http.rs`); its response streams back as the upstream sends
//! it while `watch.rs` reads the usage from a copy (`acp_usage_core::api`), and every billed call
//! becomes a [`TapCall`] on a channel the relay reads. The tap runs on its own thread and runtime
//! so that neither the relay nor the proxy ever waits for the other.

mod call;
mod decode;
mod flights;
mod frames;
mod http;
pub mod limits;
pub mod point;
mod proxy;
mod roots;
mod watch;
mod watched;
mod ws;
mod ws_usage;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use acp_usage_core::TokenRecord;
use acp_usage_core::api::{Api, RequestInfo};
use anyhow::Context as _;
use bytes::Bytes;

pub use flights::{Flights, settled};
pub use point::{Alternate, Notice, Pointing};

/// One upstream the tap forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The path segment after the secret that selects this route (`anthropic`, `openai`, ...).
    pub name: String,
    /// Where its requests go: scheme, host, port and base path (`https://api.anthropic.com`,
    /// `http://127.0.0.1:8080/v1`), without a trailing slash.
    pub upstream: String,
}

/// A billed model call the tap saw.
#[derive(Debug)]
pub struct TapCall {
    /// Which API it was.
    pub api: Api,
    /// What the request said about itself (model, tools, system prompt fingerprint).
    pub request: RequestInfo,
    /// The request body, kept only for attribution by content (matching a session's prompt);
    /// never logged or recorded.
    pub body: Bytes,
    /// The session id a header of the request named, when the agent sends one.
    pub session_header: Option<String>,
    /// The call's usage (model set from the response, else the request).
    pub record: TokenRecord,
    /// The provider's id of the message or response.
    pub id: Option<String>,
    /// The usage is the provider's final figure (false: the stream was cut; what was billed
    /// before the cut).
    pub complete: bool,
    /// Counted from the content (an OpenAI Chat stream that did not ask for usage).
    pub estimated: bool,
    /// When the request arrived and when its usage was read, in Unix milliseconds.
    pub started_ms: i64,
    pub ended_ms: i64,
    /// A warm-up: Codex's WebSocket `response.create` with `generate: false`, which bills its
    /// input (the prompt is processed and cached) and generates nothing. A side call of the
    /// session, not a turn's model call.
    pub warmup: bool,
}

/// A tap started for an agent: how to start the agent, and where its calls arrive.
#[derive(Debug)]
pub struct ForAgent {
    /// The tap: bound, and serving once [`Bound::serve`] is called.
    pub tap: Bound,
    /// Variables to set in the agent's environment.
    pub env: Vec<(String, String)>,
    /// Arguments to append to the agent's command line.
    pub args: Vec<String>,
    /// The calls, as the tap reads them.
    pub calls: tokio::sync::mpsc::UnboundedReceiver<TapCall>,
    /// The subscription windows the responses stated.
    pub limits: tokio::sync::mpsc::UnboundedReceiver<limits::Observed>,
    /// Notified after each call is sent.
    pub notify: Arc<tokio::sync::Notify>,
    /// The calls under way: zero once every call read is on `calls`.
    pub in_flight: tokio::sync::watch::Receiver<usize>,
}

/// Binds the tap for an agent pointed as `pointing` says (see `agents::point`); it serves once
/// [`Bound::serve`] is called. Binding starts no thread, so the agent, pointed at the bound
/// socket, starts before the tap's thread and runtime do. `None` (said on stderr) when the
/// socket cannot be had or the HTTPS client could not be made: the agent then runs untapped.
pub fn bind_for_agent(pointing: Pointing) -> Option<ForAgent> {
    // A setting of the user's that sends calls past the tap: those calls run as they would
    // without acp-usage and the other sources count them; said once.
    for warning in &pointing.warnings {
        tracing::info!("tap: {warning}");
    }
    let (tx, calls) = tokio::sync::mpsc::unbounded_channel();
    let (limits_tx, limits) = tokio::sync::mpsc::unbounded_channel();
    let notify = Arc::new(tokio::sync::Notify::new());
    let config = TapConfig {
        routes: pointing.routes.clone(),
        session_headers: pointing.session_headers.clone(),
        alternates: pointing.alternates.clone(),
        notices: pointing.notices.clone(),
    };
    // The HTTPS client is made when the first request comes; one that could not be made must
    // leave the agent untapped, so whether it can is told now.
    if let Err(why) = roots::check() {
        tracing::error!("the LLM-API tap could not start ({why}); running the agent untapped");
        return None;
    }
    match Tap::bind(config, tx, limits_tx, notify.clone()) {
        Ok(tap) => {
            let resolved = pointing.resolve(|route| tap.base_url(route));
            let names: Vec<&str> = resolved.env.iter().map(|(k, _)| k.as_str()).collect();
            // Names only: values hold the secret, and upstream URLs may hold credentials.
            tracing::info!(port = tap.addr.port(), vars = ?names, extra_args = resolved.args.len(), "tap: listening; the agent's base URLs point at it");
            let in_flight = tap.flights.watch();
            Some(ForAgent {
                tap,
                env: resolved.env,
                args: resolved.args,
                calls,
                limits,
                notify,
                in_flight,
            })
        }
        Err(e) => {
            tracing::error!("the LLM-API tap could not start ({e:#}); running the agent untapped");
            None
        }
    }
}

/// What the tap needs to start.
#[derive(Debug, Clone)]
pub struct TapConfig {
    /// The routes, by name.
    pub routes: Vec<Route>,
    /// Request headers that carry the agent's session id, lowercase.
    pub session_headers: Vec<String>,
    /// Routes whose requests carrying a header go to another upstream.
    pub alternates: Vec<Alternate>,
    /// Warnings a program the agent starts may ask for ([`Notice`]).
    pub notices: Vec<Notice>,
}

/// A running tap.
#[derive(Debug)]
pub struct Tap {
    /// The address it listens on (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    secret: String,
    /// The calls under way.
    pub flights: Flights,
}

/// A tap whose socket is bound (connections wait in its backlog) and which does not serve
/// yet.
#[derive(Debug)]
pub struct Bound {
    /// The address it listens on (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    secret: String,
    listener: std::net::TcpListener,
    config: TapConfig,
    calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
    limits: limits::Sender,
    notify: Arc<tokio::sync::Notify>,
    /// The calls under way.
    flights: Flights,
}

impl Tap {
    /// Binds 127.0.0.1 on an ephemeral port and starts serving on a thread of its own; calls go
    /// to `calls`. Fails only when the socket or the thread cannot be had.
    pub fn start(
        config: TapConfig,
        calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
        limits: tokio::sync::mpsc::UnboundedSender<limits::Observed>,
        notify: Arc<tokio::sync::Notify>,
    ) -> anyhow::Result<Tap> {
        Tap::bind(config, calls, limits, notify)?.serve()
    }

    /// Binds 127.0.0.1 on an ephemeral port and makes the secret; no thread is started.
    pub fn bind(
        config: TapConfig,
        calls: tokio::sync::mpsc::UnboundedSender<TapCall>,
        limits: tokio::sync::mpsc::UnboundedSender<limits::Observed>,
        notify: Arc<tokio::sync::Notify>,
    ) -> anyhow::Result<Bound> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .context("cannot listen on 127.0.0.1")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let secret = new_secret()?;
        let flights = Flights::default();
        let limits = limits::Sender::new(limits);
        Ok(Bound { addr, secret, listener, config, calls, limits, notify, flights })
    }

    /// The base URL of `route` to give the agent: `http://127.0.0.1:PORT/<secret>/<route>`.
    pub fn base_url(&self, route: &str) -> String {
        base_url(self.addr, &self.secret, route)
    }
}

impl Bound {
    /// The base URL of `route` to give the agent: `http://127.0.0.1:PORT/<secret>/<route>`.
    pub fn base_url(&self, route: &str) -> String {
        base_url(self.addr, &self.secret, route)
    }

    /// Starts serving on a thread and runtime of their own; the upstream client is made when the
    /// first request comes (`http::Upstream`). Fails only when the thread cannot be had
    /// (a runtime that cannot be made is an error in the log, and the tap's connections are
    /// refused).
    pub fn serve(self) -> anyhow::Result<Tap> {
        let Bound { addr, secret, listener, config, calls, limits, notify, flights } = self;
        let state_flights = flights.clone();
        let state_secret = secret.clone();
        let client = http::Upstream::default();
        std::thread::Builder::new().name("acp-usage-tap".into()).spawn(move || {
            // Made here, not by the relay's thread, which passes on the editor's first request
            // meanwhile.
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("acp-usage-tap")
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    return tracing::error!(
                        "the tap could not start its runtime ({e}); its connections are refused"
                    );
                }
            };
            let state = Arc::new(http::State {
                secret: state_secret,
                routes: config.routes,
                session_headers: config.session_headers,
                alternates: config.alternates,
                notices: config.notices.into_iter().map(|n| (n, Default::default())).collect(),
                client,
                calls,
                limits,
                notify,
                flights: state_flights,
            });
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => proxy::serve(listener, state).await,
                    Err(e) => tracing::warn!("the tap stopped: {e}"),
                }
            })
        })?;
        Ok(Tap { addr, secret, flights })
    }
}

fn base_url(addr: SocketAddr, secret: &str, route: &str) -> String {
    format!("http://{addr}/{secret}/{route}")
}

/// 192 random bits, hex: new for every run, so no other local process can guess the prefix.
fn new_secret() -> anyhow::Result<String> {
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("no randomness for the tap: {e}"))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
