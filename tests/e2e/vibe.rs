//! Mistral Vibe 3.0.3 (`vibe-acp`, PyPI `mistral-vibe`, Python 3.12+ in its own venv) against
//! the mock's Mistral flavour of Chat Completions (`/mistral/v1`: usage always on the finishing
//! chunk, tool calls whole, as the `mistralai` SDK needs).
//!
//! What it sends by itself (`vibe_direct` pins this down; acp-usage's vibe profile relies on
//! it): `agentInfo.name` `@mistralai/mistral-vibe` (title `Mistral Vibe`), `loadSession` and no
//! advertised `resume` (it implements it all the same). A `usage_update` after each model call
//! (and repeated copies at a turn's edges, one before the `session/new` response, one on
//! `load`/`resume`), whose `used` is the last main call's prompt + completion, whose `size` is
//! its auto-compact threshold 202,144 (the model's window is 262,144), whose `cost` is its own
//! pricing of the session's cumulative counters (the catalog's prices for its default model),
//! and whose `_meta` carries those counters (`promptTokens`, `completionTokens`, `cachedTokens`).
//! The `session/prompt` result's `usage` is cumulative over the whole session, history included
//! after a reload. One side call per new session: the title, during the first turn, on the
//! active model, in no figure of Vibe's (only the tap sees it). Besides model calls, Vibe asks
//! `GET …/models/<id>` at every session open and `GET …/connectors/bootstrap` once (404 here).

use acp_usage_tests::agents::{Agent, VIBE_MODEL};
use acp_usage_tests::lab::{Lab, Turn, run_turn};
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use serde_json::Value;

use crate::flows::{self, Expect, History};
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Vibe;
/// `mistral-vibe-cli-latest`'s window (the catalog's `mistral/…` entry, Vibe's own table's).
const WINDOW: u64 = 262_144;
/// What Vibe reports as `size`: the window less its auto-compact margin, where it compacts.
const VIBE_THRESHOLD: u64 = 202_144;

const EXPECT: Expect = Expect {
    agent: AGENT,
    size: WINDOW,
    // The model option names the model from session/new on.
    size_on_new: Some(WINDOW),
    known: Known::Everything,
    turn_exact: true,
    // Not advertised, implemented.
    resume: true,
    // The session title: in no figure Vibe reports.
    unrecorded_auxiliary: true,
    auxiliary_in_part: false,
    tap: false,
};

/// Vibe's cumulative `usage` in a prompt result: every main call of the session so far.
fn check_cumulative(checks: &mut Checks, phase: &str, result: &Value, sum: &Usage) {
    let usage = &result["usage"];
    let want = [
        ("inputTokens", Some(sum.input)),
        ("outputTokens", Some(sum.output)),
        ("totalTokens", Some(sum.total())),
        // Left out while 0.
        ("cachedReadTokens", (sum.cache_read > 0).then_some(sum.cache_read)),
    ];
    for (key, want) in want {
        checks.check(support::u64_at(usage, key) == want, || {
            format!("{phase}: vibe usage.{key} should be {want:?} (cumulative): {result}")
        });
    }
}

/// The last `usage_update` of a turn (or of a reopening): `used` the last main call's prompt +
/// completion, `size` the compaction threshold, `cost` the catalog price of every main call so
/// far, `_meta` the session's counters.
fn check_update(checks: &mut Checks, phase: &str, update: &Value, last: &Usage, main: &[Call]) {
    let sum: Usage = main.iter().filter_map(|c| c.usage).sum();
    checks.check(support::u64_at(update, "used") == Some(last.in_context()), || {
        format!("{phase}: vibe used should be {}: {update}", last.in_context())
    });
    checks.check(support::u64_at(update, "size") == Some(VIBE_THRESHOLD), || {
        format!("{phase}: vibe size should be its threshold {VIBE_THRESHOLD}: {update}")
    });
    let want = support::catalog_cost(main.iter());
    let got = update["cost"]["amount"].as_f64().unwrap_or(f64::NAN);
    checks.check(support::close(got, want), || {
        format!("{phase}: vibe cost {got} should be the main calls' {want}: {update}")
    });
    let meta = &update["_meta"];
    let counters = [
        ("promptTokens", sum.input),
        ("completionTokens", sum.output),
        ("cachedTokens", sum.cache_read),
        ("totalTokens", sum.total()),
    ];
    for (key, want) in counters {
        checks.check(support::u64_at(meta, key) == Some(want), || {
            format!("{phase}: vibe _meta.{key} should be {want}: {update}")
        });
    }
}

/// Every `usage_update` of the turn has the threshold as `size`; the last one is checked.
fn check_turn(checks: &mut Checks, phase: &str, turn: &Turn, main: &[Call]) {
    let updates = turn.usage_updates();
    checks.check(updates.len() > turn.main_calls().len(), || {
        format!("{phase}: vibe sent {} usage_update(s)", updates.len())
    });
    checks
        .check(updates.iter().all(|u| support::u64_at(u, "size") == Some(VIBE_THRESHOLD)), || {
            format!("{phase}: a vibe size other than {VIBE_THRESHOLD}: {updates:?}")
        });
    let last = turn.main_calls().last().and_then(|c| c.usage).unwrap_or_default();
    match updates.last() {
        Some(update) => check_update(checks, phase, update, &last, main),
        None => checks.fail(format!("{phase}: no usage_update")),
    }
    let sum: Usage = main.iter().filter_map(|c| c.usage).sum();
    check_cumulative(checks, phase, &turn.result, &sum);
}

/// What the mock saw of Vibe: its model calls on the Mistral route without `stream_options`,
/// from the `mistralai` SDK; one title call (no tools, the active model); the catalogue and
/// connectors lookups.
fn check_requests(checks: &mut Checks, calls: &[Call]) {
    let model_calls: Vec<&Call> = calls.iter().filter(|c| c.kind.is_billed()).collect();
    for call in &model_calls {
        checks.check(
            call.target == "/mistral/v1/chat/completions"
                && call.model.as_deref() == Some(VIBE_MODEL)
                && call.streamed
                && call.request_body.get("stream_options").is_none()
                && call
                    .user_agent
                    .as_deref()
                    .is_some_and(|ua| ua.starts_with("mistral-client-python/")),
            || format!("vibe model call: {} {:?} {:?}", call.target, call.model, call.user_agent),
        );
        checks.check(call.native_usage.is_some(), || {
            format!("the mock did not send vibe its usage: {}", call.target)
        });
    }
    let titles: Vec<&&Call> =
        model_calls.iter().filter(|c| c.kind == CallKind::Auxiliary).collect();
    checks.check(titles.len() == 1 && titles[0].declared_tools.is_empty(), || {
        format!("vibe should make one title call without tools: {titles:?}")
    });
    let unhandled: Vec<&str> =
        calls.iter().filter(|c| c.kind == CallKind::Unhandled).map(|c| c.target.as_str()).collect();
    let catalogue = format!("/mistral/v1/models/{VIBE_MODEL}");
    checks.check(unhandled.iter().any(|t| *t == catalogue), || {
        format!("vibe's catalogue lookup {catalogue} not seen: {unhandled:?}")
    });
    checks
        .check(unhandled.iter().any(|t| t.starts_with("/mistral/v1/connectors/bootstrap")), || {
            format!("vibe's connectors lookup not seen: {unhandled:?}")
        });
}

fn main_calls(lab: &Lab) -> Vec<Call> {
    lab.mock.calls().into_iter().filter(|c| c.kind == CallKind::Main).collect()
}

#[test]
fn vibe_direct() {
    let history = flows::direct_history(AGENT).expect("direct vibe session");
    let mut checks = Checks::new(AGENT);
    let History { init, turns, lab, session_id, .. } = &history;
    let info = &init["agentInfo"];
    checks.check(
        info["name"] == "@mistralai/mistral-vibe"
            && info["title"] == "Mistral Vibe"
            && info["version"] == "3.0.3",
        || format!("agentInfo: {init}"),
    );
    let caps = &init["agentCapabilities"];
    checks.check(
        caps["loadSession"] == true && caps["sessionCapabilities"].get("resume").is_none(),
        || format!("vibe should advertise loadSession and no resume: {init}"),
    );
    let mut main = Vec::new();
    let mut seen = 0;
    for (n, turn) in turns.iter().enumerate() {
        let calls: Vec<Call> = turn.main_calls().into_iter().cloned().collect();
        seen += calls.len();
        main.extend(calls);
        check_turn(&mut checks, &format!("direct turn {}", n + 1), turn, &main);
    }
    checks.check(main_calls(lab).len() == seen, || "main calls outside the turns".to_owned());
    check_requests(&mut checks, &lab.mock.calls());
    // The title is in no figure: the cost above is the main calls' alone.
    let title_cost =
        support::catalog_cost(lab.mock.calls().iter().filter(|c| c.kind == CallKind::Auxiliary));
    eprintln!("vibe's title call costs {title_cost:?}, in no figure of its own");

    // A new process each: on reopening one usage_update restored from its store, then a turn
    // whose `usage` continues the session's counters.
    for method in ["session/load", "session/resume"] {
        let mark = lab.mock.mark();
        let restored = main.clone();
        let (turn, transcript) =
            flows::reopen_direct_with(&mut checks, lab, session_id, method, |checks, updates| {
                let last = restored.last().and_then(|c| c.usage).unwrap_or_default();
                match updates.last() {
                    Some(update) => check_update(checks, method, update, &last, &restored),
                    None => checks.fail(format!("vibe sent no usage_update on {method}")),
                }
            });
        main.extend(turn.main_calls().into_iter().cloned());
        check_turn(&mut checks, &format!("direct turn after {method}"), &turn, &main);
        let titles = lab.mock.calls_since(mark);
        checks.check(titles.iter().all(|c| c.kind != CallKind::Auxiliary), || {
            format!("vibe made a side call after {method}: {titles:?}")
        });
        let name = method.trim_start_matches("session/");
        support::save_fixture(&format!("vibe-direct-{name}.jsonl"), &transcript);
    }
    support::save_fixture("vibe-direct.jsonl", &history.transcript);
    support::save_fixture("vibe-direct.mock.jsonl", &support::calls_jsonl(&lab.mock.calls()));
    checks.finish();
}

#[test]
fn vibe_relay_turns() {
    // Three turns: the third's figures are what Vibe's cumulative count grew by after a turn of
    // two calls.
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    flows::relay_turns_then(EXPECT, &lab, &[], 1);
}

#[test]
fn vibe_relay_load_and_resume() {
    // Vibe's counters survive a reload: the first turn after reopening is that turn alone.
    flows::relay_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn vibe_relay_turns_tapped() {
    // Pointed through VIBE_PROVIDERS (the config's provider entry, api_base changed): the tap
    // sees the title call too, and forwards the catalogue and connectors lookups.
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    flows::relay_turns_then(EXPECT.tapped(), &lab, &[], 1);
    let calls = lab.mock.calls();
    let targets: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert!(
        calls
            .iter()
            .filter(|c| c.kind.is_billed())
            .all(|c| c.target == "/mistral/v1/chat/completions"),
        "{targets:?}"
    );
    assert!(targets.contains(&format!("/mistral/v1/models/{VIBE_MODEL}").as_str()), "{targets:?}");
    assert_eq!(calls.iter().filter(|c| c.kind == CallKind::Auxiliary).count(), 1, "{targets:?}");
}

#[test]
fn vibe_relay_names_the_title_it_cannot_see() {
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let mut checks = Checks::new(AGENT);
    for (tap, args) in [(false, &["--tap", "off"][..]), (true, &[][..])] {
        let client = lab.relayed_with(args).expect("relay");
        client.initialize().expect("initialize");
        let new = client.new_session(&lab.scratch.work()).expect("session/new");
        let session = flows::session_id(&new).expect("session id");
        let mark = lab.mock.mark();
        let turn = run_turn(&client, &lab.mock, &session, flows::PLAIN_PROMPT).expect("turn");
        // The title may end after the result: wait for it, then for the update that follows.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let titled = || lab.mock.calls_since(mark).iter().any(|c| c.kind == CallKind::Auxiliary);
        while std::time::Instant::now() < deadline && !titled() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // Without the title, what follows would check a session without the call it is about.
        checks.check(titled(), || "no title call within 10 s of the result".to_owned());
        // Through the tap the title is counted once it ends, and an update says so: waited
        // for (up to 10 s). Without the tap no source sees it, and nothing follows.
        if tap {
            let billed = lab.mock.billed_since(mark);
            let want = support::catalog_cost(billed.iter());
            support::wait_for_last_update(&client, std::time::Duration::from_secs(10), |last| {
                let got = last.and_then(|l| l["cost"]["amount"].as_f64());
                got.is_some_and(|got| support::close(got, want))
            });
        }
        let before = support::usage_update_before_result(&client).unwrap_or_default();
        let unrecorded = &before["_meta"]["acpUsage"]["cost"]["unrecordedSideCalls"];
        let phase = if tap { "tapped" } else { "untapped" };
        let calls = lab.mock.calls_since(mark);
        let billed: Vec<&Call> = calls.iter().filter(|c| c.kind.is_billed()).collect();
        let main: Vec<&Call> =
            billed.iter().copied().filter(|c| c.kind == CallKind::Main).collect();
        let updates = client.updates_since(0, "usage_update");
        let last = updates.last().cloned().unwrap_or_default();
        let got = last["cost"]["amount"].as_f64().unwrap_or(f64::NAN);
        if tap {
            checks.check(unrecorded.is_null(), || format!("{phase}: {before}"));
            // Every billed call, the title included, once it was made.
            let want = support::catalog_cost(billed.iter().copied());
            checks.check(support::close(got, want), || {
                format!("{phase}: the last cost {got} should cover the title too ({want}): {last}")
            });
        } else {
            checks.check(unrecorded == &serde_json::json!(["session title"]), || {
                format!("{phase}: the title should be named as unrecorded: {before}")
            });
            let want = support::catalog_cost(main.iter().copied());
            checks.check(support::close(got, want), || {
                format!("{phase}: the cost {got} should be the main calls' {want}: {last}")
            });
        }
        checks.check(turn.result["usage"]["_meta"].is_object(), || {
            format!("{phase}: the agent's own usage should be kept in _meta: {}", turn.result)
        });
    }
    checks.finish();
}

#[test]
fn vibe_relay_reopen_unseen() {
    // A session acp-usage never saw, loaded through the relay. Vibe's restored counters are the
    // base of the next turn's growth: that turn counts its own call, not the history. The
    // history's cost is Vibe's own (the catalog's prices of its main calls, no title): a floor,
    // marked partial; its token breakdown is in no record acp-usage reads.
    let history = flows::direct_history(AGENT).expect("a session made directly");
    let lab = &history.lab;
    let mut checks = Checks::new(AGENT);
    let mut main = main_calls(lab);
    let client = lab.relayed().expect("relay");
    let response = flows::reopen(&client, "session/load", &history.session_id, &lab.scratch.work())
        .expect("session/load");
    checks.check(response.get("result").is_some(), || format!("session/load: {response}"));
    let id = support::last_request_id(&client, "session/load");
    let update = support::update_after_response(&client, &id, &history.session_id)
        .expect("a usage_update after session/load");
    let last = main.last().and_then(|c| c.usage).unwrap_or_default();
    let cost = |update: &Value| update["cost"]["amount"].as_f64().unwrap_or(f64::NAN);
    let want = support::catalog_cost(main.iter());
    checks.check(
        support::u64_at(&update, "used") == Some(last.in_context())
            && support::u64_at(&update, "size") == Some(WINDOW)
            && support::close(cost(&update), want)
            && update["_meta"]["acpUsage"]["cost"]["partial"] == true,
        || {
            format!(
                "after session/load: used {}, size {WINDOW}, cost {want} (partial): {update}",
                last.in_context()
            )
        },
    );
    let turn = run_turn(&client, &lab.mock, &history.session_id, flows::PLAIN_PROMPT)
        .expect("turn after session/load");
    let calls: Vec<&Call> = turn.main_calls();
    let served = support::sum(&calls);
    checks.turn_usage("turn after session/load", &turn.result["usage"], served, Known::Everything);
    checks.check(turn.result["usage"]["_meta"]["acpUsage"]["exact"] == true, || {
        format!("turn after session/load: exact usage: {}", turn.result)
    });
    main.extend(calls.into_iter().cloned());
    let update = support::usage_update_before_result(&client).unwrap_or_default();
    let last = main.last().and_then(|c| c.usage).unwrap_or_default();
    let want = support::catalog_cost(main.iter());
    checks.check(
        support::u64_at(&update, "used") == Some(last.in_context())
            && support::u64_at(&update, "size") == Some(WINDOW)
            && support::close(cost(&update), want),
        || format!("turn after session/load: used {}, cost {want}: {update}", last.in_context()),
    );
    drop(client);
    checks.finish();
}

#[test]
fn vibe_relay_load_and_resume_tapped() {
    // Through the tap in every process: the reopened processes' catalogue lookups pass, their
    // turns are the tap's, the history's cost (the title included) carried from the ledger.
    flows::relay_load_resume(EXPECT.tapped(), Some(WINDOW), Some(WINDOW));
}

/// Whether a call is Vibe's probe of a model: one token, asked of `ping`.
fn is_probe(call: &Call) -> bool {
    call.request_body["max_tokens"] == 1 && call.declared_tools.is_empty()
}

/// One session with the smart-approve agent (its classifier is a utility feature, so Vibe
/// probes whether its fast model is served at session open), one turn, and the title call that
/// follows. The mock's calls of that session, and the last `usage_update`'s cost: direct, once
/// Vibe announced the title (`session_info_update`, after the title call); relayed, once an
/// update's cost covers every billed call the mock served (the tap sees them all).
fn probed_session(lab: &Lab, relayed: bool) -> (Vec<Call>, f64) {
    let mark = lab.mock.mark();
    let client = if relayed { lab.relayed() } else { lab.direct() }.expect("vibe");
    client.initialize().expect("initialize");
    let new = client.new_session(&lab.scratch.work()).expect("session/new");
    let session = flows::session_id(&new).expect("session id");
    run_turn(&client, &lab.mock, &session, flows::PLAIN_PROMPT).expect("turn");
    let cost = |line: &acp_usage_tests::client::Line| {
        let update = line.session_update()?;
        (update["sessionUpdate"] == "usage_update").then(|| update["cost"]["amount"].as_f64())?
    };
    let titled =
        |calls: &[Call]| calls.iter().any(|c| c.kind == CallKind::Auxiliary && !is_probe(c));
    let waited = client.wait_for_line(0, std::time::Duration::from_secs(30), |line| {
        let calls = lab.mock.calls_since(mark);
        if !relayed {
            let update = line.session_update();
            return update.is_some_and(|u| u["sessionUpdate"] == "session_info_update")
                && titled(&calls);
        }
        let want = support::catalog_cost(calls.iter().filter(|c| c.kind.is_billed()));
        titled(&calls) && cost(line).is_some_and(|got| support::close(got, want))
    });
    let updates = client.updates_since(0, "usage_update");
    let last = updates.last().and_then(|u| u["cost"]["amount"].as_f64()).unwrap_or(f64::NAN);
    // Not coming is a failure: the checks after it would compare with a session half done.
    if let Err(err) = waited {
        panic!("vibe: no title and update to cover it within 30 s: {err:#}");
    }
    (lab.mock.calls_since(mark), last)
}

#[test]
fn vibe_probe_and_title_same_through_the_tap() {
    // Vibe 3.0.3 titles on its active model (or `[utility_models] title`), never on the probed
    // fast model: that one serves the smart-approve classifier and worktree names. The probe is
    // a one-token completion at session open, cached by `api_base`: the tap's URL is new every
    // run, so a tapped session probes every time (through the tap, counted) where an untapped
    // one would reuse the verdict.
    let lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let config = lab.scratch.home().join(".vibe/config.toml");
    let text = std::fs::read_to_string(&config).expect("vibe config");
    std::fs::write(&config, format!("smart_approve_default = true\n{text}")).expect("config");
    let mut checks = Checks::new(AGENT);
    let (direct, _) = probed_session(&lab, false);
    // The direct run cached its verdict for the mock's URL; the tapped run asks anew either way.
    let (tapped, cost) = probed_session(&lab, true);
    let probes = |calls: &[Call]| -> Vec<Call> {
        calls.iter().filter(|c| c.kind == CallKind::Auxiliary && is_probe(c)).cloned().collect()
    };
    let titles = |calls: &[Call]| -> Vec<Option<String>> {
        let titles = calls.iter().filter(|c| c.kind == CallKind::Auxiliary && !is_probe(c));
        titles.map(|c| c.model.clone()).collect()
    };
    let (d, t) = (probes(&direct), probes(&tapped));
    checks.check(
        d.len() == 1 && t.len() == 1 && d[0].model.as_deref() == Some("mistral-vibe-cli-fast"),
        || format!("one probe of the fast model each: {d:?} / {t:?}"),
    );
    if let (Some(d), Some(t)) = (d.first(), t.first()) {
        checks.check(d.target == t.target && d.request_bytes == t.request_bytes, || {
            format!("the probe changed through the tap: {} / {}", d.target, t.target)
        });
    }
    checks.check(
        titles(&direct) == [Some(VIBE_MODEL.to_owned())] && titles(&tapped) == titles(&direct),
        || format!("the title's model: {:?} direct, {:?} tapped", titles(&direct), titles(&tapped)),
    );
    // Every billed call of the tapped session (probe, main calls, title) is in the cost.
    let want = support::catalog_cost(tapped.iter().filter(|c| c.kind.is_billed()));
    checks.check(support::close(cost, want), || {
        format!("tapped cost {cost} should be the served calls' {want}")
    });
    checks.finish();
}
