//! Raw HTTP/1.1 on 127.0.0.1 for the LLM-API tap's tests: a client that sends exactly the bytes
//! a test writes (malformed request lines included) and reads responses piece by piece on a
//! kept-alive connection, and an upstream whose every byte and moment of sending the test decides.
//!
//! Every wait is bounded by [`PATIENCE`], so a tap that hangs fails a test instead of stalling it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The longest any one step waits: an upper bound, never a way to let something happen.
pub const PATIENCE: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, fut: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, format!("{what}: no progress"))),
    }
}

/// A response's status line and headers (names lowercased, in order).
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// A whole response as the client read it.
#[derive(Debug, Clone)]
pub struct Response {
    pub head: Head,
    /// The body, de-chunked but otherwise as sent (never decompressed).
    pub body: Vec<u8>,
    /// The body stopped short of its end: the connection closed or broke first.
    pub cut: bool,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How the body being read is delimited.
#[derive(Debug)]
enum Framing {
    Length(usize),
    /// `left` bytes of the current chunk; `crlf` when the CRLF after a chunk is still unread.
    Chunked {
        left: usize,
        crlf: bool,
    },
    /// Until the connection closes.
    Close,
    Done,
}

/// One connection to a server, driven by hand.
#[derive(Debug)]
pub struct RawClient {
    reader: BufReader<TcpStream>,
    framing: Framing,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> io::Result<RawClient> {
        let stream = bounded("connect", TcpStream::connect(addr)).await?;
        Ok(RawClient { reader: BufReader::new(stream), framing: Framing::Done })
    }

    /// Writes `bytes` as they are.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let stream = self.reader.get_mut();
        bounded("send", async { stream.write_all(bytes).await }).await
    }

    /// Reads the next response's head (skipping `1xx` ones) and readies its body for
    /// [`RawClient::piece`].
    pub async fn head(&mut self) -> io::Result<Head> {
        loop {
            let status_line = self.line().await?;
            let status = status_line
                .split_whitespace()
                .nth(1)
                .and_then(|code| code.parse::<u16>().ok())
                .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
            let mut headers = Vec::new();
            loop {
                let line = self.line().await?;
                if line.is_empty() {
                    break;
                }
                let (name, value) =
                    line.split_once(':').ok_or_else(|| bad(format!("bad header {line:?}")))?;
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
            if (100..200).contains(&status) {
                continue;
            }
            let head = Head { status, headers };
            let chunked = head.header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
            self.framing = match head.header("content-length") {
                _ if status == 204 || status == 304 => Framing::Done,
                _ if chunked => Framing::Chunked { left: 0, crlf: false },
                Some(length) => {
                    Framing::Length(length.parse().map_err(|_| bad("bad content-length"))?)
                }
                None => Framing::Close,
            };
            return Ok(head);
        }
    }

    /// The next piece of the body, as soon as any of it has arrived; `None` at its end. An error
    /// when the body stops short (`UnexpectedEof`, a reset) or nothing comes (`TimedOut`).
    pub async fn piece(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            match self.framing {
                Framing::Done => return Ok(None),
                Framing::Length(0) => {
                    self.framing = Framing::Done;
                    return Ok(None);
                }
                Framing::Length(left) => {
                    let piece = self.take(left).await?;
                    self.framing = Framing::Length(left - piece.len());
                    return Ok(Some(piece));
                }
                Framing::Close => {
                    let piece = self.take(usize::MAX).await;
                    return match piece {
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                            self.framing = Framing::Done;
                            Ok(None)
                        }
                        other => other.map(Some),
                    };
                }
                Framing::Chunked { crlf: true, .. } => {
                    let line = self.line().await?;
                    if !line.is_empty() {
                        return Err(bad(format!("no CRLF after a chunk: {line:?}")));
                    }
                    self.framing = Framing::Chunked { left: 0, crlf: false };
                }
                Framing::Chunked { left: 0, .. } => {
                    let line = self.line().await?;
                    let size = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size, 16)
                        .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
                    if size == 0 {
                        while !self.line().await?.is_empty() {}
                        self.framing = Framing::Done;
                        return Ok(None);
                    }
                    self.framing = Framing::Chunked { left: size, crlf: false };
                }
                Framing::Chunked { left, .. } => {
                    let piece = self.take(left).await?;
                    let left = left - piece.len();
                    self.framing = Framing::Chunked { left, crlf: left == 0 };
                    return Ok(Some(piece));
                }
            }
        }
    }

    /// A whole response; a body that breaks off is returned with `cut` set. Only a wait that
    /// runs out is an error.
    pub async fn response(&mut self) -> io::Result<Response> {
        let head = self.head().await?;
        let mut body = Vec::new();
        let mut cut = false;
        loop {
            match self.piece().await {
                Ok(Some(piece)) => body.extend(piece),
                Ok(None) => break,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(e),
                Err(_) => {
                    cut = true;
                    break;
                }
            }
        }
        Ok(Response { head, body, cut })
    }

    /// Sends `request` and reads the response to it.
    pub async fn exchange(&mut self, request: &[u8]) -> io::Result<Response> {
        self.send(request).await?;
        self.response().await
    }

    /// A line without its CRLF; `UnexpectedEof` when the connection ends first.
    async fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        let reader = &mut self.reader;
        let n = bounded("read a line", async { reader.read_line(&mut line).await }).await?;
        if n == 0 || !line.ends_with('\n') {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_owned())
    }

    /// Up to `most` bytes, as soon as at least one is there.
    async fn take(&mut self, most: usize) -> io::Result<Vec<u8>> {
        let reader = &mut self.reader;
        let buf = bounded("read the body", async { reader.fill_buf().await }).await?;
        if buf.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let piece = buf[..buf.len().min(most)].to_vec();
        self.reader.consume(piece.len());
        Ok(piece)
    }
}

fn bad(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// A request as an upstream read it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers exactly as they came, CRLFs included.
    pub head: String,
    pub method: String,
    pub target: String,
    /// Header names lowercased, in order, repeated names kept.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(key, _)| key == name).map(|(_, v)| v.as_str()).collect()
    }
}

/// A request that reached the upstream, with its connection for the test to answer on (or drop).
#[derive(Debug)]
pub struct Arrival {
    pub request: Request,
    pub stream: TcpStream,
}

/// An upstream on 127.0.0.1 that counts the connections it accepts and hands every request,
/// read whole, to the test.
#[derive(Debug)]
pub struct RawUpstream {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    arrivals: mpsc::UnboundedReceiver<Arrival>,
}

impl RawUpstream {
    /// Binds an ephemeral port; connections are served by tasks of the calling runtime.
    pub async fn start() -> io::Result<RawUpstream> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let (tx, arrivals) = mpsc::unbounded_channel();
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut stream = stream;
                    // A connection that brings no whole request is only counted.
                    if let Ok(Ok(request)) =
                        tokio::time::timeout(PATIENCE, read_request(&mut stream)).await
                    {
                        let _ = tx.send(Arrival { request, stream });
                    }
                });
            }
        });
        Ok(RawUpstream { addr, accepted, arrivals })
    }

    /// An upstream that answers every request with `response` (whole, raw bytes) and closes.
    pub async fn answering(response: Vec<u8>) -> io::Result<RawUpstream> {
        let mut upstream = RawUpstream::start().await?;
        let (tx, arrivals) = mpsc::unbounded_channel();
        let mut incoming = std::mem::replace(&mut upstream.arrivals, arrivals);
        tokio::spawn(async move {
            while let Some(mut arrival) = incoming.recv().await {
                let _ = arrival.stream.write_all(&response).await;
                let _ = arrival.stream.shutdown().await;
                let _ = tx.send(arrival);
            }
        });
        Ok(upstream)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The next request (for [`RawUpstream::answering`]: one already answered).
    pub async fn arrival(&mut self) -> io::Result<Arrival> {
        let arrivals = &mut self.arrivals;
        bounded("an upstream request", async {
            arrivals.recv().await.ok_or_else(|| io::ErrorKind::BrokenPipe.into())
        })
        .await
    }
}

/// Reads a request head and its `content-length` body.
async fn read_request(stream: &mut TcpStream) -> io::Result<Request> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).map_err(|_| bad("a head that is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or(""));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    Ok(Request { target: target.to_owned(), head, method, headers, body })
}

/// A response head with `headers` (`name: value` lines, no CRLFs), ready for a body.
pub fn response_head(status: u16, headers: &[&str]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} Status\r\n");
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// A whole response: `status`, `headers`, a `content-length` and `body`.
pub fn response_with_body(status: u16, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let length = format!("content-length: {}", body.len());
    let mut all: Vec<&str> = headers.to_vec();
    all.push(&length);
    let mut response = response_head(status, &all);
    response.extend_from_slice(body);
    response
}
