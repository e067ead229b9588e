//! Pointing an agent at the tap: which base-URL settings each agent reads, and where each would
//! have gone without the tap.
//!
//! Each profile sets only the variables its agent reads (a variable set for nothing would send a
//! tool's own API calls, run by the agent, through the tap). A variable the user had set is the
//! route's upstream; otherwise the provider's public endpoint is, in the shape the agent's SDK
//! expects (Anthropic's SDK without `/v1`, the AI SDK and OpenAI's with it). Settings that live in
//! the agent's own configuration are rewritten without touching the user's files: opencode's
//! `OPENCODE_CONFIG_CONTENT`, Codex's `-c` overrides (zed adapter) and `CODEX_CONFIG` (TypeScript
//! adapter). `NO_PROXY` gains the loopback names, so that a proxy the user set for the agent does
//! not swallow the tap's URL. Logins through the provider's own endpoints (OAuth, subscriptions)
//! go through the same routes: their tokens pass untouched. The exact names come from each
//! agent's shipped code (see the README's tap section).

use super::Route;
use crate::relay::profiles::Profile;

/// A base-URL variable, its route and the public endpoint it defaults to.
struct Var {
    var: &'static str,
    route: &'static str,
    default: &'static str,
}

/// Anthropic's SDK (Claude Code, qwen-code's anthropic type): no `/v1`.
const ANTHROPIC: Var =
    Var { var: "ANTHROPIC_BASE_URL", route: "anthropic", default: "https://api.anthropic.com" };
/// The AI SDK's Anthropic provider (opencode): with `/v1`.
const ANTHROPIC_V1: Var = Var {
    var: "ANTHROPIC_BASE_URL",
    route: "anthropic-v1",
    default: "https://api.anthropic.com/v1",
};
/// OpenAI's SDKs and the AI SDK: with `/v1`.
const OPENAI: Var =
    Var { var: "OPENAI_BASE_URL", route: "openai", default: "https://api.openai.com/v1" };
/// Gemini CLI with an API key.
const GEMINI: Var = Var {
    var: "GOOGLE_GEMINI_BASE_URL",
    route: "gemini",
    default: "https://generativelanguage.googleapis.com",
};
/// Gemini CLI with a Google login (Code Assist).
const CODE_ASSIST: Var = Var {
    var: "CODE_ASSIST_ENDPOINT",
    route: "codeassist",
    default: "https://cloudcode-pa.googleapis.com",
};

/// Where Codex's ChatGPT login sends its model calls: an explicit `openai_base_url` captures
/// them too, and they carry this header.
const CHATGPT_CODEX: &str = "https://chatgpt.com/backend-api/codex";
const CHATGPT_HEADER: &str = "chatgpt-account-id";

/// How the agent is to be started so that its calls go through the tap.
#[derive(Debug, Default, Clone)]
pub struct Pointing {
    /// The tap's routes.
    pub routes: Vec<Route>,
    /// Variables to set in the agent's environment: name, route, and what follows the route's
    /// base URL.
    pub env: Vec<(String, String, String)>,
    /// Variables to set as they are (`NO_PROXY`).
    pub literal_env: Vec<(String, String)>,
    /// opencode's configuration with its providers' base URLs rewritten (route names in place of
    /// the URLs, filled in by [`Pointing::resolve`]).
    opencode_config: Option<serde_json::Value>,
    /// Codex model providers whose `base_url` is overridden (on the command line for the zed
    /// adapter, in `CODEX_CONFIG` for the TypeScript one): provider id and route.
    codex_providers: Vec<(String, String)>,
    /// The route of Codex's built-in `openai` provider, when it is the one in use.
    codex_openai: Option<String>,
    /// Routes whose requests go elsewhere when they carry a header (Codex's ChatGPT login).
    pub alternates: Vec<Alternate>,
    /// The user's own `CODEX_CONFIG` (a JSON object of config overrides), kept under ours.
    codex_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// The provider Codex uses, its whole definition, and its route: the TypeScript adapter
    /// starts its app server with `-c` overrides of the provider named in `CODEX_CONFIG`.
    codex_effective: Option<(String, serde_json::Value, String)>,
    /// Request headers that carry the agent's session id, lowercase.
    pub session_headers: Vec<String>,
    /// Why some of the agent's calls will not reach the tap, to tell the user.
    pub warnings: Vec<String>,
}

/// A route's other upstream, for requests that carry `header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternate {
    pub route: String,
    /// Lowercase header name.
    pub header: String,
    pub upstream: String,
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
        out.env.extend(self.literal_env.iter().cloned());
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
        if let Some(route) = &self.codex_openai {
            let url = base_url(route);
            out.args.push("-c".into());
            out.args.push(format!("openai_base_url=\"{url}\""));
            let mut overrides = self.codex_config.clone().unwrap_or_default();
            overrides.insert("openai_base_url".into(), serde_json::Value::String(url));
            out.env.push(("CODEX_CONFIG".into(), serde_json::Value::Object(overrides).to_string()));
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
    let set = |p: &mut Pointing, v: &Var| {
        let upstream = env(v.var).filter(|u| !u.trim().is_empty());
        let route = p.route(v.route, upstream.as_deref().unwrap_or(v.default));
        p.env.push((v.var.to_owned(), route, String::new()));
    };
    match profile {
        Profile::Claude => {
            set(&mut p, &ANTHROPIC);
            // Claude Code applies `env` from its settings after the process environment.
            if let Some(file) = claude_settings_base_url(env, read_file) {
                p.warnings.push(format!(
                    "{file} sets ANTHROPIC_BASE_URL, which Claude Code prefers to the tap's: its calls will not be tapped"
                ));
            }
        }
        Profile::Qwen => {
            set(&mut p, &OPENAI);
            set(&mut p, &ANTHROPIC);
        }
        Profile::Gemini => {
            // With no auth type chosen, a base URL alone switches Gemini CLI to its `gateway`
            // auth: the API-key route is pointed only when the user chose one (or had set it).
            if env(GEMINI.var).is_some() || gemini_auth_chosen(env, read_file) {
                set(&mut p, &GEMINI);
            }
            set(&mut p, &CODE_ASSIST);
        }
        Profile::Opencode => {
            // Read only when the config names no base URL for the provider.
            set(&mut p, &ANTHROPIC_V1);
            set(&mut p, &OPENAI);
            point_opencode(&mut p, env);
        }
        Profile::Codex => point_codex(&mut p, env, read_file),
        Profile::Generic => {
            set(&mut p, &ANTHROPIC);
            set(&mut p, &OPENAI);
            set(&mut p, &GEMINI);
        }
        // cline keeps its base URL in `providers.json` only: not tapped (see the README).
        Profile::Cline => {}
        Profile::Copilot => {
            // Copilot's BYOK provider (`COPILOT_PROVIDER_BASE_URL`); its GitHub endpoint is not
            // tapped (see the README).
            if let Some(url) = env("COPILOT_PROVIDER_BASE_URL").filter(|v| !v.is_empty()) {
                let route = p.route("copilot-provider", &url);
                p.env.push(("COPILOT_PROVIDER_BASE_URL".into(), route, String::new()));
            }
        }
    }
    p.session_headers = match profile {
        Profile::Claude => vec!["x-claude-code-session-id".into()],
        Profile::Codex => vec!["session-id".into(), "thread-id".into()],
        Profile::Opencode => vec!["x-session-affinity".into(), "x-session-id".into()],
        _ => Vec::new(),
    };
    if !p.routes.is_empty() {
        for var in ["NO_PROXY", "no_proxy"] {
            let mut value = env(var).filter(|v| !v.trim().is_empty()).unwrap_or_default();
            if !value.is_empty() {
                value.push(',');
            }
            value.push_str("127.0.0.1,localhost");
            p.literal_env.push((var.to_owned(), value));
        }
    }
    p
}

/// The Claude Code settings file (user or project) whose `env` sets `ANTHROPIC_BASE_URL`.
fn claude_settings_base_url(
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) -> Option<String> {
    let dir = env("CLAUDE_CONFIG_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".claude")))?;
    let cwd = std::env::current_dir().ok();
    let candidates = [
        Some(dir.join("settings.json")),
        cwd.as_ref().map(|c| c.join(".claude").join("settings.json")),
        cwd.as_ref().map(|c| c.join(".claude").join("settings.local.json")),
    ];
    candidates.into_iter().flatten().find_map(|path| {
        let settings: serde_json::Value = serde_json::from_str(&read_file(&path)?).ok()?;
        settings.pointer("/env/ANTHROPIC_BASE_URL")?.as_str()?;
        Some(path.display().to_string())
    })
}

/// Whether Gemini CLI's settings name an auth type (`security.auth.selectedType`).
fn gemini_auth_chosen(
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) -> bool {
    let Some(home) = env("GEMINI_CLI_HOME").or_else(|| env("HOME")) else { return false };
    let path = std::path::Path::new(&home).join(".gemini").join("settings.json");
    let Some(text) = read_file(&path) else { return false };
    let Ok(settings) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
    settings.pointer("/security/auth/selectedType").is_some_and(|t| t.is_string())
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

/// Codex: its model providers from `$CODEX_HOME/config.toml`, overridden for both adapters
/// (the zed adapter takes `-c` on its command line; the TypeScript one passes `CODEX_CONFIG` to
/// its threads and starts its app server with the provider that names), and its built-in
/// `openai` provider through `openai_base_url` (Codex no longer reads `OPENAI_BASE_URL`), whose
/// ChatGPT-login calls go to ChatGPT's backend instead.
fn point_codex(
    p: &mut Pointing,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&std::path::Path) -> Option<String>,
) {
    let home = env("CODEX_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".codex")));
    let config: toml::Table = home
        .and_then(|h| read_file(&h.join("config.toml")))
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default();
    p.codex_config = env("CODEX_CONFIG")
        .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
        .and_then(|v| v.as_object().cloned());
    let user_config = |key: &str| {
        let from_env =
            p.codex_config.as_ref().and_then(|c| c.get(key)?.as_str().map(str::to_owned));
        from_env.or_else(|| config.get(key).and_then(|v| v.as_str()).map(str::to_owned))
    };
    let effective = env("MODEL_PROVIDER")
        .or_else(|| user_config("model_provider"))
        .unwrap_or_else(|| "openai".to_owned());
    let openai_base = user_config("openai_base_url");
    if let Some(providers) = config.get("model_providers").and_then(|v| v.as_table()) {
        for (id, provider) in providers {
            let Some(url) = provider.get("base_url").and_then(|v| v.as_str()) else { continue };
            let route = p.route(&format!("codex-{}", sanitize(id)), url);
            p.codex_providers.push((id.clone(), route.clone()));
            if effective == *id
                && let Ok(definition) = serde_json::to_value(provider)
            {
                p.codex_effective = Some((id.clone(), definition, route));
            }
        }
    }
    if effective == "openai" && p.codex_effective.is_none() {
        let upstream = openai_base.as_deref().unwrap_or(OPENAI.default);
        let route = p.route("codex-openai", upstream);
        p.alternates.push(Alternate {
            route: route.clone(),
            header: CHATGPT_HEADER.to_owned(),
            upstream: CHATGPT_CODEX.to_owned(),
        });
        p.codex_openai = Some(route);
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
        // Claude Code reads no other base URL: no other variable is set.
        assert_eq!(p.routes.len(), 1);
        let resolved = p.resolve(|route| format!("http://127.0.0.1:1/s/{route}"));
        assert!(resolved.env.contains(&(
            "ANTHROPIC_BASE_URL".to_owned(),
            "http://127.0.0.1:1/s/anthropic".to_owned()
        )));
        assert_eq!(p.session_headers, vec!["x-claude-code-session-id".to_owned()]);
        assert!(resolved.env.contains(&("NO_PROXY".to_owned(), "127.0.0.1,localhost".to_owned())));
    }

    #[test]
    fn codex_builtin_provider_goes_through_openai_base_url_and_chatgpt_elsewhere() {
        let env = env_of(&[("CODEX_HOME", "/h"), ("no_proxy", "corp.example")]);
        let p = point_agent(Profile::Codex, &env, &no_file);
        let resolved = p.resolve(|route| format!("http://tap/{route}"));
        assert_eq!(resolved.args, vec!["-c", "openai_base_url=\"http://tap/codex-openai\""]);
        let (_, overrides) = resolved.env.iter().find(|(k, _)| k == "CODEX_CONFIG").unwrap();
        assert_eq!(overrides, r#"{"openai_base_url":"http://tap/codex-openai"}"#);
        assert_eq!(p.alternates[0].upstream, "https://chatgpt.com/backend-api/codex");
        assert!(
            resolved
                .env
                .contains(&("no_proxy".to_owned(), "corp.example,127.0.0.1,localhost".to_owned()))
        );
    }

    #[test]
    fn a_claude_settings_base_url_is_said_since_it_wins_over_the_tap() {
        let env = env_of(&[("CLAUDE_CONFIG_DIR", "/c")]);
        let settings = |path: &std::path::Path| {
            (path == std::path::Path::new("/c/settings.json"))
                .then(|| r#"{"env":{"ANTHROPIC_BASE_URL":"https://gw.example"}}"#.to_owned())
        };
        let p = point_agent(Profile::Claude, &env, &settings);
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].starts_with("/c/settings.json sets ANTHROPIC_BASE_URL"));
        assert!(point_agent(Profile::Claude, &env, &no_file).warnings.is_empty());
    }

    #[test]
    fn gemini_api_key_route_only_when_an_auth_type_is_chosen() {
        let env = env_of(&[("GEMINI_CLI_HOME", "/g")]);
        let p = point_agent(Profile::Gemini, &env, &no_file);
        assert_eq!(p.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["codeassist"]);
        let chosen = |path: &std::path::Path| {
            (path == std::path::Path::new("/g/.gemini/settings.json"))
                .then(|| r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#.to_owned())
        };
        let p = point_agent(Profile::Gemini, &env, &chosen);
        assert_eq!(p.routes.len(), 2);
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
