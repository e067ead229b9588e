//! Mistral Vibe (`vibe-acp`, PyPI `mistral-vibe`; `agentInfo.name` `@mistralai/mistral-vibe`).
//!
//! Vibe 3.0.3 sends a `usage_update` after every model call (and two or three copies at each
//! turn's edges) whose `used` is the last main call's prompt + completion (exact), whose `size`
//! is its auto-compact threshold (202,144 for a 262,144 window: not the model's window, and
//! left out here), whose `cost` is its own pricing of the session's cumulative counters at the
//! current model's price (history included, after a reload too: only a floor here), and whose
//! `_meta` carries those counters (`promptTokens`, `completionTokens`, `cachedTokens`). Its
//! prompt result's `usage` is cumulative over the session too, and survives a reload: the turn
//! is what it grew by since the counters before the turn. Its model option's value is an alias
//! (`mistral-medium-3.5`); the option's description is the API id its requests carry
//! (`mistral-vibe-cli-latest`), which the catalog keys as `mistral/…`. It titles each new
//! session with a call of its own (no tools, on the active model or `[utility_models] title`,
//! never the fast model) that no figure and no file records: only the tap sees it. With the
//! smart-approve agent it also probes, at session open, whether its fast model
//! (`mistral-vibe-cli-fast`) is served: a one-token completion, cached by `api_base`. The tap's
//! URL is new every run, so a tapped session probes every time (the tap counts it); the verdict,
//! hence the classifier's model, is the same as without the tap whenever the probe answers within
//! Vibe's 2 s budget.
//!
//! Its session store (`$VIBE_HOME/logs/session/unified/<id>/`) keeps only cumulative counters;
//! per-call usage lives in a recovery journal rotated at every turn's end. The relay does not
//! follow it (the ACP counters give the same figures), and `import` does not read it (see
//! `docs/ledger.md`). The tap is pointed through `VIBE_PROVIDERS` (see [`point_vibe`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use acp_usage_core::TokenRecord;
use acp_usage_core::account::Account;
use serde_json::{Value, json};

use super::acp::{self, AgentUpdate};
use super::{Agent, Launch, Package};
use crate::sources::tap::point::{Env, Pointing, sanitize};

pub struct Vibe;

/// Vibe's model aliases as API ids (its built-in models): the default `mistral-medium-3.5` and
/// the fast model its utility features (smart-approve's classifier, worktree names) use once a
/// probe says the provider serves it.
const ALIASES: &[(&str, &str)] = &[
    ("mistral-medium-3.5", "mistral-vibe-cli-latest"),
    ("mistral-small", "mistral-vibe-cli-fast"),
];

impl Agent for Vibe {
    fn name(&self) -> &'static str {
        "vibe"
    }

    fn about(&self) -> &'static str {
        "Mistral Vibe vibe-acp"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "@mistralai/mistral-vibe" (title "Mistral Vibe"); the command is
        // `vibe-acp` (PyPI `mistral-vibe`).
        word.contains("mistral-vibe") || word.contains("mistral vibe") || word == "vibe-acp"
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        let value = acp::split_bracket(value).0;
        let id = ALIASES.iter().find(|(alias, _)| *alias == value).map_or(value, |(_, id)| id);
        (Some(id.to_string()), None)
    }

    fn resolve_option(&self, value: &str, option: &Value) -> (Option<String>, Option<u64>) {
        // `{"value": "mistral-medium-3.5", "description": "mistral-vibe-cli-latest"}`: the
        // description is the API id behind the alias.
        let options = option.get("options").and_then(Value::as_array);
        let described = options
            .into_iter()
            .flatten()
            .find(|o| o.get("value").and_then(Value::as_str) == Some(value))
            .and_then(|o| o.get("description")?.as_str())
            .map(str::trim)
            .filter(|d| !d.is_empty() && !d.contains(char::is_whitespace));
        match described {
            Some(id) => (Some(id.to_string()), None),
            None => self.resolve_model(value),
        }
    }

    fn unrecorded_side_calls(&self, _: Option<&str>) -> &'static [&'static str] {
        &["session title"]
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        // `used`: the last main call's prompt + completion, exact. `size`: its compaction
        // threshold, not the window: the catalog's window of the model decides. `cost`: its
        // pricing of the session's main calls. `_meta`: the session's counters.
        // A 0 is no figure: no call made yet (its update before the `session/new` response,
        // which must not make the new session look like one with history).
        if let Some(used) = update.used.filter(|used| *used > 0) {
            account.agent_used(used, true);
        }
        if let Some(amount) = update.usd() {
            // The whole session's, history included: a floor, never added to carried figures.
            account.agent_cost_floor(amount);
        }
        if let Some(rec) = update.meta.as_ref().and_then(counters) {
            account.agent_cumulative_base(rec);
        }
    }

    fn reopened_model(&self) -> Option<String> {
        // `session/resume` answers `{}`: Vibe runs the session on its configured active model,
        // which `session/load`'s model option shows. Read once: the agent inherits this
        // process's environment.
        static CONFIGURED: OnceLock<String> = OnceLock::new();
        let model = CONFIGURED.get_or_init(|| {
            let env = |name: &str| std::env::var(name).ok();
            let read = |path: &Path| std::fs::read_to_string(path).ok();
            configured_model(&Env { var: &env, read_file: &read })
        });
        Some(model.clone())
    }

    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        // Cumulative over the session, reloads included: the turn is what it grew by.
        acp::cumulative_prompt_usage(account, result);
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        point_vibe(p, env);
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Mistral Vibe",
            program: "vibe-acp",
            args: &[],
            package: Package::PyPi("mistral-vibe"),
            registry_id: Some("mistral-vibe"),
        }]
    }
}

/// The session's counters in a `usage_update`'s `_meta`, input including the cache.
fn counters(meta: &acp::UpdateMeta) -> Option<TokenRecord> {
    let (prompt, completion) = (meta.prompt_tokens?, meta.completion_tokens?);
    Some(TokenRecord::from_openai(prompt, meta.cached_tokens.unwrap_or(0), completion, 0))
}

/// Vibe's active model as its configuration sets it (`VIBE_ACTIVE_MODEL`, else `active_model`
/// in `$VIBE_HOME/config.toml`, else its default `mistral-medium-3.5`), as the API id of the
/// user's `[[models]]` entry it names by alias, if one does (else as it is: a built-in alias is
/// [`Agent::resolve_model`]'s).
fn configured_model(env: &Env) -> String {
    let config = user_config(env).unwrap_or_default();
    let active = env
        .set("VIBE_ACTIVE_MODEL")
        .or_else(|| config.get("active_model").and_then(|v| v.as_str()).map(str::to_owned))
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| ALIASES[0].0.to_owned());
    let models = config.get("models").and_then(|v| v.as_array());
    let entry = models.into_iter().flatten().find(|m| {
        m.get("alias").and_then(|v| v.as_str()) == Some(active.as_str())
            || m.get("name").and_then(|v| v.as_str()) == Some(active.as_str())
    });
    match entry.and_then(|m| m.get("name")).and_then(|v| v.as_str()) {
        Some(name) => name.to_owned(),
        None => active,
    }
}

/// Vibe's built-in providers (`vibe/core/config/vibe_schema.py`, `DEFAULT_PROVIDERS`).
fn default_providers() -> Vec<Value> {
    vec![
        json!({"name": "mistral", "api_base": "https://api.mistral.ai/v1",
               "api_key_env_var": "MISTRAL_API_KEY", "backend": "mistral"}),
        json!({"name": "llamacpp", "api_base": "http://127.0.0.1:8080/v1", "api_key_env_var": ""}),
    ]
}

/// Vibe's configuration directory: `$VIBE_HOME`, else `~/.vibe`.
fn vibe_home(env: &Env) -> Option<PathBuf> {
    env.set("VIBE_HOME")
        .map(PathBuf::from)
        .or_else(|| env.set("HOME").map(|h| Path::new(&h).join(".vibe")))
}

/// The user's `$VIBE_HOME/config.toml`, when it exists and parses.
fn user_config(env: &Env) -> Option<toml::Table> {
    let text = (env.read_file)(&vibe_home(env)?.join("config.toml"))?;
    toml::from_str(&text).ok()
}

/// The providers Vibe will use, each entry whole: its defaults, replaced by name by the user's
/// `$VIBE_HOME/config.toml` `[[providers]]`, replaced in turn by a `VIBE_PROVIDERS` variable (a
/// JSON list), as Vibe layers them (a higher layer replaces a provider's whole entry).
fn effective_providers(env: &Env) -> Vec<Value> {
    let mut providers = default_providers();
    let mut overlay = |entries: Vec<Value>| {
        for entry in entries {
            let Some(name) = entry.get("name").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            match providers.iter_mut().find(|p| p["name"] == name.as_str()) {
                Some(slot) => *slot = entry,
                None => providers.push(entry),
            }
        }
    };
    let config = user_config(env);
    if let Some(entries) = config.as_ref().and_then(|c| c.get("providers")) {
        let entries = serde_json::to_value(entries).unwrap_or_default();
        overlay(entries.as_array().cloned().unwrap_or_default());
    }
    if let Some(Value::Array(entries)) =
        env.set("VIBE_PROVIDERS").and_then(|v| serde_json::from_str(&v).ok())
    {
        overlay(entries);
    }
    providers
}

/// Vibe reads its providers' `api_base` from its configuration only (no base-URL variable), and
/// `VIBE_PROVIDERS` (JSON) replaces a provider's whole entry: each provider with an HTTP
/// `api_base` is copied from the effective configuration with only `api_base` changed, to a
/// route (`vibe-<provider>`) whose upstream is the original. Every request Vibe makes goes
/// there (chat completions, `GET …/models/<id>`, `GET …/connectors/bootstrap`); the tap
/// forwards any path. A trailing `/v1` stays after the route: Vibe builds its catalogue URL as
/// the base without `/v1`, plus `/v1/models/<id>`.
fn point_vibe(p: &mut Pointing, env: &Env) {
    let mut providers = effective_providers(env);
    let mut routed = Vec::new();
    for (k, provider) in providers.iter().enumerate() {
        let Some(base) = provider.get("api_base").and_then(Value::as_str) else { continue };
        let base = base.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            continue;
        }
        let name = provider.get("name").and_then(Value::as_str).unwrap_or_default();
        let (upstream, suffix) = match base.strip_suffix("/v1") {
            Some(root) => (root, "/v1"),
            None => (base, ""),
        };
        let route = p.route(&format!("vibe-{}", sanitize(name)), upstream);
        routed.push((k, route, suffix));
    }
    if routed.is_empty() {
        return;
    }
    providers = routed.iter().map(|(k, _, _)| providers[*k].clone()).collect();
    p.finish.push(Arc::new(move |base_url, out| {
        let mut entries = providers.clone();
        for (entry, (_, route, suffix)) in entries.iter_mut().zip(&routed) {
            if let Some(obj) = entry.as_object_mut() {
                obj.insert(
                    "api_base".into(),
                    Value::String(format!("{}{suffix}", base_url(route))),
                );
            }
        }
        out.env.push(("VIBE_PROVIDERS".to_owned(), Value::Array(entries).to_string()));
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_openai_style() {
        let meta: acp::UpdateMeta = serde_json::from_value(json!({"steps": 6,
            "promptTokens": 18000, "completionTokens": 95, "cachedTokens": 9216,
            "totalTokens": 18095}))
        .unwrap();
        let rec = counters(&meta).unwrap();
        assert_eq!((rec.input, rec.cache_read, rec.output), (18000, 9216, 95));
        assert!(counters(&acp::UpdateMeta::default()).is_none());
    }

    #[test]
    fn the_configured_model() {
        let no_env = |_: &str| None;
        let no_file = |_: &Path| None;
        assert_eq!(
            configured_model(&Env { var: &no_env, read_file: &no_file }),
            "mistral-medium-3.5"
        );
        let env = |name: &str| (name == "VIBE_HOME").then(|| "/v".to_owned());
        let read = |path: &Path| {
            (path == Path::new("/v/config.toml")).then(|| {
                "active_model = \"big\"\n[[models]]\nname = \"mistral-large-4\"\n\
                 provider = \"mistral\"\nalias = \"big\"\n"
                    .to_owned()
            })
        };
        assert_eq!(configured_model(&Env { var: &env, read_file: &read }), "mistral-large-4");
        let env = |name: &str| match name {
            "VIBE_HOME" => Some("/v".to_owned()),
            "VIBE_ACTIVE_MODEL" => Some("mistral-small".to_owned()),
            _ => None,
        };
        assert_eq!(configured_model(&Env { var: &env, read_file: &read }), "mistral-small");
    }
}
