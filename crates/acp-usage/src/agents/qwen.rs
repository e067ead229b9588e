//! qwen-code (`qwen --acp`, npm `@qwen-code/qwen-code`).
//!
//! qwen-code 0.24 reports each model call's exact usage on an empty `agent_message_chunk`
//! (`_meta.usage`: input with the cache, output with thoughts; subagent calls tagged with
//! `parentToolCallId`), a `usage_update` per call whose `used` leaves the output out and whose
//! `size` is the model's `contextLimit` (also in `session/new`'s model list), no cost, no
//! per-turn `usage`; its model ids look like `$runtime|openai|gpt-5.2(openai)`. Its memory
//! extraction and prompt suggestion calls are reported nowhere (the tap sees them). The relay
//! takes the per-call reports; its chat files (`<dir>/projects/<escaped cwd>/chats/<id>.jsonl`,
//! `ui_telemetry` records) are read by `import` alone.

use std::path::{Path, PathBuf};

use acp_usage_core::TokenRecord;
use acp_usage_core::account::{Account, Role};
use acp_usage_core::estimate::Family;
use acp_usage_core::transcript::qwen::QwenParser;
use serde::Deserialize;
use serde_json::Value;

use super::acp::{self, AcpUsage, AgentUpdate, split_bracket};
use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::{ANTHROPIC, Env, OPENAI, Pointing};
use crate::sources::transcripts::locate::{Found, Locator, only, sorted_entries};
use crate::sources::transcripts::{Files, Format, Store, var_or_home};

pub struct Qwen;

/// qwen-code's chat records (read by `import` only).
pub static FORMAT: Format = Format {
    name: "qwen",
    location: |env| {
        let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
        set("QWEN_RUNTIME_DIR").or_else(|| var_or_home(env, "QWEN_HOME", ".qwen"))
    },
    store: Store::Files(Files {
        parser: || Box::new(QwenParser::default()),
        parser_per_file: false,
        whole_document: false,
        find: |_: &mut Locator, dir, session| {
            let file = format!("{session}.jsonl");
            let mut found = Found::default();
            for project in sorted_entries(&dir.join("projects")) {
                let path = project.join("chats").join(&file);
                if path.is_file() {
                    found = only(path);
                    break;
                }
            }
            found
        },
        all: |_: &mut Locator, dir| all(dir),
        facts: Files::no_facts,
        side_facts: Files::no_side_facts,
        restarted: None,
        may_hold_call: None,
    }),
    marks_turn_end: true,
};

impl Agent for Qwen {
    fn name(&self) -> &'static str {
        "qwen"
    }

    fn about(&self) -> &'static str {
        "qwen-code qwen --acp"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "qwen-code"; the command is `qwen --acp`.
        word.contains("qwen")
    }

    fn default_family(&self) -> Family {
        Family::OpenAi
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        (Some(model_id(split_bracket(value).0).to_string()), None)
    }

    fn reported_windows(&self, result: &Value) -> Vec<(String, u64)> {
        acp::context_limits(result)
    }

    fn call_in_chunk(&self, params: &str) -> Option<(TokenRecord, Role)> {
        if !params.contains("\"usage\"") {
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

    fn unrecorded_side_calls(&self, _: Option<&str>) -> &'static [&'static str] {
        &["memory extraction", "prompt suggestion"]
    }

    fn side_call_markers(&self) -> &'static [&'static str] {
        // qwen-code's prompt suggestion and memory extraction.
        &["[SUGGESTION MODE", "memory extraction subagent"]
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        // `used` is the call's prompt without its output; inside a turn the calls' own records
        // give the exact figure, so only a stray update is read. `size` is the model's
        // `contextLimit`.
        if let Some(used) = update.used.filter(|_| !account.in_turn()) {
            account.agent_used(used, false);
        }
        if let Some(size) = update.size {
            account.reported_window(size);
        }
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        p.var(&OPENAI, env);
        p.var(&ANTHROPIC, env);
        // A model of `modelProviders` carries its own `baseUrl`, which qwen-code takes over
        // the variables.
        for (path, settings) in settings_files(env) {
            let providers = settings.get("modelProviders").and_then(Value::as_object);
            let models = providers.into_iter().flat_map(|p| p.values()).filter_map(Value::as_array);
            if models.flatten().any(|m| m.get("baseUrl").is_some_and(Value::is_string)) {
                p.warnings.push(format!(
                    "{} sets a baseUrl in modelProviders, which qwen-code prefers to the tap's: \
                     those models' calls will not be tapped",
                    path.display()
                ));
            }
        }
    }

    fn untapped(&self, env: &Env) -> Vec<Untapped> {
        let oauth = settings_files(env).iter().any(|(_, s)| {
            s.pointer("/security/auth/selectedType").and_then(Value::as_str) == Some("qwen-oauth")
        });
        if !oauth {
            return Vec::new();
        }
        vec![Untapped {
            why: "the Qwen OAuth login calls an endpoint fixed in qwen-code".into(),
            // Its memory extraction and prompt suggestions are reported nowhere.
            recorded: false,
        }]
    }

    fn import_format(&self) -> Option<&'static Format> {
        // The relay has qwen's own per-call reports; its chat files are read by import alone.
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Qwen Code",
            program: "qwen",
            args: &["--acp"],
            package: Package::Npm("@qwen-code/qwen-code"),
            registry_id: Some("qwen-code"),
        }]
    }
}

/// qwen-code's settings files that parse, user first (`$QWEN_HOME`, else `~/.qwen`), then the
/// project's in the working directory.
fn settings_files(env: &Env) -> Vec<(PathBuf, Value)> {
    let user = env
        .set("QWEN_HOME")
        .map(PathBuf::from)
        .or_else(|| env.set("HOME").map(|h| Path::new(&h).join(".qwen")));
    // In the home directory, the project's settings are the user's.
    let project =
        std::env::current_dir().ok().map(|c| c.join(".qwen")).filter(|p| Some(p) != user.as_ref());
    [user, project]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("settings.json"))
        .filter_map(|path| {
            let settings = super::settings_json(&(env.read_file)(&path)?)?;
            Some((path, settings))
        })
        .collect()
}

/// qwen-code's model id as a catalog id: `$runtime|openai|gpt-5.2(openai)` and
/// `gpt-5.2(openai)` are `gpt-5.2` (the auth type rides along as a prefix and a suffix).
fn model_id(value: &str) -> &str {
    let id = value.rsplit('|').next().unwrap_or(value);
    match id.strip_suffix(')').and_then(|v| v.rsplit_once('(')) {
        Some((model, _)) => model,
        None => id,
    }
}

/// `<qwen dir>/projects/<escaped cwd>/chats/<session>.jsonl`.
fn all(dir: &Path) -> Vec<(String, Found)> {
    let mut all = Vec::new();
    for project in sorted_entries(&dir.join("projects")) {
        for path in sorted_entries(&project.join("chats")) {
            if path.extension().is_none_or(|e| e != "jsonl") || !path.is_file() {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            all.push((id, Found { main: Some(path), subagents: Vec::new() }));
        }
    }
    all
}
