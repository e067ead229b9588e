//! What acp-usage learns across runs: per agent and model, the hidden context the agent sends
//! before any visible prompt (its baseline) and the last window seen.
//!
//! The file is `learned.json` in `$ACP_USAGE_STATE_DIR`, else `$XDG_STATE_HOME/acp-usage`, else
//! `~/.local/state/acp-usage`. It only improves estimates (the `used` of a new or reloaded session
//! before any source reports, a window when nothing else knows it), so a missing, unreadable or
//! corrupt file is logged and ignored, never fatal. `ACP_USAGE_STATE_DIR=off` turns it off. Several acp-usage processes may share it:
//! saving re-reads the file and merges, and a rename makes each write whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Environment variable naming the state directory.
pub const STATE_ENV: &str = "ACP_USAGE_STATE_DIR";

/// What is known for one agent and model (`<profile>/<model option>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Tokens the agent sends before the visible prompt (system prompt, tool definitions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<u64>,
    /// The last effective window seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// Everything learned, by `<profile>/<model option>`.
pub type Learned = BTreeMap<String, Entry>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    agents: Learned,
}

/// The state file's path, when a home for it is known; `ACP_USAGE_STATE_DIR=off` disables it.
pub fn path() -> Option<PathBuf> {
    let dir = match std::env::var_os(STATE_ENV) {
        Some(d) if d == "off" => return None,
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => match std::env::var_os("XDG_STATE_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join("acp-usage"),
            _ => PathBuf::from(std::env::var_os("HOME")?).join(".local/state/acp-usage"),
        },
    };
    Some(dir.join("learned.json"))
}

/// Reads the state; anything wrong yields an empty state and a log line.
pub fn load(path: &Path) -> Learned {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
            Ok(f) => f.agents,
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", path.display());
                Learned::new()
            }
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Learned::new(),
        Err(err) => {
            tracing::warn!("cannot read {}: {err}", path.display());
            Learned::new()
        }
    }
}

/// Merges `ours` into the file (our entries win) and writes it whole.
pub fn save(path: &Path, ours: &Learned) -> std::io::Result<()> {
    let mut agents = load(path);
    for (k, v) in ours {
        let e = agents.entry(k.clone()).or_default();
        e.baseline = v.baseline.or(e.baseline);
        e.size = v.size.or(e.size);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(&File { version: 1, agents }).expect("state serialises");
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_merges_and_load_reads_back() {
        let dir = std::env::temp_dir().join(format!("acp-usage-state-{}", std::process::id()));
        let path = dir.join("learned.json");
        let mut a = Learned::new();
        a.insert("claude/default".into(), Entry { baseline: Some(12000), size: None });
        save(&path, &a).unwrap();
        let mut b = Learned::new();
        b.insert("codex/gpt-5.2-codex".into(), Entry { baseline: None, size: Some(258400) });
        b.insert("claude/default".into(), Entry { baseline: None, size: Some(1_000_000) });
        save(&path, &b).unwrap();
        let got = load(&path);
        assert_eq!(got["claude/default"], Entry { baseline: Some(12000), size: Some(1_000_000) });
        assert_eq!(got["codex/gpt-5.2-codex"].size, Some(258400));
        std::fs::write(&path, b"not json").unwrap();
        assert!(load(&path).is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }
}
