//! `report` against real ledgers built in a temporary directory with the store's own writes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use acp_usage_core::{AccountedCall, Role, Source, TokenRecord};
use chrono::{FixedOffset, NaiveDate};
use serde_json::{Value, json};
use unicode_width::UnicodeWidthStr;

use super::*;
use crate::sinks::ledger::{Origin, SessionInfo, SessionRef, Settled, Store};

/// A ledger file in its own temporary directory, removed at the end of the test.
struct Ledger {
    dir: PathBuf,
    store: Store,
}

impl Ledger {
    fn new(name: &str) -> Ledger {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("ledger.db")).unwrap();
        Ledger { dir, store }
    }

    fn session(&mut self, id: &str, agent: &str, project: Option<&str>, title: Option<&str>) {
        let info = SessionInfo {
            agent_name: Some(format!("{agent}-acp")),
            project: project.map(str::to_owned),
            title: title.map(str::to_owned),
            ..SessionInfo::default()
        };
        self.store.session(&sref(id, agent), &info, None, 0).unwrap();
    }

    /// Adds calls made at the given RFC 3339 times.
    fn calls(&mut self, id: &str, agent: &str, calls: &[(&str, AccountedCall)]) {
        let times: Vec<i64> = calls.iter().map(|(t, _)| ms(t)).collect();
        let calls: Vec<AccountedCall> = calls.iter().map(|(_, c)| c.clone()).collect();
        self.store
            .calls(
                &sref(id, agent),
                Settled { calls: &calls, times: Some(&times), ..Default::default() },
                Origin::Import,
                0,
            )
            .unwrap();
    }

    fn read(&self, opts: &ReportOptions) -> Report {
        query::read(&self.store, opts).unwrap()
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sref(id: &str, agent: &str) -> SessionRef {
    SessionRef { id: id.to_owned(), agent: agent.to_owned() }
}

fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339).unwrap().timestamp_millis()
}

/// A call of `model`: `input` prompt tokens of which 10% cache reads and 5% cache writes
/// (5-minute and 1-hour halves), `output` of which 20% thoughts.
fn call(
    model: Option<&str>,
    input: u64,
    output: u64,
    cost: Option<f64>,
    source: Source,
) -> AccountedCall {
    AccountedCall {
        record: TokenRecord {
            input,
            cache_read: input / 10,
            cache_write_5m: input / 40,
            cache_write_1h: input / 40,
            output,
            thought: output / 5,
            model: model.map(str::to_owned),
            stated_cost: None,
            modifiers: Default::default(),
        },
        calls: 1,
        role: Role::Main,
        provider: None,
        source,
        cost,
        cost_stated: false,
        modifiers_unpriced: false,
        key: None,
        in_turn: true,
    }
}

fn opts(group: Group) -> ReportOptions {
    ReportOptions { group, zone: Zone::Utc, ..ReportOptions::default() }
}

fn keys(r: &Report) -> Vec<Option<&str>> {
    r.rows.iter().map(|row| row.key.as_deref()).collect()
}

fn table(r: &Report, breakdown: bool) -> String {
    let mut out = Vec::new();
    table::write(&mut out, r, Zone::Utc, breakdown, table::WIDTH).unwrap();
    String::from_utf8(out).unwrap()
}

/// Two sessions over three days around a week's and a month's end (2026-11-29 is a Sunday).
fn sample(name: &str) -> Ledger {
    let mut l = Ledger::new(name);
    l.session("s-claude", "claude", Some("/home/me/src/alpha"), Some("Fix the parser"));
    l.session("s-codex", "codex", Some("/home/me/src/beta"), None);
    let sonnet = Some("claude-sonnet-4-5");
    let gpt = Some("gpt-5.2");
    l.calls(
        "s-claude",
        "claude",
        &[
            ("2026-11-29T23:59:59.999Z", call(sonnet, 1000, 100, Some(0.5), Source::Transcript)),
            ("2026-11-30T00:00:00Z", call(sonnet, 2000, 200, Some(1.0), Source::Transcript)),
            (
                "2026-11-30T12:00:00Z",
                call(Some("claude-haiku-4-5"), 400, 40, Some(0.25), Source::Estimate),
            ),
        ],
    );
    l.calls(
        "s-codex",
        "codex",
        &[
            ("2026-11-30T08:00:00Z", call(gpt, 4000, 400, Some(2.0), Source::Tap)),
            ("2026-12-01T00:00:00Z", call(gpt, 8000, 800, Some(4.0), Source::Tap)),
        ],
    );
    l
}

#[test]
fn days_weeks_and_months_split_at_midnight() {
    let l = sample("periods");
    let daily = l.read(&opts(Group::Daily));
    assert_eq!(keys(&daily), [Some("2026-11-29"), Some("2026-11-30"), Some("2026-12-01")]);
    let nov30 = &daily.rows[1].sums;
    assert_eq!((nov30.calls, nov30.input, nov30.output), (3, 6400, 640));
    assert_eq!(nov30.cache_read, 640);
    assert_eq!(nov30.cache_write, 2 * (50 + 10 + 100));
    assert_eq!(nov30.thought, 128);
    assert_eq!(nov30.cost(), Some(3.25));
    // The haiku call is estimated: its cost is not part of the exact share.
    assert_eq!(nov30.exact_cost, 3.0);

    let weekly = l.read(&opts(Group::Weekly));
    // Sunday the 29th closes the week of Monday the 23rd; Monday the 30th opens the next.
    assert_eq!(keys(&weekly), [Some("2026-11-23"), Some("2026-11-30")]);
    assert_eq!(weekly.rows[1].sums.calls, 4);

    let monthly = l.read(&opts(Group::Monthly));
    assert_eq!(keys(&monthly), [Some("2026-11"), Some("2026-12")]);
    assert_eq!(monthly.rows[0].sums.cost(), Some(3.75));
    assert_eq!(monthly.rows[1].sums.cost(), Some(4.0));

    for r in [&daily, &weekly, &monthly] {
        assert_eq!(r.totals.calls, 5);
        assert_eq!(r.totals.input, 15_400);
        assert_eq!(r.totals.cost(), Some(7.75));
        assert_eq!(r.totals.exact_cost, 7.5);
    }
}

#[test]
fn a_day_follows_the_chosen_time_zone() {
    let l = sample("zone");
    // In UTC+01:00 the call at 23:59:59.999Z is on the 30th already.
    let tz = FixedOffset::east_opt(3600).unwrap();
    let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
    assert_eq!(start_of_day(&tz, day), ms("2026-11-29T23:00:00Z"));
    assert_eq!(Zone::Utc.start_of(day), ms("2026-11-30T00:00:00Z"));
    assert_eq!(Zone::Utc.date_of(ms("2026-11-29T23:59:59.999Z")).to_string(), "2026-11-29");
    assert_eq!(Zone::Utc.timestamp(ms("2026-11-30T12:00:00Z")), "2026-11-30T12:00:00Z");
    // The machine's zone gives every call a day, the same days' total.
    let local = l.read(&ReportOptions { zone: Zone::Local, ..opts(Group::Daily) });
    assert_eq!(local.totals, l.read(&opts(Group::Daily)).totals);
}

#[test]
fn since_and_until_are_inclusive_days() {
    let l = sample("bounds");
    let day = |s: &str| Some(parse_date(s).unwrap());
    let r = l.read(&ReportOptions {
        since: day("2026-11-30"),
        until: day("20261130"),
        ..opts(Group::Daily)
    });
    // 00:00:00.000 of the 30th is in, the last millisecond of the 29th and 00:00 of the 1st out.
    assert_eq!(keys(&r), [Some("2026-11-30")]);
    assert_eq!(r.totals.calls, 3);
    let r = l.read(&ReportOptions { since: day("2026-11-30"), ..opts(Group::Daily) });
    assert_eq!(r.totals.calls, 4);
    let r = l.read(&ReportOptions { until: day("2026-11-29"), ..opts(Group::Daily) });
    assert_eq!((r.totals.calls, r.totals.cost()), (1, Some(0.5)));
    let r = l.read(&ReportOptions { since: day("2027-01-01"), ..opts(Group::Daily) });
    assert!(r.rows.is_empty());
    assert_eq!(r.totals.cost(), Some(0.0));
}

#[test]
fn dates_parse_in_both_forms() {
    let want = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
    assert_eq!(parse_date("2026-11-23"), Ok(want));
    assert_eq!(parse_date("20261123"), Ok(want));
    assert!(parse_date("2026-13-01").is_err());
    assert!(parse_date("23/11/2026").is_err());
    assert!(parse_date("yesterday").unwrap_err().contains("YYYY-MM-DD"));
}

#[test]
fn filters_match_parts_ignoring_case() {
    let l = sample("filters");
    // The agent's profile or its own name (`codex-acp`).
    let r = l.read(&ReportOptions { agent: Some("CODEX-A".into()), ..opts(Group::Agent) });
    assert_eq!(keys(&r), [Some("codex")]);
    assert_eq!(r.totals.calls, 2);
    let r = l.read(&ReportOptions { project: Some("src/Alpha".into()), ..opts(Group::Project) });
    assert_eq!(keys(&r), [Some("/home/me/src/alpha")]);
    assert_eq!(r.totals.cost(), Some(1.75));
    let r = l.read(&ReportOptions { model: Some("sonnet".into()), ..opts(Group::Model) });
    assert_eq!(keys(&r), [Some("claude-sonnet-4-5")]);
    assert_eq!((r.totals.calls, r.totals.input), (2, 3000));
    // Filters add up: nothing is both codex and sonnet.
    let r = l.read(&ReportOptions {
        agent: Some("codex".into()),
        model: Some("sonnet".into()),
        ..opts(Group::Daily)
    });
    assert!(r.rows.is_empty());
}

#[test]
fn sessions_projects_agents_and_models() {
    let l = sample("keys");
    let r = l.read(&opts(Group::Session));
    // Sessions by their first call.
    assert_eq!(keys(&r), [Some("s-claude"), Some("s-codex")]);
    let claude = &r.rows[0];
    let meta = claude.session.as_ref().unwrap();
    assert_eq!(meta.agent, "claude");
    assert_eq!(meta.title.as_deref(), Some("Fix the parser"));
    assert_eq!(claude.first_at, ms("2026-11-29T23:59:59.999Z"));
    assert_eq!(claude.last_at, ms("2026-11-30T12:00:00Z"));
    assert_eq!(claude.sums.cost(), Some(1.75));

    // Projects, agents and models: most expensive first.
    let r = l.read(&opts(Group::Project));
    assert_eq!(keys(&r), [Some("/home/me/src/beta"), Some("/home/me/src/alpha")]);
    let r = l.read(&opts(Group::Agent));
    assert_eq!(keys(&r), [Some("codex"), Some("claude")]);
    let r = l.read(&opts(Group::Model));
    assert_eq!(keys(&r), [Some("gpt-5.2"), Some("claude-sonnet-4-5"), Some("claude-haiku-4-5")]);
    assert_eq!(r.rows[1].sums.cost(), Some(1.5));
}

#[test]
fn breakdown_sums_per_model_within_a_row() {
    let l = sample("breakdown");
    let r = l.read(&opts(Group::Daily));
    let nov30 = &r.rows[1];
    let models: Vec<(Option<&str>, u64, Option<f64>)> =
        nov30.models.iter().map(|(m, s)| (m.as_deref(), s.calls, s.cost())).collect();
    assert_eq!(
        models,
        [
            (Some("gpt-5.2"), 1, Some(2.0)),
            (Some("claude-sonnet-4-5"), 1, Some(1.0)),
            (Some("claude-haiku-4-5"), 1, Some(0.25)),
        ]
    );
    let text = table(&r, true);
    assert!(text.contains("  └ gpt-5.2"), "{text}");
    let json = to_json(&r, &ReportOptions { breakdown: true, ..opts(Group::Daily) });
    let first = &json["rows"][1]["models"][0];
    assert_eq!(first["model"], "gpt-5.2");
    assert_eq!(first["inputTokens"], 4000);
    assert_eq!(first["cost"], 2.0);
    // Without --breakdown there is no `models` key.
    assert!(to_json(&r, &opts(Group::Daily))["rows"][0].get("models").is_none());
}

#[test]
fn json_shape_and_totals() {
    let l = sample("json");
    let r = l.read(&opts(Group::Session));
    let v = to_json(&r, &opts(Group::Session));
    assert_eq!(v["report"], "session");
    assert_eq!(v["currency"], "USD");
    assert_eq!(v["timeZone"], "UTC");
    assert_eq!(
        v["rows"][0],
        json!({
            "session": "s-claude",
            "agent": "claude",
            "project": "/home/me/src/alpha",
            "title": "Fix the parser",
            "firstSeen": "2026-11-29T23:59:59Z",
            "lastSeen": "2026-11-30T12:00:00Z",
            "calls": 3,
            "inputTokens": 3400,
            "cachedReadTokens": 340,
            "cachedWriteTokens": 170,
            "outputTokens": 340,
            "thoughtTokens": 68,
            "totalTokens": 3740,
            "cost": 1.75,
            "exactCost": 1.5,
            "unpricedCalls": 0,
            "unpricedTokens": 0
        })
    );
    assert_eq!(v["rows"][1]["title"], Value::Null);
    assert_eq!(v["totals"]["calls"], 5);
    assert_eq!(v["totals"]["totalTokens"], 15_400 + 1_540);
    assert_eq!(v["totals"]["cost"], 7.75);
    assert_eq!(v["totals"]["exactCost"], 7.5);
    assert!(v["totals"].get("session").is_none());
    // Totals are the rows' sums, key by key.
    for key in ["calls", "inputTokens", "cachedReadTokens", "cachedWriteTokens", "outputTokens"] {
        let sum: u64 = v["rows"].as_array().unwrap().iter().map(|r| r[key].as_u64().unwrap()).sum();
        assert_eq!(v["totals"][key].as_u64(), Some(sum), "{key}");
    }
    let daily = to_json(&l.read(&opts(Group::Daily)), &opts(Group::Daily));
    assert_eq!(daily["rows"][0]["date"], "2026-11-29");
    let weekly = to_json(&l.read(&opts(Group::Weekly)), &opts(Group::Weekly));
    assert_eq!(weekly["rows"][1]["week"], "2026-11-30");
    let monthly = to_json(&l.read(&opts(Group::Monthly)), &opts(Group::Monthly));
    assert_eq!(monthly["rows"][1]["month"], "2026-12");
}

#[test]
fn unpriced_calls_are_left_out_of_the_cost_and_said() {
    let mut l = Ledger::new("unpriced");
    l.session("s1", "generic", None, None);
    let mut summed = call(Some("mystery-1"), 1000, 10, None, Source::Agent);
    // An agent's per-turn sum standing for three calls.
    summed.calls = 3;
    l.calls(
        "s1",
        "generic",
        &[
            ("2026-11-23T10:00:00Z", summed),
            ("2026-11-24T10:00:00Z", call(Some("mystery-1"), 1000, 10, None, Source::Agent)),
            ("2026-11-24T11:00:00Z", call(Some("gpt-5.2"), 1000, 10, Some(0.125), Source::Tap)),
            ("2026-11-24T12:00:00Z", call(None, 1000, 10, None, Source::Estimate)),
        ],
    );
    let r = l.read(&opts(Group::Daily));
    // A day of nothing but unpriced calls has no cost, not a cost of zero.
    assert_eq!(r.rows[0].sums.cost(), None);
    assert_eq!((r.rows[0].sums.calls, r.rows[0].sums.unpriced_calls), (3, 3));
    assert_eq!(r.rows[1].sums.cost(), Some(0.125));
    assert_eq!(r.rows[1].sums.unpriced_calls, 2);
    assert_eq!(r.totals.cost(), Some(0.125));
    assert_eq!(r.totals.unpriced_calls, 5);
    // Their tokens, input and output, by ledger row (the summed one counts once).
    assert_eq!((r.rows[0].sums.unpriced_tokens, r.rows[1].sums.unpriced_tokens), (1010, 2020));
    assert_eq!(r.totals.unpriced_tokens, 3030);
    assert_eq!(
        r.unpriced_models.iter().map(Option::as_deref).collect::<Vec<_>>(),
        [None, Some("mystery-1")]
    );

    let v = to_json(&r, &opts(Group::Daily));
    assert_eq!(v["rows"][0]["cost"], Value::Null);
    assert_eq!(v["rows"][0]["exactCost"], 0.0);
    assert_eq!(v["rows"][0]["unpricedCalls"], 3);
    assert_eq!(v["totals"]["unpricedCalls"], 5);
    assert_eq!(v["totals"]["unpricedTokens"], 3030);

    let text = table(&r, false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[3].starts_with("2026-11-23") && lines[3].contains("  -  "), "{text}");
    assert!(lines[4].contains("0.13*"), "{text}");
    assert!(
        text.contains(
            "Unpriced: 5 calls of models the catalog does not know ((unknown model), mystery-1)"
        ),
        "{text}"
    );

    let r = l.read(&opts(Group::Model));
    assert_eq!(keys(&r), [Some("gpt-5.2"), Some("mystery-1"), None]);
    assert!(table(&r, false).contains("\n(unknown)  "));
}

#[test]
fn the_table_fits_100_columns_and_totals_last() {
    let l = sample("table");
    let text = table(&l.read(&opts(Group::Daily)), false);
    let lines: Vec<&str> = text.lines().collect();
    // Two header lines: the currency is in the cost's.
    assert!(lines[0].trim_start().starts_with("CACHE") && lines[0].ends_with("COST"), "{text}");
    assert!(lines[1].starts_with("DATE  ") && lines[1].contains("(USD)"), "{text}");
    assert!(lines[2].starts_with("──"));
    assert!(lines[3].starts_with("2026-11-29"));
    // Full numbers with separators while they fit.
    assert!(lines[4].contains("6,400"), "{text}");
    assert!(lines[6].starts_with("──"));
    let total = lines[7];
    assert!(
        total.starts_with("TOTAL") && total.contains("15,400") && total.contains("7.75"),
        "{text}"
    );
    // 7.5 of 7.75 exact: rounded down, never shown as all.
    assert!(total.ends_with("96%"), "{text}");
    assert!(text.contains("EXACT: the share"));

    // Huge counts and a long title: abbreviated and cut, never wider than 100.
    let mut l = Ledger::new("wide");
    let title = "A very long session title that goes on and on about refactoring the parser again";
    let project = "/home/me/a/deeply/nested/checkout/of/some/project/with/a/long/name";
    l.session("0123456789abcdef", "claude", Some(project), Some(title));
    let big = call(
        Some("claude-opus-4-8"),
        987_654_321_098,
        12_345_678_901,
        Some(123_456.78),
        Source::Tap,
    );
    l.calls("0123456789abcdef", "claude", &[("2026-11-23T10:00:00Z", big)]);
    for group in [Group::Daily, Group::Session, Group::Project, Group::Model] {
        let text = table(&l.read(&opts(group)), true);
        for line in text.lines() {
            assert!(line.width() <= 100, "{} columns: {line}\n{text}", line.width());
        }
        assert!(text.contains("988B") && text.contains("123,456.78"), "{text}");
    }
    let sessions = table(&l.read(&opts(Group::Session)), false);
    assert!(sessions.contains("2026-11-23 claude A very long"), "{sessions}");
    assert!(sessions.contains('…'), "{sessions}");
    let projects = table(&l.read(&opts(Group::Project)), false);
    assert!(projects.contains("…") && projects.contains("with/a/long/name "), "{projects}");
}

#[test]
fn an_empty_ledger_is_an_empty_report() {
    let l = Ledger::new("empty");
    let r = l.read(&opts(Group::Daily));
    assert_eq!(r, Report::empty(Group::Daily));
    let v = to_json(&r, &opts(Group::Daily));
    assert_eq!(v["rows"], json!([]));
    assert_eq!(
        v["totals"],
        json!({
            "calls": 0, "inputTokens": 0, "cachedReadTokens": 0, "cachedWriteTokens": 0,
            "outputTokens": 0, "thoughtTokens": 0, "totalTokens": 0, "cost": 0.0,
            "exactCost": 0.0, "unpricedCalls": 0, "unpricedTokens": 0
        })
    );
    let text = table(&r, false);
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.lines().last().unwrap().starts_with("TOTAL"));
}

#[test]
fn a_missing_ledger_is_not_created() {
    let dir = std::env::temp_dir().join(format!("acp-usage-report-{}-missing", std::process::id()));
    let path = dir.join("ledger.db");
    let mut out = Vec::new();
    write_report(
        &mut out,
        &ReportOptions { ledger: Some(path.clone()), json: true, ..opts(Group::Daily) },
    )
    .unwrap();
    assert!(!path.exists() && !dir.exists());
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((v["rows"].clone(), v["totals"]["calls"].clone()), (json!([]), json!(0)));
    // Reading leaves a ledger as it was: no schema is written to a file that has none.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&path, b"").unwrap();
    let store = Store::open_read(&path).unwrap();
    assert_eq!(query::read(&store, &opts(Group::Daily)).unwrap(), Report::empty(Group::Daily));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn since_after_until_is_an_error() {
    let day = |s: &str| Some(parse_date(s).unwrap());
    let since_after_until =
        ReportOptions { since: day("2026-11-30"), until: day("2026-11-01"), ..opts(Group::Daily) };
    let err = write_report(&mut Vec::new(), &since_after_until).unwrap_err();
    assert!(err.to_string().contains("after --until"));
}

#[test]
fn limits_per_day_and_per_hour() {
    let mut l = Ledger::new("limits");
    let five = |fraction: &str, at: &str| {
        acp_usage_core::limits::from_headers(
            [
                ("anthropic-ratelimit-unified-5h-utilization", fraction),
                ("anthropic-ratelimit-unified-5h-reset", "1795701600"),
                ("anthropic-ratelimit-unified-5h-status", "allowed"),
            ],
            ms(at),
        )
    };
    for (f, at) in [
        ("0.5", "2026-11-26T09:10:00Z"),
        ("0.8", "2026-11-26T09:40:00Z"),
        ("0.95", "2026-11-26T10:05:00Z"),
        ("0.1", "2026-11-27T08:00:00Z"),
    ] {
        l.store.limits(&five(f, at), Some("s")).unwrap();
    }
    let codex = acp_usage_core::limits::from_headers(
        [
            ("x-codex-primary-used-percent", "40"),
            ("x-codex-primary-window-minutes", "300"),
            ("x-codex-secondary-used-percent", "12"),
            ("x-codex-secondary-window-minutes", "10080"),
        ],
        ms("2026-11-26T11:00:00Z"),
    );
    l.store.limits(&codex, None).unwrap();
    let path = l.dir.join("ledger.db");
    let run = |o: ReportOptions| {
        let mut out = Vec::new();
        write_report(&mut out, &ReportOptions { ledger: Some(path.clone()), ..o }).unwrap();
        String::from_utf8(out).unwrap()
    };
    let text = run(opts(Group::Limits));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("DAY") && lines[0].contains("PEAK"), "{text}");
    let day26 = lines.iter().find(|l| l.contains("2026-11-26") && l.contains("five_hour")).unwrap();
    assert!(day26.contains("anthropic five_hour (5h)") && day26.contains("95%"), "{text}");
    assert!(day26.contains("2026-11-26T14:00:00Z") && day26.trim_end().ends_with('3'), "{text}");
    assert!(text.contains("openai primary (5h)") && text.contains("openai secondary (7d)"));
    assert_eq!(lines.len(), 1 + 4, "{text}");

    let json: Value = serde_json::from_str(&run(ReportOptions {
        json: true,
        per: Per::Hour,
        since: Some(parse_date("2026-11-26").unwrap()),
        until: Some(parse_date("2026-11-26").unwrap()),
        ..opts(Group::Limits)
    }))
    .unwrap();
    assert_eq!(json["per"], "hour");
    let rows = json["rows"].as_array().unwrap();
    let hours: Vec<(&str, f64, f64)> = rows
        .iter()
        .filter(|r| r["window"] == "five_hour")
        .map(|r| {
            (
                r["period"].as_str().unwrap(),
                r["peakUsedPercent"].as_f64().unwrap(),
                r["lastUsedPercent"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(hours, [("2026-11-26 09:00", 80.0, 80.0), ("2026-11-26 10:00", 95.0, 95.0)]);
    assert_eq!(rows.len(), 4, "the 27th is after --until: {json}");
    assert_eq!(rows[0]["resetsAt"], "2026-11-26T14:00:00Z");
}

#[test]
fn a_call_priced_without_its_modifier_is_not_exact() {
    let mut l = Ledger::new("modifiers");
    l.session("s-fast", "claude", None, None);
    let opus = Some("claude-opus-4-6");
    // Fast mode on Opus 4.6, priced with its 6x: exact.
    let mut priced = call(opus, 1000, 100, Some(6.0), Source::Transcript);
    priced.record.modifiers.fast = true;
    // Fast mode on a model whose multiplier is unknown: priced at 1x, a floor.
    let mut floor = call(Some("claude-sonnet-4-5"), 1000, 100, Some(1.0), Source::Transcript);
    floor.record.modifiers.fast = true;
    floor.modifiers_unpriced = true;
    l.calls(
        "s-fast",
        "claude",
        &[("2026-11-30T10:00:00Z", priced), ("2026-11-30T11:00:00Z", floor)],
    );
    let r = l.read(&opts(Group::Daily));
    assert_eq!((r.totals.cost(), r.totals.exact_cost), (Some(7.0), 6.0));
    let v = to_json(&r, &opts(Group::Daily));
    assert_eq!(
        (v["totals"]["cost"].as_f64(), v["totals"]["exactCost"].as_f64()),
        (Some(7.0), Some(6.0))
    );
    // 6 of 7 exact: the EXACT column says 85%, not 100%.
    let text = table(&r, false);
    assert!(text.lines().any(|line| line.starts_with("TOTAL") && line.ends_with("85%")), "{text}");
}

/// The `data-*` attributes of each `<tag ...>` in `html` whose opening tag contains `with`.
fn tags(html: &str, tag: &str, with: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut found = Vec::new();
    for piece in html.split(&open).skip(1) {
        let inside = &piece[..piece.find('>').unwrap()];
        if !inside.contains(with) {
            continue;
        }
        let mut attrs = BTreeMap::new();
        for pair in inside.split("\" ") {
            if let Some((k, v)) = pair.split_once("=\"") {
                attrs.insert(k.trim().to_owned(), v.trim_end_matches('"').to_owned());
            }
        }
        found.push(attrs);
    }
    found
}

fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("#{id}"));
    &page[start..start + page[start..].find("</section>").unwrap()]
}

fn f(attrs: &BTreeMap<String, String>, key: &str) -> f64 {
    attrs[key].parse().unwrap()
}

/// The sample, plus a session whose title and project are markup and a model nobody prices.
fn page(name: &str) -> (Ledger, String) {
    let mut l = sample(name);
    l.session(
        "s-evil",
        "gemini",
        Some("/tmp/<img src=x onerror=alert(1)>"),
        Some("<script>alert(\"x\")</script> & 'co'"),
    );
    l.calls(
        "s-evil",
        "gemini",
        &[("2026-12-02T09:00:00Z", call(Some("kimi-k9"), 500, 50, None, Source::Agent))],
    );
    let o = ReportOptions { html: Some("page.html".into()), ..opts(Group::Daily) };
    let daily = l.read(&o);
    let sessions = l.read(&opts(Group::Session));
    let page = html::render(&daily, &sessions, &o);
    (l, page)
}

#[test]
fn the_html_page_has_every_chart_and_no_markup_from_the_ledger() {
    let (_l, page) = page("html-structure");
    assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(page.ends_with("</html>\n"));
    for id in ["totals", "cost-per-day", "tokens-per-day", "exactness-per-day", "sessions"] {
        assert!(page.contains(&format!("<section id=\"{id}\"")), "no #{id}");
    }
    // Self-contained and inert: no script, nothing fetched.
    for bad in ["<script", "http:", "https:", "src=\"", "url(", "<img", "<link"] {
        assert!(!page.contains(bad), "the page holds `{bad}`");
    }
    assert!(
        page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;</div>")
    );
    assert!(page.contains("/tmp/&lt;img src=x onerror=alert(1)&gt;"));
    // Four days, 2026-11-29 to 2026-12-02, in each chart.
    let days = ["2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02"];
    for id in ["cost-per-day", "tokens-per-day", "exactness-per-day"] {
        let groups = tags(section(&page, id), "g", "class=\"day\"");
        let got: Vec<&str> = groups.iter().map(|g| g["data-day"].as_str()).collect();
        assert_eq!(got, days, "#{id}");
    }
    // The totals as the report sums them; the unpriced call counted, not priced.
    let totals = &tags(&page, "section", "id=\"totals\"")[0];
    assert_eq!(f(totals, "data-total-cost"), 7.75);
    assert_eq!(f(totals, "data-exact-cost"), 7.5);
    assert_eq!((f(totals, "data-calls"), f(totals, "data-unpriced-calls")), (6.0, 1.0));
    assert_eq!(f(totals, "data-unpriced-tokens"), 550.0);
    // People read dollars and short counts.
    assert!(page.contains("<div class=\"value\">$7.75*</div>"), "{page}");
    // Sessions dearest first: codex ($6), claude ($1.75), then the unpriced one.
    let rows = tags(section(&page, "sessions"), "tr", "data-session=");
    let ids: Vec<&str> = rows.iter().map(|r| r["data-session"].as_str()).collect();
    assert_eq!(ids, ["s-codex", "s-claude", "s-evil"]);
}

#[test]
fn html_stacked_bars_add_up_to_their_day() {
    let (_l, page) = page("html-stacks");
    let cost = section(&page, "cost-per-day");
    let mut scale = None;
    for day in cost.split("<g class=\"day\" ").skip(1) {
        let group = &tags(&format!("<g {day}"), "g", "data-day")[0];
        let bars = tags(day, "rect", "class=\"bar\"");
        let total = f(group, "data-cost");
        let sum: f64 = bars.iter().map(|b| f(b, "data-cost")).sum();
        assert!((sum - total).abs() < 1e-9, "{}: bars {sum} vs {total}", group["data-day"]);
        // Heights follow the costs: one scale for every day (to the drawing's rounding).
        let height: f64 = bars.iter().map(|b| f(b, "height")).sum();
        if total > 0.0 {
            let s = *scale.get_or_insert(height / total);
            assert!((height - total * s).abs() < 0.02 * bars.len() as f64, "{}", group["data-day"]);
        } else {
            assert!(bars.is_empty(), "an unpriced day draws no cost bar");
        }
    }
    assert!(scale.is_some());
    // The 30th: Sonnet at the bottom (the dearest overall is gpt-5.2, then Sonnet, then Haiku).
    let day = &cost[cost.find("data-day=\"2026-11-30\"").unwrap()..];
    let day = &day[..day.find("</g>").unwrap()];
    let models: Vec<String> =
        tags(day, "rect", "class=\"bar\"").into_iter().map(|b| b["data-model"].clone()).collect();
    assert_eq!(models, ["gpt-5.2", "claude-sonnet-4-5", "claude-haiku-4-5"]);
    // Tokens: the four kinds add up to the day's tokens.
    for g in tags(section(&page, "tokens-per-day"), "g", "class=\"day\"") {
        let kinds = ["data-uncached-tokens", "data-cache-read-tokens", "data-cache-write-tokens"];
        let input: f64 = kinds.iter().map(|k| f(&g, k)).sum();
        assert_eq!(input + f(&g, "data-output-tokens"), f(&g, "data-tokens"), "{g:?}");
    }
    // Exactness: exact + estimated is the day's cost.
    for g in tags(section(&page, "exactness-per-day"), "g", "class=\"day\"") {
        let parts = f(&g, "data-exact-cost") + f(&g, "data-estimated-cost");
        assert!((parts - f(&g, "data-cost")).abs() < 1e-9, "{g:?}");
    }
}

#[test]
fn html_escape_leaves_no_markup() {
    assert_eq!(
        html::escape("<script>alert('x')</script> & \"y\""),
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
    );
    assert_eq!(html::escape("plain/path ü"), "plain/path ü");
}

#[test]
fn html_goes_to_its_file_whole_or_fails_clearly() {
    let l = sample("html-file");
    let file = l.dir.join("out").join("page.html");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let o = ReportOptions {
        html: Some(file.clone()),
        ledger: Some(l.dir.join("ledger.db")),
        ..opts(Group::Daily)
    };
    let mut out = Vec::new();
    write_report(&mut out, &o).unwrap();
    assert!(out.is_empty(), "the page goes to the file, not stdout");
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.contains("data-day=\"2026-12-01\""));
    // Only the page is left in the directory (no temporary file).
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
    // `-`: stdout.
    let mut out = Vec::new();
    write_report(&mut out, &ReportOptions { html: Some("-".into()), ..o.clone() }).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), page);
    // A directory that does not exist: an error naming the path.
    let missing = l.dir.join("no-such-dir").join("page.html");
    let err =
        write_report(&mut Vec::new(), &ReportOptions { html: Some(missing.clone()), ..o.clone() })
            .unwrap_err();
    assert!(format!("{err:#}").contains(&missing.display().to_string()), "{err:#}");
    // The page is per day: another grouping is refused.
    let err =
        write_report(&mut Vec::new(), &ReportOptions { group: Group::Weekly, ..o }).unwrap_err();
    assert!(err.to_string().contains("--html"), "{err}");
}
