//! The agent process: spawned in its own process group, ended as a group.
//!
//! Agents are often launched through wrappers (`npx`, `sh -c`, node shims that start a native
//! binary), so killing only the direct child would leave the real agent running. The child gets
//! its own process group; signals and the final kill go to the whole group. Where it can, the
//! group's leader is a guard ([`super::guard`]) that ends the group if acp-usage itself dies.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use tokio::process::{ChildStdin, ChildStdout, Command};

/// A running agent: its process group, and its exit status once it has exited.
#[derive(Debug)]
pub struct Agent {
    /// Its process group id (= its pid).
    pub pgid: i32,
    /// Resolves when the direct child exits; a task owns the child and waits for it.
    pub exited: tokio::sync::oneshot::Receiver<std::io::Result<ExitStatus>>,
}

/// The agent's pipes, taken out of the child for the relay tasks.
#[derive(Debug)]
pub struct Pipes {
    /// Where the relay writes what the editor sends.
    pub stdin: ChildStdin,
    /// Where the relay reads what the agent sends.
    pub stdout: ChildStdout,
}

/// Starts `argv` with piped stdin/stdout; its stderr is acp-usage's stderr.
pub fn spawn(argv: &[String]) -> anyhow::Result<(Agent, Pipes)> {
    spawn_with(argv, &[], false)
}

/// [`spawn`] with variables added to the agent's environment, and under a guard when `guard`.
pub fn spawn_with(
    argv: &[String],
    env: &[(String, String)],
    guard: bool,
) -> anyhow::Result<(Agent, Pipes)> {
    let (program, args) = argv.split_first().context("no agent command given")?;
    let mut cmd = if guard {
        // The guard starts the agent itself, so a missing program must be found missing here
        // to keep the error the same.
        if find_program(program).is_none() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT))
                .with_context(|| format!("cannot start the agent `{program}`"));
        }
        let wrapped = super::guard::wrap(argv).context("cannot find acp-usage's own executable")?;
        let mut cmd = Command::new(&wrapped[0]);
        cmd.args(&wrapped[1..]);
        cmd
    } else {
        let mut cmd = Command::new(program);
        cmd.args(args);
        cmd
    };
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        // A guard is never killed on its own: it ends with the agent, or ends the agent's
        // tree when this process goes. Without one, the direct child at least goes.
        .kill_on_drop(!guard);
    let mut child = cmd.spawn().with_context(|| format!("cannot start the agent `{program}`"))?;
    let pgid = child.id().context("the agent exited at once")? as i32;
    let stdin = child.stdin.take().context("agent stdin")?;
    let stdout = child.stdout.take().context("agent stdout")?;
    let (tx, exited) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(child.wait().await);
    });
    Ok((Agent { pgid, exited }, Pipes { stdin, stdout }))
}

/// Where `program` would be started from: itself when it names a path, else the first
/// executable of that name on `PATH`.
fn find_program(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        // The guard reports why an existing file does not start.
        let p = std::path::PathBuf::from(program);
        return p.exists().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| runnable(p))
}

impl Agent {
    /// Sends `signal` to the agent's whole process group.
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: killpg has no memory-safety preconditions; a stale group id only fails.
        let rc = unsafe { libc::killpg(self.pgid, signal) };
        if rc != 0 {
            tracing::debug!(
                pgid = self.pgid,
                signal,
                "killpg: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Ends a process group that did not exit in time: SIGTERM, then SIGKILL after `term_grace`.
pub async fn end_group(agent: &mut Agent, term_grace: Duration) -> std::io::Result<ExitStatus> {
    agent.signal_group(libc::SIGTERM);
    let res = match tokio::time::timeout(term_grace, &mut agent.exited).await {
        Ok(res) => res,
        Err(_) => {
            agent.signal_group(libc::SIGKILL);
            (&mut agent.exited).await
        }
    };
    res.unwrap_or_else(|_| Err(std::io::Error::other("the agent's waiter went away")))
}

/// The exit code acp-usage ends with for an agent status: its code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => 1,
    }
}

/// A human description of an exit status, for logs and error messages.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "an unknown status".to_string(),
    }
}
