//! `cargo xtask dist`: what a release ships. `dist npm` packs the npm packages, `dist check`
//! checks the release workflow and cargo binstall's metadata against the platform table
//! (`npm/platforms.json`, read by [`platforms`]).

pub mod npm;
pub mod platforms;
pub mod release;

use std::path::PathBuf;

use anyhow::{Context, bail};

pub const USAGE: &str = "\
usage: cargo xtask dist npm --out DIR [--binary PATH] [--target TARGET]
       cargo xtask dist npm --out DIR --binaries DIR
       cargo xtask dist check

dist npm packs the npm packages into DIR: acp-usage (the launcher, every platform package as an
optional dependency) and acp-usage-<os>-<cpu> (the binary). Versions are the workspace's.
  --binary PATH     package this already-built binary instead of building one; CI passes the
                    debug binary (target/debug/acp-usage) so that it does not pay for a release
                    build. Without it: cargo build --release --locked -p acp-usage, for the host.
  --target TARGET   the platform of that binary, a Rust target or an npm os-cpu from
                    npm/platforms.json (default: the host's)
  --binaries DIR    every platform, from DIR/<target>/acp-usage[.exe] (the release workflow's
                    artifacts); refuses to pack anything when one is missing
dist check verifies that .github/workflows/release.yml builds every platform of
npm/platforms.json and that crates/acp-usage's binstall metadata names the release archives.";

/// What the packages are made of: the workspace root, its version, license and repository (from
/// the root Cargo.toml's `[workspace.package]`), and the platform table.
#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    pub version: String,
    pub license: String,
    pub repository: Option<String>,
    pub platforms: Vec<platforms::Platform>,
}

impl Workspace {
    pub fn read(root: PathBuf) -> anyhow::Result<Workspace> {
        let manifest = root.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .with_context(|| format!("reading {}", manifest.display()))?;
        let table: toml::Table =
            text.parse().with_context(|| format!("parsing {}", manifest.display()))?;
        let field = |name: &str| {
            table
                .get("workspace")
                .and_then(|w| w.get("package"))
                .and_then(|p| p.get(name))
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        let version = field("version").context("no [workspace.package] version in Cargo.toml")?;
        let license = field("license").context("no [workspace.package] license in Cargo.toml")?;
        let repository = field("repository").map(|url| url.trim_end_matches('/').to_owned());
        let platforms = platforms::load(&root)?;
        Ok(Workspace { root, version, license, repository, platforms })
    }
}

pub fn run(root: PathBuf, args: &[&str]) -> anyhow::Result<()> {
    match args {
        ["npm", rest @ ..] => {
            let ws = Workspace::read(root)?;
            let (out, binaries) = npm_args(rest)?;
            npm::run(&ws, &out, &binaries)
        }
        ["check"] => release::check(&Workspace::read(root)?),
        _ => bail!("{USAGE}"),
    }
}

fn npm_args(args: &[&str]) -> anyhow::Result<(PathBuf, npm::Binaries)> {
    let (mut out, mut binary, mut target, mut all) = (None, None, None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let slot = match *arg {
            "--out" => &mut out,
            "--binary" => &mut binary,
            "--target" => &mut target,
            "--binaries" => &mut all,
            other => bail!("unknown argument {other}\n{USAGE}"),
        };
        let value = args.next().with_context(|| format!("{arg} needs a value\n{USAGE}"))?;
        *slot = Some(value.to_string());
    }
    let out = PathBuf::from(out.with_context(|| format!("--out is required\n{USAGE}"))?);
    let binaries = match (all, binary, target) {
        (Some(dir), None, None) => npm::Binaries::All(PathBuf::from(dir)),
        (Some(_), _, _) => bail!("--binaries packs every platform: no --binary or --target"),
        // Relative paths stay relative to where cargo was run (`cargo run` keeps that directory).
        (None, binary, platform) => {
            npm::Binaries::One { binary: binary.map(PathBuf::from), platform }
        }
    };
    Ok((out, binaries))
}
