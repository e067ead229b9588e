//! Token estimates for content that no source counted.
//!
//! OpenAI models get a real count with the o200k tokenizer (exact for plain text; it cannot see
//! role and tool-definition framing). Other families have no public local tokenizer, so they
//! get a bytes-per-token rule: o200k-style vocabularies average about 4 UTF-8 bytes per token
//! across English, code, Cyrillic and CJK (research/pricing-and-tokens.md §4), and the family
//! factor scales that for tokenizers known to be denser. Every figure built from these counts
//! is marked `estimate`.

use std::sync::OnceLock;

/// A tokenizer family, chosen from the model id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// GPT-4o/5.x, o-series, Codex: o200k.
    OpenAi,
    /// Claude: no local tokenizer; denser than o200k (Opus 4.7+ up to 1.35x).
    Anthropic,
    /// Gemini: Google documents about 4 characters per token.
    Gemini,
    /// Anything else.
    Other,
}

impl Family {
    /// The family of a model id (`None`: unknown model).
    pub fn of(model: Option<&str>) -> Family {
        let Some(model) = model else { return Family::Other };
        let m = model.to_ascii_lowercase();
        let bare = m.rsplit('/').next().unwrap_or(&m);
        if bare.starts_with("gpt-") || bare.starts_with("codex") || is_o_series(bare) {
            Family::OpenAi
        } else if bare.starts_with("claude")
            || matches!(bare, "opus" | "sonnet" | "haiku" | "default")
        {
            Family::Anthropic
        } else if bare.starts_with("gemini") || bare.starts_with("gemma") {
            Family::Gemini
        } else {
            Family::Other
        }
    }

    /// Tokens per 4 bytes, in percent, for the bytes-per-token rule.
    fn factor_percent(self) -> u64 {
        match self {
            Family::OpenAi => 100,
            // Claude's tokenizers produce 1.0-1.35x the tokens of o200k; take the middle.
            Family::Anthropic => 120,
            Family::Gemini => 100,
            Family::Other => 110,
        }
    }
}

fn is_o_series(m: &str) -> bool {
    let mut chars = m.chars();
    chars.next() == Some('o') && chars.next().is_some_and(|c| c.is_ascii_digit())
}

/// Estimated tokens of `text` for a model of `family`.
pub fn count(text: &str, family: Family) -> u64 {
    if text.is_empty() {
        return 0;
    }
    match family {
        Family::OpenAi => o200k().encode_ordinary(text).len() as u64,
        _ => by_bytes(text.len() as u64, family),
    }
}

/// The bytes-per-token rule: `ceil(bytes / 4 * factor)`.
pub fn by_bytes(bytes: u64, family: Family) -> u64 {
    (bytes * family.factor_percent()).div_ceil(400)
}

fn o200k() -> &'static tiktoken_rs::CoreBPE {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    // The vocabulary is embedded in the binary: building it cannot fail at run time.
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("embedded o200k vocabulary"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(Family::of(Some("gpt-5.2-codex")), Family::OpenAi);
        assert_eq!(Family::of(Some("openai/o4-mini")), Family::OpenAi);
        assert_eq!(Family::of(Some("claude-opus-4-8[1m]")), Family::Anthropic);
        assert_eq!(Family::of(Some("sonnet")), Family::Anthropic);
        assert_eq!(Family::of(Some("gemini-2.5-pro")), Family::Gemini);
        assert_eq!(Family::of(Some("qwen3-coder")), Family::Other);
        assert_eq!(Family::of(None), Family::Other);
    }

    #[test]
    fn counts() {
        assert_eq!(count("", Family::OpenAi), 0);
        assert_eq!(count("Hello from mock.", Family::OpenAi), 4);
        // 16 bytes: 4 tokens at 4 bytes/token, 4.8 -> 5 for Claude.
        assert_eq!(count("Hello from mock.", Family::Gemini), 4);
        assert_eq!(count("Hello from mock.", Family::Anthropic), 5);
        assert_eq!(by_bytes(1, Family::Gemini), 1);
    }
}
