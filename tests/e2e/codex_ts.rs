//! codex-acp 2.6.0 (`@agentclientprotocol/codex-acp`, TypeScript, the Codex app server from
//! `@openai/codex` underneath) against the OpenAI Responses mock.
//!
//! What it sends by itself (`codex_ts_direct` pins this down): `agentInfo.name`
//! `@agentclientprotocol/codex-acp` (acp-usage reads it as Codex), `loadSession` and
//! `sessionCapabilities.resume`. One `usage_update` per model call (`thread/tokenUsage/updated`),
//! `used` = that call's `totalTokens` (input incl. cached + output incl. reasoning), `size` = 95%
//! of the model's window (258,400 for gpt-5.2-codex); never a `cost`. Nothing on `session/new`;
//! on `session/load` and `session/resume`, one `usage_update` after the response with the
//! thread's last call (its rollout's last `token_count`); the load replay carries no usage.
//! The `session/prompt` result's `usage` is the sum of the turn's main calls (input without the
//! cache, `cachedReadTokens`, `thoughtTokens` = reasoning), repeated in `_meta.quota.token_count`
//! with Codex's camelCase keys (`inputTokens` without the cache, `cachedInputTokens`,
//! `reasoningOutputTokens`) and per model in `_meta.quota.model_usage`. Its title call (another
//! model, `gpt-5.6-luna`, no tools) is in none of these and in no rollout.

use acp_usage_tests::agents::{self, Agent};
use acp_usage_tests::lab::{Lab, Turn};
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use serde_json::Value;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::CodexTs;
/// gpt-5.2-codex: 272,000 × 95%.
const WINDOW: u64 = 258_400;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: true,
    auxiliary_in_part: false,
    tap: false,
};

/// The adapter's `usage_update` for one call: `used` = the call's total, `size` = the window, no
/// cost.
fn check_update(checks: &mut Checks, phase: &str, update: &Value, call: Option<&Usage>) {
    let want = call.map(Usage::total);
    checks.check(support::u64_at(update, "used") == want, || {
        format!("{phase}: codex-ts used should be the call's total {want:?}: {update}")
    });
    checks.check(support::u64_at(update, "size") == Some(WINDOW), || {
        format!("{phase}: codex-ts size {update}")
    });
    checks.check(update.get("cost").is_none(), || {
        format!("{phase}: codex-ts now sends a cost: {update}")
    });
}

/// A Codex token count (`_meta.quota`'s keys) against `usage`.
fn check_token_count(checks: &mut Checks, phase: &str, count: &Value, usage: &Usage) {
    let want = [
        ("totalTokens", usage.total()),
        ("inputTokens", usage.input - usage.cache_read),
        ("cachedInputTokens", usage.cache_read),
        ("cacheWriteInputTokens", 0),
        ("outputTokens", usage.output),
        ("reasoningOutputTokens", usage.thought),
    ];
    for (key, want) in want {
        checks.check(support::u64_at(count, key) == Some(want), || {
            format!("{phase}: _meta.quota token_count.{key} should be {want}: {count}")
        });
    }
}

/// One usage_update per main call, in call order; the result's `usage` (and `_meta.quota`) is
/// the sum of the turn's main calls, the title call left out.
fn check_agent_turn(checks: &mut Checks, phase: &str, turn: &Turn) {
    let calls = turn.main_calls();
    let updates = turn.usage_updates();
    checks.check(updates.len() == calls.len(), || {
        format!(
            "{phase}: {} usage_update(s) for {} call(s): {updates:?}",
            updates.len(),
            calls.len()
        )
    });
    for (update, call) in updates.iter().zip(&calls) {
        check_update(checks, phase, update, call.usage.as_ref());
    }
    let main: Vec<&Call> = calls.clone();
    let sum = support::sum(&main);
    let usage = &turn.result["usage"];
    let want = [
        ("totalTokens", sum.total()),
        ("inputTokens", sum.input - sum.cache_read),
        ("cachedReadTokens", sum.cache_read),
        ("cachedWriteTokens", 0),
        ("outputTokens", sum.output),
        ("thoughtTokens", sum.thought),
    ];
    for (key, want) in want {
        checks.check(support::u64_at(usage, key) == Some(want), || {
            format!(
                "{phase}: codex-ts usage.{key} should be the turn's main calls' {want}: {}",
                turn.result
            )
        });
    }
    let quota = &turn.result["_meta"]["quota"];
    check_token_count(checks, phase, &quota["token_count"], &sum);
    let models = quota["model_usage"].as_array().cloned().unwrap_or_default();
    checks.check(models.len() == 1 && models[0]["model"] == "gpt-5.2-codex", || {
        format!("{phase}: _meta.quota.model_usage should be gpt-5.2-codex alone: {quota}")
    });
    if let Some(row) = models.first() {
        check_token_count(checks, phase, &row["token_count"], &sum);
    }
    checks.check(turn.result.get("cost").is_none() && quota.get("cost").is_none(), || {
        format!("{phase}: codex-ts now sends a cost: {}", turn.result)
    });
}

fn last_main(calls: &[Call]) -> Option<Usage> {
    calls.iter().rev().find(|call| call.kind == CallKind::Main).and_then(|call| call.usage)
}

#[test]
fn codex_ts_direct() {
    let history = flows::direct_history(AGENT).expect("direct codex-ts session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, updates_after_new, session_id, .. } = &history;
    checks.check(init["agentInfo"]["name"] == "@agentclientprotocol/codex-acp", || {
        format!("agentInfo: {init}")
    });
    checks.check(init["agentInfo"]["version"] == "2.6.0", || format!("agentInfo: {init}"));
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"]["resume"].is_object(),
        || format!("codex-ts should advertise loadSession and sessionCapabilities.resume: {init}"),
    );
    checks.check(
        !updates_after_new.iter().any(|update| update["sessionUpdate"] == "usage_update"),
        || "codex-ts sent a usage_update after session/new".to_owned(),
    );
    for (n, turn) in turns.iter().enumerate() {
        check_agent_turn(&mut checks, &format!("direct turn {}", n + 1), turn);
    }
    // The title call: another model, no tools, once per session.
    let aux: Vec<Call> =
        lab.mock.calls().into_iter().filter(|call| call.kind == CallKind::Auxiliary).collect();
    checks.check(aux.len() == 1 && aux[0].model.as_deref() != Some("gpt-5.2-codex"), || {
        format!("codex-ts should make one title call with another model: {aux:#?}")
    });
    let mut fixtures = Vec::new();
    for method in ["session/load", "session/resume"] {
        let last = last_main(&lab.mock.calls());
        // The adapter answers, then sends one `usage_update` with the thread's last main call.
        let (turn, transcript) =
            flows::reopen_direct_with(&mut checks, lab, session_id, method, |checks, updates| {
                checks.check(updates.len() == 1, || {
                    format!(
                        "{method}: codex-ts should send one usage_update on reopening: {updates:?}"
                    )
                });
                for update in updates {
                    check_update(checks, &format!("on {method}"), update, last.as_ref());
                }
            });
        check_agent_turn(&mut checks, &format!("direct turn after {method}"), &turn);
        fixtures.push(transcript);
    }
    support::save_fixture("codex-ts-direct.jsonl", &history.transcript);
    support::save_fixture("codex-ts-direct-load.jsonl", &fixtures[0]);
    support::save_fixture("codex-ts-direct-resume.jsonl", &fixtures[1]);
    support::save_fixture("codex-ts-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

#[test]
fn codex_ts_relay_turns() {
    flows::relay_turns(EXPECT);
}

#[test]
fn codex_ts_relay_load_and_resume() {
    flows::relay_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn codex_ts_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// Without the transcript (`--transcripts off`), the session goes on with what the agent reports
/// over ACP: each call's total (`used`) and 2.6.0's per-turn `usage` (the turn's sum) are exact;
/// the checks demand the exact totals only, as for the zed adapter.
#[test]
fn codex_ts_relay_turns_without_transcripts() {
    let expect = Expect { known: Known::Total, turn_exact: false, ..EXPECT };
    flows::relay_turns_with(expect, &["--transcripts", "off"]);
}

#[test]
fn codex_ts_relay_turns_tapped() {
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}

/// Codex's built-in `openai` provider (an API key, `openai_base_url` at the mock), whose calls
/// go over the Responses WebSocket, through the tap's tunnel: every turn's usage and the cost
/// equal what the mock billed, the session's warm-up (`generate: false`) included; the mock
/// saw the model calls over the WebSocket, so the tap declined no upgrade; after the last
/// result the editor's last figures cover every billed call. (The base URL is in `CODEX_CONFIG`
/// only, see `use_codex_builtin_openai`: the title thread, on the app server's own settings,
/// goes through the tap to OpenAI's public endpoint, which the tests cannot reach; it bills
/// nothing here. `codex_ts_title_thread_through_the_tap` has it billed.)
#[test]
fn codex_ts_relay_turns_tapped_over_websocket() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.mock.enable_websocket();
    let url = lab.mock.url();
    agents::use_codex_builtin_openai(&lab.scratch, &mut lab.spec, &url).expect("an API-key login");
    flows::relay_turns_in(EXPECT.tapped(), &lab, &[]);

    let calls = lab.mock.calls();
    let main: Vec<&Call> = calls.iter().filter(|c| c.kind == CallKind::Main).collect();
    assert!(!main.is_empty(), "no model call reached the mock: {calls:#?}");
    let over_http: Vec<&Call> = main.iter().copied().filter(|c| !c.websocket).collect();
    assert!(over_http.is_empty(), "model calls over HTTP, not the WebSocket: {over_http:#?}");
    let warmups: Vec<&Call> = calls.iter().filter(|c| c.kind == CallKind::Warmup).collect();
    assert!(!warmups.is_empty(), "Codex sent no warm-up over the WebSocket: {calls:#?}");
    for call in calls.iter().filter(|c| c.kind == CallKind::Auxiliary) {
        eprintln!(
            "codex-ts title call over {}",
            if call.websocket { "the WebSocket" } else { "HTTP" }
        );
    }
    // The tap logs a declined upgrade at debug level (the tests' relay log level), with its
    // route. The title thread's route goes to OpenAI's public endpoint, through the tests' dead
    // proxy: that upgrade is declined, as it must be.
    for entry in std::fs::read_dir(lab.scratch.root()).expect("the scratch directory").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains("-relay-") && name.ends_with(".stderr") {
            let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let declined = log
                .lines()
                .filter(|l| l.contains("(426)") && !l.contains("codex-openai-server"))
                .collect::<Vec<_>>();
            assert!(declined.is_empty(), "the tap declined an upgrade: {name}: {declined:?}");
        }
    }
}

/// Codex's built-in provider with `openai_base_url` in `config.toml`, where the adapter's title
/// thread (an ephemeral thread on the app server's own settings, not the adapter's
/// `CODEX_CONFIG`) reads it: acp-usage points the app server itself, so the title thread's
/// warm-up and title call (`gpt-5.6-luna`) go through the tap too. Every call the mock served is
/// in the editor's last figures and in the ledger (`report --json`), with the mock's figures.
#[test]
fn codex_ts_title_thread_through_the_tap() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.mock.enable_websocket();
    let url = lab.mock.url();
    let home = lab.scratch.home().join(".codex");
    let config = format!("model = \"{}\"\nopenai_base_url = \"{url}/v1\"\n", agents::CODEX_MODEL);
    std::fs::write(home.join("config.toml"), config).expect("write config.toml");
    let auth = serde_json::json!({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-mock-key"});
    std::fs::write(home.join("auth.json"), auth.to_string()).expect("write auth.json");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());

    // Two turns, every figure checked against the mock's; the title call comes after the
    // first result and is counted between turns.
    flows::relay_turns_in(EXPECT.tapped(), &lab, &[]);

    let calls = lab.mock.calls();
    let billed: Vec<&Call> = calls.iter().filter(|c| c.kind.is_billed()).collect();
    let title: Vec<&Call> =
        billed.iter().copied().filter(|c| c.model.as_deref() == Some(TITLE_MODEL)).collect();
    assert!(
        title.iter().any(|c| c.kind == CallKind::Auxiliary),
        "the title thread's call did not reach the mock: {calls:#?}"
    );
    // The relay has ended (the client is gone): the ledger holds the session's final figures.
    let report = support::on_ledger(&ledger, &["report", "--json", "--no-import"]);
    let report: Value = serde_json::from_str(&report).expect("report --json");
    let totals = &report["totals"];
    let want = support::sum(&billed);
    let got = (
        totals["calls"].as_u64(),
        totals["inputTokens"].as_u64(),
        totals["cachedReadTokens"].as_u64(),
        totals["outputTokens"].as_u64(),
    );
    assert_eq!(
        got,
        (Some(billed.len() as u64), Some(want.input), Some(want.cache_read), Some(want.output)),
        "the ledger's totals {totals} should be every billed call the mock served ({} calls, \
         {} of them the title thread's): {want:?}",
        billed.len(),
        title.len()
    );
    // The title thread's calls one by one, with the mock's figures.
    let store = acp_usage::sinks::ledger::Store::open_read(&ledger).expect("the ledger");
    let rows: Vec<(u64, u64, u64, String)> = store
        .conn()
        .prepare("SELECT input, cache_read, output, source FROM calls WHERE model = ?1 ORDER BY id")
        .and_then(|mut q| {
            q.query_map([TITLE_MODEL], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                    r.get(3)?,
                ))
            })?
            .collect()
        })
        .expect("the title thread's calls");
    let mut want_rows: Vec<(u64, u64, u64, String)> = title
        .iter()
        .filter_map(|c| c.usage)
        .map(|u| (u.input, u.cache_read, u.output, "tap".to_owned()))
        .collect();
    let mut got_rows = rows.clone();
    want_rows.sort();
    got_rows.sort();
    assert_eq!(got_rows, want_rows, "the ledger's {TITLE_MODEL} calls vs the mock's");
    // The session's final cost: every billed call, the title model's too, at the catalog's
    // prices; the title model's calls alone as well, so a wrong price for it is named.
    let want_cost = support::catalog_cost(billed.iter().copied());
    let titles: Vec<&Call> =
        billed.iter().copied().filter(|c| c.model.as_deref() == Some(TITLE_MODEL)).collect();
    let want_title = support::catalog_cost(titles.iter().copied());
    let cost_of = |sql: &str| -> f64 {
        store.conn().query_row(sql, [TITLE_MODEL], |r| r.get(0)).expect("a cost")
    };
    let title_cost = cost_of("SELECT COALESCE(SUM(cost), 0) FROM calls WHERE model = ?1");
    assert!(
        support::close(title_cost, want_title),
        "the ledger's cost of the {TITLE_MODEL} calls {title_cost} vs the catalog's {want_title}"
    );
    let total = totals["cost"].as_f64().unwrap_or(f64::NAN);
    assert!(
        support::close(total, want_cost),
        "the final cost {total} vs the catalog's {want_cost} for every billed call: {totals}"
    );
}

/// The model codex-acp 2.6 titles sessions with.
const TITLE_MODEL: &str = "gpt-5.6-luna";
