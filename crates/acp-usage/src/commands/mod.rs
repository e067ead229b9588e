//! The commands besides the relay: `demo` (with the scripted agent behind it), `models`, and
//! `validate` and `schema`.

pub mod demo;
pub mod models;
pub mod validate;
