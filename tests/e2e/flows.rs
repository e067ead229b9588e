//! The session flows every agent goes through, directly and behind the relay. Agent files
//! (`claude.rs`, `codex.rs`, `gemini.rs`) call these with what to expect of their agent.

use std::path::Path;
use std::time::Duration;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::{AcpClient, Dir, Line};
use acp_usage_tests::lab::{Lab, Turn, run_turn, run_turn_from};
use acp_usage_tests::mock_llm::{Call, CallKind, Script};
use serde_json::{Value, json};

use crate::support::{self, Checks, Known, Slack};

pub const PLAIN_PROMPT: &str = "Say hi.";
pub const TOOL_PROMPT: &str = "Look at the project files and tell me what is there.";

/// What to expect of an agent behind the relay.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub agent: Agent,
    /// The effective window after the first turn.
    pub size: u64,
    /// The window expected right after `session/new`, when the relay can know it then.
    pub size_on_new: Option<u64>,
    /// What the agent reports per turn, i.e. what must be exact even in an estimate.
    pub known: Known,
    /// The per-turn usage must be marked exact (the agent reports it completely).
    pub turn_exact: bool,
    /// `sessionCapabilities.resume`.
    pub resume: bool,
    /// The agent's auxiliary calls (a title generated with another model) are in no record of
    /// its own, so acp-usage cannot count them without the API tap: they are left out of what
    /// the checks expect (and counted in the figures table as the known gap).
    pub unrecorded_auxiliary: bool,
    /// The agent's auxiliary calls are seen only in part (Claude Code's titles: its per-model
    /// counts show them, except on a reopened process's first turn): the figures must cover
    /// every other call exactly and may include some or all of these ([`support::Slack`]).
    pub auxiliary_in_part: bool,
    /// The relay runs with `--tap`: every billed call is seen, and the figures come from the
    /// tap.
    pub tap: bool,
}

impl Expect {
    /// The relay options this expectation needs.
    pub fn relay_args(&self) -> &'static [&'static str] {
        // The tap is on by default: an expectation without it turns it off.
        if self.tap { &[] } else { &["--tap", "off"] }
    }

    /// What to expect with `--tap`: every billed call counted, side calls included, exactly.
    pub const fn tapped(self) -> Expect {
        Expect {
            known: Known::Everything,
            turn_exact: true,
            unrecorded_auxiliary: false,
            auxiliary_in_part: false,
            tap: true,
            ..self
        }
    }

    /// With [`Expect::auxiliary_in_part`]: the turn's and the session's calls without the
    /// auxiliary ones, which become the checks' slack. With [`Expect::tap`]: the same for the
    /// auxiliary calls and warm-ups the agent started after the turn's last main call (qwen's
    /// prompt suggestion as it writes its result, codex-acp's title thread), or before its first
    /// (the previous turn's, late; Codex's session warm-up).
    /// Such a call may finish before or after the result passes the relay, so the relay counts
    /// it in the turn or at once after it, while the mock saw it before the client read the
    /// result. Otherwise the calls as they are.
    fn set_slack<'a>(
        &self,
        checks: &mut Checks,
        turn: Vec<&'a Call>,
        session: &[Call],
    ) -> (Vec<&'a Call>, Vec<Call>) {
        if self.tap {
            let mains = || turn.iter().filter(|c| c.kind == CallKind::Main).map(|c| c.seq);
            let (first_main, last_main) = (mains().min(), mains().max());
            // Leading too: a side call the agent started after the previous result (Claude's
            // prompt suggestion) that reached the mock after the client sent this prompt may
            // have ended before or after the relay saw the prompt.
            // Warm-ups alike: Codex's session warm-up may end as the first prompt goes out, and
            // codex-acp's title thread starts with one as the turn ends.
            let trailing = |c: &Call| {
                matches!(c.kind, CallKind::Auxiliary | CallKind::Warmup)
                    && (last_main.is_some_and(|last| c.seq > last)
                        || first_main.is_some_and(|first| c.seq < first))
            };
            let late: Vec<&Call> = turn.iter().copied().filter(|c| trailing(c)).collect();
            let late_seqs: Vec<usize> = late.iter().map(|c| c.seq).collect();
            checks.slack = Slack {
                turn: support::sum(&late),
                session: support::sum(&late),
                cost: support::catalog_cost(late.iter().copied()),
            };
            let turn = turn.into_iter().filter(|c| !late_seqs.contains(&c.seq)).collect();
            let session = session.iter().filter(|c| !late_seqs.contains(&c.seq)).cloned().collect();
            return (turn, session);
        }
        if !self.auxiliary_in_part {
            return (turn, session.to_vec());
        }
        let aux = |c: &&Call| c.kind == CallKind::Auxiliary;
        let turn_aux: Vec<&Call> = turn.iter().copied().filter(aux).collect();
        let session_aux: Vec<&Call> = session.iter().filter(aux).collect();
        checks.slack = Slack {
            turn: support::sum(&turn_aux),
            session: support::sum(&session_aux),
            cost: support::catalog_cost(session_aux.iter().copied()),
        };
        let turn = turn.into_iter().filter(|c| !aux(c)).collect();
        let session = session.iter().filter(|c| !aux(c)).cloned().collect();
        (turn, session)
    }

    /// The calls acp-usage can account among `calls`.
    fn accountable<'a>(&self, calls: impl IntoIterator<Item = &'a Call>) -> Vec<Call> {
        calls
            .into_iter()
            .filter(|c| c.kind.is_billed())
            .filter(|c| !(self.unrecorded_auxiliary && c.kind == CallKind::Auxiliary))
            .cloned()
            .collect()
    }
}

/// A session created directly against the agent, and the lab that holds its HOME and mock.
#[derive(Debug)]
pub struct History {
    pub session_id: String,
    pub init: Value,
    /// `session/update`s that arrived between the `session/new` response and the first prompt.
    pub updates_after_new: Vec<Value>,
    pub turns: Vec<Turn>,
    pub transcript: String,
    // Last: dropped after everything above (it owns the scratch directory).
    pub lab: Lab,
}

impl History {
    /// The billed calls of the whole session so far.
    pub fn billed(&self) -> Vec<Call> {
        billed(&self.lab)
    }
}

/// Every billed call the lab's mock has served.
fn billed(lab: &Lab) -> Vec<Call> {
    lab.mock.calls().into_iter().filter(|call| call.kind.is_billed()).collect()
}

/// initialize, session/new, a plain prompt and a tool-use prompt, directly (no relay). The agent
/// process has exited when this returns, so its transcripts are complete.
pub fn direct_history(agent: Agent) -> anyhow::Result<History> {
    history(agent, None)
}

/// initialize, session/new, a plain prompt and a tool-use prompt. `relay_args`: `None` runs the
/// agent directly, else through the relay with these options (as a user of acp-usage makes them:
/// the relay learns the agent's hidden context and keeps the session's accounting in the scratch
/// HOME's state).
fn history(agent: Agent, relay_args: Option<&[&str]>) -> anyhow::Result<History> {
    let lab = Lab::new(agent, support::script(agent))?;
    let client = match relay_args {
        Some(args) => lab.relayed_with(args)?,
        None => lab.direct()?,
    };
    let init = client.initialize()?;
    let before_new = client.mark();
    let new_result = client.new_session(&lab.scratch.work())?;
    let session_id = session_id(&new_result)?;
    let mark = client.mark();
    // Agents send their command lists and the like around session/new (Copilot before its
    // answer too): the record shows what comes before the first prompt once everything the
    // tests check of it is in, each waited for up to 10 s (not coming is a failure). pi-acp's
    // own `usage_update` may come after its command list (under load, it did).
    let mut awaited = Vec::new();
    if agent.announces_commands() {
        awaited.push("available_commands_update");
    }
    if relay_args.is_none() && agent.reports_usage_on_open() {
        awaited.push("usage_update");
    }
    for kind in awaited {
        let of_kind = |l: &Line| l.session_update().is_some_and(|u| u["sessionUpdate"] == kind);
        client
            .wait_for_line(before_new, Duration::from_secs(10), of_kind)
            .map_err(|err| anyhow::anyhow!("no {kind} after session/new: {err:#}"))?;
    }
    let updates_after_new = client
        .notifications_since(mark)
        .into_iter()
        .map(|params| params["update"].clone())
        .collect();
    let first = run_turn(&client, &lab.mock, &session_id, PLAIN_PROMPT)?;
    let second = run_turn(&client, &lab.mock, &session_id, TOOL_PROMPT)?;
    anyhow::ensure!(
        second.main_calls().len() == 2,
        "the tool prompt should take two model calls (tool call, then answer); calls: {:#?}",
        second.calls
    );
    let transcript = client.transcript_jsonl();
    drop(client);
    Ok(History { session_id, init, updates_after_new, turns: vec![first, second], transcript, lab })
}

/// Starts the relay in `lab` (with `relay_args`), initializes and opens a session; the checks
/// demand exact figures when `expect` says the transcript gives them.
fn relayed_session(expect: Expect, lab: &Lab, relay_args: &[&str]) -> (AcpClient, Checks, String) {
    let (client, checks, session, _) = relayed_session_with(expect, lab, relay_args);
    (client, checks, session)
}

/// [`relayed_session`] and the `session/new` result.
fn relayed_session_with(
    expect: Expect,
    lab: &Lab,
    relay_args: &[&str],
) -> (AcpClient, Checks, String, Value) {
    // The tap is on by default: an expectation without it adds `--tap off`.
    let args = [expect.relay_args(), relay_args].concat();
    let client = lab.relayed_with(&args).expect("start the relay");
    let mut checks = Checks::new(expect.agent);
    checks.exact_everything = expect.known == Known::Everything;
    client.initialize().expect("initialize through the relay");
    let new_result =
        client.new_session(&lab.scratch.work()).expect("session/new through the relay");
    let session = session_id(&new_result).expect("session id");
    (client, checks, session, new_result)
}

/// No checks of a `session/new` result.
pub fn no_checks(_: &mut Checks, _: &Value) {}

pub fn session_id(new_result: &Value) -> anyhow::Result<String> {
    new_result["sessionId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no sessionId in {new_result}"))
}

/// Reopens `session_id` with `method` (`session/load` or `session/resume`) in a fresh process.
pub fn reopen(
    client: &AcpClient,
    method: &str,
    session_id: &str,
    work: &Path,
) -> anyhow::Result<Value> {
    client.initialize()?;
    client.request_response(method, json!({"sessionId": session_id, "cwd": work, "mcpServers": []}))
}

/// Reopens the session directly (no relay) in a fresh process, checks that the agent answers
/// and sends no `usage_update` of its own on reopening (before the turn's prompt), then runs a
/// plain turn. Returns the turn and the process's transcript.
pub fn reopen_direct(
    checks: &mut Checks,
    lab: &Lab,
    session_id: &str,
    method: &str,
) -> (Turn, String) {
    let agent = lab.agent;
    reopen_direct_then(checks, lab, session_id, method, false, |checks, updates| {
        checks.check(updates.is_empty(), || format!("{agent:?} sent a usage_update on {method}"));
    })
}

/// [`reopen_direct`] for an agent that reports on reopening: the turn starts once its first
/// `usage_update` is in (waited for up to 10 s), and `on_reopen` checks the `usage_update`s it
/// sent before the turn.
pub fn reopen_direct_with(
    checks: &mut Checks,
    lab: &Lab,
    session_id: &str,
    method: &str,
    on_reopen: impl FnOnce(&mut Checks, &[Value]),
) -> (Turn, String) {
    reopen_direct_then(checks, lab, session_id, method, true, on_reopen)
}

fn reopen_direct_then(
    checks: &mut Checks,
    lab: &Lab,
    session_id: &str,
    method: &str,
    reports: bool,
    on_reopen: impl FnOnce(&mut Checks, &[Value]),
) -> (Turn, String) {
    let client = lab.direct().expect("start the agent");
    let mark = client.mark();
    let response = reopen(&client, method, session_id, &lab.scratch.work()).expect(method);
    checks.check(response.get("result").is_some(), || format!("{method} failed: {response}"));
    if reports {
        let usage_update =
            |l: &Line| l.session_update().is_some_and(|u| u["sessionUpdate"] == "usage_update");
        if let Err(err) = client.wait_for_line(mark, Duration::from_secs(10), usage_update) {
            checks.fail(format!("{method}: no usage_update on reopening: {err:#}"));
        }
    }
    let turn =
        run_turn(&client, &lab.mock, session_id, PLAIN_PROMPT).expect("turn after reopening");
    // What the agent sent on reopening: its updates before the turn's prompt went out.
    let updates: Vec<Value> = client
        .lines_since(mark)
        .into_iter()
        .take_while(|l| !(l.dir == Dir::Out && l.method() == Some("session/prompt")))
        .filter_map(|l| l.session_update().cloned())
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    on_reopen(checks, &updates);
    (turn, client.transcript_jsonl())
}

/// Gemini CLI quirk (0.61.0): `session/load` within the same wall-clock minute as the session's
/// creation makes the new process open a chat file of the same name
/// (`session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`), which truncates the recorded conversation, and the
/// load fails with "No previous sessions found". Only the short id in the name matters for
/// lookups, so the tests move recorded chats to an old timestamp before reloading.
pub fn backdate_gemini_chats(home: &Path) -> anyhow::Result<()> {
    let tmp = home.join(".gemini").join("tmp");
    for project in std::fs::read_dir(&tmp)? {
        let chats = project?.path().join("chats");
        let Ok(entries) = std::fs::read_dir(&chats) else { continue };
        for entry in entries {
            let path = entry?.path();
            let Some(name) = path.file_name().and_then(|name| name.to_str()) else { continue };
            // session-2026-11-22T02-00-0845331b.jsonl: the timestamp is 16 characters.
            let Some(rest) = name.strip_prefix("session-") else { continue };
            if rest.len() > 17 {
                std::fs::rename(
                    &path,
                    chats.join(format!("session-2000-01-01T00-00{}", &rest[16..])),
                )?;
            }
        }
    }
    Ok(())
}

/// Relay: session/new, then a plain and a tool-use turn; every figure checked against the mock;
/// with options for the relay (e.g. `--transcripts off`, the fallback).
pub fn relay_turns_with(expect: Expect, relay_args: &[&str]) {
    let lab = Lab::new(expect.agent, support::script(expect.agent)).expect("lab");
    relay_turns_in(expect, &lab, relay_args);
}

/// [`relay_turns_with`] with `more` plain turns after the two.
pub fn relay_turns_and_more(expect: Expect, more: usize) {
    let lab = Lab::new(expect.agent, support::script(expect.agent)).expect("lab");
    relay_turns_then(expect, &lab, &[], more);
}

/// [`relay_turns_with`] in a lab the caller prepared (e.g. the agent's base URL changed).
pub fn relay_turns_in(expect: Expect, lab: &Lab, relay_args: &[&str]) {
    relay_turns_then(expect, lab, relay_args, 0);
}

/// [`relay_turns_in`] with `more` plain turns after the two (for an agent whose per-turn figures
/// are what a cumulative count grew by: a turn after a turn of several calls).
pub fn relay_turns_then(expect: Expect, lab: &Lab, relay_args: &[&str], more: usize) {
    let (checks, _) = relay_turns_checked(expect, lab, relay_args, more, no_checks);
    checks.finish();
}

/// Relay: the turns of [`relay_turns_with`], then the same session reloaded (and resumed, where
/// supported) through the relay in fresh processes, as [`relay_load_resume`] does: one agent
/// launch serves both flows (the first process's session is the history the reopening reads).
pub fn relay_turns_load_resume(
    expect: Expect,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
) {
    relay_turns_load_resume_with(expect, size_on_reopen, size_after_turn, no_checks);
}

/// [`relay_turns_load_resume`] with checks of the `session/new` result (`on_new`).
pub fn relay_turns_load_resume_with(
    expect: Expect,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
    on_new: fn(&mut Checks, &Value),
) {
    let lab = Lab::new(expect.agent, support::script(expect.agent)).expect("lab");
    let (checks, session_id) = relay_turns_checked(expect, &lab, &[], 0, on_new);
    let Some(session_id) = session_id else {
        checks.finish();
        return;
    };
    reopen_through_relay(expect, &lab, &session_id, checks, size_on_reopen, size_after_turn);
}

/// [`relay_turns_then`] without the verdict: the checks so far, and the session (`None` when a
/// turn failed) once the relay has exited.
fn relay_turns_checked(
    expect: Expect,
    lab: &Lab,
    relay_args: &[&str],
    more: usize,
    on_new: fn(&mut Checks, &Value),
) -> (Checks, Option<String>) {
    let (client, mut checks, session_id, new_result) =
        relayed_session_with(expect, lab, relay_args);
    on_new(&mut checks, &new_result);
    let mut completed = true;
    let new_id = support::last_request_id(&client, "session/new");
    match support::update_after_response(&client, &new_id, &session_id) {
        Ok(update) => {
            checks.usage_update("after new", &update, None, expect.size_on_new, None);
            let used = support::u64_at(&update, "used").unwrap_or(0);
            let size = support::u64_at(&update, "size").unwrap_or(0);
            checks.row(
                "after new",
                "used",
                Some(used as f64),
                0.0,
                update["_meta"]["acpUsage"]["used"]["exact"].as_bool(),
            );
            checks.check(used < size, || format!("after new: used {used} >= size {size}"));
        }
        Err(err) => checks.fail(format!("no usage_update after the session/new response: {err:#}")),
    }

    let mut session_calls: Vec<Call> = Vec::new();
    let mut turns = vec![
        ("turn 1 (plain)".to_owned(), PLAIN_PROMPT, 1),
        ("turn 2 (tool)".to_owned(), TOOL_PROMPT, 2),
    ];
    turns.extend((3..3 + more).map(|n| (format!("turn {n} (plain)"), PLAIN_PROMPT, 1)));
    for (phase, prompt, n_calls) in turns {
        let phase = phase.as_str();
        // One mark splits the calls between turns from the turn's: a call the agent starts
        // after the last result (Claude's prompt suggestion) must land on one side, not in
        // the gap between two readings of the mock's log.
        let call_mark = lab.mock.mark();
        if expect.tap {
            // The tap counts calls made between turns (qwen's memory extraction after a
            // result) at once: they are in the session's figures from the next update on.
            add_between_turns(&mut session_calls, lab, expect, call_mark);
        }
        let mut turn = match run_turn_from(&client, &lab.mock, call_mark, &session_id, prompt) {
            Ok(turn) => turn,
            Err(err) => {
                checks.fail(format!("{phase}: session/prompt through the relay failed: {err:#}"));
                completed = false;
                break;
            }
        };
        if expect.auxiliary_in_part && !expect.tap {
            // A side call made after the previous result (Claude's title or prompt suggestion,
            // when it ends after that result went out) is in no turn's window, yet the agent's
            // stated usage of this turn may hold it: it joins this turn's slack.
            let known: Vec<usize> = session_calls.iter().map(|c| c.seq).collect();
            let between = lab.mock.calls().into_iter().filter(|c| {
                c.seq < call_mark && c.kind == CallKind::Auxiliary && !known.contains(&c.seq)
            });
            turn.calls.splice(0..0, between);
        }
        assert_eq!(
            turn.main_calls().len(),
            n_calls,
            "{phase}: unexpected model calls {:#?}",
            turn.calls
        );
        session_calls.extend(expect.accountable(turn.billed_calls()));
        check_turn(&mut checks, phase, &client, &turn, &session_calls, expect, Some(expect.size));
    }
    if expect.tap {
        last_update_covers_every_call(&mut checks, &client, lab, &mut session_calls, expect);
    }
    drop(client);
    checks.transcript_waits("results held", lab.scratch.root());
    (checks, completed.then_some(session_id))
}

/// With the tap, after the last result the last `usage_update` the editor holds comes to cover
/// every billed call the mock served, those that ended after the result (a title, a prompt
/// suggestion, a memory extraction) included: acp-usage sends an update for calls counted
/// between turns. Waited for (up to 10 s), the mock's record read again at each step.
fn last_update_covers_every_call(
    checks: &mut Checks,
    client: &AcpClient,
    lab: &Lab,
    session_calls: &mut Vec<Call>,
    expect: Expect,
) {
    let mut want = f64::NAN;
    let last = support::wait_for_last_update(client, Duration::from_secs(10), |last| {
        add_between_turns(session_calls, lab, expect, lab.mock.mark());
        want = support::catalog_cost(session_calls.iter());
        let got = last.and_then(|l| l["cost"]["amount"].as_f64());
        got.is_some_and(|got| support::close(got, want))
    });
    let Some(last) = last else {
        checks.fail("after the last turn: no usage_update at all".to_owned());
        return;
    };
    let got = last["cost"]["amount"].as_f64();
    checks.row("after the last turn", "cost (USD)", got, want, Some(true));
    checks.check(got.is_some_and(|got| support::close(got, want)), || {
        format!(
            "10 s after the last result the editor's cost {got:?} should cover all {} billed calls ({want:?}): {last}",
            session_calls.len()
        )
    });
}

/// Adds to `calls` the billed calls the mock served before `mark` that it does not hold yet:
/// calls made between turns, which the tap counts at once (those acp-usage cannot see left out).
fn add_between_turns(calls: &mut Vec<Call>, lab: &Lab, expect: Expect, mark: usize) {
    add_served(calls, lab, |c| c.seq < mark && !expect.accountable([c]).is_empty());
}

/// Adds to `calls` the calls the mock served that it does not hold yet and that `which` picks.
fn add_served(calls: &mut Vec<Call>, lab: &Lab, which: impl Fn(&Call) -> bool) {
    let known: Vec<usize> = calls.iter().map(|c| c.seq).collect();
    let between: Vec<Call> =
        lab.mock.calls().into_iter().filter(|c| which(c) && !known.contains(&c.seq)).collect();
    if !between.is_empty() {
        eprintln!("{} call(s) made between turns", between.len());
    }
    calls.extend(between);
}

/// Where a turn runs: the relay's client, its lab, the session.
#[derive(Clone, Copy)]
struct TurnAt<'a> {
    client: &'a AcpClient,
    lab: &'a Lab,
    session: &'a str,
    /// The mock's mark the turn's calls are counted from; `None` is the prompt's own start.
    calls_from: Option<usize>,
}

/// Runs a plain turn through the relay, adds its accountable calls to `calls` (the session's so
/// far) and checks it with [`check_turn`]; a failed prompt is a failed check.
fn plain_turn_checked(
    checks: &mut Checks,
    phase: &str,
    at: TurnAt<'_>,
    calls: &mut Vec<Call>,
    expect: Expect,
    size: Option<u64>,
) {
    let from = at.calls_from.unwrap_or_else(|| at.lab.mock.mark());
    match run_turn_from(at.client, &at.lab.mock, from, at.session, PLAIN_PROMPT) {
        Ok(turn) => {
            calls.extend(expect.accountable(turn.billed_calls()));
            if expect.auxiliary_in_part {
                // Side calls made between turns (a title after a result) are in no turn's
                // window, but the agent's stated cost may include them: they join the slack.
                add_served(calls, at.lab, |c| c.kind == CallKind::Auxiliary);
            }
            check_turn(checks, phase, at.client, &turn, calls, expect, size);
        }
        Err(err) => {
            checks.fail(format!("{phase}: session/prompt through the relay failed: {err:#}"))
        }
    }
}

/// The checks shared by every relayed turn: per-turn usage, the usage_update right before the
/// result, and no raw agent usage_update left unrewritten.
fn check_turn(
    checks: &mut Checks,
    phase: &str,
    client: &AcpClient,
    turn: &Turn,
    session_calls: &[Call],
    expect: Expect,
    size: Option<u64>,
) {
    let billed = turn.billed_calls();
    let unrecorded = billed.len() - expect.accountable(billed.iter().copied()).len();
    if unrecorded > 0 {
        eprintln!(
            "{phase}: {unrecorded} auxiliary call(s) no record of the agent's shows, left out"
        );
    }
    let billed: Vec<&Call> = billed
        .into_iter()
        .filter(|c| !(expect.unrecorded_auxiliary && c.kind == CallKind::Auxiliary))
        .collect();
    let (billed, session_calls) = expect.set_slack(checks, billed, session_calls);
    let session_calls = session_calls.as_slice();
    let served = support::sum(&billed);
    let main = turn.main_calls();
    if billed.len() != main.len() {
        eprintln!("{phase}: {} auxiliary call(s) in the turn", billed.len() - main.len());
    }
    checks.turn_usage(phase, &turn.result["usage"], served, expect.known);
    let exact = turn.result["usage"]["_meta"]["acpUsage"]["exact"].as_bool();
    if expect.turn_exact {
        checks.check(exact == Some(true), || {
            format!(
                "{phase}: the agent reports the whole turn, usage should be exact: {}",
                turn.result
            )
        });
    }
    if expect.tap {
        let source = &turn.result["usage"]["_meta"]["acpUsage"]["source"];
        checks.check(source == "tap", || {
            format!(
                "{phase}: with --tap the turn's usage should come from the tap: {}",
                turn.result
            )
        });
    }
    for update in turn.usage_updates() {
        checks.check(update["_meta"]["acpUsage"].is_object(), || {
            format!("{phase}: a usage_update reached the client without acp-usage's _meta (not rewritten): {update}")
        });
    }
    let Some(update) = support::usage_update_before_result(client) else {
        checks
            .fail(format!("{phase}: the session/prompt result is not preceded by a usage_update"));
        return;
    };
    let last = main.last().and_then(|call| call.usage);
    let session: Vec<&Call> = session_calls.iter().collect();
    checks.usage_update(
        phase,
        &update,
        last.as_ref(),
        size,
        Some(support::catalog_cost(session.iter().copied())),
    );
    checks.cumulative(phase, &update, support::sum(&session), expect.turn_exact, expect.known);
}

/// Relay: a session made through the relay, reloaded (and resumed, where supported) through the
/// relay in fresh processes, with one turn after each: the accounting continues where the first
/// run left it. The expected window right after reopening and
/// after the first turn that follows (`None`: not checked, only reported).
pub fn relay_load_resume(
    expect: Expect,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
) {
    let history = history(expect.agent, Some(expect.relay_args()))
        .expect("a session made through the relay, to reload");
    reopen_history(expect, history, size_on_reopen, size_after_turn);
}

/// Relay: a session made without acp-usage (directly), reopened through the relay: with the
/// agent's transcript, the first update already has the exact `used` and the whole session's cost.
pub fn relay_reopen_unseen(
    expect: Expect,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
) {
    let history = direct_history(expect.agent).expect("a session made directly, to reload");
    reopen_history(expect, history, size_on_reopen, size_after_turn);
}

/// [`reopen_through_relay`] with checks of its own.
fn reopen_history(
    expect: Expect,
    history: History,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
) {
    let mut checks = Checks::new(expect.agent);
    checks.exact_everything = expect.known == Known::Everything;
    reopen_through_relay(
        expect,
        &history.lab,
        &history.session_id,
        checks,
        size_on_reopen,
        size_after_turn,
    );
}

/// Reopens `session` of `lab` (its agent process gone) through the relay in fresh processes:
/// `session/load`, then `session/resume` where supported, a turn after each; finishes `checks`.
pub fn reopen_through_relay(
    expect: Expect,
    lab: &Lab,
    session: &str,
    mut checks: Checks,
    size_on_reopen: Option<u64>,
    size_after_turn: Option<u64>,
) {
    let agent = expect.agent;
    let mut session_calls = expect.accountable(&billed(lab));
    let methods: &[&str] =
        if expect.resume { &["session/load", "session/resume"] } else { &["session/load"] };
    for method in methods {
        if agent == Agent::Gemini {
            backdate_gemini_chats(&lab.scratch.home()).expect("backdate gemini chats");
        }
        if expect.tap {
            // What the agent did after the last result (a memory extraction) was counted by
            // the tap and kept.
            add_between_turns(&mut session_calls, lab, expect, lab.mock.mark());
        }
        let client = lab.relayed_with(expect.relay_args()).expect("start the relay");
        let response = reopen(&client, method, session, &lab.scratch.work()).expect(method);
        if response.get("error").is_some() {
            checks.fail(format!("{method} through the relay failed: {response}"));
            continue;
        }
        let id = support::last_request_id(&client, method);
        match support::update_after_response(&client, &id, session) {
            Ok(update) => {
                let last = session_calls
                    .iter()
                    .rev()
                    .find(|call| call.kind == CallKind::Main)
                    .and_then(|call| call.usage);
                let (_, seen) = expect.set_slack(&mut checks, Vec::new(), &session_calls);
                let cost = update.get("cost").map(|_| support::catalog_cost(seen.iter()));
                checks.usage_update(
                    &format!("after {method}"),
                    &update,
                    last.as_ref(),
                    size_on_reopen,
                    cost,
                );
            }
            Err(err) => {
                checks.fail(format!("no usage_update after the {method} response: {err:#}"))
            }
        }
        let phase = format!("turn after {method}");
        let at = TurnAt { client: &client, lab, session, calls_from: None };
        plain_turn_checked(&mut checks, &phase, at, &mut session_calls, expect, size_after_turn);
    }
    if !expect.resume {
        // Unsupported methods are the agent's to refuse; the error must reach the client as is.
        let client = lab.relayed().expect("start the relay");
        let response =
            reopen(&client, "session/resume", session, &lab.scratch.work()).expect("resume");
        checks.check(response["error"]["code"] == -32601, || {
            format!("session/resume should pass the agent's -32601 through: {response}")
        });
    }
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}

/// How to make an agent run a subagent in one turn.
#[derive(Debug)]
pub struct SubagentTurn {
    /// The mock's replies, in the order the agent and its subagent make their calls.
    pub script: Script,
    /// Settings to change in the lab before the agent starts.
    pub prepare: fn(&Lab) -> anyhow::Result<()>,
    /// Requests to send after `session/new` (e.g. a permission mode).
    pub after_new: fn(&AcpClient, &str) -> anyhow::Result<()>,
    /// Main-agent calls among the turn's calls (the rest are the subagent's).
    pub main_calls: usize,
}

/// Relay: one turn in which the agent runs a subagent. The per-turn usage and the cost include
/// the subagent's calls; `used` is the main agent's last call (the turn's last call: the main
/// agent answers after its subagent is done).
pub fn relay_subagent_turn(expect: Expect, sub: SubagentTurn) {
    let agent = expect.agent;
    let lab = Lab::new(agent, sub.script).expect("lab");
    (sub.prepare)(&lab).expect("prepare the lab");
    let (client, mut checks, session_id) = relayed_session(expect, &lab, &[]);
    (sub.after_new)(&client, &session_id).expect("set up the session");
    let phase = "turn with a subagent";
    let turn = run_turn(&client, &lab.mock, &session_id, SUBAGENT_PROMPT).expect("the turn");
    let billed = expect.accountable(turn.billed_calls());
    let main = turn.main_calls();
    assert!(
        main.len() > sub.main_calls,
        "{phase}: the subagent made no call of its own; calls: {:#?}",
        turn.calls
    );
    checks.check(lab.mock.steps_left() == 0, || {
        format!("{phase}: {} scripted step(s) left unused", lab.mock.steps_left())
    });
    check_turn(&mut checks, phase, &client, &turn, &billed, expect, Some(expect.size));
    drop(client);
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}

pub const SUBAGENT_PROMPT: &str = "Ask a helper to look at the project, then sum up.";

/// Nothing to prepare or send.
pub fn nothing(_: &Lab) -> anyhow::Result<()> {
    Ok(())
}

/// Nothing to send after `session/new`.
pub fn no_requests(_: &AcpClient, _: &str) -> anyhow::Result<()> {
    Ok(())
}

/// Relay: a session with one turn, forked (`session/fork`), then a turn in the fork. The fork
/// starts from its parent's context and cost (as agents do); its turn counts only its own calls,
/// although the agent copies the parent's history into the fork's transcript.
pub fn relay_fork(expect: Expect) {
    let agent = expect.agent;
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let (client, mut checks, parent) = relayed_session(expect, &lab, &[]);
    let first = run_turn(&client, &lab.mock, &parent, PLAIN_PROMPT).expect("parent turn");
    let mut calls = expect.accountable(first.billed_calls());
    let response = client
        .request_response(
            "session/fork",
            json!({"sessionId": parent, "cwd": lab.scratch.work(), "mcpServers": []}),
        )
        .expect("session/fork");
    let Some(fork) = response["result"]["sessionId"].as_str().map(str::to_owned) else {
        checks.fail(format!("session/fork failed: {response}"));
        checks.finish();
        return;
    };
    let id = support::last_request_id(&client, "session/fork");
    match support::update_after_response(&client, &id, &fork) {
        Ok(update) => {
            let last = calls.iter().rev().find(|c| c.kind == CallKind::Main).and_then(|c| c.usage);
            let (_, seen) = expect.set_slack(&mut checks, Vec::new(), &calls);
            let cost = Some(support::catalog_cost(seen.iter()));
            checks.usage_update("after fork", &update, last.as_ref(), None, cost);
        }
        Err(err) => {
            checks.fail(format!("no usage_update after the session/fork response: {err:#}"))
        }
    }
    let phase = "turn in the fork";
    let at = TurnAt { client: &client, lab: &lab, session: &fork, calls_from: None };
    plain_turn_checked(&mut checks, phase, at, &mut calls, expect, None);
    drop(client);
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}

/// Relay: a turn, then `/clear` (Claude Code starts a new inner transcript for the same ACP
/// session), then a turn: the second turn's figures come from the new transcript, exact.
pub fn relay_clear(expect: Expect) {
    let agent = expect.agent;
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let (client, mut checks, session) = relayed_session(expect, &lab, &[]);
    let first_mark = lab.mock.mark();
    let first =
        run_turn_from(&client, &lab.mock, first_mark, &session, PLAIN_PROMPT).expect("first turn");
    let mut calls = expect.accountable(first.billed_calls());
    check_turn(&mut checks, "turn before /clear", &client, &first, &calls, expect, None);
    let clear = run_turn(&client, &lab.mock, &session, "/clear").expect("/clear");
    checks.check(clear.main_calls().is_empty(), || {
        format!("/clear made model calls: {:#?}", clear.calls)
    });
    let phase = "turn after /clear";
    // The title call Claude Code makes after the first turn may land after that turn's result
    // (before or during /clear, which makes no model call): the relay counts it in the next
    // turn with calls, so that turn's calls start where the first turn's ended.
    let calls_from = Some(first_mark + first.calls.len());
    let at = TurnAt { client: &client, lab: &lab, session: &session, calls_from };
    plain_turn_checked(&mut checks, phase, at, &mut calls, expect, None);
    drop(client);
    checks.transcript_waits("results held", lab.scratch.root());
    checks.finish();
}

/// For an agent whose `session/new` needs its vendor's login (Auggie, Qoder CLI): `initialize`
/// and the `session/new` refusal, directly and through the relay (tap on, as by default), are
/// the same bytes: acp-usage adds nothing to either (it adds a `usage_update` only after a
/// `session/new` that succeeds). Returns the direct `initialize` result and `session/new`
/// error, for the caller's own checks.
pub fn relay_passes_login_refusal(agent: Agent) -> (Value, Value) {
    let lab = Lab::new(agent, Script::default()).expect("lab");
    // The responses to initialize (id 1) and session/new (id 2), as the client read them.
    let exchange = |client: &AcpClient| -> (Vec<u8>, Vec<u8>, Vec<Value>) {
        let mark = client.mark();
        client.initialize().expect("initialize");
        let new = client
            .request_response("session/new", json!({"cwd": lab.scratch.work(), "mcpServers": []}))
            .expect("session/new");
        assert!(new.get("error").is_some(), "{agent:?}: session/new without a login: {new}");
        // A second `initialize` as a barrier: anything the agent or acp-usage sends in answer
        // to the refusal goes out before this answer, so it is in the record (the lookups
        // below take each method's first request).
        client.initialize().expect("initialize again, as a barrier");
        let lines = client.lines_since(mark);
        let response = |method: &str| {
            let request = lines.iter().find(|l| l.method() == Some(method)).expect("request");
            let id = request.json.as_ref().map(|json| json["id"].clone()).unwrap_or_default();
            let line = lines.iter().find(|l| l.is_response_to(&id)).expect("response");
            line.bytes.clone()
        };
        let updates = client.notifications_since(mark);
        (response("initialize"), response("session/new"), updates)
    };
    let direct = lab.direct().expect("start the agent");
    let (init, new, direct_updates) = exchange(&direct);
    drop(direct);
    let relayed = lab.relayed().expect("start the relay");
    let (relay_init, relay_new, relay_updates) = exchange(&relayed);
    drop(relayed);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    assert_eq!(text(&relay_init), text(&init), "{agent:?}: initialize through the relay");
    assert_eq!(text(&relay_new), text(&new), "{agent:?}: session/new's error through the relay");
    assert!(
        direct_updates.is_empty() && relay_updates.is_empty(),
        "{agent:?}: session/updates around a refused session/new: {direct_updates:?} / \
         {relay_updates:?}"
    );
    let json = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap_or_default();
    (json(&init)["result"].clone(), json(&new)["error"].clone())
}
