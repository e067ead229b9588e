//! The pages that describe the code, checked against it: the command-line reference is what
//! the clap definitions make of it, every environment variable the code reads is in it, the
//! profiles table of docs/agents.md is what the agent list makes of it, and the config file
//! documented in docs/cli.md has every key the code reads and no other.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use acp_usage::cli_reference::{self, ENVIRONMENT, REFERENCE_FILE};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed reference is what the generator makes of the CLI. When it is not, the test
/// rewrites it (so the fix is one `git add` away) and fails.
#[test]
fn the_cli_reference_is_fresh() {
    let fresh = cli_reference::markdown();
    let path = workspace_root().join(REFERENCE_FILE);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current.replace("\r\n", "\n") != fresh {
        std::fs::write(&path, &fresh).unwrap();
        panic!("{REFERENCE_FILE} was stale; regenerated, commit it");
    }
}

/// The profiles table of docs/agents.md is what the agent list makes of it (rewritten and
/// failed when not, as the reference).
#[test]
fn the_agents_profiles_table_is_fresh() {
    use acp_usage::agents::table::{PAGE, splice};
    let path = workspace_root().join(PAGE);
    let current = std::fs::read_to_string(&path).unwrap().replace("\r\n", "\n");
    let fresh = splice(&current).unwrap();
    if current != fresh {
        std::fs::write(&path, &fresh).unwrap();
        panic!("{PAGE}'s profiles table was stale; regenerated, commit it");
    }
    for p in acp_usage::agents::Profile::all() {
        assert!(fresh.contains(&format!("| `{}` |", p.name())), "{} not in the table", p.name());
    }
}

/// Every `ACP_USAGE_*` and `OTEL_*` name in the code's string literals, by a plain scan of the
/// sources (the crates a user's process runs).
fn variables_in_code() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut stack: Vec<PathBuf> = ["crates/acp-usage/src", "crates/acp-usage-core/src"]
        .iter()
        .map(|d| workspace_root().join(d))
        .collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for piece in text.split('"').skip(1).step_by(2) {
                let name = piece.trim_start_matches('$');
                let is_var = (name.starts_with("ACP_USAGE_") || name.starts_with("OTEL_"))
                    && name
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if is_var {
                    found.insert(name.to_owned());
                }
            }
        }
    }
    found
}

#[test]
fn every_environment_variable_the_code_reads_is_in_the_reference() {
    let listed: BTreeSet<String> = ENVIRONMENT
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .chain(cli_reference::option_variables().into_iter().map(|(name, _)| name))
        .collect();
    let in_code = variables_in_code();
    assert!(in_code.contains("ACP_USAGE_LEDGER"), "the scan finds nothing: {in_code:?}");
    let missing: Vec<&String> = in_code.difference(&listed).collect();
    assert!(missing.is_empty(), "read by the code, not in the reference: {missing:?}");
    let stale: Vec<&String> = listed.difference(&in_code).collect();
    assert!(stale.is_empty(), "in the reference, not in the code: {stale:?}");
}

/// The example config of docs/cli.md: the ```toml block that starts with the file's path.
fn documented_config() -> String {
    let page = std::fs::read_to_string(workspace_root().join("docs/cli.md")).unwrap();
    let start = "```toml\n# ~/.config/acp-usage/config.toml\n";
    let at = page.find(start).expect("docs/cli.md has the example config") + "```toml\n".len();
    let end = page[at..].find("```").expect("the block ends") + at;
    page[at..end].to_owned()
}

/// The dotted paths of `table`'s keys, a map's entries named `*` as [`keys::known`] names them.
fn paths(table: &toml::Table, prefix: &str, known: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    for (key, value) in table {
        let join = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
        let path = if known.contains(&join(key)) { join(key) } else { join("*") };
        out.insert(path.clone());
        if let toml::Value::Table(inner) = value {
            paths(inner, &path, known, out);
        }
    }
}

#[test]
fn the_documented_config_has_every_key_the_code_reads_and_no_other() {
    use acp_usage::config::keys;
    let text = documented_config();
    assert_eq!(keys::unknown(&text).unwrap(), Vec::<String>::new(), "keys nothing reads");
    let known = keys::known().unwrap();
    assert!(known.contains("models.*.long_context.threshold"), "the probe: {known:?}");
    let mut documented = BTreeSet::new();
    paths(&toml::from_str(&text).unwrap(), "", &known, &mut documented);
    let missing: Vec<&String> = known.difference(&documented).collect();
    assert!(missing.is_empty(), "read by the code, not in docs/cli.md's example: {missing:?}");
    let extra: Vec<&String> = documented.difference(&known).collect();
    assert!(extra.is_empty(), "in docs/cli.md's example, read by nothing: {extra:?}");
}
