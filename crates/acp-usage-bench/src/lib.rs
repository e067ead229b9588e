//! The benchmark of acp-usage: a synthetic ACP agent and client of the project's own, a raw
//! byte-copy relay, and the runner that puts acp-usage side by side with them; and the LLM-API
//! tap's benchmark ([`tap`]), in process, against a direct HTTP connection; and the ledger's
//! ([`ledger`]): calls/s it records, and what a write costs the relay; and the start-up one
//! ([`startup`]): the `initialize` round trip from spawn, with and without acp-usage; and the
//! reports' ([`reports`]): import and report on a generated history whose true bill is known
//! ([`history`]), side by side with ccusage.
//!
//! The binaries are thin: `bench-agent` ([`agent`]), `bench-raw-relay` (a byte copy that parses
//! nothing), `bench-client` (one scenario against any command) and `acp-usage-bench` (the
//! runner that prints the table). The client checks every chunk it receives, so a relay that
//! loses, reorders or alters lines cannot post a good figure.

pub mod agent;
pub mod client;
pub mod history;
pub mod ledger;
pub mod linebuf;
pub mod procfs;
pub mod reports;
pub mod scenario;
pub mod startup;
pub mod stats;
pub mod tap;
pub mod wire;
