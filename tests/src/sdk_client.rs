//! The client built on the official Rust ACP SDK, run as a process.
//!
//! The client itself is `tests/sdk-client/` (crate `acp-usage-sdk-client`, binary `sdk-client`): a
//! workspace of its own, because the SDK (`agent-client-protocol` 5.2.0) pins an older
//! `agent-client-protocol-schema` than this workspace, and one lockfile cannot hold both. The first
//! call of [`run_session`] in a test process builds it (`cargo build --locked --manifest-path
//! tests/sdk-client/Cargo.toml --bins`, into this workspace's target directory; a no-op when it is
//! fresh), unless `ACP_USAGE_SDK_CLIENT_BIN` names a binary to use as it is. Each session runs
//! `sdk-client --transcript FILE …`, and [`SdkTranscript`] is what it wrote there.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use acp_usage_tests::sdk_client::{SdkScript, run_session};
//! let cmd = vec!["acp-usage".to_owned(), "--".to_owned(), "my-agent".to_owned()];
//! let t = run_session(&cmd, &[], std::path::Path::new("/tmp"), &SdkScript::new().prompt("hi"))?;
//! assert!(t.usage_updates().next().is_some());
//! assert!(t.lost().is_empty());
//! # Ok(()) }
//! ```

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::relay::{target_dir, workspace_root};
use crate::scratch::Scratch;

#[path = "../sdk-client/src/run.rs"]
mod run;
pub use run::{SdkResponse, SdkScript, SdkTranscript, SdkUpdate};

/// The SDK client's manifest, relative to the workspace root.
pub const SDK_CLIENT_MANIFEST: &str = "tests/sdk-client/Cargo.toml";

/// The `sdk-client` binary, built if needed; the build happens once per test process.
pub fn sdk_client_binary() -> anyhow::Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| find_or_build().map_err(|err| format!("{err:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn find_or_build() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("ACP_USAGE_SDK_CLIENT_BIN") {
        let bin = PathBuf::from(bin);
        if !bin.exists() {
            bail!("ACP_USAGE_SDK_CLIENT_BIN={} does not exist", bin.display());
        }
        return Ok(bin);
    }
    let what = format!("cargo build --locked --manifest-path {SDK_CLIENT_MANIFEST} --bins");
    let target = target_dir();
    // The same cargo, without the test's per-package variables, as the tests' other builds.
    let out = crate::relay::cargo()
        .args(["build", "--quiet", "--locked", "--bins", "--manifest-path"])
        .arg(workspace_root().join(SDK_CLIENT_MANIFEST))
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): the SDK client (a workspace of its own, with its own Cargo.lock) \
             does not build; its output:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bin = target.join("debug").join("sdk-client");
    if !bin.exists() {
        bail!("{} is missing after {what}", bin.display());
    }
    Ok(bin)
}

/// Runs a session with the SDK client (blocking). `command[0]` is the program; `env` is added to
/// the inherited environment; `cwd` is both the agent's working directory and the session's
/// `cwd` (made absolute). The agent's stderr ends up in [`SdkTranscript::stderr`], or in the
/// error when the run fails.
pub fn run_session(
    command: &[String],
    env: &[(String, String)],
    cwd: &Path,
    script: &SdkScript,
) -> anyhow::Result<SdkTranscript> {
    if command.is_empty() {
        bail!("empty agent command");
    }
    let client = sdk_client_binary()?;
    let cwd = std::path::absolute(cwd).with_context(|| format!("bad cwd {}", cwd.display()))?;
    let scratch = Scratch::new("sdk-client-run")?;
    let transcript_file = scratch.path("transcript.json");

    let mut cmd = Command::new(&client);
    cmd.arg("--capture-stderr")
        .arg("--cwd")
        .arg(&cwd)
        .args(["--timeout", &script.timeout.as_secs_f64().to_string()])
        .args(["--linger", &script.linger.as_secs_f64().to_string()])
        .arg("--transcript")
        .arg(&transcript_file);
    for prompt in &script.prompts {
        cmd.args(["--prompt", prompt]);
    }
    if script.load {
        cmd.arg("--load");
    }
    let mut child = cmd
        .arg("--")
        .args(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", client.display()))?;
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    });

    // The client enforces the script's timeout itself (and kills the agent); this is a backstop.
    let deadline = Instant::now() + script.timeout + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    match status {
        None => {
            bail!("sdk-client did not finish within {:?}; its stderr:\n{stderr}", script.timeout)
        }
        Some(status) if !status.success() => bail!("sdk-client failed ({status}):\n{stderr}"),
        Some(_) => {}
    }
    let json = std::fs::read(&transcript_file)
        .with_context(|| format!("sdk-client wrote no transcript; its stderr:\n{stderr}"))?;
    serde_json::from_slice(&json).context("sdk-client's transcript does not parse")
}
