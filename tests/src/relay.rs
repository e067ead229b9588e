//! Finding the `acp-usage` binary under test.
//!
//! `CARGO_BIN_EXE_*` only exists for binaries of the test's own package, and `cargo test
//! --workspace` does not necessarily build `target/debug/acp-usage` itself. So the first call
//! runs `cargo build -p acp-usage --bin acp-usage` (a no-op when it is fresh), unless
//! `ACP_USAGE_BIN` names a binary to use as it is.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cargo target directory the tests were built into.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("target"),
    }
}

/// The relay binary, built if needed; the build happens once per test process.
pub fn relay_binary() -> anyhow::Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| find_or_build().map_err(|err| format!("{err:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn find_or_build() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("ACP_USAGE_BIN") {
        let bin = PathBuf::from(bin);
        if !bin.exists() {
            bail!("ACP_USAGE_BIN={} does not exist", bin.display());
        }
        return Ok(bin);
    }
    // Cargo sets CARGO for the processes it runs; fall back to PATH for manual runs.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "acp-usage", "--bin", "acp-usage"])
        .current_dir(workspace_root())
        .status()
        .context("running cargo build -p acp-usage")?;
    if !status.success() {
        bail!("cargo build -p acp-usage failed ({status})");
    }
    let bin = target_dir().join("debug").join("acp-usage");
    if !bin.exists() {
        bail!("{} is missing after cargo build -p acp-usage", bin.display());
    }
    Ok(bin)
}
