//! The agent process: spawned in its own process group, ended as a group.
//!
//! Agents are often launched through wrappers (`npx`, `sh -c`, node shims that start a native
//! binary), so killing only the direct child would leave the real agent running. The child gets
//! its own process group; signals and the final kill go to the whole group. Where it can, the
//! group's leader is a guard ([`super::guard`]) that ends the group if acp-usage itself dies.
//!
//! Windows has no process groups to signal: the agent is put in a job object that kills
//! everything in it when its last handle closes (acp-usage's, however acp-usage ends: the
//! guard's work, done by the kernel), and ending the group is terminating the job.

use std::process::ExitStatus;
use std::time::Duration;

use anyhow::Context;

/// A running agent: its process group, and its exit status once it has exited.
#[derive(Debug)]
pub struct Agent {
    /// Its process group id (= its pid); on Windows its pid.
    pub pgid: i32,
    /// Resolves when the direct child exits; a thread or task waits for it.
    pub exited: tokio::sync::oneshot::Receiver<std::io::Result<ExitStatus>>,
    /// Kills a direct child still running when the agent is dropped; `None` under a guard,
    /// which is never killed on its own (it ends with the agent, or ends the agent's tree when
    /// this process goes).
    #[cfg(unix)]
    _kill_on_drop: Option<KillOnDrop>,
    /// The job object the agent's tree runs in; dropping it ends the tree.
    #[cfg(windows)]
    job: job::Job,
}

/// What is sent to the agent's group: the signal on Unix; on Windows see
/// [`Agent::signal_group`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP (the terminal or the launcher's parent went away); on Windows, as `Terminate`.
    Hangup,
    /// SIGKILL.
    Kill,
}

/// Where the relay writes the agent's stdin.
#[cfg(unix)]
pub type AgentStdin = tokio::net::unix::pipe::Sender;
/// Where the relay reads the agent's stdout.
#[cfg(unix)]
pub type AgentStdout = tokio::net::unix::pipe::Receiver;
/// Where the relay writes the agent's stdin.
#[cfg(windows)]
pub type AgentStdin = tokio::process::ChildStdin;
/// Where the relay reads the agent's stdout.
#[cfg(windows)]
pub type AgentStdout = tokio::process::ChildStdout;

/// The agent's pipes, for the relay tasks.
#[derive(Debug)]
pub struct Pipes {
    /// Where the relay writes what the editor sends.
    pub stdin: AgentStdin,
    /// Where the relay reads what the agent sends.
    pub stdout: AgentStdout,
}

/// An agent started before the runtime: on Unix it runs already, and [`Spawned::register`]
/// hands its pipes to the runtime; on Windows it is started there.
#[derive(Debug)]
pub struct Spawned {
    #[cfg(unix)]
    pgid: i32,
    #[cfg(unix)]
    stdin: std::os::fd::OwnedFd,
    #[cfg(unix)]
    stdout: std::os::fd::OwnedFd,
    #[cfg(unix)]
    exited: super::spawn::Exited,
    #[cfg(unix)]
    kill_on_drop: Option<KillOnDrop>,
    #[cfg(windows)]
    argv: Vec<String>,
    #[cfg(windows)]
    env: Vec<(String, String)>,
}

/// Starts `argv` with piped stdin/stdout (its stderr is acp-usage's) in a process group of its
/// own, with `env` added to its environment: under `guard` when there is one (Linux, see
/// [`super::guard`]), else directly.
#[cfg(unix)]
pub fn start(
    argv: &[String],
    env: &[(String, String)],
    guard: Option<super::guard::Guard>,
) -> anyhow::Result<Spawned> {
    use super::spawn::{self, Prepared, Stdio};
    use std::os::fd::AsRawFd;

    let program = argv.first().context("no agent command given")?;
    let failed = || format!("cannot start the agent `{program}`");
    let (pgid, stdin, stdout, kill_on_drop) = match guard {
        Some(guard) => {
            // The guard starts the agent itself, so a missing program must be found missing
            // here to keep the error the same.
            if find_program(program).is_none() {
                return Err(not_found()).with_context(failed);
            }
            let (pid, stdin, stdout) = guard.start(argv, env).with_context(failed)?;
            (pid, stdin, stdout, false)
        }
        None => {
            let cmd = Prepared::new(argv, env).with_context(failed)?;
            let stdio = Stdio::pipes().context("cannot make the agent's pipes")?;
            let ends = Some((stdio.agent_in.as_raw_fd(), stdio.agent_out.as_raw_fd()));
            let pid = spawn::spawn(&cmd, ends, true).with_context(failed)?;
            // The agent's ends are the agent's alone now: the relay sees its stdout end when
            // the agent's copy closes.
            (pid, stdio.relay_in, stdio.relay_out, true)
        }
    };
    let (exited, reaped) = spawn::wait_in_thread(pgid).context("cannot wait for the agent")?;
    Ok(Spawned {
        pgid,
        stdin,
        stdout,
        exited,
        kill_on_drop: kill_on_drop.then(|| KillOnDrop { pid: pgid, reaped }),
    })
}

/// Keeps the command: the agent is started by [`Spawned::register`], inside the runtime.
#[cfg(windows)]
pub fn start(
    argv: &[String],
    env: &[(String, String)],
    _guard: Option<super::guard::Guard>,
) -> anyhow::Result<Spawned> {
    argv.first().context("no agent command given")?;
    Ok(Spawned { argv: argv.to_vec(), env: env.to_vec() })
}

impl Spawned {
    /// The agent and its pipes, registered with the runtime's poller; inside the runtime.
    #[cfg(unix)]
    pub fn register(self) -> anyhow::Result<(Agent, Pipes)> {
        use tokio::net::unix::pipe;
        let Spawned { pgid, stdin, stdout, exited, kill_on_drop } = self;
        let agent = Agent { pgid, exited, _kill_on_drop: kill_on_drop };
        let stdin = pipe::Sender::from_owned_fd(stdin).context("the agent's stdin")?;
        let stdout = pipe::Receiver::from_owned_fd(stdout).context("the agent's stdout")?;
        Ok((agent, Pipes { stdin, stdout }))
    }

    /// Starts the agent in a job object; inside the runtime.
    #[cfg(windows)]
    pub fn register(self) -> anyhow::Result<(Agent, Pipes)> {
        use std::process::Stdio;
        let (program, args) = self.argv.split_first().context("no agent command given")?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // Made before the spawn, so a failure starts nothing.
        let job = job::Job::new().context("cannot make a job object for the agent")?;
        let mut child =
            cmd.spawn().with_context(|| format!("cannot start the agent `{program}`"))?;
        // The agent runs for a moment before it is in the job; a child it starts in that
        // moment (before a node wrapper has even loaded) would be outside. Without the job
        // nothing would end the agent's tree, so the agent does not run without it.
        if let Err(err) = child.raw_handle().map_or(Ok(()), |h| job.assign(h)) {
            let _ = child.start_kill();
            return Err(err).context("cannot put the agent in its job object");
        }
        let pgid = child.id().context("the agent exited at once")? as i32;
        let stdin = child.stdin.take().context("agent stdin")?;
        let stdout = child.stdout.take().context("agent stdout")?;
        let (tx, exited) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(child.wait().await);
        });
        Ok((Agent { pgid, exited, job }, Pipes { stdin, stdout }))
    }
}

/// Starts `argv` as [`start`] does without a guard, and registers it; inside the runtime.
pub fn spawn_with(argv: &[String], env: &[(String, String)]) -> anyhow::Result<(Agent, Pipes)> {
    start(argv, env, None)?.register()
}

/// Kills a direct child (no guard) still running when its relay lets go of it, as std's
/// `kill_on_drop` would: a relay that fails after the start leaves nothing behind.
#[cfg(unix)]
#[derive(Debug)]
struct KillOnDrop {
    pid: i32,
    /// Set by the waiting thread once the child is reaped.
    reaped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(unix)]
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.reaped.load(std::sync::atomic::Ordering::Acquire) {
            // SAFETY: kill has no memory-safety preconditions; the child is not reaped, so the
            // pid is still its.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

/// The error a spawn of a missing program gives.
#[cfg(unix)]
fn not_found() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::ENOENT)
}

/// Where `program` would be started from: itself when it names a path, else the first
/// executable of that name on `PATH`.
#[cfg(unix)]
fn find_program(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        // The guard reports why an existing file does not start.
        let p = std::path::PathBuf::from(program);
        return p.exists().then_some(p);
    }
    crate::agents::installed::on_path(&std::env::var_os("PATH")?, program, |_| true)
}

impl Agent {
    /// Sends `signal` to the agent's whole process group.
    #[cfg(unix)]
    pub fn signal_group(&self, signal: Signal) {
        let signal = match signal {
            Signal::Interrupt => libc::SIGINT,
            Signal::Terminate => libc::SIGTERM,
            Signal::Hangup => libc::SIGHUP,
            Signal::Kill => libc::SIGKILL,
        };
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

    /// Windows: an interrupt is left alone (a console's Ctrl-C reaches every process on the
    /// console, the agent's included, and without a console there is none to pass on);
    /// terminating and killing are both the job's termination, there being no request to end
    /// that a console program must see.
    #[cfg(windows)]
    pub fn signal_group(&self, signal: Signal) {
        if signal == Signal::Interrupt {
            return;
        }
        if let Err(err) = self.job.terminate() {
            tracing::debug!(pid = self.pgid, ?signal, "TerminateJobObject: {err}");
        }
    }
}

/// Ends a process group that did not exit in time: SIGTERM, then SIGKILL after `term_grace`.
pub async fn end_group(agent: &mut Agent, term_grace: Duration) -> std::io::Result<ExitStatus> {
    agent.signal_group(Signal::Terminate);
    let res = match tokio::time::timeout(term_grace, &mut agent.exited).await {
        Ok(res) => res,
        Err(_) => {
            agent.signal_group(Signal::Kill);
            (&mut agent.exited).await
        }
    };
    res.unwrap_or_else(|_| Err(std::io::Error::other("the agent's waiter went away")))
}

/// The exit code acp-usage ends with for an agent status: its code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), signal_of(status)) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => 1,
    }
}

/// A human description of an exit status, for logs and error messages.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), signal_of(status)) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "an unknown status".to_string(),
    }
}

/// The signal that ended a process.
#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// No signals off Unix: a Windows status always has a code (a terminated job's is 1).
#[cfg(not(unix))]
fn signal_of(_status: ExitStatus) -> Option<i32> {
    None
}

#[cfg(windows)]
mod job {
    //! The agent's job object: every process the agent starts is in it too, and all of them
    //! are killed when its one handle (this process's) closes.

    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};

    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject, TerminateJobObject,
    };

    /// The exit code the agent's processes get when the job is terminated.
    const TERMINATED: u32 = 1;

    /// A job object that kills its processes when its handle closes.
    #[derive(Debug)]
    pub(super) struct Job(OwnedHandle);

    impl Job {
        pub(super) fn new() -> std::io::Result<Job> {
            // SAFETY: no security attributes and no name, both of which may be null. The
            // handle is not inheritable, so the agent cannot keep the job alive.
            let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
            if handle.is_null() {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: a handle just opened, owned by nothing else.
            let job = Job(unsafe { OwnedHandle::from_raw_handle(handle) });
            let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
            info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            // SAFETY: the structure this information class takes, with its size; it is only
            // read during the call.
            let ok = unsafe {
                SetInformationJobObject(
                    job.raw(),
                    JobObjectExtendedLimitInformation,
                    (&raw const info).cast(),
                    size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            };
            if ok == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(job)
        }

        /// Puts a process in the job; what it starts from then on is in it too.
        pub(super) fn assign(&self, process: RawHandle) -> std::io::Result<()> {
            // SAFETY: both handles are open for the call (the caller holds the process's).
            if unsafe { AssignProcessToJobObject(self.raw(), process) } == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }

        /// Kills every process in the job.
        pub(super) fn terminate(&self) -> std::io::Result<()> {
            // SAFETY: the handle is open while `self` lives.
            if unsafe { TerminateJobObject(self.raw(), TERMINATED) } == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }

        fn raw(&self) -> RawHandle {
            self.0.as_raw_handle()
        }
    }
}
