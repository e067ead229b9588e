//! acp-usage-schema's integration tests, one binary: one module per topic, named as the former
//! `tests/<name>.rs` file was.

mod schema;
mod validate;
