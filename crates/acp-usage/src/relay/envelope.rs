//! A borrowed view of a JSON-RPC envelope, parsed only to observe a line.
//!
//! The view borrows from the line and keeps `params`/`result`/`error` as raw JSON text, so
//! observing a message costs one pass over it and no copies; the line itself is forwarded
//! untouched. An `id` that is present but `null` is kept apart from an absent one: in ACP v1 a
//! request may carry `"id": null`, and only a missing id makes a notification.
//!
//! The pass is a hand-written validating scanner rather than serde: the relay runs it on every
//! line, and one scan that validates the whole line while it picks out the envelope members and
//! the `session/update` fields (`sessionId`, `update.sessionUpdate`, `update.content`, ...) is
//! several times cheaper than serde's passes (envelope, then params, then content). It accepts
//! exactly strict JSON (what `serde_json` accepts: no trailing commas, no control characters in
//! strings, valid escapes, nothing after the object) and mirrors the serde view it replaced:
//! `method` must be a string or `null`, a repeated envelope member makes the line unreadable,
//! an `error` of `null` is no error.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::content::{Update, UpdateParams};

/// The text of one JSON value as it is on the wire (leading whitespace excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(&'a str);

impl<'a> Raw<'a> {
    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        self.0 == "null"
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Raw<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Raw<'a>, D::Error> {
        <&RawValue>::deserialize(de).map(|r| Raw(r.get()))
    }
}

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

/// The scan failed: the text is not strict JSON (or not of the shape asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

type Res<T> = Result<T, Invalid>;

/// One JSON string as it is on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Str<'a> {
    /// The text between the quotes, escapes as they are.
    pub raw: &'a str,
    /// With its quotes.
    pub quoted: &'a str,
    /// Whether it holds a `\` escape.
    pub escaped: bool,
}

impl<'a> Str<'a> {
    /// The decoded text; `None` for an escape that is no character (a lone surrogate), which
    /// serde_json refuses as well.
    pub fn decode(&self) -> Option<Cow<'a, str>> {
        if self.escaped {
            serde_json::from_str::<String>(self.quoted).ok().map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.raw))
        }
    }

    /// Whether the decoded text is `s` (`s` has no characters that need escaping).
    pub fn is(&self, s: &str) -> bool {
        if self.escaped { self.decode().is_some_and(|d| d == s) } else { self.raw == s }
    }

    /// Length in bytes of the decoded text, without decoding it; `None` as for
    /// [`Str::decode`].
    pub fn decoded_len(&self) -> Option<usize> {
        if !self.escaped {
            return Some(self.raw.len());
        }
        let b = self.raw.as_bytes();
        let mut n = 0;
        let mut i = 0;
        while i < b.len() {
            let Some(at) = memchr::memchr(b'\\', &b[i..]) else {
                n += b.len() - i;
                break;
            };
            n += at;
            i += at + 1;
            if b[i] != b'u' {
                n += 1;
                i += 1;
                continue;
            }
            let cp = hex4(&b[i + 1..i + 5]);
            i += 5;
            n += match cp {
                0..0x80 => 1,
                0x80..0x800 => 2,
                0xD800..0xDC00 => {
                    // A leading surrogate must be followed by a trailing one.
                    if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
                        return None;
                    }
                    let low = hex4(&b[i + 2..i + 6]);
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    i += 6;
                    4
                }
                0xDC00..0xE000 => return None,
                _ => 3,
            };
        }
        Some(n)
    }
}

/// The value of four hex digits (already checked by the scanner).
fn hex4(h: &[u8]) -> u32 {
    h.iter().fold(0, |acc, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => c - b'A' + 10,
        };
        acc * 16 + u32::from(d)
    })
}

/// Nesting the skipper follows; deeper values are refused (never seen in ACP traffic).
const MAX_DEPTH: usize = 1024;

/// A strict JSON scanner over UTF-8 text.
#[derive(Debug)]
pub struct Scanner<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a str) -> Scanner<'a> {
        Scanner { text, i: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after whitespace.
    pub fn peek(&mut self) -> Res<u8> {
        let b = self.bytes();
        while let Some(&c) = b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
                return Ok(c);
            }
            self.i += 1;
        }
        Err(Invalid)
    }

    /// Only whitespace is left.
    pub fn end(&mut self) -> Res<()> {
        match self.peek() {
            Err(_) => Ok(()),
            Ok(_) => Err(Invalid),
        }
    }

    fn eat(&mut self, c: u8) -> Res<()> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    /// A string (the cursor is at its opening quote after whitespace).
    pub fn string(&mut self) -> Res<Str<'a>> {
        let b = self.bytes();
        let open = self.i;
        if b.get(open) != Some(&b'"') {
            return Err(Invalid);
        }
        let mut i = open + 1;
        let mut escaped = false;
        loop {
            i = plain_run(b, i);
            match b.get(i) {
                Some(b'"') => {
                    self.i = i + 1;
                    return Ok(Str {
                        raw: &self.text[open + 1..i],
                        quoted: &self.text[open..=i],
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    match b.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                        Some(b'u') => {
                            let hex = b.get(i + 2..i + 6).ok_or(Invalid)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(Invalid);
                            }
                            i += 6;
                        }
                        _ => return Err(Invalid),
                    }
                }
                // A control character, or the end.
                _ => return Err(Invalid),
            }
        }
    }

    /// Any value, skipped; its text.
    pub fn value(&mut self) -> Res<Raw<'a>> {
        self.peek()?;
        let start = self.i;
        self.skip()?;
        Ok(Raw(&self.text[start..self.i]))
    }

    /// Skips one value, iteratively (no recursion however deep).
    fn skip(&mut self) -> Res<()> {
        // Bit i: whether the container at depth i is an object.
        let mut objects = [0u64; MAX_DEPTH / 64];
        let mut depth = 0usize;
        let is_object = |o: &[u64; MAX_DEPTH / 64], d: usize| o[d / 64] >> (d % 64) & 1 == 1;
        loop {
            // A value.
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                c @ (b'{' | b'[') => {
                    self.i += 1;
                    let close = if c == b'{' { b'}' } else { b']' };
                    if self.peek()? == close {
                        self.i += 1;
                    } else {
                        if depth == MAX_DEPTH {
                            return Err(Invalid);
                        }
                        let bit = 1u64 << (depth % 64);
                        if c == b'{' {
                            objects[depth / 64] |= bit;
                            self.key()?;
                        } else {
                            objects[depth / 64] &= !bit;
                        }
                        depth += 1;
                        continue;
                    }
                }
                _ => self.scalar()?,
            }
            // After a value: a comma, or closing brackets.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                let obj = is_object(&objects, depth - 1);
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if obj {
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if obj => self.i += 1,
                    b']' if !obj => self.i += 1,
                    _ => return Err(Invalid),
                }
                depth -= 1;
            }
        }
    }

    /// A member's key and its colon.
    fn key(&mut self) -> Res<Str<'a>> {
        self.peek()?;
        let k = self.string()?;
        self.eat(b':')?;
        Ok(k)
    }

    /// A number or a literal.
    fn scalar(&mut self) -> Res<()> {
        let b = self.bytes();
        let rest = &b[self.i..];
        for lit in [&b"true"[..], b"false", b"null"] {
            if rest.starts_with(lit) {
                self.i += lit.len();
                return Ok(());
            }
        }
        let mut i = self.i;
        let digits = |i: &mut usize| {
            let s = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > s
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(Invalid),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !digits(&mut i) {
                return Err(Invalid);
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digits(&mut i) {
                return Err(Invalid);
            }
        }
        self.i = i;
        Ok(())
    }

    /// The members of an object (the cursor is at `{`): `f` gets each key with the cursor at
    /// its value and must consume the value.
    pub fn object(&mut self, mut f: impl FnMut(&mut Self, Str<'a>) -> Res<()>) -> Res<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            let k = self.key()?;
            f(self, k)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Invalid),
            }
        }
    }

    /// The items of an array (the cursor is at `[`): `f` must consume each.
    pub fn array(&mut self, mut f: impl FnMut(&mut Self) -> Res<()>) -> Res<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(());
        }
        loop {
            f(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Invalid),
            }
        }
    }

    /// A string or `null` (`None`); `Shape` for anything else.
    fn opt_string(&mut self) -> Res<Result<Option<Str<'a>>, Shape>> {
        match self.peek()? {
            b'"' => Ok(Ok(Some(self.string()?))),
            b'n' => {
                self.scalar()?;
                Ok(Ok(None))
            }
            _ => {
                self.skip()?;
                Ok(Err(Shape))
            }
        }
    }

    /// A value, `None` when it is `null` (serde's `Option<&RawValue>`).
    fn opt_value(&mut self) -> Res<Option<Raw<'a>>> {
        let v = self.value()?;
        Ok((!v.is_null()).then_some(v))
    }

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
                    let start = p.i;
                    env.update = if p.peek()? == b'{' {
                        p.update_params()?.ok()
                    } else {
                        p.skip()?;
                        None
                    };
                    env.params = Some(Raw(&p.text[start..p.i])).filter(|r| !r.is_null());
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

/// A valid value that is not of the shape read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape;

/// Index of the first byte from `i` that ends a plain run inside a string: `"`, `\` or a control
/// character. Eight bytes at a time: the text of chunks is the bulk of the traffic.
#[inline]
fn plain_run(b: &[u8], i: usize) -> usize {
    // SAFETY: SSE2 is part of the x86_64 baseline, so every x86_64 CPU has it.
    #[cfg(target_arch = "x86_64")]
    let i = unsafe { plain_run_sse2(b, i) };
    if b.get(i).is_some_and(|&c| c == b'"' || c == b'\\' || c < 0x20) {
        return i;
    }
    plain_run_swar(b, i)
}

/// [`plain_run`] 32 bytes at a time, then 16 (SSE2 is part of every x86_64): the index of the
/// first stop byte, or where fewer than 16 bytes are left.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn plain_run_sse2(b: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let space = _mm_set1_epi8(0x1f);
    // Lanes equal to `"` or `\`, or at most 0x1f (max(x, 0x1f) == 0x1f).
    let stops = |v: __m128i| {
        _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            _mm_cmpeq_epi8(_mm_max_epu8(v, space), space),
        )
    };
    let load = |at: usize| {
        let chunk: &[u8; 16] = b[at..at + 16].try_into().expect("16 bytes");
        // SAFETY: `chunk` is 16 readable bytes; the load has no alignment requirement.
        unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) }
    };
    while i + 32 <= b.len() {
        let (x, y) = (stops(load(i)), stops(load(i + 16)));
        if _mm_movemask_epi8(_mm_or_si128(x, y)) != 0 {
            let (mx, my) = (_mm_movemask_epi8(x), _mm_movemask_epi8(y));
            let m = (mx as u32) | (my as u32) << 16;
            return i + m.trailing_zeros() as usize;
        }
        i += 32;
    }
    while i + 16 <= b.len() {
        let m = _mm_movemask_epi8(stops(load(i)));
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 16;
    }
    i
}

/// [`plain_run`] eight bytes at a time, then byte by byte.
#[inline]
fn plain_run_swar(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let hit = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if hit != 0 {
            // The lowest flagged byte is a real one (a false flag only follows a real one).
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
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
pub const OWNED_UPDATES: [&str; 3] = ["usage_update", "config_option_update", "compaction_update"];

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
    use serde_json::Value;

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
    fn decoded_lengths() {
        for s in [r#""plain""#, r#""a\nb\"c\\""#, r#""\u00e9\u20ac\ud83d\ude00x""#, r#""""#] {
            let mut p = Scanner::new(s);
            let st = p.string().unwrap();
            let want: String = serde_json::from_str(s).unwrap();
            assert_eq!(st.decoded_len(), Some(want.len()), "{s}");
        }
        let mut p = Scanner::new(r#""\ud83d x""#);
        assert_eq!(p.string().unwrap().decoded_len(), None);
    }

    /// The scanner accepts exactly what serde_json accepts as an object.
    #[test]
    fn agrees_with_serde_on_validity() {
        let cases = [
            r#"{}"#,
            r#"{"a":1,}"#,
            r#"{"a":[1,2,]}"#,
            r#"{"a":01}"#,
            r#"{"a":-0.5e+3}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":true} x"#,
            r#"{"a":true} "#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u12G4"}"#,
            r#"{"a":{"b":[{"c":null}]}}"#,
            r#"{"a":{"b":[{"c":null}]]}"#,
            r#"{"a":{"b":[{"c":null}}}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{1:2}"#,
            r#"{"a":[]," b":{}}"#,
            r#"{"a":"é ü 漢字"}"#,
            r#"{"a":"x"}}"#,
            "{\"a\":1}\r",
        ];
        for c in cases {
            let serde = serde_json::from_str::<Value>(c).is_ok_and(|v| v.is_object());
            let mut p = Scanner::new(c);
            let ours = p.skip().and_then(|()| p.end()).is_ok();
            assert_eq!(ours, serde, "{c}");
        }
    }

    #[test]
    fn plain_runs() {
        let s = b"abcdefghijklmnop\"qrs";
        assert_eq!(plain_run(s, 0), 16);
        assert_eq!(plain_run(s, 3), 16);
        assert_eq!(plain_run(b"abc\x01", 0), 3);
        assert_eq!(plain_run("ééééééé\\".as_bytes(), 0), 14);
        assert_eq!(plain_run(b"abcdefgh", 0), 8);
        // Every stop byte at every position of runs of many lengths, against the plain loop.
        let slow = |b: &[u8], i: usize| {
            (i..b.len()).find(|&j| matches!(b[j], b'"' | b'\\' | 0..0x20)).unwrap_or(b.len())
        };
        for len in 0..80 {
            for stop in [b'"', b'\\', 0x00, 0x1f, 0x0a] {
                for at in 0..=len {
                    let mut v: Vec<u8> =
                        (0..len).map(|k| [b'a', 0x20, 0x7f, 0x80, 0xff][k % 5]).collect();
                    if at < len {
                        v[at] = stop;
                    }
                    for from in [0, 1, 7, 17].into_iter().filter(|&f| f <= len) {
                        assert_eq!(plain_run(&v, from), slow(&v, from), "{len} {stop} {at} {from}");
                    }
                }
            }
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
