//! Model catalog: context windows and prices per model, compiled from LiteLLM's JSON.
//! (Interface stub; the full implementation replaces this file.)

/// Prices in USD per token for one model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output (reasoning included).
    pub output: f64,
    /// Cache read; `None` means "priced as input".
    pub cache_read: Option<f64>,
    /// 5-minute cache write; `None` means "priced as input".
    pub cache_write_5m: Option<f64>,
    /// 1-hour cache write; `None` means "priced as the 5-minute write".
    pub cache_write_1h: Option<f64>,
    /// Long-context tier: the whole request at these prices once its prompt passes the threshold.
    pub tier: Option<Tier>,
}

/// A request-level long-context price tier.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tier {
    /// Prompt size (all input tokens, cache included) above which the tier applies (strict `>`).
    pub threshold: u64,
    /// Tier prices; missing cache prices fall back like the base prices do.
    pub prices: Box<Prices>,
}

/// What the catalog knows about one model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    /// Catalog key, e.g. `claude-sonnet-4-5` or `gemini/gemini-2.5-pro`.
    pub id: String,
    /// LiteLLM provider, e.g. `anthropic`.
    pub provider: String,
    /// Input context window in tokens.
    pub max_input: Option<u64>,
    /// Maximum output tokens.
    pub max_output: Option<u64>,
    /// Prices, when the catalog has them.
    pub prices: Option<Prices>,
}

/// A set of models, looked up by (normalised) id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    models: Vec<ModelInfo>,
}

impl Catalog {
    /// Looks a model id up, tolerating provider prefixes, `[1m]` and date suffixes.
    pub fn lookup(&self, model: &str) -> Option<&ModelInfo> {
        self.models.iter().find(|m| m.id == model)
    }
}
