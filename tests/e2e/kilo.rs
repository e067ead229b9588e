//! kilo 7.7.7 (`kilo acp`, npm `@kilocode/cli`, an opencode fork) against the Anthropic mock.
//!
//! What it sends by itself (`kilo_direct` pins this down): opencode 1.18's ACP behaviour, its
//! code being opencode's: nothing after `session/new`/`load`/`resume`/`fork`; one `usage_update`
//! per turn, just before the result, with `used` = the last call's input + cache read + cache
//! write WITHOUT its output, `size` = 1,000,000 for claude-sonnet-4-5 (models.dev's; no 1M beta
//! header is sent, so the API runs it at 200,000) and `cost` = the catalog price of every stored
//! main-agent message (the title call, with claude-haiku-4-5, left out); per-turn `usage` = the
//! last call's counts, Anthropic style, `_meta: {}`. kilo titles a session only after a turn
//! with a tool or a second prompt. Its store is `$XDG_DATA_HOME/kilo/kilo.db`, opencode's schema.
//! kilo 7.8.1, the newest release, cannot be installed: its platform packages are not on the
//! registry.
//!
//! Its Kilo Gateway provider (`kilo/<model>`) works without a login (an `anonymous` key) against
//! the mock's OpenRouter flavour at `KILO_API_URL` (`/api/openrouter/chat/completions`; the
//! model list and `/api/defaults` lookups get 404s and kilo uses its bundled catalogue). It asks
//! for usage with OpenRouter's `usage: {include: true}`, never `stream_options`.

use acp_usage_tests::agents::Agent;
use acp_usage_tests::lab::{Lab, Turn, run_turn};
use serde_json::json;

use crate::flows::{self, Expect};
use crate::opencode;
use crate::support::{self, Checks, Known};

const AGENT: Agent = Agent::Kilo;
/// claude-sonnet-4-5's window in the catalog, which the API enforces without the 1M beta.
const WINDOW: u64 = 200_000;

/// With kilo's database followed, every figure is exact per call.
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

/// What opencode's tests check of it, with kilo's name and version; then the session reopened
/// through the relay.
#[test]
fn kilo_direct_then_reopen_unseen() {
    opencode::direct_then_reopen_unseen(EXPECT, "Kilo", "7.7.7");
}

/// opencode's: two turns, then the session reopened, one launch of kilo for both.
#[test]
fn kilo_relay_turns_load_and_resume() {
    flows::relay_turns_load_resume_with(EXPECT, Some(WINDOW), Some(WINDOW), opencode::model_option);
}

/// kilo's `task` tool runs the `general` subagent in a child session, as opencode's does (kilo
/// also adds the child's cost to its own stated cost, which acp-usage counts from the calls).
#[test]
fn kilo_relay_subagent() {
    opencode::relay_subagent(EXPECT);
}

#[test]
fn kilo_relay_turns_tapped_config_file() {
    opencode::relay_turns_config_file(EXPECT.tapped(), "kilo.jsonc");
}

#[test]
fn kilo_relay_turns_load_and_resume_tapped() {
    flows::relay_turns_load_resume(EXPECT.tapped(), Some(WINDOW), Some(WINDOW));
}

/// kilo copies the parent's history into the fork's session (with the original times, cost 0):
/// the fork's turn counts its own call only.
#[test]
fn kilo_relay_fork() {
    flows::relay_fork(EXPECT);
}

/// One tapped turn of kilo on its Kilo Gateway provider (`kilo/...`, anonymous: no login), the
/// gateway's root (`KILO_API_URL`) at `root` under the mock; the turn and the mock's calls of it.
fn gateway_turn(root: &str) -> (Lab, Turn) {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let model = json!({"model": format!("kilo/{GATEWAY_MODEL}")});
    lab.spec.set_env("KILO_CONFIG_CONTENT", model.to_string());
    lab.spec.set_env("KILO_API_URL", format!("{}{root}", lab.mock.url()));
    let turn = {
        let client = lab.relayed().expect("relay");
        client.initialize().expect("initialize");
        let new = client.new_session(&lab.scratch.work()).expect("session/new");
        let session = flows::session_id(&new).expect("session id");
        run_turn(&client, &lab.mock, &session, flows::PLAIN_PROMPT).expect("turn")
    };
    (lab, turn)
}

/// A gateway model in kilo's bundled catalogue (anonymous use reads no model list).
const GATEWAY_MODEL: &str = "anthropic/claude-sonnet-4.5";

#[test]
fn kilo_gateway_tapped_exact_or_estimated() {
    // The gateway's calls (OpenAI Chat Completions to `<root>/api/openrouter/`) ask for usage
    // OpenRouter's way (`usage: {include: true}`, no `stream_options`). Where the gateway
    // honours it the usage is on the wire and the tap counts each call exactly; where not, the
    // tap counts from the content and the turn is labelled an estimate.
    let mut checks = Checks::new(AGENT);
    let (lab, turn) = gateway_turn("");
    let billed = turn.billed_calls();
    checks.check(
        !billed.is_empty()
            && billed.iter().all(|c| {
                c.target == "/api/openrouter/chat/completions"
                    && c.request_body["usage"]["include"] == true
                    && c.native_usage.is_some()
            }),
        || format!("gateway calls with usage on the wire: {billed:?}"),
    );
    checks.check(billed.iter().any(|c| c.model.as_deref() == Some(GATEWAY_MODEL)), || {
        format!("the gateway model's calls: {billed:?}")
    });
    let usage = &turn.result["usage"];
    checks.turn_usage("usage on the wire", usage, support::sum(&billed), Known::Everything);
    let meta = &usage["_meta"]["acpUsage"];
    checks.check(meta["source"] == "tap" && meta["exact"] == true, || {
        format!("usage on the wire: the tap's, exact: {}", turn.result)
    });
    drop(lab);

    let (lab, turn) = gateway_turn("/plain");
    let billed = turn.billed_calls();
    checks.check(!billed.is_empty() && billed.iter().all(|c| c.native_usage.is_none()), || {
        format!("a gateway that ignores usage.include: {billed:?}")
    });
    let meta = &turn.result["usage"]["_meta"]["acpUsage"];
    checks.check(meta["source"] == "estimate" && meta["exact"] == false, || {
        format!("no usage on the wire: labelled an estimate: {}", turn.result)
    });
    checks.check(
        support::u64_at(&turn.result["usage"], "totalTokens").is_some_and(|t| t > 0),
        || format!("no usage on the wire: still counted: {}", turn.result),
    );
    drop(lab);
    checks.finish();
}
