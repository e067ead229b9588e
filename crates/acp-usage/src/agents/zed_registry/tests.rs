//! The registry agents read from fixture Zed files (`tests/fixtures/setup/zed-registry-*.json`):
//! the exact command per distribution, the settings entry's `env`, the notes for what cannot be
//! started, and how they rank against the programs found elsewhere.

use std::ffi::OsString;

use super::*;
use crate::agents::installed::{Search, find, one_per_agent};

const SETTINGS: &str =
    include_str!("../../../../../tests/fixtures/setup/zed-registry-settings.json");
const INDEX: &str = include_str!("../../../../../tests/fixtures/setup/zed-registry.json");

fn scratch(name: &str) -> PathBuf {
    crate::test_support::scratch("zedreg", name)
}

use crate::test_support::executable as exe;

/// Zed's files under `root`, holding `settings` and `index` when given.
fn zed(root: &Path, settings: Option<&str>, index: Option<&str>) -> Files {
    let files = Files { settings: root.join("config/zed/settings.json"), data: root.join("data") };
    std::fs::create_dir_all(files.settings.parent().unwrap()).unwrap();
    std::fs::create_dir_all(files.registry_dir()).unwrap();
    if let Some(text) = settings {
        std::fs::write(&files.settings, text).unwrap();
    }
    if let Some(text) = index {
        std::fs::write(files.index(), text).unwrap();
    }
    files
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn fixture_entries_become_npx_and_binary_commands() {
    if platform().is_none() {
        return;
    }
    let root = scratch("fixture");
    let files = zed(&root, Some(SETTINGS), Some(INDEX));
    // Zed's directory for the index's version, and an older one it has not cleaned up yet.
    let codex_dir = files.registry_dir().join("codex-acp");
    let current = codex_dir.join("v_0.14.0_5f1a0c2b9d3e4f60_0a1b2c3d4e5f6071/codex-acp");
    exe(&codex_dir.join("v_0.13.2_77aa00bb11cc22dd_3344ee55ff6600aa/codex-acp"));
    exe(&current);

    let scan = scan(&files, None);
    let got: Vec<(&str, &str, Option<&Registered>, &Path)> = scan
        .found
        .iter()
        .map(|f| (f.profile.name(), f.launch.title, f.registry.as_ref(), f.path.as_path()))
        .collect();
    let claude = Registered {
        id: "claude-acp".into(),
        distribution: Distribution::Npx,
        argv: strings(&["npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"]),
        env: env(&[("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "16000"), ("DISABLE_AUTOUPDATER", "1")]),
    };
    let codex = Registered {
        id: "codex-acp".into(),
        distribution: Distribution::Binary,
        argv: vec![current.display().to_string()],
        env: BTreeMap::new(),
    };
    assert_eq!(
        got,
        vec![
            // npx leaves no program: the entry's file stands for where it is.
            ("claude", "Claude Agent", Some(&claude), files.settings.as_path()),
            ("codex", "Codex", Some(&codex), current.as_path()),
        ]
    );
    assert_eq!(scan.found[0].command(), claude.argv);
    assert_eq!(scan.found[0].env(), claude.env);
    assert_eq!(scan.found[0].place, Place::EditorRegistry("Zed".into()));
    // goose has no profile; the custom entry is not a registry one.
    assert_eq!(scan.notes.len(), 1, "{:?}", scan.notes);
    assert_eq!(scan.notes[0].id.as_deref(), Some("goose"));
    assert_eq!(scan.notes[0].profile, None);
    assert!(scan.notes[0].message.contains("no agent acp-usage has a profile for"));
}

#[test]
fn a_binary_not_yet_downloaded_is_a_note() {
    if platform().is_none() {
        return;
    }
    let root = scratch("undownloaded");
    let files = zed(&root, Some(SETTINGS), Some(INDEX));
    let scan = scan(&files, None);
    assert_eq!(scan.found.len(), 1);
    let codex = scan.notes.iter().find(|n| n.id.as_deref() == Some("codex-acp")).unwrap();
    assert_eq!(codex.profile.map(|p| p.name()), Some("codex"));
    assert!(codex.message.contains("has not downloaded its 0.14.0 binary"), "{}", codex.message);
}

/// An index of one agent, `vibe`'s registry id with `distribution`.
fn one_agent(distribution: &str) -> String {
    format!(
        r#"{{"version": "1.0.0", "agents": [{{"id": "mistral-vibe", "name": "Mistral Vibe",
        "version": "2.9.3", "description": "d", "distribution": {distribution}}}],
        "extensions": []}}"#
    )
}

const VIBE_SETTINGS: &str = r#"{"agent_servers": {"mistral-vibe": {"type": "registry",
    "env": {"MISTRAL_LOG": "info"}}}}"#;

#[test]
fn uvx_runs_when_uvx_is_on_path_and_is_a_note_when_not() {
    // The registry ships Vibe as a binary; the uvx shape is its format's, with Vibe's id.
    let root = scratch("uvx");
    let index = one_agent(
        r#"{"uvx": {"package": "mistral-vibe==2.9.3", "args": ["--acp"],
        "env": {"MISTRAL_LOG": "warn", "VIBE_ACP": "1"}}}"#,
    );
    let files = zed(&root, Some(VIBE_SETTINGS), Some(&index));
    let without = scan(&files, Some(&OsString::from(root.join("bin"))));
    assert!(without.found.is_empty());
    assert_eq!(without.notes.len(), 1);
    assert_eq!(
        without.notes[0].message,
        "mistral-vibe, added in Zed from the ACP registry: the registry distributes it through \
         uvx (mistral-vibe==2.9.3), which is not on PATH"
    );

    exe(&root.join("bin/uvx"));
    let with = scan(&files, Some(&OsString::from(root.join("bin"))));
    assert!(with.notes.is_empty(), "{:?}", with.notes);
    let registered = with.found[0].registry.as_ref().unwrap();
    assert_eq!(registered.distribution, Distribution::Uvx);
    assert_eq!(with.found[0].command(), strings(&["uvx", "mistral-vibe==2.9.3", "--acp"]));
    // The index's variables, with the settings entry's over them.
    assert_eq!(registered.env, env(&[("MISTRAL_LOG", "info"), ("VIBE_ACP", "1")]));
}

#[test]
fn an_archive_not_downloaded_falls_back_to_npx_with_its_args() {
    let Some(here) = platform() else { return };
    let root = scratch("fallback");
    let index = one_agent(&format!(
        r#"{{"binary": {{"{here}": {{"archive": "https://example.com/v.tar.gz",
        "cmd": "./vibe-acp", "args": ["--stdio"]}}}},
        "npx": {{"package": "@example/vibe-acp@2.9.3", "args": ["--acp"]}}}}"#
    ));
    let files = zed(&root, Some(VIBE_SETTINGS), Some(&index));
    let npx = scan(&files, None);
    assert_eq!(npx.found[0].command(), strings(&["npx", "-y", "@example/vibe-acp@2.9.3", "--acp"]));

    // Once extracted, the archive wins, with its own args, as in Zed.
    let program = files.registry_dir().join("mistral-vibe/v_2.9.3_00_11/vibe-acp");
    exe(&program);
    let binary = scan(&files, None);
    assert_eq!(binary.found[0].command(), vec![program.display().to_string(), "--stdio".into()]);
    assert_eq!(binary.found[0].path, program);
}

#[test]
fn unreadable_or_missing_files_find_nothing_and_say_so() {
    let root = scratch("missing");
    let files = zed(&root, None, None);
    let none = scan(&files, None);
    assert!(none.found.is_empty());
    assert!(none.notes[0].message.contains("not found"), "{:?}", none.notes);
    assert_eq!(none.notes[0].id, None);

    std::fs::write(&files.settings, "{ \"agent_servers\": { \"claude-acp\": ").unwrap();
    let broken = scan(&files, None);
    assert!(broken.found.is_empty());
    assert!(broken.notes[0].message.contains("do not parse"), "{:?}", broken.notes);

    // Registry entries but no index: their commands are unknown.
    std::fs::write(&files.settings, SETTINGS).unwrap();
    let no_index = scan(&files, None);
    assert!(no_index.found.is_empty());
    assert_eq!(no_index.notes.len(), 1);
    assert!(no_index.notes[0].message.contains("is not there"), "{:?}", no_index.notes);
    assert!(no_index.notes[0].message.contains("claude-acp, codex-acp, goose"));

    // No registry entry at all: nothing to say.
    std::fs::write(&files.settings, "// empty\n{}\n").unwrap();
    let quiet = scan(&files, None);
    assert!(quiet.found.is_empty() && quiet.notes.is_empty());
}

#[test]
fn a_program_found_elsewhere_comes_first_and_the_extracted_binary_once() {
    if platform().is_none() {
        return;
    }
    let root = scratch("precedence");
    let files = zed(&root, Some(SETTINGS), Some(INDEX));
    let codex = files.registry_dir().join("codex-acp/v_0.14.0_aa_bb/codex-acp");
    exe(&codex);
    let bin = root.join("bin");
    exe(&bin.join("claude-agent-acp"));
    let search = Search {
        path: Some(bin.clone().into()),
        editor_dirs: vec![("Zed".into(), files.data.join("external_agents"))],
        zed: Some(files.clone()),
        ..Search::default()
    };
    let found = find(&search).found;
    let got: Vec<(&str, Place, Vec<String>)> =
        found.iter().map(|f| (f.profile.name(), f.place.clone(), f.command())).collect();
    let registry = Place::EditorRegistry("Zed".into());
    assert_eq!(
        got,
        vec![
            ("claude", Place::Path, strings(&["claude-agent-acp"])),
            (
                "claude",
                registry.clone(),
                strings(&["npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"])
            ),
            // The directory scan found it too; it is listed once, as the registry's.
            ("codex", registry, vec![codex.display().to_string()]),
        ]
    );
    let one = one_per_agent(&found);
    let places: Vec<Place> = one.iter().map(|f| f.place.clone()).collect();
    assert_eq!(places, [Place::Path, Place::EditorRegistry("Zed".into())]);
    // The program on PATH is started with what Zed's registry entry for it sets.
    assert_eq!(one[0].command(), strings(&["claude-agent-acp"]));
    assert_eq!(one[0].env(), found[1].env());
    assert!(!one[0].env().is_empty());
}

#[test]
fn zed_files_follow_the_platform_and_xdg() {
    let vars = |name: &str| match name {
        "HOME" => Some(OsString::from("/home/u")),
        "XDG_CONFIG_HOME" => Some(OsString::from("/cfg")),
        "XDG_DATA_HOME" => Some(OsString::from("relative")),
        _ => None,
    };
    let files = Files::locate(&vars).unwrap();
    if cfg!(target_os = "macos") {
        assert_eq!(files.settings, Path::new("/home/u/.config/zed/settings.json"));
        assert_eq!(files.data, Path::new("/home/u/Library/Application Support/Zed"));
    } else if !cfg!(windows) {
        assert_eq!(files.settings, Path::new("/cfg/zed/settings.json"));
        // A relative XDG_DATA_HOME is ignored.
        assert_eq!(files.data, Path::new("/home/u/.local/share/zed"));
    }
    assert_eq!(
        files.index(),
        files.data.join("external_agents").join("registry").join("registry.json")
    );
}
