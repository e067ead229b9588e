//! The config file's keys: the ones its types read ([`known`], found by walking the types'
//! `Deserialize` code with a probe, so the list cannot fall behind them) and the ones a file
//! holds that none reads ([`parse`]). The documentation's example config is checked against
//! both by a test.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde::de::value::{Error, StrDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

use super::ConfigFile;

/// The file read, and the dotted paths of the keys no table reads (`budget.sesion`).
pub(crate) fn parse(text: &str) -> anyhow::Result<(ConfigFile, Vec<String>)> {
    let mut unknown = Vec::new();
    let de = toml::Deserializer::parse(text)?;
    let file = serde_ignored::deserialize(de, |path| unknown.push(dotted(&path)))?;
    Ok((file, unknown))
}

/// A path as the file spells it, `budget.sesion` (serde_ignored's own text marks the optional
/// tables on the way: `budget.?.sesion`).
fn dotted(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    let mut parts = Vec::new();
    let mut at = path;
    loop {
        match at {
            Path::Root => break,
            Path::Seq { parent, index } => {
                parts.push(index.to_string());
                at = parent;
            }
            Path::Map { parent, key } => {
                parts.push(key.clone());
                at = parent;
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => {
                at = parent;
            }
        }
    }
    parts.reverse();
    parts.join(".")
}

/// The keys no table reads in `text` (an error when it is no config file).
pub fn unknown(text: &str) -> anyhow::Result<Vec<String>> {
    parse(text).map(|(_, unknown)| unknown)
}

/// Every key the config file's types read, as dotted paths; a map's entry is `*`
/// (`models.*.input`, `otlp.headers.*`). An error when a type reads a value the probe cannot
/// offer (then the list would be short).
pub fn known() -> anyhow::Result<BTreeSet<String>> {
    let found = RefCell::new(BTreeSet::new());
    let probe = Probe { path: String::new(), found: &found };
    // The probe answers every value with a placeholder; what is read back is of no interest.
    <ConfigFile as de::Deserialize>::deserialize(probe)?;
    Ok(found.into_inner())
}

/// A deserializer with no data: it offers every field a struct asks for (recording its path),
/// one entry `*` of any map, no element of any list, and a placeholder for every scalar.
struct Probe<'a> {
    path: String,
    found: &'a RefCell<BTreeSet<String>>,
}

impl<'a> Probe<'a> {
    fn child(&self, key: &str) -> Probe<'a> {
        let path =
            if self.path.is_empty() { key.to_owned() } else { format!("{}.{key}", self.path) };
        self.found.borrow_mut().insert(path.clone());
        Probe { path, found: self.found }
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("the probe cannot tell the type at {}", self.path)))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(Entries { keys: fields.to_vec(), parent: self, at: None })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(Entries { keys: vec!["*"], parent: self, at: None })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(de::value::SeqDeserializer::<std::iter::Empty<u64>, Error>::new(
            std::iter::empty(),
        ))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(false)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(1)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(1.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u128 f32 char bytes byte_buf unit unit_struct
        newtype_struct tuple tuple_struct enum identifier ignored_any
    }
}

/// The keys of a struct or map the probe offers, one after another.
struct Entries<'a> {
    keys: Vec<&'static str>,
    parent: Probe<'a>,
    at: Option<&'static str>,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let key = self.keys.remove(0);
        self.at = Some(key);
        let de: StrDeserializer<'_, Error> = key.into_deserializer();
        seed.deserialize(de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let key = self.at.take().unwrap_or("*");
        seed.deserialize(self.parent.child(key))
    }
}
