//! What the mock serves: token usage in acp-usage's normalised terms, and the script of replies.
//!
//! A [`Usage`] is stored normalised (input includes every cache read and write, output includes
//! thoughts) so that tests can sum calls of any provider the same way; each provider module turns
//! it back into that provider's native counters when it writes a response.

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Token counts of one model call, in acp-usage's definitions.
///
/// `input` holds every prompt-side token, cache reads and writes included; `cache_read`,
/// `cache_write_5m` and `cache_write_1h` are subsets of it. `output` holds every generated token,
/// thoughts included; `thought` is a subset of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub output: u64,
    pub thought: u64,
    /// Anthropic only: send the `cache_creation` 5m/1h split object. Without it Claude Code
    /// records the split as zeros and a reader has to assume 5-minute writes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub anthropic_cache_split: bool,
}

impl Usage {
    /// Anthropic counters: `input_tokens` excludes the cache, `cache_creation` is sent without the
    /// 5m/1h split (and counts as 5-minute writes).
    pub fn anthropic(
        input_tokens: u64,
        cache_creation: u64,
        cache_read: u64,
        output: u64,
    ) -> Usage {
        Usage {
            input: input_tokens + cache_creation + cache_read,
            cache_read,
            cache_write_5m: cache_creation,
            output,
            ..Usage::default()
        }
    }

    /// Anthropic counters with the `cache_creation.ephemeral_{5m,1h}_input_tokens` split.
    pub fn anthropic_split(
        input_tokens: u64,
        cache_write_5m: u64,
        cache_write_1h: u64,
        cache_read: u64,
        output: u64,
    ) -> Usage {
        Usage {
            input: input_tokens + cache_write_5m + cache_write_1h + cache_read,
            cache_read,
            cache_write_5m,
            cache_write_1h,
            output,
            thought: 0,
            anthropic_cache_split: true,
        }
    }

    /// OpenAI Responses counters: `input_tokens` includes `cached_tokens`, `output_tokens`
    /// includes `reasoning_tokens`.
    pub fn openai(input: u64, cached: u64, output: u64, reasoning: u64) -> Usage {
        assert!(cached <= input && reasoning <= output, "OpenAI subsets exceed their totals");
        Usage { input, cache_read: cached, output, thought: reasoning, ..Usage::default() }
    }

    /// OpenAI Chat Completions counters: `prompt_tokens` includes `cached_tokens`,
    /// `completion_tokens` includes `reasoning_tokens`; the same definitions as
    /// [`Usage::openai`], under Chat Completions' names.
    pub fn chat(prompt: u64, cached: u64, completion: u64, reasoning: u64) -> Usage {
        Usage::openai(prompt, cached, completion, reasoning)
    }

    /// Gemini `usageMetadata`: `promptTokenCount` includes `cachedContentTokenCount`;
    /// `thoughtsTokenCount` is NOT part of `candidatesTokenCount`.
    pub fn gemini(prompt: u64, cached: u64, candidates: u64, thoughts: u64) -> Usage {
        assert!(cached <= prompt, "Gemini cached tokens exceed the prompt");
        Usage {
            input: prompt,
            cache_read: cached,
            output: candidates + thoughts,
            thought: thoughts,
            ..Usage::default()
        }
    }

    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }

    /// `input + output`, the OpenTelemetry GenAI total.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }

    /// What stays in context after this call: prompt plus the output the provider keeps
    /// (thoughts are dropped from later requests).
    pub fn in_context(&self) -> u64 {
        self.input + self.output - self.thought
    }

    /// Anthropic's native `usage` object (as in `message_start`, with the final output).
    pub fn anthropic_json(&self) -> Value {
        let mut usage = serde_json::json!({
            "input_tokens": self.input - self.cache_read - self.cache_write(),
            "cache_creation_input_tokens": self.cache_write(),
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": self.output,
        });
        if self.anthropic_cache_split {
            usage["cache_creation"] = serde_json::json!({
                "ephemeral_5m_input_tokens": self.cache_write_5m,
                "ephemeral_1h_input_tokens": self.cache_write_1h,
            });
        }
        usage
    }

    /// OpenAI Responses' native `usage` object.
    pub fn openai_json(&self) -> Value {
        serde_json::json!({
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cache_read},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.thought},
            "total_tokens": self.total(),
        })
    }

    /// OpenAI Chat Completions' native `usage` object (the final chunk of a stream, or the
    /// completion). Cache writes have no field: Chat Completions only reports reads.
    pub fn chat_json(&self) -> Value {
        serde_json::json!({
            "prompt_tokens": self.input,
            "completion_tokens": self.output,
            "total_tokens": self.total(),
            "prompt_tokens_details": {"cached_tokens": self.cache_read},
            "completion_tokens_details": {"reasoning_tokens": self.thought},
        })
    }

    /// Gemini's native `usageMetadata` object.
    pub fn gemini_json(&self) -> Value {
        let mut usage = serde_json::json!({
            "promptTokenCount": self.input,
            "candidatesTokenCount": self.output - self.thought,
            "totalTokenCount": self.total(),
        });
        // The real API leaves zero counters out; so do we, to exercise readers' defaults.
        if self.cache_read > 0 {
            usage["cachedContentTokenCount"] = self.cache_read.into();
        }
        if self.thought > 0 {
            usage["thoughtsTokenCount"] = self.thought.into();
        }
        usage
    }
}

impl Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input: self.input + other.input,
            cache_read: self.cache_read + other.cache_read,
            cache_write_5m: self.cache_write_5m + other.cache_write_5m,
            cache_write_1h: self.cache_write_1h + other.cache_write_1h,
            output: self.output + other.output,
            thought: self.thought + other.thought,
            anthropic_cache_split: self.anthropic_cache_split || other.anthropic_cache_split,
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), Add::add)
    }
}

/// A tool call the mock asks the agent to make.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name; `None` picks a harmless tool among those the request declares.
    #[serde(default)]
    pub name: Option<String>,
    /// The tool's arguments; `None` fills in harmless ones for the known tools.
    #[serde(default)]
    pub args: Option<Value>,
}

impl ToolCall {
    /// Let the mock pick a harmless, auto-approved tool from the request's declared tools.
    pub fn auto() -> ToolCall {
        ToolCall::default()
    }

    pub fn named(name: &str, args: Value) -> ToolCall {
        ToolCall { name: Some(name.to_owned()), args: Some(args) }
    }
}

/// One scripted model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub text: String,
    #[serde(deserialize_with = "usage_spec")]
    pub usage: Usage,
    /// Ask for a tool call after the text (stop reason `tool_use` / a `function_call` item /
    /// a `functionCall` part / `tool_calls`).
    #[serde(default)]
    pub tool: Option<ToolCall>,
    /// Thinking/reasoning text to stream before the reply, where the provider has a place for it.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Response headers to send with this step's answer besides the mock's own (a provider's
    /// rate-limit headers, say).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Answer with this status and JSON body instead (a provider's refusal: a 429 at a usage
    /// limit), with `headers`; nothing is billed.
    #[serde(default)]
    pub refusal: Option<(u16, Value)>,
}

impl Step {
    pub fn text(text: &str, usage: Usage) -> Step {
        Step {
            text: text.to_owned(),
            usage,
            tool: None,
            thinking: None,
            headers: Vec::new(),
            refusal: None,
        }
    }

    /// A reply that ends with a call of a harmless tool picked from the request.
    pub fn tool(text: &str, usage: Usage) -> Step {
        Step { tool: Some(ToolCall::auto()), ..Step::text(text, usage) }
    }

    /// Sends these response headers with the step's answer.
    pub fn with_headers(mut self, headers: &[(&str, String)]) -> Step {
        self.headers.extend(headers.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        self
    }

    /// Refuses the call with `status` and `body` (and the step's headers).
    pub fn refused(mut self, status: u16, body: Value) -> Step {
        self.refusal = Some((status, body));
        self
    }

    pub fn with_tool(mut self, tool: ToolCall) -> Step {
        self.tool = Some(tool);
        self
    }

    pub fn with_thinking(mut self, thinking: &str) -> Step {
        self.thinking = Some(thinking.to_owned());
        self
    }
}

/// What a mock server answers, in order.
///
/// Main-agent calls (requests that declare tools) consume `steps`; once they run out every main
/// call gets `default`. Auxiliary model calls (title generation, next-speaker and classifier
/// checks: requests without tools) never touch `steps` and are answered with `auxiliary` usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default = "Script::default_step")]
    pub default: Step,
    #[serde(default = "Script::default_auxiliary", deserialize_with = "usage_spec")]
    pub auxiliary: Usage,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            steps: Vec::new(),
            default: Script::default_step(),
            auxiliary: Script::default_auxiliary(),
        }
    }
}

impl Script {
    pub fn new(steps: Vec<Step>) -> Script {
        Script { steps, ..Script::default() }
    }

    /// The reply once the script has run out: the research mock's numbers, so that the agents'
    /// behaviour can be compared with `research/agents-usage.md`.
    pub fn default_step() -> Step {
        Step::text("Hello from mock.", Usage::anthropic(12, 3000, 9000, 7))
    }

    pub fn default_auxiliary() -> Usage {
        Usage::openai(150, 0, 12, 0)
    }

    /// Reads a script file (JSON, see `tests/fixtures/scripts/`).
    pub fn from_file(path: &std::path::Path) -> anyhow::Result<Script> {
        let text = std::fs::read_to_string(path)?;
        Ok(serde_json::from_str(&text)?)
    }
}

/// Usage in a script file: provider-native counters under the provider's name, or the normalised
/// fields as they are.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum UsageSpec {
    Anthropic {
        #[serde(default)]
        input_tokens: u64,
        #[serde(default)]
        cache_creation_input_tokens: u64,
        #[serde(default)]
        cache_read_input_tokens: u64,
        #[serde(default)]
        output_tokens: u64,
        /// `[5m, 1h]`: send the split instead of the bare `cache_creation_input_tokens`.
        #[serde(default)]
        cache_creation_split: Option<[u64; 2]>,
    },
    Openai {
        #[serde(default)]
        input_tokens: u64,
        #[serde(default)]
        cached_tokens: u64,
        #[serde(default)]
        output_tokens: u64,
        #[serde(default)]
        reasoning_tokens: u64,
    },
    OpenaiChat {
        #[serde(default)]
        prompt_tokens: u64,
        #[serde(default)]
        cached_tokens: u64,
        #[serde(default)]
        completion_tokens: u64,
        #[serde(default)]
        reasoning_tokens: u64,
    },
    Gemini {
        #[serde(default, rename = "promptTokenCount")]
        prompt: u64,
        #[serde(default, rename = "cachedContentTokenCount")]
        cached: u64,
        #[serde(default, rename = "candidatesTokenCount")]
        candidates: u64,
        #[serde(default, rename = "thoughtsTokenCount")]
        thoughts: u64,
    },
    Normalized(Usage),
}

fn usage_spec<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Usage, D::Error> {
    let usage = match UsageSpec::deserialize(deserializer)? {
        UsageSpec::Anthropic {
            input_tokens,
            cache_creation_input_tokens,
            cache_read_input_tokens,
            output_tokens,
            cache_creation_split: Some([five_minutes, one_hour]),
        } => {
            if cache_creation_input_tokens != 0
                && cache_creation_input_tokens != five_minutes + one_hour
            {
                return Err(serde::de::Error::custom(
                    "cache_creation_input_tokens disagrees with cache_creation_split",
                ));
            }
            Usage::anthropic_split(
                input_tokens,
                five_minutes,
                one_hour,
                cache_read_input_tokens,
                output_tokens,
            )
        }
        UsageSpec::Anthropic {
            input_tokens,
            cache_creation_input_tokens,
            cache_read_input_tokens,
            output_tokens,
            cache_creation_split: None,
        } => Usage::anthropic(
            input_tokens,
            cache_creation_input_tokens,
            cache_read_input_tokens,
            output_tokens,
        ),
        UsageSpec::Openai { input_tokens, cached_tokens, output_tokens, reasoning_tokens } => {
            Usage::openai(input_tokens, cached_tokens, output_tokens, reasoning_tokens)
        }
        UsageSpec::OpenaiChat {
            prompt_tokens,
            cached_tokens,
            completion_tokens,
            reasoning_tokens,
        } => Usage::chat(prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens),
        UsageSpec::Gemini { prompt, cached, candidates, thoughts } => {
            Usage::gemini(prompt, cached, candidates, thoughts)
        }
        UsageSpec::Normalized(usage) => usage,
    };
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_counters_round_trip() {
        let anthropic = Usage::anthropic(12, 3000, 9000, 7);
        assert_eq!(anthropic.input, 12_012);
        assert_eq!(anthropic.anthropic_json()["input_tokens"], 12);
        let openai = Usage::openai(5000, 4096, 40, 16);
        assert_eq!(openai.total(), 5040);
        assert_eq!(openai.in_context(), 5024);
        let gemini = Usage::gemini(8000, 6000, 9, 24);
        assert_eq!(gemini.gemini_json()["totalTokenCount"], 8033);
        assert_eq!(gemini.gemini_json()["candidatesTokenCount"], 9);
        let chat = Usage::chat(5000, 4096, 40, 16).chat_json();
        assert_eq!(chat["total_tokens"], 5040);
        assert_eq!(chat["prompt_tokens_details"]["cached_tokens"], 4096);
        assert_eq!(chat["completion_tokens_details"]["reasoning_tokens"], 16);
    }

    #[test]
    fn script_file_syntax() {
        let script: Script = serde_json::from_value(serde_json::json!({
            "steps": [
                {"text": "a", "usage": {"anthropic": {"input_tokens": 1, "cache_creation_split": [2, 3]}}},
                {"text": "b", "usage": {"gemini": {"promptTokenCount": 10, "thoughtsTokenCount": 4}},
                 "tool": {}},
                {"text": "c", "usage": {"openai_chat": {"prompt_tokens": 9, "cached_tokens": 8,
                 "completion_tokens": 3, "reasoning_tokens": 2}}},
            ],
            "auxiliary": {"openai": {"input_tokens": 5, "output_tokens": 1}},
        }))
        .unwrap();
        assert_eq!(script.steps[0].usage, Usage::anthropic_split(1, 2, 3, 0, 0));
        assert_eq!(script.steps[1].usage.output, 4);
        assert_eq!(script.steps[1].tool, Some(ToolCall::auto()));
        assert_eq!(script.steps[2].usage, Usage::openai(9, 8, 3, 2));
        assert_eq!(script.auxiliary.total(), 6);
    }
}
