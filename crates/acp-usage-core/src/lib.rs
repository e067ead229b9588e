//! acp-usage-core: the pure accounting behind acp-usage.
//!
//! Everything here is plain data in, plain data out: no I/O, no async runtime, no JSON in the
//! API (transcript parsers read JSON lines, but hand back typed events). The binary crate observes ACP traffic, turns what it sees into [`tokens::TokenRecord`]s and
//! account events, and renders what the [`account::Account`] answers back into ACP messages.

pub mod account;
pub mod api;
pub mod budget;
pub mod catalog;
pub mod estimate;
pub mod limits;
pub mod pricing;
pub mod time;
pub mod tokens;
pub mod transcript;

pub use account::{Account, AccountedCall, Carried, Role, Snapshot, TurnUsage};
pub use catalog::{Catalog, ModelInfo, Multipliers, Prices, Tier};
pub use tokens::{Modifier, Modifiers, Source, TokenRecord, TokenTotals};
