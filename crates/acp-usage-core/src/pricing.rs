//! Pricing one normalised model call against catalog prices.
//! (Interface stub; the full implementation replaces this file.)

use crate::{Prices, TokenRecord};

/// The USD cost of one model call (or of `calls` identical-shaped calls summed in `rec`).
pub fn cost(rec: &TokenRecord, prices: &Prices) -> f64 {
    rec.uncached_input() as f64 * prices.input + rec.output as f64 * prices.output
}
