//! A strict JSON scanner over UTF-8 text, generic over what is read: the relay's one pass over
//! a line ([`super::envelope`] reads the JSON-RPC envelope with it, [`super::content`] counts
//! content with it).
//!
//! It is hand-written rather than serde: the relay runs it on every line, and one scan that
//! validates the whole line while it picks out what is asked for is several times cheaper than
//! serde's passes. It accepts exactly strict JSON (what `serde_json` accepts: no trailing commas,
//! no control characters in strings, valid escapes, nothing after the value). Strings are found
//! with SSE2 (x86_64) or eight bytes at a time ([`plain_run`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

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

/// The scan failed: the text is not strict JSON (or not of the shape asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

pub type Res<T> = Result<T, Invalid>;

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

    /// Where the cursor is: a start for [`Scanner::since`].
    pub fn pos(&self) -> usize {
        self.i
    }

    /// The text from `start` (a [`Scanner::pos`]) to the cursor.
    pub fn since(&self, start: usize) -> Raw<'a> {
        Raw(&self.text[start..self.i])
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
    pub fn skip(&mut self) -> Res<()> {
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
    pub fn opt_string(&mut self) -> Res<Result<Option<Str<'a>>, Shape>> {
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
    pub fn opt_value(&mut self) -> Res<Option<Raw<'a>>> {
        let v = self.value()?;
        Ok((!v.is_null()).then_some(v))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
}
