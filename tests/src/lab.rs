//! A lab for one agent: a mock LLM, a scratch HOME and project, and ways to start the agent
//! directly or behind the relay, as often as a test needs (a second process for `session/load`).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::agents::{self, Agent};
use crate::client::{AcpClient, ClientOptions, CommandSpec};
use crate::mock_llm::{Call, MockLlm, Script};
use crate::relay;
use crate::scratch::Scratch;

/// Everything one test needs around one agent. Drop the clients before the lab (declare them
/// after it): the scratch directory goes away with the lab.
#[derive(Debug)]
pub struct Lab {
    pub agent: Agent,
    pub mock: MockLlm,
    /// The agent's own command (no relay).
    pub spec: CommandSpec,
    pub options: ClientOptions,
    spawned: AtomicUsize,
    // Last, so that it is dropped after everything that may still write into it.
    pub scratch: Scratch,
}

impl Lab {
    /// Starts a mock serving `script` and prepares the agent's HOME and project directory.
    pub fn new(agent: Agent, script: Script) -> anyhow::Result<Lab> {
        let scratch = Scratch::new(agent.name())?;
        let mock = MockLlm::start(script)?;
        mock.log_to(&scratch.path("mock-calls.jsonl"))?;
        agents::write_project_files(&scratch.work())?;
        let spec = agents::agent_command(agent, &scratch, &mock.url())?;
        Ok(Lab {
            agent,
            mock,
            spec,
            options: ClientOptions::default(),
            spawned: AtomicUsize::new(0),
            scratch,
        })
    }

    /// Starts the agent itself.
    pub fn direct(&self) -> anyhow::Result<AcpClient> {
        let mut spec = self.spec.clone();
        spec.stderr_file = self.next_stderr_file("direct");
        AcpClient::spawn(&spec, self.options)
    }

    /// Starts `acp-usage -- <agent>` with the agent's environment (plus the relay's log level).
    pub fn relayed(&self) -> anyhow::Result<AcpClient> {
        self.relayed_with(&[])
    }

    /// Like [`Lab::relayed`], with relay options before the `--`.
    pub fn relayed_with(&self, relay_args: &[&str]) -> anyhow::Result<AcpClient> {
        let mut spec = self.spec.wrapped(&relay::relay_binary()?, relay_args);
        spec.stderr_file = self.next_stderr_file("relay");
        // A level the lab's spec sets (a test that needs one) wins over the tests' own.
        if spec.env_var("ACP_USAGE_LOG").is_none() {
            let level = std::env::var("ACP_USAGE_LOG").unwrap_or_else(|_| "debug".to_owned());
            spec.set_env("ACP_USAGE_LOG", level);
        }
        spec.set_env("RUST_BACKTRACE", "1");
        // Claude Code writes its transcript up to ~0.5 s after answering on a loaded machine; a
        // wait that runs out makes the turn's figures the agent's, which the tests would call
        // wrong. The waits actually taken are reported in the figures.
        spec.set_env("ACP_USAGE_TRANSCRIPT_WAIT_MS", "10000");
        AcpClient::spawn(&spec, self.options)
    }

    fn next_stderr_file(&self, kind: &str) -> std::path::PathBuf {
        let n = self.spawned.fetch_add(1, Ordering::SeqCst);
        self.scratch.path(&format!("{}-{kind}-{n}.stderr", self.agent.name()))
    }
}

/// What one prompt turn produced.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The `session/prompt` result.
    pub result: Value,
    /// `update` objects of every `session/update` during the turn, in order.
    pub updates: Vec<Value>,
    /// Every mock call made during the turn.
    pub calls: Vec<Call>,
}

impl Turn {
    pub fn usage_updates(&self) -> Vec<&Value> {
        self.updates.iter().filter(|update| update["sessionUpdate"] == "usage_update").collect()
    }

    pub fn main_calls(&self) -> Vec<&Call> {
        self.calls.iter().filter(|call| call.kind == crate::mock_llm::CallKind::Main).collect()
    }

    pub fn billed_calls(&self) -> Vec<&Call> {
        self.calls.iter().filter(|call| call.kind.is_billed()).collect()
    }
}

/// Runs one prompt and collects what it produced.
pub fn run_turn(
    client: &AcpClient,
    mock: &MockLlm,
    session_id: &str,
    text: &str,
) -> anyhow::Result<Turn> {
    run_turn_from(client, mock, mock.mark(), session_id, text)
}

/// [`run_turn`] whose calls are those the mock logged from `call_mark` on (a mark the caller
/// took before reading what came before it).
pub fn run_turn_from(
    client: &AcpClient,
    mock: &MockLlm,
    call_mark: usize,
    session_id: &str,
    text: &str,
) -> anyhow::Result<Turn> {
    let line_mark = client.mark();
    let result = client.prompt(session_id, text)?;
    let updates = client
        .notifications_since(line_mark)
        .into_iter()
        .map(|params| params["update"].clone())
        .collect();
    Ok(Turn { result, updates, calls: mock.calls_since(call_mark) })
}
