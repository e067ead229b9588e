//! The lines the synthetic agent and client exchange, and the cheap scanner that checks them.
//!
//! Every chunk's text starts with a fixed-width tag, `#` kind session `:` sequence `#`
//! (`#a000003:0000000042#`), so the client finds and checks it with one substring search and a
//! few digit reads instead of a JSON parse. The rest of the text is filler words.

use memchr::memmem::Finder;

/// What precedes a chunk's tag on the wire.
pub const MARKER: &[u8] = b"\"text\":\"#";
/// Length of the tag that starts every chunk's text; also the smallest text size.
pub const TAG_LEN: usize = 20;
/// Digits of the session index in a tag.
const SESSION_DIGITS: usize = 6;
/// Digits of the sequence number in a tag.
const SEQ_DIGITS: usize = 10;
/// The model the agent reports for its sessions (the catalog knows it, so cost is priced).
pub const MODEL: &str = "claude-sonnet-4-5";
/// The name the agent gives in `initialize`.
pub const AGENT_NAME: &str = "acp-usage-bench-agent";
/// The round-trip request.
pub const ECHO_METHOD: &str = "_bench/echo";

/// Which side a chunk speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// `user_message_chunk` (only replayed by `session/load`).
    User,
    /// `agent_message_chunk`.
    Agent,
}

impl ChunkKind {
    fn update(self) -> &'static str {
        match self {
            ChunkKind::User => "user_message_chunk",
            ChunkKind::Agent => "agent_message_chunk",
        }
    }

    fn letter(self) -> u8 {
        match self {
            ChunkKind::User => b'u',
            ChunkKind::Agent => b'a',
        }
    }
}

/// The session id of the `index`-th session.
pub fn session_id(index: u32) -> String {
    format!("bench-{index}")
}

/// The index in a session id made by [`session_id`] (0 for anything else).
pub fn session_index(id: &str) -> u32 {
    id.rsplit('-').next().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// One chunk line with a slot for its sequence number: the agent patches ten digits per chunk.
#[derive(Debug, Clone)]
pub struct ChunkTemplate {
    line: Vec<u8>,
    seq_at: usize,
}

impl ChunkTemplate {
    /// A `session/update` line of `kind` for session `index` whose text is `size` bytes
    /// (at least [`TAG_LEN`]), terminated by `\n`.
    pub fn new(kind: ChunkKind, index: u32, size: usize) -> ChunkTemplate {
        let size = size.max(TAG_LEN);
        let head = format!(
            r##"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{}","update":{{"sessionUpdate":"{}","content":{{"type":"text","text":"#"##,
            session_id(index),
            kind.update()
        );
        let mut line = head.into_bytes();
        let tag_at = line.len() - 1;
        line.push(kind.letter());
        line.extend_from_slice(
            format!("{:0width$}", index % 1_000_000, width = SESSION_DIGITS).as_bytes(),
        );
        line.push(b':');
        let seq_at = line.len();
        line.extend_from_slice(&[b'0'; SEQ_DIGITS]);
        line.push(b'#');
        debug_assert_eq!(line.len() - tag_at, TAG_LEN);
        const WORDS: &[u8] =
            b"the quick brown fox jumps over the lazy dog while the relay counts tokens ";
        line.extend(WORDS.iter().cycle().take(size - TAG_LEN));
        line.extend_from_slice(b"\"}}}}\n");
        ChunkTemplate { line, seq_at }
    }

    /// Writes `seq` into the tag.
    pub fn set_seq(&mut self, seq: u64) {
        let mut n = seq;
        for b in self.line[self.seq_at..self.seq_at + SEQ_DIGITS].iter_mut().rev() {
            *b = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }

    /// The line, with its `\n`.
    pub fn line(&self) -> &[u8] {
        &self.line
    }
}

/// A line as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// A chunk of the synthetic agent.
    Chunk {
        /// `user_message_chunk` or `agent_message_chunk`.
        kind: ChunkKind,
        /// The session index in the tag.
        session: u32,
        /// The sequence number in the tag.
        seq: u64,
    },
    /// A line carrying the chunk marker whose tag is broken.
    BadTag,
    /// A `usage_update` (acp-usage adds them).
    UsageUpdate,
    /// A response with a numeric id.
    Response {
        /// The id.
        id: u64,
        /// Whether it is an error response.
        error: bool,
    },
    /// Anything else.
    Other,
}

/// Classifies lines with substring searches only.
#[derive(Debug)]
pub struct Scanner {
    marker: Finder<'static>,
    usage: Finder<'static>,
    id: Finder<'static>,
    error: Finder<'static>,
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner {
            marker: Finder::new(MARKER),
            usage: Finder::new(b"\"usage_update\""),
            id: Finder::new(b"\"id\":"),
            error: Finder::new(b"\"error\":"),
        }
    }
}

impl Scanner {
    /// What `line` (without its `\n`) is.
    pub fn classify(&self, line: &[u8]) -> Msg {
        if let Some(at) = self.marker.find(line) {
            return parse_tag(&line[at + MARKER.len() - 1..]).unwrap_or(Msg::BadTag);
        }
        if self.usage.find(line).is_some() {
            return Msg::UsageUpdate;
        }
        if let Some(at) = self.id.find(line) {
            let rest = &line[at + 5..];
            let digits = rest.iter().skip_while(|b| **b == b' ');
            let mut id = 0u64;
            let mut any = false;
            for b in digits {
                if !b.is_ascii_digit() {
                    break;
                }
                any = true;
                id = id.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            }
            if any {
                return Msg::Response { id, error: self.error.find(line).is_some() };
            }
        }
        Msg::Other
    }
}

/// Reads a tag at the start of `t` (`#a000003:0000000042#`).
fn parse_tag(t: &[u8]) -> Option<Msg> {
    let t = t.get(..TAG_LEN)?;
    if t[0] != b'#' || t[2 + SESSION_DIGITS] != b':' || t[TAG_LEN - 1] != b'#' {
        return None;
    }
    let kind = match t[1] {
        b'u' => ChunkKind::User,
        b'a' => ChunkKind::Agent,
        _ => return None,
    };
    let session = digits(&t[2..2 + SESSION_DIGITS])?;
    let seq = digits(&t[3 + SESSION_DIGITS..3 + SESSION_DIGITS + SEQ_DIGITS])?;
    Some(Msg::Chunk { kind, session: session as u32, seq })
}

fn digits(d: &[u8]) -> Option<u64> {
    d.iter().try_fold(0u64, |n, b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_round_trips_through_the_scanner() {
        let mut t = ChunkTemplate::new(ChunkKind::Agent, 7, 200);
        t.set_seq(1_234_567);
        let line = t.line();
        assert_eq!(line.last(), Some(&b'\n'));
        let body = &line[..line.len() - 1];
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        let text = v["params"]["update"]["content"]["text"].as_str().unwrap();
        assert_eq!(text.len(), 200);
        assert!(text.starts_with("#a000007:0001234567#"), "{text}");
        assert_eq!(v["params"]["sessionId"], "bench-7");
        let s = Scanner::default();
        assert_eq!(
            s.classify(body),
            Msg::Chunk { kind: ChunkKind::Agent, session: 7, seq: 1_234_567 }
        );
        let u = ChunkTemplate::new(ChunkKind::User, 0, 5);
        assert!(matches!(
            s.classify(&u.line()[..u.line().len() - 1]),
            Msg::Chunk { kind: ChunkKind::User, session: 0, seq: 0 }
        ));
    }

    #[test]
    fn other_lines() {
        let s = Scanner::default();
        assert_eq!(
            s.classify(br#"{"jsonrpc":"2.0","id":42,"result":{"stopReason":"end_turn"}}"#),
            Msg::Response { id: 42, error: false }
        );
        assert_eq!(
            s.classify(br#"{"id": 9,"error":{"code":-32603,"message":"m"}}"#),
            Msg::Response { id: 9, error: true }
        );
        assert_eq!(
            s.classify(br#"{"method":"session/update","params":{"update":{"sessionUpdate":"usage_update","used":1}}}"#),
            Msg::UsageUpdate
        );
        assert_eq!(s.classify(br##"{"text":"#x000001:0000000001#"}"##), Msg::BadTag);
        assert_eq!(s.classify(br##"{"text":"#a0001"}"##), Msg::BadTag);
        assert_eq!(s.classify(b"garbage"), Msg::Other);
        assert_eq!(session_index("bench-12"), 12);
        assert_eq!(session_index("x"), 0);
    }
}
