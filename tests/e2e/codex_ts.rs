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

/// Two turns, then the session reloaded and resumed in fresh processes (one launch for both).
#[test]
fn codex_ts_relay_turns_load_and_resume() {
    flows::relay_turns_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
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

/// How a test starts codex-acp: the ways users do, which acp-usage reads differently.
#[derive(Debug, Clone, Copy)]
enum Launch {
    /// The adapter's script (its `bin` entry) as the command.
    Direct,
    /// `sh -c "<node> <script> | tee <file>"`: a wrapper whose first word is no adapter.
    ShellPipe,
    /// `npm exec --prefix <dir> -- codex-acp`: the `bin` link of a prefix of its own.
    NpmExec,
    /// `npx --offline -- @agentclientprotocol/codex-acp@2.6.0`, from the npm cache
    /// `.ci/install-agents.sh` filled: the adapter's files are not named before it starts.
    Npx,
}

/// Codex's built-in provider with `openai_base_url` in `config.toml` at a second port of the
/// mock, where the adapter's title thread (an ephemeral thread on the app server's own
/// settings, not the adapter's `CODEX_CONFIG`, which sends the session's threads to the first
/// port) reads it, the adapter started as `launch` says: acp-usage, the adapter's `CODEX_PATH`,
/// finds the Codex it would have run when it starts it, so the title thread's warm-up and title
/// call (`gpt-5.6-luna`) go through the tap to that second port. Every figure is checked
/// against the mock's, the editor's last cost covers every billed call, and the ledger holds
/// each billed call the mock served, with the mock's figures, the second port's from the tap.
fn title_thread_through_the_tap(launch: Launch) {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.mock.enable_websocket();
    let url = lab.mock.url();
    agents::use_codex_builtin_openai(&lab.scratch, &mut lab.spec, &url).expect("an API-key login");
    let title_url = lab.mock.listen_also().expect("a second port");
    let config =
        format!("model = \"{}\"\nopenai_base_url = \"{title_url}/v1\"\n", agents::CODEX_MODEL);
    std::fs::write(lab.scratch.home().join(".codex/config.toml"), config).expect("config.toml");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    let tee_log = lab.scratch.path("agent-stdout.log");
    launch_as(&mut lab, launch, &tee_log);

    // Two turns, every figure checked against the mock's; the title call comes after the
    // first result and is counted between turns; after the last result the editor's cost
    // covers every billed call.
    flows::relay_turns_in(EXPECT.tapped(), &lab, &[]);

    if let Launch::ShellPipe = launch {
        let piped = std::fs::read_to_string(&tee_log).unwrap_or_default();
        assert!(piped.contains("\"jsonrpc\""), "nothing went through the pipe: {piped:?}");
    }
    let calls = lab.mock.calls();
    let billed: Vec<&Call> = calls.iter().filter(|c| c.kind.is_billed()).collect();
    let second: u16 = title_url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
    let title: Vec<&Call> =
        billed.iter().copied().filter(|c| c.model.as_deref() == Some(TITLE_MODEL)).collect();
    assert!(
        title.iter().any(|c| c.kind == CallKind::Auxiliary),
        "{launch:?}: the title thread's call did not reach the mock: {calls:#?}"
    );
    // The title thread and nothing else went to config.toml's port (its warm-up among them).
    let (on_second, on_first): (Vec<&Call>, Vec<&Call>) =
        billed.iter().copied().partition(|c| c.port == second);
    assert!(
        title.iter().all(|c| c.port == second) && on_second.len() > title.len(),
        "{launch:?}: the title thread's warm-up and call should be the calls on port {second}: \
         {on_second:#?}"
    );
    assert!(on_first.iter().all(|c| c.model.as_deref() != Some(TITLE_MODEL)), "{on_first:#?}");

    ledger_holds_every_billed_call(launch, &ledger, &billed, &title);
}

/// The relay has ended (the client is gone): the ledger holds the session's final figures, one
/// row per call of `billed` with the mock's figures, the title thread's (`title`) from the tap,
/// and their cost at the catalog's prices.
fn ledger_holds_every_billed_call(
    launch: Launch,
    ledger: &std::path::Path,
    billed: &[&Call],
    title: &[&Call],
) {
    let report = support::on_ledger(ledger, &["report", "--json", "--no-import"]);
    let report: Value = serde_json::from_str(&report).expect("report --json");
    let totals = &report["totals"];
    let store = acp_usage::sinks::ledger::Store::open_read(ledger).expect("the ledger");
    type Row = (String, u64, u64, u64, String);
    let rows: Vec<Row> = store
        .conn()
        .prepare("SELECT model, input, cache_read, output, source FROM calls ORDER BY id")
        .and_then(|mut q| {
            q.query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                    r.get::<_, i64>(3)? as u64,
                    r.get(4)?,
                ))
            })?
            .collect()
        })
        .expect("the ledger's calls");
    // Each billed call once, with the mock's figures (the session's threads' calls are in
    // Codex's rollout too, and count from whichever source reported them first).
    let figures = |r: &Row| (r.0.clone(), r.1, r.2, r.3);
    let mut got: Vec<_> = rows.iter().map(figures).collect();
    let mut want: Vec<_> = billed
        .iter()
        .map(|c| {
            let u = c.usage.unwrap_or_default();
            (c.model.clone().unwrap_or_default(), u.input, u.cache_read, u.output)
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "{launch:?}: the ledger's calls (model, input, cache read, output) should be every \
         billed call the mock served"
    );
    // The title call, which no rollout records, came through the tap.
    let title_rows: Vec<&Row> = rows.iter().filter(|r| r.0 == TITLE_MODEL).collect();
    assert!(
        title_rows.len() == title.len() && title_rows.iter().all(|r| r.4 == "tap"),
        "{launch:?}: the ledger's {TITLE_MODEL} calls should be the tap's: {title_rows:?}"
    );
    // The session's final cost: every billed call at the catalog's prices.
    let want_cost = support::catalog_cost(billed.iter().copied());
    let total = totals["cost"].as_f64().unwrap_or(f64::NAN);
    assert!(
        support::close(total, want_cost),
        "{launch:?}: the final cost {total} vs the catalog's {want_cost} for every billed call: \
         {totals}"
    );
}

/// Sets the lab's command to start the adapter as `launch` says (`tee_log`: where the shell
/// pipe copies the adapter's output).
fn launch_as(lab: &mut Lab, launch: Launch, tee_log: &std::path::Path) {
    let script = lab.spec.program.display().to_string();
    let cache = agents::agents_cache();
    // npm and npx stay offline and quiet (no update check, which would go to the registry).
    for (var, value) in [("npm_config_update_notifier", "false"), ("npm_config_fund", "false")] {
        lab.spec.set_env(var, value);
    }
    let (program, args): (&str, Vec<String>) = match launch {
        Launch::Direct => return,
        Launch::ShellPipe => {
            let node = agents::node_bin_dir().join("node");
            let line = format!("'{}' '{script}' | tee '{}'", node.display(), tee_log.display());
            ("sh", vec!["-c".into(), line])
        }
        Launch::NpmExec => {
            let prefix = cache.join("codex-ts");
            let bin = prefix.join("node_modules/.bin/codex-acp");
            assert!(bin.exists(), "{} is missing: run .ci/install-agents.sh", bin.display());
            let prefix = prefix.display().to_string();
            let words = ["exec", "--offline", "--prefix", &prefix, "--", "codex-acp"];
            ("npm", words.map(String::from).to_vec())
        }
        Launch::Npx => {
            let npx_cache = cache.join("npx-cache");
            assert!(
                npx_cache.join("_npx").is_dir(),
                "{} is not filled: run .ci/install-agents.sh",
                npx_cache.display()
            );
            let (package, version) = AGENT.package();
            let spec = format!("{package}@{version}");
            let npx_cache = npx_cache.display().to_string();
            let words = ["--offline", "--yes", "--cache", &npx_cache, "--", &spec];
            ("npx", words.map(String::from).to_vec())
        }
    };
    lab.spec.program = program.into();
    lab.spec.args = args;
}

#[test]
fn codex_ts_title_thread_through_the_tap_started_directly() {
    title_thread_through_the_tap(Launch::Direct);
}

#[test]
fn codex_ts_title_thread_through_the_tap_started_in_a_shell_pipe() {
    title_thread_through_the_tap(Launch::ShellPipe);
}

#[test]
fn codex_ts_title_thread_through_the_tap_started_by_npm_exec() {
    title_thread_through_the_tap(Launch::NpmExec);
}

#[test]
fn codex_ts_title_thread_through_the_tap_started_by_npx_offline() {
    title_thread_through_the_tap(Launch::Npx);
}

/// The model codex-acp 2.6 titles sessions with.
const TITLE_MODEL: &str = "gpt-5.6-luna";
