//! The tap benchmark's LLM upstream: an HTTP/1.1 server (hyper, keep-alive) on 127.0.0.1 that
//! answers `POST /v1/messages` with Anthropic-style event streams, on a thread and runtime of its
//! own as a real provider would be another process.
//!
//! What it answers is chosen by request headers (the tap forwards them unchanged), and every
//! body is a pure function of them ([`small_body`], [`Long`]), so the client can check each byte
//! it receives, direct or tapped, against what was served. The long stream is generated as it
//! is sent (one 16 KiB frame, cloned), so neither this server nor anything after it needs to
//! hold the stream to serve it. `GET /v1/responses` with `Upgrade: websocket` is its WebSocket
//! mode (`ws.rs`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use super::{FRAME_TARGET, INPUT_TOKENS, SMALL_OUTPUT_TOKENS};

/// Which reply: `small`, `long` or `held`.
pub const KIND: &str = "x-bench-response";
/// A number that makes the reply's message id (`msg_bench_<seq>`) and keys a held reply.
pub const SEQ: &str = "x-bench-seq";
/// How many 16 KiB frames of deltas a `long` reply has.
pub const FRAMES: &str = "x-bench-frames";

/// The message id of reply `seq`.
pub fn message_id(seq: u64) -> String {
    format!("msg_bench_{seq}")
}

fn event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// `message_start` and `content_block_start`.
fn head_events(seq: u64) -> String {
    let id = message_id(seq);
    let start = format!(
        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-bench-1","content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":{INPUT_TOKENS},"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":1}}}}}}"#
    );
    let block =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    event("message_start", &start) + &event("content_block_start", block)
}

fn delta(text: &str) -> String {
    let data = format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{text}"}}}}"#
    );
    event("content_block_delta", &data)
}

/// `content_block_stop`, `message_delta` with the final usage, `message_stop`.
fn tail_events(output_tokens: u64) -> String {
    let usage = format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"end_turn","stop_sequence":null}},"usage":{{"output_tokens":{output_tokens}}}}}"#
    );
    event("content_block_stop", r#"{"type":"content_block_stop","index":0}"#)
        + &event("message_delta", &usage)
        + &event("message_stop", r#"{"type":"message_stop"}"#)
}

/// The whole small reply `seq`: a short answer in three deltas.
pub fn small_body(seq: u64) -> Bytes {
    let mut body = head_events(seq);
    for text in ["Hello", " from the", " bench upstream."] {
        body += &delta(text);
    }
    body += &tail_events(SMALL_OUTPUT_TOKENS);
    Bytes::from(body)
}

/// Where a small reply's first event ends (a held reply sends that much, then waits).
pub fn first_event_len(body: &[u8]) -> usize {
    memchr::memmem::find(body, b"\n\n").map_or(body.len(), |i| i + 2)
}

/// A long reply: its head, `frames` copies of one frame of deltas, its tail.
#[derive(Debug, Clone)]
pub struct Long {
    pub head: Bytes,
    pub frame: Bytes,
    pub frames: u64,
    pub tail: Bytes,
    /// The output tokens its final `message_delta` states: one per delta.
    pub output_tokens: u64,
}

impl Long {
    /// The long reply `seq` of `frames` frames.
    pub fn new(seq: u64, frames: u64) -> Long {
        // A delta of ~64 characters of text, about what a provider sends per event.
        let one = delta("The quick brown fox jumps over the lazy dog, then streams on and on.");
        let per_frame = (FRAME_TARGET / one.len()).max(1);
        let frame = Bytes::from(one.repeat(per_frame));
        // One token per delta: the count the tap must read back from the final message_delta.
        let output_tokens = frames * per_frame as u64;
        let tail = Bytes::from(tail_events(output_tokens));
        Long { head: Bytes::from(head_events(seq)), frame, frames, tail, output_tokens }
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        (self.head.len() + self.tail.len()) as u64 + self.frames * self.frame.len() as u64
    }

    /// Always false: a long reply has at least its head.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Its bytes, whole (only for the small replies the byte check compares).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len() as usize);
        v.extend_from_slice(&self.head);
        for _ in 0..self.frames {
            v.extend_from_slice(&self.frame);
        }
        v.extend_from_slice(&self.tail);
        v
    }

    /// The frames that make a stream of about `mib` MiB.
    pub fn frames_for_mib(mib: u64) -> u64 {
        let frame = Long::new(0, 1).frame.len() as u64;
        ((mib << 20) / frame).max(1)
    }
}

/// A reply body, produced as hyper asks for it.
#[derive(Debug)]
enum Reply {
    /// Its head, `left` more copies of `frame`, its tail.
    Frames { head: Option<Bytes>, frame: Bytes, left: u64, tail: Option<Bytes> },
    /// `first`, then nothing until `release` fires (or its sender is dropped), then `rest`.
    Held { first: Option<Bytes>, release: Option<oneshot::Receiver<()>>, rest: Option<Bytes> },
}

impl Reply {
    fn whole(body: Bytes) -> Reply {
        Reply::Frames { head: Some(body), frame: Bytes::new(), left: 0, tail: None }
    }
}

impl hyper::body::Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let data = |b: Bytes| Poll::Ready(Some(Ok(Frame::data(b))));
        match self.get_mut() {
            Reply::Frames { head, frame, left, tail } => {
                if let Some(h) = head.take() {
                    return data(h);
                }
                if *left > 0 {
                    *left -= 1;
                    return data(frame.clone());
                }
                Poll::Ready(tail.take().map(|t| Ok(Frame::data(t))))
            }
            Reply::Held { first, release, rest } => {
                if let Some(f) = first.take() {
                    return data(f);
                }
                if let Some(rx) = release {
                    // A dropped sender releases too: the client gave up, and the connection
                    // must not hang.
                    if Pin::new(rx).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    *release = None;
                }
                Poll::Ready(rest.take().map(|r| Ok(Frame::data(r))))
            }
        }
    }
}

/// Held replies waiting for their release, by seq.
type Holds = Arc<Mutex<HashMap<u64, oneshot::Receiver<()>>>>;

/// The running upstream.
#[derive(Debug)]
pub struct Upstream {
    /// Where it listens.
    pub addr: SocketAddr,
    holds: Holds,
}

impl Upstream {
    /// Binds 127.0.0.1 on an ephemeral port and serves on a thread of its own until the
    /// process ends.
    pub fn start() -> anyhow::Result<Upstream> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .context("cannot listen on 127.0.0.1")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let holds = Holds::default();
        // Two workers, as the tap has: neither side of the comparison gets a roomier server.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-upstream")
            .enable_all()
            .build()?;
        let state = holds.clone();
        std::thread::Builder::new().name("bench-upstream".into()).spawn(move || {
            runtime.block_on(async move {
                if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
                    serve(listener, state).await;
                }
            })
        })?;
        Ok(Upstream { addr, holds })
    }

    /// Its base URL, as a tap route's upstream.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Makes the next `held` reply `seq` wait, after its first event, until the returned
    /// sender fires or is dropped.
    pub fn hold(&self, seq: u64) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel();
        self.holds.lock().unwrap_or_else(|e| e.into_inner()).insert(seq, rx);
        tx
    }
}

async fn serve(listener: tokio::net::TcpListener, holds: Holds) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let holds = holds.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| answer(holds.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                // The WebSocket mode (`ws.rs`) takes the connection over after its 101.
                .with_upgrades()
                .await;
        });
    }
}

fn header_u64(req: &Request<Incoming>, name: &str) -> u64 {
    req.headers().get(name).and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0)
}

async fn answer(holds: Holds, req: Request<Incoming>) -> Result<Response<Reply>, Infallible> {
    if super::ws::is_upgrade(&req) && req.uri().path() == super::ws::PATH {
        return Ok(super::ws::accept(req, Reply::whole(Bytes::new())));
    }
    let kind = req.headers().get(KIND).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let seq = header_u64(&req, SEQ);
    let frames = header_u64(&req, FRAMES);
    let known = req.method() == hyper::Method::POST && req.uri().path() == "/v1/messages";
    // Read the request whole, as a provider does, so the connection can carry the next one.
    let _ = req.into_body().collect().await;
    let reply = match kind.as_str() {
        _ if !known => None,
        "small" => Some(Reply::whole(small_body(seq))),
        "long" => {
            let long = Long::new(seq, frames);
            Some(Reply::Frames {
                head: Some(long.head),
                frame: long.frame,
                left: long.frames,
                tail: Some(long.tail),
            })
        }
        "held" => {
            let body = small_body(seq);
            let cut = first_event_len(&body);
            let release = holds.lock().unwrap_or_else(|e| e.into_inner()).remove(&seq);
            Some(Reply::Held {
                first: Some(body.slice(..cut)),
                release,
                rest: Some(body.slice(cut..)),
            })
        }
        _ => None,
    };
    let mut resp = Response::builder();
    let body = match reply {
        Some(reply) => {
            resp = resp
                .header(hyper::header::CONTENT_TYPE, "text/event-stream")
                .header(hyper::header::CACHE_CONTROL, "no-cache");
            reply
        }
        None => {
            resp = resp
                .status(StatusCode::NOT_FOUND)
                .header(hyper::header::CONTENT_TYPE, "application/json");
            Reply::whole(Bytes::from_static(br#"{"type":"error","error":{"type":"not_found"}}"#))
        }
    };
    Ok(resp.body(body).unwrap_or_else(|_| Response::new(Reply::whole(Bytes::new()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_whole_events_with_their_usage() {
        let small = small_body(7);
        let text = std::str::from_utf8(&small).unwrap();
        assert!(
            text.starts_with("event: message_start\n") && text.ends_with("message_stop\"}\n\n")
        );
        assert!(text.contains("\"id\":\"msg_bench_7\"") && text.contains("\"output_tokens\":12}"));
        let first = first_event_len(&small);
        assert!(small[..first].ends_with(b"\n\n") && first < small.len());

        let long = Long::new(3, 4);
        let bytes = long.to_vec();
        assert_eq!(bytes.len() as u64, long.len());
        assert!(long.frame.len() <= FRAME_TARGET && long.frame.len() > FRAME_TARGET / 2);
        let deltas = memchr::memmem::find_iter(&bytes, b"event: content_block_delta").count();
        assert_eq!(deltas as u64, long.output_tokens);
        let stated = format!("\"output_tokens\":{}}}", long.output_tokens);
        assert!(memchr::memmem::find(&long.tail, stated.as_bytes()).is_some());
        assert_eq!(Long::frames_for_mib(1), (1 << 20) / long.frame.len() as u64);
    }
}
