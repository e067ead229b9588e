//! Setup's plans on the fixture settings files: an entry per agent, everything else kept byte for
//! byte, a second run a no-op, `--remove` giving the file back.

use std::path::PathBuf;

use super::*;

const ZED_FIXTURE: &str = include_str!("../../../../../tests/fixtures/setup/zed-settings.json");
const JETBRAINS_FIXTURE: &str =
    include_str!("../../../../../tests/fixtures/setup/jetbrains-acp.json");
const ZED_REGISTRY_FIXTURE: &str =
    include_str!("../../../../../tests/fixtures/setup/zed-registry-settings.json");

/// Claude's adapter and Codex on PATH, opencode in npm's prefix.
fn found() -> Vec<Found> {
    let at = |profile: &str, dir: &str, place: Place| {
        let profile = Profile::named(profile).unwrap();
        let launch = &profile.launches()[0];
        let path = PathBuf::from(dir).join(launch.program);
        Found { profile, launch, path, place, registry: None, editor_env: Default::default() }
    };
    vec![
        at("claude", "/usr/local/bin", Place::Path),
        at("codex", "/usr/local/bin", Place::Path),
        at("opencode", "/home/u/.npm-global/bin", Place::NpmGlobal),
    ]
}

fn agents(editor: Editor, launcher: &Launcher) -> Vec<Agent> {
    found().iter().map(|f| Agent::new(editor, f, launcher)).collect()
}

fn on_path() -> Launcher {
    Launcher { command: "acp-usage".into(), args: vec![] }
}

#[test]
fn zed_gets_an_entry_per_agent_and_keeps_the_rest() {
    let agents = agents(Editor::Zed, &on_path());
    let plan = plan_setup(Editor::Zed, Some(ZED_FIXTURE), &agents, false).unwrap();
    assert_eq!(
        plan.report,
        [
            "added      Claude Agent (metered): claude-agent-acp on PATH",
            "added      Codex (metered): codex-acp on PATH",
            "added      OpenCode (metered): /home/u/.npm-global/bin/opencode in npm's global prefix",
        ]
    );
    assert_eq!(plan.warning, None);
    let after = plan.after.unwrap();
    // The entries go first in `agent_servers`; the fixture is otherwise unchanged.
    let entries = r#"
    "Claude Agent (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "claude-agent-acp"]
    },
    "Codex (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "codex-acp"]
    },
    "OpenCode (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "/home/u/.npm-global/bin/opencode", "acp"]
    },"#;
    let at = ZED_FIXTURE.find("\"agent_servers\": {").unwrap() + "\"agent_servers\": {".len();
    assert_eq!(after, format!("{}{entries}{}", &ZED_FIXTURE[..at], &ZED_FIXTURE[at..]));

    let again = plan_setup(Editor::Zed, Some(&after), &agents, false).unwrap();
    assert_eq!(again.after.as_deref(), Some(after.as_str()));
    assert!(again.report.iter().all(|l| l.starts_with("unchanged  ")), "{:?}", again.report);

    let removed = plan_remove(Editor::Zed, Some(&after), false).unwrap();
    assert_eq!(removed.after.as_deref(), Some(ZED_FIXTURE));
    assert_eq!(removed.report.len(), 3);
}

#[test]
fn jetbrains_gets_strict_json_with_absolute_paths() {
    let npx = Launcher {
        command: "/usr/bin/npx".into(),
        args: vec!["-y".into(), "acp-usage@9.9.9".into()],
    };
    let agents = agents(Editor::JetBrains, &npx);
    let after = plan_setup(Editor::JetBrains, Some(JETBRAINS_FIXTURE), &agents, false)
        .unwrap()
        .after
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&after).expect("strict JSON");
    let servers = &value["agent_servers"];
    assert_eq!(
        servers["Claude Agent (metered)"],
        serde_json::json!({"command": "/usr/bin/npx",
            "args": ["-y", "acp-usage@9.9.9", "--", "/usr/local/bin/claude-agent-acp"]})
    );
    assert_eq!(servers["OpenCode (metered)"]["args"][4], "acp");
    // Four spaces, as the file has them.
    assert!(after.contains("\n        \"Codex (metered)\": {\n            \"command\""), "{after}");
    assert_eq!(
        plan_remove(Editor::JetBrains, Some(&after), false).unwrap().after.unwrap(),
        JETBRAINS_FIXTURE
    );
}

#[test]
fn a_file_setup_created_goes_on_remove() {
    let agents = agents(Editor::JetBrains, &on_path());
    let created = plan_setup(Editor::JetBrains, None, &agents, false).unwrap().after.unwrap();
    assert!(created.starts_with("{\n  \"agent_servers\": {\n"), "{created}");
    let removed = plan_remove(Editor::JetBrains, Some(&created), false).unwrap();
    assert_eq!(removed.after, None);
    // No file, or an empty one: nothing to remove, nothing deleted.
    assert_eq!(plan_remove(Editor::Zed, None, false).unwrap().after, None);
    assert_eq!(plan_remove(Editor::Zed, Some(""), false).unwrap().after.as_deref(), Some(""));
}

#[cfg(unix)]
#[test]
fn writes_replace_the_file_and_keep_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("acp-usage-setup-write-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("zed").join("settings.json");
    // A missing directory is created.
    write_atomically(&file, "{}\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    write_atomically(&file, "{\n}\n").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\n}\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(file.parent().unwrap()).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_layout_remove_cannot_restore_is_said() {
    // `{` and `}` on lines of their own and nothing between: what setup writes into a missing
    // file looks the same once its entries are gone, so `--remove` deletes the file.
    let plan =
        plan_setup(Editor::Zed, Some("{\n}\n"), &agents(Editor::Zed, &on_path()), true).unwrap();
    assert!(plan.warning.is_some());
    let plan =
        plan_setup(Editor::Zed, Some("{}\n"), &agents(Editor::Zed, &on_path()), true).unwrap();
    assert_eq!(plan.warning, None);
}

#[test]
fn own_keys_cover_every_launch() {
    let keys = own_keys();
    for key in ["Claude Agent (metered)", "Claude Code (metered)", "Codex (metered)"] {
        assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
    }
    assert_eq!(keys.iter().filter(|k| *k == "Codex (metered)").count(), 1);
}

#[test]
fn a_zed_registry_agent_gets_its_command_and_env_and_comes_out_again() {
    let found = crate::test_support::claude_from_zed_registry(
        PathBuf::from("/home/u/.config/zed/settings.json"),
        &[("DISABLE_AUTOUPDATER", "1")],
    );
    let agents = [Agent::new(Editor::Zed, &found, &on_path())];
    let plan = plan_setup(Editor::Zed, Some(ZED_REGISTRY_FIXTURE), &agents, false).unwrap();
    assert_eq!(
        plan.report,
        ["added      Claude Agent (metered): claude-acp added in Zed from the ACP registry (npx)"]
    );
    let after = plan.after.unwrap();
    let entry = r#"
    "Claude Agent (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"],
      "env": {"DISABLE_AUTOUPDATER": "1"}
    },"#;
    let at =
        ZED_REGISTRY_FIXTURE.find("\"agent_servers\": {").unwrap() + "\"agent_servers\": {".len();
    assert_eq!(
        after,
        format!("{}{entry}{}", &ZED_REGISTRY_FIXTURE[..at], &ZED_REGISTRY_FIXTURE[at..])
    );
    let removed = plan_remove(Editor::Zed, Some(&after), false).unwrap();
    assert_eq!(removed.after.as_deref(), Some(ZED_REGISTRY_FIXTURE));
}

#[test]
fn zeds_meter_comes_with_the_entries_and_goes_with_them() {
    use edit::meter::MARKER;
    let agents = agents(Editor::Zed, &on_path());
    let plan = plan_setup(Editor::Zed, Some(ZED_FIXTURE), &agents, true).unwrap();
    assert_eq!(plan.warning, None);
    assert!(
        plan.report
            .last()
            .is_some_and(|l| l.starts_with("added      agent.show_usage_status: true")),
        "{:?}",
        plan.report
    );
    let after = plan.after.unwrap();
    let entries_only = plan_setup(Editor::Zed, Some(ZED_FIXTURE), &agents, false).unwrap();
    // The setting, below setup's comment, first in the file's object; the rest as the entries
    // alone leave it.
    let meter = format!("\n  {MARKER}\n  \"agent\": {{\n    \"show_usage_status\": true\n  }},");
    let entries_only = entries_only.after.unwrap();
    let at = entries_only.find("{\n  \"ui_font_size\"").unwrap() + 1;
    assert_eq!(after, format!("{}{meter}{}", &entries_only[..at], &entries_only[at..]));

    let again = plan_setup(Editor::Zed, Some(&after), &agents, true).unwrap();
    assert_eq!(again.after.as_deref(), Some(after.as_str()));
    assert_eq!(
        again.report.last().map(String::as_str),
        Some("unchanged  agent.show_usage_status: Zed's plan-usage meter is on")
    );
    // --remove --no-meter leaves the meter; --remove takes both out, byte for byte.
    let kept = plan_remove(Editor::Zed, Some(&after), false).unwrap().after.unwrap();
    assert!(kept.contains(&meter) && !kept.contains("(metered)"), "{kept}");
    let removed = plan_remove(Editor::Zed, Some(&after), true).unwrap();
    assert_eq!(removed.after.as_deref(), Some(ZED_FIXTURE));
    assert_eq!(removed.report.len(), 4, "{:?}", removed.report);
    // A file setup created goes whole, meter and all.
    let created = plan_setup(Editor::Zed, None, &agents, true).unwrap().after.unwrap();
    assert!(created.starts_with(&format!("{{{meter}\n  \"agent_servers\": {{")), "{created}");
    assert_eq!(plan_remove(Editor::Zed, Some(&created), true).unwrap().after, None);
    // JetBrains has no such meter.
    let jetbrains = agents_for_jetbrains();
    let plan = plan_setup(Editor::JetBrains, None, &jetbrains, true).unwrap();
    assert!(!plan.after.unwrap().contains("show_usage_status"));
}

#[test]
fn a_meter_the_user_turned_off_stays_off() {
    let agents = agents(Editor::Zed, &on_path());
    let off = "{\n  \"agent\": {\"show_usage_status\": false}\n}\n";
    let plan = plan_setup(Editor::Zed, Some(off), &agents, true).unwrap();
    let after = plan.after.unwrap();
    assert!(after.contains("{\"show_usage_status\": false}"), "{after}");
    let said = plan.report.last().unwrap();
    assert!(said.starts_with("skipped    agent.show_usage_status: you set it to false"), "{said}");
    assert_eq!(plan_remove(Editor::Zed, Some(&after), true).unwrap().after.as_deref(), Some(off));
}

fn agents_for_jetbrains() -> Vec<Agent> {
    agents(Editor::JetBrains, &on_path())
}

#[test]
fn a_users_agent_object_on_one_line_gets_the_setting_on_a_line_of_its_own() {
    use edit::meter::MARKER;
    let original = "{\n  \"agent\": { \"default_model\": {\"provider\": \"zed.dev\"} },\n  \
                    \"agent_servers\": {}\n}\n";
    let agents = agents(Editor::Zed, &on_path());
    let plan = plan_setup(Editor::Zed, Some(original), &agents, true).unwrap();
    let after = plan.after.unwrap();
    let agent = format!(
        "{{\n  \"agent\": {{\n    {MARKER}\n    \"show_usage_status\": true,\n    \
         \"default_model\": {{\"provider\": \"zed.dev\"}}\n  }},\n"
    );
    assert!(after.starts_with(&agent), "{after}");
    // Every line setup wrote or moved is indented like its neighbours: no line ends in a space.
    assert!(after.lines().all(|l| !l.ends_with(' ')), "{after}");
    // `--remove` cannot close the object up again, and setup says so before it writes.
    assert!(plan.warning.is_some_and(|w| w.contains("cannot restore")));
    let removed = plan_remove(Editor::Zed, Some(&after), true).unwrap().after.unwrap();
    assert_eq!(
        removed,
        "{\n  \"agent\": {\n    \"default_model\": {\"provider\": \"zed.dev\"}\n  },\n  \
         \"agent_servers\": {}\n}\n"
    );
}
