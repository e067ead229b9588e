//! Just enough HTTP/1.1 for the mock: read one request, write one response, close.
//!
//! Every response says `connection: close` and the socket is closed after it, so streamed (SSE)
//! bodies need neither a length nor chunked encoding, and clients never reuse a connection that
//! the mock is about to drop.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use serde_json::Value;

/// One parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query as sent (`/v1/messages?beta=true`).
    pub target: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn query(&self) -> &str {
        self.target.split_once('?').map(|(_, query)| query).unwrap_or("")
    }

    /// The body as JSON; `Value::Null` when it is empty or not JSON (e.g. compressed).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// What to send back.
#[derive(Debug, Clone)]
pub enum Response {
    Json {
        status: u16,
        body: Value,
    },
    /// Server-sent events: `(event name, data)`; Gemini's stream has no event names. A string
    /// `data` is written verbatim rather than as JSON, for Chat Completions' `data: [DONE]`.
    Sse(Vec<(Option<String>, Value)>),
}

impl Response {
    pub fn ok(body: Value) -> Response {
        Response::Json { status: 200, body }
    }

    pub fn error(status: u16, message: &str) -> Response {
        Response::Json {
            status,
            body: serde_json::json!({
                "type": "error",
                "error": {"type": "not_found_error", "code": status, "message": message},
            }),
        }
    }
}

/// Serves each connection `listener` accepts on a thread of its own (named `name`) with
/// `serve`, then closes it; stops at the first connection after `stopping(&shared)` is true (the
/// owner sets it and connects once to wake the loop). A connection's error is printed, never
/// fatal.
pub fn accept_each<S, E>(
    listener: TcpListener,
    shared: Arc<S>,
    name: &'static str,
    stopping: fn(&S) -> &AtomicBool,
    serve: fn(&TcpStream, &S) -> Result<(), E>,
) where
    S: Send + Sync + 'static,
    E: std::fmt::Display + 'static,
{
    for stream in listener.incoming() {
        if stopping(&shared).load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        let _ = thread::Builder::new().name(format!("{name}-conn")).spawn(move || {
            if let Err(err) = serve(&stream, &shared) {
                eprintln!("{name}: connection error: {err}");
            }
            let _ = stream.shutdown(Shutdown::Both);
        });
    }
}

/// Ends an [`accept_each`] loop listening on `addr`: sets its `stopping` flag, then connects
/// once to wake the blocking accept() so the loop sees the flag.
pub fn stop(addr: &SocketAddr, stopping: &AtomicBool) {
    stopping.store(true, Ordering::SeqCst);
    let _ = TcpStream::connect_timeout(addr, Duration::from_millis(200));
}

/// The servers' state behind a mutex: a panicking connection thread must not take the whole
/// server down with it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Reads one request; `Ok(None)` when the peer closed the connection without sending one.
pub fn read_request(stream: &TcpStream) -> io::Result<Option<Request>> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad request line {line:?}"),
        ));
    };
    let (method, target) = (method.to_owned(), target.to_owned());

    let mut headers = Vec::new();
    let mut header_bytes = 0;
    loop {
        line.clear();
        header_bytes += reader.read_line(&mut line)?;
        if header_bytes > MAX_HEADER_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "headers too long"));
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let request = Request { method, target, headers, body: Vec::new() };

    // curl and some SDKs wait for this before sending a large body.
    if request.header("expect").is_some_and(|value| value.eq_ignore_ascii_case("100-continue")) {
        let mut writer = stream;
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }

    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(&mut reader)?
    } else {
        let length: usize =
            request.header("content-length").and_then(|n| n.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    Ok(Some(Request { body, ..request }))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size_text = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers, if any, end with an empty line.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        line.clear();
        reader.read_line(&mut line)?;
    }
}

/// Writes the response and flushes; the caller closes the connection.
pub fn write_response(
    mut stream: &TcpStream,
    response: &Response,
    extra_headers: &[(&str, String)],
) -> io::Result<()> {
    let head = |status: u16, content_type: &str| {
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        head.push_str(&format!("content-type: {content_type}\r\nconnection: close\r\n"));
        for (name, value) in extra_headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head
    };
    match response {
        Response::Json { status, body } => {
            let body = body.to_string();
            let mut message = head(*status, "application/json");
            message.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
            stream.write_all(message.as_bytes())?;
        }
        Response::Sse(events) => {
            let mut message = head(200, "text/event-stream");
            message.push_str("cache-control: no-cache\r\n\r\n");
            stream.write_all(message.as_bytes())?;
            for (event, data) in events {
                let mut frame = String::new();
                if let Some(event) = event {
                    frame.push_str(&format!("event: {event}\n"));
                }
                match data {
                    Value::String(raw) => frame.push_str(&format!("data: {raw}\n\n")),
                    data => frame.push_str(&format!("data: {data}\n\n")),
                }
                // One write per event, flushed, so clients see a real stream and not one blob.
                stream.write_all(frame.as_bytes())?;
                stream.flush()?;
            }
        }
    }
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    }
}
