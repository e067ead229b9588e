//! OTLP export with a real agent and a real collector: acp-usage relays codex-acp sessions,
//! its exporter sends the ledger through rotel (the Rust OpenTelemetry collector, from
//! `.ci/install-rotel.sh`) to the tests' receiver, which decodes with the official protobuf
//! definitions.
//!
//! Guarantees checked:
//! - with the collector up, down and up again during a session, what the receiver decoded after
//!   the final flush is every call the mock billed, exactly once (by call id), with the counts,
//!   costs and attributes; the cumulative metrics equal the same sums;
//! - two acp-usage processes sharing a ledger export each call once;
//! - `acp-usage export --otlp` sends a backlog left by runs that had no collector, and a second
//!   run sends nothing more;
//! - a wrong endpoint and a 4xx from the collector are a clear log line, never a stalled relay.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::Call;
use acp_usage_tests::otlp::{LogEntry, OtlpReceiver, Rotel, wait_until};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::Value;

use crate::flows;
use crate::support;

const AGENT: Agent = Agent::Codex;
const WAIT: Duration = Duration::from_secs(30);

/// A lab whose relays write `ledger` and export to `endpoint` (when given) every 200 ms.
fn lab(ledger: &Path, endpoint: Option<&str>) -> Lab {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    if let Some(e) = endpoint {
        lab.spec.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", e.to_string());
        lab.spec.set_env("OTEL_METRIC_EXPORT_INTERVAL", "200".to_string());
        lab.spec.set_env("OTEL_RESOURCE_ATTRIBUTES", "team=agents-e2e".to_string());
    }
    lab
}

fn open(lab: &Lab, client: &AcpClient) -> String {
    client.initialize().expect("initialize");
    flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap()
}

fn billed(lab: &Lab) -> Vec<Call> {
    lab.mock.calls().into_iter().filter(|c| c.kind.is_billed()).collect()
}

/// The relay's log (its stderr files in the lab).
fn relay_stderr(lab: &Lab) -> String {
    let mut logs: Vec<_> = std::fs::read_dir(lab.scratch.root())
        .expect("the scratch directory")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| p.to_string_lossy().contains("-relay-"))
        .collect();
    logs.sort();
    logs.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect()
}

fn int(e: &LogEntry, key: &str) -> u64 {
    e.attributes.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("{key} in {e:?}"))
}

/// The call log records, by call id; panics on a call sent twice.
fn calls_by_id(receiver: &OtlpReceiver) -> BTreeMap<u64, LogEntry> {
    let mut by_id = BTreeMap::new();
    for e in receiver.log_records().into_iter().filter(|e| e.event_name == "acp_usage.call") {
        let id = int(&e, "acp_usage.call.id");
        assert!(by_id.insert(id, e).is_none(), "call {id} was exported twice");
    }
    by_id
}

/// Checks the exported calls against what the mocks billed: count, token sums, cost.
fn check_calls(by_id: &BTreeMap<u64, LogEntry>, served: &[&Call]) {
    assert_eq!(by_id.len(), served.len(), "exported calls vs billed: {by_id:#?}");
    let want = support::sum(served);
    let sum = |k: &str| by_id.values().map(|e| int(e, k)).sum::<u64>();
    assert_eq!(
        (sum("gen_ai.usage.input_tokens"), sum("gen_ai.usage.output_tokens")),
        (want.input, want.output)
    );
    assert_eq!(sum("gen_ai.usage.cache_read.input_tokens"), want.cache_read);
    let cost: f64 =
        by_id.values().map(|e| e.attributes["acp_usage.cost"].as_f64().expect("cost")).sum();
    let want_cost = support::catalog_cost(served.iter().copied());
    assert!((cost - want_cost).abs() < 1e-9, "exported cost {cost} vs the catalog's {want_cost}");
}

/// The latest cumulative value of `name` with `gen_ai.token.type` = `kind` (any kind when
/// `None`), summed over series.
fn latest_sum(receiver: &OtlpReceiver, name: &str, kind: Option<&str>) -> f64 {
    receiver
        .latest(name)
        .iter()
        .filter(|p| kind.is_none_or(|k| p.attributes.get("gen_ai.token.type") == Some(&k.into())))
        .map(|p| p.value.as_f64().unwrap_or(0.0))
        .sum()
}

#[test]
fn otlp_collector_down_and_up_loses_and_doubles_nothing() {
    let scratch = Scratch::new("otlp-updown").expect("scratch");
    let receiver = OtlpReceiver::start().expect("receiver");
    let mut rotel = Rotel::start(&scratch.path("rotel"), &receiver.url()).expect("rotel");
    let ledger = scratch.path("ledger.db");
    let lab = lab(&ledger, Some(&rotel.url()));
    let client = lab.relayed().expect("relay");
    let id = open(&lab, &client);

    // Turn 1 with the collector up: its calls arrive while the session goes on.
    run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn 1");
    let first = billed(&lab).len();
    wait_until("turn 1's calls at the receiver", WAIT, || calls_by_id(&receiver).len() == first)
        .expect("exported while up");

    // Turn 2 with the collector down: the relay does not wait for it.
    rotel.stop().expect("stop rotel");
    run_turn(&client, &lab.mock, &id, flows::TOOL_PROMPT).expect("turn 2 with no collector");
    wait_until("a failed export in the log", WAIT, || {
        relay_stderr(&lab).contains("OTLP export failed")
    })
    .expect("the failure is logged");
    assert_eq!(calls_by_id(&receiver).len(), first, "nothing new arrived while down");

    // Up again: the backlog goes out, and the end of the session flushes the rest.
    rotel.start_again().expect("restart rotel");
    drop(client);
    let served = billed(&lab);
    let all: Vec<&Call> = served.iter().collect();
    wait_until("every call at the receiver", WAIT, || calls_by_id(&receiver).len() >= all.len())
        .expect("the backlog arrived");
    let by_id = calls_by_id(&receiver);
    check_calls(&by_id, &all);

    // Attributes: the session, the model and its provider, the agent, the project, the role.
    let e = by_id.values().next().expect("a call");
    assert_eq!(e.attributes["gen_ai.conversation.id"], id.as_str());
    assert_eq!(e.attributes["gen_ai.provider.name"], "openai", "{e:?}");
    assert!(e.attributes["gen_ai.request.model"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(e.attributes["acp_usage.role"], "main");
    assert_eq!(e.attributes["acp_usage.exact"], true);
    assert!(e.attributes["acp_usage.agent.name"].as_str().is_some_and(|a| a.contains("codex")));
    assert!(e.attributes["acp_usage.project"].as_str().is_some());
    assert_eq!(e.resource["service.name"], "acp-usage");
    assert_eq!(e.resource["team"], "agents-e2e");
    assert!(e.resource.contains_key("service.version") && e.resource.contains_key("host.name"));
    // Nothing of the conversation: no attribute holds the prompt.
    let text = format!("{by_id:?}");
    assert!(!text.contains(flows::TOOL_PROMPT), "a prompt was exported");

    // The cumulative metrics, after the final flush, are the same sums.
    let want = support::sum(&all);
    wait_until("the final metrics", WAIT, || {
        latest_sum(&receiver, "acp_usage.tokens", Some("input")) == want.input as f64
    })
    .expect("cumulative input tokens");
    assert_eq!(latest_sum(&receiver, "acp_usage.tokens", Some("output")), want.output as f64);
    assert_eq!(latest_sum(&receiver, "acp_usage.calls", None), all.len() as f64);
    assert_eq!(latest_sum(&receiver, "acp_usage.turns", None), 2.0);
    let cost = latest_sum(&receiver, "acp_usage.cost", None);
    let want_cost = support::catalog_cost(all.iter().copied());
    assert!((cost - want_cost).abs() < 1e-9, "{cost} vs {want_cost}");
    let hist = receiver.latest("gen_ai.client.token.usage");
    assert!(!hist.is_empty(), "no gen_ai.client.token.usage");
    assert!(receiver.errors().is_empty(), "undecodable requests: {:?}", receiver.errors());
}

#[test]
fn otlp_two_processes_sharing_a_ledger_export_each_call_once() {
    let scratch = Scratch::new("otlp-two").expect("scratch");
    let receiver = OtlpReceiver::start().expect("receiver");
    let ledger = scratch.path("ledger.db");
    let labs = [lab(&ledger, Some(&receiver.url())), lab(&ledger, Some(&receiver.url()))];
    std::thread::scope(|s| {
        for lab in &labs {
            s.spawn(move || {
                let client = lab.relayed().expect("relay");
                let id = open(lab, &client);
                for p in [flows::PLAIN_PROMPT, flows::TOOL_PROMPT] {
                    run_turn(&client, &lab.mock, &id, p).expect("turn");
                }
            });
        }
    });
    let served: Vec<Call> = labs.iter().flat_map(billed).collect();
    let all: Vec<&Call> = served.iter().collect();
    wait_until("every call of both", WAIT, || calls_by_id(&receiver).len() >= all.len())
        .expect("both processes' calls");
    check_calls(&calls_by_id(&receiver), &all);
}

/// `acp-usage export --otlp` of `ledger` to `endpoint` (no config file).
fn export(ledger: &Path, endpoint: &str) -> std::process::Output {
    Command::new(relay_binary().expect("binary"))
        .args(["export", "--otlp", "--ledger"])
        .arg(ledger)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env_remove("ACP_USAGE_CONFIG")
        .env("XDG_CONFIG_HOME", ledger.parent().expect("the scratch dir"))
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
        .output()
        .expect("export runs")
}

#[test]
fn otlp_export_sends_a_backlog_and_failures_are_clear() {
    let scratch = Scratch::new("otlp-backlog").expect("scratch");
    let ledger = scratch.path("ledger.db");

    // A run with an endpoint where nothing listens: its turn completes all the same, and the
    // log says why nothing was exported.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let dead = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let lab = lab(&ledger, Some(&dead));
    {
        let client = lab.relayed().expect("relay");
        let id = open(&lab, &client);
        for p in [flows::PLAIN_PROMPT, flows::TOOL_PROMPT] {
            run_turn(&client, &lab.mock, &id, p).expect("a turn with no collector");
        }
    }
    let log = relay_stderr(&lab);
    assert!(
        log.contains("OTLP export failed") && log.contains("cannot reach the collector"),
        "no clear line about the unreachable collector:\n{log}"
    );
    let served = billed(&lab);
    let all: Vec<&Call> = served.iter().collect();

    // A collector that refuses (4xx): a clear error, and nothing acknowledged.
    let receiver = OtlpReceiver::start().expect("receiver");
    receiver.respond_with(400);
    let out = export(&ledger, &receiver.url());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "export succeeded against a 400");
    assert!(err.contains("400"), "the error names the status: {err}");

    // The collector accepts: the whole backlog, once; a second export sends no call again.
    receiver.respond_with(200);
    let out = export(&ledger, &receiver.url());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_calls(&calls_by_id(&receiver), &all);
    let out = export(&ledger, &receiver.url());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_calls(&calls_by_id(&receiver), &all);
    assert!(String::from_utf8_lossy(&out.stderr).contains("exported 0 calls"));
}

#[test]
fn otlp_export_over_tls_trusts_the_configured_ca_only() {
    let scratch = Scratch::new("otlp-tls").expect("scratch");
    let ledger = scratch.path("ledger.db");
    let lab = lab(&ledger, None);
    {
        let client = lab.relayed().expect("relay");
        let id = open(&lab, &client);
        run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("a turn");
    }
    let served = billed(&lab);
    let receiver = OtlpReceiver::start().expect("receiver");
    let front = acp_usage_tests::tls_front::TlsFront::start(receiver.addr()).expect("tls front");
    let ca = scratch.path("ca.pem");
    std::fs::write(&ca, front.ca_pem()).expect("the CA file");
    let https = front.url();
    assert!(https.starts_with("https://"), "{https}");

    // Without the CA, the collector's certificate is not trusted: a clear error, nothing sent.
    let out = export(&ledger, &https);
    assert!(!out.status.success(), "an untrusted collector was accepted");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach the collector"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(receiver.logs_requests().is_empty());

    // With it (OTEL_EXPORTER_OTLP_CERTIFICATE), every call goes through TLS.
    let out = Command::new(relay_binary().expect("binary"))
        .args(["export", "--otlp", "--ledger"])
        .arg(&ledger)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &https)
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)
        .env_remove("ACP_USAGE_CONFIG")
        .env("XDG_CONFIG_HOME", scratch.root())
        .output()
        .expect("export runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all: Vec<&Call> = served.iter().collect();
    check_calls(&calls_by_id(&receiver), &all);
    assert!(front.handshakes() > 0);
}
