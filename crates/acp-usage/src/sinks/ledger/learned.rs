//! What acp-usage learns across runs, in the forms the ledger stores: per agent and model the
//! hidden context the agent sends before any visible prompt (its baseline) and the last window
//! seen ([`Entry`], the `agents` table), and per session what an earlier run accounted
//! ([`SessionEntry`], the `carried` column, JSON).
//!
//! Before the ledger, these lived in `learned.json` (`$ACP_USAGE_STATE_DIR`, else
//! `$XDG_STATE_HOME/acp-usage`, else `~/.local/state/acp-usage`): [`legacy`] reads that file
//! once, when a ledger is created, so nothing learned is lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use acp_usage_core::{Carried, Source, TokenTotals};
use serde::{Deserialize, Serialize};

/// Environment variable naming the directory of the old state file.
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
    /// The subscription windows whose period has not ended, of every account (never in the
    /// old file; the ledger's `limit_windows`).
    #[serde(skip)]
    pub windows: Vec<acp_usage_core::limits::Tracked>,
    /// The account the agent will use, per provider, as its credentials tell at start.
    #[serde(skip)]
    pub accounts: Vec<(String, String)>,
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

/// The old state file's path, when a home for it is known.
pub fn legacy_path() -> Option<PathBuf> {
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

/// Reads the old state file; anything wrong yields an empty state and a log line.
pub fn legacy(path: &Path) -> Learned {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_figures_survive_the_json_form() {
        let carried = Carried {
            cost: Some(0.25),
            cost_source: Source::Tap,
            cost_exact: true,
            totals: TokenTotals { input: 10, output: 2, calls: 1, ..TokenTotals::default() },
            used: Some((10, 2, Source::Transcript, true)),
            ..Carried::default()
        };
        let entry = SessionEntry::from_carried(&carried, 5);
        let json = serde_json::to_string(&entry).unwrap();
        let back: SessionEntry = serde_json::from_str(&json).unwrap();
        assert_eq!(back.to_carried(), carried);
    }

    #[test]
    fn the_old_file_reads_back_and_a_broken_one_is_empty() {
        let dir = std::env::temp_dir().join(format!("acp-usage-learned-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("learned.json");
        std::fs::write(
            &path,
            r#"{"version":1,"agents":{"claude/default":{"baseline":12000,"size":1000000}},
               "sessions":{"claude/s1":{"updated":5,"cost":0.25,"cost_exact":true}}}"#,
        )
        .unwrap();
        let got = legacy(&path);
        assert_eq!(
            got.agents["claude/default"],
            Entry { baseline: Some(12000), size: Some(1_000_000) }
        );
        assert_eq!(got.sessions["claude/s1"].cost, Some(0.25));
        std::fs::write(&path, b"not json").unwrap();
        assert_eq!(legacy(&path), Learned::default());
        let _ = std::fs::remove_dir_all(dir);
    }
}
