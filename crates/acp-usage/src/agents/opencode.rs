//! opencode (`opencode acp`, npm `opencode-ai`), and what its forks share with it.
//!
//! opencode 1.18 reports one `usage_update` per turn whose `used` leaves the last call's output
//! out, whose `size` is copied from models.dev (1,000,000 for claude-sonnet-4-5, which the API
//! runs at 200,000) and whose `cost` is the sum over the session's stored main-agent messages
//! (subagents and title calls left out); its per-turn `usage` is the last model call's, not the
//! turn's sum. Its SQLite store (`$OPENCODE_DB`, else `<data>/opencode/opencode.db`) records
//! every call, subagent sessions included, but not the title call. The tap is pointed through
//! the base-URL variables its providers read and, for every provider whose `baseURL` one of its
//! configs sets (its files or the variable), `OPENCODE_CONFIG_CONTENT` (see [`config`]).
//!
//! A fork (kilo) keeps the same schema and ACP behaviour in its own place: the readings here
//! are `pub(super)` for it.

use acp_usage_core::TokenRecord;
use acp_usage_core::account::{Account, TurnReport};
use serde_json::Value;
use std::ffi::OsString;
use std::path::PathBuf;

use super::acp::{AcpUsage, AgentUpdate, split_bracket};
use super::{Agent, Launch, Package};
use crate::sources::tap::point::{ANTHROPIC_V1, Env, OPENAI, Pointing};
use crate::sources::transcripts::{Format, Store};

pub(super) mod config;

pub struct Opencode;

/// opencode's SQLite store.
pub static FORMAT: Format = Format {
    name: "opencode",
    location: |env| db_path(env, "OPENCODE_DB", "opencode", "opencode.db"),
    store: Store::OpencodeDb,
    marks_turn_end: true,
};

impl Agent for Opencode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn about(&self) -> &'static str {
        "opencode acp"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "OpenCode"; the command is `opencode acp`.
        word.contains("opencode")
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        // `providerID/modelID[/variant]`. opencode's own window for it is a models.dev copy, so
        // none is given here: the catalog's entry decides.
        (Some(model_id(split_bracket(value).0).to_string()), None)
    }

    fn unrecorded_side_calls(&self, _: Option<&str>) -> &'static [&'static str] {
        &["session title"]
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        usage_update(account, update);
    }

    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        prompt_result(account, result);
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        // Read only when the config names no base URL for the provider.
        p.var(&ANTHROPIC_V1, env);
        p.var(&OPENAI, env);
        point_config(p, env, &config::OPENCODE);
    }

    fn session_headers(&self) -> &'static [&'static str] {
        &["x-session-affinity", "x-session-id"]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "OpenCode",
            program: "opencode",
            args: &["acp"],
            package: Package::Npm("opencode-ai"),
            registry_id: Some("opencode"),
        }]
    }
}

/// A database's location for an agent started with `env`: `$<var>`, else
/// `$XDG_DATA_HOME/<dir>/<file>`, else `$HOME/.local/share/<dir>/<file>`.
pub(super) fn db_path(
    env: &dyn Fn(&str) -> Option<OsString>,
    var: &str,
    dir: &str,
    file: &str,
) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(db) = set(var) {
        return Some(db);
    }
    let data = set("XDG_DATA_HOME").or_else(|| set("HOME").map(|h| h.join(".local/share")))?;
    Some(data.join(dir).join(file))
}

/// `size` is models.dev's figure, not a window opencode enforces (it sends no 1M beta header):
/// left to the catalog. `used` is the last call's prompt without its output; inside a turn the
/// prompt result follows at once with that call's counts, which give the exact figure, so only
/// a stray update outside a turn is read (and marked inexact). `cost` covers the session's
/// stored main-agent messages (a reloaded session included), priced by opencode's table.
pub(super) fn usage_update(account: &mut Account, update: &AgentUpdate) {
    if let Some(used) = update.used.filter(|_| !account.in_turn()) {
        account.agent_used(used, false);
    }
    if let Some(amount) = update.usd() {
        account.agent_cost(amount);
    }
}

/// Points the providers whose base URL the agent's configs set (see [`config`]), for a project
/// in acp-usage's own directory (the agent's, which an editor starts in the project).
pub(super) fn point_config(p: &mut Pointing, env: &Env, layout: &'static config::Layout) {
    let cwd = std::env::current_dir().unwrap_or_default();
    config::point(p, env, layout, &cwd, &|path| path.exists());
}

/// opencode's model option value `providerID/modelID[/variant]` as a model id: what follows the
/// provider, less a trailing effort variant. Model ids may hold slashes themselves
/// (`openrouter/anthropic/claude-sonnet-4.5`), so only a known variant name is cut.
pub(super) fn model_id(value: &str) -> &str {
    const VARIANTS: &[&str] =
        &["none", "minimal", "low", "medium", "high", "xhigh", "max", "default", "thinking"];
    let id = value.split_once('/').map_or(value, |(_, rest)| rest);
    match id.rsplit_once('/') {
        Some((model, variant)) if VARIANTS.contains(&variant) => model,
        _ => id,
    }
}

/// opencode's per-turn `usage` is its last assistant message, i.e. the turn's last model call
/// (Anthropic-style: input without the cache, output without reasoning). That call tells the
/// exact `used`; it is the turn's usage only when the turn made one call, which the visible
/// content tells (a tool call means another model call followed).
pub(super) fn prompt_result(account: &mut Account, result: &Value) {
    let Some(u) = AcpUsage::of_result(result) else { return };
    let (Some(input), Some(output)) = (u.input_tokens, u.output_tokens) else { return };
    let thought = u.thought_tokens.unwrap_or(0);
    let read = u.cached_read_tokens.unwrap_or(0);
    let write = u.cached_write_tokens.unwrap_or(0);
    let mut rec = TokenRecord::from_anthropic(input, read, write, 0, output + thought);
    rec.thought = thought;
    if rec.total() == 0 {
        // A cancelled turn or a local command: no model call finished.
        return;
    }
    if estimated_calls(account) == Some(1) {
        account.agent_used(rec.context_after(), true);
        account.agent_turn(rec, TurnReport::Complete, Some(1));
    }
    // Several calls: the last one alone is not the turn; the turn stays estimated until the
    // transcript (opencode's database) gives every call.
}

/// How many model calls the turn in progress made, by the shape of its visible content.
fn estimated_calls(account: &Account) -> Option<u64> {
    // The account keeps that shape to itself; ending a copy of the turn with nothing but the
    // visible content reports it.
    let mut probe = account.clone();
    let catalog = acp_usage_core::Catalog::new();
    let cx = acp_usage_core::account::Context {
        catalog: &catalog,
        default_window: 1,
        window_percent: 100,
        remembered_size: None,
    };
    probe.end_turn(&cx).and_then(|turn| turn.calls)
}
