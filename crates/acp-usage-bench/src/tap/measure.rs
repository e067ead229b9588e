//! The client side of the tap benchmark: the same requests sent straight to the upstream
//! ("direct") or through the tap ("tapped") by one keep-alive HTTP client, timed, and every
//! reply checked against the bytes the upstream served, so a tap that alters, loses or
//! reorders a byte fails the run instead of posting a figure.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

use super::upstream::{self, FRAMES, KIND, Long, SEQ, Upstream};

/// How long the held-stream check waits for the first event before it says "buffered".
pub const HOLD_WAIT: Duration = Duration::from_secs(3);

/// An Anthropic request, as an agent would send it (the tap reads its model from it).
const REQUEST: &str = r#"{"model":"claude-bench-1","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}"#;

/// Which way a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Client to upstream.
    Direct,
    /// Client to the tap to upstream.
    Tapped,
}

impl Via {
    /// Both, `first` first: rounds alternate which goes first so that drift in the machine's
    /// load does not always fall on the same one.
    pub fn order(first_direct: bool) -> [Via; 2] {
        if first_direct { [Via::Direct, Via::Tapped] } else { [Via::Tapped, Via::Direct] }
    }
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Direct => "direct",
            Via::Tapped => "tapped",
        })
    }
}

/// One long stream as the client read it.
#[derive(Debug, Clone, Copy)]
pub struct Streamed {
    /// Bytes received.
    pub bytes: u64,
    /// From sending the request to the last byte.
    pub elapsed: Duration,
}

impl Streamed {
    /// Throughput, in MB/s (10^6 bytes).
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// The benchmark's HTTP client.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    direct: String,
    tapped: String,
    seq: AtomicU64,
    /// Responses received through the tap: each should become one call the tap read.
    tapped_responses: AtomicU64,
    /// Replies compared whole, byte for byte.
    compared: AtomicU64,
}

impl Client {
    /// A client for the upstream at `direct` and the same upstream behind the tap at `tapped`
    /// (base URLs; `/v1/messages` is appended).
    pub fn new(direct: &str, tapped: &str) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder()
            // Only 127.0.0.1 is ever asked; a proxy from the environment must not sit in
            // between.
            .no_proxy()
            .tcp_nodelay(true)
            // A hung tap fails the run rather than stalling it.
            .timeout(Duration::from_secs(120))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()?;
        Ok(Client {
            http,
            direct: format!("{direct}/v1/messages"),
            tapped: format!("{tapped}/v1/messages"),
            seq: AtomicU64::new(1),
            tapped_responses: AtomicU64::new(0),
            compared: AtomicU64::new(0),
        })
    }

    /// A fresh number for a reply (its message id, the key of a held reply).
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Responses received through the tap so far.
    pub fn tapped_responses(&self) -> u64 {
        self.tapped_responses.load(Ordering::Relaxed)
    }

    /// Replies compared whole so far.
    pub fn compared(&self) -> u64 {
        self.compared.load(Ordering::Relaxed)
    }

    async fn send(
        &self,
        via: Via,
        kind: &str,
        seq: u64,
        frames: u64,
    ) -> anyhow::Result<reqwest::Response> {
        let url = match via {
            Via::Direct => &self.direct,
            Via::Tapped => &self.tapped,
        };
        let resp = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("x-api-key", "bench-key")
            .header("anthropic-version", "2023-06-01")
            .header(KIND, kind)
            .header(SEQ, seq)
            .header(FRAMES, frames)
            .body(REQUEST)
            .send()
            .await
            .with_context(|| format!("{via}: the {kind} request failed"))?;
        ensure!(resp.status().is_success(), "{via}: the {kind} request got {}", resp.status());
        if via == Via::Tapped {
            self.tapped_responses.fetch_add(1, Ordering::Relaxed);
        }
        Ok(resp)
    }

    fn same(&self, via: Via, what: &str, got: &[u8], want: &[u8]) -> anyhow::Result<()> {
        if got != want {
            let at =
                got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            bail!(
                "{via}: {what} differs from what the upstream served ({} bytes received, {} served, first difference at byte {at})",
                got.len(),
                want.len()
            );
        }
        self.compared.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// One small call: its time to first body byte (from sending the request); the reply is
    /// then read whole and compared.
    pub async fn small(&self, via: Via) -> anyhow::Result<Duration> {
        let seq = self.next_seq();
        let start = Instant::now();
        let mut resp = self.send(via, "small", seq, 0).await?;
        let first = resp.chunk().await?;
        let ttfb = start.elapsed();
        let mut body = first.map(Vec::from).unwrap_or_default();
        while let Some(chunk) = resp.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        self.same(via, &format!("small reply {seq}"), &body, &upstream::small_body(seq))?;
        Ok(ttfb)
    }

    /// A long stream of `frames` frames, as reply `seq`: counted as it arrives (nothing kept
    /// but its first and last bytes, which are compared, and its length).
    pub async fn long(&self, via: Via, seq: u64, frames: u64) -> anyhow::Result<Streamed> {
        let want = Long::new(seq, frames);
        let (head_len, tail_len) = (want.head.len(), want.tail.len());
        let mut head = Vec::with_capacity(head_len);
        let mut tail: Vec<u8> = Vec::with_capacity(2 * tail_len);
        let mut bytes = 0u64;
        let start = Instant::now();
        let mut resp = self.send(via, "long", seq, frames).await?;
        while let Some(chunk) = resp.chunk().await? {
            bytes += chunk.len() as u64;
            if head.len() < head_len {
                let take = (head_len - head.len()).min(chunk.len());
                head.extend_from_slice(&chunk[..take]);
            }
            if chunk.len() >= tail_len {
                tail.clear();
                tail.extend_from_slice(&chunk[chunk.len() - tail_len..]);
            } else {
                tail.extend_from_slice(&chunk);
                let extra = tail.len().saturating_sub(tail_len);
                tail.drain(..extra);
            }
        }
        let elapsed = start.elapsed();
        ensure!(
            bytes == want.len(),
            "{via}: long stream {seq} brought {bytes} bytes, the upstream served {}",
            want.len()
        );
        self.same(via, &format!("the head of long stream {seq}"), &head, &want.head)?;
        self.same(via, &format!("the tail of long stream {seq}"), &tail, &want.tail)?;
        Ok(Streamed { bytes, elapsed })
    }

    /// A long stream of `frames` frames, as reply `seq`, read whole and compared byte for byte
    /// (kept short: it is held in memory).
    pub async fn long_whole(&self, via: Via, seq: u64, frames: u64) -> anyhow::Result<()> {
        let mut resp = self.send(via, "long", seq, frames).await?;
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        self.same(via, &format!("long stream {seq}"), &body, &Long::new(seq, frames).to_vec())
    }

    /// The held-stream check: the upstream sends the first event of a reply and nothing more
    /// until the client has it. Returns how long the first event took to arrive, or `None`
    /// when it did not arrive within `wait` (something on the way held it back). The reply is
    /// then released, read whole and compared.
    pub async fn held(
        &self,
        upstream: &Upstream,
        via: Via,
        wait: Duration,
    ) -> anyhow::Result<Option<Duration>> {
        let seq = self.next_seq();
        let want = upstream::small_body(seq);
        let first_len = upstream::first_event_len(&want);
        let release = upstream.hold(seq);
        let start = Instant::now();
        // The request and the read of the first event, kept so that after a timeout the same
        // exchange can go on once released: a tap that holds back even the headers is caught
        // too.
        let mut exchange = Box::pin(async {
            let mut resp = self.send(via, "held", seq, 0).await?;
            let mut body = Vec::new();
            while body.len() < first_len {
                match resp.chunk().await? {
                    Some(chunk) => body.extend_from_slice(&chunk),
                    None => break,
                }
            }
            anyhow::Ok((resp, body))
        });
        let arrived = match tokio::time::timeout(wait, &mut exchange).await {
            Ok(done) => Some((start.elapsed(), done?)),
            Err(_) => None,
        };
        // Released either way, so the reply can finish and be checked.
        let _ = release.send(());
        let (arrived, (mut resp, mut body)) = match arrived {
            Some((at, got)) => (Some(at), got),
            None => (None, exchange.await?),
        };
        while let Some(chunk) = resp.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        self.same(via, &format!("held reply {seq}"), &body, &want)?;
        Ok(arrived)
    }

    /// `clients` concurrent clients send small calls one after another for `duration`; returns
    /// the calls completed and the time until the last one ended.
    pub async fn rate(
        self: &Arc<Self>,
        via: Via,
        clients: usize,
        duration: Duration,
    ) -> anyhow::Result<(u64, Duration)> {
        let start = Instant::now();
        let deadline = start + duration;
        let tasks: Vec<_> = (0..clients.max(1))
            .map(|_| {
                let me = self.clone();
                tokio::spawn(async move {
                    let mut done = 0u64;
                    while Instant::now() < deadline {
                        me.small(via).await?;
                        done += 1;
                    }
                    anyhow::Ok(done)
                })
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.context("a client task panicked")??;
        }
        Ok((total, start.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;

    use super::*;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// Serves on 127.0.0.1 a proxy to `base` that reads each reply whole before answering.
    async fn buffering_proxy(base: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (http, base) = (http.clone(), base.clone());
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (http, base) = (http.clone(), base.clone());
                    async move {
                        let url = format!("{base}{}", req.uri().path());
                        let headers = req.headers().clone();
                        let body = req.into_body().collect().await?.to_bytes();
                        let sent = http.post(url).headers(headers).body(body).send().await?;
                        let whole: Bytes = sent.bytes().await?;
                        Ok::<_, BoxError>(Response::new(Full::new(whole)))
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        url
    }

    /// The held-stream check is no formality: a proxy that buffers replies is called so, and
    /// the reply it finally sends is still checked whole.
    #[test]
    fn the_held_check_catches_a_buffering_proxy() {
        let upstream = Upstream::start().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let proxy = buffering_proxy(upstream.base_url()).await;
            let client = Client::new(&upstream.base_url(), &proxy).unwrap();
            let wait = Duration::from_millis(300);
            assert!(client.held(&upstream, Via::Direct, HOLD_WAIT).await.unwrap().is_some());
            assert!(client.held(&upstream, Via::Tapped, wait).await.unwrap().is_none());
            assert_eq!(client.compared(), 2);
        });
    }
}
