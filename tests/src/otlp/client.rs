//! A blocking OTLP/HTTP client: one protobuf POST per connection, for sending to rotel or to the
//! receiver directly.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use prost::Message as _;

use super::RpcStatus;
use crate::raw_http::PATIENCE;

/// What an OTLP/HTTP endpoint answered to [`post_protobuf`].
#[derive(Debug, Clone)]
pub struct Posted {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked and gunzipped.
    pub body: Vec<u8>,
}

impl Posted {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The error body, when the status is not 2xx and the body is a `google.rpc.Status`.
    pub fn rpc_status(&self) -> Option<RpcStatus> {
        RpcStatus::decode(self.body.as_slice()).ok()
    }
}

/// Gzips `bytes` (for `content-encoding: gzip` bodies).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// POSTs `request` as protobuf to `<base_url>/v1/metrics`.
pub fn post_metrics(base_url: &str, request: &ExportMetricsServiceRequest) -> io::Result<Posted> {
    post_protobuf(base_url, "/v1/metrics", &request.encode_to_vec(), false)
}

/// POSTs `request` as protobuf to `<base_url>/v1/logs`.
pub fn post_logs(base_url: &str, request: &ExportLogsServiceRequest) -> io::Result<Posted> {
    post_protobuf(base_url, "/v1/logs", &request.encode_to_vec(), false)
}

/// POSTs a protobuf `body` to `<base_url><path>` (`base_url` is `http://HOST:PORT`), gzipped with
/// `content-encoding: gzip` when `gzip` is set, on a connection of its own. A collector that is
/// down is an `Err` (connection refused); every wait is bounded by [`PATIENCE`].
pub fn post_protobuf(base_url: &str, path: &str, body: &[u8], gzip: bool) -> io::Result<Posted> {
    let authority = base_url
        .strip_prefix("http://")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "only http:// URLs"))?
        .trim_end_matches('/');
    let addr = authority.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("no address for {authority}"))
    })?;
    let mut stream = TcpStream::connect_timeout(&addr, PATIENCE)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    stream.set_write_timeout(Some(PATIENCE))?;

    let gzipped;
    let (body, encoding) = if gzip {
        gzipped = self::gzip(body);
        (gzipped.as_slice(), "content-encoding: gzip\r\n")
    } else {
        (body, "")
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/x-protobuf\r\n\
         {encoding}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    read_response(stream)
}

/// Reads one response on a connection the server closes after it (`connection: close`).
fn read_response(stream: TcpStream) -> io::Result<Posted> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let status = loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("connection closed before a status line".into()));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
        // Skip interim responses (100 Continue) and their empty header block.
        if status >= 200 {
            break status;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                break;
            }
        }
    };
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value): &(String, String)| value.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|value| value.contains("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    } else if let Some(length) = header("content-length").and_then(|n| n.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    if header("content-encoding").is_some_and(|value| value.eq_ignore_ascii_case("gzip")) {
        let mut plain = Vec::new();
        GzDecoder::new(body.as_slice()).read_to_end(&mut plain)?;
        body = plain;
    }
    Ok(Posted { status, headers, body })
}
