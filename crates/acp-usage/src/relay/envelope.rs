//! A borrowed view of a JSON-RPC envelope, parsed only to observe a line, and what the first
//! bytes of a line still arriving say about it ([`prefix`]): the ACP rules of the relay's scan.
//!
//! The view borrows from the line and keeps `params`/`result`/`error` as raw JSON text, so
//! observing a message costs one pass over it and no copies; the line itself is forwarded
//! untouched. An `id` that is present but `null` is kept apart from an absent one: in ACP v1 a
//! request may carry `"id": null`, and only a missing id makes a notification.
//!
//! The pass is the strict JSON scanner of [`super::json`], which validates the whole line while
//! it picks out the envelope members and the `session/update` fields (`sessionId`,
//! `update.sessionUpdate`, `update.content`, ...). The view mirrors the serde view it replaced:
//! `method` must be a string or `null`, a repeated envelope member makes the line unreadable, an
//! `error` of `null` is no error.

use std::borrow::Cow;

use super::content::{Update, UpdateParams};
use super::json::{Invalid, Raw, Res, Scanner, Shape};

/// The envelope of one JSON-RPC message.
#[derive(Debug, Default)]
pub struct Envelope<'a> {
    /// The id as it is on the wire (`1`, `"1"` and `null` all differ); `None` when absent.
    pub id: Option<Raw<'a>>,
    /// The method of a request or notification.
    pub method: Option<Cow<'a, str>>,
    /// Request or notification parameters.
    pub params: Option<Raw<'a>>,
    /// A success response's result.
    pub result: Option<Raw<'a>>,
    /// An error response's error object.
    pub error: Option<Raw<'a>>,
    /// `params` read as `session/update` parameters, in the same pass (whatever the method);
    /// `None` when they do not have that shape.
    pub update: Option<UpdateParams<'a>>,
}

/// What kind of message an envelope is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Has a method and an id.
    Request,
    /// Has a method and no id.
    Notification,
    /// Has an id and a result or error.
    Response,
    /// Anything else (still forwarded).
    Other,
}

impl<'a> Envelope<'a> {
    /// Parses the envelope of a line; `None` for anything that is not a JSON object (malformed
    /// lines, arrays, garbage, invalid UTF-8), which the relay forwards without looking further.
    pub fn parse(line: &'a [u8]) -> Option<Envelope<'a>> {
        let first = line.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        // Once the line is known to be UTF-8, every byte offset the scanner stops at (quotes,
        // brackets, commas) is a character boundary.
        let text = std::str::from_utf8(line).ok()?;
        let mut p = Scanner::new(text);
        let env = p.envelope().ok()?;
        p.end().ok()?;
        Some(env)
    }

    /// The message kind.
    pub fn kind(&self) -> Kind {
        match (&self.method, &self.id) {
            (Some(_), Some(_)) => Kind::Request,
            (Some(_), None) => Kind::Notification,
            (None, Some(_)) if self.result.is_some() || self.error.is_some() => Kind::Response,
            _ => Kind::Other,
        }
    }

    /// The id as a map key. Ids are values: `1` and `"1"` differ, but `"\u0041"` and `"A"` are
    /// the same string, so string ids are keyed by their decoded text (numbers and `null` by their
    /// wire text).
    pub fn id_key(&self) -> Option<String> {
        let raw = self.id?.get();
        // A string without escapes is already in the form serde_json would write it.
        if raw.starts_with('"')
            && raw.contains('\\')
            && let Ok(s) = serde_json::from_str::<String>(raw)
        {
            return Some(serde_json::to_string(&s).expect("strings serialise"));
        }
        Some(raw.to_string())
    }
}

/// The envelope rules of the scan: which members are read, and how.
impl<'a> Scanner<'a> {
    fn envelope(&mut self) -> Res<Envelope<'a>> {
        let mut env = Envelope::default();
        let mut seen = 0u8;
        self.object(|p, key| {
            let bit = match key.raw {
                "id" => 1,
                "method" => 2,
                "params" => 4,
                "result" => 8,
                "error" => 16,
                _ if key.escaped => {
                    // Rare: an escaped member name; read as the name it decodes to.
                    match key.decode().as_deref() {
                        Some("id") => 1,
                        Some("method") => 2,
                        Some("params") => 4,
                        Some("result") => 8,
                        Some("error") => 16,
                        _ => 0,
                    }
                }
                _ => 0,
            };
            if seen & bit != 0 {
                // serde refused a repeated field; so does this view.
                return Err(Invalid);
            }
            seen |= bit;
            match bit {
                1 => env.id = Some(p.value()?),
                2 => {
                    env.method = match p.opt_string()? {
                        Ok(Some(s)) => Some(s.decode().ok_or(Invalid)?),
                        Ok(None) => None,
                        Err(Shape) => return Err(Invalid),
                    }
                }
                4 => {
                    p.peek()?;
                    let start = p.pos();
                    env.update = if p.peek()? == b'{' {
                        p.update_params()?.ok()
                    } else {
                        p.skip()?;
                        None
                    };
                    env.params = Some(p.since(start)).filter(|r| !r.is_null());
                }
                8 => env.result = Some(p.value()?),
                16 => env.error = p.opt_value()?,
                _ => p.skip()?,
            }
            Ok(())
        })?;
        Ok(env)
    }

    /// `session/update` params: `{"sessionId": string, "update": {...}}`. The outer error is
    /// invalid JSON; the inner one a valid value of another shape.
    fn update_params(&mut self) -> Res<Result<UpdateParams<'a>, Shape>> {
        let mut session: Option<Cow<'a, str>> = None;
        let mut update: Option<Update<'a>> = None;
        let mut shape = Ok(());
        self.object(|p, key| {
            match key.raw {
                "sessionId" if session.is_none() => match p.opt_string()? {
                    Ok(Some(s)) => match s.decode() {
                        Some(d) => session = Some(d),
                        None => shape = Err(Shape),
                    },
                    _ => shape = Err(Shape),
                },
                "update" if update.is_none() => {
                    if p.peek()? == b'{' {
                        match p.update()? {
                            Ok(u) => update = Some(u),
                            Err(s) => shape = Err(s),
                        }
                    } else {
                        p.skip()?;
                        shape = Err(Shape);
                    }
                }
                "sessionId" | "update" => {
                    // Repeated.
                    p.skip()?;
                    shape = Err(Shape);
                }
                _ if key.escaped && (key.is("sessionId") || key.is("update")) => {
                    // Too rare to read: treated as not a session update.
                    p.skip()?;
                    shape = Err(Shape);
                }
                _ => p.skip()?,
            }
            Ok(())
        })?;
        Ok(match (shape, session, update) {
            (Ok(()), Some(session_id), Some(update)) => Ok(UpdateParams { session_id, update }),
            _ => Err(Shape),
        })
    }

    /// The `update` object of `session/update` params.
    fn update(&mut self) -> Res<Result<Update<'a>, Shape>> {
        let mut u = Update::default();
        let mut seen = 0u8;
        let mut shape = Ok(());
        const NAMES: [&str; 6] =
            ["sessionUpdate", "content", "rawInput", "rawOutput", "summary", "status"];
        self.object(|p, key| {
            let which = if key.escaped {
                NAMES.iter().position(|n| key.is(n))
            } else {
                NAMES.iter().position(|n| key.raw == *n)
            };
            let Some(which) = which else { return p.skip() };
            if seen & (1 << which) != 0 {
                p.skip()?;
                shape = Err(Shape);
                return Ok(());
            }
            seen |= 1 << which;
            let mut text = |p: &mut Self| -> Res<Option<Cow<'a, str>>> {
                Ok(match p.opt_string()? {
                    Ok(Some(s)) => s.decode().or_else(|| {
                        shape = Err(Shape);
                        None
                    }),
                    Ok(None) => None,
                    Err(s) => {
                        shape = Err(s);
                        None
                    }
                })
            };
            match which {
                0 => u.session_update = text(p)?,
                1 => u.content = p.opt_value()?,
                2 => u.raw_input = p.opt_value()?,
                3 => u.raw_output = p.opt_value()?,
                4 => u.summary = p.opt_value()?,
                _ => u.status = text(p)?,
            }
            Ok(())
        })?;
        Ok(shape.map(|()| u))
    }
}

/// What the first bytes of a line tell about it, when they are enough to know that acp-usage
/// forwards it as it came: it can then be written on as it arrives instead of being held whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prefix {
    /// A request or notification of a method other than `session/update` (never rewritten).
    Method(String),
    /// A `session/update` of a kind acp-usage never rewrites nor adds to.
    Update {
        /// `params.sessionId`.
        session: String,
        /// `params.update.sessionUpdate`.
        kind: String,
    },
}

/// The `session/update` kinds acp-usage rewrites or follows with a line of its own (what
/// [`super::observer::Observer::owns`] looks for).
pub const OWNED_UPDATES: [&str; 4] =
    ["usage_update", "config_option_update", "compaction_update", "available_commands_update"];

/// Reads the start of a line (which may stop anywhere, even inside a character) as far as it
/// needs to say what the line is: `Some((prefix, at))` once the members seen so far settle that
/// acp-usage does not own the line, `at` being where the rest of the line starts (what follows
/// is mostly the content); `None` when they do not (a response, `method` not yet seen, an
/// escaped or odd member name, not an object), and the line must be held whole.
///
/// The prefix is read, not validated: a line that turns out not to be JSON, or to repeat a
/// member further on, is still one acp-usage forwards unchanged (what it does with any line it
/// cannot read), so the decision never forwards a line it would have changed.
pub fn prefix(line: &[u8]) -> Option<(Prefix, usize)> {
    let mut p = PrefixScan { b: line, i: 0, method: None, session: None, kind: None };
    p.ws();
    if p.next()? != b'{' {
        return None;
    }
    p.members(0)
}

struct PrefixScan<'a> {
    b: &'a [u8],
    i: usize,
    method: Option<&'a [u8]>,
    session: Option<&'a [u8]>,
    kind: Option<&'a [u8]>,
}

impl<'a> PrefixScan<'a> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn next(&mut self) -> Option<u8> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    /// A string without escapes (after its opening quote): its bytes.
    fn plain(&mut self) -> Option<&'a [u8]> {
        let len = memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
        if self.b[self.i + len] != b'"' {
            return None;
        }
        let s = &self.b[self.i..self.i + len];
        self.i += len + 1;
        Some(s)
    }

    /// Skips any value; `None` when the prefix ends inside it.
    fn skip(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.ws();
            match self.next()? {
                b'"' => loop {
                    let at = memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
                    self.i += at + 1;
                    if self.b[self.i - 1] == b'"' {
                        break;
                    }
                    self.next()?;
                },
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.checked_sub(1)?,
                _ => {
                    // A number or a literal: up to the next delimiter.
                    while !matches!(
                        self.b.get(self.i)?,
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'
                    ) {
                        self.i += 1;
                    }
                }
            }
            self.ws();
            if depth == 0 {
                return Some(());
            }
            if matches!(self.b.get(self.i)?, b',' | b':') {
                self.i += 1;
            }
        }
    }

    /// What is known so far, if it settles the line.
    fn decided(&self) -> Option<Prefix> {
        let method = self.method?;
        if method != b"session/update" {
            return Some(Prefix::Method(String::from_utf8(method.to_vec()).ok()?));
        }
        let kind = std::str::from_utf8(self.kind?).ok()?;
        if OWNED_UPDATES.contains(&kind) {
            return None;
        }
        let session = std::str::from_utf8(self.session?).ok()?;
        Some(Prefix::Update { session: session.to_string(), kind: kind.to_string() })
    }

    /// The members of an object (after its `{`): 0 the envelope, 1 `params`, 2 `params.update`.
    fn members(&mut self, level: u8) -> Option<(Prefix, usize)> {
        loop {
            self.ws();
            match self.next()? {
                b'"' => {}
                _ => return None,
            }
            let key = self.plain()?;
            self.ws();
            if self.next()? != b':' {
                return None;
            }
            self.ws();
            let slot = match (level, key) {
                (0, b"method") => Some(&mut self.method),
                (1, b"sessionId") => Some(&mut self.session),
                (2, b"sessionUpdate") => Some(&mut self.kind),
                _ => None,
            };
            if slot.as_ref().is_some_and(|s| s.is_some()) {
                // A repeated member: the line is not valid for the envelope reader anyway,
                // but stay on the safe side.
                return None;
            }
            let descend = matches!((level, key), (0, b"params") | (1, b"update"));
            if slot.is_some() {
                if self.next()? != b'"' {
                    return None;
                }
                let v = self.plain()?;
                match (level, key) {
                    (0, _) => self.method = Some(v),
                    (1, _) => self.session = Some(v),
                    _ => self.kind = Some(v),
                }
            } else if descend && self.b.get(self.i) == Some(&b'{') {
                self.i += 1;
                if let Some(r) = self.members(level + 1) {
                    return Some(r);
                }
                // The object ended (or the prefix did): only its end lets the scan go on.
                if self.b.get(self.i.wrapping_sub(1)) != Some(&b'}') {
                    return None;
                }
            } else {
                if let Some(d) = self.decided() {
                    return Some((d, self.i));
                }
                self.skip()?;
            }
            if let Some(d) = self.decided() {
                return Some((d, self.i));
            }
            self.ws();
            match self.next()? {
                b',' => {}
                b'}' if level > 0 => return None,
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_ids() {
        let e =
            Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}"#)
                .unwrap();
        assert_eq!((e.kind(), e.id_key().as_deref()), (Kind::Request, Some("1")));
        let e = Envelope::parse(br#"{"jsonrpc":"2.0","id":"1","result":null}"#).unwrap();
        assert_eq!((e.kind(), e.id_key().as_deref()), (Kind::Response, Some("\"1\"")));
        let e = Envelope::parse(br#"{"id":"\u0041","result":{}}"#).unwrap();
        assert_eq!(e.id_key().as_deref(), Some("\"A\""));
        let e = Envelope::parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap();
        assert_eq!((e.kind(), e.id_key().as_deref()), (Kind::Request, Some("null")));
        let e = Envelope::parse(br#" {"jsonrpc":"2.0","method":"session/update","params":{}}"#)
            .unwrap();
        assert_eq!(e.kind(), Kind::Notification);
        let e = Envelope::parse(br#"{"id":7,"error":{"code":1,"message":"m"}}"#).unwrap();
        assert_eq!(e.kind(), Kind::Response);
        let e = Envelope::parse(br#"{"id":-3}"#).unwrap();
        assert_eq!((e.kind(), e.id_key().as_deref()), (Kind::Other, Some("-3")));
        assert!(Envelope::parse(b"[1,2]").is_none());
        assert!(Envelope::parse(b"garbage").is_none());
        assert!(Envelope::parse(b"{\"id\":").is_none());
        assert!(Envelope::parse(b"").is_none());
    }

    #[test]
    fn session_update_view() {
        let line = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\u0031","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"status":null,"rawOutput":null}}}"#;
        let e = Envelope::parse(line).unwrap();
        let u = e.update.unwrap();
        assert_eq!(u.session_id, "s1");
        assert_eq!(u.update.session_update.as_deref(), Some("agent_message_chunk"));
        assert_eq!(u.update.content.unwrap().get(), r#"{"type":"text","text":"hi"}"#);
        assert_eq!((u.update.status, u.update.raw_output), (None, None));
        // Other shapes are envelopes without an update view.
        for params in [r#"{"sessionId":1,"update":{}}"#, r#"{"update":{}}"#, r#"[1]"#] {
            let line = format!(r#"{{"method":"session/update","params":{params}}}"#);
            let e = Envelope::parse(line.as_bytes()).unwrap();
            assert!(e.update.is_none(), "{params}");
        }
    }

    #[test]
    fn a_prefix_says_what_acp_usage_forwards_unchanged() {
        let upd = |session: &str, kind: &str| {
            Some(Prefix::Update { session: session.into(), kind: kind.into() })
        };
        let cases: &[(&str, Option<Prefix>)] = &[
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"abc"#,
                upd("s1", "agent_message_chunk"),
            ),
            (
                r#" { "params" : { "update" : { "content" : [1, {"a": "x\"y"}], "sessionUpdate" : "tool_call_update" , "x":1}, "n": -1.5e3, "sessionId": "s2" }, "method": "session/update", "#,
                upd("s2", "tool_call_update"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"fs/write_text_file","id":3,"params":{"content":"#,
                Some(Prefix::Method("fs/write_text_file".into())),
            ),
            (r#"{"method":"_x/y","#, Some(Prefix::Method("_x/y".into()))),
            // Owned, or not known yet.
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","_meta":{"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update""#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{"content":"#, None),
            (
                r#"{"jsonrpc":"2.0","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","meth\u006fd":"x","#, None),
            (r#"{"jsonrpc":"2.0","method":"session\/update","#, None),
            (r#"{"method":"session/update","method":"x""#, None),
            (r#"{"method":"sess"#, None),
            (r#"[{"method":"x"}]"#, None),
            ("\u{ff}garbage", None),
            (r#"{"method":1,"params":{}}"#, None),
        ];
        for (line, want) in cases {
            let got = prefix(line.as_bytes()).map(|(p, _)| p);
            assert_eq!(&got, want, "{line}");
        }
        // The rest starts after what settled it; any cut of a line is safe to read.
        let line = br#"{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}"#;
        let (_, at) = prefix(line).unwrap();
        assert_eq!(&line[at..at + 1], b",");
        for cut in 0..line.len() {
            let _ = prefix(&line[..cut]);
        }
    }
}
