//! An incremental server-sent-events framer: bytes in any pieces, whole events out.
//!
//! Follows the WHATWG event-stream rules the providers' streams rely on: lines end with `\n`,
//! `\r\n` or a lone `\r`; a blank line ends an event; `data:` lines are joined with `\n`;
//! `event:` names it; lines starting with `:` are comments; one space after the colon is
//! dropped. Only the event in progress is kept, and an event beyond the size limit is skipped
//! whole rather than read in part. Speed matters here (the tap reads every byte of a stream as
//! it passes): line ends are found with memchr, lines a piece holds whole are read in place, and
//! the data of events the reader skips by name (text deltas) is never copied.

/// See the module documentation.
#[derive(Debug)]
pub(super) struct SseFramer {
    /// The line in progress, when it began in an earlier piece (a line that a piece holds
    /// whole is read where it is, never copied).
    line: Vec<u8>,
    /// The line in progress went beyond the limit; its bytes are being dropped.
    line_dropped: bool,
    /// The previous piece ended with `\r`: a `\n` opening the next one ends no line.
    after_cr: bool,
    /// The event's `data` lines so far, each followed by `\n`.
    data: Vec<u8>,
    /// The event's `event:` name (reused from event to event).
    name: Vec<u8>,
    named: bool,
    /// The event went beyond the limit, or its name is one the reader skips: it will not be
    /// handed out, and its data is not kept.
    dropped: bool,
    /// Event names whose data the reader never looks at (the bulk of a stream: text deltas).
    skips: fn(&str) -> bool,
    limit: usize,
}

impl SseFramer {
    /// A framer that skips events (and lines) longer than `limit` bytes, and events whose name
    /// `skips` says the reader does not want.
    pub(super) fn new(limit: usize, skips: fn(&str) -> bool) -> SseFramer {
        SseFramer {
            line: Vec::new(),
            line_dropped: false,
            after_cr: false,
            data: Vec::new(),
            name: Vec::new(),
            named: false,
            dropped: false,
            skips,
            limit,
        }
    }

    /// Reads `chunk`, handing `on_event` the name and data of every event it completes.
    pub(super) fn feed(&mut self, chunk: &[u8], on_event: &mut impl FnMut(Option<&str>, &[u8])) {
        let mut rest = chunk;
        if std::mem::take(&mut self.after_cr) && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        while !rest.is_empty() {
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.take_line_bytes(rest);
                return;
            };
            let part = &rest[..end];
            let cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => (),
                    None => self.after_cr = true,
                }
            }
            if self.line.is_empty() && !self.line_dropped {
                // The whole line is in this piece.
                self.end_line(part, on_event);
            } else {
                self.take_line_bytes(part);
                self.end_buffered_line(on_event);
            }
        }
    }

    /// The stream ended: a last line and event cut off before their terminators still count,
    /// since their bytes did arrive.
    pub(super) fn finish(&mut self, on_event: &mut impl FnMut(Option<&str>, &[u8])) {
        if !self.line.is_empty() || self.line_dropped {
            self.end_buffered_line(on_event);
        }
        self.dispatch(on_event);
    }

    fn take_line_bytes(&mut self, bytes: &[u8]) {
        if self.line_dropped {
            return;
        }
        if self.line.len() + bytes.len() > self.limit {
            self.line_dropped = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_buffered_line(&mut self, on_event: &mut impl FnMut(Option<&str>, &[u8])) {
        if std::mem::take(&mut self.line_dropped) {
            self.dropped = true;
            self.data = Vec::new();
            return;
        }
        let line = std::mem::take(&mut self.line);
        self.end_line(&line, on_event);
        // Keep the allocation for the next line that spans pieces.
        self.line = line;
        self.line.clear();
    }

    fn end_line(&mut self, line: &[u8], on_event: &mut impl FnMut(Option<&str>, &[u8])) {
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" if !self.dropped => {
                if self.data.len() + value.len() >= self.limit {
                    self.dropped = true;
                    self.data = Vec::new();
                } else {
                    self.data.extend_from_slice(value);
                    self.data.push(b'\n');
                }
            }
            b"event" => {
                self.name.clear();
                self.name.extend_from_slice(value);
                self.named = true;
                if std::str::from_utf8(value).is_ok_and(self.skips) {
                    self.dropped = true;
                    self.data.clear();
                }
            }
            // Comments (an empty field name), `id`, `retry` and unknown fields.
            _ => (),
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Option<&str>, &[u8])) {
        // An event without data lines is not an event (a keep-alive, or a name alone).
        if !self.dropped && !self.data.is_empty() {
            self.data.pop();
            let name = self.named.then(|| String::from_utf8_lossy(&self.name));
            on_event(name.as_deref(), &self.data);
        }
        self.data.clear();
        self.named = false;
        self.dropped = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(stream: &[u8], piece: usize, limit: usize) -> Vec<(Option<String>, String)> {
        let mut framer = SseFramer::new(limit, |_| false);
        let mut out = Vec::new();
        let mut sink = |name: Option<&str>, data: &[u8]| {
            out.push((name.map(str::to_owned), String::from_utf8_lossy(data).into_owned()));
        };
        for chunk in stream.chunks(piece) {
            framer.feed(chunk, &mut sink);
        }
        framer.finish(&mut sink);
        out
    }

    #[test]
    fn line_endings_fields_and_comments() {
        let stream =
            b": keep-alive\r\n\r\nevent: a\r\ndata: one\r\ndata:two\r\nid: 7\r\nretry: 10\r\n\r\n\
            event: ping\n\nevent:b\rdata:  three\r\rdata\n\ndata: caf\xc3\xa9 \xe6\x97\xa5\n\n";
        let expected = vec![
            (Some("a".to_owned()), "one\ntwo".to_owned()),
            (Some("b".to_owned()), " three".to_owned()),
            (None, String::new()),
            (None, "café 日".to_owned()),
        ];
        for piece in 1..=stream.len() {
            assert_eq!(events(stream, piece, 1 << 20), expected, "piece {piece}");
        }
    }

    #[test]
    fn a_cut_stream_still_yields_its_last_event() {
        assert_eq!(events(b"data: [DONE]", 5, 100), [(None, "[DONE]".to_owned())]);
        assert_eq!(events(b"data: x\r", 1, 100), [(None, "x".to_owned())]);
        assert_eq!(events(b"event: only\n", 1, 100), []);
    }

    #[test]
    fn oversized_events_are_skipped_whole() {
        let long = format!("data: {}\n\n", "x".repeat(64));
        let split = format!("data: {0}\ndata: {0}\n\n", "y".repeat(30));
        let stream = format!("data: a\n\n{long}event: e\n{split}data: b\n\n");
        for piece in [1, 3, 1000] {
            assert_eq!(
                events(stream.as_bytes(), piece, 50),
                [(None, "a".to_owned()), (None, "b".to_owned())],
                "piece {piece}"
            );
        }
    }
}
