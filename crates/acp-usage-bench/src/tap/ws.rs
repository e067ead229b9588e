//! The tap benchmark over a WebSocket (Codex's Responses transport): the upstream's WebSocket
//! mode, and a client that times a reply's first byte and a long stream's throughput, direct
//! and through the tap's tunnel, on one connection each way as Codex keeps one.
//!
//! Requests are `response.create` text messages naming the reply (`bench`: `small` or `long`,
//! `seq`, `frames`); replies are Responses events, one unmasked text frame each, ending with
//! `response.completed` and its usage, so the tap reads each as a call. The 101's
//! `Sec-WebSocket-Accept` is not computed (the bench's own client does not check it, and the
//! tap passes it through unread).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{FRAME_TARGET, INPUT_TOKENS};

/// The path the WebSocket is served on (the Responses API's).
pub const PATH: &str = "/v1/responses";

/// Whether an upstream request asks for the WebSocket.
pub fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// Answers an upgrade with 101 and serves the connection on a task of its own; `empty` is the
/// server's empty body.
pub fn accept<B>(mut req: Request<Incoming>, empty: B) -> Response<B> {
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        if let Ok(upgraded) = on.await {
            let _ = serve(TokioIo::new(upgraded)).await;
        }
    });
    let mut resp = Response::new(empty);
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(hyper::header::UPGRADE, "websocket".parse().expect("a header value"));
    h.insert(hyper::header::CONNECTION, "Upgrade".parse().expect("a header value"));
    h.insert(hyper::header::SEC_WEBSOCKET_ACCEPT, "bench".parse().expect("a header value"));
    resp
}

/// One unmasked (server) or masked (client) final frame (the tests' mock writes its frames
/// with it too).
pub fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    let bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(bit | n as u8),
        n if n <= 0xffff => {
            out.push(bit | 126);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(bit | 127);
            out.extend((n as u64).to_be_bytes());
        }
    }
    if let Some(key) = mask {
        out.extend(key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

/// Reads one frame's payload (unmasked); `None` at the end of the stream.
async fn read_frame(
    r: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> anyhow::Result<Option<u8>> {
    let mut head = [0u8; 2];
    if r.read_exact(&mut head).await.is_err() {
        return Ok(None);
    }
    let len = match head[1] & 0x7f {
        126 => u64::from(r.read_u16().await?),
        127 => r.read_u64().await?,
        n => u64::from(n),
    };
    let mut key = None;
    if head[1] & 0x80 != 0 {
        let mut k = [0u8; 4];
        r.read_exact(&mut k).await?;
        key = Some(k);
    }
    buf.resize(usize::try_from(len)?, 0);
    r.read_exact(buf).await?;
    if let Some(k) = key {
        buf.iter_mut().enumerate().for_each(|(i, b)| *b ^= k[i % 4]);
    }
    Ok(Some(head[0] & 0x0f))
}

fn completed(seq: u64, output: u64) -> Vec<u8> {
    let event = format!(
        r#"{{"type":"response.completed","response":{{"id":"resp_bench_{seq}","model":"gpt-bench-1","status":"completed","output":[],"usage":{{"input_tokens":{INPUT_TOKENS},"input_tokens_details":{{"cached_tokens":0}},"output_tokens":{output},"output_tokens_details":{{"reasoning_tokens":0}}}}}}}}"#
    );
    frame(1, event.as_bytes(), None)
}

/// The upstream's side of one connection: each request answered at once.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(io: S) -> anyhow::Result<()> {
    let (r, mut w) = tokio::io::split(io);
    let mut r = BufReader::with_capacity(64 * 1024, r);
    let mut buf = Vec::new();
    let filler = "a".repeat(FRAME_TARGET - 64);
    let delta = frame(
        1,
        format!(r#"{{"type":"response.output_text.delta","delta":"{filler}"}}"#).as_bytes(),
        None,
    );
    while let Some(opcode) = read_frame(&mut r, &mut buf).await? {
        match opcode {
            1 => {
                let request: serde_json::Value = serde_json::from_slice(&buf)?;
                let seq = request["seq"].as_u64().unwrap_or(0);
                let created = format!(
                    r#"{{"type":"response.created","response":{{"id":"resp_bench_{seq}"}}}}"#
                );
                w.write_all(&frame(1, created.as_bytes(), None)).await?;
                let frames = if request["bench"] == "long" {
                    request["frames"].as_u64().unwrap_or(0)
                } else {
                    0
                };
                for _ in 0..frames {
                    w.write_all(&delta).await?;
                }
                w.write_all(&completed(seq, frames.max(1))).await?;
                w.flush().await?;
            }
            8 => return Ok(()),
            _ => (),
        }
    }
    Ok(())
}

/// The bench's client on one WebSocket.
#[derive(Debug)]
pub struct WsClient {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    buf: Vec<u8>,
}

impl WsClient {
    /// Connects to `addr` and upgrades `path`.
    pub async fn connect(addr: SocketAddr, path: &str) -> anyhow::Result<WsClient> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, mut writer) = stream.into_split();
        let head = format!(
            "GET {path} HTTP/1.1\r\nhost: {addr}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: YmVuY2hiZW5jaGJlbmNoYg==\r\nsec-websocket-version: 13\r\n\r\n"
        );
        writer.write_all(head.as_bytes()).await?;
        let mut reader = BufReader::with_capacity(64 * 1024, r);
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        if !line.starts_with("HTTP/1.1 101") {
            bail!("no WebSocket: {line:?}");
        }
        while line != "\r\n" {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                bail!("the connection closed in the 101's head");
            }
        }
        Ok(WsClient { reader, writer, buf: Vec::new() })
    }

    async fn send(&mut self, kind: &str, seq: u64, frames: u64) -> anyhow::Result<()> {
        let body = format!(
            r#"{{"type":"response.create","model":"gpt-bench-1","bench":"{kind}","seq":{seq},"frames":{frames},"input":[]}}"#
        );
        self.writer.write_all(&frame(1, body.as_bytes(), Some([1, 2, 3, 4]))).await?;
        Ok(())
    }

    /// Reads `n` frames; returns their payload bytes, checking the last is the completion.
    async fn frames(&mut self, n: u64) -> anyhow::Result<u64> {
        let mut bytes = 0;
        for _ in 0..n {
            read_frame(&mut self.reader, &mut self.buf).await?.context("the stream ended early")?;
            bytes += self.buf.len() as u64;
        }
        if !self.buf.starts_with(br#"{"type":"response.completed""#) {
            bail!("the reply did not end with its completion");
        }
        Ok(bytes)
    }

    /// A small reply: the time to its first byte.
    pub async fn small(&mut self, seq: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.send("small", seq, 0).await?;
        self.reader.fill_buf().await?;
        let ttfb = start.elapsed();
        self.frames(2).await?;
        Ok(ttfb)
    }

    /// A long reply of `frames` 16 KiB frames: MB/s, the request's sending to the completion.
    pub async fn long(&mut self, seq: u64, frames: u64) -> anyhow::Result<f64> {
        let start = Instant::now();
        self.send("long", seq, frames).await?;
        let bytes = self.frames(frames + 2).await?;
        Ok(bytes as f64 / 1e6 / start.elapsed().as_secs_f64())
    }
}

/// The figures over a WebSocket, each way.
#[derive(Debug, Default)]
pub struct WsFigures {
    pub ttfb_direct_us: Vec<f64>,
    pub ttfb_tapped_us: Vec<f64>,
    pub mb_per_s_direct: Vec<f64>,
    pub mb_per_s_tapped: Vec<f64>,
}

/// Measures `requests` small replies and `rounds` long streams of `frames` each way,
/// interleaved; `direct` and `tapped` are (address, path) of the upstream and the tap.
pub async fn measure(
    direct: (SocketAddr, String),
    tapped: (SocketAddr, String),
    requests: usize,
    rounds: usize,
    frames: u64,
) -> anyhow::Result<WsFigures> {
    let mut d = WsClient::connect(direct.0, &direct.1).await.context("direct WebSocket")?;
    let mut t = WsClient::connect(tapped.0, &tapped.1).await.context("tapped WebSocket")?;
    let mut f = WsFigures::default();
    for seq in 0..50 {
        d.small(seq).await?;
        t.small(seq).await?;
    }
    for i in 0..requests as u64 {
        let (a, b) = if i % 2 == 0 { (&mut d, &mut t) } else { (&mut t, &mut d) };
        let first = a.small(i).await?.as_secs_f64() * 1e6;
        let second = b.small(i).await?.as_secs_f64() * 1e6;
        let (dd, tt) = if i % 2 == 0 { (first, second) } else { (second, first) };
        f.ttfb_direct_us.push(dd);
        f.ttfb_tapped_us.push(tt);
    }
    for round in 0..rounds as u64 {
        if round % 2 == 0 {
            f.mb_per_s_direct.push(d.long(round, frames).await?);
            f.mb_per_s_tapped.push(t.long(round, frames).await?);
        } else {
            f.mb_per_s_tapped.push(t.long(round, frames).await?);
            f.mb_per_s_direct.push(d.long(round, frames).await?);
        }
    }
    Ok(f)
}
