//! The embedded catalog as a static table, compiled from catalog.tsv by the crate's build.rs.
//!
//! The table is sorted by id and searched in place, so start-up parses and allocates nothing.
//! A row becomes a [`ModelInfo`] (owned strings, the type every caller reads) the first time it
//! is looked up, once per process: a relay looks up a handful of models, not 3,000.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use super::{ModelInfo, Multipliers, Prices, Tier};

/// id, provider (each a span of [`STRINGS`]), window, max output, prices. No field is a
/// pointer, so the table needs no relocation when the binary is loaded (see build.rs).
pub(super) struct Row(Span, Span, Option<u64>, Option<u64>, Option<RowPrices>);

/// Offset and length of a string in [`STRINGS`].
type Span = (u32, u16);

/// input, output, cache read, 5-minute write, 1-hour write, long-context tier.
pub(super) struct RowPrices(f64, f64, Option<f64>, Option<f64>, Option<f64>, Option<RowTier>);

/// threshold, input, output, cache read, 5-minute write, 1-hour write.
pub(super) struct RowTier(u64, f64, f64, Option<f64>, Option<f64>, Option<f64>);

include!(concat!(env!("OUT_DIR"), "/catalog_rows.rs"));

/// The rows made into a [`ModelInfo`] so far, by index. Each is leaked on purpose: it lives as
/// long as the table, and there are at most [`COUNT`]. A map rather than an array of
/// `OnceLock`s, which would put 600 KB of initialised data in the binary for the loader to map.
static INFOS: Mutex<BTreeMap<usize, &'static ModelInfo>> = Mutex::new(BTreeMap::new());

/// Number of rows.
pub(super) fn len() -> usize {
    COUNT
}

/// The string at `span`.
fn text((at, len): Span) -> &'static str {
    &STRINGS[at as usize..at as usize + len as usize]
}

/// The row with exactly this id.
pub(super) fn find(id: &str) -> Option<usize> {
    ROWS.binary_search_by(|row| text(row.0).cmp(id)).ok()
}

/// The id of row `i`.
pub(super) fn id(i: usize) -> &'static str {
    text(ROWS[i].0)
}

/// Row `i` as a [`ModelInfo`].
pub(super) fn info(i: usize) -> &'static ModelInfo {
    let mut made = INFOS.lock().unwrap_or_else(PoisonError::into_inner);
    made.entry(i).or_insert_with(|| Box::leak(Box::new(make(i))))
}

/// Row `i` made into a [`ModelInfo`].
fn make(i: usize) -> ModelInfo {
    let Row(id, provider, max_input, max_output, prices) = &ROWS[i];
    ModelInfo {
        id: text(*id).to_owned(),
        provider: text(*provider).to_owned(),
        max_input: *max_input,
        max_output: *max_output,
        prices: prices.as_ref().map(|p| {
            let RowPrices(input, output, cache_read, cache_write_5m, cache_write_1h, tier) = p;
            Prices {
                input: *input,
                output: *output,
                cache_read: *cache_read,
                cache_write_5m: *cache_write_5m,
                cache_write_1h: *cache_write_1h,
                tier: tier.as_ref().map(|t| {
                    let RowTier(threshold, input, output, read, write_5m, write_1h) = t;
                    Tier {
                        threshold: *threshold,
                        prices: Box::new(Prices {
                            input: *input,
                            output: *output,
                            cache_read: *read,
                            cache_write_5m: *write_5m,
                            cache_write_1h: *write_1h,
                            tier: None,
                            multipliers: Multipliers::default(),
                        }),
                    }
                }),
                multipliers: Multipliers::default(),
            }
        }),
    }
}
