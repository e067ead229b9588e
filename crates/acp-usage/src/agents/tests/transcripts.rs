//! Unit tests of where each agent's transcripts are found.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agents::*;
use crate::sources::transcripts::{Found, Locations, Locator, Store};

/// The files of `session` in `format` under `locs`.
fn find(locs: &Locations, format: &'static Format, session: &str) -> Found {
    let Store::Files(files) = format.store else { panic!("{format:?} keeps no files") };
    (files.find)(&mut Locator::default(), &locs.of(format).unwrap(), session)
}

fn scratch(name: &str) -> PathBuf {
    crate::test_support::scratch("locate", name)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn claude_files_by_session_id_in_any_project() {
    let root = scratch("claude");
    let id = "1939d985-76a4-4c11-bc40-5be2531ae4d2";
    write(&root.join("projects/-tmp-a/other.jsonl"), "{}\n");
    write(&root.join(format!("projects/-tmp-b/{id}.jsonl")), "{}\n");
    write(&root.join(format!("projects/-tmp-b/{id}/subagents/agent-1.jsonl")), "{}\n");
    let locs = Locations::default().with(&claude::FORMAT, root.clone());
    let found = find(&locs, &claude::FORMAT, id);
    assert_eq!(found.main, Some(root.join(format!("projects/-tmp-b/{id}.jsonl"))));
    assert_eq!(
        found.subagents,
        vec![root.join(format!("projects/-tmp-b/{id}/subagents/agent-1.jsonl"))]
    );
    assert_eq!(find(&locs, &claude::FORMAT, "nope"), Found::default());
}

#[test]
fn codex_rollouts_and_their_subagents() {
    let root = scratch("codex");
    let id = "01a200d9-cdc3-7573-aab2-6025b6a1748f";
    let day = root.join("sessions/2026/11/22");
    write(&day.join(format!("rollout-2026-11-22T01-23-23-{id}.jsonl")), "{}\n");
    write(
        &day.join("rollout-2026-11-22T01-24-00-sub.jsonl"),
        &format!(
            "{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"sub\",\"source\":{{\"subagent\":{{\"thread_spawn\":{{\"parent_thread_id\":\"{id}\"}}}}}}}}}}\n"
        ),
    );
    write(&root.join("sessions/2026/11/21/rollout-x-other.jsonl"), "{}\n");
    let locs = Locations::default().with(&codex::FORMAT, root.clone());
    let found = find(&locs, &codex::FORMAT, id);
    assert_eq!(found.main, Some(day.join(format!("rollout-2026-11-22T01-23-23-{id}.jsonl"))));
    assert_eq!(found.subagents, vec![day.join("rollout-2026-11-22T01-24-00-sub.jsonl")]);
}

#[test]
fn gemini_matches_the_whole_session_id_not_its_prefix() {
    let root = scratch("gemini");
    let id = "445bceee-81d3-49d1-b035-fb98d9e51289";
    let chats = root.join("tmp/work/chats");
    write(
        &chats.join("session-2026-11-22T01-23-445bceee.jsonl"),
        "{\"sessionId\":\"445bceee-0000-0000-0000-000000000000\",\"kind\":\"main\"}\n",
    );
    write(
        &chats.join("session-2026-11-22T01-24-445bceee.jsonl"),
        &format!("{{\"sessionId\":\"{id}\",\"kind\":\"main\"}}\n"),
    );
    write(&chats.join(format!("{id}/sub-1.jsonl")), "{}\n");
    let locs = Locations::default().with(&gemini::FORMAT, root.clone());
    let found = find(&locs, &gemini::FORMAT, id);
    assert_eq!(found.main, Some(chats.join("session-2026-11-22T01-24-445bceee.jsonl")));
    assert_eq!(found.subagents, vec![chats.join(format!("{id}/sub-1.jsonl"))]);
}

fn locations(env: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static) -> Locations {
    Locations::from_env(env)
}

#[test]
fn locations_follow_the_environment() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(*v))
    };
    let l = locations(env(&[("HOME", "/h")]));
    assert_eq!(l.of(&claude::FORMAT), Some(PathBuf::from("/h/.claude")));
    assert_eq!(l.of(&codex::FORMAT), Some(PathBuf::from("/h/.codex")));
    assert_eq!(l.of(&gemini::FORMAT), Some(PathBuf::from("/h/.gemini")));
    assert_eq!(
        l.of(&opencode::FORMAT),
        Some(PathBuf::from("/h/.local/share/opencode/opencode.db"))
    );
    assert_eq!(l.of(&copilot::FORMAT), Some(PathBuf::from("/h/.copilot")));
    assert_eq!(l.of(&cline::FORMAT), Some(PathBuf::from("/h/.cline/data")));
    assert_eq!(l.of(&qwen::FORMAT), Some(PathBuf::from("/h/.qwen")));
    assert_eq!(l.of(&kilo::FORMAT), Some(PathBuf::from("/h/.local/share/kilo/kilo.db")));
    let l = locations(env(&[
        ("HOME", "/h"),
        ("CLAUDE_CONFIG_DIR", "/c"),
        ("CODEX_HOME", "/x"),
        ("GEMINI_CLI_HOME", "/g"),
        ("XDG_DATA_HOME", "/d"),
    ]));
    assert_eq!(l.of(&claude::FORMAT), Some(PathBuf::from("/c")));
    assert_eq!(l.of(&codex::FORMAT), Some(PathBuf::from("/x")));
    assert_eq!(l.of(&gemini::FORMAT), Some(PathBuf::from("/g/.gemini")));
    assert_eq!(l.of(&opencode::FORMAT), Some(PathBuf::from("/d/opencode/opencode.db")));
    assert_eq!(l.of(&kilo::FORMAT), Some(PathBuf::from("/d/kilo/kilo.db")));
    let l = locations(env(&[("HOME", "/h"), ("KILO_DB", "other.db")]));
    assert_eq!(l.of(&kilo::FORMAT), Some(PathBuf::from("/h/.local/share/kilo/other.db")));
    let l = locations(env(&[("KILO_DB", "/k/kilo.db")]));
    assert_eq!(l.of(&kilo::FORMAT), Some(PathBuf::from("/k/kilo.db")));
}
