//! The platforms acp-usage ships a binary for, from `npm/platforms.json`: the one table behind the
//! main npm package's `optionalDependencies`, the platform packages' names and `os`/`cpu` fields,
//! the release archives' names and the check of the release workflow's build matrix.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// Where the table lives, relative to the workspace root.
pub const PLATFORMS_FILE: &str = "npm/platforms.json";

/// One platform: Node's names for it (`process.platform`, `process.arch`) and the Rust target
/// its binary is built for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Platform {
    pub os: String,
    pub cpu: String,
    pub target: String,
}

#[derive(Debug, Deserialize)]
struct PlatformsFile {
    platforms: Vec<Platform>,
}

impl Platform {
    /// `linux-x64`: the suffix of the npm package, as the launcher computes it.
    pub fn key(&self) -> String {
        format!("{}-{}", self.os, self.cpu)
    }

    /// The npm package holding this platform's binary.
    pub fn package(&self) -> String {
        format!("acp-usage-{}", self.key())
    }

    pub fn is_windows(&self) -> bool {
        self.os == "win32"
    }

    /// The binary's file name, inside the npm package's `bin/` and at the root of the archive.
    pub fn binary_name(&self) -> &'static str {
        if self.is_windows() { "acp-usage.exe" } else { "acp-usage" }
    }

    /// The release archive's extension: zip where the users' tools open zips (Windows).
    pub fn archive_ext(&self) -> &'static str {
        if self.is_windows() { "zip" } else { "tar.gz" }
    }

    /// The release archive (for the ACP registry's `binary` distribution and cargo binstall).
    pub fn archive_name(&self) -> String {
        format!("acp-usage-{}.{}", self.target, self.archive_ext())
    }

    /// A human name, for package descriptions.
    pub fn describe(&self) -> String {
        let os = match self.os.as_str() {
            "linux" => "Linux",
            "darwin" => "macOS",
            "win32" => "Windows",
            other => other,
        };
        format!("{os} on {}", self.cpu)
    }
}

/// Reads and checks the table: at least one platform, no platform or target twice.
pub fn load(root: &Path) -> anyhow::Result<Vec<Platform>> {
    let path = root.join(PLATFORMS_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

pub fn parse(text: &str) -> anyhow::Result<Vec<Platform>> {
    let file: PlatformsFile = serde_json::from_str(text)?;
    if file.platforms.is_empty() {
        bail!("no platforms");
    }
    for (i, platform) in file.platforms.iter().enumerate() {
        for other in &file.platforms[..i] {
            if other.key() == platform.key() || other.target == platform.target {
                bail!("{} ({}) is listed twice", platform.key(), platform.target);
            }
        }
    }
    Ok(file.platforms)
}

/// Node's `process.platform-process.arch` for the machine xtask runs on.
pub fn host_key() -> anyhow::Result<String> {
    use std::env::consts::{ARCH, OS};
    let os = match OS {
        "linux" => "linux",
        "macos" => "darwin",
        "windows" => "win32",
        other => bail!("no npm name for the host OS {other}"),
    };
    let cpu = match ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => bail!("no npm name for the host CPU {other}"),
    };
    Ok(format!("{os}-{cpu}"))
}

/// The platform `wanted` names (a Rust target triple or an npm `os-cpu`), or the host's.
pub fn select<'a>(platforms: &'a [Platform], wanted: Option<&str>) -> anyhow::Result<&'a Platform> {
    let wanted = match wanted {
        Some(wanted) => wanted.to_owned(),
        None => host_key()?,
    };
    platforms.iter().find(|p| p.target == wanted || p.key() == wanted).with_context(|| {
        let known: Vec<String> =
            platforms.iter().map(|p| format!("{} ({})", p.key(), p.target)).collect();
        format!("{PLATFORMS_FILE} has no platform {wanted}; it has {}", known.join(", "))
    })
}

/// Checks that `bytes` (the start of a binary) is an executable for `platform`: ELF, Mach-O or
/// PE of the right CPU. A mixed-up artifact would otherwise ship as a package that cannot run.
pub fn check_executable(bytes: &[u8], platform: &Platform) -> anyhow::Result<()> {
    let found = executable_kind(bytes);
    let expected = match (platform.os.as_str(), platform.cpu.as_str()) {
        ("linux", "x64") => Some(("ELF", "x64")),
        ("linux", "arm64") => Some(("ELF", "arm64")),
        ("darwin", "x64") => Some(("Mach-O", "x64")),
        ("darwin", "arm64") => Some(("Mach-O", "arm64")),
        ("win32", "x64") => Some(("PE", "x64")),
        ("win32", "arm64") => Some(("PE", "arm64")),
        _ => None,
    };
    match (expected, found) {
        // A platform this check does not know yet: nothing to compare.
        (None, _) => Ok(()),
        (Some(expected), Some(found)) if expected == found => Ok(()),
        (Some((format, cpu)), Some((found_format, found_cpu))) => bail!(
            "it is a {found_format} executable for {found_cpu}, not a {format} one for {cpu} ({})",
            platform.key()
        ),
        (Some((format, cpu)), None) => {
            bail!("it is not an executable (expected {format} for {cpu}, {})", platform.key())
        }
    }
}

/// The executable format and CPU of a file's first bytes, in the table's words.
fn executable_kind(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    let u16_le = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u32_le = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let cpu = |name: Option<&'static str>| name.unwrap_or("an unknown CPU");
    if bytes.starts_with(b"\x7fELF") {
        // e_machine, little-endian on both CPUs shipped.
        let machine = match u16_le(18)? {
            62 => Some("x64"),
            183 => Some("arm64"),
            _ => None,
        };
        return Some(("ELF", cpu(machine)));
    }
    if u32_le(0)? == 0xfeed_facf {
        let machine = match u32_le(4)? {
            0x0100_0007 => Some("x64"),
            0x0100_000c => Some("arm64"),
            _ => None,
        };
        return Some(("Mach-O", cpu(machine)));
    }
    if bytes.starts_with(b"MZ") {
        // The PE header's offset is at 0x3c; its machine field follows the "PE\0\0" signature.
        let pe = u32_le(0x3c)? as usize;
        if bytes.get(pe..pe + 4)? != b"PE\0\0" {
            return None;
        }
        let machine = match u16_le(pe + 4)? {
            0x8664 => Some("x64"),
            0xaa64 => Some("arm64"),
            _ => None,
        };
        return Some(("PE", cpu(machine)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_table() -> Vec<Platform> {
        load(&crate::workspace_root()).expect("npm/platforms.json")
    }

    #[test]
    fn the_table_names_five_platforms_with_distinct_packages() {
        let platforms = workspace_table();
        let packages: Vec<String> = platforms.iter().map(Platform::package).collect();
        assert_eq!(
            packages,
            [
                "acp-usage-linux-x64",
                "acp-usage-linux-arm64",
                "acp-usage-darwin-x64",
                "acp-usage-darwin-arm64",
                "acp-usage-win32-x64"
            ]
        );
        let windows = select(&platforms, Some("x86_64-pc-windows-msvc")).expect("windows");
        assert_eq!(
            (windows.binary_name(), windows.archive_name().as_str()),
            ("acp-usage.exe", "acp-usage-x86_64-pc-windows-msvc.zip")
        );
        let linux = select(&platforms, Some("linux-arm64")).expect("linux-arm64 by its npm name");
        assert_eq!(linux.archive_name(), "acp-usage-aarch64-unknown-linux-musl.tar.gz");
        let err = select(&platforms, Some("freebsd-x64")).expect_err("not in the table");
        assert!(format!("{err:#}").contains("has no platform freebsd-x64"), "{err:#}");
    }

    #[test]
    fn duplicates_are_refused() {
        let text = r#"{"platforms": [
            {"os": "linux", "cpu": "x64", "target": "x86_64-unknown-linux-musl"},
            {"os": "linux", "cpu": "x64", "target": "x86_64-unknown-linux-gnu"}]}"#;
        let err = parse(text).expect_err("linux-x64 twice");
        assert!(err.to_string().contains("linux-x64"), "{err}");
    }

    #[test]
    fn the_running_xtask_is_an_executable_of_the_host() {
        let platforms = workspace_table();
        let exe = std::env::current_exe().expect("current exe");
        let bytes = std::fs::read(exe).expect("read own executable");
        let host = select(&platforms, None).expect("the host is one of the table's platforms");
        check_executable(&bytes, host).expect("the test binary matches the host platform");
        let other = platforms.iter().find(|p| p.os != host.os).expect("the table has another OS");
        let err = check_executable(&bytes, other).expect_err("wrong platform");
        assert!(err.to_string().contains("not a"), "{err}");
        let err = check_executable(b"#!/bin/sh\n", &platforms[0]).expect_err("a script");
        assert!(err.to_string().contains("not an executable"), "{err}");
    }
}
