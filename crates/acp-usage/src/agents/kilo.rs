//! kilo (`kilo acp`, npm `@kilocode/cli`): a fork of opencode, with opencode's formats in its
//! own places.
//!
//! Over ACP kilo 7.7 behaves as opencode 1.18 (the same code): one `usage_update` per turn whose
//! `used` leaves the last call's output out, whose `size` is models.dev's (1,000,000 for
//! claude-sonnet-4-5, which the API runs at 200,000 without the 1M beta header it does not
//! send), whose `cost` sums the session's stored messages (a subagent's cost included: kilo adds
//! it to the calling message); a per-turn `usage` that is the last call's. Its store is an
//! SQLite database with opencode's schema (`$KILO_DB`, a relative name under
//! `<data>/kilo/`; else `<data>/kilo/kilo.db`), read by opencode's reader. Its title call
//! (`claude-haiku-4-5` by default) is in no record. The tap is pointed through the base-URL
//! variables its AI-SDK providers read, `KILO_CONFIG_CONTENT` for every provider whose `baseURL`
//! its configs set (files included: see `opencode::config`), and `KILO_API_URL`, the root of the
//! Kilo Gateway provider (`kilo`: OpenAI Chat Completions to `<root>/api/openrouter/`, anonymous
//! for its free models without a login) and of kilo's other calls to its own service, which the
//! tap forwards as they are. The gateway's calls are exact when its stream carries usage, and
//! counted from the content (estimated) when not.

use std::path::PathBuf;

use acp_usage_core::account::Account;
use serde_json::Value;

use super::acp::{AgentUpdate, split_bracket};
use super::opencode;
use super::{Agent, Launch, Package};
use crate::sources::tap::point::{ANTHROPIC_V1, Env, OPENAI, Pointing, Var};
use crate::sources::transcripts::{Format, Store};

pub struct Kilo;

/// The root of kilo's own service (`KILO_API_URL`): its gateway provider's calls go to
/// `<root>/api/openrouter/`, its login and account calls under the same root.
pub const KILO_API: Var =
    Var { var: "KILO_API_URL", route: "kilo-api", default: "https://api.kilo.ai" };

/// kilo's SQLite store (opencode's schema).
pub static FORMAT: Format = Format {
    name: "kilo",
    location: |env| {
        let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = || {
            let data = set("XDG_DATA_HOME").or_else(|| set("HOME").map(|h| h.join(".local/share")));
            data.map(|d| d.join("kilo"))
        };
        match set("KILO_DB") {
            Some(db) if db.is_absolute() => Some(db),
            // A relative name is one in kilo's data directory.
            Some(db) => dir().map(|d| d.join(db)),
            None => dir().map(|d| d.join("kilo.db")),
        }
    },
    store: Store::OpencodeDb,
    marks_turn_end: true,
};

impl Agent for Kilo {
    fn name(&self) -> &'static str {
        "kilo"
    }

    fn about(&self) -> &'static str {
        "kilo acp (Kilo Code CLI)"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "Kilo"; the command is `kilo acp` (or `kilocode`), its launcher
        // under `@kilocode/cli`.
        word == "kilo" || word.starts_with("kilo ") || word.contains("kilocode")
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        // `providerID/modelID`, as opencode's; kilo's own window is models.dev's copy.
        (Some(opencode::model_id(split_bracket(value).0).to_string()), None)
    }

    fn unrecorded_side_calls(&self, _: Option<&str>) -> &'static [&'static str] {
        &["session title"]
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        opencode::usage_update(account, update);
    }

    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        opencode::prompt_result(account, result);
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        // Read only when no config names a base URL for the provider.
        p.var(&ANTHROPIC_V1, env);
        p.var(&OPENAI, env);
        p.var(&KILO_API, env);
        opencode::point_config(p, env, &opencode::config::KILO);
    }

    fn session_headers(&self) -> &'static [&'static str] {
        &["x-session-affinity", "x-session-id"]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Kilo",
            program: "kilo",
            args: &["acp"],
            package: Package::Npm("@kilocode/cli"),
            registry_id: Some("kilo"),
        }]
    }
}

#[cfg(test)]
mod tests {
    use crate::agents::{Profile, point};

    #[test]
    fn the_gateway_root_is_pointed() {
        let none = |_: &std::path::Path| None;
        let resolve = |vars: &'static [(&'static str, &'static str)]| {
            let env = move |name: &str| {
                vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
            };
            let p = point(Profile::named("kilo").unwrap(), &env, &none);
            let upstream = p.routes.iter().find(|r| r.name == "kilo-api").unwrap().upstream.clone();
            let resolved = p.resolve(|route| format!("http://tap/{route}"));
            let url = resolved.env.iter().find(|(k, _)| k == "KILO_API_URL").unwrap().1.clone();
            (upstream, url)
        };
        // The gateway's calls go to `<root>/api/openrouter/...`: the root is the tap's route.
        assert_eq!(resolve(&[]), ("https://api.kilo.ai".into(), "http://tap/kilo-api".into()));
        assert_eq!(
            resolve(&[("KILO_API_URL", "http://127.0.0.1:9/")]),
            ("http://127.0.0.1:9".into(), "http://tap/kilo-api".into())
        );
    }
}
