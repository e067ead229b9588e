//! The project's own corrections to LiteLLM's catalog (`data/corrections.toml`): prices LiteLLM
//! lacks and the request modifiers' multipliers, each with its source and the day it was checked.
//!
//! Corrections fill holes; they never replace a figure a LiteLLM file has, so a newer file (a
//! newer reading of the provider's page) wins. They are applied when a LiteLLM file is compiled:
//! by `cargo xtask codegen` into `catalog.tsv`, and at runtime on a user's `--catalog` file. The
//! multipliers have no column in `catalog.tsv`, so pricing asks [`Corrections::multiplier`]
//! directly.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::{Catalog, ModelInfo, Multipliers, Prices, Tier, strip_date_suffix};
use crate::tokens::{Modifier, Modifiers};

/// The corrections compiled into the binary.
const CORRECTIONS_TOML: &str = include_str!("../../data/corrections.toml");

/// Humans write prices per million tokens; the catalog keeps them per token.
const PER_MILLION: f64 = 1_000_000.0;

/// One model's correction, as written in the file (prices in USD per million tokens).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Correction {
    /// Where the figures come from (a URL).
    pub source: String,
    /// When they were last checked against it (`YYYY-MM-DD`).
    pub checked: String,
    /// What was checked and why the entry exists.
    #[serde(default)]
    pub note: Option<String>,
    /// Other catalog ids of the same model (dated ids), corrected the same way.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Provider, for a model the catalog lacks.
    #[serde(default)]
    pub provider: Option<String>,
    /// Input context window in tokens.
    #[serde(default)]
    pub window: Option<u64>,
    /// Maximum output tokens.
    #[serde(default)]
    pub max_output: Option<u64>,
    /// Uncached input, USD per 1M tokens.
    #[serde(default)]
    pub input: Option<f64>,
    /// Output, USD per 1M tokens.
    #[serde(default)]
    pub output: Option<f64>,
    /// Cache read, USD per 1M tokens.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// 5-minute cache write, USD per 1M tokens.
    #[serde(default)]
    pub cache_write_5m: Option<f64>,
    /// 1-hour cache write, USD per 1M tokens.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
    /// The long-context tier (all of a request's tokens once its prompt passes `threshold`).
    #[serde(default)]
    pub long_context: Option<LongContext>,
    /// Fast-mode multiplier of the whole request's price.
    #[serde(default)]
    pub fast: Option<f64>,
    /// US-only inference multiplier of the whole request's price.
    #[serde(default)]
    pub us_only: Option<f64>,
    /// Priority processing's multiplier of the whole request's price (OpenAI).
    #[serde(default)]
    pub priority: Option<f64>,
}

/// `[models."id".long_context]`: a complete tier, since it fills a missing one.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContext {
    /// Prompt size (cache included) above which the tier applies (strict `>`).
    pub threshold: u64,
    /// USD per 1M tokens.
    pub input: f64,
    /// USD per 1M tokens.
    pub output: f64,
    /// USD per 1M tokens.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// USD per 1M tokens.
    #[serde(default)]
    pub cache_write_5m: Option<f64>,
    /// USD per 1M tokens.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    models: BTreeMap<String, Correction>,
}

/// Every correction, by catalog id (aliases included).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Corrections {
    models: BTreeMap<String, Correction>,
}

/// Per million to per token.
fn per_token(v: Option<f64>) -> Option<f64> {
    v.map(|x| x / PER_MILLION)
}

impl Corrections {
    /// The corrections compiled in (read once; the file is checked by a test, so a failure
    /// here is a build bug).
    pub fn embedded() -> &'static Corrections {
        static EMBEDDED: OnceLock<Corrections> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            Corrections::parse(CORRECTIONS_TOML)
                .unwrap_or_else(|err| panic!("data/corrections.toml is malformed: {err}"))
        })
    }

    /// Reads a corrections file: each entry needs a source and a checked date, prices and
    /// multipliers must be finite and non-negative.
    pub fn parse(text: &str) -> Result<Corrections, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut models = BTreeMap::new();
        for (id, c) in file.models {
            if c.source.trim().is_empty() || c.checked.trim().is_empty() {
                return Err(format!(
                    "models.{id:?}: every correction needs `source` and `checked`"
                ));
            }
            let lc = c.long_context.as_ref();
            let values = [c.input, c.output, c.cache_read, c.cache_write_5m, c.cache_write_1h]
                .into_iter()
                .chain([c.fast, c.us_only, c.priority])
                .chain([lc.map(|t| t.input), lc.map(|t| t.output)])
                .chain(lc.map_or([None; 3], |t| [t.cache_read, t.cache_write_5m, t.cache_write_1h]))
                .flatten();
            if let Some(bad) = values.into_iter().find(|v| !v.is_finite() || *v < 0.0) {
                return Err(format!("models.{id:?}: {bad} is not a price or multiplier"));
            }
            for alias in &c.aliases {
                models.insert(alias.clone(), c.clone());
            }
            models.insert(id, c);
        }
        Ok(Corrections { models })
    }

    /// Every corrected id (aliases included) with its correction, sorted by id.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Correction)> {
        self.models.iter().map(|(id, c)| (id.as_str(), c))
    }

    /// The correction of the catalog id `id`, or of the same id without its release date.
    pub fn get(&self, id: &str) -> Option<&Correction> {
        self.models.get(id).or_else(|| self.models.get(&strip_date_suffix(id)?))
    }

    /// The multiplier of one modifier for the catalog model `id`, when known.
    pub fn multiplier(&self, id: &str, m: Modifier) -> Option<f64> {
        let c = self.get(id)?;
        match m {
            Modifier::Fast => c.fast,
            Modifier::UsOnly => c.us_only,
            Modifier::Priority => c.priority,
        }
    }

    /// The multiplier pricing uses for `m` on the model `id`: what the catalog itself `stated`
    /// (a user's file), else the corrections'.
    pub fn resolved(&self, id: &str, stated: Multipliers, m: Modifier) -> Option<f64> {
        stated.of(m).or_else(|| self.multiplier(id, m))
    }

    /// The factor a call with `modifiers` pays over its standard price on the model `id`, and
    /// whether every modifier's multiplier was known (an unknown one counts as 1x). What the
    /// catalog itself `stated` (a user's file) comes before the corrections.
    pub fn factor(&self, id: &str, stated: Multipliers, modifiers: Modifiers) -> (f64, bool) {
        let mut factor = 1.0;
        let mut known = true;
        for m in Modifier::ALL.into_iter().filter(|m| modifiers.has(*m)) {
            match self.resolved(id, stated, m) {
                Some(m) => factor *= m,
                None => known = false,
            }
        }
        (factor, known)
    }

    /// Fills what `catalog` lacks from the corrections: a window, cache price or long-context
    /// tier, and with `add_missing` a model it lacks (given both an input and an output
    /// price). A figure the catalog has is kept. Returns how many models changed.
    ///
    /// The embedded catalog adds missing models; a user's LiteLLM file does not, because it is
    /// merged over the embedded catalog, which has them already.
    pub fn fill(&self, catalog: &mut Catalog, add_missing: bool) -> usize {
        let mut changed = 0;
        for (id, c) in &self.models {
            let before = catalog.get(id).cloned();
            if before.is_none() && !add_missing {
                continue;
            }
            let mut info = before
                .clone()
                .unwrap_or_else(|| ModelInfo { id: id.clone(), ..ModelInfo::default() });
            fill_info(&mut info, c);
            let useful = info.prices.is_some() || info.max_input.is_some();
            if Some(&info) != before.as_ref() && useful {
                catalog.insert(info);
                changed += 1;
            }
        }
        changed
    }
}

fn fill_opt<T: Copy>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

fn fill_info(info: &mut ModelInfo, c: &Correction) {
    if info.provider.is_empty()
        && let Some(p) = &c.provider
    {
        info.provider = p.clone();
    }
    fill_opt(&mut info.max_input, c.window);
    fill_opt(&mut info.max_output, c.max_output);
    if info.prices.is_none()
        && let (Some(input), Some(output)) = (per_token(c.input), per_token(c.output))
    {
        info.prices = Some(Prices { input, output, ..Prices::default() });
    }
    let Some(prices) = info.prices.as_mut() else { return };
    fill_opt(&mut prices.cache_read, per_token(c.cache_read));
    fill_opt(&mut prices.cache_write_5m, per_token(c.cache_write_5m));
    fill_opt(&mut prices.cache_write_1h, per_token(c.cache_write_1h));
    let Some(lc) = &c.long_context else { return };
    let tier = prices.tier.get_or_insert_with(|| Tier {
        threshold: lc.threshold,
        prices: Box::new(Prices {
            input: lc.input / PER_MILLION,
            output: lc.output / PER_MILLION,
            ..Prices::default()
        }),
    });
    // A tier of the file's own at other prices is its reading, not ours: its missing cache
    // prices scale from its own input price (see `prices_for_prompt`).
    let ours = (lc.input / PER_MILLION, lc.output / PER_MILLION);
    if (tier.prices.input, tier.prices.output) != ours {
        return;
    }
    fill_opt(&mut tier.prices.cache_read, per_token(lc.cache_read));
    fill_opt(&mut tier.prices.cache_write_5m, per_token(lc.cache_write_5m));
    fill_opt(&mut tier.prices.cache_write_1h, per_token(lc.cache_write_1h));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TokenRecord;
    use crate::pricing::cost;

    fn assert_usd(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-12 * want.max(1.0), "got {got}, want {want}");
    }

    /// The figures research/pricing-and-tokens.md lists, per model: long-context tiers of
    /// Sonnet 4/4.5 (sections 1 and 6), fast-mode and US-only multipliers (sections 1-3, 6).
    #[test]
    fn the_research_notes_prices_hold() {
        let catalog = Catalog::embedded();
        for id in [
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4-20250514",
            "claude-sonnet-4-0",
        ] {
            let p =
                catalog.get(id).and_then(|m| m.prices.as_ref()).unwrap_or_else(|| panic!("{id}"));
            assert_eq!((p.input, p.output, p.cache_read), (3e-6, 1.5e-5, Some(3e-7)), "{id}");
            assert_eq!((p.cache_write_5m, p.cache_write_1h), (Some(3.75e-6), Some(6e-6)), "{id}");
            let t = p.tier.as_ref().unwrap_or_else(|| panic!("{id} has no long-context tier"));
            assert_eq!((t.threshold, t.prices.input, t.prices.output), (200_000, 6e-6, 2.25e-5));
            assert_eq!(t.prices.cache_read, Some(6e-7), "{id}");
            assert_eq!(
                (t.prices.cache_write_5m, t.prices.cache_write_1h),
                (Some(7.5e-6), Some(1.2e-5))
            );
        }
        let c = Corrections::embedded();
        for (id, fast, us) in [
            ("claude-opus-4-6", Some(6.0), Some(1.1)),
            ("claude-opus-4-6-20260205", Some(6.0), Some(1.1)),
            ("claude-opus-4-7", Some(6.0), Some(1.1)),
            ("claude-opus-4-7-20260416", Some(6.0), Some(1.1)),
            ("claude-opus-4-8", Some(2.0), Some(1.1)),
            ("claude-sonnet-4-6", None, Some(1.1)),
            ("claude-sonnet-4-5", None, None),
        ] {
            assert_eq!(
                (c.multiplier(id, Modifier::Fast), c.multiplier(id, Modifier::UsOnly)),
                (fast, us),
                "{id}"
            );
        }
        // Every entry names its source and when it was checked.
        for (id, corr) in c.iter() {
            assert!(corr.source.starts_with("https://"), "{id}");
            assert!(corr.checked.len() == 10 && corr.checked.starts_with("20"), "{id}");
        }
    }

    #[test]
    fn priority_multipliers_are_litellms_priority_prices_over_its_standard_ones() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/litellm-model_prices_and_context_window-1.109.1.json"
        ))
        .expect("the LiteLLM file the catalog is compiled from");
        let litellm: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let c = Corrections::embedded();
        let mut held = 0;
        for (id, corr) in c.iter() {
            let Some(priority) = corr.priority else { continue };
            let e = &litellm[id];
            for key in
                ["input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost"]
            {
                let (base, p) = (e[key].as_f64(), e[format!("{key}_priority")].as_f64());
                let (Some(base), Some(p)) = (base, p) else { continue };
                assert!(
                    (p / base - priority).abs() < 1e-6,
                    "{id} {key}: {} != {priority}",
                    p / base
                );
                held += 1;
            }
        }
        assert!(held >= 30, "only {held} priority prices held");
        // Dated ids find their model's; Codex's own ids have none (LiteLLM prices no priority).
        assert_eq!(c.multiplier("gpt-5-2025-08-07", Modifier::Priority), Some(2.0));
        assert_eq!(c.multiplier("gpt-5.5", Modifier::Priority), Some(2.5));
        assert_eq!(c.multiplier("gpt-5.2-codex", Modifier::Priority), None);
        // A priority call is priced at the multiplier and exact; on a model without one, at 1x
        // and not exact.
        let rec = TokenRecord {
            input: 1_000,
            output: 100,
            modifiers: Modifiers { priority: true, ..Modifiers::default() },
            model: Some("gpt-5.2".into()),
            ..TokenRecord::default()
        };
        let priced = crate::account::price_call(&rec, None, 1, Catalog::embedded());
        let standard = (1_000.0 * 1.75 + 100.0 * 14.0) / 1e6;
        assert!((priced.cost.unwrap() - 2.0 * standard).abs() < 1e-12, "{priced:?}");
        assert!(!priced.modifiers_unpriced);
        let codex = TokenRecord { model: Some("gpt-5.2-codex".into()), ..rec };
        let priced = crate::account::price_call(&codex, None, 1, Catalog::embedded());
        assert!((priced.cost.unwrap() - standard).abs() < 1e-12, "{priced:?}");
        assert!(priced.modifiers_unpriced);
    }

    #[test]
    fn corrections_fill_holes_and_keep_what_a_catalog_has() {
        let c = Corrections::parse(
            r#"
            [models."m"]
            aliases = ["m-20260101"]
            source = "https://example.invalid/p"
            checked = "2026-11-26"
            cache_read = 0.3
            [models."m".long_context]
            threshold = 200_000
            input = 6.0
            output = 22.5
            [models."new"]
            source = "https://example.invalid/p"
            checked = "2026-11-26"
            window = 1000
            input = 1.0
            output = 2.0
            "#,
        )
        .unwrap();
        let mut catalog = Catalog::new();
        let base =
            Prices { input: 3e-6, output: 1.5e-5, cache_read: Some(1e-7), ..Prices::default() };
        catalog.insert(ModelInfo {
            id: "m".into(),
            prices: Some(base.clone()),
            ..ModelInfo::default()
        });
        assert_eq!(c.fill(&mut catalog, false), 1);
        assert!(catalog.get("new").is_none());
        assert_eq!(c.fill(&mut catalog, true), 1);
        let m = catalog.get("m").unwrap().prices.as_ref().unwrap();
        // The catalog's own cache-read price stays; the missing tier is filled.
        assert_eq!(m.cache_read, Some(1e-7));
        let t = m.tier.as_ref().unwrap();
        assert_eq!((t.threshold, t.prices.input, t.prices.output), (200_000, 6e-6, 2.25e-5));
        // An alias the catalog lacks gets nothing from a tier-only correction.
        assert!(catalog.get("m-20260101").is_none());
        let new = catalog.get("new").unwrap();
        assert_eq!((new.max_input, new.prices.as_ref().unwrap().output), (Some(1000), 2e-6));
        // Filling twice changes nothing.
        assert_eq!(c.fill(&mut catalog, true), 0);
        let err = Corrections::parse("[models.x]\nsource = \"\"\nchecked = \"\"\n").unwrap_err();
        assert!(err.contains("source"), "{err}");
    }

    #[test]
    fn long_context_sonnet_4_5_bills_the_whole_request_at_the_tier() {
        let p = Catalog::embedded().lookup("claude-sonnet-4-5-20250929").unwrap();
        let p = p.prices.as_ref().unwrap();
        // 250k prompt: 1,000 uncached, 200,000 read, 49,000 written for 1 hour; 2,000 out.
        let rec = TokenRecord::from_anthropic(1000, 200_000, 0, 49_000, 2000);
        let want = 1000.0 * 6e-6 + 200_000.0 * 6e-7 + 49_000.0 * 1.2e-5 + 2000.0 * 2.25e-5;
        assert_usd(cost(&rec, p), want);
        // At 200k exactly the base prices apply.
        let at = TokenRecord::from_anthropic(1000, 199_000, 0, 0, 10);
        assert_usd(cost(&at, p), 1000.0 * 3e-6 + 199_000.0 * 3e-7 + 10.0 * 1.5e-5);
    }
}
