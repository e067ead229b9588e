//! A borrowed view of a JSON-RPC envelope, parsed only to observe a line.
//!
//! The view borrows from the line and keeps `params`/`result`/`error` as raw JSON, so observing a
//! message costs one pass over it and no copies; the line itself is forwarded untouched. An `id`
//! that is present but `null` is kept apart from an absent one: in ACP v1 a request may carry
//! `"id": null`, and only a missing id makes a notification.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The envelope of one JSON-RPC message.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    /// The id as it is on the wire (`1`, `"1"` and `null` all differ); `None` when absent.
    #[serde(default, borrow, deserialize_with = "present")]
    pub id: Option<&'a RawValue>,
    /// The method of a request or notification.
    #[serde(default, borrow)]
    pub method: Option<std::borrow::Cow<'a, str>>,
    /// Request or notification parameters.
    #[serde(default, borrow)]
    pub params: Option<&'a RawValue>,
    /// A success response's result.
    #[serde(default, borrow, deserialize_with = "present")]
    pub result: Option<&'a RawValue>,
    /// An error response's error object.
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
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
    /// lines, arrays, garbage), which the relay forwards without looking further.
    pub fn parse(line: &'a [u8]) -> Option<Envelope<'a>> {
        let first = line.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(line).ok()
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
        if raw.starts_with('"')
            && let Ok(s) = serde_json::from_str::<String>(raw)
        {
            return Some(serde_json::to_string(&s).expect("strings serialise"));
        }
        Some(raw.to_string())
    }
}

fn present<'de, D>(de: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue as Deserialize>::deserialize(de).map(Some)
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
}
