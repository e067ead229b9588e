//! `cargo xtask dist npm`: the npm packages, packed. The main package `acp-usage` is the launcher
//! (`npm/acp-usage/`) with every platform package as an optional dependency; each platform
//! package `acp-usage-<os>-<cpu>` holds one binary and says which `os`/`cpu` it is for, so npm
//! installs only the one that fits. No install script, nothing fetched at run time.
//!
//! Both kinds are staged in a temporary directory (package.json, binary with mode 755, README,
//! license files) and packed with `npm pack` into the output directory; the tarballs' paths go to
//! stdout, one a line, the rest of the report to stderr.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::Workspace;
use super::platforms::{self, Platform};

/// Where the binaries come from.
#[derive(Debug)]
pub enum Binaries {
    /// One platform: a given binary, or the host's release build; `platform` is a Rust target
    /// or an npm `os-cpu` (default: the host).
    One { binary: Option<PathBuf>, platform: Option<String> },
    /// Every platform of the table, from `<dir>/<target>/acp-usage[.exe]` (the release's
    /// artifacts); refused when one is missing.
    All(PathBuf),
}

/// The main package's sources, relative to the workspace root.
const LAUNCHER_DIR: &str = "npm/acp-usage";
const NPM_README: &str = "npm/README.md";
/// The license files at the workspace root (Cargo.toml's `MIT OR Apache-2.0`): every package
/// lists and holds both.
pub const LICENSE_FILES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

pub fn run(ws: &Workspace, out: &Path, binaries: &Binaries) -> anyhow::Result<()> {
    let npm = npm_command();
    let npm_version = Command::new(npm).arg("--version").output().map_err(|err| {
        anyhow::anyhow!(
            "cannot run `{npm}` ({err}): `npm pack` makes the tarballs; install Node.js"
        )
    })?;
    if !npm_version.status.success() {
        bail!("`{npm} --version` failed: {}", String::from_utf8_lossy(&npm_version.stderr));
    }

    let jobs = binaries_to_pack(ws, binaries)?;
    for (platform, binary) in &jobs {
        let mut head = vec![0u8; 4096];
        let n = read_head(binary, &mut head)?;
        platforms::check_executable(&head[..n], platform).with_context(|| {
            format!("{} cannot go into {}", binary.display(), platform.package())
        })?;
    }

    // Everything is staged and checked before anything is packed: a release packs all or none.
    let staging = Staging::new()?;
    let mut dirs = Vec::new();
    for (platform, binary) in &jobs {
        let dir = staging.0.join(platform.package());
        let staged = stage_platform(ws, platform, binary, &dir)?;
        // The staged copy is executable (a downloaded artifact may have lost its mode).
        if platforms::host_key().is_ok_and(|host| host == platform.key()) {
            check_version(&staged, &ws.version).with_context(|| {
                format!("{} cannot go into {}", binary.display(), platform.package())
            })?;
        }
        dirs.push(dir);
    }
    let dir = staging.0.join("acp-usage");
    stage_main(ws, &dir)?;
    dirs.push(dir);

    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize().with_context(|| format!("resolving {}", out.display()))?;
    let mut tarballs = Vec::new();
    for dir in &dirs {
        tarballs.push(pack(npm, dir, &out)?);
    }

    let mut stdout = std::io::stdout().lock();
    for tarball in &tarballs {
        writeln!(stdout, "{}", tarball.display())?;
    }
    Ok(())
}

fn npm_command() -> &'static str {
    // npm is a .cmd script on Windows, which Command does not find by its bare name.
    if cfg!(windows) { "npm.cmd" } else { "npm" }
}

/// The (platform, binary) pairs to pack.
fn binaries_to_pack<'a>(
    ws: &'a Workspace,
    binaries: &Binaries,
) -> anyhow::Result<Vec<(&'a Platform, PathBuf)>> {
    match binaries {
        Binaries::One { binary, platform } => {
            let platform = platforms::select(&ws.platforms, platform.as_deref())?;
            let binary = match binary {
                Some(binary) => binary.clone(),
                None => build_host_release(ws, platform)?,
            };
            if !binary.is_file() {
                bail!("the binary {} does not exist", binary.display());
            }
            Ok(vec![(platform, binary)])
        }
        Binaries::All(dir) => {
            let pairs: Vec<(&Platform, PathBuf)> = ws
                .platforms
                .iter()
                .map(|p| (p, dir.join(&p.target).join(p.binary_name())))
                .collect();
            let missing: Vec<String> = pairs
                .iter()
                .filter(|(_, binary)| !binary.is_file())
                .map(|(p, binary)| format!("{} ({})", p.package(), binary.display()))
                .collect();
            if !missing.is_empty() {
                // The main package names every platform package: publishing it while one is
                // missing would give that platform an install that cannot run.
                bail!(
                    "refusing to pack: no binary for {} of the {} platforms: {}",
                    missing.len(),
                    pairs.len(),
                    missing.join(", ")
                );
            }
            Ok(pairs)
        }
    }
}

/// `cargo build --release --locked -p acp-usage` for the host, and the binary it made.
fn build_host_release(ws: &Workspace, platform: &Platform) -> anyhow::Result<PathBuf> {
    let host = platforms::host_key()?;
    if platform.key() != host {
        bail!(
            "the host is {host}: give the {} binary with --binary (it is built for {})",
            platform.key(),
            platform.target
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building the release binary: cargo build --release --locked -p acp-usage");
    let status = Command::new(cargo)
        .args(["build", "--release", "--locked", "-p", "acp-usage", "--bin", "acp-usage"])
        .current_dir(&ws.root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p acp-usage failed ({status})");
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.root.join("target"));
    Ok(target_dir.join("release").join(platform.binary_name()))
}

fn read_head(path: &Path, buf: &mut [u8]) -> anyhow::Result<usize> {
    use std::io::Read as _;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            read => n += read,
        }
    }
    Ok(n)
}

/// A host binary must say the workspace's version: a stale build would ship under a new number.
fn check_version(binary: &Path, version: &str) -> anyhow::Result<()> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let expected = format!("acp-usage {version}");
    if said != expected {
        bail!("{} --version says {said:?}, the workspace is {expected:?}", binary.display());
    }
    Ok(())
}

/// A temporary directory, removed on drop.
struct Staging(PathBuf);

impl Staging {
    fn new() -> anyhow::Result<Staging> {
        let dir = std::env::temp_dir().join(format!("acp-usage-dist-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The fields every package shares, from the workspace's Cargo.toml.
fn common_fields(ws: &Workspace, package: &mut Map<String, Value>) {
    package.insert("version".into(), json!(ws.version));
    package.insert("license".into(), json!(ws.license));
    if let Some(repo) = &ws.repository {
        package
            .insert("repository".into(), json!({"type": "git", "url": format!("git+{repo}.git")}));
        package.insert("homepage".into(), json!(repo));
    }
}

/// Stages a platform package in `dir`; returns the staged binary.
fn stage_platform(
    ws: &Workspace,
    platform: &Platform,
    binary: &Path,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let bin = format!("bin/{}", platform.binary_name());
    let mut package = Map::new();
    package.insert("name".into(), json!(platform.package()));
    let description = format!(
        "The acp-usage binary for {}; installed by the acp-usage package",
        platform.describe()
    );
    package.insert("description".into(), json!(description));
    common_fields(ws, &mut package);
    package.insert("os".into(), json!([platform.os]));
    package.insert("cpu".into(), json!([platform.cpu]));
    let mut files = vec![bin.clone()];
    files.extend(LICENSE_FILES.iter().map(|f| (*f).to_owned()));
    package.insert("files".into(), json!(files));
    // Package managers that run packages from a zip (Yarn PnP) must unpack this one: it is run
    // as an executable, not loaded by Node.
    package.insert("preferUnplugged".into(), json!(true));
    write_json(&dir.join("package.json"), &Value::Object(package))?;
    copy_executable(binary, &dir.join(&bin))?;
    let readme = format!(
        "# {name}\n\nThe `acp-usage` binary for {what} ({target}). Install \
         [`acp-usage`](https://www.npmjs.com/package/acp-usage) instead: it depends on this \
         package where it fits and runs the binary.\n",
        name = platform.package(),
        what = platform.describe(),
        target = platform.target,
    );
    write_file(&dir.join("README.md"), readme.as_bytes())?;
    copy_licenses(ws, dir)?;
    Ok(dir.join(bin))
}

fn stage_main(ws: &Workspace, dir: &Path) -> anyhow::Result<()> {
    let source = ws.root.join(LAUNCHER_DIR);
    let template_path = source.join("package.json");
    let template: Value = serde_json::from_str(
        &std::fs::read_to_string(&template_path)
            .with_context(|| format!("reading {}", template_path.display()))?,
    )
    .with_context(|| format!("parsing {}", template_path.display()))?;
    let Value::Object(mut package) = template else {
        bail!("{} is not a JSON object", template_path.display());
    };
    if package.get("name") != Some(&json!("acp-usage")) {
        bail!("{} must name the package acp-usage", template_path.display());
    }
    common_fields(ws, &mut package);
    let optional: Map<String, Value> =
        ws.platforms.iter().map(|p| (p.package(), json!(ws.version))).collect();
    package.insert("optionalDependencies".into(), Value::Object(optional));

    // What the template's `files` lists is what the package holds (the README aside, which
    // npm always packs): the launcher from its directory, the license files from the root.
    let files = package.get("files").and_then(Value::as_array).cloned().unwrap_or_default();
    if files.is_empty() {
        bail!("{} lists no files", template_path.display());
    }
    for license in LICENSE_FILES {
        if !files.contains(&json!(license)) {
            bail!("{} must list {license} in `files`", template_path.display());
        }
    }
    for file in files {
        let file = file.as_str().context("`files` holds a non-string")?;
        if !LICENSE_FILES.contains(&file) {
            copy_executable(&source.join(file), &dir.join(file))?;
        }
    }
    write_json(&dir.join("package.json"), &Value::Object(package))?;
    let readme = ws.root.join(NPM_README);
    let text = std::fs::read(&readme).with_context(|| format!("reading {}", readme.display()))?;
    write_file(&dir.join("README.md"), &text)?;
    copy_licenses(ws, dir)
}

/// The workspace's license files into a staged package; a missing one stops the packing (a
/// package without its license cannot be published).
fn copy_licenses(ws: &Workspace, dir: &Path) -> anyhow::Result<()> {
    for name in LICENSE_FILES {
        let from = ws.root.join(name);
        std::fs::copy(&from, dir.join(name))
            .with_context(|| format!("copying {} into the package", from.display()))?;
    }
    Ok(())
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_file(path, text.as_bytes())
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Copies a file and makes it executable for everyone (npm keeps the mode in the tarball).
fn copy_executable(from: &Path, to: &Path) -> anyhow::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// `npm pack` of a staged package into `out`; returns the tarball's path.
fn pack(npm: &str, dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new(npm)
        .args(["pack", "--json", "--pack-destination"])
        .arg(out)
        .current_dir(dir)
        .env("npm_config_update_notifier", "false")
        .output()
        .with_context(|| format!("running {npm} pack in {}", dir.display()))?;
    if !output.status.success() {
        bail!(
            "{npm} pack failed in {} ({}): {}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("reading {npm} pack --json's output"))?;
    let entry = &report[0];
    let filename = entry["filename"].as_str().context("npm pack named no tarball")?;
    let tarball = out.join(filename);
    if !tarball.is_file() {
        bail!("npm pack reported {} but it is not there", tarball.display());
    }
    eprintln!(
        "packed {} ({}, {} unpacked, {} files)",
        tarball.display(),
        size(&entry["size"]),
        size(&entry["unpackedSize"]),
        entry["entryCount"]
    );
    Ok(tarball)
}

fn size(bytes: &Value) -> String {
    let bytes = bytes.as_f64().unwrap_or(0.0);
    if bytes >= 1e6 { format!("{:.1} MB", bytes / 1e6) } else { format!("{:.1} kB", bytes / 1e3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_with_a_platform_missing_is_refused() {
        let ws = Workspace::read(crate::workspace_root()).expect("the workspace");
        let dir = std::env::temp_dir().join(format!("acp-usage-dist-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Every platform's binary but one (aarch64 macOS), as the release's artifacts.
        for platform in ws.platforms.iter().filter(|p| p.target != "aarch64-apple-darwin") {
            write_file(&dir.join(&platform.target).join(platform.binary_name()), b"binary")
                .expect("artifact");
        }
        let err = binaries_to_pack(&ws, &Binaries::All(dir.clone())).expect_err("one is missing");
        let message = format!("{err:#}");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            message.starts_with("refusing to pack: no binary for 1 of the 5 platforms: ")
                && message.contains("acp-usage-darwin-arm64"),
            "{message}"
        );
        for platform in &ws.platforms {
            write_file(&dir.join(&platform.target).join(platform.binary_name()), b"binary")
                .expect("artifact");
        }
        let all = binaries_to_pack(&ws, &Binaries::All(dir.clone())).expect("all there");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(all.len(), ws.platforms.len());
    }

    #[test]
    fn every_package_holds_both_license_files() {
        let ws = Workspace::read(crate::workspace_root()).expect("the workspace");
        let staging = Staging::new().expect("staging");
        let main = staging.0.join("main");
        stage_main(&ws, &main).expect("the main package stages");
        let platform = &ws.platforms[0];
        let binary = staging.0.join("binary");
        write_file(&binary, b"binary").expect("binary");
        let plat = staging.0.join("platform");
        stage_platform(&ws, platform, &binary, &plat).expect("a platform package stages");
        for dir in [&main, &plat] {
            let package: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap())
                    .unwrap();
            for license in LICENSE_FILES {
                let text = std::fs::read_to_string(dir.join(license)).expect(license);
                assert!(text.contains("License"), "{license} in {}", dir.display());
                let files = package["files"].as_array().expect("files");
                assert!(files.contains(&json!(license)), "{license} not in {files:?}");
            }
            assert_eq!(package["license"], json!("MIT OR Apache-2.0"));
        }
    }
}
