//! Unit tests of the limit readers and the board, on the formats the agents' shipped code reads.
use super::*;
use crate::budget::Lines;

#[test]
fn anthropic_unified_headers_are_fractions_and_unix_seconds() {
    let headers = [
        ("Anthropic-Ratelimit-Unified-Status", "allowed"),
        ("anthropic-ratelimit-unified-5h-utilization", "0.73"),
        ("anthropic-ratelimit-unified-5h-reset", "1795010400"),
        ("anthropic-ratelimit-unified-5h-status", "allowed_warning"),
        ("anthropic-ratelimit-unified-7d-utilization", "0.12"),
        ("anthropic-ratelimit-unified-7d-reset", "1795500000"),
        ("anthropic-ratelimit-unified-representative-claim", "five_hour"),
        ("content-type", "text/event-stream"),
    ];
    let got = from_headers(headers, 5);
    assert_eq!(got.len(), 2);
    let five = &got[0];
    assert_eq!((five.provider.as_str(), five.window.as_str()), ("anthropic", "five_hour"));
    assert!((five.used_percent - 73.0).abs() < 1e-9);
    assert_eq!(five.window_minutes, Some(300));
    assert_eq!(five.resets_at, Some(1_795_010_400));
    assert_eq!(five.status.as_deref(), Some("allowed_warning"));
    assert_eq!(five.short(), "5h 73%");
    // No per-window status: the unified one.
    assert_eq!(got[1].status.as_deref(), Some("allowed"));
    assert_eq!(got[1].short(), "7d 12%");
}

#[test]
fn codex_headers_are_percents_per_family() {
    let headers = [
        ("x-codex-primary-used-percent", "12.5"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-primary-reset-at", "1704069000"),
        ("x-codex-secondary-used-percent", "40"),
        ("x-codex-secondary-window-minutes", "10080"),
        ("x-codex-secondary-reset-at", "1704600000"),
        ("x-codex-other-primary-used-percent", "0"),
        ("x-codex-other-primary-window-minutes", "0"),
    ];
    let got = from_headers(headers, 0);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].limit_id.as_deref(), Some("codex"));
    assert_eq!((got[0].window.as_str(), got[0].used_percent), ("primary", 12.5));
    assert_eq!(got[0].resets_at, Some(1_704_069_000));
    assert_eq!(got[1].short(), "7d 40%");
    assert!(from_headers([("x-request-id", "1")], 0).is_empty());
}

#[test]
fn codex_refusal_marks_the_window_used_up_rejected() {
    let headers = [
        ("x-codex-primary-used-percent", "100"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-primary-reset-at", "1704069000"),
        ("x-codex-secondary-used-percent", "40"),
        ("x-codex-secondary-window-minutes", "10080"),
        ("x-codex-rate-limit-reached-type", "rate_limit_reached"),
    ];
    let got = from_headers(headers, 0);
    assert_eq!(got[0].status.as_deref(), Some("rejected"));
    assert_eq!(got[1].status, None);
    // None stated full: the fullest is the one that refused.
    let headers = [
        ("x-codex-primary-used-percent", "97"),
        ("x-codex-primary-window-minutes", "10080"),
        ("x-codex-rate-limit-reached-type", "rate_limit_reached"),
    ];
    assert_eq!(from_headers(headers, 0)[0].status.as_deref(), Some("rejected"));
    // Garbage in the header's place is not a refusal; garbage numbers are not windows.
    let headers = [
        ("x-codex-primary-used-percent", "lots"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-rate-limit-reached-type", ""),
    ];
    let got = from_headers(headers, 0);
    assert!(got.iter().all(|l| l.status.is_none()), "{got:?}");
}

#[test]
fn garbage_values_are_named_for_the_log_and_left_out() {
    let headers = [
        ("anthropic-ratelimit-unified-5h-utilization", "high"),
        ("anthropic-ratelimit-unified-5h-reset", ""),
        ("anthropic-ratelimit-unified-7d-utilization", "0.5"),
        ("x-codex-primary-used-percent", "NaN"),
        ("x-codex-credits-balance", "12.5"),
        ("x-request-id", "abc"),
    ];
    assert_eq!(
        unreadable_headers(headers),
        [
            "anthropic-ratelimit-unified-5h-utilization",
            "anthropic-ratelimit-unified-5h-reset",
            "x-codex-primary-used-percent",
        ]
    );
    let got = from_headers(headers, 0);
    assert_eq!(got.len(), 1, "only the weekly window is readable: {got:?}");
    assert_eq!(got[0].window, "seven_day");
}

#[test]
fn codex_event_and_rollout_shapes() {
    let event = br#"{"type":"codex.rate_limits","plan_type":"pro","rate_limits":{"primary":{"used_percent":7,"window_minutes":300,"reset_at":1779398785},"secondary":null},"credits":null,"metered_limit_name":"codex_other"}"#;
    let got = from_codex_event(event, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].limit_id.as_deref(), Some("codex_other"));
    assert_eq!(got[0].resets_at, Some(1_779_398_785));
    assert!(from_codex_event(br#"{"type":"response.created"}"#, 1).is_empty());
    let rollout: Value = serde_json::from_str(
        r#"{"primary":{"used_percent":55.0,"window_minutes":300,"resets_at":1779398785},"secondary":{"used_percent":3.0,"window_minutes":10080,"resets_at":1779900000},"plan_type":"plus","unknown":1}"#,
    )
    .unwrap();
    let got = from_codex_rollout(&rollout, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].source, LimitSource::Transcript);
    assert_eq!(got[1].window_minutes, Some(10080));
}

#[test]
fn code_assist_quota_buckets() {
    let body = br#"{"buckets":[{"modelId":"gemini-2.5-pro","tokenType":"REQUESTS","remainingFraction":0.25,"remainingAmount":"25","resetTime":"2026-11-27T00:00:00Z"},{"modelId":"gemini-2.5-flash","remainingFraction":1}]}"#;
    let got = from_code_assist_quota(body, 0);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].window, "gemini-2.5-pro:requests");
    assert!((got[0].used_percent - 75.0).abs() < 1e-9);
    assert_eq!(got[0].resets_at, Some(1_795_737_600));
    assert_eq!(got[1].used_percent, 0.0);
}

#[test]
fn claude_rate_limit_meta_reads_the_unified_windows() {
    let info = br#"{"status":"allowed","resetsAt":1795010400,"rateLimitType":"five_hour","unifiedWindows":{"five_hour":{"utilization":0.8,"resetsAt":1795010400},"seven_day":{"utilization":0.1,"resetsAt":1795500000,"status":"allowed"}}}"#;
    let got = from_claude_rate_limit(info, 0);
    assert_eq!(got.len(), 2);
    assert!((got[0].used_percent - 80.0).abs() < 1e-9);
    assert_eq!(got[0].source, LimitSource::Agent);
    // Without the windows, the warning's own figure.
    let info = br#"{"status":"allowed","resetsAt":1795010400,"rateLimitType":"seven_day","utilization":0.76}"#;
    let got = from_claude_rate_limit(info, 0);
    assert_eq!((got[0].window.as_str(), got[0].window_minutes), ("seven_day", Some(10080)));
    assert!(from_claude_rate_limit(br#"{"status":"allowed"}"#, 0).is_empty());
}

#[test]
fn rfc3339_times() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339("2026-11-26T14:00:00Z"), Some(1_795_701_600));
    assert_eq!(
        parse_rfc3339("2026-11-26T15:00:00.123+01:00"),
        parse_rfc3339("2026-11-26T14:00:00Z")
    );
    assert_eq!(parse_rfc3339("tomorrow"), None);
}

fn five_hour(percent: f64, reset: i64, at: i64) -> Limit {
    Limit {
        provider: "anthropic".into(),
        window: "five_hour".into(),
        limit_id: None,
        window_minutes: Some(300),
        used_percent: percent,
        resets_at: Some(reset),
        status: None,
        source: LimitSource::Tap,
        observed_ms: at,
        account: None,
        runs_out_at: None,
    }
}

/// What the board tells of an observation at its own time: the line it crossed.
fn crossed(board: &mut LimitBoard, l: Limit) -> Option<f64> {
    let at = l.observed_ms;
    let told = board.observe(l, at);
    told.crossing.map(|c| c.fraction)
}

#[test]
fn the_board_tells_each_line_once_and_starts_over_when_the_window_resets() {
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    assert_eq!(crossed(&mut board, five_hour(50.0, 1000, 1)), None);
    assert_eq!(crossed(&mut board, five_hour(80.0, 1000, 2)), Some(0.75));
    assert_eq!(crossed(&mut board, five_hour(85.0, 1000, 3)), None);
    assert_eq!(crossed(&mut board, five_hour(95.0, 1000, 4)), Some(0.9));
    // An older observation arriving late changes nothing.
    assert_eq!(crossed(&mut board, five_hour(10.0, 1000, 3)), None);
    assert_eq!(board.current(4)[0].used_percent, 95.0);
    assert_eq!(crossed(&mut board, five_hour(100.0, 1030, 5)), Some(1.0));
    // The next window: from zero again.
    assert_eq!(crossed(&mut board, five_hour(20.0, 1000 + 18_000, 6)), None);
    assert_eq!(crossed(&mut board, five_hour(76.0, 1000 + 18_000, 7)), Some(0.75));
    // First seen already past a line: not told (an earlier run did).
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    assert_eq!(crossed(&mut board, five_hour(92.0, 1000, 1)), None);
    assert_eq!(crossed(&mut board, five_hour(100.0, 1000, 2)), Some(1.0));
}

const HOUR_MS: i64 = 3_600_000;

#[test]
fn the_board_tells_a_run_out_once_per_period_and_shows_it() {
    // A 5-hour window resetting at 5 h, observed at 1 h (10%), 1.5 h (20%), 2 h (70%).
    let reset = 5 * 3600;
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    let at = |h: f64| (h * HOUR_MS as f64) as i64;
    assert_eq!(board.observe(five_hour(10.0, reset, at(1.0)), at(1.0)), Told::default());
    // 20% over 1.5 h lasts 7.5 h: no forecast.
    assert_eq!(board.observe(five_hour(20.0, reset, at(1.5)), at(1.5)), Told::default());
    assert_eq!(board.current(at(1.5))[0].runs_out_at, None);
    // 70% over 2 h runs out 51 min later.
    let told = board.observe(five_hour(70.0, reset, at(2.0)), at(2.0));
    let out = told.runs_out.expect("told once").runs_out_at.expect("with its time");
    assert_eq!((out - 2 * 3600) / 60, 51);
    assert_eq!(board.current(at(2.0))[0].runs_out_at, Some(out));
    // Not told again in the same period, though it still runs out.
    let told = board.observe(five_hour(74.0, reset, at(2.1)), at(2.1));
    assert_eq!(told, Told::default());
    assert!(board.current(at(2.1))[0].runs_out_at.is_some());
    // At the wall the crossing says it, not a forecast.
    let told = board.observe(five_hour(100.0, reset, at(2.2)), at(2.2));
    assert_eq!(told.crossing.map(|c| c.fraction), Some(1.0));
    assert_eq!(told.runs_out, None);
}

#[test]
fn a_remembered_window_is_shown_and_what_held_is_not_told_again() {
    let reset = 5 * 3600;
    let mut first = Tracked::new(five_hour(10.0, reset, HOUR_MS));
    first.observe(five_hour(70.0, reset, 2 * HOUR_MS));
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    board.seed(first, 2 * HOUR_MS);
    let shown = board.current(2 * HOUR_MS);
    assert_eq!(shown.len(), 1);
    assert!(shown[0].runs_out_at.is_some(), "{shown:?}");
    // The forecast held when it was remembered: an earlier run told it.
    let told = board.observe(five_hour(72.0, reset, 2 * HOUR_MS + 1), 2 * HOUR_MS + 1);
    assert_eq!(told, Told::default());
}

#[test]
fn one_accounts_windows_are_never_shown_for_another() {
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    let mut work = five_hour(90.0, 1000, 1);
    work.account = Some("org:work".into());
    let mut home = five_hour(5.0, 1000, 2);
    home.account = Some("org:home".into());
    board.observe(work.clone(), 1);
    assert_eq!(board.current(1)[0].used_percent, 90.0);
    board.observe(home, 2);
    let shown = board.current(2);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0].account.as_deref(), Some("org:home"));
    // Told at start whose windows they are: another account's remembered one stays hidden.
    let mut board = LimitBoard::new(Lines::new(&[0.75, 0.9], true));
    board.use_account("anthropic", Some("org:home"));
    board.seed(Tracked::new(work), 1);
    assert!(board.current(1).is_empty());
    assert_eq!(board.account_in_use("anthropic"), Some("org:home"));
}

#[test]
fn the_fullest_window_wins_ties_to_the_shorter() {
    let mut week = five_hour(40.0, 0, 0);
    week.window = "seven_day".into();
    week.window_minutes = Some(10080);
    let five = five_hour(40.0, 0, 0);
    let limits = vec![week.clone(), five.clone()];
    assert_eq!(fullest(&limits).unwrap().window, "five_hour");
    week.used_percent = 41.0;
    assert_eq!(fullest(&[week, five]).unwrap().window, "seven_day");
    assert!(fullest(&[]).is_none());
}
