//! Sinks: where settled numbers go besides the editor. Each takes what the accounting core
//! settled ([`acp_usage_core::AccountedCall`], a session's carried figures) and stores or
//! sends it as it is; none computes a number of its own.

pub mod ledger;
pub mod otlp;
