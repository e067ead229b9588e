//! acp-usage's integration tests, one binary (linking the library once instead of once per
//! file): one module per topic, named as the former `tests/<name>.rs` file was, and `support`,
//! the helpers they share. The tests run in parallel in one process, so none of them changes
//! process-wide state (environment, current directory), and each writes only to files named
//! after itself.

mod carry;
mod catalog;
mod demo;
mod docs;
mod emission_schema;
mod flood;
mod follow;
mod ledger_open;
mod observer;
mod record;
mod relay;
mod streaming;
mod support;
mod tap_attribution;
mod torture;
mod transcripts;
mod validate_cli;
mod watch_status;
