//! `acp-usage setup zed|jetbrains`, the built binary on the fixture settings files of
//! `tests/fixtures/setup/`, with a PATH that holds stand-in agents and a HOME of its own (so
//! nothing of the machine's is found or written).
//!
//! Guarantees checked: an entry per agent on PATH, each running the agent after `--` through
//! acp-usage (`acp-usage` when it is on PATH, else npx pinned to this version); every other
//! byte of the file kept; a second run writes nothing (bytes and modification time unchanged);
//! `--remove` gives the fixture back byte for byte; Zed's plan-usage meter
//! (`agent.show_usage_status: true`) is turned on with the entries and off with them, never
//! when `--no-meter`, and a `true` the user wrote stays on `--remove`; `--dry-run` writes nothing; a file that does
//! not parse is left alone with an error naming its line and column; a missing file is created,
//! and `--remove` deletes it again. Agents added in Zed from the ACP registry, with no program
//! on PATH, get entries from Zed's settings and its copy of the registry index: npx ones run
//! as the index pins them, extracted binaries by their path, each with the `env` Zed gives it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use acp_usage_tests::relay::{relay_binary, workspace_root};
use acp_usage_tests::scratch::Scratch;

const AGENTS: [&str; 3] = ["claude-agent-acp", "codex-acp", "opencode"];

fn fixture(name: &str) -> String {
    let path = workspace_root().join("tests/fixtures/setup").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An executable shell script that does nothing.
fn stand_in(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A scratch HOME and a `bin` directory holding the stand-in agents (and `extra` programs).
fn lab(label: &str, extra: &[&str]) -> (Scratch, PathBuf) {
    let scratch = Scratch::new(label).unwrap();
    let bin = scratch.path("bin");
    for program in AGENTS.iter().chain(extra) {
        stand_in(&bin.join(program));
    }
    (scratch, bin)
}

/// `acp-usage setup <args>` with only HOME and PATH set, no terminal.
fn setup(scratch: &Scratch, bin: &Path, args: &[&str]) -> Output {
    Command::new(relay_binary().unwrap())
        .arg("setup")
        .args(args)
        .env_clear()
        .env("HOME", scratch.home())
        .env("PATH", bin)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn zed_entries_on_a_commented_settings_file_come_and_go_byte_for_byte() {
    // acp-usage itself is on PATH: the entries run it by name.
    let (scratch, bin) = lab("setup-zed", &["acp-usage"]);
    let original = fixture("zed-settings.json");
    let file = scratch.path("settings.json");
    std::fs::write(&file, &original).unwrap();
    let settings = file.to_str().unwrap();

    // --dry-run shows the change and writes nothing.
    let shown = ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--dry-run"]));
    assert!(shown.contains("+    \"Codex (metered)\": {\n"), "{shown}");
    assert!(shown.contains(&format!("+  {METER}\n")), "{shown}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);

    let report = ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--yes"]));
    for key in ["Claude Agent (metered)", "Codex (metered)", "OpenCode (metered)"] {
        assert!(report.contains(&format!("added      {key}")), "{report}");
    }
    assert!(report.contains("added      agent.show_usage_status: true"), "{report}");
    let written = std::fs::read_to_string(&file).unwrap();
    let entry = |key: &str, agent: &str| {
        format!(
            "\n    \"{key}\": {{\n      \"type\": \"custom\",\n      \"command\": \"acp-usage\",\n      \
             \"args\": [\"--\", {agent}]\n    }},"
        )
    };
    let entries = [
        entry("Claude Agent (metered)", "\"claude-agent-acp\""),
        entry("Codex (metered)", "\"codex-acp\""),
        entry("OpenCode (metered)", "\"opencode\", \"acp\""),
    ]
    .concat();
    // The entries, first in the existing `agent_servers`, and Zed's meter turned on, first in
    // the file's object below setup's comment; not one other byte changed.
    let at = original.find("\"agent_servers\": {").unwrap() + "\"agent_servers\": {".len();
    let top = original.find("\n{\n").unwrap() + 2;
    let meter = format!("\n  {METER}\n  \"agent\": {{\n    \"show_usage_status\": true\n  }},");
    assert_eq!(
        written,
        format!("{}{meter}{}{entries}{}", &original[..top], &original[top..at], &original[at..])
    );

    // A second run finds nothing to do and does not touch the file.
    let modified = backdate(&file);
    let again = ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--yes"]));
    assert!(again.contains("nothing to change"), "{again}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), modified);

    let removed = ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--remove", "--yes"]));
    assert_eq!(removed.matches("removed    ").count(), 4, "{removed}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);

    // --no-meter: the entries alone, and --remove --no-meter leaves a meter setting alone.
    ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--yes", "--no-meter"]));
    let entries_only = std::fs::read_to_string(&file).unwrap();
    assert_eq!(entries_only, format!("{}{entries}{}", &original[..at], &original[at..]));
    let mine = original.replace(
        "\"vim_mode\": false,",
        "\"vim_mode\": false,\n  \"agent\": {\"show_usage_status\": true},",
    );
    std::fs::write(&file, &mine).unwrap();
    ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--yes"]));
    let on = ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--yes"]));
    assert!(
        on.contains("unchanged  agent.show_usage_status: Zed's plan-usage meter is on"),
        "{on}"
    );
    // The user's own `true` is not setup's to take out.
    ok(&setup(&scratch, &bin, &["zed", "--settings", settings, "--remove", "--yes"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), mine);
}

/// The comment line setup writes above Zed's meter setting.
const METER: &str = "// Zed's plan-usage meter, turned on by `acp-usage setup zed`";

#[test]
fn jetbrains_acp_json_in_home_gets_strict_json_with_absolute_paths() {
    // No acp-usage on PATH: npx, by its absolute path, runs this version.
    let (scratch, bin) = lab("setup-jetbrains", &["npx"]);
    let original = fixture("jetbrains-acp.json");
    let file = scratch.home().join(".jetbrains/acp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, &original).unwrap();

    ok(&setup(&scratch, &bin, &["jetbrains"]));
    let written = std::fs::read_to_string(&file).unwrap();
    let value: serde_json::Value = serde_json::from_str(&written).expect("strict JSON");
    let servers = value["agent_servers"].as_object().unwrap();
    let npx = bin.join("npx").display().to_string();
    let pinned = format!("acp-usage@{}", env!("CARGO_PKG_VERSION"));
    for (key, agent) in [
        ("Claude Agent (metered)", vec![bin.join("claude-agent-acp")]),
        ("Codex (metered)", vec![bin.join("codex-acp")]),
        ("OpenCode (metered)", vec![bin.join("opencode"), PathBuf::from("acp")]),
    ] {
        let mut args = vec!["-y".to_owned(), pinned.clone(), "--".to_owned()];
        args.extend(agent.iter().map(|p| p.display().to_string()));
        assert_eq!(servers[key], serde_json::json!({"command": npx, "args": args}), "{key}");
    }
    // The hand-written entry is there as it was.
    let mine = &original
        [original.find("        \"My Agent\"").unwrap()..original.rfind("\n    }").unwrap()];
    assert!(written.contains(mine), "{written}");

    let modified = backdate(&file);
    ok(&setup(&scratch, &bin, &["jetbrains"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), modified);

    ok(&setup(&scratch, &bin, &["jetbrains", "--remove"]));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
}

#[test]
fn a_missing_file_is_created_and_a_broken_one_left_alone() {
    let (scratch, bin) = lab("setup-files", &[]);
    // Zed's default place under the scratch HOME, which does not exist yet.
    let file = scratch.home().join(".config/zed/settings.json");
    ok(&setup(&scratch, &bin, &["zed", "--yes"]));
    let created = std::fs::read_to_string(&file).unwrap();
    let start = format!(
        "{{\n  {METER}\n  \"agent\": {{\n    \"show_usage_status\": true\n  }},\n  \"agent_servers\": {{\n    \
         \"Claude Agent (metered)\""
    );
    assert!(created.starts_with(&start), "{created}");
    ok(&setup(&scratch, &bin, &["zed", "--remove", "--yes"]));
    assert!(!file.exists(), "the file setup created goes with its entries");

    let broken = "{\n  \"theme\": \"One Dark\"\n  \"vim_mode\": true\n}\n";
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, broken).unwrap();
    let out = setup(&scratch, &bin, &["zed", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:2:22: Expected comma", file.display())), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);

    // No agent anywhere: exit 1 and the file untouched.
    let empty = scratch.path("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(&file, "{}\n").unwrap();
    let out = setup(&scratch, &empty, &["zed"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("No agents found"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n");
}

#[test]
fn a_linked_settings_file_is_edited_where_it_lives() {
    // Dotfiles repositories link ~/.config/zed/settings.json to their own copy.
    let (scratch, bin) = lab("setup-link", &[]);
    let kept = scratch.path("dotfiles/zed-settings.json");
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::write(&kept, "{\n  \"vim_mode\": true\n}\n").unwrap();
    let link = scratch.home().join(".config/zed/settings.json");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&kept, &link).unwrap();

    ok(&setup(&scratch, &bin, &["zed", "--yes"]));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&kept).unwrap().contains("\"Codex (metered)\""));
    ok(&setup(&scratch, &bin, &["zed", "--remove", "--yes"]));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "{\n  \"vim_mode\": true\n}\n");
}

#[test]
fn zed_registry_agents_come_from_zeds_settings_and_index() {
    let scratch = Scratch::new("setup-zed-registry").unwrap();
    // No agent and no acp-usage on PATH: the entries run acp-usage through npx.
    let bin = scratch.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let (config, data) = (scratch.path("xdg-config"), scratch.path("xdg-data"));
    let (settings, zed_data) = if cfg!(target_os = "macos") {
        let home = scratch.home();
        (home.join(".config/zed/settings.json"), home.join("Library/Application Support/Zed"))
    } else {
        (config.join("zed/settings.json"), data.join("zed"))
    };
    let original = fixture("zed-registry-settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, &original).unwrap();
    let registry = zed_data.join("external_agents/registry");
    std::fs::create_dir_all(&registry).unwrap();
    std::fs::write(registry.join("registry.json"), fixture("zed-registry.json")).unwrap();
    // The binary Zed extracted for codex-acp's 0.14.0 archive.
    let codex = registry.join("codex-acp/v_0.14.0_9c1e2d3f4a5b6c7d_1a2b3c4d5e6f7a8b/codex-acp");
    stand_in(&codex);

    let run = |args: &[&str]| {
        Command::new(relay_binary().unwrap())
            .arg("setup")
            .args(args)
            .env_clear()
            .env("HOME", scratch.home())
            .env("PATH", &bin)
            .env("XDG_CONFIG_HOME", &config)
            .env("XDG_DATA_HOME", &data)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // The entries alone (the meter is the first test's).
    let report = ok(&run(&["zed", "--yes", "--no-meter"]));
    assert!(
        report.contains(
            "added      Claude Agent (metered): claude-acp added in Zed from the ACP registry (npx)"
        ),
        "{report}"
    );
    assert!(report.contains("note: goose, added in Zed from the ACP registry, is no agent"));

    let pinned = format!("\"acp-usage@{}\"", env!("CARGO_PKG_VERSION"));
    let entries = format!(
        r#"
    "Claude Agent (metered)": {{
      "type": "custom",
      "command": "npx",
      "args": ["-y", {pinned}, "--", "npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"],
      "env": {{"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "16000", "DISABLE_AUTOUPDATER": "1"}}
    }},
    "Codex (metered)": {{
      "type": "custom",
      "command": "npx",
      "args": ["-y", {pinned}, "--", "{}"]
    }},"#,
        codex.display()
    );
    let written = std::fs::read_to_string(&settings).unwrap();
    let at = original.find("\"agent_servers\": {").unwrap() + "\"agent_servers\": {".len();
    assert_eq!(written, format!("{}{entries}{}", &original[..at], &original[at..]));

    let again = ok(&run(&["zed", "--yes", "--no-meter"]));
    assert!(again.contains("nothing to change"), "{again}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), written);

    let removed = ok(&run(&["zed", "--remove", "--yes"]));
    assert_eq!(removed.matches("removed    ").count(), 2, "{removed}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
}

/// Sets `file`'s modification time an hour back and returns it: a run that rewrites the file,
/// however soon, gives it another (no waiting for the clock to move on).
fn backdate(file: &std::path::Path) -> std::time::SystemTime {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let f = std::fs::File::options().write(true).open(file).unwrap();
    f.set_modified(past).unwrap();
    std::fs::metadata(file).unwrap().modified().unwrap()
}
