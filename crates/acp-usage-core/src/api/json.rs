//! Just enough JSON scanning for the tap: the extent of a value without building it, the members
//! of an object whose text may be cut short, and whole values out of a body that arrives in
//! pieces.
//!
//! Request bodies can be megabytes of conversation, of which the tap wants a few small fields;
//! scanning finds them without allocating the rest. Nothing here validates JSON: a value's
//! bytes are handed to serde_json, which does.

use std::borrow::Cow;

/// JSON's insignificant whitespace.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// The index of the first non-whitespace byte at or after `at`.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).copied().is_some_and(is_space) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string whose opening quote is at `at`; `None` when it is cut.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut index = at + 1;
    loop {
        match bytes.get(index)? {
            b'\\' => index += 2,
            b'"' => return Some(index + 1),
            _ => index += 1,
        }
    }
}

/// The end (exclusive) of the value starting at `at`; `None` when it is cut short (a scalar
/// that reaches the end of `bytes` counts as cut: `tru` may be the start of `true`).
pub(super) fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut index = at;
            while let Some(&byte) = bytes.get(index) {
                match byte {
                    b'"' => {
                        index = string_end(bytes, index)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(index + 1);
                        }
                    }
                    _ => (),
                }
                index += 1;
            }
            None
        }
        b'}' | b']' | b',' | b':' => None,
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|&byte| is_space(byte) || matches!(byte, b',' | b'}' | b']'))?;
            Some(at + len)
        }
    }
}

/// The members of the object `bytes` holds, in order, each as its key and its value's bytes;
/// ends quietly at the first member that is cut short or malformed.
pub(super) fn members(bytes: &[u8]) -> Members<'_> {
    let start = skip_space(bytes, 0);
    match bytes.get(start) {
        Some(b'{') => Members { bytes, at: start + 1, done: false },
        _ => Members { bytes, at: 0, done: true },
    }
}

/// See [`members`].
#[derive(Debug)]
pub(super) struct Members<'a> {
    bytes: &'a [u8],
    at: usize,
    done: bool,
}

impl<'a> Members<'a> {
    fn next_member(&mut self) -> Option<(Cow<'a, str>, &'a [u8])> {
        let bytes = self.bytes;
        let mut at = skip_space(bytes, self.at);
        if bytes.get(at) == Some(&b',') {
            at = skip_space(bytes, at + 1);
        }
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let key = key_text(&bytes[at..key_end])?;
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(bytes, at + 1);
        let end = value_end(bytes, at)?;
        self.at = end;
        Some((key, &bytes[at..end]))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (Cow<'a, str>, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let member = self.next_member();
        self.done = member.is_none();
        member
    }
}

/// A key's text from its quoted bytes; escapes are rare in keys, so only they allocate.
fn key_text(quoted: &[u8]) -> Option<Cow<'_, str>> {
    let inner = &quoted[1..quoted.len() - 1];
    match inner.contains(&b'\\') {
        false => std::str::from_utf8(inner).ok().map(Cow::Borrowed),
        true => serde_json::from_slice::<String>(quoted).ok().map(Cow::Owned),
    }
}

/// The value of the member `name` of the object `bytes` holds.
pub(super) fn member<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    members(bytes).find(|(key, _)| key == name).map(|(_, value)| value)
}

/// The elements of the array `bytes` holds, in order; ends quietly at the first element that
/// is cut short.
pub(super) fn elements(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let start = skip_space(bytes, 0);
    let mut at = start + 1;
    let mut done = bytes.get(start) != Some(&b'[');
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut index = skip_space(bytes, at);
        if bytes.get(index) == Some(&b',') {
            index = skip_space(bytes, index + 1);
        }
        let element = value_end(bytes, index).map(|end| {
            at = end;
            &bytes[index..end]
        });
        done = element.is_none();
        element
    })
}

/// A string value's text.
pub(super) fn string(bytes: &[u8]) -> Option<String> {
    serde_json::from_slice(bytes).ok()
}

/// Whether `bytes` is an array with at least one element.
pub(super) fn non_empty_array(bytes: &[u8]) -> bool {
    bytes.first() == Some(&b'[') && bytes.get(skip_space(bytes, 1)).is_some_and(|&b| b != b']')
}

/// How far a [`ValueFramer`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// Before the first significant byte.
    Start,
    /// Inside a top-level object: the whole object is one value.
    Object,
    /// Inside a top-level array: each element is one value (Gemini's stream without `alt=sse`).
    Array,
    /// The top-level value is closed; later bytes are ignored.
    Done,
    /// Not a JSON object or array, or a value beyond the size limit.
    Broken,
}

/// Cuts whole values out of a JSON body that arrives in arbitrary pieces: the body itself when
/// it is an object, or each element when it is an array. Keeps only the value in progress.
#[derive(Debug)]
pub(super) struct ValueFramer {
    top: Top,
    value: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    limit: usize,
}

impl ValueFramer {
    /// A framer that gives up on a value longer than `limit` bytes.
    pub(super) fn new(limit: usize) -> ValueFramer {
        ValueFramer {
            top: Top::Start,
            value: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            limit,
        }
    }

    /// Whether the top-level value has closed.
    pub(super) fn is_done(&self) -> bool {
        self.top == Top::Done
    }

    /// Whether the body turned out not to be readable (not an object or array, or too big).
    #[cfg(test)]
    pub(super) fn is_broken(&self) -> bool {
        self.top == Top::Broken
    }

    /// Reads `chunk`, handing `on_value` every value it completes.
    pub(super) fn feed(&mut self, chunk: &[u8], on_value: &mut impl FnMut(&[u8])) {
        let mut rest = chunk;
        while let Some((&byte, tail)) = rest.split_first() {
            match self.top {
                Top::Done | Top::Broken => return,
                Top::Start => {
                    rest = tail;
                    match byte {
                        b'{' => {
                            self.top = Top::Object;
                            self.depth = 1;
                            self.value.push(byte);
                        }
                        b'[' => {
                            self.top = Top::Array;
                            self.depth = 1;
                        }
                        // A UTF-8 byte-order mark may open a body.
                        0xEF | 0xBB | 0xBF => (),
                        _ if is_space(byte) => (),
                        _ => self.top = Top::Broken,
                    }
                    continue;
                }
                Top::Object | Top::Array => (),
            }
            if self.in_string {
                rest = self.string_bytes(rest);
                continue;
            }
            rest = tail;
            self.structure_byte(byte, on_value);
        }
        if self.value.len() > self.limit {
            self.break_off();
        }
    }

    /// Bytes inside a string, up to and including its closing quote; returns what follows.
    fn string_bytes<'c>(&mut self, rest: &'c [u8]) -> &'c [u8] {
        let keep = self.depth >= self.keep_from();
        if self.escaped {
            self.escaped = false;
            if keep {
                self.value.push(rest[0]);
            }
            return &rest[1..];
        }
        let stop = rest.iter().position(|&b| b == b'"' || b == b'\\');
        let taken = stop.map_or(rest.len(), |stop| stop + 1);
        if keep {
            self.value.extend_from_slice(&rest[..taken]);
        }
        match stop.map(|stop| rest[stop]) {
            Some(b'"') => self.in_string = false,
            Some(_) => self.escaped = true,
            None => (),
        }
        &rest[taken..]
    }

    /// The depth from which bytes belong to a value handed out: the object itself, or an
    /// array's elements.
    fn keep_from(&self) -> usize {
        match self.top {
            Top::Array => 2,
            _ => 1,
        }
    }

    fn structure_byte(&mut self, byte: u8, on_value: &mut impl FnMut(&[u8])) {
        let keep_from = self.keep_from();
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            _ => (),
        }
        if self.depth >= keep_from {
            self.value.push(byte);
        }
        if !matches!(byte, b'}' | b']') {
            return;
        }
        if self.value.len() > self.limit {
            // However the pieces fell, a value beyond the limit is never read.
            self.break_off();
            return;
        }
        self.depth -= 1;
        if self.depth + 1 == keep_from {
            // Scalars between an array's elements are not values the tap reads.
            if self.value.first().is_some_and(|&b| b == b'{') {
                on_value(&self.value);
            }
            self.value.clear();
        }
        if self.depth == 0 {
            self.top = Top::Done;
            self.value = Vec::new();
        }
    }

    fn break_off(&mut self) {
        self.top = Top::Broken;
        self.value = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_a_cut_object() {
        let body =
            br#" { "model" : "m", "n":12, "s\"q":[1,{"a":"}"}], "tools": [ ], "cut": {"x": "#;
        let found: Vec<(String, String)> = members(body)
            .map(|(key, value)| (key.into_owned(), String::from_utf8_lossy(value).into_owned()))
            .collect();
        let expected =
            [("model", r#""m""#), ("n", "12"), ("s\"q", r#"[1,{"a":"}"}]"#), ("tools", "[ ]")];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(found, expected);
        assert!(!non_empty_array(member(body, "tools").unwrap()));
        assert!(non_empty_array(b"[ {}]"));
        // A scalar at the very end may be cut.
        assert_eq!(members(br#"{"a":1,"b":tr"#).count(), 1);
        assert_eq!(members(b"[1]").count(), 0);
        assert_eq!(members(b"").count(), 0);
        assert_eq!(members(br#"{"a":}"#).count(), 0);
    }

    #[test]
    fn elements_of_a_cut_array() {
        let all: Vec<&[u8]> = elements(br#"[{"a":1} , "x]", 3, {"b":"#).collect();
        assert_eq!(all, [&br#"{"a":1}"#[..], br#""x]""#, b"3"]);
        assert_eq!(elements(b"{}").count(), 0);
    }

    fn framed(body: &[u8], piece: usize, limit: usize) -> (Vec<String>, bool, bool) {
        let mut framer = ValueFramer::new(limit);
        let mut values = Vec::new();
        for chunk in body.chunks(piece) {
            framer.feed(chunk, &mut |value| values.push(String::from_utf8_lossy(value).into()));
        }
        (values, framer.is_done(), framer.is_broken())
    }

    #[test]
    fn framer_cuts_objects_and_array_elements() {
        let object = "\u{feff} {\"a\": \"}]\\\"{\", \"b\": [1, {\"c\": 2}]} trailing";
        for piece in [1, 2, 3, 7, 100] {
            let (values, done, broken) = framed(object.as_bytes(), piece, 1 << 20);
            assert_eq!(values, ["{\"a\": \"}]\\\"{\", \"b\": [1, {\"c\": 2}]}"], "piece {piece}");
            assert!(done && !broken);
        }
        let array = br#"[{"x":"]"} ,{"y":[{}]}, 5, "s{", {"z":1}]"#;
        for piece in [1, 4, 100] {
            let (values, done, _) = framed(array, piece, 1 << 20);
            assert_eq!(values, [r#"{"x":"]"}"#, r#"{"y":[{}]}"#, r#"{"z":1}"#]);
            assert!(done);
        }
        let (values, done, _) = framed(br#"[{"x":1}, {"y""#, 3, 1 << 20);
        assert_eq!((values.len(), done), (1, false));
    }

    #[test]
    fn framer_gives_up_on_scalars_and_oversized_values() {
        assert_eq!(framed(b"  \"text\"", 1, 100), (vec![], false, true));
        assert_eq!(framed(b"data: {}", 1, 100), (vec![], false, true));
        let big = format!("{{\"a\": \"{}\"}}", "x".repeat(200));
        for piece in [1, 50, 1000] {
            assert_eq!(framed(big.as_bytes(), piece, 100), (vec![], false, true));
        }
        // Elements are limited one by one, not the whole array.
        let many = format!("[{}]", vec![r#"{"a":"0123456789"}"#; 50].join(","));
        let (values, done, broken) = framed(many.as_bytes(), 7, 100);
        assert_eq!((values.len(), done, broken), (50, true, false));
    }
}
