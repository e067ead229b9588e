//! Rendering what acp-usage sends: `usage_update` notifications, per-turn `usage`, and the
//! in-place rewrites of the agent's own figures.
//!
//! Only lines acp-usage owns or changes are serialised here; everything else is forwarded as it
//! came. Rewrites change only the members acp-usage owns and splice them into the line
//! ([`super::splice`]), so the agent's other fields and `_meta` keys keep their exact text.

use acp_usage_core::Source;
use acp_usage_core::account::{Snapshot, TurnUsage};
use acp_usage_core::limits::Limit;
use acp_usage_core::limits::meter::{CLAUDE_RATE_LIMIT_KEY, zed_meter};
use acp_usage_schema::{
    CostFigure, Figure, LimitWindow, META_KEY, META_VERSION, SourceName, TurnUsageMeta,
    UsageBreakdown, UsageUpdateMeta, UsedSplit,
};
use jsonrpsee_types::ErrorObject;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::envelope::Envelope;
use super::splice::{ObjectEdit, range_in, replace};

/// A JSON-RPC error response acp-usage writes itself.
#[derive(Serialize)]
struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    /// The request's id as it was on the wire.
    id: Option<&'a RawValue>,
    error: ErrorObject<'a>,
}

/// The error response (without its terminator) to the request whose id is `raw_id` on the
/// wire: jsonrpsee-types' error object, serialised with the id's text as it came.
pub fn error_response(raw_id: &str, error: ErrorObject<'_>) -> Vec<u8> {
    // The id was read from a valid line; one that were not JSON would answer `null`.
    let id = serde_json::from_str::<&RawValue>(raw_id).ok();
    serde_json::to_vec(&ErrorResponse { jsonrpc: "2.0", id, error })
        .expect("an error response serialises")
}

/// Why an update is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// After a `session/new` response.
    New,
    /// After a `session/load` response.
    Load,
    /// After a `session/resume` response.
    Resume,
    /// After a `session/fork` response.
    Fork,
    /// At the end of a prompt turn.
    Turn,
    /// After a model or context-size change.
    ModelChange,
    /// After the agent compacted the context.
    Compaction,
    /// A rewrite of the agent's own update.
    Agent,
    /// After calls counted between turns (a title or a prompt suggestion that ended after the
    /// turn's result, a memory extraction, cache warming).
    BetweenTurns,
    /// Before acp-usage's answer to its own `/usage` command, whose text shows these figures.
    Command,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::New => "session/new",
            Trigger::Load => "session/load",
            Trigger::Resume => "session/resume",
            Trigger::Fork => "session/fork",
            Trigger::Turn => "turn",
            Trigger::ModelChange => "model_change",
            Trigger::Compaction => "compaction",
            Trigger::Agent => "agent",
            Trigger::BetweenTurns => "between_turns",
            Trigger::Command => "command",
        }
    }
}

/// The wire name of a source.
pub fn source_name(source: Source) -> SourceName {
    match source {
        Source::Tap => SourceName::Tap,
        Source::Transcript => SourceName::Transcript,
        Source::Agent => SourceName::Agent,
        Source::Estimate => SourceName::Estimate,
        Source::Catalog => SourceName::Catalog,
        Source::Default => SourceName::Default,
    }
}

fn figure(source: Source) -> Figure {
    Figure { source: source_name(source), exact: source.is_exact() }
}

/// The `update` object of a `usage_update` for a snapshot (without the agent's extra fields).
/// Who the figures are about: the agent's profile, and the side calls it makes that no source
/// records.
#[derive(Debug, Clone)]
pub struct AgentLabel {
    /// The profile's name.
    pub profile: &'static str,
    /// Side calls the agent is known to make that acp-usage cannot see.
    pub unrecorded: &'static [&'static str],
    /// The subscription windows seen so far, the latest observation of each.
    pub limits: Vec<Limit>,
    /// The credits and plan the provider last stated, for the account in use.
    pub credits: Option<acp_usage_core::limits::credits::Credits>,
}

/// A Unix time in seconds as RFC 3339 UTC.
fn rfc3339(seconds: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// A window as `_meta.acpUsage.limits` carries it.
pub fn limit_window(l: &Limit) -> LimitWindow {
    LimitWindow {
        provider: l.provider.clone(),
        window: l.window.clone(),
        limit_id: l.limit_id.clone(),
        window_minutes: l.window_minutes,
        used_percent: (l.used_percent * 100.0).round() / 100.0,
        resets_at: l.resets_at.and_then(rfc3339),
        status: l.status.clone(),
        source: l.source.as_str().to_owned(),
        observed_at: rfc3339(l.observed_ms.div_euclid(1000)).unwrap_or_default(),
        runs_out_at: l.runs_out_at.and_then(rfc3339),
        account: l.account_label(),
    }
}

/// Credits as `_meta.acpUsage.credits` carries them.
fn credits_info(c: &acp_usage_core::limits::credits::Credits) -> acp_usage_schema::CreditsInfo {
    let account = c.account.as_deref().map(acp_usage_core::limits::account_label);
    acp_usage_schema::CreditsInfo {
        provider: c.provider.clone(),
        has_credits: c.has_credits,
        unlimited: c.unlimited,
        balance: c.balance.clone(),
        plan_type: c.plan_type.clone(),
        account,
        observed_at: rfc3339(c.observed_ms.div_euclid(1000)).unwrap_or_default(),
    }
}

fn update_fields(
    snap: &Snapshot,
    label: &AgentLabel,
    trigger: Trigger,
    agent: Option<Value>,
) -> Map<String, Value> {
    let meta = UsageUpdateMeta {
        version: META_VERSION,
        profile: label.profile.to_string(),
        used: Figure { source: source_name(snap.used_source), exact: snap.used_exact },
        size: figure(snap.size_source),
        cost: snap.cost.map(|_| CostFigure {
            source: source_name(snap.cost_source),
            exact: snap.cost_source.is_exact() && !snap.cost_partial && snap.unpriced_calls == 0,
            unpriced_calls: snap.unpriced_calls,
            partial: snap.cost_partial,
            agent_stated: snap.cost_floor.map(round_usd),
            unrecorded_side_calls: label.unrecorded.iter().map(|s| s.to_string()).collect(),
        }),
        model: snap.model.clone(),
        used_split: snap.used_split.map(|(prompt, output)| UsedSplit { prompt, output }),
        trigger: trigger.as_str().to_string(),
        agent,
        limits: label.limits.iter().map(limit_window).collect(),
        credits: label.credits.as_ref().map(credits_info),
    };
    let t = &snap.totals;
    let cumulative = UsageBreakdown {
        total_tokens: t.total(),
        input_tokens: t.input,
        output_tokens: t.output,
        thought_tokens: (t.thought > 0).then_some(t.thought),
        cached_read_tokens: (t.cache_read > 0).then_some(t.cache_read),
        cached_write_tokens: (t.cache_write > 0).then_some(t.cache_write),
        meta: None,
    };
    let mut fields = Map::new();
    fields.insert("sessionUpdate".into(), "usage_update".into());
    fields.insert("used".into(), snap.used.into());
    fields.insert("size".into(), snap.size.into());
    if let Some(amount) = snap.cost {
        fields.insert("cost".into(), json!({"amount": round_usd(amount), "currency": "USD"}));
    }
    let mut m = Map::new();
    m.insert(META_KEY.into(), serde_json::to_value(meta).expect("meta serialises"));
    m.insert("usage".into(), serde_json::to_value(cumulative).expect("usage serialises"));
    // Zed's plan-usage meter reads claude-agent-acp's key: every provider's 5-hour and 7-day
    // windows go there, in its shape.
    if let Some(meter) = zed_meter(&label.limits, now_s()) {
        let meter = serde_json::to_value(meter).expect("the meter serialises");
        m.insert(CLAUDE_RATE_LIMIT_KEY.into(), meter);
    }
    fields.insert("_meta".into(), Value::Object(m));
    fields
}

/// Now, in Unix seconds: Zed's meter shows a window whose reset has passed as empty.
fn now_s() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_secs() as i64)
}

/// Costs are rounded to a billionth of a dollar so float noise never reaches the wire.
fn round_usd(amount: f64) -> f64 {
    (amount * 1e9).round() / 1e9
}

/// A complete `session/update` notification line for session `session_id` carrying `update`
/// (acp-usage's own lines: usage updates, notices, chat lines, its `/usage` answer).
pub fn session_update(session_id: &str, update: Value) -> Vec<u8> {
    let msg = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    });
    serde_json::to_vec(&msg).expect("notification serialises")
}

/// A complete `session/update` `usage_update` notification line.
pub fn usage_update(
    session_id: &str,
    snap: &Snapshot,
    label: &AgentLabel,
    trigger: Trigger,
) -> Vec<u8> {
    session_update(session_id, Value::Object(update_fields(snap, label, trigger, None)))
}

/// Rewrites the agent's own `usage_update` line in place: `used`, `size` and `cost` become the
/// normalised figures, the agent's originals go to `_meta`, every other byte of the line stays.
/// An agent's `_meta["_claude/rateLimit"]` is replaced by acp-usage's when acp-usage knows a
/// 5-hour or 7-day window (the agent's goes to `_meta.acpUsage.agent`), else left as it is.
pub fn rewrite_agent_update(line: &[u8], snap: &Snapshot, label: &AgentLabel) -> Option<Vec<u8>> {
    let env = Envelope::parse(line)?;
    let params = ObjectEdit::parse(env.params?.get())?;
    let update_raw = params.raw("update")?;
    let mut update = ObjectEdit::parse(update_raw.get())?;
    let agent_meta = update.raw("_meta").and_then(|m| ObjectEdit::parse(m.get()));
    let mut original: Map<String, Value> = ["used", "size", "cost"]
        .iter()
        .filter_map(|k| {
            let v = serde_json::from_str(update.raw(k)?.get()).ok()?;
            Some((k.to_string(), v))
        })
        .collect();
    let replaced_rate_limit = agent_meta
        .as_ref()
        .and_then(|m| m.raw(CLAUDE_RATE_LIMIT_KEY))
        .filter(|_| zed_meter(&label.limits, now_s()).is_some())
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
    if let Some(theirs) = replaced_rate_limit {
        original.insert(CLAUDE_RATE_LIMIT_KEY.into(), theirs);
    }
    let ours = update_fields(snap, label, Trigger::Agent, Some(Value::Object(original)));
    let mut meta = agent_meta.unwrap_or_else(ObjectEdit::empty);
    for (k, v) in ours {
        match (k.as_str(), v) {
            ("_meta", Value::Object(ours)) => {
                // The agent's `_meta` keys stay; acp-usage's own keys are added (or replaced).
                for (mk, mv) in &ours {
                    meta.set(mk, mv);
                }
                update.set_text("_meta", meta.render());
            }
            (k, v) => update.set(k, &v),
        }
    }
    if snap.cost.is_none() {
        // Never leave the agent's figure beside ours as if it were ours; it stays in `_meta`.
        update.remove("cost");
    }
    let range = range_in(line, update_raw.get())?;
    Some(replace(line, range, &update.render()))
}

/// The per-turn `usage` object.
pub fn turn_usage(turn: &TurnUsage, agent: Option<Value>) -> Value {
    let t = &turn.totals;
    let meta = TurnUsageMeta {
        version: META_VERSION,
        source: source_name(turn.source),
        exact: turn.source.is_exact(),
        calls: turn.calls,
        model: turn.model.clone(),
        cost: turn.cost.map(round_usd),
        modifiers: turn.modifiers.names().into_iter().map(str::to_string).collect(),
        roles: (!turn.roles.roles.is_empty()).then(|| {
            let breakdown = |t: &acp_usage_core::TokenTotals| UsageBreakdown {
                total_tokens: t.total(),
                input_tokens: t.input,
                output_tokens: t.output,
                thought_tokens: (t.thought > 0).then_some(t.thought),
                cached_read_tokens: (t.cache_read > 0).then_some(t.cache_read),
                cached_write_tokens: (t.cache_write > 0).then_some(t.cache_write),
                meta: None,
            };
            turn.roles
                .roles
                .iter()
                .map(|(role, t)| (role.as_str().to_string(), breakdown(t)))
                .collect()
        }),
        agent,
    };
    let mut m = Map::new();
    m.insert(META_KEY.into(), serde_json::to_value(meta).expect("meta serialises"));
    let usage = UsageBreakdown {
        total_tokens: t.total(),
        input_tokens: t.input,
        output_tokens: t.output,
        thought_tokens: turn.thought_known.then_some(t.thought),
        cached_read_tokens: turn.cache_known.then_some(t.cache_read),
        cached_write_tokens: turn.cache_known.then_some(t.cache_write),
        meta: Some(m),
    };
    serde_json::to_value(usage).expect("usage serialises")
}

/// Puts the per-turn `usage` on a `session/prompt` result line, keeping every other byte. With
/// `keep`, an agent's own `usage` is left alone (and the line is not touched at all).
pub fn rewrite_prompt_result(line: &[u8], turn: &TurnUsage, keep: bool) -> Option<Vec<u8>> {
    let env = Envelope::parse(line)?;
    let result_raw = env.result?;
    let mut result = ObjectEdit::parse(result_raw.get())?;
    let agent: Option<Value> = result
        .raw("usage")
        .and_then(|u| serde_json::from_str(u.get()).ok())
        .filter(|u: &Value| !u.is_null());
    if keep && agent.is_some() {
        return None;
    }
    result.set("usage", &turn_usage(turn, agent));
    let range = range_in(line, result_raw.get())?;
    Some(replace(line, range, &result.render()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use acp_usage_core::limits::from_headers;

    fn snap() -> Snapshot {
        Snapshot {
            used: 1200,
            used_source: Source::Tap,
            used_exact: true,
            used_split: None,
            size: 200_000,
            size_source: Source::Catalog,
            cost: Some(0.5),
            cost_source: Source::Catalog,
            unpriced_calls: 0,
            cost_partial: false,
            cost_floor: None,
            model: None,
            totals: Default::default(),
            totals_exact: true,
        }
    }

    fn label(limits: Vec<Limit>) -> AgentLabel {
        AgentLabel { profile: "claude", unrecorded: &[], limits, credits: None }
    }

    /// Codex's windows as the tap reads them: 5 hours 40% full, a week 12%.
    fn codex_windows() -> Vec<Limit> {
        from_headers(
            [
                ("x-codex-primary-used-percent", "40"),
                ("x-codex-primary-window-minutes", "300"),
                ("x-codex-primary-reset-at", "4000000000"),
                ("x-codex-secondary-used-percent", "12"),
                ("x-codex-secondary-window-minutes", "10080"),
                ("x-codex-secondary-reset-at", "4000500000"),
            ],
            1,
        )
    }

    fn update_of(line: &[u8]) -> Value {
        serde_json::from_slice::<Value>(line).unwrap()["params"]["update"].clone()
    }

    #[test]
    fn injected_updates_carry_zeds_meter_once_a_window_is_known() {
        let none = update_of(&usage_update("s", &snap(), &label(Vec::new()), Trigger::Turn));
        assert!(none["_meta"].get(CLAUDE_RATE_LIMIT_KEY).is_none(), "{none}");
        // A window of unknown length is not on the meter.
        let open_ended = from_headers([("x-codex-primary-used-percent", "5")], 1);
        let other = update_of(&usage_update("s", &snap(), &label(open_ended), Trigger::Turn));
        assert!(other["_meta"].get(CLAUDE_RATE_LIMIT_KEY).is_none(), "{other}");
        let with = update_of(&usage_update("s", &snap(), &label(codex_windows()), Trigger::Turn));
        assert_eq!(
            with["_meta"][CLAUDE_RATE_LIMIT_KEY],
            json!({"status": "allowed", "rateLimitType": "five_hour", "utilization": 0.4,
                   "resetsAt": 4_000_000_000_i64, "unifiedWindows": {
                       "five_hour": {"utilization": 0.4, "resetsAt": 4_000_000_000_i64},
                       "seven_day": {"utilization": 0.12, "resetsAt": 4_000_500_000_i64}}})
        );
        assert_eq!(with["_meta"][META_KEY]["limits"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn the_agents_rate_limit_is_replaced_and_kept_or_left_alone() {
        let line = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":7,"size":9,"_meta":{"_claude/rateLimit":{"status":"allowed","rateLimitType":"five_hour","utilization":0.1},"other":{"x":1e400}}}}}"#;
        let out = rewrite_agent_update(line, &snap(), &label(codex_windows())).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        // The agent's other keys keep their text; its rate limit is ours now, kept in ours.
        assert!(text.contains(r#""other":{"x":1e400}"#), "{text}");
        let u: Value = serde_json::from_str(&text.replace("1e400", "1")).unwrap();
        let u = &u["params"]["update"];
        assert_eq!(u["_meta"][CLAUDE_RATE_LIMIT_KEY]["utilization"], 0.4, "{u}");
        assert_eq!(
            u["_meta"][CLAUDE_RATE_LIMIT_KEY]["unifiedWindows"]["seven_day"]["utilization"],
            0.12
        );
        assert_eq!(
            u["_meta"][META_KEY]["agent"],
            json!({"used": 7, "size": 9, CLAUDE_RATE_LIMIT_KEY:
                {"status": "allowed", "rateLimitType": "five_hour", "utilization": 0.1}})
        );
        assert_eq!(text.matches(CLAUDE_RATE_LIMIT_KEY).count(), 2, "{text}");

        // No window of five hours or a week known: the agent's value stays as it came.
        let hourly = from_headers(
            [("x-codex-primary-used-percent", "5"), ("x-codex-primary-window-minutes", "60")],
            1,
        );
        let out = rewrite_agent_update(line, &snap(), &label(hourly)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#""_claude/rateLimit":{"status":"allowed","rateLimitType":"five_hour","utilization":0.1}"#),
            "{text}"
        );
        let u: Value = serde_json::from_str(&text.replace("1e400", "1")).unwrap();
        assert_eq!(
            u["params"]["update"]["_meta"][META_KEY]["agent"],
            json!({"used": 7, "size": 9})
        );
    }

    /// The error responses acp-usage writes: the id as it came, the error object in
    /// jsonrpsee-types' shape (`data` only when there is some).
    #[test]
    fn error_responses_keep_the_id_as_it_came() {
        let err = ErrorObject::owned(-32603, "the agent \"exited\"", None::<()>);
        assert_eq!(
            String::from_utf8(error_response(r#""\u0041""#, err)).unwrap(),
            r#"{"jsonrpc":"2.0","id":"\u0041","error":{"code":-32603,"message":"the agent \"exited\""}}"#
        );
        let err = ErrorObject::owned(-32050, "spent", Some(json!({"acpUsage": {"limit": 5.0}})));
        assert_eq!(
            String::from_utf8(error_response("-1.5e3", err)).unwrap(),
            r#"{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32050,"message":"spent","data":{"acpUsage":{"limit":5.0}}}}"#
        );
    }
}
