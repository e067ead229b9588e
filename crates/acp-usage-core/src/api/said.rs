//! What every API's reader notes besides the usage (`Said`: model, id, the terminal event) and
//! how a provider's token count is read. The per-API readers use these and `reader.rs` uses the
//! readers, so these sit below both.

use serde_json::Value;

/// What any API's response said so far, besides its usage.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// The model the response names.
    pub(super) model: Option<String>,
    /// The provider's id of the reply.
    pub(super) id: Option<String>,
    /// The terminal event was read: the usage is final.
    pub(super) terminal: bool,
}

impl Said {
    /// Keeps the model a response names, when it names one.
    pub(super) fn note_model(&mut self, model: &Value) {
        if let Some(model) = model.as_str().filter(|model| !model.is_empty()) {
            self.model = Some(model.to_owned());
        }
    }

    /// Keeps the id a response states, when it states one.
    pub(super) fn note_id(&mut self, id: &Value) {
        if let Some(id) = id.as_str().filter(|id| !id.is_empty()) {
            self.id = Some(id.to_owned());
        }
    }
}

/// The largest count believed: far beyond any real call, and small enough that the sums the
/// record constructors make of a few counts cannot overflow, whatever a peer sends.
const MAX_COUNT: u64 = 1 << 48;

/// A token count from a provider's JSON: a non-negative integer, or the whole float some
/// gateways write instead.
pub(super) fn count(value: &Value) -> Option<u64> {
    let count = value.as_u64().or_else(|| {
        let float = value.as_f64()?;
        (float.is_finite() && float >= 0.0).then(|| float.round() as u64)
    })?;
    Some(count.min(MAX_COUNT))
}
