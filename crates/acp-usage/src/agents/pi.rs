//! pi through pi-acp (npm `pi-acp`, which runs `pi --mode rpc` of
//! `@earendil-works/pi-coding-agent`).
//!
//! pi-acp 0.0.34 sends a `usage_update` after `session/new` and `session/load` and at the end of
//! each turn with pi's own `used` (the last assistant message's tokens) and `size` (its
//! catalog's window for the model: a report), never a cost nor a per-turn `usage`. Its model
//! option values are `provider/model`. pi's session files (`<agent dir>/sessions/--<cwd>--/
//! <timestamp>_<session id>.jsonl`, the agent dir `$PI_CODING_AGENT_DIR` or `~/.pi/agent`;
//! `$PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` of `<agent dir>/settings.json`, holds
//! them without the per-cwd directories) record every
//! billed call with pi's price of it: the main calls, and its cache-warming calls as side calls.
//! pi passes its catalog's base URL to its SDKs, so no variable points it at the tap: not
//! tapped (see `docs/tap.md`); its files miss no billed call.

use std::path::{Path, PathBuf};

use acp_usage_core::transcript::pi::PiParser;

use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::Env;
use crate::sources::transcripts::locate::{Found, dirs, jsonl_files};
use crate::sources::transcripts::{Facts, Files, Format, Store, string_at};

pub struct Pi;

/// pi's session files.
pub static FORMAT: Format = Format {
    name: "pi",
    location: |env| session_dir(env, &|path| std::fs::read_to_string(path).ok()),
    store: Store::Files(Files {
        parser: || Box::new(PiParser::default()),
        parser_per_file: false,
        whole_document: false,
        find: |_, dir, session| find(dir, session),
        all: |_, dir| all(dir),
        facts: line_facts,
        side_facts: Files::no_side_facts,
        restarted: None,
        may_hold_call: None,
    }),
    marks_turn_end: true,
};

impl Agent for Pi {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn about(&self) -> &'static str {
        "pi-acp (pi coding agent)"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name and the command are both `pi-acp`; `pi` itself speaks no ACP.
        word == "pi-acp" || word.starts_with("pi-acp@") || word.starts_with("pi-acp ")
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        // `provider/model`; the model id may itself hold a slash (`openrouter/anthropic/...`).
        let base = super::acp::split_bracket(value).0;
        let id = base.split_once('/').map_or(base, |(_, model)| model);
        (Some(id.to_string()), None)
    }

    fn untapped(&self, _: &Env) -> Vec<Untapped> {
        vec![Untapped {
            why: "pi passes its catalog's (or models.json's) base URL to its SDKs and reads no \
                  base-URL variable"
                .into(),
            recorded: true,
        }]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "pi",
            program: "pi-acp",
            args: &[],
            package: Package::Npm("pi-acp"),
            registry_id: Some("pi-acp"),
        }]
    }
}

/// The session id a file is named after: `<timestamp>_<id>.jsonl`.
/// Where pi writes its session files, as pi 1.5 decides it: `$PI_CODING_AGENT_SESSION_DIR`,
/// else the `sessionDir` of its global settings (`<agent dir>/settings.json`: `~` expanded, a
/// relative path taken from the agent dir as pi-acp takes it to list sessions), else
/// `<agent dir>/sessions`; the agent dir is `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
fn session_dir(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    read_file: &dyn Fn(&Path) -> Option<String>,
) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("PI_CODING_AGENT_SESSION_DIR") {
        return Some(dir);
    }
    let home = set("HOME");
    let agent =
        set("PI_CODING_AGENT_DIR").or_else(|| home.as_ref().map(|h| h.join(".pi/agent")))?;
    // Strict JSON, as pi parses it (a file it cannot parse gives it no settings).
    let text = read_file(&agent.join("settings.json"));
    let settings = text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let configured = settings.as_ref().and_then(|s| s.get("sessionDir")?.as_str());
    let Some(configured) = configured.map(str::trim).filter(|d| !d.is_empty()) else {
        return Some(agent.join("sessions"));
    };
    let expanded = match (configured.strip_prefix("~/"), &home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if configured == "~" => home.clone().unwrap_or_default(),
        _ => PathBuf::from(configured),
    };
    Some(if expanded.is_absolute() { expanded } else { agent.join(expanded) })
}

fn session_of(path: &Path) -> Option<&str> {
    let stem = path.file_stem()?.to_str()?;
    let (_, id) = stem.rsplit_once('_')?;
    (!id.is_empty()).then_some(id)
}

/// The directories session files are in: the sessions directory itself (a session dir set
/// outright holds them flat) and its per-cwd directories.
fn session_dirs(sessions: &Path) -> Vec<PathBuf> {
    let mut all = vec![sessions.to_path_buf()];
    all.extend(dirs(sessions));
    all
}

fn find(sessions: &Path, session: &str) -> Found {
    let main = session_dirs(sessions)
        .iter()
        .flat_map(|dir| jsonl_files(dir))
        .find(|path| session_of(path) == Some(session));
    Found { main, subagents: Vec::new() }
}

/// Every session file, by the session id in its name.
fn all(sessions: &Path) -> Vec<(String, Found)> {
    session_dirs(sessions)
        .iter()
        .flat_map(|dir| jsonl_files(dir))
        .filter_map(|path| {
            let id = session_of(&path)?.to_owned();
            Some((id, Found { main: Some(path), subagents: Vec::new() }))
        })
        .collect()
}

/// What a line says of its session: the header's `cwd`; the name given to the session
/// (`session_info`), else its first prompt (what pi-acp lists as the title).
fn line_facts(facts: &mut Facts, line: &[u8]) {
    let has = |pattern: &[u8]| memchr::memmem::find(line, pattern).is_some();
    if facts.cwd.is_none() && has(b"\"type\":\"session\"") {
        facts.cwd = string_at(line, &["cwd"]);
    } else if has(b"\"type\":\"session_info\"") {
        facts.set_title(2, string_at(line, &["name"]));
    } else if facts.title.is_none() && has(b"\"role\":\"user\"") {
        let Ok(entry) = serde_json::from_slice::<serde_json::Value>(line) else { return };
        let content = &entry["message"]["content"];
        let text = match content.as_str() {
            Some(text) => Some(text.to_owned()),
            None => content
                .as_array()
                .and_then(|blocks| blocks.iter().find_map(|b| b["text"].as_str()))
                .map(str::to_owned),
        };
        let title = text.map(|t| t.lines().next().unwrap_or("").to_owned());
        facts.set_title(0, title.filter(|t| !t.is_empty()));
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::agents::Profile;
    use crate::sources::transcripts::{Locations, Locator};

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch("pi", name)
    }

    fn write(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "{}\n").unwrap();
    }

    #[test]
    fn files_by_session_id_per_cwd_or_flat() {
        let root = scratch("find");
        let id = "01a216a5-6dc0-7069-b464-52e7cff651e8";
        let file = root.join(format!("--tmp-proj--/2026-11-26T06-57-50-016Z_{id}.jsonl"));
        write(&file);
        write(&root.join("--tmp-other--/2026-11-26T06-57-50-016Z_01a216a5-0000.jsonl"));
        let flat = root.join("2026-11-26T07-00-00-000Z_flat-id.jsonl");
        write(&flat);
        let Store::Files(files) = FORMAT.store else { unreachable!() };
        assert_eq!((files.find)(&mut Locator::default(), &root, id).main, Some(file.clone()));
        assert_eq!((files.find)(&mut Locator::default(), &root, "flat-id").main, Some(flat));
        assert_eq!((files.find)(&mut Locator::default(), &root, "01a216a5").main, None);
        let mut ids: Vec<String> =
            (files.all)(&mut Locator::default(), &root).into_iter().map(|(id, _)| id).collect();
        ids.sort();
        assert_eq!(ids, ["01a216a5-0000", id, "flat-id"]);
    }

    #[test]
    fn location_follows_pi_variables() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            Locations::from_env(move |name: &str| {
                vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(*v))
            })
        };
        let at = |vars| env(vars).of(&FORMAT);
        assert_eq!(at(&[("HOME", "/h")]), Some(PathBuf::from("/h/.pi/agent/sessions")));
        assert_eq!(
            at(&[("HOME", "/h"), ("PI_CODING_AGENT_DIR", "/a")]),
            Some(PathBuf::from("/a/sessions"))
        );
        assert_eq!(
            at(&[
                ("HOME", "/h"),
                ("PI_CODING_AGENT_DIR", "/a"),
                ("PI_CODING_AGENT_SESSION_DIR", "/s")
            ]),
            Some(PathBuf::from("/s"))
        );
    }

    #[test]
    fn location_follows_the_session_dir_setting() {
        let env = |name: &str| match name {
            "HOME" => Some(OsString::from("/h")),
            _ => None,
        };
        let settings = |text: &'static str| {
            move |path: &Path| {
                (path == Path::new("/h/.pi/agent/settings.json")).then(|| text.into())
            }
        };
        let at = |text: &'static str| session_dir(&env, &settings(text));
        assert_eq!(at("{}"), Some(PathBuf::from("/h/.pi/agent/sessions")));
        assert_eq!(at(r#"{"sessionDir": "/s"}"#), Some(PathBuf::from("/s")));
        assert_eq!(at(r#"{"sessionDir": "~/pi-sessions"}"#), Some(PathBuf::from("/h/pi-sessions")));
        // A file pi cannot parse gives it no settings.
        assert_eq!(
            at("{\"sessionDir\": \"/s\", // mine\n}"),
            Some(PathBuf::from("/h/.pi/agent/sessions"))
        );
        assert_eq!(at(r#"{"sessionDir": "logs"}"#), Some(PathBuf::from("/h/.pi/agent/logs")));
        assert_eq!(at(r#"{"sessionDir": " "}"#), Some(PathBuf::from("/h/.pi/agent/sessions")));
        // The variable wins over the setting.
        let with_var = |name: &str| match name {
            "PI_CODING_AGENT_SESSION_DIR" => Some(OsString::from("/v")),
            _ => env(name),
        };
        let read = settings(r#"{"sessionDir": "/s"}"#);
        assert_eq!(session_dir(&with_var, &read), Some(PathBuf::from("/v")));
    }

    #[test]
    fn recognised_and_models() {
        let p = Profile::detect(Some("pi-acp"), &[]);
        assert_eq!(p.name(), "pi");
        assert_eq!(Profile::detect(None, &["/x/.bin/pi-acp".into()]).name(), "pi");
        // A user or directory named `pi` is no sign of pi-acp.
        assert!(Profile::detect_before_start(&["/home/pi/bin/some-agent".into()]).is_generic());
        assert_eq!(
            p.resolve_model("anthropic/claude-sonnet-4-5").0.as_deref(),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(
            p.resolve_model("openrouter/anthropic/claude-sonnet-4.5").0.as_deref(),
            Some("anthropic/claude-sonnet-4.5")
        );
    }

    #[test]
    fn facts_from_lines() {
        let mut facts = Facts::default();
        for line in [
            r#"{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/tmp/proj"}"#,
            r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"Say hello.\nmore"}]}}"#,
            r#"{"type":"message","id":"b","message":{"role":"user","content":"Later."}}"#,
        ] {
            line_facts(&mut facts, line.as_bytes());
        }
        assert_eq!(facts.cwd.as_deref(), Some("/tmp/proj"));
        assert_eq!(facts.clone().title().as_deref(), Some("Say hello."));
        line_facts(&mut facts, br#"{"type":"session_info","id":"c","name":"My session"}"#);
        assert_eq!(facts.title().as_deref(), Some("My session"));
    }
}
