//! `acp-usage --tap` around a real agent (claude-agent-acp): what the tap never writes down, what
//! happens when it cannot start, and an upstream reached over TLS.
//!
//! - Keys, the tap's secret and the bodies of model calls reach neither a log line (at `trace`,
//!   every crate's) nor a `--record` file.
//! - A tap that cannot start (here: `SSL_CERT_FILE` names a file without one valid certificate,
//!   so the tap's HTTPS client cannot be built) is said on stderr, and the agent runs untapped.
//! - With the agent's base URL on `https://127.0.0.1:PORT` (a TLS front with a certificate from
//!   a test CA made at test time), the tap reaches the upstream when `SSL_CERT_FILE` names the
//!   CA, and every figure of the turns is exact and from the tap; without the CA among its roots
//!   the tap refuses the upstream (a 502), so the CA is what made it work.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::AcpClient;
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::{MockLlm, Script};
use acp_usage_tests::tls_front::TlsFront;

use crate::flows::{self, session_id};
use crate::support;
use crate::tap_proxy::{Rig, model_call};

const AGENT: Agent = Agent::Claude;
/// The key the lab gives Claude Code (`agents::agent_command`).
const API_KEY: &str = "sk-ant-mock-key";
/// A prompt whose words appear nowhere else.
const PROMPT: &str = "Say hi. The password of the day is quokka-lantern-5523.";
const PROMPT_WORDS: &str = "quokka-lantern-5523";

/// Every `*-relay-*.stderr` of the lab: the relay's log (and the agent's stderr, which the
/// relay shares).
fn relay_stderr(lab: &Lab) -> String {
    let mut logs: Vec<_> = std::fs::read_dir(lab.scratch.root())
        .expect("the scratch directory")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| {
            p.to_string_lossy().contains("-relay-") && p.extension() == Some("stderr".as_ref())
        })
        .collect();
    logs.sort();
    logs.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect()
}

/// `var` in the environment of the agent the relay (`relay_pid`) started: the first process
/// below the relay that is not acp-usage (its guard). Read from /proc while both run.
fn agent_env_var(relay_pid: u32, var: &str) -> Option<String> {
    // Every process's parent, from `pid (comm) state ppid ...` (the command name may hold spaces
    // and parentheses).
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    // The agent is the first process below the relay that is not acp-usage itself: on Linux the
    // relay's child is its guard, a fork of it with the relay's own environment.
    let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let relay_exe = exe(relay_pid);
    let mut level = vec![relay_pid];
    while !level.is_empty() {
        let below: Vec<u32> =
            parents.iter().filter(|(_, ppid)| level.contains(ppid)).map(|(pid, _)| *pid).collect();
        for &pid in &below {
            if exe(pid) == relay_exe {
                continue;
            }
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let prefix = format!("{var}=");
            return environ
                .split(|&b| b == 0)
                .filter_map(|entry| std::str::from_utf8(entry).ok())
                .find_map(|entry| entry.strip_prefix(&prefix))
                .map(str::to_owned);
        }
        level = below;
    }
    None
}

/// Starts the relay with `args`, opens a session and runs one turn of [`PROMPT`]; returns the
/// client (still running), the session's result and the agent's `ANTHROPIC_BASE_URL`.
fn one_turn(lab: &Lab, args: &[&str]) -> (AcpClient, serde_json::Value, String) {
    let client = lab.relayed_with(args).expect("start the relay");
    client.initialize().expect("initialize");
    let new_result = client.new_session(&lab.scratch.work()).expect("session/new");
    let session = session_id(&new_result).expect("session id");
    let base_url = agent_env_var(client.pid(), "ANTHROPIC_BASE_URL")
        .expect("the agent's ANTHROPIC_BASE_URL, from /proc");
    let turn = run_turn(&client, &lab.mock, &session, PROMPT).expect("the turn");
    assert!(
        turn.result["stopReason"] == "end_turn" && !turn.main_calls().is_empty(),
        "the turn did not run: {} {:#?}\n{}",
        turn.result,
        turn.calls,
        client.stderr_tail(40)
    );
    (client, turn.result, base_url)
}

#[test]
fn tap_keeps_keys_secrets_and_bodies_out_of_logs_and_recordings() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    lab.spec.set_env("ACP_USAGE_LOG", "trace");
    let record = lab.scratch.path("tapped.record.jsonl");
    let args = ["--tap", "--record", record.to_str().expect("a UTF-8 path")];
    let (client, result, base_url) = one_turn(&lab, &args);
    assert_eq!(result["usage"]["_meta"]["acpUsage"]["source"], "tap", "not tapped: {result}");
    // http://127.0.0.1:PORT/<secret>/anthropic
    let secret = base_url.split('/').nth(3).unwrap_or_default().to_owned();
    assert!(
        secret.len() == 48 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
        "the agent's base URL should hold the tap's secret: {base_url}"
    );
    // Words of the model calls' bodies that the ACP side never carries: Claude Code's system
    // prompt, as the mock received it.
    let acp: String = client.all_lines().iter().map(|line| line.text().into_owned()).collect();
    let system = lab
        .mock
        .main_since(0)
        .iter()
        .flat_map(|call| call.request_body["system"].as_array().cloned().unwrap_or_default())
        .filter_map(|block| block["text"].as_str().map(str::to_owned))
        .max_by_key(String::len)
        .expect("a system prompt in Claude Code's request");
    // The longest run of characters no escaping changes (a log line may show the body as JSON or
    // debug-quoted), cut to 48: found however the body was written down.
    let plain = |c: char| c.is_ascii_alphanumeric() || " ,.;:-()".contains(c);
    let run = system.split(|c: char| !plain(c)).max_by_key(|run| run.len()).unwrap_or_default();
    let body_words = run.trim()[..run.trim().len().min(48)].to_owned();
    assert!(body_words.len() >= 32 && !acp.contains(&body_words), "{body_words:?}");
    drop(client);

    let stderr = relay_stderr(&lab);
    let recorded = std::fs::read_to_string(&record).expect("the recording");
    // The checks below look at real output: the tap logged, at every level, and the recording
    // holds the session (the prompt is ACP traffic, recorded by design).
    assert!(stderr.contains("tap: listening"), "no tap line in the log:\n{stderr}");
    assert!(stderr.contains("tap: request"), "no tap debug line in the log:\n{stderr}");
    assert!(stderr.contains("TRACE"), "the log is not at trace level");
    assert!(recorded.contains(PROMPT_WORDS), "the recording lacks the session: {recorded}");
    for (what, needle) in
        [("the API key", API_KEY), ("the tap's secret", &secret), ("the request body", &body_words)]
    {
        assert!(!stderr.contains(needle), "{what} is in the relay's log");
        assert!(!recorded.contains(needle), "{what} is in the recording");
    }
    let leaked: Vec<&str> = stderr.lines().filter(|line| line.contains(PROMPT_WORDS)).collect();
    assert!(leaked.is_empty(), "the prompt is in the log:\n{}", leaked.join("\n"));
}

#[test]
fn tap_that_cannot_start_is_said_and_the_agent_runs_untapped() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    // A certificate file without one valid certificate: the tap's HTTPS client refuses to start
    // without roots it can trust (the agent itself talks plain HTTP to the mock).
    let bogus = lab.scratch.path("no-valid-certificate.pem");
    std::fs::write(&bogus, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        .expect("write the certificate file");
    lab.spec.set_env("SSL_CERT_FILE", bogus.display().to_string());
    let (client, result, base_url) = one_turn(&lab, &[]);
    assert_eq!(base_url, lab.mock.url(), "the agent should keep its own base URL");
    assert_ne!(result["usage"]["_meta"]["acpUsage"]["source"], "tap", "{result}");
    drop(client);
    let stderr = relay_stderr(&lab);
    assert!(
        stderr.contains("the LLM-API tap could not start") && stderr.contains("untapped"),
        "the relay did not say that the tap could not start:\n{stderr}"
    );
}

/// Writes the front's CA where `SSL_CERT_FILE` can name it.
fn write_ca(front: &TlsFront, path: &Path) {
    std::fs::write(path, front.ca_pem()).expect("write the test CA");
}

#[test]
fn claude_relay_turns_tapped_over_tls() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let front = TlsFront::start(SocketAddr::from((Ipv4Addr::LOCALHOST, lab.mock.port())))
        .expect("the TLS front");
    let ca = lab.scratch.path("test-ca.pem");
    write_ca(&front, &ca);
    lab.spec.set_env("ANTHROPIC_BASE_URL", front.url());
    lab.spec.set_env("SSL_CERT_FILE", ca.display().to_string());
    flows::relay_turns_in(crate::claude::EXPECT.tapped(), &lab, &[]);
    // The mock closes every connection: each call it served came through its own handshake.
    let served = lab.mock.calls().len();
    assert!(
        served >= 3 && front.handshakes() >= served,
        "{served} call(s) served, {} TLS handshake(s)",
        front.handshakes()
    );
}

#[tokio::test]
async fn tap_refuses_an_upstream_its_roots_do_not_vouch_for() {
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let front = TlsFront::start(SocketAddr::from((Ipv4Addr::LOCALHOST, mock.port())))
        .expect("the TLS front");
    // This process's roots: the system's (or its own SSL_CERT_FILE), never the test CA.
    let rig = Rig::start(&[("anthropic", front.url())]);
    let mut client = rig.client().await;
    let response = client
        .exchange(&model_call(&rig.path("anthropic", "/v1/messages"), true))
        .await
        .expect("a response");
    assert_eq!(response.head.status, 502, "{}", response.text());
    assert!(
        response.text().contains("could not be reached")
            && response.text().to_lowercase().contains("certificate"),
        "the 502 should say the upstream's certificate was refused: {}",
        response.text()
    );
    assert_eq!(front.handshakes(), 0);
    assert!(mock.calls().is_empty(), "the request went through: {:#?}", mock.calls());
}
