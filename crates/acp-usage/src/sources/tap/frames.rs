//! Reading WebSocket frames (RFC 6455) out of a copy of one direction of a tunnelled connection,
//! into whole messages, permessage-deflate (RFC 7692) included.
//!
//! The reader only ever sees copies: it never holds the tunnel's bytes back. It is fed whatever
//! pieces the network delivers; header bytes are kept until a header is whole, payload bytes go
//! (unmasked) straight into the message being assembled, so a large frame is copied once. A
//! message over the size cap, a frame it cannot follow (an unknown extension's bits, a
//! continuation without a start) or a payload that does not inflate breaks the reader for good:
//! the caller stops observing that connection, and the bytes keep flowing.

use flate2::{Decompress, FlushDecompress, Status};

/// The largest message the reader assembles (compressed or inflated).
pub(super) const MAX_MESSAGE: usize = 64 << 20;

/// The four bytes a deflated message's sender strips from its end (RFC 7692 §7.2.1).
const DEFLATE_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// permessage-deflate as the server's 101 accepted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Deflate {
    /// The client resets its compressor after each message.
    pub client_no_context_takeover: bool,
    /// The server resets its compressor after each message.
    pub server_no_context_takeover: bool,
}

impl Deflate {
    /// Reads the 101's `Sec-WebSocket-Extensions` values: `Ok(None)` without compression, an
    /// error for an extension the reader cannot follow (its frames would not parse).
    /// `*_max_window_bits` need nothing: a 32 KiB-window inflater reads any smaller window.
    pub fn negotiated<'a>(
        values: impl Iterator<Item = &'a str>,
    ) -> Result<Option<Deflate>, String> {
        let mut found = None;
        for extension in values.flat_map(|value| value.split(',')) {
            let mut params = extension.split(';').map(str::trim);
            let name = params.next().unwrap_or("");
            if name.is_empty() {
                continue;
            }
            if !name.eq_ignore_ascii_case("permessage-deflate") || found.is_some() {
                return Err(format!("the extension {name:?}"));
            }
            let mut deflate = Deflate::default();
            for param in params {
                let key = param.split('=').next().unwrap_or("").trim().to_ascii_lowercase();
                match key.as_str() {
                    "client_no_context_takeover" => deflate.client_no_context_takeover = true,
                    "server_no_context_takeover" => deflate.server_no_context_takeover = true,
                    "client_max_window_bits" | "server_max_window_bits" | "" => (),
                    other => return Err(format!("the permessage-deflate parameter {other:?}")),
                }
            }
            found = Some(deflate);
        }
        Ok(found)
    }
}

/// A whole message.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Message {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    /// A close frame: the sender ends the connection.
    Close,
}

/// Where the reader is in the byte stream.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Collecting a frame header (in `FrameReader::head`).
    Head,
    /// Collecting `left` payload bytes of a frame.
    Payload { left: u64, mask: Option<[u8; 4]>, at: usize, fin: bool, control: Option<u8> },
}

/// A data message being assembled.
#[derive(Debug)]
struct Partial {
    text: bool,
    deflated: bool,
    data: Vec<u8>,
}

/// One direction's frames into messages; see the module documentation.
pub(super) struct FrameReader {
    step: Step,
    head: Vec<u8>,
    partial: Option<Partial>,
    /// A control frame's payload (at most 125 bytes).
    control: Vec<u8>,
    /// Set when the connection negotiated permessage-deflate.
    inflater: Option<Decompress>,
    /// This direction's sender resets its compressor after each message.
    no_context_takeover: bool,
    max: usize,
    broken: bool,
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("step", &self.step)
            .field("deflate", &self.inflater.is_some())
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl FrameReader {
    /// A reader for one direction: `deflate` when the 101 accepted permessage-deflate,
    /// `no_context_takeover` when it said so for this direction's sender.
    pub fn new(deflate: bool, no_context_takeover: bool) -> FrameReader {
        FrameReader::with_max(deflate, no_context_takeover, MAX_MESSAGE)
    }

    pub fn with_max(deflate: bool, no_context_takeover: bool, max: usize) -> FrameReader {
        FrameReader {
            step: Step::Head,
            head: Vec::with_capacity(14),
            partial: None,
            control: Vec::new(),
            inflater: deflate.then(|| Decompress::new(false)),
            no_context_takeover,
            max,
            broken: false,
        }
    }

    /// The reader met something it cannot follow: it reads nothing more.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Reads the next piece of the stream; whole messages are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Message>) {
        if self.broken {
            return;
        }
        if let Err(why) = self.read(chunk, out) {
            tracing::debug!("tap: stopped reading a WebSocket direction: {why}");
            self.broken = true;
            self.partial = None;
            self.inflater = None;
        }
    }

    fn read(&mut self, mut chunk: &[u8], out: &mut Vec<Message>) -> Result<(), String> {
        loop {
            match self.step {
                Step::Head => {
                    let Some(header) = self.take_head(&mut chunk) else { return Ok(()) };
                    self.start_frame(header)?;
                }
                Step::Payload { left, mask, at, fin, control } => {
                    let n = left.min(chunk.len() as u64) as usize;
                    let (bytes, rest) = chunk.split_at(n);
                    chunk = rest;
                    let target = match (control, &mut self.partial) {
                        (Some(_), _) => &mut self.control,
                        (None, Some(partial)) => &mut partial.data,
                        (None, None) => return Err("payload without a message".into()),
                    };
                    let start = target.len();
                    target.extend_from_slice(bytes);
                    if let Some(key) = mask {
                        for (i, byte) in target[start..].iter_mut().enumerate() {
                            *byte ^= key[(at + i) % 4];
                        }
                    }
                    if left > n as u64 {
                        let left = left - n as u64;
                        self.step = Step::Payload { left, mask, at: (at + n) % 4, fin, control };
                        return Ok(());
                    }
                    self.step = Step::Head;
                    self.end_frame(fin, control, out)?;
                }
            }
        }
    }

    /// Moves header bytes from `chunk` into `head`; the header's fields once it is whole.
    fn take_head(&mut self, chunk: &mut &[u8]) -> Option<Header> {
        loop {
            let need = header_len(&self.head);
            if self.head.len() == need {
                let header = parse_header(&self.head);
                self.head.clear();
                return Some(header);
            }
            if chunk.is_empty() {
                return None;
            }
            let n = (need - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
            *chunk = &chunk[n..];
        }
    }

    fn start_frame(&mut self, h: Header) -> Result<(), String> {
        if h.rsv & 0b011 != 0 {
            return Err("a frame with RSV2 or RSV3 (an extension not negotiated)".into());
        }
        let rsv1 = h.rsv & 0b100 != 0;
        let control = (h.opcode >= 8).then_some(h.opcode);
        if control.is_some() {
            if !h.fin || h.len > 125 || rsv1 {
                return Err("a malformed control frame".into());
            }
            self.control.clear();
        } else {
            let so_far = self.partial.as_ref().map_or(0, |p| p.data.len() as u64);
            if so_far.saturating_add(h.len) > self.max as u64 {
                return Err(format!("a message over {} bytes", self.max));
            }
            match (h.opcode, &mut self.partial) {
                (1 | 2, None) => {
                    if rsv1 && self.inflater.is_none() {
                        return Err("RSV1 without permessage-deflate".into());
                    }
                    self.partial =
                        Some(Partial { text: h.opcode == 1, deflated: rsv1, data: Vec::new() });
                }
                (0, Some(_)) if !rsv1 => (),
                (0, _) => return Err("a continuation frame out of place".into()),
                (1 | 2, Some(_)) => return Err("a new message inside a fragmented one".into()),
                (op, _) => return Err(format!("the reserved opcode {op}")),
            }
            if let Some(partial) = &mut self.partial {
                partial.data.reserve(h.len as usize);
            }
        }
        self.step = Step::Payload { left: h.len, mask: h.mask, at: 0, fin: h.fin, control };
        Ok(())
    }

    fn end_frame(
        &mut self,
        fin: bool,
        control: Option<u8>,
        out: &mut Vec<Message>,
    ) -> Result<(), String> {
        match control {
            // Ping and pong say nothing about usage.
            Some(8) => out.push(Message::Close),
            Some(_) => (),
            None if fin => {
                let Some(partial) = self.partial.take() else { return Ok(()) };
                let data = match partial.deflated {
                    true => self.inflate(partial.data)?,
                    false => partial.data,
                };
                out.push(match partial.text {
                    true => Message::Text(data),
                    false => Message::Binary(data),
                });
            }
            None => (),
        }
        Ok(())
    }

    /// Inflates one message's payload: the stripped tail appended, the sender's context kept
    /// across messages unless it resets it.
    fn inflate(&mut self, mut data: Vec<u8>) -> Result<Vec<u8>, String> {
        let max = self.max;
        let Some(inflater) = &mut self.inflater else {
            return Err("a deflated message without an inflater".into());
        };
        data.extend_from_slice(&DEFLATE_TAIL);
        let mut input = data.as_slice();
        let mut out = Vec::with_capacity((data.len() * 4).clamp(256, max));
        let mut ended = false;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= max {
                    return Err(format!("a message inflating past {max} bytes"));
                }
                out.reserve_exact(out.len().min(max - out.len()).max(256));
            }
            let before = inflater.total_in();
            let status = inflater
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
                .map_err(|e| format!("a message that does not inflate: {e}"))?;
            let used = (inflater.total_in() - before) as usize;
            input = &input[used..];
            let room = out.len() < out.capacity();
            if status == Status::StreamEnd {
                // A final block: the sender's next message starts a new stream.
                ended = true;
                break;
            }
            if input.is_empty() && room {
                break;
            }
            if used == 0 && room {
                return Err("a deflated message that stops short".into());
            }
        }
        if ended || self.no_context_takeover {
            inflater.reset(false);
        }
        Ok(out)
    }
}

/// A frame header's fields.
#[derive(Debug)]
struct Header {
    fin: bool,
    rsv: u8,
    opcode: u8,
    mask: Option<[u8; 4]>,
    len: u64,
}

/// How long the header that `head` starts is (2 while fewer than 2 bytes are known).
fn header_len(head: &[u8]) -> usize {
    let [_, second, ..] = head else { return 2 };
    let extended = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + extended + if second & 0x80 != 0 { 4 } else { 0 }
}

/// Parses a whole header (`head.len() == header_len(head)`).
fn parse_header(head: &[u8]) -> Header {
    let (first, second) = (head[0], head[1]);
    let (len, rest) = match second & 0x7f {
        126 => (u64::from(u16::from_be_bytes([head[2], head[3]])), &head[4..]),
        127 => {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&head[2..10]);
            (u64::from_be_bytes(bytes), &head[10..])
        }
        short => (u64::from(short), &head[2..]),
    };
    let mask = (second & 0x80 != 0).then(|| [rest[0], rest[1], rest[2], rest[3]]);
    Header { fin: first & 0x80 != 0, rsv: (first >> 4) & 0b111, opcode: first & 0x0f, mask, len }
}

#[cfg(test)]
pub(super) mod tests;
