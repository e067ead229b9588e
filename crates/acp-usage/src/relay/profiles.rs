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
//! - opencode (1.18) reports one `usage_update` per turn whose `used` leaves the last call's
//!   output out, whose `size` is copied from models.dev (1,000,000 for claude-sonnet-4-5, which
//!   the API runs at 200,000) and whose `cost` is the sum over the session's stored main-agent
//!   messages (subagents and title calls left out); its per-turn `usage` is the last model
//!   call's, not the turn's sum;
//! - qwen-code (0.24) reports each model call's exact usage on an empty `agent_message_chunk`
//!   (`_meta.usage`: input with the cache, output with thoughts; subagent calls tagged with
//!   `parentToolCallId`), a `usage_update` per call whose `used` leaves the output out and whose
//!   `size` is the model's `contextLimit` (also in `session/new`'s model list), no cost, no
//!   per-turn `usage`; its model ids look like `$runtime|openai|gpt-5.2(openai)`;
//! - Copilot CLI (1.0) sends a `usage_update` before each model call whose `used` is its own
//!   estimate of the prompt it is about to send and whose `size` is the prompt limit it applies
//!   (`maxPromptTokens`, e.g. 168,000 for claude-sonnet-4.5), no cost, and a `usage` in the
//!   prompt result that is cumulative since the session was created or loaded in the process;
//!   its `events.jsonl` records every call;
//! - cline (3.0) sends no usage at all; its model option is the concrete model id; its
//!   `messages.json` (one JSON document it rewrites whole) records every call;
//! - anything else gets the generic reading of the ACP fields.
//!
//! A profile turns those into ledger events; it never reads the wire itself.

use acp_usage_core::TokenRecord;
use acp_usage_core::estimate::Family;
use acp_usage_core::ledger::{Ledger, Role, TurnReport};
use serde::Deserialize;
use serde_json::Value;

/// The agents acp-usage knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// claude-agent-acp (Claude Code through the Agent SDK).
    Claude,
    /// codex-acp (zed-industries, Rust).
    Codex,
    /// gemini-cli `--acp`.
    Gemini,
    /// opencode `acp` (npm `opencode-ai`).
    Opencode,
    /// qwen-code `qwen --acp` (npm `@qwen-code/qwen-code`).
    Qwen,
    /// GitHub Copilot CLI `copilot --acp` (npm `@github/copilot`).
    Copilot,
    /// cline `cline --acp` (npm `cline`).
    Cline,
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
    /// The agent's `_meta`, as far as a profile reads it.
    #[serde(default, rename = "_meta")]
    pub meta: Option<UpdateMeta>,
}

/// What profiles read of an agent's `usage_update._meta`.
#[derive(Debug, Default, Deserialize)]
pub struct UpdateMeta {
    /// claude-agent-acp (0.100+): the concrete model of the call the update is about.
    #[serde(default, rename = "_claude/model")]
    pub claude_model: Option<String>,
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
            } else if s.contains("opencode") {
                // agentInfo.name is "OpenCode"; the command is `opencode acp`.
                Some(Profile::Opencode)
            } else if s.contains("qwen") {
                // agentInfo.name is "qwen-code"; the command is `qwen --acp`.
                Some(Profile::Qwen)
            } else if s.contains("copilot") {
                // agentInfo.name is "Copilot"; the command is `copilot --acp`.
                Some(Profile::Copilot)
            } else if s == "cline" || s.starts_with("cline-") || s.starts_with("cline ") {
                Some(Profile::Cline)
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

    /// The profile the command line suggests before the agent has said its name (the tap must
    /// point the agent before it starts): like [`Profile::detect`], then any path segment of
    /// the command (`node .../codex-acp/dist/index.js`).
    pub fn detect_before_start(command: &[String]) -> Profile {
        match Profile::detect(None, command) {
            Profile::Generic => {
                let segments: Vec<String> =
                    command.iter().flat_map(|a| a.split('/')).map(str::to_owned).collect();
                Profile::detect(None, &segments)
            }
            p => p,
        }
    }

    /// The profile's name in logs and `_meta`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Claude => "claude",
            Profile::Codex => "codex",
            Profile::Gemini => "gemini",
            Profile::Opencode => "opencode",
            Profile::Qwen => "qwen",
            Profile::Copilot => "copilot",
            Profile::Cline => "cline",
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
            Profile::Qwen => Family::OpenAi,
            Profile::Opencode | Profile::Generic | Profile::Copilot | Profile::Cline => {
                Family::Other
            }
        }
    }

    /// Maps a selected model option value to a catalog id and the window the agent's alias
    /// rules give it.
    pub fn resolve_model(self, value: &str) -> (Option<String>, Option<u64>) {
        let (base, bracket) = split_bracket(value);
        match self {
            Profile::Claude => {
                // Plain aliases name a family whose concrete version the agent picks; the
                // catalog id only guides estimation until a call shows the real model.
                let id = match base {
                    "default" => None,
                    "opus" => Some("claude-opus-4-8".to_string()),
                    "sonnet" => Some("claude-sonnet-4-6".to_string()),
                    "haiku" => Some("claude-haiku-4-5".to_string()),
                    other => Some(other.to_string()),
                };
                let window = claude_window(id.as_deref(), is_one_m(bracket));
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
            Profile::Opencode => {
                // `providerID/modelID[/variant]`. opencode's own window for it is a models.dev
                // copy, so none is given here: the catalog's entry decides.
                (Some(opencode_model_id(base).to_string()), None)
            }
            Profile::Qwen => (Some(qwen_model_id(base).to_string()), None),
            // Copilot names no model over ACP; cline's option values are model ids.
            Profile::Copilot | Profile::Cline => (Some(base.to_string()), None),
            Profile::Generic => {
                // opencode-style `provider/model[/variant]`: the model is the second part.
                let mut parts = base.split('/');
                let first = parts.next().unwrap_or(base);
                let id = parts.next().unwrap_or(first);
                (Some(id.to_string()), None)
            }
        }
    }

    /// Like [`Profile::resolve_model`], with the model option the value was selected from (its
    /// `options` with their names and descriptions), which can name the concrete model behind
    /// an alias: claude-agent-acp lists `default` with the description "Opus" beside the option
    /// `opus` named "Opus 5.5".
    pub fn resolve_option(self, value: &str, option: &Value) -> (Option<String>, Option<u64>) {
        if self == Profile::Claude
            && let Some((id, one_m)) = claude_concrete(value, option)
        {
            let window = claude_window(Some(&id), one_m || is_one_m(split_bracket(value).1));
            return (Some(id), window);
        }
        self.resolve_model(value)
    }

    /// The windows the agent reports per model in a `session/new`/`load`/`resume` result, when
    /// its profile knows where (qwen-code: each model's `_meta.contextLimit` in `models`), by
    /// model option value.
    pub fn reported_windows(self, result: &Value) -> Vec<(String, u64)> {
        if !matches!(self, Profile::Qwen | Profile::Generic) {
            return Vec::new();
        }
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

    /// A model call the agent reports inside an `agent_message_chunk` (qwen-code's
    /// `_meta.usage`), with who made it. `params` is the notification's raw `params`.
    pub fn call_in_chunk(self, params: &str) -> Option<(TokenRecord, Role)> {
        if self != Profile::Qwen || !params.contains("\"usage\"") {
            return None;
        }
        #[derive(Deserialize)]
        struct Params {
            update: Update,
        }
        #[derive(Deserialize)]
        struct Update {
            #[serde(rename = "_meta")]
            meta: Option<Meta>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            usage: Option<AcpUsage>,
            parent_tool_call_id: Option<Value>,
        }
        let meta = serde_json::from_str::<Params>(params).ok()?.update.meta?;
        let u = meta.usage?;
        let (input, output) = (u.input_tokens?, u.output_tokens?);
        // OpenAI style: the cache is inside the input, thoughts inside the output.
        let rec = TokenRecord::from_openai(
            input,
            u.cached_read_tokens.unwrap_or(0),
            output,
            u.thought_tokens.unwrap_or(0),
        );
        let role = if meta.parent_tool_call_id.is_some() { Role::Subagent } else { Role::Main };
        Some((rec, role))
    }

    /// Side calls the agent is known to make that no source acp-usage reads records (until the
    /// LLM-API tap): the cost leaves them out, and `_meta` says so.
    pub fn unrecorded_side_calls(self, agent_name: Option<&str>) -> &'static [&'static str] {
        match self {
            // The TypeScript adapter's Codex app server titles each session with another model;
            // the zed adapter makes no such call.
            Profile::Codex if agent_name.is_some_and(|n| n.starts_with("@agentclientprotocol")) => {
                &["session title"]
            }
            Profile::Opencode => &["session title"],
            Profile::Qwen => &["memory extraction", "prompt suggestion"],
            _ => &[],
        }
    }

    /// Whether a request body is one of the side calls the agent makes for itself while
    /// declaring its main tools (to share the prompt cache), by the text it always carries.
    pub fn is_side_call(self, body: &[u8]) -> bool {
        let markers: &[&str] = match self {
            // Claude Code's prompt suggestion after a turn.
            Profile::Claude => &["Reply with ONLY the suggestion"],
            // qwen-code's prompt suggestion and memory extraction.
            Profile::Qwen => &["[SUGGESTION MODE", "memory extraction subagent"],
            _ => &[],
        };
        markers.iter().any(|m| memchr::memmem::find(body, m.as_bytes()).is_some())
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
                // the window Claude Code enforces (`modelUsage.contextWindow`); the streamed
                // ones report a window it seeded from a cache, `getContextUsage` or the model
                // name: a report, which beats acp-usage's guesses but not the catalog entry of
                // the concrete model the update names.
                if let Some(used) = update.used {
                    ledger.agent_used(used, true);
                }
                if let Some(model) = update.meta.as_ref().and_then(|m| m.claude_model.as_deref()) {
                    ledger.model_seen(split_bracket(model).0);
                }
                match (usd, update.size) {
                    (Some(amount), size) => {
                        ledger.agent_cost(amount);
                        if let Some(size) = size {
                            ledger.agent_window(size);
                        }
                    }
                    (None, Some(size)) => ledger.reported_window(size),
                    (None, None) => {}
                }
            }
            Profile::Opencode => {
                // `size` is models.dev's figure, not a window opencode enforces (it sends no 1M
                // beta header): left to the catalog. `used` is the last call's prompt without
                // its output; inside a turn the prompt result follows at once with that call's
                // counts, which give the exact figure, so only a stray update outside a turn
                // is read (and marked inexact). `cost` covers the session's stored main-agent
                // messages (a reloaded session included), priced by opencode's table.
                if let Some(used) = update.used.filter(|_| !ledger.in_turn()) {
                    ledger.agent_used(used, false);
                }
                if let Some(amount) = usd {
                    ledger.agent_cost(amount);
                }
            }
            Profile::Copilot | Profile::Qwen => {
                // `used` is a prompt without its output (qwen: the call's; Copilot: its own
                // estimate of the one it is about to send); inside a turn the calls' own records
                // give the exact figure, so only a stray update is read. Copilot's `size` is the
                // prompt limit it applies to the model; qwen's the model's `contextLimit`.
                if let Some(used) = update.used.filter(|_| !ledger.in_turn()) {
                    ledger.agent_used(used, false);
                }
                match (self, update.size) {
                    (Profile::Copilot, Some(size)) => ledger.agent_window(size),
                    (_, Some(size)) => ledger.reported_window(size),
                    (_, None) => {}
                }
            }
            Profile::Codex | Profile::Generic | Profile::Gemini | Profile::Cline => {
                if let Some(used) = update.used {
                    // Codex's `used` is the call's total, hidden reasoning included, which later
                    // requests drop; other agents' definitions are unknown. Both stay the
                    // agent's figure, not claimed exact.
                    ledger.agent_used(used, false);
                }
                match (self, update.size) {
                    // Codex's `model_context_window` is the share of the window it lets the
                    // model fill: enforced.
                    (Profile::Codex, Some(size)) => ledger.agent_window(size),
                    (_, Some(size)) => ledger.reported_window(size),
                    (_, None) => {}
                }
                if let Some(amount) = usd {
                    ledger.agent_cost(amount);
                }
            }
        }
    }

    /// Reads the agent's per-turn report from a `session/prompt` result.
    pub fn on_prompt_result(self, ledger: &mut Ledger, result: &Value) {
        if self == Profile::Opencode {
            opencode_prompt_result(ledger, result);
            return;
        }
        if self == Profile::Claude
            && let Some(rows) = result.pointer("/_meta/quota/model_usage").and_then(Value::as_array)
        {
            // Claude Code's `modelUsage` increment of the turn, by model: every call of the
            // turn, its title and suggestion calls included, which its transcript leaves out.
            ledger.agent_turn_models(rows.iter().filter_map(claude_model_row).collect());
        }
        if let Some(usage) = result.get("usage").filter(|u| u.is_object()) {
            // claude-agent-acp's per-turn usage is the main loop's sum, so is codex-acp 2.6's
            // (TypeScript; the zed adapter sends none). Copilot's counts everything since the
            // session was opened in the process: the turn is what it grew by.
            if let Ok(u) = serde_json::from_value::<AcpUsage>(usage.clone())
                && let Some(rec) = acp_usage_record(&u)
            {
                match self {
                    Profile::Copilot => ledger.agent_cumulative_turn(rec),
                    _ => ledger.agent_turn(rec, TurnReport::Complete, None),
                }
                return;
            }
        }
        if let Some(quota) = result.pointer("/_meta/quota") {
            self.on_quota(ledger, quota);
        }
    }

    /// The prompt tokens the agent says its main agent sent in the turn, when it says (gemini-cli's
    /// `_meta.quota`): a transcript that shows fewer is not complete yet.
    pub fn reported_turn_input(self, result: &Value) -> Option<u64> {
        result.pointer("/_meta/quota/token_count/input_tokens").and_then(Value::as_u64)
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

/// The window Claude Code runs a model at: 1,000,000 with `[1m]`; without it 200,000 for the 4.x
/// and older models (their 1M context is a beta it asks for only with `[1m]`), and from
/// generation 5 on the catalog's (claude-agent-acp 0.101 reports 1,000,000 for plain `opus`,
/// Opus 5.5). Unknown (`None`) for an alias whose model is not known yet.
fn claude_window(id: Option<&str>, one_m: bool) -> Option<u64> {
    if one_m {
        return Some(ONE_MILLION);
    }
    let generation = id?.split(['-', '.']).find_map(|part| part.parse::<u32>().ok()).unwrap_or(0);
    (generation < 5).then_some(CLAUDE_WINDOW)
}

/// Whether a `[...]` suffix selects the 1M-context window.
fn is_one_m(bracket: Option<&str>) -> bool {
    bracket.is_some_and(|b| b.eq_ignore_ascii_case("1m"))
}

/// The concrete Claude model behind a model option value, from the option list: the entry's
/// name ("Opus 5.5" is `claude-opus-5-5`), or for `default` the entry its description names
/// ("Opus", or a resolved id such as `claude-opus-5-5[1m]`). Also whether the name says 1M.
fn claude_concrete(value: &str, option: &Value) -> Option<(String, bool)> {
    let mut entries = Vec::new();
    for entry in option.get("options").and_then(Value::as_array)? {
        // Options may come in groups: `{group, name, options: [...]}`.
        match entry.get("options").and_then(Value::as_array) {
            Some(inner) => entries.extend(inner),
            None => entries.push(entry),
        }
    }
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let entry = entries.iter().find(|e| field(e, "value") == value)?;
    let (base, _) = split_bracket(value);
    if base.starts_with("claude-") {
        return Some((base.to_string(), false));
    }
    let description = field(entry, "description");
    if base != "default" {
        return claude_from_display(&field(entry, "name"));
    }
    if description.starts_with("claude-") {
        let (id, bracket) = split_bracket(&description);
        return Some((id.to_string(), is_one_m(bracket)));
    }
    let family = description.split_whitespace().next()?.to_ascii_lowercase();
    let sibling = entries.iter().find(|e| {
        let value = field(e, "value");
        value != "default"
            && (value.eq_ignore_ascii_case(&family)
                || field(e, "name").to_ascii_lowercase().starts_with(&family))
    })?;
    claude_from_display(&field(sibling, "name"))
}

/// "Opus 5.5" -> `claude-opus-5-5`; "Sonnet 4.6 (1M context)" -> `claude-sonnet-4-6`, 1M.
fn claude_from_display(name: &str) -> Option<(String, bool)> {
    let mut words = name.split_whitespace();
    let family = words.next()?.to_ascii_lowercase();
    let version = words.next()?;
    if !family.chars().all(|c| c.is_ascii_alphabetic())
        || !version.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    let one_m = name.to_ascii_lowercase().contains("1m");
    Some((format!("claude-{family}-{}", version.replace('.', "-")), one_m))
}

/// One row of claude-agent-acp's `_meta.quota.model_usage`: `{model, token_count: {inputTokens
/// (without the cache), cachedInputTokens (reads), cachedWriteTokens, outputTokens}}`.
fn claude_model_row(row: &Value) -> Option<TokenRecord> {
    let model = row.get("model").and_then(Value::as_str)?;
    let count = row.get("token_count")?;
    let n = |k: &str| count.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut rec = TokenRecord::from_anthropic(
        n("inputTokens"),
        n("cachedInputTokens"),
        n("cachedWriteTokens"),
        0,
        n("outputTokens"),
    );
    rec.model = Some(split_bracket(model).0.to_string());
    Some(rec)
}

/// qwen-code's model id as a catalog id: `$runtime|openai|gpt-5.2(openai)` and
/// `gpt-5.2(openai)` are `gpt-5.2` (the auth type rides along as a prefix and a suffix).
fn qwen_model_id(value: &str) -> &str {
    let id = value.rsplit('|').next().unwrap_or(value);
    match id.strip_suffix(')').and_then(|v| v.rsplit_once('(')) {
        Some((model, _)) => model,
        None => id,
    }
}

/// opencode's model option value `providerID/modelID[/variant]` as a model id: what follows the
/// provider, less a trailing effort variant. Model ids may hold slashes themselves
/// (`openrouter/anthropic/claude-sonnet-4.5`), so only a known variant name is cut.
fn opencode_model_id(value: &str) -> &str {
    const VARIANTS: &[&str] =
        &["none", "minimal", "low", "medium", "high", "xhigh", "max", "default", "thinking"];
    let id = value.split_once('/').map_or(value, |(_, rest)| rest);
    match id.rsplit_once('/') {
        Some((model, variant)) if VARIANTS.contains(&variant) => model,
        _ => id,
    }
}

/// opencode's per-turn `usage` is its last assistant message, i.e. the turn's last model call
/// (Anthropic-style: input without the cache, output without reasoning). That call tells the
/// exact `used`; it is the turn's usage only when the turn made one call, which the visible
/// content tells (a tool call means another model call followed).
fn opencode_prompt_result(ledger: &mut Ledger, result: &Value) {
    let Some(usage) = result.get("usage").filter(|u| u.is_object()) else { return };
    let Ok(u) = serde_json::from_value::<AcpUsage>(usage.clone()) else { return };
    let (Some(input), Some(output)) = (u.input_tokens, u.output_tokens) else { return };
    let thought = u.thought_tokens.unwrap_or(0);
    let read = u.cached_read_tokens.unwrap_or(0);
    let write = u.cached_write_tokens.unwrap_or(0);
    let mut rec = TokenRecord::from_anthropic(input, read, write, 0, output + thought);
    rec.thought = thought;
    if rec.total() == 0 {
        // A cancelled turn or a local command: no model call finished.
        return;
    }
    if estimated_calls(ledger) == Some(1) {
        ledger.agent_used(rec.context_after(), true);
        ledger.agent_turn(rec, TurnReport::Complete, Some(1));
    }
    // Several calls: the last one alone is not the turn; the turn stays estimated until the
    // transcript (opencode's database) gives every call.
}

/// How many model calls the turn in progress made, by the shape of its visible content.
fn estimated_calls(ledger: &Ledger) -> Option<u64> {
    // The ledger keeps that shape to itself; ending a copy of the turn with nothing but the
    // visible content reports it.
    let mut probe = ledger.clone();
    let catalog = acp_usage_core::Catalog::new();
    let cx = acp_usage_core::ledger::Context {
        catalog: &catalog,
        default_window: 1,
        window_percent: 100,
        remembered_size: None,
    };
    probe.end_turn(&cx).and_then(|turn| turn.calls)
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
#[path = "profiles_tests.rs"]
mod tests;
