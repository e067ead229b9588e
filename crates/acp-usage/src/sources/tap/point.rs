//! Pointing an agent at the tap: the settings that send an agent's calls to the tap, and where
//! each would have gone without it.
//!
//! Each agent's file in `agents/` says which settings its agent reads (a variable set for
//! nothing would send a tool's own API calls, run by the agent, through the tap); this module
//! holds what they share. A variable the user had set is the route's upstream; otherwise the
//! provider's public endpoint is, in the shape the agent's SDK expects (Anthropic's SDK without
//! `/v1`, the AI SDK and OpenAI's with it). Settings that live in the agent's own configuration
//! are rewritten without touching the user's files (a [`Finish`] step renders them once the
//! tap's URL is known). `NO_PROXY` gains the loopback names, so that a proxy the user set for
//! the agent does not swallow the tap's URL. Logins through the provider's own endpoints
//! (OAuth, subscriptions) go through the same routes: their tokens pass untouched.

use std::sync::Arc;

use super::Route;

/// A base-URL variable, its route and the public endpoint it defaults to.
#[derive(Debug)]
pub struct Var {
    /// The variable's name.
    pub var: &'static str,
    /// The tap's route for it.
    pub route: &'static str,
    /// Where the agent's SDK goes when it is not set.
    pub default: &'static str,
}

/// Anthropic's SDK (Claude Code, qwen-code's anthropic type): no `/v1`.
pub const ANTHROPIC: Var =
    Var { var: "ANTHROPIC_BASE_URL", route: "anthropic", default: "https://api.anthropic.com" };
/// The AI SDK's Anthropic provider (opencode): with `/v1`.
pub const ANTHROPIC_V1: Var = Var {
    var: "ANTHROPIC_BASE_URL",
    route: "anthropic-v1",
    default: "https://api.anthropic.com/v1",
};
/// OpenAI's SDKs and the AI SDK: with `/v1`.
pub const OPENAI: Var =
    Var { var: "OPENAI_BASE_URL", route: "openai", default: "https://api.openai.com/v1" };
/// Gemini CLI with an API key.
pub const GEMINI: Var = Var {
    var: "GOOGLE_GEMINI_BASE_URL",
    route: "gemini",
    default: "https://generativelanguage.googleapis.com",
};
/// Gemini CLI with a Google login (Code Assist).
pub const CODE_ASSIST: Var = Var {
    var: "CODE_ASSIST_ENDPOINT",
    route: "codeassist",
    default: "https://cloudcode-pa.googleapis.com",
};

/// What the agent's settings are read from: its environment (acp-usage's own, which it
/// inherits) and its config files.
pub struct Env<'a> {
    /// A variable of the environment.
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// A file's text.
    pub read_file: &'a dyn Fn(&std::path::Path) -> Option<String>,
}

impl std::fmt::Debug for Env<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env")
    }
}

impl Env<'_> {
    /// A variable that is set and not blank.
    pub fn set(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.trim().is_empty())
    }
}

/// A step that renders settings once the tap listens: `base_url(route)` is the tap's URL for a
/// route.
pub type Finish = Arc<dyn Fn(&dyn Fn(&str) -> String, &mut Resolved) + Send + Sync>;

/// How the agent is to be started so that its calls go through the tap.
#[derive(Default, Clone)]
pub struct Pointing {
    /// The tap's routes.
    pub routes: Vec<Route>,
    /// Variables to set in the agent's environment: name, route, and what follows the route's
    /// base URL.
    pub env: Vec<(String, String, String)>,
    /// Variables to set as they are (`NO_PROXY`).
    pub literal_env: Vec<(String, String)>,
    /// Settings rendered once the tap's URL is known (a config the agent reads from a variable,
    /// command-line overrides).
    pub finish: Vec<Finish>,
    /// Routes whose requests go elsewhere when they carry a header (Codex's ChatGPT login).
    pub alternates: Vec<Alternate>,
    /// Request headers that carry the agent's session id, lowercase.
    pub session_headers: Vec<String>,
    /// Why some of the agent's calls will not reach the tap, to tell the user.
    pub warnings: Vec<String>,
    /// What a program the agent runs may have to tell the user later, through the tap (see
    /// [`Notice`]).
    pub notices: Vec<Notice>,
}

/// The route under which the tap takes notices instead of forwarding: `.` is in no route's
/// name ([`sanitize`]).
pub const NOTICE_ROUTE: &str = ".notice";

/// A warning that only a program the agent starts can know is due (codex-acp's Codex, found
/// or not when the adapter starts it): that program asks for it with a request to
/// `<tap>/<secret>/.notice/<name>`, and the tap logs `text` once, at the WARN level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub name: String,
    pub text: String,
}

impl std::fmt::Debug for Pointing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pointing")
            .field("routes", &self.routes)
            .field("env", &self.env)
            .field("literal_env", &self.literal_env)
            .field("finish", &self.finish.len())
            .field("alternates", &self.alternates)
            .field("session_headers", &self.session_headers)
            .field("warnings", &self.warnings)
            .field("notices", &self.notices)
            .finish()
    }
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
    /// A route to `upstream` (the first one named so wins); its name.
    pub fn route(&mut self, name: &str, upstream: &str) -> String {
        if !self.routes.iter().any(|r| r.name == name) {
            self.routes.push(Route { name: name.to_owned(), upstream: trimmed(upstream) });
        }
        name.to_owned()
    }

    /// Points a base-URL variable at the tap: its route goes where the user's value said, else
    /// to the public endpoint.
    pub fn var(&mut self, v: &Var, env: &Env) {
        let upstream = env.set(v.var);
        let route = self.route(v.route, upstream.as_deref().unwrap_or(v.default));
        self.env.push((v.var.to_owned(), route, String::new()));
    }

    /// What every pointed agent gets besides its own settings: `NO_PROXY` with the loopback
    /// names, when anything is pointed.
    pub fn finish_common(&mut self, env: &Env) {
        if self.routes.is_empty() {
            return;
        }
        for var in ["NO_PROXY", "no_proxy"] {
            let mut value = env.set(var).unwrap_or_default();
            if !value.is_empty() {
                value.push(',');
            }
            value.push_str("127.0.0.1,localhost");
            self.literal_env.push((var.to_owned(), value));
        }
    }

    /// The settings, with `base_url(route)` the tap's URL for a route.
    pub fn resolve(&self, base_url: impl Fn(&str) -> String) -> Resolved {
        let mut out = Resolved::default();
        for (var, route, suffix) in &self.env {
            out.env.push((var.clone(), format!("{}{suffix}", base_url(route))));
        }
        out.env.extend(self.literal_env.iter().cloned());
        for finish in &self.finish {
            finish(&base_url, &mut out);
        }
        out
    }
}

/// A name fit for a path segment.
pub fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}
