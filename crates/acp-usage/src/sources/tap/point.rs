//! Pointing an agent at the tap: which base-URL settings each agent reads, and where each would
//! have gone without the tap.
//!
//! Every agent gets the common variables (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`,
//! `GOOGLE_GEMINI_BASE_URL`, `CODE_ASSIST_ENDPOINT`): setting one an agent does not read changes
//! nothing. A variable the user had set is the route's upstream; otherwise the provider's public
//! endpoint is. Settings that live in the agent's own configuration are rewritten where they can
//! be without touching the user's files: opencode's `OPENCODE_CONFIG_CONTENT` provider base URLs,
//! Codex's model providers through `-c` overrides on its command line, Copilot's BYOK provider
//! URL. Logins through the provider's own endpoints (OAuth, subscriptions) go through the same
//! routes: their tokens pass untouched.

use super::Route;
use crate::relay::profiles::Profile;

/// A base-URL variable, its route and the public endpoint it defaults to.
struct Common {
    var: &'static str,
    route: &'static str,
    default: &'static str,
}

const COMMON: &[Common] = &[
    // Claude Code, opencode's and cline's Anthropic providers: without `/v1`.
    Common { var: "ANTHROPIC_BASE_URL", route: "anthropic", default: "https://api.anthropic.com" },
    // The OpenAI SDKs (qwen-code, Codex's built-in provider): with `/v1`.
    Common { var: "OPENAI_BASE_URL", route: "openai", default: "https://api.openai.com/v1" },
    // Gemini CLI with an API key, and its Google-login endpoint (Code Assist).
    Common {
        var: "GOOGLE_GEMINI_BASE_URL",
        route: "gemini",
        default: "https://generativelanguage.googleapis.com",
    },
    Common {
        var: "CODE_ASSIST_ENDPOINT",
        route: "codeassist",
        default: "https://cloudcode-pa.googleapis.com",
    },
];

/// How the agent is to be started so that its calls go through the tap.
#[derive(Debug, Default, Clone)]
pub struct Pointing {
    /// The tap's routes.
    pub routes: Vec<Route>,
    /// Variables to set in the agent's environment: name, route, and what follows the route's
    /// base URL.
    pub env: Vec<(String, String, String)>,
    /// opencode's configuration with its providers' base URLs rewritten (route names in place of
    /// the URLs, filled in by [`Pointing::resolve`]).
    opencode_config: Option<serde_json::Value>,
    /// Codex model providers whose `base_url` is overridden (on the command line for the zed
    /// adapter, in `CODEX_CONFIG` for the TypeScript one): provider id and route.
    codex_providers: Vec<(String, String)>,
    /// The user's own `CODEX_CONFIG` (a JSON object of config overrides), kept under ours.
    codex_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// The provider Codex uses, its whole definition, and its route: the TypeScript adapter
    /// starts its app server with `-c` overrides of the provider named in `CODEX_CONFIG`.
    codex_effective: Option<(String, serde_json::Value, String)>,
    /// Request headers that carry the agent's session id, lowercase.
    pub session_headers: Vec<String>,
}

/// The environment and arguments to start the agent with, once the tap listens.
#[derive(Debug, Default)]
pub struct Resolved {
    pub env: Vec<(String, String)>,
    /// Arguments to add right after the agent's program.
    pub args: Vec<String>,
}

/// A URL without its trailing slash.
fn trimmed(url: &str) -> String {
    url.trim_end_matches('/').to_owned()
}

impl Pointing {
    fn route(&mut self, name: &str, upstream: &str) -> String {
        if !self.routes.iter().any(|r| r.name == name) {
            self.routes.push(Route { name: name.to_owned(), upstream: trimmed(upstream) });
        }
        name.to_owned()
    }

    /// The settings, with `base_url(route)` the tap's URL for a route.
    pub fn resolve(&self, base_url: impl Fn(&str) -> String) -> Resolved {
        let mut out = Resolved::default();
        for (var, route, suffix) in &self.env {
            out.env.push((var.clone(), format!("{}{suffix}", base_url(route))));
        }
        if let Some(config) = &self.opencode_config {
            let mut config = config.clone();
            if let Some(providers) = config.get_mut("provider").and_then(|p| p.as_object_mut()) {
                for (_, provider) in providers.iter_mut() {
                    if let Some(url) = provider.pointer_mut("/options/baseURL")
                        && let Some(route) = url.as_str().map(str::to_owned)
                    {
                        *url = serde_json::Value::String(base_url(&route));
                    }
                }
            }
            out.env.push(("OPENCODE_CONFIG_CONTENT".into(), config.to_string()));
        }
        for (provider, route) in &self.codex_providers {
            out.args.push("-c".into());
            out.args.push(format!("model_providers.{provider}.base_url=\"{}\"", base_url(route)));
        }
        if let Some((id, definition, route)) = &self.codex_effective {
            let mut overrides = self.codex_config.clone().unwrap_or_default();
            let mut definition = definition.clone();
            definition["base_url"] = serde_json::Value::String(base_url(route));
            overrides.insert("model_provider".into(), serde_json::Value::String(id.clone()));
            let providers = overrides
                .entry("model_providers")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if !providers.is_object() {
                *providers = serde_json::Value::Object(Default::default());
            }
            providers[id.as_str()] = definition;
            out.env.push(("CODEX_CONFIG".into(), serde_json::Value::Object(overrides).to_string()));
        }
        out
    }
}

/// Where the agent's calls would go, and how to send them to the tap instead. `env` reads the
/// environment acp-usage was started with (the agent inherits it); `read_file` reads a file.
pub fn point_agent(
    profile: Profile,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) -> Pointing {
    let mut p = Pointing::default();
    for c in COMMON {
        let upstream = env(c.var).filter(|v| !v.trim().is_empty());
        let route = p.route(c.route, upstream.as_deref().unwrap_or(c.default));
        p.env.push((c.var.to_owned(), route, String::new()));
    }
    match profile {
        Profile::Opencode => point_opencode(&mut p, env),
        Profile::Codex => point_codex(&mut p, env, read_file),
        Profile::Copilot => {
            // Copilot's BYOK provider (`COPILOT_PROVIDER_BASE_URL`); its GitHub endpoint is not
            // tapped (see the README).
            if let Some(url) = env("COPILOT_PROVIDER_BASE_URL").filter(|v| !v.is_empty()) {
                let route = p.route("copilot-provider", &url);
                p.env.push(("COPILOT_PROVIDER_BASE_URL".into(), route, String::new()));
            }
        }
        _ => {}
    }
    p.session_headers = match profile {
        Profile::Claude => vec!["x-claude-code-session-id".into()],
        Profile::Codex => vec!["session_id".into(), "conversation_id".into()],
        _ => Vec::new(),
    };
    p
}

/// opencode reads its providers' base URLs from `OPENCODE_CONFIG_CONTENT` (and its config
/// files, which acp-usage does not rewrite).
fn point_opencode(p: &mut Pointing, env: &dyn Fn(&str) -> Option<String>) {
    let Some(mut config) = env("OPENCODE_CONFIG_CONTENT")
        .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
    else {
        return;
    };
    let mut changed = false;
    if let Some(providers) = config.get_mut("provider").and_then(|v| v.as_object_mut()) {
        for (name, provider) in providers.iter_mut() {
            let Some(url) = provider.pointer_mut("/options/baseURL") else { continue };
            let Some(upstream) = url.as_str().map(str::to_owned) else { continue };
            let route = format!("opencode-{}", sanitize(name));
            let route = p.route(&route, &upstream);
            *url = serde_json::Value::String(route);
            changed = true;
        }
    }
    if changed {
        p.opencode_config = Some(config);
    }
}

/// Codex's model providers from `$CODEX_HOME/config.toml`: a provider with a `base_url` gets
/// a `-c model_providers.<id>.base_url=...` override (both adapters take Codex's `-c`).
fn point_codex(
    p: &mut Pointing,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) {
    let home = env("CODEX_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".codex")));
    let Some(text) = home.and_then(|h| read_file(&h.join("config.toml"))) else { return };
    let Ok(config) = toml::from_str::<toml::Table>(&text) else { return };
    let Some(providers) = config.get("model_providers").and_then(|v| v.as_table()) else {
        return;
    };
    p.codex_config = env("CODEX_CONFIG")
        .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
        .and_then(|v| v.as_object().cloned());
    let effective = env("MODEL_PROVIDER")
        .or_else(|| {
            let from = p.codex_config.as_ref()?.get("model_provider")?;
            from.as_str().map(str::to_owned)
        })
        .or_else(|| config.get("model_provider").and_then(|v| v.as_str()).map(str::to_owned));
    for (id, provider) in providers {
        let Some(url) = provider.get("base_url").and_then(|v| v.as_str()) else { continue };
        let route = p.route(&format!("codex-{}", sanitize(id)), url);
        p.codex_providers.push((id.clone(), route.clone()));
        if effective.as_deref() == Some(id.as_str())
            && let Ok(definition) = serde_json::to_value(provider)
        {
            p.codex_effective = Some((id.clone(), definition, route));
        }
    }
}

/// A name fit for a path segment.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn no_file(_: &std::path::Path) -> Option<String> {
        None
    }

    #[test]
    fn the_users_base_url_is_the_upstream_else_the_public_endpoint() {
        let env = env_of(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
        let p = point_agent(Profile::Claude, &env, &no_file);
        let upstream = |name: &str| {
            p.routes.iter().find(|r| r.name == name).map(|r| r.upstream.clone()).unwrap()
        };
        assert_eq!(upstream("anthropic"), "http://127.0.0.1:9");
        assert_eq!(upstream("openai"), "https://api.openai.com/v1");
        let resolved = p.resolve(|route| format!("http://127.0.0.1:1/s/{route}"));
        assert!(resolved.env.contains(&(
            "ANTHROPIC_BASE_URL".to_owned(),
            "http://127.0.0.1:1/s/anthropic".to_owned()
        )));
        assert_eq!(p.session_headers, vec!["x-claude-code-session-id".to_owned()]);
    }

    #[test]
    fn opencode_providers_and_codex_providers_are_rewritten() {
        let config = r#"{"model":"anthropic/claude-sonnet-4-5","provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:7/v1","apiKey":"x"}}}}"#;
        let env = env_of(&[("OPENCODE_CONFIG_CONTENT", config)]);
        let p = point_agent(Profile::Opencode, &env, &no_file);
        let resolved = p.resolve(|route| format!("http://tap/{route}"));
        let (_, content) =
            resolved.env.iter().find(|(k, _)| k == "OPENCODE_CONFIG_CONTENT").unwrap();
        let v: serde_json::Value = serde_json::from_str(content).unwrap();
        assert_eq!(
            v["provider"]["anthropic"]["options"]["baseURL"],
            "http://tap/opencode-anthropic"
        );
        assert_eq!(v["provider"]["anthropic"]["options"]["apiKey"], "x");
        assert!(p.routes.iter().any(|r| r.upstream == "http://127.0.0.1:7/v1"));

        let env = env_of(&[("CODEX_HOME", "/h")]);
        let read = |path: &std::path::Path| {
            (path == std::path::Path::new("/h/config.toml")).then(|| {
                "model_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"http://127.0.0.1:8/v1\"\n".to_owned()
            })
        };
        let p = point_agent(Profile::Codex, &env, &read);
        let resolved = p.resolve(|route| format!("http://tap/{route}"));
        assert_eq!(
            resolved.args,
            vec!["-c", "model_providers.mock.base_url=\"http://tap/codex-mock\""]
        );
        let (_, overrides) = resolved.env.iter().find(|(k, _)| k == "CODEX_CONFIG").unwrap();
        assert_eq!(
            overrides,
            r#"{"model_provider":"mock","model_providers":{"mock":{"base_url":"http://tap/codex-mock"}}}"#
        );
    }
}
