//! Sending what the ledger holds: batches of queued calls as log records (the cursor moves
//! only when the collector said yes), then the cumulative metrics. Failures are retried with
//! backoff and logged once per kind; credentials (URL user info, header values) never appear in
//! a log line.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::config::OtlpConfig;
use super::{encode, outbox};
use crate::sinks::ledger::{Store, now_ms};

/// Calls per log export.
pub const BATCH: usize = 1000;
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What one export did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Calls sent and acknowledged.
    pub calls: u64,
    /// Calls still queued (another process was exporting, or the deadline came).
    pub left: u64,
}

/// Exports one ledger to one collector.
#[derive(Debug)]
pub struct Exporter {
    cfg: OtlpConfig,
    ledger: PathBuf,
    client: reqwest::blocking::Client,
    resource: Resource,
    /// Who holds a claim: this process and run.
    owner: String,
    store: Option<Store>,
}

impl Exporter {
    /// An exporter of `ledger` as `cfg` says.
    pub fn new(cfg: OtlpConfig, ledger: PathBuf) -> anyhow::Result<Exporter> {
        let mut builder = reqwest::blocking::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = &cfg.ca_file {
            let pem =
                std::fs::read(ca).with_context(|| format!("OTLP CA file {}", ca.display()))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .with_context(|| format!("OTLP CA file {}", ca.display()))?;
            builder = builder.add_root_certificate(cert);
        }
        let client = builder.build().context("the OTLP HTTP client")?;
        let resource = encode::resource(&cfg.resource);
        let owner = format!("{}:{}", std::process::id(), now_ms());
        Ok(Exporter { cfg, ledger, client, resource, owner, store: None })
    }

    /// The configuration.
    pub fn config(&self) -> &OtlpConfig {
        &self.cfg
    }

    fn store(&mut self) -> anyhow::Result<&mut Store> {
        if self.store.is_none() {
            let s = Store::open(&self.ledger)
                .with_context(|| format!("opening the ledger {}", self.ledger.display()))?;
            self.store = Some(s);
        }
        Ok(self.store.as_mut().expect("opened above"))
    }

    /// Sends every queued call (in batches) and then the metrics; stops early at `deadline`.
    pub fn export(&mut self, deadline: Option<Instant>) -> anyhow::Result<Flushed> {
        let res = self.export_inner(deadline);
        if res.is_err() {
            // A broken connection or file is opened afresh next time.
            self.store = None;
        }
        res
    }

    fn export_inner(&mut self, deadline: Option<Instant>) -> anyhow::Result<Flushed> {
        let dest = self.cfg.logs_url.clone();
        let owner = self.owner.clone();
        let mut flushed = Flushed::default();
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let store = self.store()?;
            let Some(rows) = outbox::claim(store.conn_mut(), &dest, &owner, now_ms(), BATCH)?
            else {
                // Another process is exporting now. A final flush waits for it (the calls this
                // run added may be after its batch); a periodic export leaves them to it.
                if deadline.is_some() {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                break;
            };
            let Some(upto) = rows.last().map(|r| r.id) else {
                outbox::release(store.conn(), &dest, &owner)?;
                break;
            };
            let body = encode::logs(&self.resource, &rows, now_ms()).encode_to_vec();
            if let Err(err) = self.post(&self.cfg.logs_url, body, deadline) {
                let store = self.store()?;
                outbox::release(store.conn(), &dest, &owner)?;
                return Err(err);
            }
            let store = self.store()?;
            outbox::ack(store.conn(), &dest, &owner, upto)?;
            flushed.calls += rows.iter().map(|r| r.calls.max(1) as u64).sum::<u64>();
        }
        let store = self.store()?;
        flushed.left = outbox::backlog(store.conn(), &dest)? as u64;
        let extra = encode::Extra {
            turns: outbox::turns(store.conn())?,
            running: outbox::running(store.conn())?,
        };
        let series = outbox::series(store.conn())?;
        let body = encode::metrics(&self.resource, &series, &extra, now_ms()).encode_to_vec();
        self.post(&self.cfg.metrics_url, body, deadline)?;
        Ok(flushed)
    }

    fn post(&self, url: &str, body: Vec<u8>, deadline: Option<Instant>) -> anyhow::Result<()> {
        let timeout = deadline.map_or(REQUEST_TIMEOUT, |d| {
            d.saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(50), REQUEST_TIMEOUT)
        });
        let mut req = self
            .client
            .post(url)
            .timeout(timeout)
            .header("content-type", "application/x-protobuf")
            .body(body);
        for (k, v) in &self.cfg.headers {
            req = req.header(k, v);
        }
        let shown = redact(url);
        let resp = req.send().map_err(|e| {
            anyhow::anyhow!("cannot reach the collector at {shown}: {}", without_url(e))
        })?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().unwrap_or_default();
            let text: String = text.chars().take(200).collect();
            bail!("the collector at {shown} answered {status}: {}", text.trim());
        }
        Ok(())
    }
}

/// A URL without its user info (credentials) and query.
pub fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "(an unparsable URL)".into(),
    }
}

/// A request error's text without the URL it names (it may hold credentials).
fn without_url(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        text.push_str(": ");
        text.push_str(&s.to_string());
        src = s.source();
    }
    text
}

/// A running exporter thread.
#[derive(Debug)]
pub struct Handle {
    stop: mpsc::Sender<Option<Instant>>,
    thread: Option<JoinHandle<()>>,
}

impl Handle {
    /// Starts exporting `ledger` every `cfg.interval` on a thread of its own (where its
    /// blocking HTTP client lives: it must not be made or dropped on the relay's runtime).
    pub fn start(cfg: OtlpConfig, ledger: PathBuf) -> Handle {
        let (stop, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("acp-usage-otlp".into())
            .spawn(move || match Exporter::new(cfg, ledger) {
                Ok(exporter) => run(exporter, rx),
                Err(err) => tracing::warn!("{err:#}; the ledger is not exported"),
            })
            .ok();
        Handle { stop, thread }
    }

    /// A last export that ends by `deadline`, then the thread ends.
    pub fn finish(mut self, deadline: Instant) {
        let _ = self.stop.send(Some(deadline));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(mut exporter: Exporter, stop: mpsc::Receiver<Option<Instant>>) {
    let interval = exporter.cfg.interval;
    let mut wait = interval;
    let mut last_error: Option<String> = None;
    loop {
        let final_deadline = match stop.recv_timeout(wait) {
            Ok(deadline) => Some(deadline),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(None),
        };
        let deadline = final_deadline.flatten();
        match exporter.export(deadline) {
            Ok(f) => {
                if last_error.take().is_some() {
                    tracing::info!(calls = f.calls, "OTLP export works again");
                }
                tracing::debug!(calls = f.calls, left = f.left, "OTLP export");
                wait = interval;
            }
            Err(err) => {
                let msg = format!("{err:#}");
                wait = (wait * 2).clamp(Duration::from_secs(1), MAX_BACKOFF.max(interval));
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(
                        "OTLP export failed: {msg}; the calls stay in the ledger, retrying"
                    );
                    last_error = Some(msg);
                }
            }
        }
        if final_deadline.is_some() {
            return;
        }
    }
}
