//! The commands besides the relay: `demo` (with the scripted agent behind it), `models`,
//! `validate` and `schema`, the ledger's: `report`, `import`, `export`, `watch` and `status`,
//! `setup`, which adds metered entries to an editor's agent settings, and `doctor`, which checks
//! what stands in the way on this machine.

pub mod demo;
pub mod doctor;
pub mod export;
pub mod import;
pub mod models;
pub mod report;
pub mod setup;
pub mod status;
pub mod validate;
pub mod watch;
