//! Minimal edits of JSON text: change a few members of one object, keep every other byte.
//!
//! When acp-usage rewrites a line it owns (the agent's `usage_update`, a prompt result), only the
//! members it owns change. Everything else keeps its exact text: numbers beyond 64 bits, float
//! spellings, escapes, key order and whitespace inside untouched members all survive, which a
//! round trip through `serde_json::Value` would not guarantee.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// One member of an object being edited.
#[derive(Debug)]
enum Member<'a> {
    /// Kept as it was.
    Raw(&'a RawValue),
    /// Replaced by already rendered JSON text.
    Text(String),
}

/// The members of a JSON object, in order, editable one by one.
#[derive(Debug)]
pub struct ObjectEdit<'a> {
    members: Vec<(String, Member<'a>)>,
}

impl<'a> ObjectEdit<'a> {
    /// Reads the top-level members of an object's text; `None` if it is not an object.
    pub fn parse(raw: &'a str) -> Option<ObjectEdit<'a>> {
        let members: Members<'a> = serde_json::from_str(raw).ok()?;
        let members = members.0.into_iter().map(|(k, v)| (k, Member::Raw(v))).collect();
        Some(ObjectEdit { members })
    }

    /// An empty object.
    pub fn empty() -> ObjectEdit<'a> {
        ObjectEdit { members: Vec::new() }
    }

    /// The raw text of a member that has not been replaced.
    pub fn raw(&self, key: &str) -> Option<&'a RawValue> {
        self.members.iter().find(|(k, _)| k == key).and_then(|(_, m)| match m {
            Member::Raw(r) => Some(*r),
            Member::Text(_) => None,
        })
    }

    /// Sets a member to a value (in place if present, else appended).
    pub fn set(&mut self, key: &str, value: &Value) {
        self.set_text(key, value.to_string());
    }

    /// Sets a member to already rendered JSON text.
    pub fn set_text(&mut self, key: &str, text: String) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some((_, m)) => *m = Member::Text(text),
            None => self.members.push((key.to_string(), Member::Text(text))),
        }
    }

    /// Removes a member.
    pub fn remove(&mut self, key: &str) {
        self.members.retain(|(k, _)| k != key);
    }

    /// Renders the object.
    pub fn render(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, m)) in self.members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(k).expect("strings serialise"));
            out.push(':');
            match m {
                Member::Raw(r) => out.push_str(r.get()),
                Member::Text(t) => out.push_str(t),
            }
        }
        out.push('}');
        out
    }
}

/// Where `inner` (a slice borrowed from `outer`) sits in `outer`.
pub fn range_in(outer: &[u8], inner: &str) -> Option<Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start + inner.len();
    (end <= outer.len()).then_some(start..end)
}

/// `outer` with `range` replaced by `with`.
pub fn replace(outer: &[u8], range: Range<usize>, with: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(outer.len() - range.len() + with.len());
    out.extend_from_slice(&outer[..range.start]);
    out.extend_from_slice(with.as_bytes());
    out.extend_from_slice(&outer[range.end..]);
    out
}

struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((k, v));
                }
                Ok(Members(members))
            }
        }
        de.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_keep_other_members_verbatim() {
        let line = br#"{"a": 18446744073709551616 ,"b":"\u0041","c":{"x":1e400}}"#;
        let text = std::str::from_utf8(line).unwrap();
        let mut e = ObjectEdit::parse(text).unwrap();
        assert_eq!(e.raw("c").unwrap().get(), r#"{"x":1e400}"#);
        e.set("b", &Value::from(2));
        e.set("d", &Value::from("new"));
        e.remove("nothing");
        assert_eq!(e.render(), r#"{"a":18446744073709551616,"b":2,"c":{"x":1e400},"d":"new"}"#);
        let inner = e.raw("c").unwrap().get();
        let r = range_in(line, inner).unwrap();
        assert_eq!(replace(line, r, "0"), br#"{"a": 18446744073709551616 ,"b":"\u0041","c":0}"#);
        assert!(ObjectEdit::parse("[1]").is_none());
    }
}
