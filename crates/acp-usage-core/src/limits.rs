//! Subscription limits: the usage windows providers state (Claude's 5-hour and 7-day limits,
//! Codex's primary and secondary windows, Gemini's per-model quota), read from where each
//! source states them, and the board that keeps the latest of each window and says when one
//! crossed a line.
//!
//! Every reader takes what its source gives (response headers as name/value pairs, an event's
//! or a response body's JSON bytes) and hands back [`Limit`]s with `used_percent` on one scale,
//! 0-100, whatever the provider's own (Anthropic's headers give a fraction, Codex a percent,
//! Gemini the remaining fraction). The formats are in `research/limits.md` and were checked
//! against the agents' shipped code (Claude Code 2.1.318, codex 0.166.0, Gemini CLI 0.61.0).

use serde::Deserialize;
use serde_json::Value;

pub mod board;
pub mod credits;
pub mod forecast;
pub mod meter;

pub use board::{LimitBoard, Told, Tracked, WindowKey};

/// Where an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitSource {
    /// The provider's response, read by the tap (headers, stream events, quota answers).
    Tap,
    /// What the agent forwarded over ACP.
    Agent,
    /// The agent's transcript (Codex's rollout).
    Transcript,
}

impl LimitSource {
    /// Its name on the wire and in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitSource::Tap => "tap",
            LimitSource::Agent => "agent",
            LimitSource::Transcript => "transcript",
        }
    }

    /// The source of that name.
    pub fn parse(name: &str) -> Option<LimitSource> {
        match name {
            "tap" => Some(LimitSource::Tap),
            "agent" => Some(LimitSource::Agent),
            "transcript" => Some(LimitSource::Transcript),
            _ => None,
        }
    }
}

/// One observation of one usage window, as the provider stated it.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// `anthropic`, `openai` or `google`.
    pub provider: String,
    /// The provider's own name for the window: Anthropic's claim (`five_hour`, `seven_day`,
    /// `seven_day_overage_included`, `overage`), Codex's `primary`/`secondary`, Gemini's model.
    pub window: String,
    /// Codex's limit family (`codex` unless the server names another), when there is one.
    pub limit_id: Option<String>,
    /// How long the window is, when known (what tells a 5-hour window from a weekly one).
    pub window_minutes: Option<u64>,
    /// How full it is, 0-100 (can pass 100).
    pub used_percent: f64,
    /// When it resets, Unix seconds.
    pub resets_at: Option<i64>,
    /// The provider's word for it, when it gives one (`allowed`, `allowed_warning`, `rejected`).
    pub status: Option<String>,
    pub source: LimitSource,
    /// When it was observed, Unix milliseconds.
    pub observed_ms: i64,
    /// Whose window it is: the provider's account or organisation id (`org:…`, `acct:…`), or a
    /// keyed fingerprint of the credential (`key:…`); `None` when the source does not say.
    pub account: Option<String>,
    /// When it runs out at this pace (Unix seconds), if before it resets: set by the board
    /// ([`forecast`]), never by a source.
    pub runs_out_at: Option<i64>,
}

impl Limit {
    /// What identifies the window: account, provider, limit family, window name.
    pub fn key(&self) -> WindowKey {
        (
            self.account.clone().unwrap_or_default(),
            self.provider.clone(),
            self.limit_id.clone().unwrap_or_default(),
            self.window.clone(),
        )
    }

    /// Whether `other` states the same figures (another source of the same response, a
    /// repeat): nothing the editor shows would change.
    pub fn same_figures(&self, other: &Limit) -> bool {
        self.used_percent == other.used_percent
            && self.resets_at == other.resets_at
            && self.status == other.status
            && self.window_minutes == other.window_minutes
    }

    /// Whose window it is, shortly: `key 3f9a1c`, `acct 8e12ab`, `org 1b2c3d` (`None`: not
    /// known).
    pub fn account_label(&self) -> Option<String> {
        self.account.as_deref().map(account_label)
    }

    /// A short label for a status line: `5h 73%`, `7d 12%`, `primary 40%`.
    pub fn short(&self) -> String {
        let name = match self.window_minutes {
            Some(300) => "5h".to_owned(),
            Some(10080) => "7d".to_owned(),
            Some(m) if m % 1440 == 0 => format!("{}d", m / 1440),
            Some(m) if m % 60 == 0 => format!("{}h", m / 60),
            Some(m) => format!("{m}m"),
            None => self.window.clone(),
        };
        format!("{name} {:.0}%", self.used_percent)
    }
}

/// An account as people are shown it: its kind and the first six letters or digits of its id
/// (`key 3f9a1c`), never more of it.
pub fn account_label(account: &str) -> String {
    let (kind, id) = account.split_once(':').unwrap_or(("account", account));
    let id: String = id.chars().filter(char::is_ascii_alphanumeric).take(6).collect();
    format!("{kind} {id}")
}

/// Anthropic's unified windows: the claim, the header infix, and the window's length.
const ANTHROPIC_WINDOWS: [(&str, &str, Option<u64>); 4] = [
    ("five_hour", "5h", Some(300)),
    ("seven_day", "7d", Some(10080)),
    ("seven_day_overage_included", "7d_oi", Some(10080)),
    ("overage", "overage", None),
];

/// What a source states of one of Anthropic's unified windows: the tap's headers and
/// claude-agent-acp's `_meta` name the same windows in the same units.
struct AnthropicWindow<'a> {
    claim: &'a str,
    /// How full, as a fraction.
    fraction: f64,
    /// Unix seconds.
    resets_at: Option<f64>,
    status: Option<String>,
}

impl AnthropicWindow<'_> {
    /// The window as a [`Limit`], read from `source` at `observed_ms`.
    fn limit(self, source: LimitSource, observed_ms: i64) -> Limit {
        let claim = self.claim;
        Limit {
            provider: "anthropic".into(),
            window: claim.into(),
            limit_id: None,
            window_minutes: ANTHROPIC_WINDOWS
                .iter()
                .find(|(c, _, _)| *c == claim)
                .and_then(|w| w.2),
            used_percent: self.fraction * 100.0,
            resets_at: self.resets_at.map(|s| s.round() as i64),
            status: self.status,
            source,
            observed_ms,
            account: None,
            runs_out_at: None,
        }
    }
}

/// The windows a response's headers state: Anthropic's `anthropic-ratelimit-unified-*` and
/// Codex's `x-<limit>-primary-*`/`-secondary-*`. Names are matched without regard to case.
pub fn from_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    observed_ms: i64,
) -> Vec<Limit> {
    // Names come lowercase from HTTP/2 and from hyper: copied only when they are not.
    let headers: Vec<(std::borrow::Cow<'a, str>, &str)> = headers
        .into_iter()
        .map(|(k, v)| {
            let k = if k.bytes().any(|b| b.is_ascii_uppercase()) {
                std::borrow::Cow::Owned(k.to_ascii_lowercase())
            } else {
                std::borrow::Cow::Borrowed(k)
            };
            (k, v.trim())
        })
        .collect();
    let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let mut out = Vec::new();

    // Anthropic: utilization is a fraction, resets are Unix seconds.
    for (claim, infix, _) in ANTHROPIC_WINDOWS {
        let prefix = format!("anthropic-ratelimit-unified-{infix}");
        let Some(fraction) = get(&format!("{prefix}-utilization")).and_then(number) else {
            continue;
        };
        let status = get(&format!("{prefix}-status"))
            .or_else(|| get("anthropic-ratelimit-unified-status"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let reset = get(&format!("{prefix}-reset")).and_then(number);
        let window = AnthropicWindow { claim, fraction, resets_at: reset, status };
        out.push(window.limit(LimitSource::Tap, observed_ms));
    }

    // Codex: every family `x-<id>-primary-used-percent` names; used is a percent, the reset
    // Unix seconds, the window minutes.
    let families: Vec<&str> = headers
        .iter()
        .filter_map(|(k, _)| k.strip_suffix("-primary-used-percent")?.strip_prefix("x-"))
        .collect();
    for family in families {
        let limit_id = family.replace('-', "_");
        for window in ["primary", "secondary"] {
            let h = |suffix: &str| get(&format!("x-{family}-{window}-{suffix}"));
            let used = h("used-percent").and_then(number);
            let minutes = h("window-minutes").and_then(number).map(|m| m as u64);
            let reset = h("reset-at").and_then(number).map(|s| s as i64);
            // Codex reports a window only when something of it is stated.
            if used.unwrap_or(0.0) == 0.0 && minutes.unwrap_or(0) == 0 && reset.is_none() {
                continue;
            }
            out.push(Limit {
                provider: "openai".into(),
                window: window.into(),
                limit_id: Some(limit_id.clone()),
                window_minutes: minutes.filter(|m| *m > 0),
                used_percent: used.unwrap_or(0.0),
                resets_at: reset,
                status: None,
                source: LimitSource::Tap,
                observed_ms,
                account: None,
                runs_out_at: None,
            });
        }
    }
    // Codex's refusal (a 429 `usage_limit_reached`) names the kind of limit reached, not the
    // window: the window used up (or, when none states 100%, the fullest) of the active family
    // is `rejected`, as Anthropic states it for its own.
    if get("x-codex-rate-limit-reached-type").is_some_and(|t| !t.is_empty()) {
        let active = get("x-codex-active-limit").map(|a| a.replace('-', "_"));
        let family = |l: &Limit| active.is_none() || l.limit_id == active;
        let used_up = |l: &Limit| l.provider == "openai" && family(l) && l.used_percent >= 100.0;
        if out.iter().any(used_up) {
            out.iter_mut().filter(|l| used_up(l)).for_each(|l| l.status = Some("rejected".into()));
        } else if let Some(fullest) = out
            .iter_mut()
            .filter(|l| l.provider == "openai" && family(l))
            .max_by(|a, b| a.used_percent.total_cmp(&b.used_percent))
        {
            fullest.status = Some("rejected".into());
        }
    }
    out
}

/// The rate-limit and credit headers among `headers` whose value is not a number where one is
/// stated (garbage a source sent, which the readers leave out): their names, for a debug line.
pub fn unreadable_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<&'a str> {
    const NUMBERS: [&str; 7] = [
        "-utilization",
        "-reset",
        "-used-percent",
        "-window-minutes",
        "-reset-at",
        "-credits-balance",
        "-surpassed-threshold",
    ];
    headers
        .into_iter()
        .filter(|(k, v)| {
            let k = k.to_ascii_lowercase();
            let ours = k.starts_with("anthropic-ratelimit-unified-") || k.starts_with("x-");
            ours && NUMBERS.iter().any(|s| k.ends_with(s)) && number(v).is_none()
        })
        .map(|(k, _)| k)
        .collect()
}

fn number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A Codex window in its event (`reset_at`) or rollout (`resets_at`) shape.
#[derive(Debug, Deserialize)]
struct CodexWindow {
    used_percent: Option<f64>,
    window_minutes: Option<u64>,
    #[serde(alias = "resets_at")]
    reset_at: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct CodexWindows {
    primary: Option<CodexWindow>,
    secondary: Option<CodexWindow>,
    limit_id: Option<String>,
    limit_name: Option<String>,
}

fn codex_windows(
    w: CodexWindows,
    limit_id: Option<String>,
    source: LimitSource,
    observed_ms: i64,
) -> Vec<Limit> {
    let id = limit_id.or(w.limit_id).or(w.limit_name).unwrap_or_else(|| "codex".into());
    [("primary", w.primary), ("secondary", w.secondary)]
        .into_iter()
        .filter_map(|(name, window)| {
            let window = window?;
            Some(Limit {
                provider: "openai".into(),
                window: name.into(),
                limit_id: Some(id.clone()),
                window_minutes: window.window_minutes.filter(|m| *m > 0),
                used_percent: window.used_percent?,
                resets_at: window.reset_at,
                status: None,
                source,
                observed_ms,
                account: None,
                runs_out_at: None,
            })
        })
        .collect()
}

/// The windows of Codex's `codex.rate_limits` stream event (an SSE `data:` payload or a
/// WebSocket text message): `{"type":"codex.rate_limits","rate_limits":{"primary":{...}}}`.
pub fn from_codex_event(json: &[u8], observed_ms: i64) -> Vec<Limit> {
    match serde_json::from_slice::<Value>(json) {
        Ok(v) => from_codex_event_value(&v, observed_ms),
        Err(_) => Vec::new(),
    }
}

/// [`from_codex_event`] on the event already parsed (the usage reader has it).
pub fn from_codex_event_value(event: &Value, observed_ms: i64) -> Vec<Limit> {
    if event["type"].as_str() != Some("codex.rate_limits") {
        return Vec::new();
    }
    let Ok(windows) = CodexWindows::deserialize(&event["rate_limits"]) else { return Vec::new() };
    let named = |key: &str| event[key].as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let limit_id = named("metered_limit_name").or_else(|| named("limit_name"));
    codex_windows(windows, limit_id, LimitSource::Tap, observed_ms)
}

/// The windows of a Codex rollout's `token_count` event (`payload.rate_limits`, with
/// `resets_at`); the Codex transcript parser hands it the `rate_limits` object.
pub(crate) fn from_codex_rollout(rate_limits: &Value, observed_ms: i64) -> Vec<Limit> {
    match CodexWindows::deserialize(rate_limits) {
        Ok(w) => codex_windows(w, None, LimitSource::Transcript, observed_ms),
        Err(_) => Vec::new(),
    }
}

/// The buckets of a Gemini Code Assist `retrieveUserQuota` answer: one window per model (and
/// token type), `remainingFraction` turned into how much is used.
pub fn from_code_assist_quota(json: &[u8], observed_ms: i64) -> Vec<Limit> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Bucket {
        model_id: Option<String>,
        token_type: Option<String>,
        remaining_fraction: Option<f64>,
        reset_time: Option<String>,
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        buckets: Vec<Bucket>,
    }
    let Ok(answer) = serde_json::from_slice::<Answer>(json) else { return Vec::new() };
    answer
        .buckets
        .into_iter()
        .filter_map(|b| {
            let remaining = b.remaining_fraction?;
            let model = b.model_id?;
            let window = match b.token_type {
                Some(t) if !t.is_empty() => format!("{model}:{}", t.to_ascii_lowercase()),
                _ => model,
            };
            Some(Limit {
                provider: "google".into(),
                window,
                limit_id: None,
                window_minutes: None,
                used_percent: ((1.0 - remaining) * 100.0).max(0.0),
                resets_at: b.reset_time.as_deref().and_then(parse_rfc3339),
                status: None,
                source: LimitSource::Tap,
                observed_ms,
                account: None,
                runs_out_at: None,
            })
        })
        .collect()
}

/// The windows in claude-agent-acp's `_meta["_claude/rateLimit"]` (Claude Code's
/// `rate_limit_info`): the per-window fractions are in `unifiedWindows`; the top-level
/// `utilization` is there only when Claude Code derived a warning, for `rateLimitType`.
pub fn from_claude_rate_limit(json: &[u8], observed_ms: i64) -> Vec<Limit> {
    let Ok(info) = serde_json::from_slice::<Value>(json) else { return Vec::new() };
    let mut out = Vec::new();
    let windows = info.get("unifiedWindows").and_then(Value::as_object);
    let status = |v: &Value| v.get("status").and_then(Value::as_str).map(str::to_owned);
    let resets = |v: &Value| v.get("resetsAt").and_then(Value::as_f64);
    for (claim, _, _) in ANTHROPIC_WINDOWS {
        let Some(w) = windows.and_then(|w| w.get(claim)) else { continue };
        let Some(fraction) = w.get("utilization").and_then(Value::as_f64) else { continue };
        let window = AnthropicWindow { claim, fraction, resets_at: resets(w), status: status(w) };
        out.push(window.limit(LimitSource::Agent, observed_ms));
    }
    if out.is_empty()
        && let (Some(claim), Some(fraction)) = (
            info.get("rateLimitType").and_then(Value::as_str),
            info.get("utilization").and_then(Value::as_f64),
        )
    {
        let (reset, status) = (resets(&info), status(&info));
        let window = AnthropicWindow { claim, fraction, resets_at: reset, status };
        out.push(window.limit(LimitSource::Agent, observed_ms));
    }
    out
}

/// `2026-11-26T14:00:00Z` (or with an offset, or fractions): Unix seconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    crate::time::parse_timestamp(text.trim()).map(|ms| ms.div_euclid(1000))
}

/// A line a window crossed.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitCrossing {
    /// The window, as last observed.
    pub limit: Limit,
    /// The line crossed, a fraction (1.0: the limit itself).
    pub fraction: f64,
}

/// The fullest of `limits` (the window that stops the user first), ties to the shorter window.
pub fn fullest<'a>(limits: impl IntoIterator<Item = &'a Limit>) -> Option<&'a Limit> {
    limits.into_iter().max_by(|a, b| {
        a.used_percent.total_cmp(&b.used_percent).then_with(|| {
            b.window_minutes.unwrap_or(u64::MAX).cmp(&a.window_minutes.unwrap_or(u64::MAX))
        })
    })
}

#[cfg(test)]
mod tests;
