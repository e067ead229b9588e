//! `cargo xtask dist check`: the release workflow and cargo binstall's metadata agree with the
//! platform table. The workflow cannot run outside GitHub, so what can go wrong in it unseen is
//! checked here, on every `cargo test`: a platform of the main npm package without a build job
//! (its users would get an install that cannot run), an archive name binstall would not find.

use std::collections::BTreeMap;

use anyhow::{Context, bail};

use super::Workspace;
use super::platforms::Platform;

/// Relative to the workspace root.
pub const WORKFLOW_FILE: &str = ".github/workflows/release.yml";
pub const CRATE_MANIFEST: &str = "crates/acp-usage/Cargo.toml";

/// How the workflow names an archive; binstall's `pkg-url` must name the same file.
const ARCHIVE_TEMPLATE: &str = "acp-usage-${{ matrix.target }}.${{ matrix.archive }}";

pub fn check(ws: &Workspace) -> anyhow::Result<()> {
    let read = |rel: &str| {
        let path = ws.root.join(rel);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let mut problems = check_workflow(&ws.platforms, &read(WORKFLOW_FILE)?);
    problems.extend(check_binstall(ws, &read(CRATE_MANIFEST)?));
    if !problems.is_empty() {
        bail!("{} problem(s):\n- {}", problems.len(), problems.join("\n- "));
    }
    eprintln!(
        "{WORKFLOW_FILE} builds all {} platforms of npm/platforms.json; binstall's metadata in \
         {CRATE_MANIFEST} names the same archives",
        ws.platforms.len()
    );
    Ok(())
}

/// One `include:` entry of the build matrix: its target and the keys that follow it.
type MatrixEntry = (String, BTreeMap<String, String>);

/// The build matrix's entries: each starts at a `- target: …` line and runs over the
/// more-indented `key: value` lines after it. The workflow keeps that shape so it can be read
/// without a YAML parser.
fn matrix_entries(workflow: &str) -> Vec<MatrixEntry> {
    let mut entries: Vec<MatrixEntry> = Vec::new();
    let mut indent_of_entry = None;
    for line in workflow.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if let Some(target) = trimmed.strip_prefix("- target:") {
            entries.push((unquote(target), BTreeMap::new()));
            indent_of_entry = Some(indent);
            continue;
        }
        match (indent_of_entry, entries.last_mut()) {
            (Some(entry_indent), Some((_, keys)))
                if indent > entry_indent && !trimmed.starts_with('-') =>
            {
                if let Some((key, value)) = trimmed.split_once(':') {
                    keys.insert(key.trim().to_owned(), unquote(value));
                }
            }
            _ => indent_of_entry = None,
        }
    }
    entries
}

fn unquote(value: &str) -> String {
    value.trim().trim_matches(|c| c == '"' || c == '\'').to_owned()
}

pub fn check_workflow(platforms: &[Platform], workflow: &str) -> Vec<String> {
    let entries = matrix_entries(workflow);
    let mut problems = Vec::new();
    for platform in platforms {
        let Some((_, keys)) = entries.iter().find(|(target, _)| *target == platform.target) else {
            problems.push(format!(
                "{} ({}) is in the main npm package but has no build job in {WORKFLOW_FILE}",
                platform.package(),
                platform.target
            ));
            continue;
        };
        for (key, expected) in
            [("archive", platform.archive_ext()), ("binary", platform.binary_name())]
        {
            let found = keys.get(key).map(String::as_str);
            if found != Some(expected) {
                problems.push(format!(
                    "the build job of {} says {key}: {}, it must be {expected}",
                    platform.target,
                    found.unwrap_or("(nothing)")
                ));
            }
        }
    }
    for (target, _) in &entries {
        if !platforms.iter().any(|p| p.target == *target) {
            problems.push(format!(
                "{WORKFLOW_FILE} builds {target}, which npm/platforms.json does not list"
            ));
        }
    }
    if !workflow.contains(ARCHIVE_TEMPLATE) {
        problems.push(format!("{WORKFLOW_FILE} no longer names archives {ARCHIVE_TEMPLATE}"));
    }
    // Both archive commands (tar and zip) name the license files beside the binary.
    let with_licenses = workflow
        .lines()
        .filter(|l| l.contains("$archive\"") && l.contains("matrix.binary"))
        .filter(|l| super::npm::LICENSE_FILES.iter().all(|f| l.contains(f)))
        .count();
    if with_licenses < 2 {
        problems.push(format!(
            "{WORKFLOW_FILE} must put {} beside the binary in both kinds of archive",
            super::npm::LICENSE_FILES.join(" and ")
        ));
    }
    if !workflow.contains("cargo xtask dist npm") || !workflow.contains("--binaries") {
        problems.push(format!(
            "{WORKFLOW_FILE} must pack the npm packages with `cargo xtask dist npm --binaries`, \
             which refuses to pack the main package while a platform's binary is missing"
        ));
    }
    problems
}

/// Fills binstall's template variables (`{ name }` and `{name}` alike).
fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut text = template.to_owned();
    for (name, value) in vars {
        text = text.replace(&format!("{{ {name} }}"), value).replace(&format!("{{{name}}}"), value);
    }
    text
}

pub fn check_binstall(ws: &Workspace, manifest: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let table: toml::Table = match manifest.parse() {
        Ok(table) => table,
        Err(err) => return vec![format!("{CRATE_MANIFEST}: {err}")],
    };
    let binstall =
        table.get("package").and_then(|p| p.get("metadata")).and_then(|m| m.get("binstall"));
    let Some(binstall) = binstall else {
        return vec![format!("{CRATE_MANIFEST} has no [package.metadata.binstall]")];
    };
    let text = |value: Option<&toml::Value>| value.and_then(toml::Value::as_str).map(str::to_owned);
    let (Some(pkg_url), Some(bin_dir)) =
        (text(binstall.get("pkg-url")), text(binstall.get("bin-dir")))
    else {
        return vec![format!("{CRATE_MANIFEST}'s binstall metadata needs pkg-url and bin-dir")];
    };
    if ws.repository.is_none() {
        problems
            .push("binstall's { repo } needs a repository in the workspace's Cargo.toml".into());
    }
    let repo = "https://example.invalid/repo";
    for platform in &ws.platforms {
        let format = text(
            binstall
                .get("overrides")
                .and_then(|o| o.get(&platform.target))
                .and_then(|o| o.get("pkg-fmt")),
        )
        .or_else(|| text(binstall.get("pkg-fmt")))
        .unwrap_or_default();
        let suffix = match format.as_str() {
            "tgz" => ".tar.gz",
            "zip" => ".zip",
            other => {
                problems.push(format!("binstall's pkg-fmt for {} is {other:?}", platform.target));
                continue;
            }
        };
        let binary_ext = if platform.is_windows() { ".exe" } else { "" };
        let vars = [
            ("repo", repo),
            ("name", "acp-usage"),
            ("bin", "acp-usage"),
            ("version", ws.version.as_str()),
            ("target", platform.target.as_str()),
            ("archive-suffix", suffix),
            ("binary-ext", binary_ext),
        ];
        let url = render(&pkg_url, &vars);
        let expected =
            format!("{repo}/releases/download/v{}/{}", ws.version, platform.archive_name());
        if url != expected {
            problems.push(format!(
                "binstall would fetch {url} for {}; the release has {expected}",
                platform.target
            ));
        }
        let bin = render(&bin_dir, &vars);
        if bin != platform.binary_name() {
            problems.push(format!(
                "binstall looks for {bin} in the {} archive, which holds {} at its root",
                platform.target,
                platform.binary_name()
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> Workspace {
        Workspace::read(crate::workspace_root()).expect("the workspace")
    }

    fn read(rel: &str) -> String {
        std::fs::read_to_string(crate::workspace_root().join(rel)).expect("readable")
    }

    #[test]
    fn the_committed_workflow_and_binstall_metadata_match_the_platform_table() {
        check(&workspace()).expect("release.yml and binstall agree with npm/platforms.json");
    }

    #[test]
    fn every_platform_of_the_main_package_needs_a_build_job() {
        let ws = workspace();
        let workflow = read(WORKFLOW_FILE);
        // The matrix entry of aarch64 Linux, cut out (its `- target:` line and the keys after it).
        let mut kept = Vec::new();
        let mut skipping = false;
        for line in workflow.lines() {
            if line.trim() == "- target: aarch64-unknown-linux-musl" {
                skipping = true;
                continue;
            }
            if skipping && (line.trim().starts_with('-') || !line.starts_with("            ")) {
                skipping = false;
            }
            if !skipping {
                kept.push(line);
            }
        }
        let cut = kept.join("\n");
        assert_ne!(cut, workflow, "the cut changed nothing: the workflow's matrix moved");
        let problems = check_workflow(&ws.platforms, &cut);
        assert_eq!(
            problems,
            [format!(
                "acp-usage-linux-arm64 (aarch64-unknown-linux-musl) is in the main npm package \
                 but has no build job in {WORKFLOW_FILE}"
            )]
        );
        // A Windows job that would archive a tarball.
        let tar = workflow.replacen("archive: zip", "archive: tar.gz", 1);
        let problems = check_workflow(&ws.platforms, &tar);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("x86_64-pc-windows-msvc says archive: tar.gz"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_archives_hold_the_license_files() {
        let ws = workspace();
        let workflow = read(WORKFLOW_FILE);
        let without = workflow.replacen(" LICENSE-MIT LICENSE-APACHE)", ")", 1);
        assert_ne!(without, workflow, "the zip command moved");
        let problems = check_workflow(&ws.platforms, &without);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("LICENSE-MIT and LICENSE-APACHE"), "{problems:?}");
    }

    #[test]
    fn binstall_must_name_the_release_archives() {
        let ws = workspace();
        let manifest = read(CRATE_MANIFEST);
        assert_eq!(check_binstall(&ws, &manifest), Vec::<String>::new());
        let renamed = manifest.replace("acp-usage-{ target }", "acp-usage-{ version }-{ target }");
        assert_ne!(renamed, manifest, "the pkg-url template moved");
        let problems = check_binstall(&ws, &renamed);
        assert_eq!(problems.len(), ws.platforms.len(), "{problems:?}");
        assert!(problems[0].contains("the release has"), "{problems:?}");
    }
}
