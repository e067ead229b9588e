//! Reading the agents' own transcripts as they grow: the exact per-call numbers behind a session.
//!
//! ```text
//! relay loop --Command (track, poll, hold, forget)--> worker thread --Update (events, eof)--> relay loop
//!                                        inotify ---^   (tails files, queries opencode's db)
//! ```
//! The relay never touches the files: a worker thread finds each session's transcript (by the
//! agent's environment, which is acp-usage's own since the agent inherits it), tails it from the
//! offset it reached last time, runs the format's parser (`acp_usage_core::transcript`) and sends
//! the events back. It reads when told to (the turn's traffic, a held result), when a watched
//! directory changes, and on a slow tick. A session whose transcript cannot be read (missing,
//! format changed, permission) is reported once as failed: the relay then uses the ACP numbers.

pub mod locate;
pub mod opencode;
pub mod tail;
pub mod worker;

use std::ffi::OsString;
use std::path::PathBuf;

pub use worker::{Command, Update, UpdateKind, Worker};

/// The transcript formats acp-usage reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Claude Code's JSONL (`<config>/projects/<escaped cwd>/<session>.jsonl`).
    Claude,
    /// Codex rollouts (`<codex home>/sessions/YYYY/MM/DD/rollout-*-<session>.jsonl[.zst]`).
    Codex,
    /// Gemini CLI chat records (`<gemini home>/tmp/<project>/chats/session-*.jsonl`).
    Gemini,
    /// opencode's SQLite store.
    Opencode,
    /// Copilot CLI's session events (`<copilot home>/session-state/<session>/events.jsonl`).
    Copilot,
    /// cline's conversation (`<cline data>/sessions/<session>/<session>.messages.json`), one
    /// JSON document rewritten whole.
    Cline,
}

impl Format {
    /// The format's name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Format::Claude => "claude",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
            Format::Opencode => "opencode",
            Format::Copilot => "copilot",
            Format::Cline => "cline",
        }
    }

    /// Whether the session's file is one document rewritten whole rather than appended lines.
    pub fn whole_document(self) -> bool {
        matches!(self, Format::Cline)
    }

    /// Whether the format records the end of a turn (see [`acp_usage_core::transcript::Event::TurnEnd`]).
    pub fn marks_turn_end(self) -> bool {
        // Gemini CLI records a reply's text before the tool call that follows it.
        !matches!(self, Format::Gemini)
    }
}

/// Where each agent keeps its transcripts, from the environment the agent runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    /// Claude Code's config directory (`$CLAUDE_CONFIG_DIR`, else `~/.claude`).
    pub claude: Option<PathBuf>,
    /// Codex's home (`$CODEX_HOME`, else `~/.codex`).
    pub codex: Option<PathBuf>,
    /// Gemini CLI's directory (`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`).
    pub gemini: Option<PathBuf>,
    /// opencode's database (`$OPENCODE_DB`, else `$XDG_DATA_HOME/opencode/opencode.db`, else
    /// `~/.local/share/opencode/opencode.db`).
    pub opencode: Option<PathBuf>,
    /// Copilot CLI's home (`$COPILOT_HOME`, else `~/.copilot`).
    pub copilot: Option<PathBuf>,
    /// cline's data directory (`$CLINE_DATA_DIR`, else `~/.cline/data`).
    pub cline: Option<PathBuf>,
    /// qwen-code's runtime directory (`$QWEN_RUNTIME_DIR`, else `$QWEN_HOME`, else `~/.qwen`):
    /// only `acp-usage import` reads it (the relay takes qwen's per-call ACP reports).
    pub qwen: Option<PathBuf>,
}

impl Locations {
    /// The locations an agent started with `env` uses.
    pub fn from_env(env: impl Fn(&str) -> Option<OsString>) -> Locations {
        let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = set("HOME");
        Locations {
            claude: set("CLAUDE_CONFIG_DIR").or_else(|| home.as_ref().map(|h| h.join(".claude"))),
            codex: set("CODEX_HOME").or_else(|| home.as_ref().map(|h| h.join(".codex"))),
            gemini: set("GEMINI_CLI_HOME").or_else(|| home.clone()).map(|h| h.join(".gemini")),
            opencode: opencode::default_db_path(&env),
            copilot: set("COPILOT_HOME").or_else(|| home.as_ref().map(|h| h.join(".copilot"))),
            cline: set("CLINE_DATA_DIR").or_else(|| home.as_ref().map(|h| h.join(".cline/data"))),
            qwen: set("QWEN_RUNTIME_DIR")
                .or_else(|| set("QWEN_HOME"))
                .or_else(|| home.as_ref().map(|h| h.join(".qwen"))),
        }
    }

    /// The locations of this process's environment (the agent inherits it).
    pub fn from_process() -> Locations {
        Locations::from_env(|name| std::env::var_os(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(*v))
        };
        let l = Locations::from_env(env(&[("HOME", "/h")]));
        assert_eq!(l.claude, Some(PathBuf::from("/h/.claude")));
        assert_eq!(l.codex, Some(PathBuf::from("/h/.codex")));
        assert_eq!(l.gemini, Some(PathBuf::from("/h/.gemini")));
        assert_eq!(l.opencode, Some(PathBuf::from("/h/.local/share/opencode/opencode.db")));
        assert_eq!(l.copilot, Some(PathBuf::from("/h/.copilot")));
        assert_eq!(l.cline, Some(PathBuf::from("/h/.cline/data")));
        assert_eq!(l.qwen, Some(PathBuf::from("/h/.qwen")));
        let l = Locations::from_env(env(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
            ("XDG_DATA_HOME", "/d"),
        ]));
        assert_eq!(l.claude, Some(PathBuf::from("/c")));
        assert_eq!(l.codex, Some(PathBuf::from("/x")));
        assert_eq!(l.gemini, Some(PathBuf::from("/g/.gemini")));
        assert_eq!(l.opencode, Some(PathBuf::from("/d/opencode/opencode.db")));
    }
}
