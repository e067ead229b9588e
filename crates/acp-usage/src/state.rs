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

use acp_usage_core::{Carried, Source, TokenTotals};
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

/// How many sessions the file remembers; the least recently updated go first.
pub const MAX_SESSIONS: usize = 1000;

/// A session's accounting as an earlier run left it (see [`acp_usage_core::Carried`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionEntry {
    /// Unix time of the last update, for pruning.
    pub updated: u64,
    /// Cumulative cost in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Where the cost came from (a source name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_source: Option<String>,
    /// Whether the cost was exact.
    #[serde(default)]
    pub cost_exact: bool,
    /// Whether the cost left out history.
    #[serde(default)]
    pub cost_partial: bool,
    /// Calls without a price.
    #[serde(default)]
    pub unpriced_calls: u64,
    /// Cumulative tokens: input, cache reads, cache writes, output, thoughts, calls.
    #[serde(default)]
    pub totals: [u64; 6],
    /// Whether the totals were exact.
    #[serde(default)]
    pub totals_exact: bool,
    /// `used` at the end of the last turn: prompt, output, source name, exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<(u64, u64, String, bool)>,
}

/// Everything learned: per `<profile>/<model option>`, and per `<profile>/<session id>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// Per agent and model.
    #[serde(default)]
    pub agents: BTreeMap<String, Entry>,
    /// Per session.
    #[serde(default)]
    pub sessions: BTreeMap<String, SessionEntry>,
    /// Sessions to drop from the file when saving (deleted by the editor).
    #[serde(skip)]
    pub forget: std::collections::BTreeSet<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    version: u32,
    #[serde(flatten)]
    learned: Learned,
}

impl SessionEntry {
    /// From a ledger's carried part.
    pub fn from_carried(c: &Carried, updated: u64) -> SessionEntry {
        let t = &c.totals;
        SessionEntry {
            updated,
            cost: c.cost,
            cost_source: c.cost.map(|_| c.cost_source.as_str().to_string()),
            cost_exact: c.cost_exact,
            cost_partial: c.cost_partial,
            unpriced_calls: c.unpriced_calls,
            totals: [t.input, t.cache_read, t.cache_write, t.output, t.thought, t.calls],
            totals_exact: c.totals_exact,
            used: c.used.map(|(p, o, src, exact)| (p, o, src.as_str().to_string(), exact)),
        }
    }

    /// Back to a ledger's carried part.
    pub fn to_carried(&self) -> Carried {
        let [input, cache_read, cache_write, output, thought, calls] = self.totals;
        let source = |name: &str| match name {
            "tap" => Source::Tap,
            "transcript" => Source::Transcript,
            "agent" => Source::Agent,
            "catalog" => Source::Catalog,
            _ => Source::Estimate,
        };
        Carried {
            cost: self.cost,
            cost_source: self.cost_source.as_deref().map_or(Source::Estimate, source),
            cost_exact: self.cost_exact,
            cost_partial: self.cost_partial,
            unpriced_calls: self.unpriced_calls,
            totals: TokenTotals { input, cache_read, cache_write, output, thought, calls },
            totals_exact: self.totals_exact,
            used: self.used.as_ref().map(|(p, o, src, exact)| (*p, *o, source(src), *exact)),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
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
            Ok(f) => f.learned,
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", path.display());
                Learned::default()
            }
        },
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Learned::default(),
        Err(err) => {
            tracing::warn!("cannot read {}: {err}", path.display());
            Learned::default()
        }
    }
}

/// Merges `ours` into the file (our entries win) and writes it whole.
pub fn save(path: &Path, ours: &Learned) -> std::io::Result<()> {
    let mut learned = load(path);
    for (k, v) in &ours.agents {
        let e = learned.agents.entry(k.clone()).or_default();
        e.baseline = v.baseline.or(e.baseline);
        e.size = v.size.or(e.size);
    }
    for (k, v) in &ours.sessions {
        if learned.sessions.get(k).is_none_or(|old| old.updated <= v.updated) {
            learned.sessions.insert(k.clone(), v.clone());
        }
    }
    for k in &ours.forget {
        learned.sessions.remove(k);
    }
    if learned.sessions.len() > MAX_SESSIONS {
        let mut by_age: Vec<(u64, String)> =
            learned.sessions.iter().map(|(k, v)| (v.updated, k.clone())).collect();
        by_age.sort();
        for (_, k) in by_age.into_iter().take(learned.sessions.len() - MAX_SESSIONS) {
            learned.sessions.remove(&k);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(&File { version: 1, learned }).expect("state serialises");
    // A name of its own per save: two saves of one process may overlap.
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("json.{}.{n}", std::process::id()));
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
        let mut a = Learned::default();
        a.agents.insert("claude/default".into(), Entry { baseline: Some(12000), size: None });
        let carried = Carried {
            cost: Some(0.25),
            cost_source: Source::Agent,
            cost_exact: true,
            totals: TokenTotals { input: 10, output: 2, calls: 1, ..TokenTotals::default() },
            used: Some((10, 2, Source::Agent, true)),
            ..Carried::default()
        };
        a.sessions.insert("claude/s1".into(), SessionEntry::from_carried(&carried, 5));
        save(&path, &a).unwrap();
        let mut b = Learned::default();
        b.agents.insert("codex/gpt-5.2-codex".into(), Entry { baseline: None, size: Some(258400) });
        b.agents.insert("claude/default".into(), Entry { baseline: None, size: Some(1_000_000) });
        save(&path, &b).unwrap();
        let got = load(&path);
        assert_eq!(
            got.agents["claude/default"],
            Entry { baseline: Some(12000), size: Some(1_000_000) }
        );
        assert_eq!(got.agents["codex/gpt-5.2-codex"].size, Some(258400));
        assert_eq!(got.sessions["claude/s1"].to_carried(), carried);
        std::fs::write(&path, b"not json").unwrap();
        assert_eq!(load(&path), Learned::default());
        let _ = std::fs::remove_dir_all(dir);
    }
}
