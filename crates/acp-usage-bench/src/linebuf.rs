//! A growable read buffer that hands out newline-terminated lines by range, with `memchr`
//! speed and without copying them.

use std::io::{self, Read};
use std::ops::Range;

/// Smallest free space worth a `read` call; below it the buffer is compacted or grown.
const MIN_READ: usize = 64 * 1024;

/// Buffered bytes and the lines in them.
#[derive(Debug)]
pub struct LineBuf {
    buf: Vec<u8>,
    /// Start of the first line not handed out.
    start: usize,
    /// End of the buffered bytes.
    end: usize,
    /// Bytes before this offset are known to hold no `\n` of the current line.
    scanned: usize,
}

impl LineBuf {
    /// A buffer of `cap` bytes to start with (it grows for longer lines).
    pub fn with_capacity(cap: usize) -> LineBuf {
        LineBuf { buf: vec![0; cap.max(MIN_READ)], start: 0, end: 0, scanned: 0 }
    }

    /// The range of the next complete line without its `\n`, if one is buffered.
    pub fn next_line(&mut self) -> Option<Range<usize>> {
        let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) else {
            self.scanned = self.end;
            return None;
        };
        let line = self.start..self.scanned + i;
        self.start = line.end + 1;
        self.scanned = self.start;
        Some(line)
    }

    /// The bytes of a range returned by [`LineBuf::next_line`] (valid until the next fill).
    pub fn get(&self, r: Range<usize>) -> &[u8] {
        &self.buf[r]
    }

    /// Bytes buffered that are not handed out yet.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// One `read` of at most `max` bytes into the buffer (making room first); 0 at end of stream.
    pub fn fill(&mut self, r: &mut impl Read, max: usize) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
        }
        if self.buf.len() - self.end < MIN_READ.min(max) {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.scanned -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < MIN_READ.min(max) {
                let len = self.buf.len() * 2;
                self.buf.resize(len, 0);
            }
        }
        let stop = self.buf.len().min(self.end + max.max(1));
        loop {
            match r.read(&mut self.buf[self.end..stop]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut r = input;
        let mut b = LineBuf::with_capacity(0);
        let mut out = Vec::new();
        loop {
            while let Some(l) = b.next_line() {
                out.push(b.get(l).to_vec());
            }
            if b.fill(&mut r, max).unwrap() == 0 {
                assert_eq!(b.pending(), 0);
                return out;
            }
        }
    }

    #[test]
    fn splits_across_reads_and_grows_for_long_lines() {
        let long = vec![b'x'; 300_000];
        let mut input = b"a\n\nbc\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nend\n");
        for max in [1, 7, 65_536, 1 << 20] {
            let got = lines(&input, max);
            assert_eq!(got.len(), 5, "max {max}");
            assert_eq!(got[0], b"a");
            assert_eq!(got[1], b"");
            assert_eq!(got[2], b"bc");
            assert_eq!(got[3], long);
            assert_eq!(got[4], b"end");
        }
    }
}
