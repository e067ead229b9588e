//! Newline framing: split a byte stream into lines without touching their bytes.
//!
//! ACP messages are newline-delimited. A line keeps everything but its `\n` (a `\r` before it
//! stays, so a CRLF peer's line is forwarded as it came); whether the `\n` was there is recorded,
//! so a last line without one is written back the same way. Lines longer than the limit are
//! skipped up to their newline and reported, so one oversized message cannot exhaust memory or
//! end the session.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line as it crossed the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The bytes without the terminating `\n`.
    pub bytes: Vec<u8>,
    /// Whether a `\n` ended the line (false only for a last, unterminated line).
    pub newline: bool,
}

/// What the reader produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A complete line.
    Line(Line),
    /// A line over the limit was dropped; its length in bytes (at least the limit).
    TooLong(usize),
    /// End of stream.
    Eof,
}

/// Reads lines of at most `max` bytes from a buffered reader.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader that accepts lines up to `max` bytes.
    pub fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader { inner, max }
    }

    /// The next line.
    pub async fn next(&mut self) -> std::io::Result<Read> {
        let mut bytes = Vec::new();
        let mut dropped = 0usize;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                if dropped > 0 {
                    return Ok(Read::TooLong(dropped));
                }
                if bytes.is_empty() {
                    return Ok(Read::Eof);
                }
                return Ok(Read::Line(Line { bytes, newline: false }));
            }
            let (chunk, found) = match memchr(buf) {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let taken = chunk.len() + usize::from(found);
            if dropped > 0 || bytes.len() + chunk.len() > self.max {
                // Over the limit: stop buffering, only count until the newline.
                dropped += bytes.len() + chunk.len();
                bytes = Vec::new();
            } else {
                bytes.extend_from_slice(chunk);
            }
            self.inner.consume(taken);
            if found {
                if dropped > 0 {
                    return Ok(Read::TooLong(dropped));
                }
                return Ok(Read::Line(Line { bytes, newline: true }));
            }
        }
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], max: usize, buf_cap: usize) -> Vec<Read> {
        let reader = tokio::io::BufReader::with_capacity(buf_cap, input);
        let mut lines = LineReader::new(reader, max);
        let mut out = Vec::new();
        loop {
            let r = lines.next().await.unwrap();
            let eof = r == Read::Eof;
            out.push(r);
            if eof {
                return out;
            }
        }
    }

    fn line(b: &[u8], newline: bool) -> Read {
        Read::Line(Line { bytes: b.to_vec(), newline })
    }

    #[tokio::test]
    async fn splits_keeping_bytes() {
        for cap in [1, 3, 64] {
            let got = read_all(b"{\"a\":1}\r\n\n\xff\xfe garbage\n[1,2]\nlast", 1024, cap).await;
            assert_eq!(
                got,
                vec![
                    line(b"{\"a\":1}\r", true),
                    line(b"", true),
                    line(b"\xff\xfe garbage", true),
                    line(b"[1,2]", true),
                    line(b"last", false),
                    Read::Eof
                ],
                "buffer capacity {cap}"
            );
        }
    }

    #[tokio::test]
    async fn too_long_lines_are_skipped_and_reading_goes_on() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        input.extend(vec![b'y'; 50]);
        let got = read_all(&input, 10, 7).await;
        assert_eq!(got, vec![Read::TooLong(100), line(b"ok", true), Read::TooLong(50), Read::Eof]);
        // A line of exactly the limit is accepted.
        let got = read_all(b"0123456789\n", 10, 4).await;
        assert_eq!(got, vec![line(b"0123456789", true), Read::Eof]);
    }
}
