//! GitHub Copilot CLI (`copilot --acp`, npm `@github/copilot`).
//!
//! Copilot CLI 1.0 sends a `usage_update` before each model call whose `used` is its own
//! estimate of the prompt it is about to send and whose `size` is the prompt limit it applies
//! (`maxPromptTokens`, e.g. 168,000 for claude-sonnet-4.5: enforced), no cost, and a `usage` in
//! the prompt result that is cumulative since the session was created or loaded in the process.
//! Its `events.jsonl` (`<home>/session-state/<id>/`) records every call, subagents' (its `task`
//! tool) in the same file. Only its bring-your-own-key provider can be tapped
//! (`COPILOT_PROVIDER_BASE_URL`); its GitHub endpoint is not.

use std::path::Path;

use acp_usage_core::account::Account;
use acp_usage_core::transcript::copilot::CopilotParser;
use serde_json::Value;

use super::acp::{self, AgentUpdate};
use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::{Env, Pointing};
use crate::sources::transcripts::locate::{Locator, dirs, one_file, only};
use crate::sources::transcripts::{Files, Format, Store, string_at, var_or_home};

pub struct Copilot;

/// Copilot CLI's session events.
pub static FORMAT: Format = Format {
    name: "copilot",
    location: |env| var_or_home(env, "COPILOT_HOME", ".copilot"),
    store: Store::Files(Files {
        parser: || Box::new(CopilotParser::default()),
        parser_per_file: false,
        whole_document: false,
        find: |_: &mut Locator, home, session| {
            only(home.join("session-state").join(session).join("events.jsonl"))
        },
        all: |_: &mut Locator, home: &Path| {
            let states = dirs(&home.join("session-state"));
            states.into_iter().filter_map(|d| one_file(&d, |_| "events.jsonl".into())).collect()
        },
        facts: |facts, line| {
            if facts.cwd.is_none() && memchr::memmem::find(line, b"\"session.start\"").is_some() {
                facts.cwd = string_at(line, &["data", "context", "cwd"]);
            }
        },
        side_facts: Files::no_side_facts,
        restarted: None,
        may_hold_call: None,
    }),
    marks_turn_end: true,
};

impl Agent for Copilot {
    fn name(&self) -> &'static str {
        "copilot"
    }

    fn about(&self) -> &'static str {
        "GitHub Copilot CLI copilot --acp"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "Copilot"; the command is `copilot --acp`. The Copilot language
        // server (`@github/copilot-language-server --acp`) is another program.
        word.contains("copilot") && !word.contains("language")
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        // `used` is its own estimate of the prompt it is about to send; inside a turn the
        // calls' own records give the exact figure, so only a stray update is read. `size` is
        // the prompt limit it applies to the model.
        if let Some(used) = update.used.filter(|_| !account.in_turn()) {
            account.agent_used(used, false);
        }
        if let Some(size) = update.size {
            account.agent_window(size);
        }
    }

    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        // Its `usage` counts everything since the session was opened in the process: the turn
        // is what it grew by.
        acp::cumulative_prompt_usage(account, result);
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        // Copilot's BYOK provider; its GitHub endpoint is not tapped (see `docs/tap.md`).
        if let Some(url) = (env.var)("COPILOT_PROVIDER_BASE_URL").filter(|v| !v.is_empty()) {
            let route = p.route("copilot-provider", &url);
            p.env.push(("COPILOT_PROVIDER_BASE_URL".into(), route, String::new()));
        }
    }

    fn untapped(&self, env: &Env) -> Vec<Untapped> {
        if env.set("COPILOT_PROVIDER_BASE_URL").is_some() {
            return Vec::new();
        }
        vec![Untapped {
            why: "Copilot's GitHub login calls an endpoint fixed in Copilot (a BYOK provider, \
                  COPILOT_PROVIDER_BASE_URL, can be pointed)"
                .into(),
            recorded: true,
        }]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "GitHub Copilot",
            program: "copilot",
            args: &["--acp"],
            package: Package::Npm("@github/copilot"),
            registry_id: Some("github-copilot-cli"),
        }]
    }
}
