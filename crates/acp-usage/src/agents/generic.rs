//! Any agent acp-usage has no profile for: the ACP fields read as the spec defines them.
//!
//! Its `used` is the agent's figure, its `size` a window it reports, its `cost` the agent's;
//! per-turn `usage` and `_meta.quota` are read as a turn's complete usage; model option values
//! in opencode's `provider/model` shape name the model after the slash. The tap is off by
//! default for it: its base URLs are a guess; `--tap on` points the variables the providers'
//! SDKs read ([`Agent::point`] below).

use serde_json::Value;

use super::Agent;
use super::acp::{self, split_bracket};
use crate::sources::tap::point::{ANTHROPIC, Env, GEMINI, OPENAI, Pointing};

pub struct Generic;

impl Agent for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }

    fn about(&self) -> &'static str {
        "any other agent"
    }

    fn recognises(&self, _: &str) -> bool {
        false
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        // opencode-style `provider/model[/variant]`: the model is the second part.
        let base = split_bracket(value).0;
        let mut parts = base.split('/');
        let first = parts.next().unwrap_or(base);
        let id = parts.next().unwrap_or(first);
        (Some(id.to_string()), None)
    }

    fn reported_windows(&self, result: &Value) -> Vec<(String, u64)> {
        acp::context_limits(result)
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        p.var(&ANTHROPIC, env);
        p.var(&OPENAI, env);
        p.var(&GEMINI, env);
    }
}
