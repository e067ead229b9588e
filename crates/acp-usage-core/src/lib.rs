//! acp-usage-core: the pure accounting behind acp-usage.
//!
//! Everything here is plain data in, plain data out: no I/O, no async runtime, no JSON in the
//! API (transcript parsers read JSON lines, but hand back typed events). The binary crate observes ACP traffic, turns what it sees into [`tokens::TokenRecord`]s and
//! ledger events, and renders what the [`ledger::Ledger`] answers back into ACP messages.

pub mod api;
pub mod budget;
pub mod catalog;
pub mod estimate;
pub mod ledger;
pub mod pricing;
pub mod tokens;
pub mod transcript;

pub use catalog::{Catalog, ModelInfo, Prices, Tier};
pub use ledger::{AccountedCall, Carried, Ledger, Role, Snapshot, TurnUsage};
pub use tokens::{Source, TokenRecord, TokenTotals};
