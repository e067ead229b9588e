//! Normalised token records: one definition of every count, whatever the provider's convention.
//!
//! Providers disagree on what "input" means: Anthropic's `input_tokens` excludes cache reads and
//! writes, OpenAI's and Gemini's include cached tokens; Gemini keeps thoughts outside its
//! candidates count while OpenAI's output includes reasoning. A [`TokenRecord`] is always in one
//! shape: `input` counts every prompt-side token and the cache figures are subsets of it; `output`
//! counts every generated token and `thought` is a subset of it.

use std::ops::AddAssign;

/// Where a figure came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// Read from the LLM API's own responses.
    Tap,
    /// Read from the agent's transcript on disk.
    Transcript,
    /// Reported by the agent over ACP.
    Agent,
    /// Counted or guessed from the ACP-visible content.
    Estimate,
    /// A catalog entry or a documented default (only for `size`).
    Catalog,
    /// A documented default, when nothing better is known (only for `size`).
    Default,
}

impl Source {
    /// The wire name used in `_meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Tap => "tap",
            Source::Transcript => "transcript",
            Source::Agent => "agent",
            Source::Estimate => "estimate",
            Source::Catalog => "catalog",
            Source::Default => "default",
        }
    }

    /// Whether a figure from this source is exact rather than estimated.
    pub fn is_exact(self) -> bool {
        matches!(self, Source::Tap | Source::Transcript | Source::Agent | Source::Catalog)
    }
}

/// One model call, normalised.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenRecord {
    /// Every prompt-side token, cache reads and writes included.
    pub input: u64,
    /// Cache reads (subset of `input`).
    pub cache_read: u64,
    /// Cache writes with a 5-minute TTL (subset of `input`).
    pub cache_write_5m: u64,
    /// Cache writes with a 1-hour TTL (subset of `input`).
    pub cache_write_1h: u64,
    /// Every generated token, reasoning included.
    pub output: u64,
    /// Reasoning/thought tokens (subset of `output`).
    pub thought: u64,
    /// The concrete model id, when the source names it.
    pub model: Option<String>,
    /// A cost the provider or agent states for this call, in USD.
    pub stated_cost: Option<f64>,
    /// How the provider billed the request beyond its tokens (fast mode, US-only inference).
    pub modifiers: Modifiers,
}

/// Request-level billing modifiers: each multiplies the price of every token of the call, so
/// they stay on the call (the model is the same model) rather than becoming a model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Modifiers {
    /// Fast mode (Anthropic `usage.speed: "fast"`): 6x on Opus 4.6/4.7, 2x on 4.8.
    pub fast: bool,
    /// US-only inference (Anthropic `usage.inference_geo: "us"`): 1.1x.
    pub us_only: bool,
    /// OpenAI priority processing (the response's `service_tier: "priority"`; Codex's fast
    /// mode asks for it): 2x on most GPT-5 models, 2.5x on GPT-5.5.
    pub priority: bool,
}

/// One request modifier (see [`Modifiers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Modifier {
    Fast,
    UsOnly,
    Priority,
}

impl Modifier {
    pub const ALL: [Modifier; 3] = [Modifier::Fast, Modifier::UsOnly, Modifier::Priority];

    /// The wire and ledger name.
    pub fn name(self) -> &'static str {
        match self {
            Modifier::Fast => "fast",
            Modifier::UsOnly => "us_only",
            Modifier::Priority => "priority",
        }
    }
}

impl Modifiers {
    /// Whether the call carries `m`.
    pub fn has(self, m: Modifier) -> bool {
        match m {
            Modifier::Fast => self.fast,
            Modifier::UsOnly => self.us_only,
            Modifier::Priority => self.priority,
        }
    }

    /// Whether the call was billed at standard rates.
    pub fn is_empty(self) -> bool {
        self == Modifiers::default()
    }

    /// The modifiers' wire names (`fast`, `us_only`, `priority`), in a fixed order.
    pub fn names(self) -> Vec<&'static str> {
        Modifier::ALL.into_iter().filter(|m| self.has(*m)).map(Modifier::name).collect()
    }

    /// The ledger's text form: names joined by commas, `None` for a standard call.
    pub fn to_text(self) -> Option<String> {
        (!self.is_empty()).then(|| self.names().join(","))
    }

    /// Reads [`Modifiers::to_text`]; unknown names (a newer build's) are ignored.
    pub fn from_text(text: &str) -> Modifiers {
        let on = |m: Modifier| text.split(',').any(|name| name.trim() == m.name());
        Modifiers {
            fast: on(Modifier::Fast),
            us_only: on(Modifier::UsOnly),
            priority: on(Modifier::Priority),
        }
    }

    /// Both sets: lines or reports of one call may each carry only some of its modifiers.
    pub fn union(self, other: Modifiers) -> Modifiers {
        Modifiers {
            fast: self.fast || other.fast,
            us_only: self.us_only || other.us_only,
            priority: self.priority || other.priority,
        }
    }

    /// Anthropic's usage object: `speed: "fast"`, `inference_geo: "us"` (an empty or `global`
    /// geo is the standard price).
    pub fn from_anthropic(speed: Option<&str>, inference_geo: Option<&str>) -> Modifiers {
        Modifiers {
            fast: speed.is_some_and(|s| s.eq_ignore_ascii_case("fast")),
            us_only: inference_geo.is_some_and(|g| g.eq_ignore_ascii_case("us")),
            priority: false,
        }
    }

    /// An OpenAI response's `service_tier`: `priority` is billed at the priority rates;
    /// `default`, `auto`, `flex` or none are not modifiers here (flex is cheaper, and no agent
    /// asks for it).
    pub fn from_openai(service_tier: Option<&str>) -> Modifiers {
        Modifiers {
            priority: service_tier.is_some_and(|t| t.eq_ignore_ascii_case("priority")),
            ..Modifiers::default()
        }
    }
}

impl TokenRecord {
    /// Anthropic convention: `input_tokens` excludes cache reads and writes.
    pub fn from_anthropic(
        input_tokens: u64,
        cache_read: u64,
        cache_write_5m: u64,
        cache_write_1h: u64,
        output_tokens: u64,
    ) -> TokenRecord {
        TokenRecord {
            input: input_tokens + cache_read + cache_write_5m + cache_write_1h,
            cache_read,
            cache_write_5m,
            cache_write_1h,
            output: output_tokens,
            ..TokenRecord::default()
        }
    }

    /// OpenAI convention (Chat Completions, Responses, Codex): input includes cached tokens and
    /// output includes reasoning.
    pub fn from_openai(
        input_tokens: u64,
        cached: u64,
        output_tokens: u64,
        reasoning: u64,
    ) -> TokenRecord {
        TokenRecord::from_inclusive(input_tokens, cached, 0, output_tokens, reasoning)
    }

    /// Counts whose totals include their subsets (input with every cache read and write, output
    /// with thoughts), as OpenAI, Copilot CLI and cline record them; writes of unknown TTL count
    /// as 5-minute ones. A subset never exceeds its total, whatever a source reported.
    pub fn from_inclusive(
        input: u64,
        cache_read: u64,
        cache_write: u64,
        output: u64,
        thought: u64,
    ) -> TokenRecord {
        TokenRecord {
            input: input.max(cache_read.saturating_add(cache_write)),
            cache_read,
            cache_write_5m: cache_write,
            output: output.max(thought),
            thought,
            ..TokenRecord::default()
        }
    }

    /// What `self` counts beyond `before`, count by count (never below zero), with `self`'s
    /// model: the growth of a running total, or what one report has that another lacks.
    pub fn beyond(&self, before: &TokenRecord) -> TokenRecord {
        TokenRecord {
            input: self.input.saturating_sub(before.input),
            cache_read: self.cache_read.saturating_sub(before.cache_read),
            cache_write_5m: self.cache_write_5m.saturating_sub(before.cache_write_5m),
            cache_write_1h: self.cache_write_1h.saturating_sub(before.cache_write_1h),
            output: self.output.saturating_sub(before.output),
            thought: self.thought.saturating_sub(before.thought),
            model: self.model.clone(),
            stated_cost: None,
            modifiers: self.modifiers,
        }
    }

    /// Gemini convention: `promptTokenCount` includes cached tokens, `candidatesTokenCount`
    /// excludes thoughts (which are billed as output).
    pub fn from_gemini(prompt: u64, cached: u64, candidates: u64, thoughts: u64) -> TokenRecord {
        TokenRecord {
            input: prompt.max(cached),
            cache_read: cached,
            output: candidates + thoughts,
            thought: thoughts,
            ..TokenRecord::default()
        }
    }

    /// All cache writes, whatever their TTL.
    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }

    /// Input that was neither read from nor written to a cache.
    pub fn uncached_input(&self) -> u64 {
        self.input.saturating_sub(self.cache_read + self.cache_write())
    }

    /// `input + output`, the OpenTelemetry GenAI total.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }

    /// Tokens this call leaves in context for the next request: its prompt plus what it
    /// generated, minus thoughts that providers drop from later requests.
    pub fn context_after(&self) -> u64 {
        self.input + self.output.saturating_sub(self.thought)
    }
}

/// Sums of token records (per turn or per session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenTotals {
    /// Every prompt-side token.
    pub input: u64,
    /// Cache reads (subset of `input`).
    pub cache_read: u64,
    /// Cache writes (subset of `input`).
    pub cache_write: u64,
    /// Every generated token.
    pub output: u64,
    /// Thought tokens (subset of `output`).
    pub thought: u64,
    /// How many model calls were summed.
    pub calls: u64,
}

impl TokenTotals {
    /// `input + output`.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

impl AddAssign<&TokenRecord> for TokenTotals {
    fn add_assign(&mut self, rec: &TokenRecord) {
        self.input += rec.input;
        self.cache_read += rec.cache_read;
        self.cache_write += rec.cache_write();
        self.output += rec.output;
        self.thought += rec.thought;
        self.calls += 1;
    }
}

impl AddAssign<&TokenTotals> for TokenTotals {
    fn add_assign(&mut self, other: &TokenTotals) {
        self.input += other.input;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.output += other.output;
        self.thought += other.thought;
        self.calls += other.calls;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions_agree_on_one_shape() {
        // The research mock's numbers, per provider.
        let a = TokenRecord::from_anthropic(12, 9000, 3000, 0, 7);
        assert_eq!(
            (a.input, a.uncached_input(), a.total(), a.context_after()),
            (12012, 12, 12019, 12019)
        );
        let o = TokenRecord::from_openai(5000, 4096, 40, 16);
        assert_eq!(
            (o.input, o.uncached_input(), o.total(), o.context_after()),
            (5000, 904, 5040, 5024)
        );
        let g = TokenRecord::from_gemini(8000, 6000, 9, 24);
        assert_eq!(
            (g.input, g.uncached_input(), g.output, g.total(), g.context_after()),
            (8000, 2000, 33, 8033, 8009)
        );
    }
}
