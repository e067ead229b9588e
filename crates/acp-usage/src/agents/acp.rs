//! The ACP fields agents report usage in, and the readings several agents share: the generic
//! reading of `usage_update` and of a prompt result's `usage` and `_meta.quota`.
//!
//! A profile turns what an agent reports into events of the session's account; it never reads
//! the wire itself.

use acp_usage_core::TokenRecord;
use acp_usage_core::account::{Account, TurnReport};
use serde::Deserialize;
use serde_json::Value;

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
    /// The agent's `_meta`, as far as a profile reads it.
    #[serde(default, rename = "_meta")]
    pub meta: Option<UpdateMeta>,
}

impl AgentUpdate {
    /// The cost in USD, when the agent stated one (no currency is taken as USD).
    pub fn usd(&self) -> Option<f64> {
        self.cost
            .as_ref()
            .filter(|c| c.currency.as_deref().is_none_or(|cur| cur.eq_ignore_ascii_case("USD")))
            .and_then(|c| c.amount)
    }
}

/// What profiles read of an agent's `usage_update._meta`.
#[derive(Debug, Default, Deserialize)]
pub struct UpdateMeta {
    /// claude-agent-acp (0.100+): the concrete model of the call the update is about.
    #[serde(default, rename = "_claude/model")]
    pub claude_model: Option<String>,
    /// Mistral Vibe: the session's cumulative prompt tokens (cache included).
    #[serde(default, rename = "promptTokens")]
    pub prompt_tokens: Option<u64>,
    /// Mistral Vibe: the session's cumulative completion tokens.
    #[serde(default, rename = "completionTokens")]
    pub completion_tokens: Option<u64>,
    /// Mistral Vibe: the session's cumulative cached prompt tokens.
    #[serde(default, rename = "cachedTokens")]
    pub cached_tokens: Option<u64>,
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
pub struct AcpUsage {
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub thought_tokens: Option<u64>,
    #[serde(default)]
    pub cached_read_tokens: Option<u64>,
    #[serde(default)]
    pub cached_write_tokens: Option<u64>,
}

impl AcpUsage {
    /// The `usage` object of a prompt result, when it has one.
    pub fn of_result(result: &Value) -> Option<AcpUsage> {
        let usage = result.get("usage").filter(|u| u.is_object())?;
        serde_json::from_value(usage.clone()).ok()
    }
}

/// The generic reading of an agent's `usage_update`: `used` as the agent's figure (not claimed
/// exact: agents define it differently), `size` as a window the agent reports (or, with
/// `enforced`, one it enforces), `cost` as the agent's stated cost.
pub fn plain_usage_update(account: &mut Account, update: &AgentUpdate, enforced: bool) {
    if let Some(used) = update.used {
        account.agent_used(used, false);
    }
    match update.size {
        Some(size) if enforced => account.agent_window(size),
        Some(size) => account.reported_window(size),
        None => {}
    }
    if let Some(amount) = update.usd() {
        account.agent_cost(amount);
    }
}

/// Reads a prompt result's per-turn `usage` as the turn's complete usage; false when it has
/// none.
pub fn prompt_usage(account: &mut Account, result: &Value) -> bool {
    let Some(rec) = AcpUsage::of_result(result).as_ref().and_then(acp_usage_record) else {
        return false;
    };
    account.agent_turn(rec, TurnReport::Complete, None);
    true
}

/// Reads a prompt result's `usage` as the agent's cumulative count (Copilot's since the session
/// was opened in its process, Mistral Vibe's over the session): the turn is what it grew by.
/// Without one, `_meta.quota`.
pub fn cumulative_prompt_usage(account: &mut Account, result: &Value) {
    match AcpUsage::of_result(result).as_ref().and_then(acp_usage_record) {
        Some(rec) => account.agent_cumulative_turn(rec),
        None => quota(account, result),
    }
}

/// gemini-cli's (and codex-acp TS's) `_meta.quota`: per-turn input (cache included) and
/// output without thoughts.
pub fn quota(account: &mut Account, result: &Value) {
    let Some(quota) = result.pointer("/_meta/quota") else { return };
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
    account.agent_turn(rec, TurnReport::WithoutCacheAndThoughts, None);
}

/// The windows a `session/new`-like result gives per model in `models.availableModels[]`'s
/// `_meta.contextLimit` (qwen-code's), by model id.
pub fn context_limits(result: &Value) -> Vec<(String, u64)> {
    let models = result.pointer("/models/availableModels").and_then(Value::as_array);
    models
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let id = m.get("modelId")?.as_str()?;
            let limit = m.pointer("/_meta/contextLimit")?.as_u64()?;
            Some((id.to_string(), limit))
        })
        .collect()
}

/// An ACP `Usage` as agents fill it: when `totalTokens` is the sum of all four counts, input
/// excluded the cache (Anthropic style, claude-agent-acp and opencode); when it is input +
/// output, input already included it (OpenAI/Gemini style).
pub fn acp_usage_record(u: &AcpUsage) -> Option<TokenRecord> {
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
pub fn split_bracket(value: &str) -> (&str, Option<&str>) {
    match value.strip_suffix(']').and_then(|v| v.split_once('[')) {
        Some((base, inner)) => (base, Some(inner)),
        None => (value, None),
    }
}
