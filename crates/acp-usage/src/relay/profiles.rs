//! Agent profiles: how each agent reports usage over ACP, and how to read it right.
//!
//! Each agent has its own conventions and bugs (research/agents-usage.md §2-3):
//! - claude-agent-acp reports per-turn `usage` with Anthropic semantics (input without cache),
//!   a cumulative `cost` only on the update that follows the SDK's `result`, and a `size` that is
//!   a 200k/1M guess until that same update;
//! - codex-acp (zed, Rust) reports `used` per model call (input with cache + output) and a `size`
//!   that is already 95% of the model's window, no cost and no per-turn usage;
//! - gemini-cli reports only `_meta.quota` on the prompt result: per-turn input (with cache) and
//!   output without thoughts;
//! - anything else gets the generic reading of the ACP fields.
//!
//! A profile turns those into ledger events; it never reads the wire itself.

use acp_usage_core::TokenRecord;
use acp_usage_core::estimate::Family;
use acp_usage_core::ledger::{Ledger, TurnReport};
use serde::Deserialize;
use serde_json::Value;

use crate::cli::ProfileArg;

/// The agents acp-usage knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// claude-agent-acp (Claude Code through the Agent SDK).
    Claude,
    /// codex-acp (zed-industries, Rust).
    Codex,
    /// gemini-cli `--acp`.
    Gemini,
    /// Any other agent.
    Generic,
}

/// Claude Code's plain aliases run at 200k; `[1m]` selects the 1M window.
const CLAUDE_WINDOW: u64 = 200_000;
const ONE_MILLION: u64 = 1_000_000;
/// gemini-cli's `tokenLimit()` for every Gemini 2.5/3 model.
const GEMINI_WINDOW: u64 = 1_048_576;

/// The agent's `usage_update` fields, as far as a profile reads them.
#[derive(Debug, Default, Deserialize)]
pub struct AgentUpdate {
    /// Tokens in context, by the agent's definition.
    #[serde(default)]
    pub used: Option<u64>,
    /// The agent's window.
    #[serde(default)]
    pub size: Option<u64>,
    /// The agent's cost.
    #[serde(default)]
    pub cost: Option<CostView>,
}

/// A `cost` object.
#[derive(Debug, Default, Deserialize)]
pub struct CostView {
    /// The amount.
    #[serde(default)]
    pub amount: Option<f64>,
    /// Its unit.
    #[serde(default)]
    pub currency: Option<String>,
}

/// An ACP `Usage` object as agents send it (they disagree on whether input includes cache).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AcpUsage {
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    thought_tokens: Option<u64>,
    #[serde(default)]
    cached_read_tokens: Option<u64>,
    #[serde(default)]
    cached_write_tokens: Option<u64>,
}

impl Profile {
    /// The profile forced by `--profile`, if any.
    pub fn forced(arg: ProfileArg) -> Option<Profile> {
        match arg {
            ProfileArg::Auto => None,
            ProfileArg::Claude => Some(Profile::Claude),
            ProfileArg::Codex => Some(Profile::Codex),
            ProfileArg::Gemini => Some(Profile::Gemini),
            ProfileArg::Generic => Some(Profile::Generic),
        }
    }

    /// Recognises the agent from `initialize`'s `agentInfo.name`, else from its command line.
    pub fn detect(agent_name: Option<&str>, command: &[String]) -> Profile {
        let by_name = |s: &str| {
            let s = s.to_ascii_lowercase();
            if s.contains("claude") {
                Some(Profile::Claude)
            } else if s.contains("codex") {
                Some(Profile::Codex)
            } else if s.contains("gemini") {
                Some(Profile::Gemini)
            } else {
                None
            }
        };
        if let Some(p) = agent_name.and_then(by_name) {
            return p;
        }
        command
            .iter()
            .filter_map(|arg| {
                let base = arg.rsplit('/').next().unwrap_or(arg);
                by_name(base)
            })
            .next()
            .unwrap_or(Profile::Generic)
    }

    /// The profile's name in logs and `_meta`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Claude => "claude",
            Profile::Codex => "codex",
            Profile::Gemini => "gemini",
            Profile::Generic => "generic",
        }
    }

    /// The share of a catalog window the agent lets the model use.
    pub fn window_percent(self) -> u64 {
        match self {
            // Codex's `effective_context_window_percent`.
            Profile::Codex => 95,
            _ => 100,
        }
    }

    /// The tokenizer family to estimate with when the model is unknown.
    pub fn default_family(self) -> Family {
        match self {
            Profile::Claude => Family::Anthropic,
            Profile::Codex => Family::OpenAi,
            Profile::Gemini => Family::Gemini,
            Profile::Generic => Family::Other,
        }
    }

    /// Maps a selected model option value to a catalog id and the window the agent's alias
    /// rules give it.
    pub fn resolve_model(self, value: &str) -> (Option<String>, Option<u64>) {
        let (base, bracket) = split_bracket(value);
        match self {
            Profile::Claude => {
                let window = if bracket.is_some_and(|b| b.eq_ignore_ascii_case("1m")) {
                    ONE_MILLION
                } else {
                    CLAUDE_WINDOW
                };
                // Plain aliases name a family whose concrete version the agent picks; the
                // catalog id only guides estimation until a call shows the real model.
                let id = match base {
                    "default" => None,
                    "opus" => Some("claude-opus-4-8".to_string()),
                    "sonnet" => Some("claude-sonnet-4-6".to_string()),
                    "haiku" => Some("claude-haiku-4-5".to_string()),
                    other => Some(other.to_string()),
                };
                let window =
                    if base == "default" && bracket.is_none() { None } else { Some(window) };
                (id, window)
            }
            Profile::Codex => {
                // `gpt-5.2-codex`, legacy `gpt-5.2-codex/medium`, TS `gpt-5.2-codex[medium]`.
                let id = base.split('/').next().unwrap_or(base);
                (Some(id.to_string()), None)
            }
            Profile::Gemini => {
                if base.starts_with("auto") {
                    (None, Some(GEMINI_WINDOW))
                } else if base.starts_with("gemini") {
                    (Some(base.to_string()), Some(GEMINI_WINDOW))
                } else {
                    (Some(base.to_string()), None)
                }
            }
            Profile::Generic => {
                // opencode-style `provider/model[/variant]`: the model is the second part.
                let mut parts = base.split('/');
                let first = parts.next().unwrap_or(base);
                let id = parts.next().unwrap_or(first);
                (Some(id.to_string()), None)
            }
        }
    }

    /// Reads the agent's own `usage_update` into the ledger.
    pub fn on_usage_update(self, ledger: &mut Ledger, update: &AgentUpdate) {
        let usd = update
            .cost
            .as_ref()
            .filter(|c| c.currency.as_deref().is_none_or(|cur| cur.eq_ignore_ascii_case("USD")))
            .and_then(|c| c.amount);
        match self {
            Profile::Claude => {
                // Only the update after the SDK's `result` carries cost, and only its size is
                // the agent's real window; earlier ones guess 200k or 1M from the model name.
                if let Some(used) = update.used {
                    ledger.agent_used(used, true);
                }
                if let Some(amount) = usd {
                    ledger.agent_cost(amount);
                    if let Some(size) = update.size {
                        ledger.agent_window(size);
                    }
                }
            }
            Profile::Codex | Profile::Generic | Profile::Gemini => {
                if let Some(used) = update.used {
                    // Codex's `used` is the call's total, hidden reasoning included, which later
                    // requests drop; other agents' definitions are unknown. Both stay the
                    // agent's figure, not claimed exact.
                    ledger.agent_used(used, false);
                }
                if let Some(size) = update.size {
                    ledger.agent_window(size);
                }
                if let Some(amount) = usd {
                    ledger.agent_cost(amount);
                }
            }
        }
    }

    /// Reads the agent's per-turn report from a `session/prompt` result.
    pub fn on_prompt_result(self, ledger: &mut Ledger, result: &Value) {
        if let Some(usage) = result.get("usage").filter(|u| u.is_object()) {
            // claude-agent-acp's per-turn usage is the main loop's sum; codex-acp (TS) reports
            // only the last response, which is not a turn's usage, so it is not read as one.
            if self != Profile::Codex
                && let Ok(u) = serde_json::from_value::<AcpUsage>(usage.clone())
                && let Some(rec) = acp_usage_record(&u)
            {
                ledger.agent_turn(rec, TurnReport::Complete, None);
                return;
            }
        }
        if let Some(quota) = result.pointer("/_meta/quota") {
            self.on_quota(ledger, quota);
        }
    }

    /// gemini-cli's (and codex-acp TS's) `_meta.quota`: per-turn input (cache included) and
    /// output without thoughts.
    fn on_quota(self, ledger: &mut Ledger, quota: &Value) {
        let count = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
        let Some(tc) = quota.get("token_count") else { return };
        let (Some(input), Some(output)) = (count(tc, "input_tokens"), count(tc, "output_tokens"))
        else {
            return;
        };
        let model = quota
            .pointer("/model_usage")
            .and_then(Value::as_array)
            .and_then(|models| models.last())
            .and_then(|m| m.get("model"))
            .and_then(Value::as_str);
        let mut rec = TokenRecord::from_gemini(input, 0, output, 0);
        rec.model = model.map(str::to_string);
        if input + output == 0 {
            // Local slash commands report zeros: no model call happened.
            return;
        }
        ledger.agent_turn(rec, TurnReport::WithoutCacheAndThoughts, None);
    }
}

/// An ACP `Usage` as agents fill it: when `totalTokens` is the sum of all four counts, input
/// excluded the cache (Anthropic style, claude-agent-acp and opencode); when it is input +
/// output, input already included it (OpenAI/Gemini style).
fn acp_usage_record(u: &AcpUsage) -> Option<TokenRecord> {
    let input = u.input_tokens?;
    let output = u.output_tokens?;
    let read = u.cached_read_tokens.unwrap_or(0);
    let write = u.cached_write_tokens.unwrap_or(0);
    let total = u.total_tokens.unwrap_or(input + output + read + write);
    let mut rec = if total == input + output && read + write <= input && read + write > 0 {
        TokenRecord {
            input,
            cache_read: read,
            cache_write_5m: write,
            output,
            ..TokenRecord::default()
        }
    } else {
        TokenRecord::from_anthropic(input, read, write, 0, output)
    };
    rec.thought = u.thought_tokens.unwrap_or(0).min(rec.output);
    Some(rec)
}

/// Splits `name[suffix]` into the name and the suffix.
fn split_bracket(value: &str) -> (&str, Option<&str>) {
    match value.strip_suffix(']').and_then(|v| v.split_once('[')) {
        Some((base, inner)) => (base, Some(inner)),
        None => (value, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection() {
        let cmd = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            Profile::detect(Some("@agentclientprotocol/claude-agent-acp"), &[]),
            Profile::Claude
        );
        assert_eq!(Profile::detect(Some("codex-acp"), &[]), Profile::Codex);
        assert_eq!(Profile::detect(Some("gemini-cli"), &[]), Profile::Gemini);
        assert_eq!(
            Profile::detect(None, &cmd("/x/node_modules/.bin/gemini --acp")),
            Profile::Gemini
        );
        assert_eq!(Profile::detect(Some("my-agent"), &cmd("npx my-agent")), Profile::Generic);
    }

    #[test]
    fn model_aliases() {
        assert_eq!(Profile::Claude.resolve_model("default"), (None, None));
        assert_eq!(
            Profile::Claude.resolve_model("opus[1m]"),
            (Some("claude-opus-4-8".into()), Some(1_000_000))
        );
        assert_eq!(
            Profile::Claude.resolve_model("sonnet"),
            (Some("claude-sonnet-4-6".into()), Some(200_000))
        );
        assert_eq!(
            Profile::Codex.resolve_model("gpt-5.2-codex/medium"),
            (Some("gpt-5.2-codex".into()), None)
        );
        assert_eq!(
            Profile::Codex.resolve_model("gpt-5.2-codex[medium]"),
            (Some("gpt-5.2-codex".into()), None)
        );
        assert_eq!(
            Profile::Gemini.resolve_model("gemini-2.5-pro"),
            (Some("gemini-2.5-pro".into()), Some(1_048_576))
        );
        assert_eq!(
            Profile::Generic.resolve_model("anthropic/claude-sonnet-4-5"),
            (Some("claude-sonnet-4-5".into()), None)
        );
    }

    #[test]
    fn acp_usage_conventions() {
        // claude-agent-acp: total = all four.
        let claude = AcpUsage {
            total_tokens: Some(12019),
            input_tokens: Some(12),
            output_tokens: Some(7),
            cached_read_tokens: Some(9000),
            cached_write_tokens: Some(3000),
            ..AcpUsage::default()
        };
        let r = acp_usage_record(&claude).unwrap();
        assert_eq!((r.input, r.cache_read, r.cache_write_5m, r.output), (12012, 9000, 3000, 7));
        // OpenAI style: total = input + output, cache inside input.
        let openai = AcpUsage {
            total_tokens: Some(5040),
            input_tokens: Some(5000),
            output_tokens: Some(40),
            cached_read_tokens: Some(4096),
            thought_tokens: Some(16),
            ..AcpUsage::default()
        };
        let r = acp_usage_record(&openai).unwrap();
        assert_eq!((r.input, r.cache_read, r.output, r.thought), (5000, 4096, 40, 16));
    }
}
