//! Development tasks, run as `cargo xtask <task>` (alias in `.cargo/config.toml`).
//!
//! `codegen` writes the generated files:
//! - the core crate's embedded `catalog.tsv`, compiled from the pinned LiteLLM JSON in `data/` by
//!   the same compiler the binary uses for `--catalog` files, so the embedded catalog and a
//!   user-supplied LiteLLM file can never be read differently;
//! - `schema/schema.json`, the JSON Schema of ACP v1 messages and acp-usage's `_meta` payloads,
//!   generated from the Rust types (`acp_usage_schema::generate`);
//! - `docs/cli-reference.md`, every command, option and environment variable, from the clap
//!   definitions (`acp_usage::cli_reference`);
//! - the profiles table of `docs/agents.md` (between its markers), from the agent list
//!   (`acp_usage::agents::table`).
//!
//! `codegen --check` fails instead of writing when a file is stale (for CI); the tests
//! `crates/acp-usage/tests/it/catalog.rs`, `crates/acp-usage/tests/it/docs.rs` and
//! `crates/acp-usage-schema/tests/it/schema.rs` do the same check on every `cargo test`.
//!
//! `cycles` lists the module cycles of the workspace's crates (see [`cycles`]); a test runs the
//! same check on every `cargo test --workspace`.
//!
//! `sizes` lists the functions of the product's code over 100 lines and the constructors over
//! 5 parameters (see [`sizes`]); a test runs the same check on every `cargo test --workspace`.
//!
//! `links` lists the relative links and anchors of the pages (README.md, docs/*.md) that go
//! nowhere (see [`links`]); a test runs the same check on every `cargo test --workspace`.
//!
//! `screenshot` takes the README's picture of `report --html` with headless Chromium (see
//! [`screenshot`]); run by hand, its PNG committed.
//!
//! `dist` makes what a release ships (see [`dist`]): `dist npm` packs the npm packages, `dist
//! check` checks the release workflow against the platform table.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use acp_usage::agents::table as agents_table;
use acp_usage::catalog_file::{EMBEDDED_CATALOG_FILE, EMBEDDED_LITELLM_FILE, generate_embedded};
use acp_usage::cli_reference::{self, REFERENCE_FILE};
use acp_usage_schema::{SCHEMA_FILE, generate};
use anyhow::{Context, bail};

mod cycles;
mod dist;
mod links;
mod screenshot;
mod sizes;

const USAGE: &str = "usage: cargo xtask codegen [--check]\n       cargo xtask cycles\n       cargo xtask sizes\n       cargo xtask links\n       cargo xtask screenshot\n       cargo xtask dist ... (cargo xtask dist --help)";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> anyhow::Result<ExitCode> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["codegen"] => codegen(false),
        ["codegen", "--check"] => codegen(true),
        ["cycles"] => {
            let mut cycles = Vec::new();
            for krate in cycles::workspace(&workspace_root())? {
                cycles.extend(krate.cycles());
            }
            // The listing is the command's output: stdout, as a script reads it.
            let mut out = std::io::stdout().lock();
            for cycle in &cycles {
                writeln!(out, "{cycle}")?;
            }
            Ok(if cycles.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        ["sizes"] => {
            let scan = sizes::workspace(&workspace_root())?;
            // The listing is the command's output, as `cycles` writes it.
            let mut out = std::io::stdout().lock();
            for finding in &scan.findings {
                writeln!(out, "{finding}")?;
            }
            eprintln!(
                "{} functions measured, {} over a limit",
                scan.functions,
                scan.findings.len()
            );
            Ok(if scan.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        ["links"] => {
            let root = workspace_root();
            let problems = links::check(&root, &links::pages(&root)?)?;
            // The listing is the command's output, as `cycles` writes it.
            let mut out = std::io::stdout().lock();
            for problem in &problems {
                writeln!(out, "{problem}")?;
            }
            Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        ["screenshot"] => screenshot::run(&workspace_root()).map(|()| ExitCode::SUCCESS),
        ["dist", "help" | "--help" | "-h"] => {
            eprintln!("{}", dist::USAGE);
            Ok(ExitCode::SUCCESS)
        }
        ["dist", rest @ ..] => dist::run(workspace_root(), rest).map(|()| ExitCode::SUCCESS),
        ["help" | "--help" | "-h"] => {
            eprintln!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => bail!("{USAGE}"),
    }
}

/// The workspace root: xtask lives one level below it.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent directory").to_owned()
}

/// One generated file: where it goes, its fresh text, and a word on what it holds.
struct Generated {
    path: &'static str,
    text: String,
    what: String,
}

fn codegen(check: bool) -> anyhow::Result<ExitCode> {
    let root = workspace_root();
    let catalog = generate_embedded(&root)?;
    let models = catalog.lines().filter(|l| !l.starts_with('#')).count();
    let schema = generate::schema_text();
    let defs = generate::schema()["$defs"].as_object().map_or(0, |d| d.len());
    let files = [
        Generated {
            path: EMBEDDED_CATALOG_FILE,
            text: catalog,
            what: format!("{models} models, from {EMBEDDED_LITELLM_FILE}"),
        },
        Generated { path: SCHEMA_FILE, text: schema, what: format!("{defs} definitions") },
        Generated {
            path: REFERENCE_FILE,
            text: cli_reference::markdown(),
            what: "the command-line reference, from the clap definitions".to_owned(),
        },
        Generated {
            path: agents_table::PAGE,
            text: agents_table::splice(&std::fs::read_to_string(root.join(agents_table::PAGE))?)?,
            what: "its profiles table, from the agent list".to_owned(),
        },
    ];
    let mut stale = false;
    for file in files {
        let target = root.join(file.path);
        let current = std::fs::read_to_string(&target).unwrap_or_default();
        let size = file.text.len();
        if current == file.text {
            eprintln!("{} is up to date ({}, {size} bytes)", file.path, file.what);
        } else if check {
            eprintln!("{} is stale: run `cargo xtask codegen` and commit the result", file.path);
            stale = true;
        } else {
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&target, &file.text)
                .with_context(|| format!("writing {}", target.display()))?;
            eprintln!("wrote {}: {}, {size} bytes", file.path, file.what);
        }
    }
    Ok(if stale { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
