//! Reading catalogs from files: LiteLLM's JSON, or small TOML/JSON override files.
//!
//! LiteLLM's `model_prices_and_context_window.json` is both the source of the embedded catalog
//! (compiled by `cargo xtask codegen` into the core crate's `catalog.tsv`) and a file users can
//! point `--catalog` at to pick up newer models without a rebuild. Override files are what a
//! person writes by hand: a `[models."id"]` table per model, prices in USD per million tokens.

use std::collections::BTreeMap;
use std::path::Path;

use acp_usage_core::catalog::{Corrections, ModelPatch, TierPatch};
use acp_usage_core::{Catalog, ModelInfo, Multipliers, Prices, Tier};
use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The LiteLLM file the embedded catalog is compiled from, relative to the workspace root.
pub const EMBEDDED_LITELLM_FILE: &str = "data/litellm-model_prices_and_context_window-1.109.1.json";

/// The day the LiteLLM copy in [`EMBEDDED_LITELLM_FILE`] was taken from PyPI (its newest
/// release then): how old the embedded prices are, for `doctor`. Changes with the file.
pub const EMBEDDED_TAKEN: &str = "2026-11-22";

/// The generated catalog file, relative to the workspace root.
pub const EMBEDDED_CATALOG_FILE: &str = "crates/acp-usage-core/src/catalog.tsv";

/// The source line of the embedded catalog (also its attribution: the data is MIT-licensed).
pub const EMBEDDED_SOURCE: &str = "LiteLLM model_prices_and_context_window.json 1.109.1 \
                                   (MIT, Copyright (c) 2023 Berri AI) + acp-usage corrections";

/// Price keys are per token; humans write per million.
const PER_MILLION: f64 = 1_000_000.0;

/// Compiles a LiteLLM `model_prices_and_context_window.json` into a catalog.
///
/// Keeps chat and responses models (and the few mode-less entries that carry token prices);
/// skips LiteLLM's documentation entries (`sample_spec`, `fallback_generalizations`). Every field
/// is optional and numbers may be ints or floats; a value of the wrong type is ignored rather
/// than fatal, because a newer LiteLLM file must not break the whole catalog over one entry.
/// Batch, flex and priority prices are left out: agents run on the standard tier.
///
/// The project's corrections (`acp-usage-core/data/corrections.toml`) then fill the holes of the
/// file's entries (Sonnet 4.5's long-context tier, ...): the embedded catalog and a user's newer
/// file both carry them, and a figure the file has wins.
pub fn from_litellm_json(text: &str) -> anyhow::Result<Catalog> {
    let value: Value = serde_json::from_str(text).context("not valid JSON")?;
    let Value::Object(entries) = value else {
        bail!("a LiteLLM catalog is a JSON object of models");
    };
    let mut catalog = Catalog::new();
    for (id, entry) in &entries {
        if id == "sample_spec" || id == "fallback_generalizations" {
            continue;
        }
        let Value::Object(entry) = entry else { continue };
        if !is_representable_id(id) {
            tracing::debug!("catalog: skipping LiteLLM entry with an unusable id {id:?}");
            continue;
        }
        if let Some(info) = litellm_entry(id, entry) {
            catalog.insert(info);
        }
    }
    Corrections::embedded().fill(&mut catalog, false);
    Ok(catalog)
}

/// Compiles the embedded catalog's text from the LiteLLM JSON (what `cargo xtask codegen`
/// writes to [`EMBEDDED_CATALOG_FILE`]).
pub fn compile_embedded(litellm_json: &str) -> anyhow::Result<String> {
    let mut catalog = from_litellm_json(litellm_json)?;
    // Models LiteLLM lacks altogether (Sonnet 4's dated id) come only into the embedded catalog.
    Corrections::embedded().fill(&mut catalog, true);
    catalog.set_source(EMBEDDED_SOURCE);
    Ok(catalog.to_compact())
}

/// Reads [`EMBEDDED_LITELLM_FILE`] under `workspace_root` and compiles it.
pub fn generate_embedded(workspace_root: &Path) -> anyhow::Result<String> {
    let path = workspace_root.join(EMBEDDED_LITELLM_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    compile_embedded(&text).with_context(|| format!("compiling {}", path.display()))
}

/// The compact format has tab-separated lines and `#` comments.
fn is_representable_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('#') && !id.contains(['\t', '\n', '\r'])
}

/// One LiteLLM entry, or `None` when it is not a text model or says nothing we use.
fn litellm_entry(id: &str, e: &Map<String, Value>) -> Option<ModelInfo> {
    let input = price(e, "input_cost_per_token");
    let output = price(e, "output_cost_per_token");
    match e.get("mode").and_then(Value::as_str) {
        Some("chat" | "responses") => {}
        None if input.is_some() || output.is_some() => {}
        _ => return None,
    }
    let prices = (input.is_some() || output.is_some()).then(|| {
        // A missing side is priced by something else (per second, per image) in LiteLLM.
        let (input, output) = (input.unwrap_or(0.0), output.unwrap_or(0.0));
        Prices {
            input,
            output,
            cache_read: price(e, "cache_read_input_token_cost"),
            cache_write_5m: price(e, "cache_creation_input_token_cost"),
            cache_write_1h: price(e, "cache_creation_input_token_cost_above_1hr"),
            tier: litellm_tier(e, output),
            multipliers: litellm_multipliers(e),
        }
    });
    let info = ModelInfo {
        id: id.to_owned(),
        provider: e.get("litellm_provider").and_then(Value::as_str).unwrap_or("").to_owned(),
        max_input: count(e, "max_input_tokens"),
        max_output: count(e, "max_output_tokens"),
        prices,
    };
    let useful = info.max_input.is_some() || info.max_output.is_some() || info.prices.is_some();
    useful.then_some(info)
}

/// `provider_specific_entry`'s request multipliers (`{"us": 1.1, "fast": 2.0}` on Anthropic's
/// newer models): a user's newer file may know a model's before the corrections file does.
/// The embedded catalog's come from the corrections (its compact form has no column for them).
fn litellm_multipliers(e: &Map<String, Value>) -> Multipliers {
    let entry = e.get("provider_specific_entry").and_then(Value::as_object);
    let get = |key: &str| entry.and_then(|m| m.get(key)).and_then(nonnegative);
    Multipliers { fast: get("fast"), us_only: get("us"), priority: priority_ratio(e) }
}

/// Priority processing as one multiplier: LiteLLM gives it as `…_priority` prices, which on
/// OpenAI's models are the standard ones times one factor (2, or 2.5 on GPT-5.5). Only a
/// factor every stated price agrees on is kept.
fn priority_ratio(e: &Map<String, Value>) -> Option<f64> {
    let ratio = |key: &str| -> Option<Option<f64>> {
        match (price(e, key), price(e, &format!("{key}_priority"))) {
            (Some(base), Some(p)) if base > 0.0 => Some(Some(p / base)),
            (_, None) => Some(None),
            _ => None,
        }
    };
    let ratios = [
        ratio("input_cost_per_token")?,
        ratio("output_cost_per_token")?,
        ratio("cache_read_input_token_cost")?,
    ];
    let first = ratios[0]?;
    let agree = ratios.iter().flatten().all(|r| (r - first).abs() <= 1e-6 * first);
    agree.then_some(first)
}

/// The lowest `…_above_{N}k_tokens` tier. Only one tier is kept: agents' prompts cross the first
/// threshold long before a second one, and the only model with two (a Qwen reseller) is rare.
fn litellm_tier(e: &Map<String, Value>, base_output: f64) -> Option<Tier> {
    let (k, input) = e
        .iter()
        .filter_map(|(key, v)| {
            let n = key.strip_prefix("input_cost_per_token_above_")?.strip_suffix("k_tokens")?;
            let k: u64 = n.parse().ok()?;
            Some((k, nonnegative(v)?))
        })
        .min_by_key(|(k, _)| *k)?;
    let at = |base: &str| price(e, &format!("{base}_above_{k}k_tokens"));
    Some(Tier {
        threshold: k * 1000,
        prices: Box::new(Prices {
            input,
            // LiteLLM keeps the base output price when the tier does not name one.
            output: at("output_cost_per_token").unwrap_or(base_output),
            cache_read: at("cache_read_input_token_cost"),
            cache_write_5m: at("cache_creation_input_token_cost"),
            cache_write_1h: at("cache_creation_input_token_cost_above_1hr"),
            tier: None,
            // The tier's prices are the base's, scaled: the multipliers are the base's.
            multipliers: Multipliers::default(),
        }),
    })
}

fn nonnegative(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite() && *x >= 0.0)
}

fn price(e: &Map<String, Value>, key: &str) -> Option<f64> {
    e.get(key).and_then(nonnegative)
}

/// Token counts: ints, or floats such as `65536.0`.
fn count(e: &Map<String, Value>, key: &str) -> Option<u64> {
    let v = e.get(key)?;
    v.as_u64().or_else(|| {
        let x = nonnegative(v)?;
        (x.fract() == 0.0 && x < u64::MAX as f64).then_some(x as u64)
    })
}

/// One model in an override file or in the config's `[models]`: what a person writes, prices in
/// USD per million tokens. Unknown keys are errors, so a typo cannot silently do nothing.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Provider name (informational).
    pub provider: Option<String>,
    /// Input context window in tokens.
    pub window: Option<u64>,
    /// Maximum output tokens.
    pub max_output: Option<u64>,
    /// Uncached input, USD per 1M tokens.
    pub input: Option<f64>,
    /// Output, USD per 1M tokens.
    pub output: Option<f64>,
    /// Cache read, USD per 1M tokens.
    pub cache_read: Option<f64>,
    /// 5-minute cache write, USD per 1M tokens.
    pub cache_write_5m: Option<f64>,
    /// 1-hour cache write, USD per 1M tokens.
    pub cache_write_1h: Option<f64>,
    /// Long-context tier.
    pub long_context: Option<LongContextOverride>,
    /// Fast mode's multiplier of a whole request's price (Claude's `usage.speed: "fast"`).
    pub fast: Option<f64>,
    /// US-only inference's multiplier (`usage.inference_geo: "us"`).
    pub us_only: Option<f64>,
    /// Priority processing's multiplier (OpenAI `service_tier: "priority"`, Codex's fast mode).
    pub priority: Option<f64>,
}

/// `[models."id".long_context]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContextOverride {
    /// Prompt size (cache included) above which the whole request uses these prices.
    pub threshold: Option<u64>,
    /// USD per 1M tokens.
    pub input: Option<f64>,
    /// USD per 1M tokens.
    pub output: Option<f64>,
    /// USD per 1M tokens.
    pub cache_read: Option<f64>,
    /// USD per 1M tokens.
    pub cache_write_5m: Option<f64>,
    /// USD per 1M tokens.
    pub cache_write_1h: Option<f64>,
}

impl ModelOverride {
    /// The per-token patch; `id` names the model in errors.
    pub fn to_patch(&self, id: &str) -> anyhow::Result<ModelPatch> {
        if !is_representable_id(id) {
            bail!("models.{id:?}: a model id must be non-empty, without tabs or line breaks");
        }
        let per_token = |field: &str, v: Option<f64>| -> anyhow::Result<Option<f64>> {
            match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x / PER_MILLION)),
                Some(x) => bail!("models.{id:?}.{field}: {x} is not a price (USD per 1M tokens)"),
            }
        };
        let multiplier = |field: &str, v: Option<f64>| -> anyhow::Result<Option<f64>> {
            match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                Some(x) => bail!("models.{id:?}.{field}: {x} is not a multiplier (e.g. 2.0)"),
            }
        };
        let tier = match &self.long_context {
            None => None,
            Some(lc) => Some(TierPatch {
                threshold: lc.threshold,
                input: per_token("long_context.input", lc.input)?,
                output: per_token("long_context.output", lc.output)?,
                cache_read: per_token("long_context.cache_read", lc.cache_read)?,
                cache_write_5m: per_token("long_context.cache_write_5m", lc.cache_write_5m)?,
                cache_write_1h: per_token("long_context.cache_write_1h", lc.cache_write_1h)?,
            }),
        };
        Ok(ModelPatch {
            provider: self.provider.clone(),
            max_input: self.window,
            max_output: self.max_output,
            input: per_token("input", self.input)?,
            output: per_token("output", self.output)?,
            cache_read: per_token("cache_read", self.cache_read)?,
            cache_write_5m: per_token("cache_write_5m", self.cache_write_5m)?,
            cache_write_1h: per_token("cache_write_1h", self.cache_write_1h)?,
            tier,
            multipliers: Multipliers {
                fast: multiplier("fast", self.fast)?,
                us_only: multiplier("us_only", self.us_only)?,
                priority: multiplier("priority", self.priority)?,
            },
        })
    }
}

/// An override file: `{"models": {...}}` in JSON, `[models."id"]` tables in TOML.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OverridesFile {
    #[serde(default)]
    models: BTreeMap<String, ModelOverride>,
}

/// Partial changes to models, applied over whatever catalog is below them.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Where they came from, for the catalog's source line and errors.
    pub source: String,
    /// Per-token patches by exact model id.
    pub models: BTreeMap<String, ModelPatch>,
}

impl Overrides {
    /// Converts hand-written per-million overrides.
    pub fn from_models(
        source: impl Into<String>,
        models: &BTreeMap<String, ModelOverride>,
    ) -> anyhow::Result<Overrides> {
        let source = source.into();
        let mut patches = BTreeMap::new();
        for (id, o) in models {
            patches.insert(id.clone(), o.to_patch(id).with_context(|| source.clone())?);
        }
        Ok(Overrides { source, models: patches })
    }

    /// Applies every patch to `catalog` (an id there keeps the fields not given).
    pub fn apply(&self, catalog: &mut Catalog) -> anyhow::Result<()> {
        for (id, patch) in &self.models {
            catalog
                .patch(id, patch)
                .map_err(|err| anyhow::anyhow!("{}: models.{id:?}: {err}", self.source))?;
        }
        if !self.models.is_empty() {
            let source =
                format!("{} + {} ({} overrides)", catalog.source(), self.source, self.models.len());
            catalog.set_source(source);
        }
        Ok(())
    }
}

/// What a catalog file holds: a whole catalog, or changes to one.
#[derive(Debug, Clone)]
pub enum CatalogLayer {
    /// A LiteLLM file: its entries replace the ones below, field by field.
    Full(Catalog),
    /// An override file: only the given fields change.
    Overrides(Overrides),
}

impl CatalogLayer {
    /// Puts this layer over `catalog`.
    pub fn apply(self, catalog: &mut Catalog) -> anyhow::Result<()> {
        match self {
            CatalogLayer::Full(full) => {
                catalog.merge(full);
                Ok(())
            }
            CatalogLayer::Overrides(o) => o.apply(catalog),
        }
    }

    /// How many models the layer names.
    pub fn len(&self) -> usize {
        match self {
            CatalogLayer::Full(c) => c.len(),
            CatalogLayer::Overrides(o) => o.models.len(),
        }
    }

    /// Whether the layer names no model.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `LiteLLM` or `overrides`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            CatalogLayer::Full(_) => "LiteLLM catalog",
            CatalogLayer::Overrides(_) => "overrides",
        }
    }
}

/// Reads a catalog file: LiteLLM JSON or an override file (TOML or JSON), told apart by
/// content. Errors name the file and, for syntax and shape errors, the line and field.
pub fn load_layer(path: &Path) -> anyhow::Result<CatalogLayer> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading catalog file {}", path.display()))?;
    parse_layer(&text, path).with_context(|| format!("in catalog file {}", path.display()))
}

/// [`load_layer`] on text already read; `path` decides TOML vs JSON by extension, else content.
pub fn parse_layer(text: &str, path: &Path) -> anyhow::Result<CatalogLayer> {
    let name = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let json = match ext.as_deref() {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    };
    if !json {
        let file: OverridesFile = toml::from_str(text)?;
        if file.models.is_empty() {
            tracing::warn!("catalog file {name} has no [models.\"…\"] table");
        }
        return Ok(CatalogLayer::Overrides(Overrides::from_models(name, &file.models)?));
    }
    let value: Value = serde_json::from_str(text)?;
    let Value::Object(top) = &value else { bail!("expected a JSON object") };
    if looks_like_litellm(top) {
        let mut catalog = from_litellm_json(text)?;
        catalog.set_source(format!("LiteLLM {name}"));
        return Ok(CatalogLayer::Full(catalog));
    }
    if top.contains_key("models") {
        // Parse the text again (not the value) so shape errors carry line and column.
        let file: OverridesFile = serde_json::from_str(text)?;
        return Ok(CatalogLayer::Overrides(Overrides::from_models(name, &file.models)?));
    }
    bail!(
        "neither a LiteLLM model_prices_and_context_window.json (an object of models with \
         `litellm_provider` or `…_cost_per_token` keys) nor an override file ({{\"models\": {{…}}}})"
    )
}

/// LiteLLM's file is an object of objects carrying a provider or per-token prices.
fn looks_like_litellm(top: &Map<String, Value>) -> bool {
    top.values().any(|v| {
        v.as_object().is_some_and(|e| {
            e.contains_key("litellm_provider") || e.keys().any(|k| k.ends_with("cost_per_token"))
        })
    })
}

/// Reads a catalog file into a catalog. A LiteLLM file gives its own entries; an override file
/// gives each named model as the embedded catalog has it with the overrides applied, so merging
/// the result over the embedded catalog changes only the fields the file gives.
pub fn load_file(path: &Path) -> anyhow::Result<Catalog> {
    match load_layer(path)? {
        CatalogLayer::Full(catalog) => Ok(catalog),
        CatalogLayer::Overrides(o) => {
            let embedded = Catalog::embedded();
            let mut base = Catalog::new();
            for id in o.models.keys() {
                if let Some(info) = embedded.get(id) {
                    base.insert(info.clone());
                }
            }
            o.apply(&mut base)?;
            base.set_source(o.source.clone());
            Ok(base)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn litellm_entries_compile() {
        let json = r#"{
            "sample_spec": {"max_input_tokens": "max input tokens", "mode": "one of: chat"},
            "fallback_generalizations": {"rules": []},
            "a-chat": {"litellm_provider": "x", "mode": "chat", "max_input_tokens": 1000.0,
                "max_output_tokens": 10, "input_cost_per_token": 1, "output_cost_per_token": 2e-6,
                "input_cost_per_token_batches": 9, "cache_read_input_token_cost": "oops",
                "input_cost_per_token_above_272k_tokens": 5e-6,
                "input_cost_per_token_above_128k_tokens": 4e-6,
                "output_cost_per_token_above_128k_tokens": 6e-6,
                "cache_creation_input_token_cost_above_1hr_above_128k_tokens": 7e-6,
                "input_cost_per_token_above_128k_tokens_priority": 1},
            "an-embedding": {"mode": "embedding", "input_cost_per_token": 1e-7},
            "no-mode": {"input_cost_per_token": 1e-7},
            "bare": {"mode": "chat"},
            "list": [1, 2]
        }"#;
        let c = from_litellm_json(json).unwrap();
        let ids: Vec<_> = c.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a-chat", "no-mode"]);
        let m = c.get("a-chat").unwrap();
        assert_eq!((m.max_input, m.max_output, m.provider.as_str()), (Some(1000), Some(10), "x"));
        let p = m.prices.as_ref().unwrap();
        assert_eq!((p.input, p.output, p.cache_read), (1.0, 2e-6, None));
        let t = p.tier.as_ref().unwrap();
        assert_eq!((t.threshold, t.prices.input, t.prices.output), (128_000, 4e-6, 6e-6));
        assert_eq!(t.prices.cache_write_1h, Some(7e-6));
        assert_eq!(c.get("no-mode").unwrap().prices.as_ref().unwrap().output, 0.0);
        assert!(from_litellm_json("[]").is_err());
    }

    #[test]
    fn a_users_newer_litellm_file_keeps_the_corrections() {
        // A newer LiteLLM file with Sonnet 4.5 at a new base price and, as in 1.109.1, no
        // long-context tier for the direct id; and a model with a tier of its own.
        let json = r#"{
            "claude-sonnet-4-5": {"litellm_provider": "anthropic", "mode": "chat",
                "max_input_tokens": 200000, "input_cost_per_token": 3.5e-6,
                "output_cost_per_token": 1.6e-5, "cache_read_input_token_cost": 3.5e-7},
            "claude-sonnet-4-5-20250929": {"litellm_provider": "anthropic", "mode": "chat",
                "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
                "input_cost_per_token_above_200k_tokens": 7e-6,
                "output_cost_per_token_above_200k_tokens": 3e-5}
        }"#;
        let layer = parse_layer(json, Path::new("litellm.json")).unwrap();
        assert_eq!(layer.len(), 2, "corrections add no model to a user's file");
        let mut catalog = Catalog::embedded().clone();
        layer.apply(&mut catalog).unwrap();
        let p = catalog.get("claude-sonnet-4-5").unwrap().prices.clone().unwrap();
        // The file's own prices win; the missing tier comes from the corrections.
        assert_eq!((p.input, p.output, p.cache_read), (3.5e-6, 1.6e-5, Some(3.5e-7)));
        let t = p.tier.unwrap();
        assert_eq!((t.threshold, t.prices.input, t.prices.output), (200_000, 6e-6, 2.25e-5));
        assert_eq!(t.prices.cache_write_1h, Some(1.2e-5));
        // A tier the file has is kept as the file has it.
        let p = catalog.get("claude-sonnet-4-5-20250929").unwrap().prices.clone().unwrap();
        let t = p.tier.unwrap();
        assert_eq!((t.prices.input, t.prices.output, t.prices.cache_read), (7e-6, 3e-5, None));
        // Models the file lacks keep the embedded (corrected) entries.
        assert!(
            catalog
                .get("claude-sonnet-4-20250514")
                .unwrap()
                .prices
                .as_ref()
                .unwrap()
                .tier
                .is_some()
        );
    }

    /// A record of `model` in fast mode (and US-only when `us`), 1,000 input and 100 output
    /// tokens, priced with `catalog`.
    fn fast_call(catalog: &Catalog, model: &str, us: bool) -> acp_usage_core::account::Priced {
        let mut rec = acp_usage_core::TokenRecord {
            input: 1_000,
            output: 100,
            model: Some(model.to_owned()),
            ..Default::default()
        };
        rec.modifiers.fast = true;
        rec.modifiers.us_only = us;
        acp_usage_core::account::price_call(&rec, None, 1, catalog)
    }

    #[test]
    fn multipliers_come_from_a_users_litellm_file_and_overrides_before_the_corrections() {
        let standard = 1_000.0 * 3e-6 + 100.0 * 1.5e-5;
        // The corrections know no fast mode for Sonnet 4.5: priced at 1x, not exact.
        let embedded = Catalog::embedded().clone();
        let priced = fast_call(&embedded, "claude-sonnet-4-5", false);
        assert!(priced.modifiers_unpriced);
        assert!((priced.cost.unwrap() - standard).abs() < 1e-12);
        // A newer LiteLLM file states it in provider_specific_entry.
        let json = r#"{"claude-sonnet-4-5": {"litellm_provider": "anthropic", "mode": "chat",
            "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
            "provider_specific_entry": {"us": 1.1, "fast": 2.5}}}"#;
        let mut catalog = Catalog::embedded().clone();
        parse_layer(json, Path::new("litellm.json")).unwrap().apply(&mut catalog).unwrap();
        let m = catalog.get("claude-sonnet-4-5").unwrap().prices.as_ref().unwrap().multipliers;
        assert_eq!((m.fast, m.us_only), (Some(2.5), Some(1.1)));
        let priced = fast_call(&catalog, "claude-sonnet-4-5", true);
        assert!(!priced.modifiers_unpriced);
        assert!((priced.cost.unwrap() - standard * 2.5 * 1.1).abs() < 1e-12);
        // An override file sets one by hand, over the embedded catalog; a file's multiplier
        // wins over the corrections' (Opus 4.6 fast: 6x there).
        let toml = "[models.\"claude-sonnet-4-5\"]\nfast = 2.0\n\
                    [models.\"claude-opus-4-6\"]\nfast = 4.0\n";
        let mut catalog = Catalog::embedded().clone();
        parse_layer(toml, Path::new("o.toml")).unwrap().apply(&mut catalog).unwrap();
        let priced = fast_call(&catalog, "claude-sonnet-4-5", false);
        assert!(!priced.modifiers_unpriced);
        assert!((priced.cost.unwrap() - standard * 2.0).abs() < 1e-12);
        let opus = 1_000.0 * 5e-6 + 100.0 * 2.5e-5;
        assert!(
            (fast_call(&catalog, "claude-opus-4-6", false).cost.unwrap() - opus * 4.0).abs()
                < 1e-12
        );
        assert!(
            (fast_call(&embedded, "claude-opus-4-6", false).cost.unwrap() - opus * 6.0).abs()
                < 1e-12
        );
        // Priority prices in a newer LiteLLM file become one multiplier when they agree.
        let json = r#"{"gpt-9": {"litellm_provider": "openai", "mode": "responses",
            "input_cost_per_token": 2e-6, "output_cost_per_token": 1e-5,
            "cache_read_input_token_cost": 2e-7, "input_cost_per_token_priority": 5e-6,
            "output_cost_per_token_priority": 2.5e-5, "cache_read_input_token_cost_priority": 5e-7},
            "gpt-odd": {"litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": 2e-6, "output_cost_per_token": 1e-5,
            "input_cost_per_token_priority": 4e-6, "output_cost_per_token_priority": 3e-5}}"#;
        let c = from_litellm_json(json).unwrap();
        let of = |id: &str| c.get(id).unwrap().prices.as_ref().unwrap().multipliers.priority;
        assert!(of("gpt-9").is_some_and(|m| (m - 2.5).abs() < 1e-9), "{:?}", of("gpt-9"));
        assert_eq!(of("gpt-odd"), None, "prices that disagree are no one multiplier");
        // A multiplier must be a positive number.
        let err = parse_layer("[models.m]\nfast = 0\n", Path::new("o.toml")).unwrap_err();
        assert!(format!("{err:#}").contains("is not a multiplier"), "{err:#}");
    }

    #[test]
    fn override_errors_name_the_field() {
        let err = parse_layer("[models.m]\nimput = 3.0\n", Path::new("o.toml")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("imput") && msg.contains("line 2"), "{msg}");
        let err = parse_layer("[models.m]\ninput = -3.0\noutput = 1", Path::new("o.toml"));
        let msg = format!("{:#}", err.unwrap_err());
        assert!(msg.contains("models.\"m\".input"), "{msg}");
        let err = parse_layer("{\"models\": {\"m\": {\"window\": \"big\"}}}", Path::new("o.json"));
        let msg = format!("{:#}", err.unwrap_err());
        assert!(msg.contains("line 1"), "{msg}");
        let err = parse_layer("{\"x\": 1}", Path::new("o.json")).unwrap_err();
        assert!(format!("{err:#}").contains("neither"), "{err:#}");
    }
}
