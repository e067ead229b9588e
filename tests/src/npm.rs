//! The npm packages under test, the way a user gets them: packed by `cargo xtask dist npm` from
//! the debug binary (`--binary`, so no release build), then installed with Node 22 and npm into a
//! directory of their own, with a PATH that holds no Rust toolchain, HOME and the npm cache in
//! that directory, and npm offline: the other platforms' packages are not fetched (npm skips an
//! optional dependency it cannot get), and nothing leaves the machine.
//!
//! The packing (seconds: gzip of the debug binary) and the install of both packages happen once
//! per test run: under nextest, where each test is a process of its own, in
//! `target/tmp/npm-run-<run id>/`, which the run's processes share (the first to get there packs
//! and installs, under a file lock; the others wait, then use what it made); under libtest once
//! per test process, in `target/tmp/npm-<pid>/`. Directories of processes that no longer run, and
//! of runs over an hour old, are removed first.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, bail};

use crate::agents::node_bin_dir;
use crate::relay::{cargo, relay_binary, target_dir};

/// The version every package carries: the workspace's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Node's `process.platform-process.arch` here (the tests run on Linux).
pub fn host_platform() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "linux-arm64",
        _ => "linux-x64",
    }
}

/// The platform package the main package wants here.
pub fn platform_package() -> String {
    format!("acp-usage-{}", host_platform())
}

/// The two tarballs `cargo xtask dist npm` wrote.
#[derive(Debug)]
pub struct Tarballs {
    pub main: PathBuf,
    pub platform: PathBuf,
}

/// Node 22, npm and npx on a PATH of their own, with HOME and the npm cache beside them.
#[derive(Debug)]
pub struct NpmEnv {
    root: PathBuf,
}

/// A project directory with the packages installed.
#[derive(Debug)]
pub struct Installed {
    pub env: NpmEnv,
    pub project: PathBuf,
}

/// This run's (or test process's) directory under `target/tmp`, made once per process.
fn process_dir() -> anyhow::Result<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| make_process_dir().map_err(|err| format!("{err:#}")))
        .as_deref()
        .map_err(anyhow::Error::msg)
}

fn make_process_dir() -> anyhow::Result<PathBuf> {
    let tmp = target_dir().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let run = std::env::var("NEXTEST_RUN_ID").ok();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for entry in std::fs::read_dir(&tmp)?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = if let Some(pid) = name.strip_prefix("npm-run-") {
            run.as_deref() != Some(pid)
                && entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < hour_ago)
        } else if let Some(pid) = name.strip_prefix("npm-") {
            pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists()
        } else {
            false
        };
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = match &run {
        Some(id) => tmp.join(format!("npm-run-{id}")),
        None => {
            let dir = tmp.join(format!("npm-{}", std::process::id()));
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            dir
        }
    };
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs `make` in `dir` unless a process sharing it already did (`<what>.done`), under an
/// exclusive lock on `<what>.lock`: the processes of one run wait for the first, then reuse.
fn once_in(
    dir: &Path,
    what: &str,
    make: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{what}.lock")))?;
    // flock(2): released when the file closes, the process's end included (std's File::lock
    // is newer than the workspace's MSRV).
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor, open for as long as the lock is held.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", dir.display()));
    }
    let done = dir.join(format!("{what}.done"));
    if !done.exists() {
        make()?;
        std::fs::File::create(&done)?;
    }
    Ok(())
}

/// Packs both packages once per test run (see the module's note).
pub fn packed() -> anyhow::Result<&'static Tarballs> {
    static PACKED: OnceLock<Result<Tarballs, String>> = OnceLock::new();
    PACKED
        .get_or_init(|| pack().map_err(|err| format!("{err:#}")))
        .as_ref()
        .map_err(|err| anyhow::anyhow!("{err}"))
}

fn pack() -> anyhow::Result<Tarballs> {
    let dir = process_dir()?;
    let out = dir.join("dist");
    let tarballs = Tarballs {
        main: out.join(format!("acp-usage-{VERSION}.tgz")),
        platform: out.join(format!("{}-{VERSION}.tgz", platform_package())),
    };
    once_in(dir, "pack", || pack_into(&out, &tarballs))?;
    for path in [&tarballs.main, &tarballs.platform] {
        if !path.is_file() {
            bail!("{} was packed but is not there", path.display());
        }
    }
    Ok(tarballs)
}

/// `cargo xtask dist npm` into `out`: it must report exactly `want`'s two tarballs.
fn pack_into(out: &Path, want: &Tarballs) -> anyhow::Result<()> {
    let binary = relay_binary()?;
    let output = cargo()
        .args(["run", "--quiet", "-p", "xtask", "--", "dist", "npm", "--out"])
        .arg(out)
        .arg("--binary")
        .arg(&binary)
        .stdin(Stdio::null())
        .output()
        .context("running cargo xtask dist npm")?;
    if !output.status.success() {
        bail!(
            "cargo xtask dist npm failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let paths: Vec<PathBuf> =
        String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).collect();
    for wanted in [&want.main, &want.platform] {
        if !paths.contains(wanted) {
            bail!("xtask dist npm did not report {}; it printed {paths:?}", wanted.display());
        }
    }
    if paths.len() != 2 {
        bail!("xtask dist npm packed {paths:?}, expected the main and the host's package");
    }
    Ok(())
}

/// Both packages installed once per test run (see the module's note).
pub fn installed() -> anyhow::Result<&'static Installed> {
    static INSTALLED: OnceLock<Result<Installed, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let run = || -> anyhow::Result<Installed> {
                let tarballs = packed()?;
                let dir = process_dir()?;
                let (root, project) = (dir.join("env"), dir.join("project"));
                once_in(dir, "install", || {
                    let env = NpmEnv::new(&root)?;
                    env.install(&project, &[&tarballs.main, &tarballs.platform]).map(drop)
                })?;
                Ok(Installed { env: NpmEnv { root }, project })
            };
            run().map_err(|err| format!("{err:#}"))
        })
        .as_ref()
        .map_err(|err| anyhow::anyhow!("{err}"))
}

impl Installed {
    /// The launcher as npm linked it (what a PATH entry of `node_modules/.bin` runs).
    pub fn launcher(&self) -> PathBuf {
        self.project.join("node_modules/.bin/acp-usage")
    }

    /// The binary npm unpacked from the platform package.
    pub fn platform_binary(&self) -> PathBuf {
        self.project.join("node_modules").join(platform_package()).join("bin/acp-usage")
    }
}

impl NpmEnv {
    /// `root/bin` with `node` (Node 22 of the agents' cache), `npm` and `npx` (the scripts of the
    /// npm on the tests' PATH: npm is plain JavaScript, and `#!/usr/bin/env node` makes it run
    /// on the Node 22 found first); `root/home` and `root/npm-cache`.
    pub fn new(root: &Path) -> anyhow::Result<NpmEnv> {
        let node = node_bin_dir().join("node");
        if !node.exists() {
            bail!(
                "Node 22 is not installed ({} is missing): run .ci/install-agents.sh",
                node.display()
            );
        }
        let npm_cli = find_on_path("npm")
            .context("npm is not on PATH (.ci/install-agents.sh needs it too)")?
            .canonicalize()?;
        let npx_cli = npm_cli.with_file_name("npx-cli.js");
        if npm_cli.file_name() != Some(OsStr::new("npm-cli.js")) || !npx_cli.exists() {
            bail!("{} is not npm's npm-cli.js next to an npx-cli.js", npm_cli.display());
        }
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin)?;
        std::fs::create_dir_all(root.join("home"))?;
        for (name, target) in [("node", &node), ("npm", &npm_cli), ("npx", &npx_cli)] {
            std::os::unix::fs::symlink(target, bin.join(name))
                .with_context(|| format!("linking {}", bin.join(name).display()))?;
        }
        let env = NpmEnv { root: root.to_owned() };
        for tool in ["cargo", "rustc", "rustup"] {
            if let Some(found) = env.which(tool) {
                bail!(
                    "the npm tests' PATH must hold no Rust toolchain, but has {}",
                    found.display()
                );
            }
        }
        Ok(env)
    }

    pub fn bin(&self) -> PathBuf {
        self.root.join("bin")
    }

    /// Node 22's bin directory (ours), then the system's basics.
    pub fn path_var(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin().display())
    }

    /// The complete environment of every command run here: nothing of the tests' own.
    pub fn vars(&self) -> Vec<(String, String)> {
        let home = self.root.join("home");
        [
            ("PATH", self.path_var()),
            ("HOME", home.display().to_string()),
            ("npm_config_cache", self.root.join("npm-cache").display().to_string()),
            ("npm_config_offline", "true".to_owned()),
            ("npm_config_update_notifier", "false".to_owned()),
            ("npm_config_fund", "false".to_owned()),
            ("npm_config_audit", "false".to_owned()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    /// `program` in `cwd` with this environment and nothing else; stdin is empty unless the
    /// caller says otherwise (never the test runner's).
    pub fn command(&self, program: impl AsRef<OsStr>, cwd: &Path) -> Command {
        let mut command = Command::new(program);
        command.env_clear().envs(self.vars()).current_dir(cwd).stdin(Stdio::null());
        command
    }

    /// What a name resolves to on this PATH.
    pub fn which(&self, name: &str) -> Option<PathBuf> {
        self.path_var().split(':').map(|dir| Path::new(dir).join(name)).find(|path| path.is_file())
    }

    /// `npm install` of `tarballs` into a new project directory.
    pub fn install(&self, project: &Path, tarballs: &[&Path]) -> anyhow::Result<Output> {
        std::fs::create_dir_all(project)?;
        let output = self
            .command(self.bin().join("npm"), project)
            .arg("install")
            .args(tarballs)
            .output()
            .context("running npm install")?;
        if !output.status.success() {
            bail!(
                "npm install {tarballs:?} failed ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(output)
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|path| path.is_file())
}
