//! `cargo xtask screenshot`: the README's picture, `docs/report.png`, taken from the running
//! product. A seeded history of Claude Code and Codex sessions (the benchmark's generator, so
//! the same bytes every time) is imported by the release binary into a scratch ledger, `report
//! --html` writes its page, and headless Chromium (Debian's `chromium`, which
//! `.ci/install-browser.sh` installs) takes the picture. Run by hand when the page changes; the
//! PNG is committed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use acp_usage_bench::history::{self, Spec};
use anyhow::{Context, bail};

/// Where the picture goes, relative to the workspace root.
pub const PICTURE: &str = "docs/report.png";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The generator's first day and the days the small spec spreads over.
const SINCE: &str = "2026-10-01";
const UNTIL: &str = "2026-10-05";

pub fn run(root: &Path) -> anyhow::Result<()> {
    let work = std::env::temp_dir().join(format!("acp-usage-screenshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    let result = take(root, &work, &home);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn take(root: &Path, work: &Path, home: &Path) -> anyhow::Result<()> {
    let truth = history::generate(home, &Spec::small(19))?;
    eprintln!(
        "screenshot: {} calls of history, true bill ${:.2}",
        truth.total().calls,
        truth.total().cost
    );
    let binary = release_binary(root)?;
    let ledger = work.join("ledger.db");
    let page = work.join("report.html");
    let acp = |args: &[&str]| -> anyhow::Result<()> {
        let status = Command::new(&binary)
            .args(args)
            .arg("--ledger")
            .arg(&ledger)
            .env_clear()
            .env("HOME", home)
            .env("TZ", "UTC")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running {}", binary.display()))?;
        if !status.success() {
            bail!("acp-usage {} failed ({status})", args.join(" "));
        }
        Ok(())
    };
    acp(&["import"])?;
    let html = page.to_str().context("a UTF-8 scratch path")?;
    acp(&["report", "--no-import", "--since", SINCE, "--until", UNTIL, "--html", html])?;
    let picture = root.join(PICTURE);
    let status = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", work.join("chromium").display()))
        .arg(format!("--screenshot={}", picture.display()))
        .arg("--window-size=1200,1110")
        .arg(format!("file://{}", page.display()))
        .env("HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {CHROMIUM} (.ci/install-browser.sh installs it)"))?;
    let png = std::fs::read(&picture).unwrap_or_default();
    if !status.success() || !png.starts_with(b"\x89PNG\r\n\x1a\n") {
        bail!("Chromium made no picture ({status})");
    }
    eprintln!("wrote {PICTURE}: {} bytes", png.len());
    Ok(())
}

/// `cargo build --release -p acp-usage`, and the binary it made.
fn release_binary(root: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "acp-usage", "--bin", "acp-usage"])
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p acp-usage failed ({status})");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target.join("release").join("acp-usage"))
}
