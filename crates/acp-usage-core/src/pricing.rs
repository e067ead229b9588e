//! Pricing one normalised model call against catalog prices.
//!
//! Providers bill long-context tiers per request: once a request's prompt (every input token,
//! cache reads and writes included) passes the tier's threshold, ALL of its tokens, output and
//! cache included, are billed at the tier's prices. Pricing each bucket marginally (the first
//! 200k at base, the rest at premium) undercharges, so the tier is chosen once per request.

use crate::{Prices, TokenRecord};

/// The prices that apply to a request whose prompt has `prompt_tokens` tokens, with every
/// default resolved: the result has all cache prices set and no tier.
///
/// Defaults follow LiteLLM's reading of a missing key: a missing cache-read or 5-minute
/// cache-write price means the tokens are billed as plain input (OpenAI and Gemini have no
/// write surcharge); a missing 1-hour write price means the 5-minute price. Inside a tier, a
/// missing cache price is the base one scaled by the tier's input/base-input ratio, since
/// providers scale every input-side price by the same factor (Anthropic's 1M beta: 2×).
pub fn prices_for_prompt(prices: &Prices, prompt_tokens: u64) -> Prices {
    let cache_read = prices.cache_read.unwrap_or(prices.input);
    let cache_write_5m = prices.cache_write_5m.unwrap_or(prices.input);
    let cache_write_1h = prices.cache_write_1h.unwrap_or(cache_write_5m);
    match &prices.tier {
        Some(tier) if prompt_tokens > tier.threshold => {
            let t = &tier.prices;
            let scale = if prices.input > 0.0 { t.input / prices.input } else { 1.0 };
            Prices {
                input: t.input,
                output: t.output,
                cache_read: Some(t.cache_read.unwrap_or(cache_read * scale)),
                cache_write_5m: Some(t.cache_write_5m.unwrap_or(cache_write_5m * scale)),
                cache_write_1h: Some(t.cache_write_1h.unwrap_or(cache_write_1h * scale)),
                tier: None,
                multipliers: prices.multipliers,
            }
        }
        _ => Prices {
            input: prices.input,
            output: prices.output,
            cache_read: Some(cache_read),
            cache_write_5m: Some(cache_write_5m),
            cache_write_1h: Some(cache_write_1h),
            tier: None,
            multipliers: prices.multipliers,
        },
    }
}

/// The USD cost of one model call.
pub fn cost(rec: &TokenRecord, prices: &Prices) -> f64 {
    cost_of_calls(rec, prices, 1)
}

/// The USD cost of `rec` when it sums `calls` model calls. The tier is chosen on the average
/// prompt per call: the calls were billed one by one, and a sum of small prompts must not look
/// like one long-context request. `calls` 0 counts as 1.
pub fn cost_of_calls(rec: &TokenRecord, prices: &Prices, calls: u64) -> f64 {
    let prompt_per_call = rec.input / calls.max(1);
    let p = prices_for_prompt(prices, prompt_per_call);
    // `prices_for_prompt` resolves every cache price, so the defaults below never apply.
    rec.uncached_input() as f64 * p.input
        + rec.cache_read as f64 * p.cache_read.unwrap_or(p.input)
        + rec.cache_write_5m as f64 * p.cache_write_5m.unwrap_or(p.input)
        + rec.cache_write_1h as f64 * p.cache_write_1h.unwrap_or(p.input)
        + rec.output as f64 * p.output
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    fn prices(model: &str) -> &'static Prices {
        let info = Catalog::embedded().lookup(model).unwrap_or_else(|| panic!("{model} unknown"));
        info.prices.as_ref().unwrap_or_else(|| panic!("{model} has no prices"))
    }

    fn assert_usd(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-12, "got {got}, want {want}");
    }

    /// The research mock's Anthropic call: input_tokens 12, cache_creation 3000, cache_read
    /// 9000, output 7.
    fn anthropic_mock() -> TokenRecord {
        TokenRecord::from_anthropic(12, 9000, 3000, 0, 7)
    }

    #[test]
    fn anthropic_mock_call() {
        assert_usd(cost(&anthropic_mock(), prices("claude-sonnet-4-6")), 0.014091);
        assert_usd(cost(&anthropic_mock(), prices("claude-sonnet-4-5-20250929")), 0.014091);
        assert_usd(cost(&anthropic_mock(), prices("claude-opus-4-8")), 0.023485);
    }

    #[test]
    fn one_hour_cache_writes_use_their_own_price() {
        // 100 uncached, 10,000 written with a 1-hour TTL, 50 out, Sonnet 4.5: 1h write $6/M.
        let rec = TokenRecord::from_anthropic(100, 0, 0, 10_000, 50);
        assert_usd(
            cost(&rec, prices("claude-sonnet-4-5")),
            100.0 * 3e-6 + 10_000.0 * 6e-6 + 50.0 * 1.5e-5,
        );
        // Without a 1h price the 5-minute price applies.
        let mut p = prices("claude-sonnet-4-5").clone();
        p.cache_write_1h = None;
        assert_usd(cost(&rec, &p), 100.0 * 3e-6 + 10_000.0 * 3.75e-6 + 50.0 * 1.5e-5);
    }

    #[test]
    fn openai_cached_input_is_a_subset() {
        // gpt-5.2-codex: 5000 in incl. 4096 cached, 40 out: 904×1.75 + 4096×0.175 + 40×14 per M.
        let rec = TokenRecord::from_openai(5000, 4096, 40, 16);
        assert_usd(cost(&rec, prices("gpt-5.2-codex")), 0.0028588);
    }

    #[test]
    fn missing_cache_prices_are_priced_as_input() {
        let p = Prices { input: 1e-6, output: 2e-6, ..Prices::default() };
        let rec = TokenRecord::from_anthropic(10, 20, 30, 40, 5);
        assert_usd(cost(&rec, &p), 100.0 * 1e-6 + 5.0 * 2e-6);
    }

    #[test]
    fn gemini_long_context_bills_the_whole_request() {
        let p = prices("gemini-2.5-pro");
        // 100k prompt incl. 20k cached, 1k out (thoughts included): base prices.
        let below = TokenRecord::from_gemini(100_000, 20_000, 400, 600);
        assert_usd(cost(&below, p), 80_000.0 * 1.25e-6 + 20_000.0 * 1.25e-7 + 1000.0 * 1e-5);
        // Exactly at the threshold is still base (strict `>`).
        let at = TokenRecord::from_gemini(200_000, 0, 0, 0);
        assert_usd(cost(&at, p), 200_000.0 * 1.25e-6);
        // 250k prompt incl. 50k cached, 2k out: every token at the >200k prices.
        let above = TokenRecord::from_gemini(250_000, 50_000, 1500, 500);
        assert_usd(cost(&above, p), 200_000.0 * 2.5e-6 + 50_000.0 * 2.5e-7 + 2000.0 * 1.5e-5);
        assert_usd(cost(&above, p), 0.5425);
    }

    #[test]
    fn tier_cache_prices_fall_back_to_scaled_base_prices() {
        let p = Prices {
            input: 3e-6,
            output: 1.5e-5,
            cache_read: Some(3e-7),
            cache_write_5m: Some(3.75e-6),
            cache_write_1h: Some(6e-6),
            multipliers: Default::default(),
            tier: Some(crate::Tier {
                threshold: 200_000,
                prices: Box::new(Prices { input: 6e-6, output: 2.25e-5, ..Prices::default() }),
            }),
        };
        let t = prices_for_prompt(&p, 200_001);
        assert_eq!((t.input, t.output), (6e-6, 2.25e-5));
        assert_usd(t.cache_read.unwrap(), 6e-7);
        assert_usd(t.cache_write_5m.unwrap(), 7.5e-6);
        assert_usd(t.cache_write_1h.unwrap(), 1.2e-5);
        // The 1h write on the Vertex Sonnet 4.5 entry comes from its own tier key.
        let vertex = prices("vertex_ai/claude-sonnet-4-5");
        let rec = TokenRecord::from_anthropic(1000, 150_000, 0, 60_000, 100);
        let want = 1000.0 * 6e-6 + 150_000.0 * 6e-7 + 60_000.0 * 1.2e-5 + 100.0 * 2.25e-5;
        assert_usd(cost(&rec, vertex), want);
    }

    #[test]
    fn summed_calls_pick_the_tier_per_call() {
        let p = prices("gemini-2.5-pro");
        // Three calls of 100k each: 300k in total, but every call was below 200k.
        let sum = TokenRecord::from_gemini(300_000, 0, 30, 0);
        assert_usd(cost_of_calls(&sum, p, 3), 300_000.0 * 1.25e-6 + 30.0 * 1e-5);
        assert_usd(cost_of_calls(&sum, p, 1), 300_000.0 * 2.5e-6 + 30.0 * 1.5e-5);
        assert_usd(cost_of_calls(&sum, p, 0), cost(&sum, p));
    }
}
