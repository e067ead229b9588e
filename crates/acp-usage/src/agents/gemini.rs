//! Gemini CLI (`gemini --acp`, npm `@google/gemini-cli`).
//!
//! It reports only `_meta.quota` on the prompt result: per-turn input (with cache) and output
//! without thoughts; its window for every Gemini 2.5/3 model is 1,048,576. Its chat records
//! (`<dir>/tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl`, whose first line carries
//! the whole `sessionId`; subagents in `chats/<id>/`) record every call, but not the end of a
//! turn (a reply's text comes before the tool call that follows it). The tap is pointed
//! through `GOOGLE_GEMINI_BASE_URL` (API key) and `CODE_ASSIST_ENDPOINT` (Google login).

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use acp_usage_core::estimate::Family;
use acp_usage_core::transcript::gemini::{GeminiParser, session_id_of_first_line};
use serde_json::Value;

use super::acp::split_bracket;
use super::{Agent, Launch, Package, Plan};
use crate::sources::tap::point::{CODE_ASSIST, Env, GEMINI, Pointing};
use crate::sources::transcripts::locate::{Found, Locator, dirs, files, first_line, jsonl_files};
use crate::sources::transcripts::{Facts, Files, Format, Store, var_or_home};

/// gemini-cli's `tokenLimit()` for every Gemini 2.5/3 model.
const GEMINI_WINDOW: u64 = 1_048_576;

pub struct Gemini;

/// Gemini CLI's chat records.
pub static FORMAT: Format = Format {
    name: "gemini",
    location: |env| var_or_home(env, "GEMINI_CLI_HOME", "").map(|h| h.join(".gemini")),
    store: Store::Files(Files {
        parser: || Box::new(GeminiParser::default()),
        parser_per_file: false,
        whole_document: false,
        find: |_: &mut Locator, dir, session| find(dir, session),
        all: |_: &mut Locator, dir| all(dir),
        facts: Files::no_facts,
        side_facts: |dir, _, found| Facts { cwd: project(found, &projects(dir)), title: None },
        restarted: None,
        may_hold_call: None,
    }),
    // Gemini CLI records a reply's text before the tool call that follows it.
    marks_turn_end: false,
};

impl Agent for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn plan(&self) -> Option<Plan> {
        Some(Plan { provider: "google", word: "Gemini", own_family: None })
    }

    fn about(&self) -> &'static str {
        "gemini-cli --acp"
    }

    fn recognises(&self, word: &str) -> bool {
        word.contains("gemini")
    }

    fn default_family(&self) -> Family {
        Family::Gemini
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        let base = split_bracket(value).0;
        if base.starts_with("auto") {
            (None, Some(GEMINI_WINDOW))
        } else if base.starts_with("gemini") {
            (Some(base.to_string()), Some(GEMINI_WINDOW))
        } else {
            (Some(base.to_string()), None)
        }
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        // With no auth type chosen, a base URL alone switches Gemini CLI to its `gateway`
        // auth: the API-key route is pointed only when the user chose one (or had set it).
        if (env.var)(GEMINI.var).is_some() || auth_chosen(env) {
            p.var(&GEMINI, env);
        }
        p.var(&CODE_ASSIST, env);
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Gemini CLI",
            program: "gemini",
            args: &["--acp"],
            package: Package::Npm("@google/gemini-cli"),
            registry_id: Some("gemini"),
        }]
    }
}

/// Whether Gemini CLI's settings name an auth type (`security.auth.selectedType`).
fn auth_chosen(env: &Env) -> bool {
    let Some(home) = (env.var)("GEMINI_CLI_HOME").or_else(|| (env.var)("HOME")) else {
        return false;
    };
    let path = Path::new(&home).join(".gemini").join("settings.json");
    let Some(text) = (env.read_file)(&path) else { return false };
    let Some(settings) = super::settings_json(&text) else { return false };
    settings.pointer("/security/auth/selectedType").is_some_and(|t| t.is_string())
}

/// Gemini CLI's `projects.json`: project directory by its short name (`tmp/<name>/`).
fn projects(dir: &Path) -> HashMap<String, String> {
    let Ok(text) = std::fs::read(dir.join("projects.json")) else { return HashMap::new() };
    let v: Value = serde_json::from_slice(&text).unwrap_or_default();
    let Some(projects) = v["projects"].as_object() else { return HashMap::new() };
    projects
        .iter()
        .filter_map(|(path, name)| Some((name.as_str()?.to_owned(), path.clone())))
        .collect()
}

fn project(found: &Found, projects: &HashMap<String, String>) -> Option<String> {
    // `<dir>/tmp/<name>/chats/<file>`.
    let name = found.main.as_deref()?.parent()?.parent()?.file_name()?.to_str()?;
    projects.get(name).cloned()
}

/// Every chat file under `<dir>/tmp/<project>/chats/`, by the session id its first line names
/// (the larger of two files of one id: see [`find`]); also older versions' whole-document
/// `session-*.json` files.
fn all(dir: &Path) -> Vec<(String, Found)> {
    let mut all: std::collections::BTreeMap<String, Found> = Default::default();
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    for project in dirs(&dir.join("tmp")) {
        let chats = project.join("chats");
        for path in files(&chats) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if !name.starts_with("session-") {
                continue;
            }
            let head = if name.ends_with(".jsonl") {
                first_line(&path)
            } else if name.ends_with(".json") {
                // One document: its metadata and messages together (bounded: see first_line).
                std::fs::File::open(&path).ok().and_then(|f| {
                    let mut doc = Vec::new();
                    f.take(64 << 20).read_to_end(&mut doc).ok().map(|_| doc)
                })
            } else {
                None
            };
            let Some(id) = head.and_then(|l| session_id_of_first_line(&l)) else { continue };
            let found = all.entry(id.clone()).or_default();
            if found.main.as_deref().is_none_or(|m| size(&path) > size(m)) {
                found.main = Some(path);
                found.subagents = jsonl_files(&chats.join(&id));
            }
        }
    }
    all.into_iter().collect()
}

fn find(dir: &Path, session: &str) -> Found {
    let mut found = Found::default();
    let Some(short) = session.get(..8) else { return found };
    let suffix = format!("-{short}.jsonl");
    for project in dirs(&dir.join("tmp")) {
        let chats = project.join("chats");
        for path in files(&chats) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if name.starts_with("session-")
                && name.ends_with(&suffix)
                && first_line(&path)
                    .is_some_and(|l| session_id_of_first_line(&l).as_deref() == Some(session))
            {
                // A process that loads the session first writes a stub file of the same id,
                // then appends to the original: the larger file is the conversation.
                let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
                if found.main.as_deref().is_none_or(|m| size(&path) > size(m)) {
                    found.main = Some(path);
                }
            }
        }
        if found.main.is_some() {
            found.subagents = jsonl_files(&chats.join(session));
            break;
        }
    }
    found
}
