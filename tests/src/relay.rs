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
    let status = cargo()
        .args(["build", "--quiet", "-p", "acp-usage", "--bin", "acp-usage"])
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

/// A cargo command for a build from inside a test, in the workspace root.
///
/// Cargo sets CARGO for the processes it runs (PATH's cargo serves manual runs). It also gives
/// them its per-package variables (CARGO_MANIFEST_DIR, CARGO_PKG_*, ...): a build that inherited
/// them would look like another build to dependencies whose build scripts watch them (ring
/// watches CARGO_MANIFEST_DIR), and rebuild them and everything above them, acp-usage included,
/// once inside the tests and again in the next build outside. RUSTC_BOOTSTRAP goes too: a run
/// that sets it (for an unstable libtest option, say) would otherwise rebuild the whole workspace
/// under another fingerprint from inside the first test.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let per_package = ["CARGO_MANIFEST_", "CARGO_PKG_"].iter().any(|p| name.starts_with(p))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "RUSTC_BOOTSTRAP",
            ]
            .contains(&name.as_ref());
        if per_package {
            command.env_remove(name.as_ref());
        }
    }
    command
}
