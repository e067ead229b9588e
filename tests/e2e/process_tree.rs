//! The agent's process tree never outlives acp-usage, however acp-usage ends, and acp-usage ends
//! with its agent's status.
//!
//! The agent here is a shell that starts two children (one in a session of its own, both
//! ignoring SIGTERM), then becomes the scripted fake agent, also ignoring SIGTERM: the worst
//! case for a relay killed with SIGKILL, which leaves only its guard to end them.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec};
use acp_usage_tests::process_tree::{self, Proc};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;

const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-acp-agent");

/// The shell agent described above, written into `scratch`.
fn stubborn_agent(scratch: &Scratch) -> PathBuf {
    let script = scratch.path("stubborn-agent.sh");
    let text = format!(
        "#!/bin/sh\ntrap '' TERM\nsetsid sh -c \"trap '' TERM; sleep 300\" &\nsleep 301 &\nexec '{FAKE_AGENT}'\n"
    );
    std::fs::write(&script, text).expect("write the agent script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    script
}

#[test]
fn process_tree_gone_after_relay_sigkill() {
    let scratch = Scratch::new("tree").expect("scratch");
    let agent = CommandSpec {
        program: stubborn_agent(&scratch),
        args: Vec::new(),
        env: vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), scratch.home().display().to_string()),
            ("ACP_USAGE_LOG".to_owned(), "debug".to_owned()),
        ],
        cwd: scratch.work(),
        stderr_file: scratch.path("agent.stderr"),
    };
    let mut relayed = agent.wrapped(&relay_binary().expect("relay binary"), &[]);
    relayed.stderr_file = scratch.path("relay.stderr");
    let client = AcpClient::spawn(&relayed, ClientOptions::default()).expect("start the relay");
    client.initialize().expect("initialize through the relay");

    // The guard, the fake agent, its shell child, and both sleeps (the background children
    // may still be starting when the agent answers).
    let relay = client.pid() as i32;
    let sleeps = |procs: &[Proc]| procs.iter().filter(|p| p.comm == "sleep").count() == 2;
    let tree = process_tree::wait_for_tree(relay, Duration::from_secs(10), sleeps)
        .unwrap_or_else(|seen| panic!("both sleeps run under the relay: {seen:?}"));
    let tree: Vec<Proc> = tree.into_iter().filter(|p| p.pid != relay).collect();
    let _cleanup = process_tree::KillOnDrop(tree.clone());
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(relay, libc::SIGKILL) };

    let left = process_tree::wait_all_gone(&tree, Duration::from_secs(5));
    assert!(left.is_empty(), "5 s after the relay's SIGKILL these still run: {left:?}");
}

/// acp-usage's exit status for an agent command, with stdin closed at once.
fn relay_status(agent: &[&str]) -> std::process::ExitStatus {
    Command::new(relay_binary().expect("relay binary"))
        .arg("--")
        .args(agent)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the relay")
}

#[test]
fn process_tree_relay_exits_with_the_agents_status() {
    assert_eq!(relay_status(&["sh", "-c", "exit 7"]).code(), Some(7));
    // An agent killed by a signal: 128 + the signal, as a shell reports it.
    assert_eq!(relay_status(&["sh", "-c", "kill -9 $$"]).code(), Some(137));
    // A missing agent is acp-usage's own error, not the agent's.
    assert_eq!(relay_status(&["no-such-agent-anywhere"]).code(), Some(2));
}
