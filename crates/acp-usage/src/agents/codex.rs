//! Codex through either ACP adapter: `@zed-industries/codex-acp` (Rust) and
//! `@agentclientprotocol/codex-acp` (TypeScript, the Codex app server underneath).
//!
//! Both report `used` per model call (input with cache + output) and a `size` that is already
//! 95% of the model's window (Codex's `effective_context_window_percent`: enforced), no cost;
//! the TypeScript adapter also a per-turn `usage` and `_meta.quota`, and it titles each session
//! with another model, a call no record shows. Rollouts
//! (`<home>/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl[.zst]`) record every call; a
//! subagent's rollout is another thread whose `session_meta` names the session as its parent.
//! The tap is pointed through Codex's own configuration (see [`point_codex`]), and the
//! TypeScript adapter's app server through the program it starts ([`app_server`]).

pub(crate) mod app_server;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use acp_usage_core::account::Account;
use acp_usage_core::estimate::Family;
use acp_usage_core::transcript::codex::CodexParser;
use serde_json::{Map, Value};

use super::acp::{self, AgentUpdate, split_bracket};
use super::{Agent, Launch, Package, Plan};
use crate::sources::tap::point::{Alternate, Env, OPENAI, Pointing, Resolved, sanitize};
use crate::sources::transcripts::locate::{Found, Locator, day_dirs, files, first_line};
use crate::sources::transcripts::{Files, Format, Store, string_at, var_or_home};

/// Where Codex's ChatGPT login sends its model calls: an explicit `openai_base_url` captures
/// them too, and they carry this header.
const CHATGPT_CODEX: &str = "https://chatgpt.com/backend-api/codex";
const CHATGPT_HEADER: &str = "chatgpt-account-id";

pub struct Codex;

/// Codex rollouts.
pub static FORMAT: Format = Format {
    name: "codex",
    location: |env| var_or_home(env, "CODEX_HOME", ".codex"),
    store: Store::Files(Files {
        parser: || Box::new(CodexParser::default()),
        // A Codex rollout does not say which thread a line belongs to.
        parser_per_file: true,
        whole_document: false,
        find,
        all,
        facts: |facts, line| {
            if facts.cwd.is_none() && memchr::memmem::find(line, b"\"session_meta\"").is_some() {
                facts.cwd = string_at(line, &["payload", "cwd"]);
            }
        },
        side_facts: Files::no_side_facts,
        restarted: None,
        may_hold_call: None,
    }),
    marks_turn_end: true,
};

impl Agent for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn plan(&self) -> Option<Plan> {
        Some(Plan { provider: "openai", word: "Codex", own_family: Some("codex") })
    }

    /// Its key variables, else its login (`$CODEX_HOME/auth.json`): the ChatGPT account's id,
    /// which its requests carry, or the API key stored there.
    fn credentials(&self, env: &Env) -> Vec<crate::accounts::Credential> {
        use crate::accounts::Credential;
        let set = crate::accounts::secrets_in(env.var, &["CODEX_API_KEY", "OPENAI_API_KEY"]);
        if !set.is_empty() {
            return set;
        }
        let home = (env.var)("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| (env.var)("HOME").map(|h| Path::new(&h).join(".codex")));
        let Some(auth) = home.and_then(|h| (env.read_file)(&h.join("auth.json"))) else {
            return Vec::new();
        };
        let Ok(auth) = serde_json::from_str::<serde_json::Value>(&auth) else { return Vec::new() };
        if let Some(id) = auth.pointer("/tokens/account_id").and_then(|v| v.as_str()) {
            return vec![Credential::Account(format!("acct:{id}"))];
        }
        let key = auth.get("OPENAI_API_KEY").and_then(|v| v.as_str()).filter(|k| !k.is_empty());
        key.map(|k| Credential::Secret(k.to_owned())).into_iter().collect()
    }

    fn about(&self) -> &'static str {
        "codex-acp (either adapter)"
    }

    fn recognises(&self, word: &str) -> bool {
        word.contains("codex")
    }

    fn window_percent(&self) -> u64 {
        // Codex's `effective_context_window_percent`.
        95
    }

    fn default_family(&self) -> Family {
        Family::OpenAi
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        // `gpt-5.2-codex`, legacy `gpt-5.2-codex/medium`, TS `gpt-5.2-codex[medium]`.
        let base = split_bracket(value).0;
        let id = base.split('/').next().unwrap_or(base);
        (Some(id.to_string()), None)
    }

    fn unrecorded_side_calls(&self, agent_name: Option<&str>) -> &'static [&'static str] {
        // The TypeScript adapter's Codex app server titles each session with another model;
        // the zed adapter makes no such call.
        if agent_name.is_some_and(|n| n.starts_with("@agentclientprotocol")) {
            &["session title"]
        } else {
            &[]
        }
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        // `used` is the call's total, hidden reasoning included, which later requests drop: the
        // agent's figure, not claimed exact. `model_context_window` is the share of the window
        // it lets the model fill: enforced.
        acp::plain_usage_update(account, update, true);
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        point_codex(p, env);
    }

    fn point_command(&self, p: &mut Pointing, command: &[String], env: &Env) {
        app_server::point(p, &Settings::read(env), command, env);
    }

    fn session_headers(&self) -> &'static [&'static str] {
        &["session-id", "thread-id"]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[
            Launch {
                title: "Codex",
                program: "codex-acp",
                args: &[],
                package: Package::Npm("@agentclientprotocol/codex-acp"),
                registry_id: Some("codex-acp"),
            },
            // The Zed adapter (0.x), same program name.
            Launch {
                title: "Codex",
                program: "codex-acp",
                args: &[],
                package: Package::Npm("@zed-industries/codex-acp"),
                registry_id: None,
            },
        ]
    }
}

/// What of Codex's configuration decides where its calls go: `$CODEX_HOME/config.toml`, the
/// TypeScript adapter's `CODEX_CONFIG` (its per-thread overrides) and `MODEL_PROVIDER`.
struct Settings {
    /// `config.toml`.
    config: toml::Table,
    /// The user's own `CODEX_CONFIG`.
    overrides: Option<Map<String, Value>>,
    /// The provider in use (`openai`, Codex's built-in one, unless something names another).
    provider: String,
}

impl Settings {
    fn read(env: &Env) -> Settings {
        let home = (env.var)("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| (env.var)("HOME").map(|h| Path::new(&h).join(".codex")));
        let config: toml::Table = home
            .and_then(|h| (env.read_file)(&h.join("config.toml")))
            .and_then(|text| toml::from_str(&text).ok())
            .unwrap_or_default();
        let overrides: Option<Map<String, Value>> = (env.var)("CODEX_CONFIG")
            .and_then(|c| serde_json::from_str::<Value>(&c).ok())
            .and_then(|v| v.as_object().cloned());
        let mut settings = Settings { config, overrides, provider: String::new() };
        settings.provider = (env.var)("MODEL_PROVIDER")
            .or_else(|| settings.user("model_provider"))
            .unwrap_or_else(|| "openai".to_owned());
        settings
    }

    /// A string setting: `CODEX_CONFIG`'s, else `config.toml`'s.
    fn user(&self, key: &str) -> Option<String> {
        let from_env =
            self.overrides.as_ref().and_then(|c| c.get(key)?.as_str().map(str::to_owned));
        from_env.or_else(|| self.file(key))
    }

    /// A string setting of `config.toml` alone.
    fn file(&self, key: &str) -> Option<String> {
        self.config.get(key).and_then(|v| v.as_str()).map(str::to_owned)
    }

    /// Whether the provider in use is Codex's built-in `openai` one.
    fn builtin(&self) -> bool {
        // A `base_url` the user gave the `openai` provider makes it theirs.
        self.provider == "openai"
            && self
                .config
                .get("model_providers")
                .and_then(|v| v.as_table())
                .is_none_or(|t| t.get("openai").and_then(|p| p.get("base_url")).is_none())
    }
}

/// The route of Codex's built-in `openai` provider to `base` (an `openai_base_url`), else to
/// OpenAI's public endpoint, with a ChatGPT login's calls going to ChatGPT's backend: a
/// ChatGPT login goes there only when no `openai_base_url` was set; with one, Codex sends those
/// calls (header and all) to the user's URL, and so must the tap.
fn openai_route(p: &mut Pointing, name: &str, base: Option<&str>) -> String {
    let route = p.route(name, base.unwrap_or(OPENAI.default));
    if base.is_none() && !p.alternates.iter().any(|a| a.route == route) {
        p.alternates.push(Alternate {
            route: route.clone(),
            header: CHATGPT_HEADER.to_owned(),
            upstream: CHATGPT_CODEX.to_owned(),
        });
    }
    route
}

/// Codex: its model providers from `$CODEX_HOME/config.toml`, overridden for both adapters
/// (the zed adapter takes `-c` on its command line; the TypeScript one passes `CODEX_CONFIG` to
/// its threads and starts its app server with the provider that names), and its built-in
/// `openai` provider through `openai_base_url` (Codex no longer reads `OPENAI_BASE_URL`), whose
/// ChatGPT-login calls go to ChatGPT's backend instead. (The TypeScript adapter's app server
/// itself, which its title thread uses, is pointed in [`point_app_server`].)
fn point_codex(p: &mut Pointing, env: &Env) {
    let settings = Settings::read(env);
    let Settings { config, overrides: user_overrides, provider: effective_id } = &settings;
    let user_overrides = user_overrides.clone();
    let openai_base = settings.user("openai_base_url");
    // Providers whose `base_url` is overridden (on the command line for the zed adapter, in
    // `CODEX_CONFIG` for the TypeScript one): provider id and route.
    let mut providers = Vec::new();
    // The provider Codex uses, its whole definition, and its route: the TypeScript adapter
    // starts its app server with `-c` overrides of the provider named in `CODEX_CONFIG`.
    let mut effective: Option<(String, Value, String)> = None;
    if let Some(table) = config.get("model_providers").and_then(|v| v.as_table()) {
        for (id, provider) in table {
            let Some(url) = provider.get("base_url").and_then(|v| v.as_str()) else { continue };
            let route = p.route(&format!("codex-{}", sanitize(id)), url);
            providers.push((id.clone(), route.clone()));
            if effective_id == id
                && let Ok(definition) = serde_json::to_value(provider)
            {
                effective = Some((id.clone(), definition, route));
            }
        }
    }
    // The route of Codex's built-in `openai` provider, when it is the one in use.
    let mut openai = None;
    if effective_id == "openai" && effective.is_none() {
        openai = Some(openai_route(p, "codex-openai", openai_base.as_deref()));
    }
    p.finish.push(Arc::new(move |base_url, out: &mut Resolved| {
        for (provider, route) in &providers {
            out.args.push("-c".into());
            out.args.push(format!("model_providers.{provider}.base_url=\"{}\"", base_url(route)));
        }
        if let Some(route) = &openai {
            let url = base_url(route);
            out.args.push("-c".into());
            out.args.push(format!("openai_base_url=\"{url}\""));
            let mut overrides = user_overrides.clone().unwrap_or_default();
            overrides.insert("openai_base_url".into(), Value::String(url));
            out.env.push(("CODEX_CONFIG".into(), Value::Object(overrides).to_string()));
        }
        if let Some((id, definition, route)) = &effective {
            let mut overrides = user_overrides.clone().unwrap_or_default();
            let mut definition = definition.clone();
            definition["base_url"] = Value::String(base_url(route));
            overrides.insert("model_provider".into(), Value::String(id.clone()));
            let providers =
                overrides.entry("model_providers").or_insert_with(|| Value::Object(Map::new()));
            if !providers.is_object() {
                *providers = Value::Object(Map::new());
            }
            providers[id.as_str()] = definition;
            out.env.push(("CODEX_CONFIG".into(), Value::Object(overrides).to_string()));
        }
    }));
}

fn all(locator: &mut Locator, home: &Path) -> Vec<(String, Found)> {
    let mut rollouts: Vec<PathBuf> = Vec::new();
    // Archived threads keep their rollouts, flat or in day folders.
    for root in [home.join("sessions"), home.join("archived_sessions")] {
        rollouts.extend(files(&root));
        for day in day_dirs(&root) {
            rollouts.extend(files(&day));
        }
    }
    rollouts.sort();
    let mut sessions: std::collections::BTreeMap<String, Found> = Default::default();
    let mut children: Vec<(String, String, PathBuf)> = Vec::new();
    for path in rollouts {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let Some(stem) = name.strip_suffix(".jsonl").or_else(|| name.strip_suffix(".jsonl.zst"))
        else {
            continue;
        };
        // `rollout-<time>-<thread uuid>`: the id is the last 36 characters.
        let Some(id) =
            stem.strip_prefix("rollout-").and_then(|s| s.get(s.len().checked_sub(36)?..))
        else {
            continue;
        };
        let parent = locator.remembered(&path, codex_parent);
        match parent {
            Some(parent) => children.push((parent, id.to_string(), path)),
            None => {
                let found = sessions.entry(id.to_string()).or_default();
                // A plain file wins over a compressed copy of it.
                if found.main.as_ref().is_none_or(|m| m.extension().is_some_and(|e| e == "zst")) {
                    found.main = Some(path);
                }
            }
        }
    }
    for (parent, id, path) in children {
        match sessions.get_mut(&parent) {
            Some(found) if found.main.is_some() => found.subagents.push(path),
            _ => {
                sessions.entry(id).or_default().main.get_or_insert(path);
            }
        }
    }
    sessions.into_iter().collect()
}

fn find(locator: &mut Locator, home: &Path, session: &str) -> Found {
    let mut found = Found::default();
    let suffixes = [format!("-{session}.jsonl"), format!("-{session}.jsonl.zst")];
    for day in day_dirs(&home.join("sessions")) {
        for path in files(&day) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if !name.starts_with("rollout-") {
                continue;
            }
            if suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                // A plain file wins over a compressed copy of it.
                if found.main.as_ref().is_none_or(|m| m.extension().is_some_and(|e| e == "zst")) {
                    found.main = Some(path);
                }
                continue;
            }
            let parent = locator.remembered(&path, codex_parent);
            if parent.as_deref() == Some(session) {
                found.subagents.push(path);
            }
        }
    }
    found.subagents.sort();
    found
}

/// The parent thread a Codex rollout's `session_meta` names, if it is a subagent's.
fn codex_parent(path: &Path) -> Option<String> {
    if path.extension().is_some_and(|e| e == "zst") {
        return None;
    }
    let line = first_line(path)?;
    let v: serde_json::Value = serde_json::from_slice(&line).ok()?;
    let spawn = v.pointer("/payload/source/subagent/thread_spawn")?;
    spawn.get("parent_thread_id")?.as_str().map(String::from)
}
