//! Newline framing: split a byte stream into lines without touching their bytes.
//!
//! ACP messages are newline-delimited. A line keeps everything but its `\n` (a `\r` before it
//! stays, so a CRLF peer's line is forwarded as it came); whether the `\n` was there is recorded,
//! so a last line without one is written back the same way. Lines longer than the limit are
//! skipped up to their newline and reported, so one oversized message cannot exhaust memory or
//! end the session.
//!
//! [`Framer`] does the splitting without I/O over whatever a read brought (the relay hands a
//! whole read buffer over and gets ranges back: no copy or allocation per line);
//! [`LineReader`] is the same framing as owned lines from an async reader. [`stdin`]/[`stdout`]
//! give the relay the process's own pipes as non-blocking fds driven by the runtime's poller,
//! instead of tokio's `Stdin`/`Stdout`, which run every read and write on the blocking pool.
//! Windows has no such fds (anonymous pipes cannot be polled): there it is tokio's.

use std::ops::Range;
#[cfg(unix)]
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
#[cfg(unix)]
use std::task::ready;
use std::task::{Context, Poll};

#[cfg(unix)]
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, ReadBuf};

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

/// One piece of the stream, found by [`Framer::split`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A complete line: its bytes are `range` of the buffer split (without the `\n`).
    Line {
        /// Where the line is in the buffer.
        range: Range<usize>,
        /// Whether a `\n` follows it (false only for a last, unterminated line).
        newline: bool,
    },
    /// A line over the limit was dropped; its length in bytes.
    TooLong(usize),
}

/// Splits a stream into lines, one buffer at a time.
#[derive(Debug)]
pub struct Framer {
    max: usize,
    /// Bytes of an over-long line dropped so far.
    dropping: Option<usize>,
    /// Bytes at the front of the next buffer already searched (the start of a line still
    /// arriving, left there by the last split): a long line is searched once, not once per read.
    searched: usize,
    /// Whether a line still arriving past the limit is left to the caller (see
    /// [`Framer::deferring`]).
    defer: bool,
}

impl Framer {
    /// A framer that accepts lines up to `max` bytes.
    pub fn new(max: usize) -> Framer {
        Framer { max, dropping: None, searched: 0, defer: false }
    }

    /// A framer that does not drop a line still arriving past the limit by itself: it is left
    /// at the end of the buffer like any line still arriving, and the caller either takes it
    /// over ([`Framer::restart`], when it streams the line) or has it dropped
    /// ([`Framer::drop_partial`]). Complete lines over the limit are dropped as usual.
    pub fn deferring(max: usize) -> Framer {
        Framer { defer: true, ..Framer::new(max) }
    }

    /// The line still arriving was taken over by the caller: the next buffer starts afresh.
    pub fn restart(&mut self) {
        self.searched = 0;
        self.dropping = None;
    }

    /// Drops the line still arriving (`len` bytes of it so far, all handed back as taken):
    /// it is counted until its newline and reported as [`Piece::TooLong`].
    pub fn drop_partial(&mut self, len: usize) {
        self.searched = 0;
        self.dropping = Some(len);
    }

    /// The longest line accepted.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Finds the pieces that start at `buf[0]`, appends them to `out`, and returns how many
    /// bytes of `buf` they took. What is left is the start of a line that is still arriving:
    /// keep it at the front of the next buffer. At `eof` everything is taken. A line over the
    /// limit is taken as it arrives and only counted.
    pub fn split(&mut self, buf: &[u8], eof: bool, out: &mut Vec<Piece>) -> usize {
        let mut start = 0;
        let from = std::mem::take(&mut self.searched).min(buf.len());
        for nl in memchr::memchr_iter(b'\n', &buf[from..]).map(|i| i + from) {
            let len = nl - start;
            out.push(match self.dropping.take() {
                Some(dropped) => Piece::TooLong(dropped + len),
                None if len > self.max => Piece::TooLong(len),
                None => Piece::Line { range: start..nl, newline: true },
            });
            start = nl + 1;
        }
        let rest = buf.len() - start;
        if let Some(dropped) = &mut self.dropping {
            *dropped += rest;
        } else if rest > self.max && (!self.defer || eof) {
            self.dropping = Some(rest);
        } else if eof && rest > 0 {
            out.push(Piece::Line { range: start..buf.len(), newline: false });
        } else if !eof {
            self.searched = rest;
            return start;
        }
        if eof && let Some(dropped) = self.dropping.take() {
            out.push(Piece::TooLong(dropped));
        }
        buf.len()
    }

    /// Whether an over-long line is being dropped.
    pub fn dropping(&self) -> bool {
        self.dropping.is_some()
    }
}

/// Reads lines of at most `max` bytes from a buffered reader.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    framer: Framer,
    /// The start of a line still arriving.
    partial: Vec<u8>,
    pieces: std::collections::VecDeque<Read>,
    eof: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader that accepts lines up to `max` bytes.
    pub fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader {
            inner,
            framer: Framer::new(max),
            partial: Vec::new(),
            pieces: std::collections::VecDeque::new(),
            eof: false,
        }
    }

    /// The next line.
    pub async fn next(&mut self) -> std::io::Result<Read> {
        let mut out = Vec::new();
        loop {
            if let Some(r) = self.pieces.pop_front() {
                return Ok(r);
            }
            if self.eof {
                return Ok(Read::Eof);
            }
            let buf = self.inner.fill_buf().await?;
            let eof = buf.is_empty();
            self.partial.extend_from_slice(buf);
            let n = buf.len();
            self.inner.consume(n);
            let taken = self.framer.split(&self.partial, eof, &mut out);
            for p in out.drain(..) {
                self.pieces.push_back(match p {
                    Piece::Line { range, newline } => {
                        Read::Line(Line { bytes: self.partial[range].to_vec(), newline })
                    }
                    Piece::TooLong(n) => Read::TooLong(n),
                });
            }
            self.partial.drain(..taken);
            self.eof = eof;
        }
    }
}

/// Pipe capacity asked for the relay's pipes (the default unprivileged maximum).
#[cfg(target_os = "linux")]
const PIPE_SIZE: libc::c_int = 1 << 20;

/// Asks for a larger capacity of the pipe `fd` is an end of, so a long line crosses it with
/// fewer wake-ups of the writer and the reader; a refusal (not a pipe, over the system's
/// maximum) leaves the pipe as it was. Linux only: other systems size pipes themselves.
#[cfg(target_os = "linux")]
pub fn grow_pipe(fd: libc::c_int) {
    // SAFETY: fcntl on an fd the caller holds; F_SETPIPE_SZ fails harmlessly on anything else.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_SIZE) };
}

/// The process's stdin for the relay: its fd polled by the runtime when it is a pipe or a
/// socket, else (a file, a terminal; always on Windows) tokio's `Stdin`.
#[cfg(unix)]
pub fn stdin() -> Input {
    match FdIo::new(0) {
        Some(fd) => Input::Fd(fd),
        None => Input::Tokio(tokio::io::stdin()),
    }
}

/// The process's stdin for the relay: tokio's `Stdin`.
#[cfg(not(unix))]
pub fn stdin() -> Input {
    Input::Tokio(tokio::io::stdin())
}

/// The process's stdout for the relay, as [`stdin`].
#[cfg(unix)]
pub fn stdout() -> Output {
    match FdIo::new(1) {
        Some(fd) => Output::Fd(fd),
        None => Output::Tokio(tokio::io::stdout()),
    }
}

/// The process's stdout for the relay: tokio's `Stdout`.
#[cfg(not(unix))]
pub fn stdout() -> Output {
    Output::Tokio(tokio::io::stdout())
}

/// See [`stdin`].
#[derive(Debug)]
pub enum Input {
    /// A non-blocking pipe or socket.
    #[cfg(unix)]
    Fd(FdIo),
    /// Anything else.
    Tokio(tokio::io::Stdin),
}

/// See [`stdout`].
#[derive(Debug)]
pub enum Output {
    /// A non-blocking pipe or socket.
    #[cfg(unix)]
    Fd(FdIo),
    /// Anything else.
    Tokio(tokio::io::Stdout),
}

/// A duplicate of a standard fd, set non-blocking and registered with the runtime's poller;
/// the original flags are put back when it is dropped (the fd's description may outlive us).
#[cfg(unix)]
#[derive(Debug)]
pub struct FdIo {
    fd: AsyncFd<OwnedFd>,
    flags: libc::c_int,
    /// No read was made yet: the first is tried before the poller is asked, since its
    /// readiness comes only with the runtime's next turn, and what the editor sent at once (its
    /// `initialize`) would wait behind everything else the relay sets up.
    first_read: bool,
}

#[cfg(unix)]
impl FdIo {
    fn new(std_fd: libc::c_int) -> Option<FdIo> {
        // SAFETY: fds 0 and 1 are open for the life of the process.
        let fd = unsafe { BorrowedFd::borrow_raw(std_fd) };
        // SAFETY: fstat on a valid fd into a zeroed stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return None;
        }
        // Terminals are shared with the shell and with our stderr: leave them blocking.
        let kind = st.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return None;
        }
        let owned = fd.try_clone_to_owned().ok()?;
        #[cfg(target_os = "linux")]
        if kind == libc::S_IFIFO {
            grow_pipe(owned.as_raw_fd());
        }
        // SAFETY: fcntl on a valid fd.
        let flags = unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_GETFL) };
        if flags < 0
            || unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }
                < 0
        {
            return None;
        }
        // SAFETY: `owned` is a valid fd that the AsyncFd owns and closes after deregistering.
        match unsafe { AsyncFd::register(owned) } {
            Ok(fd) => Some(FdIo { fd, flags, first_read: true }),
            Err(_) => {
                // SAFETY: restoring the flags read above on the same fd.
                unsafe { libc::fcntl(std_fd, libc::F_SETFL, flags) };
                None
            }
        }
    }
}

#[cfg(unix)]
impl Drop for FdIo {
    fn drop(&mut self) {
        // SAFETY: fcntl on the fd this owns.
        unsafe { libc::fcntl(self.fd.get_ref().as_raw_fd(), libc::F_SETFL, self.flags) };
    }
}

#[cfg(unix)]
fn io_result(n: isize) -> std::io::Result<usize> {
    if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
}

#[cfg(unix)]
impl AsyncRead for FdIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.first_read) {
            match read_into(this.fd.get_ref().as_raw_fd(), buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                res => return Poll::Ready(res),
            }
        }
        loop {
            let mut guard = ready!(this.fd.poll_read_ready(cx))?;
            match guard.try_io(|fd| read_into(fd.as_raw_fd(), buf)) {
                Ok(res) => return Poll::Ready(res),
                Err(_would_block) => continue,
            }
        }
    }
}

/// One `read` into what `buf` has not filled, uninitialised as it may be: the kernel writes
/// the bytes, so nothing is zeroed first (zeroing the relay's 256 KiB buffers before every
/// read touched every page of them).
#[cfg(unix)]
fn read_into(fd: libc::c_int, buf: &mut ReadBuf<'_>) -> std::io::Result<()> {
    // SAFETY: `read` writes at most `unfilled.len()` bytes into memory `buf` owns; those it
    // wrote are initialised, which `assume_init` then states.
    unsafe {
        let unfilled = buf.unfilled_mut();
        let n = io_result(libc::read(fd, unfilled.as_mut_ptr().cast(), unfilled.len()))?;
        buf.assume_init(n);
        buf.advance(n);
    }
    Ok(())
}

#[cfg(unix)]
impl AsyncWrite for FdIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = ready!(self.fd.poll_write_ready(cx))?;
            let res = guard.try_io(|fd| {
                // SAFETY: writing from a valid buffer of that length.
                io_result(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
            });
            match res {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Input::Fd(f) => Pin::new(f).poll_read(cx, buf),
            Input::Tokio(t) => Pin::new(t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Fd(f) => Pin::new(f).poll_write(cx, buf),
            Output::Tokio(t) => Pin::new(t).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Fd(f) => Pin::new(f).poll_flush(cx),
            Output::Tokio(t) => Pin::new(t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Fd(f) => Pin::new(f).poll_shutdown(cx),
            Output::Tokio(t) => Pin::new(t).poll_shutdown(cx),
        }
    }
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

    #[test]
    fn framer_keeps_partial_lines() {
        let mut f = Framer::new(4);
        let mut out = Vec::new();
        assert_eq!(f.split(b"ab\ncd", false, &mut out), 3);
        assert_eq!(out, vec![Piece::Line { range: 0..2, newline: true }]);
        out.clear();
        assert_eq!(f.split(b"cdefgh", false, &mut out), 6);
        assert!(out.is_empty() && f.dropping());
        assert_eq!(f.split(b"ij\nk", true, &mut out), 4);
        assert_eq!(out, vec![Piece::TooLong(8), Piece::Line { range: 3..4, newline: false }]);
    }

    #[test]
    fn a_deferring_framer_leaves_a_line_over_the_limit_to_the_caller() {
        let mut f = Framer::deferring(4);
        let mut out = Vec::new();
        assert_eq!(f.split(b"ab\ncdefgh", false, &mut out), 3);
        assert_eq!(out, vec![Piece::Line { range: 0..2, newline: true }]);
        assert!(!f.dropping());
        // Taken over (streamed): the next buffer starts afresh.
        f.restart();
        out.clear();
        assert_eq!(f.split(b"x\n", false, &mut out), 2);
        assert_eq!(out, vec![Piece::Line { range: 0..1, newline: true }]);
        // Dropped: counted to its newline.
        out.clear();
        assert_eq!(f.split(b"123456", false, &mut out), 0);
        f.drop_partial(6);
        assert_eq!(f.split(b"78\nok\n", false, &mut out), 6);
        assert_eq!(out, vec![Piece::TooLong(8), Piece::Line { range: 3..5, newline: true }]);
        // Complete lines over the limit, and one at the end of the stream, are dropped as usual.
        out.clear();
        assert_eq!(f.split(b"123456\n1234567", true, &mut out), 14);
        assert_eq!(out, vec![Piece::TooLong(6), Piece::TooLong(7)]);
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
