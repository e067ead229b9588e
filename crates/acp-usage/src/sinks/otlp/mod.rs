//! OTLP export of the ledger: metrics and one log event per call, over OTLP/HTTP (protobuf), to
//! the organisation's OpenTelemetry collector. The ledger is the outbox: what a destination
//! has not acknowledged stays queued, whichever process recorded it, so a collector that is
//! down loses nothing and a retried export counts nothing twice.
//!
//! ```text
//! relay ──Write──▶ ledger.db ◀──claim/ack── exporter thread ──HTTP──▶ collector
//!                                          (every process; one at a time per destination)
//! ```
//! The relay never waits for the exporter: it runs on its own thread, on its own timer, and
//! at the end of a run gets a bounded final flush.

pub mod config;
pub mod encode;
pub mod exporter;
pub mod outbox;

pub use config::{OtlpConfig, OtlpTable};
pub use exporter::{Exporter, Flushed, Handle};
