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

use acp_usage_tests::agents::Agent;

use crate::flows::{self, Expect};
use crate::opencode;
use crate::support::Known;

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

/// What opencode's tests check of it, with kilo's name and version.
#[test]
fn kilo_direct() {
    opencode::direct(AGENT, "Kilo", "7.7.7");
}

#[test]
fn kilo_relay_basics() {
    opencode::relay_basics(AGENT);
}

#[test]
fn kilo_relay_turns() {
    flows::relay_turns(EXPECT);
}

#[test]
fn kilo_relay_load_and_resume() {
    flows::relay_load_resume(EXPECT, Some(WINDOW), Some(WINDOW));
}

#[test]
fn kilo_relay_reopen_unseen() {
    flows::relay_reopen_unseen(EXPECT, Some(WINDOW), Some(WINDOW));
}

/// kilo's `task` tool runs the `general` subagent in a child session, as opencode's does (kilo
/// also adds the child's cost to its own stated cost, which acp-usage counts from the calls).
#[test]
fn kilo_relay_subagent() {
    opencode::relay_subagent(EXPECT);
}

#[test]
fn kilo_relay_turns_tapped() {
    flows::relay_turns_with(EXPECT.tapped(), &[]);
}

#[test]
fn kilo_relay_turns_tapped_config_file() {
    opencode::relay_turns_config_file(EXPECT.tapped(), "kilo.jsonc");
}

#[test]
fn kilo_relay_load_and_resume_tapped() {
    flows::relay_load_resume(EXPECT.tapped(), Some(WINDOW), Some(WINDOW));
}

/// kilo copies the parent's history into the fork's session (with the original times, cost 0):
/// the fork's turn counts its own call only.
#[test]
fn kilo_relay_fork() {
    flows::relay_fork(EXPECT);
}
