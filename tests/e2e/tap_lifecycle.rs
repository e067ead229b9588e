//! The tap at the two ends of an agent's life.
//!
//! A call the agent makes before it answers `initialize` goes through: the tap serves from the
//! agent's start (a tap that waited for the agent's first answer before it served would leave
//! such an agent waiting, and the editor too).
//!
//! A call the agent starts as it exits: Claude Code makes a side call after its last result (a
//! prompt suggestion), and when the editor closes, the agent goes before that call's answer has
//! been read. The provider billed the answer all the same. The tap reads it to its end on a
//! task of its own, and the relay waits for that before its last count, so the ledger holds the
//! call exactly as the mock served it.
//!
//! The agent is the fake agent behind `--profile claude`: it sends the call when its stdin ends,
//! waits for the answer's status line (so the mock has served it) and exits without reading the
//! body. Before the tap read such answers on its own, the call was lost or counted from its
//! first event only (`complete: false`), depending on how far the agent's connection had got.
//!
//! Then the tap alone: an answer that comes after the agent hung up is counted whole, and an
//! upstream that goes quiet after the agent hung up is let go a moment later.

use std::process::Command;

use acp_usage::sinks::ledger::Store;
use acp_usage::sources::tap::settled;
use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec};
use acp_usage_tests::mock_llm::{CallKind, MockLlm, Script};
use acp_usage_tests::raw_http::{Arrival, PATIENCE, RawClient, RawUpstream, response_head};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch::Receiver;

use crate::support;
use crate::tap_proxy::{Rig, message_start, model_call, stream_rest};

/// `acp-usage --profile claude -- fake-acp-agent` with the fake agent's `mode` variable set and
/// its base URL on `mock`, writing the ledger in `scratch`.
fn fake_under_claude(scratch: &Scratch, mock: &MockLlm, mode: &str) -> AcpClient {
    let ledger = scratch.path("ledger.sqlite");
    let spec = CommandSpec {
        program: env!("CARGO_BIN_EXE_fake-acp-agent").into(),
        args: Vec::new(),
        env: vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), scratch.home().display().to_string()),
            ("ACP_USAGE_LOG".to_owned(), "debug".to_owned()),
            ("ACP_USAGE_LEDGER".to_owned(), ledger.display().to_string()),
            ("ANTHROPIC_BASE_URL".to_owned(), mock.url()),
            (mode.to_owned(), "1".to_owned()),
        ],
        cwd: scratch.work(),
        stderr_file: scratch.path("relay.stderr"),
    };
    let relayed =
        spec.wrapped(&relay_binary().expect("acp-usage"), &["--profile", "claude", "--tap", "on"]);
    AcpClient::spawn(&relayed, ClientOptions::default()).expect("the relay")
}

#[test]
fn tap_serves_an_agent_that_calls_its_model_before_it_answers() {
    let scratch = Scratch::new("tap-start").expect("scratch");
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let client = fake_under_claude(&scratch, &mock, "FAKE_AGENT_CALL_AT_START");
    // The agent answers only once its call is done: a tap that waited for that answer
    // before it served would leave both waiting.
    let init = client.initialize().expect("initialize is answered");
    assert_eq!(init["agentInfo"]["name"], "fake-acp-agent", "{init}");
    let served = mock.calls();
    assert_eq!(served.len(), 1, "the call went through the tap to the mock: {served:#?}");
    assert!(served[0].usage.is_some(), "{served:#?}");
}

#[test]
fn tap_counts_the_call_an_agent_starts_as_it_exits() {
    let scratch = Scratch::new("tap-exit").expect("scratch");
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let ledger = scratch.path("ledger.sqlite");
    let mut client = fake_under_claude(&scratch, &mock, "FAKE_AGENT_CALL_AT_EXIT");
    client.initialize().expect("initialize");
    client.new_session(&scratch.work()).expect("session/new");
    let status = client.shutdown().expect("the relay exits");
    assert!(status.success(), "the relay exited with {status}");

    let served = mock.calls();
    assert_eq!(served.len(), 1, "one call, through the tap: {served:#?}");
    let call = &served[0];
    assert_eq!(call.kind, CallKind::Auxiliary, "{call:#?}");
    let want = support::sum(&[call]);

    let store = Store::open_read(&ledger).expect("the relay wrote its ledger");
    let rows: Vec<(i64, i64, i64, i64, String)> = store
        .conn()
        .prepare("SELECT input, cache_read, output, exact, source FROM calls")
        .and_then(|mut q| {
            q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
                .collect()
        })
        .expect("the calls");
    let log = std::fs::read_to_string(scratch.path("relay.stderr")).unwrap_or_default();
    assert_eq!(
        rows.len(),
        1,
        "the call the agent left behind is in the ledger once: {rows:?}\n{log}"
    );
    let (input, cache_read, output, exact, source) = &rows[0];
    assert_eq!(
        (*input as u64, *cache_read as u64, *output as u64),
        (want.input, want.cache_read, want.output),
        "the whole answer is counted, not its first event: {rows:?}"
    );
    assert_eq!((*exact, source.as_str()), (1, "tap"), "counted exact, from the tap: {rows:?}");

    // The report agrees.
    let out = Command::new(relay_binary().expect("acp-usage"))
        .args(["report", "--json", "--no-import", "--ledger"])
        .arg(&ledger)
        .output()
        .expect("report runs");
    assert!(out.status.success(), "report: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["totals"]["calls"], 1, "{report}");
    assert_eq!(report["totals"]["outputTokens"], want.output, "{report}");
}

/// A streamed model call sent through a tap of its own to an upstream the test answers: the
/// tap (with its upstream and the calls under way) and the agent's connection, with the
/// request as it reached the upstream.
async fn call_under_way() -> (Rig, RawUpstream, Receiver<usize>, RawClient, Arrival) {
    let mut upstream = RawUpstream::start().await.expect("an upstream");
    let rig = Rig::start(&[("r", upstream.url())]);
    let in_flight = rig.tap.flights.watch();
    let mut client = rig.client().await;
    client.send(&model_call(&rig.path("r", "/v1/messages"), true)).await.unwrap();
    let arrival = upstream.arrival().await.expect("the request reached the upstream");
    (rig, upstream, in_flight, client, arrival)
}

/// An event stream's head and `events` as one chunk (`end`: and the chunked body's end).
fn event_stream(events: &str, end: bool) -> Vec<u8> {
    let mut answer =
        response_head(200, &["content-type: text/event-stream", "transfer-encoding: chunked"]);
    answer.extend_from_slice(format!("{:x}\r\n{events}\r\n", events.len()).as_bytes());
    if end {
        answer.extend_from_slice(b"0\r\n\r\n");
    }
    answer
}

/// The tap alone: an agent that hangs up before the answer's headers came still has the answer
/// counted whole once the upstream sends it, and the call is under way until then.
#[tokio::test]
async fn tap_counts_an_answer_that_came_after_the_agent_hung_up() {
    let (mut rig, _upstream, in_flight, client, mut arrival) = call_under_way().await;
    assert_eq!(*in_flight.borrow(), 1, "the call is under way once it went upstream");
    drop(client);
    let whole =
        message_start("msg_after_hangup", 900, 100, 50, 1) + &stream_rest("Done", 12).concat();
    // The agent may be gone before these bytes are written: the tap takes them all the same.
    let _ = arrival.stream.write_all(&event_stream(&whole, true)).await;
    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_after_hangup"));
    assert!(call.complete, "the answer was read to its end: {call:#?}");
    let r = &call.record;
    assert_eq!((r.input, r.cache_read, r.output), (1050, 100, 12), "{call:#?}");
    assert!(settled(in_flight, PATIENCE).await, "the call stays under way after its report");
}

/// An agent that hangs up mid-answer while the upstream goes quiet (a cancelled turn): what was
/// billed before counts, marked incomplete, and the tap closes the upstream connection a moment
/// later rather than keep the provider generating for nobody.
#[tokio::test]
async fn tap_lets_the_upstream_go_a_moment_after_the_agent_hung_up() {
    let (mut rig, _upstream, in_flight, mut client, mut arrival) = call_under_way().await;
    let first = message_start("msg_quiet", 700, 0, 0, 1);
    arrival.stream.write_all(&event_stream(&first, false)).await.unwrap();
    assert_eq!(client.head().await.unwrap().status, 200);
    drop(client);
    let call = rig.next_call().await;
    assert_eq!(call.id.as_deref(), Some("msg_quiet"));
    assert!(!call.complete, "{call:#?}");
    assert_eq!(call.record.input, 700, "{call:#?}");
    // The upstream's side: the tap's connection ends (the stream held open would hang here).
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(PATIENCE, arrival.stream.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the tap kept the upstream connection open after the agent left");
    assert!(settled(in_flight, PATIENCE).await);
}
