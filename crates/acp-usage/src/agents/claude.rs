//! Claude Code through claude-agent-acp (npm `@agentclientprotocol/claude-agent-acp`).
//!
//! It reports per-turn `usage` with Anthropic semantics (input without cache), a cumulative
//! `cost` only on the update that follows the SDK's `result`, and a `size` that is a 200k/1M
//! guess until that same update; its prompt result's `_meta.quota.model_usage` is Claude Code's
//! per-model increment of the turn, title and suggestion calls included. Its JSONL transcripts
//! (`<config>/projects/<escaped cwd>/<id>.jsonl`, subagents in `<id>/subagents/`) record every
//! main and subagent call. The tap is pointed through `ANTHROPIC_BASE_URL`, unless a Claude
//! Code settings file sets it (those win over the environment).

use std::io::{BufRead as _, Read as _};
use std::path::{Path, PathBuf};

use acp_usage_core::TokenRecord;
use acp_usage_core::account::Account;
use acp_usage_core::estimate::Family;
use acp_usage_core::transcript::claude::ClaudeParser;
use serde_json::Value;

use super::acp::{self, AgentUpdate, split_bracket};
use super::{Agent, Launch, Package, Plan, Untapped};
use crate::sources::tap::point::{ANTHROPIC, Env, Pointing};
use crate::sources::transcripts::locate::{Found, dirs, files, jsonl_files};
use crate::sources::transcripts::{Facts, Files, Format, Store, string_at, var_or_home};

/// Claude Code's plain aliases run at 200k; `[1m]` selects the 1M window.
const CLAUDE_WINDOW: u64 = 200_000;
const ONE_MILLION: u64 = 1_000_000;

pub struct Claude;

/// Claude Code's transcripts.
pub static FORMAT: Format = Format {
    name: "claude",
    location: |env| var_or_home(env, "CLAUDE_CONFIG_DIR", ".claude"),
    store: Store::Files(Files {
        parser: || Box::new(ClaudeParser::default()),
        parser_per_file: false,
        whole_document: false,
        find: |_, dir, session| find(dir, session),
        all: |_, dir| all(dir),
        facts: line_facts,
        side_facts: Files::no_side_facts,
        restarted: Some(claude_restart),
        may_hold_call: Some(may_hold_call),
    }),
    marks_turn_end: true,
};

impl Agent for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn plan(&self) -> Option<Plan> {
        Some(Plan { provider: "anthropic", word: "Claude", own_family: None })
    }

    /// Its variables (an API key, a bearer token, a long-lived OAuth token), else its login:
    /// the organisation it signed in to (`oauthAccount.organizationUuid` in `~/.claude.json`,
    /// or `$CLAUDE_CONFIG_DIR/.claude.json`), which its responses name and which outlives the
    /// OAuth token, else that token (`.credentials.json`, `claudeAiOauth`).
    fn credentials(&self, env: &Env) -> Vec<crate::accounts::Credential> {
        use crate::accounts::Credential;
        let vars = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"];
        let set = crate::accounts::secrets_in(env.var, &vars);
        if !set.is_empty() {
            return set;
        }
        let json = |path: &Path| {
            (env.read_file)(path).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        };
        let config = match (env.var)("CLAUDE_CONFIG_DIR") {
            Some(dir) => Some(Path::new(&dir).join(".claude.json")),
            None => (env.var)("HOME").map(|h| Path::new(&h).join(".claude.json")),
        };
        let org = config.as_deref().and_then(json).and_then(|v| {
            let org = v.pointer("/oauthAccount/organizationUuid")?.as_str()?.trim().to_owned();
            (!org.is_empty()).then(|| format!("org:{org}"))
        });
        if let Some(org) = org {
            return vec![Credential::Account(org)];
        }
        let dir = (env.var)("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| (env.var)("HOME").map(|h| Path::new(&h).join(".claude")));
        let file = dir.and_then(|d| (env.read_file)(&d.join(".credentials.json")));
        let token = file
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.pointer("/claudeAiOauth/accessToken")?.as_str().map(str::to_owned));
        token.map(Credential::Secret).into_iter().collect()
    }

    fn about(&self) -> &'static str {
        "claude-agent-acp (Claude Code)"
    }

    fn recognises(&self, word: &str) -> bool {
        word.contains("claude")
    }

    fn default_family(&self) -> Family {
        Family::Anthropic
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        let (base, bracket) = split_bracket(value);
        // Plain aliases name a family whose concrete version the agent picks; the catalog id
        // only guides estimation until a call shows the real model.
        let id = match base {
            "default" => None,
            "opus" => Some("claude-opus-4-8".to_string()),
            "sonnet" => Some("claude-sonnet-4-6".to_string()),
            "haiku" => Some("claude-haiku-4-5".to_string()),
            other => Some(other.to_string()),
        };
        let window = claude_window(id.as_deref(), is_one_m(bracket));
        (id, window)
    }

    /// The option list can name the concrete model behind an alias: claude-agent-acp lists
    /// `default` with the description "Opus" beside the option `opus` named "Opus 5.5".
    fn resolve_option(&self, value: &str, option: &Value) -> (Option<String>, Option<u64>) {
        if let Some((id, one_m)) = claude_concrete(value, option) {
            let window = claude_window(Some(&id), one_m || is_one_m(split_bracket(value).1));
            return (Some(id), window);
        }
        self.resolve_model(value)
    }

    fn side_call_markers(&self) -> &'static [&'static str] {
        // Claude Code's prompt suggestion after a turn.
        &["Reply with ONLY the suggestion"]
    }

    fn on_usage_update(&self, account: &mut Account, update: &AgentUpdate) {
        // Only the update after the SDK's `result` carries cost, and only its size is the
        // window Claude Code enforces (`modelUsage.contextWindow`); the streamed ones report a
        // window it seeded from a cache, `getContextUsage` or the model name: a report, which
        // beats acp-usage's guesses but not the catalog entry of the concrete model the update
        // names.
        if let Some(used) = update.used {
            account.agent_used(used, true);
        }
        if let Some(model) = update.meta.as_ref().and_then(|m| m.claude_model.as_deref()) {
            account.model_seen(split_bracket(model).0);
        }
        match (update.usd(), update.size) {
            (Some(amount), size) => {
                account.agent_cost(amount);
                if let Some(size) = size {
                    account.agent_window(size);
                }
            }
            (None, Some(size)) => account.reported_window(size),
            (None, None) => {}
        }
    }

    fn on_prompt_result(&self, account: &mut Account, result: &Value) {
        if let Some(rows) = result.pointer("/_meta/quota/model_usage").and_then(Value::as_array) {
            // Claude Code's `modelUsage` increment of the turn, by model: every call of the
            // turn, its title and suggestion calls included, which its transcript leaves out.
            account.agent_turn_models(rows.iter().filter_map(claude_model_row).collect());
        }
        // Its per-turn usage is the main loop's sum.
        if !acp::prompt_usage(account, result) {
            acp::quota(account, result);
        }
    }

    fn restarts_transcript(&self, first_word: &str) -> bool {
        first_word == "/clear"
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        p.var(&ANTHROPIC, env);
        // Claude Code applies `env` from its settings after the process environment.
        if let Some(file) = settings_base_url(env) {
            p.warnings.push(format!(
                "{file} sets ANTHROPIC_BASE_URL, which Claude Code prefers to the tap's: its calls will not be tapped"
            ));
        }
    }

    fn untapped(&self, env: &Env) -> Vec<Untapped> {
        // Claude Code on Bedrock or Vertex AI builds those clouds' URLs itself (a Bedrock
        // request is signed for its host) and reads no ANTHROPIC_BASE_URL; its transcripts and
        // per-turn `modelUsage` still count every call.
        let truthy = |name: &str| {
            env.set(name).is_some_and(|v| {
                matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
            })
        };
        [("CLAUDE_CODE_USE_BEDROCK", "Bedrock"), ("CLAUDE_CODE_USE_VERTEX", "Vertex AI")]
            .into_iter()
            .filter(|(var, _)| truthy(var))
            .map(|(var, cloud)| Untapped {
                why: format!("{var} is set: Claude Code calls {cloud}, whose URL it builds itself"),
                recorded: true,
            })
            .collect()
    }

    fn session_headers(&self) -> &'static [&'static str] {
        &["x-claude-code-session-id"]
    }

    fn transcripts(&self) -> Option<&'static Format> {
        Some(&FORMAT)
    }

    fn launches(&self) -> &'static [Launch] {
        &[
            Launch {
                title: "Claude Agent",
                program: "claude-agent-acp",
                args: &[],
                package: Package::Npm("@agentclientprotocol/claude-agent-acp"),
                registry_id: Some("claude-acp"),
            },
            // The adapter's name before it moved to the ACP organisation.
            Launch {
                title: "Claude Code",
                program: "claude-code-acp",
                args: &[],
                package: Package::Npm("@zed-industries/claude-code-acp"),
                registry_id: None,
            },
        ]
    }
}

/// The Claude Code settings file (user or project) whose `env` sets `ANTHROPIC_BASE_URL`.
fn settings_base_url(env: &Env) -> Option<String> {
    let dir = (env.var)("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| (env.var)("HOME").map(|h| Path::new(&h).join(".claude")))?;
    let cwd = std::env::current_dir().ok();
    let candidates = [
        Some(dir.join("settings.json")),
        cwd.as_ref().map(|c| c.join(".claude").join("settings.json")),
        cwd.as_ref().map(|c| c.join(".claude").join("settings.local.json")),
    ];
    candidates.into_iter().flatten().find_map(|path| {
        let settings = super::settings_json(&(env.read_file)(&path)?)?;
        settings.pointer("/env/ANTHROPIC_BASE_URL")?.as_str()?;
        Some(path.display().to_string())
    })
}

/// Whether a Claude Code line may hold a call: only an assistant line with a `usage` does, and
/// a call never depends on the lines around it. A user line's tool output (most of a
/// transcript's bytes) is then never parsed by `import`. A line that does not even look like
/// one JSON object is parsed all the same, so that a file in a format this build does not
/// know, or a line torn by a crash, is still reported.
fn may_hold_call(line: &[u8]) -> bool {
    static USAGE: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let object = line.first() == Some(&b'{') && line.trim_ascii_end().last() == Some(&b'}');
    !object || USAGE.get_or_init(|| memchr::memmem::Finder::new(b"\"usage\"")).find(line).is_some()
}

/// What a line says of its session: the working directory, and a title (one the user gave
/// beats one Claude Code generated, which beats an older version's summary).
/// How far into a line a title record's `type` is looked for.
const TITLE_HEAD: usize = 256;

fn line_facts(facts: &mut Facts, line: &[u8]) {
    use memchr::memmem::Finder;
    // Built once: `import` looks at every line of every session.
    static FIND: std::sync::LazyLock<[Finder<'static>; 4]> = std::sync::LazyLock::new(|| {
        [
            Finder::new(b"\"cwd\":"),
            Finder::new(b"\"custom-title\""),
            Finder::new(b"\"ai-title\""),
            Finder::new(b"\"type\":\"summary\""),
        ]
    });
    // A title record is a short line whose `type` comes first; looking only at a line's head
    // keeps a long tool output from being scanned three more times for nothing.
    let head = &line[..line.len().min(TITLE_HEAD)];
    let has = |i: usize| FIND[i].find(if i == 0 { line } else { head }).is_some();
    if facts.cwd.is_none() && has(0) {
        facts.cwd = string_at(line, &["cwd"]);
    }
    if has(1) {
        facts.set_title(3, string_at(line, &["customTitle"]));
    } else if has(2) {
        facts.set_title(2, string_at(line, &["aiTitle"]));
    } else if has(3) {
        facts.set_title(1, string_at(line, &["summary"]));
    }
}

/// The window Claude Code runs a model at: 1,000,000 with `[1m]`; without it 200,000 for the 4.x
/// and older models (their 1M context is a beta it asks for only with `[1m]`), and from
/// generation 5 on the catalog's (claude-agent-acp 0.101 reports 1,000,000 for plain `opus`,
/// Opus 5.5). Unknown (`None`) for an alias whose model is not known yet.
fn claude_window(id: Option<&str>, one_m: bool) -> Option<u64> {
    if one_m {
        return Some(ONE_MILLION);
    }
    let generation = id?.split(['-', '.']).find_map(|part| part.parse::<u32>().ok()).unwrap_or(0);
    (generation < 5).then_some(CLAUDE_WINDOW)
}

/// Whether a `[...]` suffix selects the 1M-context window.
fn is_one_m(bracket: Option<&str>) -> bool {
    bracket.is_some_and(|b| b.eq_ignore_ascii_case("1m"))
}

/// The concrete Claude model behind a model option value, from the option list: the entry's
/// name ("Opus 5.5" is `claude-opus-5-5`), or for `default` the entry its description names
/// ("Opus", or a resolved id such as `claude-opus-5-5[1m]`). Also whether the name says 1M.
fn claude_concrete(value: &str, option: &Value) -> Option<(String, bool)> {
    let mut entries = Vec::new();
    for entry in option.get("options").and_then(Value::as_array)? {
        // Options may come in groups: `{group, name, options: [...]}`.
        match entry.get("options").and_then(Value::as_array) {
            Some(inner) => entries.extend(inner),
            None => entries.push(entry),
        }
    }
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let entry = entries.iter().find(|e| field(e, "value") == value)?;
    let (base, _) = split_bracket(value);
    if base.starts_with("claude-") {
        return Some((base.to_string(), false));
    }
    let description = field(entry, "description");
    if base != "default" {
        return claude_from_display(&field(entry, "name"));
    }
    if description.starts_with("claude-") {
        let (id, bracket) = split_bracket(&description);
        return Some((id.to_string(), is_one_m(bracket)));
    }
    let family = description.split_whitespace().next()?.to_ascii_lowercase();
    let sibling = entries.iter().find(|e| {
        let value = field(e, "value");
        value != "default"
            && (value.eq_ignore_ascii_case(&family)
                || field(e, "name").to_ascii_lowercase().starts_with(&family))
    })?;
    claude_from_display(&field(sibling, "name"))
}

/// "Opus 5.5" -> `claude-opus-5-5`; "Sonnet 4.6 (1M context)" -> `claude-sonnet-4-6`, 1M.
fn claude_from_display(name: &str) -> Option<(String, bool)> {
    let mut words = name.split_whitespace();
    let family = words.next()?.to_ascii_lowercase();
    let version = words.next()?;
    if !family.chars().all(|c| c.is_ascii_alphabetic())
        || !version.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    let one_m = name.to_ascii_lowercase().contains("1m");
    Some((format!("claude-{family}-{}", version.replace('.', "-")), one_m))
}

/// One row of claude-agent-acp's `_meta.quota.model_usage`: `{model, token_count: {inputTokens
/// (without the cache), cachedInputTokens (reads), cachedWriteTokens, outputTokens}}`.
fn claude_model_row(row: &Value) -> Option<TokenRecord> {
    let model = row.get("model").and_then(Value::as_str)?;
    let count = row.get("token_count")?;
    let n = |k: &str| count.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut rec = TokenRecord::from_anthropic(
        n("inputTokens"),
        n("cachedInputTokens"),
        n("cachedWriteTokens"),
        0,
        n("outputTokens"),
    );
    rec.model = Some(split_bracket(model).0.to_string());
    Some(rec)
}

fn find(config: &Path, session: &str) -> Found {
    let mut found = Found::default();
    let file = format!("{session}.jsonl");
    for project in dirs(&config.join("projects")) {
        let main = project.join(&file);
        if main.is_file() {
            found.main = Some(main);
            found.subagents = jsonl_files(&project.join(session).join("subagents"));
            break;
        }
    }
    found
}

/// Every `<config>/projects/<escaped cwd>/<id>.jsonl`, with its subagents.
fn all(config: &Path) -> Vec<(String, Found)> {
    let mut all = Vec::new();
    for project in dirs(&config.join("projects")) {
        for main in jsonl_files(&project) {
            let Some(id) = main.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            let subagents = jsonl_files(&project.join(&id).join("subagents"));
            all.push((id, Found { main: Some(main), subagents }));
        }
    }
    all
}

/// A transcript Claude Code started beside `main` for the same session after a `/clear`: a
/// `.jsonl` in the same project directory, changed since `since_ms`, not one of `known`, whose
/// first records are the `/clear` command.
pub fn claude_restart(main: &Path, known: &[&Path], since_ms: i64) -> Option<PathBuf> {
    let dir = main.parent()?;
    let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(since_ms.max(0) as u64)
        - std::time::Duration::from_secs(1);
    files(dir).into_iter().find(|path| {
        path.extension().is_some_and(|e| e == "jsonl")
            && path != main
            && !known.contains(&path.as_path())
            && std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t >= since)
            && starts_with_clear(path)
    })
}

/// Whether one of a Claude transcript's first records is the `/clear` command.
fn starts_with_clear(path: &Path) -> bool {
    const CLEAR: &[u8] = b"<command-name>/clear</command-name>";
    let Ok(file) = std::fs::File::open(path) else { return false };
    std::io::BufReader::new(file)
        .take(1 << 20)
        .split(b'\n')
        .take(8)
        .filter_map(Result::ok)
        .any(|line| line.windows(CLEAR.len()).any(|w| w == CLEAR))
}
