//! cline (`cline --acp`, npm `cline`).
//!
//! cline 3.0 sends no usage at all; its model option is the concrete model id. Its
//! `messages.json` (`<data>/sessions/<id>/<id>.messages.json`, one JSON document it rewrites
//! whole) records every call; `<id>.json` beside it holds the session's `cwd` and title. Its
//! base URL lives in its `providers.json` only: not tapped (see `docs/tap.md`).

use std::path::Path;

use acp_usage_core::transcript::cline::ClineParser;
use serde_json::Value;

use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::Env;
use crate::sources::transcripts::locate::{Found, Locator, dirs, one_file, only};
use crate::sources::transcripts::{Facts, Files, Format, Store, var_or_home};

pub struct Cline;

/// cline's conversation documents.
pub static FORMAT: Format = Format {
    name: "cline",
    location: |env| var_or_home(env, "CLINE_DATA_DIR", ".cline/data"),
    store: Store::Files(Files {
        parser: || Box::new(ClineParser::default()),
        parser_per_file: false,
        whole_document: true,
        find: |_: &mut Locator, data, session| {
            only(data.join("sessions").join(session).join(format!("{session}.messages.json")))
        },
        all: |_: &mut Locator, data: &Path| {
            let sessions = dirs(&data.join("sessions"));
            sessions
                .into_iter()
                .filter_map(|d| one_file(&d, |id| format!("{id}.messages.json")))
                .collect()
        },
        facts: Files::no_facts,
        side_facts: |_, id, found| side_facts(found, id),
        restarted: None,
        may_hold_call: None,
    }),
    marks_turn_end: true,
};

impl Agent for Cline {
    fn name(&self) -> &'static str {
        "cline"
    }

    fn about(&self) -> &'static str {
        "cline --acp"
    }

    fn recognises(&self, word: &str) -> bool {
        word == "cline" || word.starts_with("cline-") || word.starts_with("cline ")
    }

    fn untapped(&self, _: &Env) -> Vec<Untapped> {
        vec![Untapped {
            why: "cline reads its base URL only from its providers.json, which acp-usage does not \
                  rewrite"
                .into(),
            recorded: true,
        }]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Cline",
            program: "cline",
            args: &["--acp"],
            package: Package::Npm("cline"),
            registry_id: Some("cline"),
        }]
    }
}

/// cline's `<id>.json` beside the conversation: `cwd`, `metadata.title`.
fn side_facts(found: &Found, id: &str) -> Facts {
    let Some(dir) = found.main.as_deref().and_then(Path::parent) else { return Facts::default() };
    let Ok(text) = std::fs::read(dir.join(format!("{id}.json"))) else { return Facts::default() };
    let v: Value = serde_json::from_slice(&text).unwrap_or_default();
    let s = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(String::from);
    Facts { cwd: s(&v["cwd"]), title: s(&v["metadata"]["title"]).map(|t| (0, t)) }
}
