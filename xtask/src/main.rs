//! Development tasks, run as `cargo xtask <task>` (alias in `.cargo/config.toml`).
//!
//! `codegen` compiles the pinned LiteLLM JSON in `data/` into the core crate's embedded
//! `catalog.tsv` with the same compiler the binary uses for `--catalog` files, so the embedded
//! catalog and a user-supplied LiteLLM file can never be read differently. `codegen --check`
//! fails instead of writing when the file is stale (for CI); the test
//! `crates/acp-usage/tests/catalog.rs` does the same check on every `cargo test`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use acp_usage::catalog_file::{EMBEDDED_CATALOG_FILE, EMBEDDED_LITELLM_FILE, generate_embedded};
use anyhow::{Context, bail};

const USAGE: &str = "usage: cargo xtask codegen [--check]";

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

fn codegen(check: bool) -> anyhow::Result<ExitCode> {
    let root = workspace_root();
    let fresh = generate_embedded(&root)?;
    let target = root.join(EMBEDDED_CATALOG_FILE);
    let current = std::fs::read_to_string(&target).unwrap_or_default();
    let models = fresh.lines().filter(|l| !l.starts_with('#')).count();
    if current == fresh {
        eprintln!("{EMBEDDED_CATALOG_FILE} is up to date ({models} models, {} bytes)", fresh.len());
        return Ok(ExitCode::SUCCESS);
    }
    if check {
        eprintln!(
            "{EMBEDDED_CATALOG_FILE} is stale: run `cargo xtask codegen` and commit the result"
        );
        return Ok(ExitCode::FAILURE);
    }
    std::fs::write(&target, &fresh).with_context(|| format!("writing {}", target.display()))?;
    eprintln!(
        "wrote {EMBEDDED_CATALOG_FILE} from {EMBEDDED_LITELLM_FILE}: {models} models, {} bytes",
        fresh.len()
    );
    Ok(ExitCode::SUCCESS)
}
