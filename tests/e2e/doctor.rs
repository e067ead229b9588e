//! `acp-usage doctor` as a user runs it: the built binary on a scratch machine (its own HOME,
//! PATH, data and config directories, npm prefix) with a Claude Code adapter on PATH.
//!
//! Guarantees checked:
//! - a Claude Code settings file whose `env` sets `ANTHROPIC_BASE_URL` (which defeats the tap)
//!   is a `FAIL` line naming that file, and the exit status is 1;
//! - the same machine without it exits 0, and says what the tap would point;
//! - `--json` is one JSON document with the same verdict;
//! - doctor leaves the machine as it found it (no ledger, no directory made).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::Value;

/// A scratch machine with a `claude-agent-acp` on its PATH.
fn machine(label: &str) -> Scratch {
    let scratch = Scratch::new(label).expect("scratch");
    let bin = scratch.path("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let program = bin.join("claude-agent-acp");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("program");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::create_dir_all(scratch.path("npm")).expect("npm prefix");
    scratch
}

/// `acp-usage doctor <args>` with nothing of the test process's environment but the scratch
/// machine's.
fn doctor(scratch: &Scratch, args: &[&str]) -> Output {
    let path = std::env::join_paths([scratch.path("bin"), "/usr/bin".into(), "/bin".into()])
        .expect("PATH");
    Command::new(relay_binary().expect("binary"))
        .arg("doctor")
        .args(args)
        .env_clear()
        .env("HOME", scratch.home())
        .env("PATH", path)
        .env("XDG_CONFIG_HOME", scratch.path("config"))
        .env("XDG_DATA_HOME", scratch.path("data"))
        .env("XDG_STATE_HOME", scratch.path("state"))
        .env("ACP_USAGE_LEDGER", scratch.path("data/acp-usage/ledger.db"))
        .env("NPM_CONFIG_PREFIX", scratch.path("npm"))
        // Claude Code also reads the project's settings: a directory with none.
        .current_dir(scratch.work())
        .output()
        .expect("doctor runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

/// Every file and directory under `root`, sorted.
fn tree(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn doctor_fails_on_a_claude_settings_override_and_passes_without_it() {
    let scratch = machine("doctor");
    let settings = scratch.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect(".claude");
    std::fs::write(&settings, r#"{"env":{"ANTHROPIC_BASE_URL":"http://127.0.0.1:9"}}"#)
        .expect("settings");
    let before = tree(scratch.root());

    let out = doctor(&scratch, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let fail: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fail.len(), 1, "{text}");
    assert!(fail[0].starts_with("FAIL  claude     tap: "), "{text}");
    assert!(fail[0].contains(&format!("{} sets ANTHROPIC_BASE_URL", settings.display())), "{text}");
    assert!(text.contains("ok    claude     found: claude-agent-acp on PATH"), "{text}");
    let summary = text.lines().last().expect("a summary");
    assert!(summary.starts_with("1 agent found (claude); 1 problem (claude tap)"), "{summary}");

    let out = doctor(&scratch, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(doc["agents"], serde_json::json!(["claude"]));
    assert_eq!(doc["exit"], 1);
    let fail: Vec<&Value> = doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["status"] == "fail")
        .collect();
    assert_eq!(fail.len(), 1, "{doc:#}");
    assert_eq!(fail[0]["agent"], "claude");
    assert_eq!(fail[0]["check"], "tap");
    assert_eq!(fail[0]["path"].as_str(), settings.to_str());

    // It only looked.
    assert_eq!(tree(scratch.root()), before);

    // The same machine without the override: nothing will fail.
    std::fs::write(&settings, r#"{"env":{"DISABLE_TELEMETRY":"1"}}"#).expect("settings");
    let out = doctor(&scratch, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    assert!(text.contains("claude     tap: can point it (anthropic → https://api.anthropic.com)"));
    let out = doctor(&scratch, &["--json"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!((out.status.code(), doc["exit"].as_u64()), (Some(0), Some(0)));
}
