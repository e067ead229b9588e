//! The commands besides the relay: `demo` (with the scripted agent behind it), `models`,
//! `validate` and `schema`, and the ledger's: `report`, `import`, `export`, `watch` and `status`.

pub mod demo;
pub mod export;
pub mod import;
pub mod models;
pub mod report;
pub mod status;
pub mod validate;
pub mod watch;
