//! Starting the agent on Unix: its stdio pipes, `posix_spawnp`, and a thread that waits for it.
//!
//! Not std's or tokio's `Command`: the guard ([`super::guard`]) is a fork of the relay, which
//! those cannot make, and it starts the agent with the same call as the relay does without a
//! guard. `posix_spawnp` (glibc and musl: a vfork-like clone) empties the signal mask and puts
//! back the signals Rust ignores, which std's `Command` can only do through a `pre_exec` hook
//! that makes it fork the whole relay; the agent's start is on the editor's `initialize` round
//! trip.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The agent's command line and environment, made ready for `posix_spawnp` before any fork.
#[derive(Debug)]
pub struct Prepared {
    args: Vec<CString>,
    env: Vec<CString>,
}

impl Prepared {
    /// `argv`, and this process's environment with `env` set on top of it.
    pub fn new(argv: &[String], env: &[(String, String)]) -> std::io::Result<Prepared> {
        let nul = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in it");
        let c = |bytes: &[u8]| CString::new(bytes).map_err(|_| nul());
        let args = argv.iter().map(|a| c(a.as_bytes())).collect::<Result<Vec<_>, _>>()?;
        if args.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command"));
        }
        let inherited = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(set, _)| k.as_bytes() == set.as_bytes()))
            .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()));
        let set = env.iter().map(|(k, v)| c(format!("{k}={v}").as_bytes()));
        let env = inherited.chain(set).collect::<Result<Vec<_>, _>>()?;
        Ok(Prepared { args, env })
    }

    /// The program, for the guard's messages.
    #[cfg(target_os = "linux")]
    pub fn program(&self) -> std::borrow::Cow<'_, str> {
        self.args[0].to_string_lossy()
    }
}

/// The agent's stdio: the ends the agent gets and the ends the relay keeps.
#[derive(Debug)]
pub struct Stdio {
    /// The agent's stdin (read end).
    pub agent_in: OwnedFd,
    /// The agent's stdout (write end).
    pub agent_out: OwnedFd,
    /// Where the relay writes the agent's stdin.
    pub relay_in: OwnedFd,
    /// Where the relay reads the agent's stdout.
    pub relay_out: OwnedFd,
}

impl Stdio {
    /// Two pipes, every end close-on-exec and above the standard fds.
    pub fn pipes() -> std::io::Result<Stdio> {
        let (agent_in, relay_in) = pipe()?;
        let (relay_out, agent_out) = pipe()?;
        Ok(Stdio { agent_in, agent_out, relay_in, relay_out })
    }
}

/// A pipe's (read, write) ends, close-on-exec and above the standard fds.
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array it is given.
    #[cfg(target_os = "linux")]
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    // No pipe2 on macOS: close-on-exec is set just after (no process is started meanwhile on
    // this thread, and no other thread of the relay starts one).
    // SAFETY: pipe writes two fds into the array it is given.
    #[cfg(not(target_os = "linux"))]
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just made and are owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    #[cfg(not(target_os = "linux"))]
    for fd in [&r, &w] {
        // SAFETY: fcntl on an fd owned here.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// `fd`, moved above 2 when a closed standard fd made it one of them: spawning dups the agent's
/// ends onto 0 and 1, which must not already be them (a dup onto itself keeps close-on-exec).
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl on an fd this function owns; the new fd is owned by the result.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` was just made.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// The signals the agent starts with at their default action: those the guard takes for
/// itself, and SIGPIPE, which Rust ignores in its own processes.
pub fn default_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGUSR1,
        ] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Starts `cmd` with `posix_spawnp`: its signal mask empty and [`default_signals`] at their
/// defaults; with `stdio` (its stdin, stdout) on fds 0 and 1, else this process's; as the
/// leader of a new process group when `new_group`. Returns its pid.
pub fn spawn(
    cmd: &Prepared,
    stdio: Option<(RawFd, RawFd)>,
    new_group: bool,
) -> std::io::Result<i32> {
    let ptrs = |strings: &[CString]| -> Vec<*mut libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr().cast_mut())
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv, envp) = (ptrs(&cmd.args), ptrs(&cmd.env));
    // SAFETY: the attribute and file-action objects are initialised before use and destroyed
    // after; every pointer handed to posix_spawnp points into `cmd`, alive for the call, and
    // the arrays end with a null pointer.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::posix_spawnattr_setsigmask(&mut attr, &none);
        let defaults = default_signals();
        libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
        let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        if new_group {
            flags |= libc::POSIX_SPAWN_SETPGROUP;
            libc::posix_spawnattr_setpgroup(&mut attr, 0);
        }
        libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut actions);
        if let Some((stdin, stdout)) = stdio {
            libc::posix_spawn_file_actions_adddup2(&mut actions, stdin, 0);
            libc::posix_spawn_file_actions_adddup2(&mut actions, stdout, 1);
        }
        let mut pid: libc::pid_t = 0;
        let rc =
            libc::posix_spawnp(&mut pid, argv[0], &actions, &attr, argv.as_ptr(), envp.as_ptr());
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(pid)
    }
}

/// What a waiting thread learns: the child's exit status once it has exited.
pub type Exited = tokio::sync::oneshot::Receiver<std::io::Result<ExitStatus>>;

/// Waits for child `pid` on a thread of its own (a blocking `waitpid` for that pid only, so
/// children the runtime started are left to it); the status arrives on the receiver, and the
/// flag is set once the child is reaped.
pub fn wait_in_thread(pid: i32) -> std::io::Result<(Exited, Arc<AtomicBool>)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let reaped = Arc::new(AtomicBool::new(false));
    let flag = reaped.clone();
    std::thread::Builder::new().name("agent-wait".into()).spawn(move || {
        let status = loop {
            let mut status = 0;
            // SAFETY: waitpid writes only `status`.
            let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
            if rc == pid {
                use std::os::unix::process::ExitStatusExt;
                break Ok(ExitStatus::from_raw(status));
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                break Err(err);
            }
        };
        flag.store(true, Ordering::Release);
        let _ = tx.send(status);
    })?;
    Ok((rx, reaped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_agent_gets_its_pipes_the_environment_on_top_and_its_own_group() {
        let cmd = Prepared::new(
            &[
                "sh".into(),
                "-c".into(),
                "read x; echo \"$x $ACP_T $(cut -d' ' -f5 /proc/$$/stat)\"; exit 3".into(),
            ],
            &[("ACP_T".into(), "set".into())],
        )
        .expect("prepared");
        let stdio = Stdio::pipes().expect("pipes");
        let pid =
            spawn(&cmd, Some((stdio.agent_in.as_raw_fd(), stdio.agent_out.as_raw_fd())), true)
                .expect("spawned");
        let (exited, reaped) = wait_in_thread(pid).expect("waiter");
        drop((stdio.agent_in, stdio.agent_out));
        let mut to_agent = std::fs::File::from(stdio.relay_in);
        std::io::Write::write_all(&mut to_agent, b"hello\n").expect("written");
        drop(to_agent);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(stdio.relay_out), &mut out)
            .expect("read");
        assert_eq!(out.trim(), format!("hello set {pid}"));
        let status = exited.blocking_recv().expect("a status").expect("waited");
        assert_eq!(status.code(), Some(3));
        assert!(reaped.load(Ordering::Acquire));
    }

    #[test]
    fn a_missing_program_is_an_error_at_once() {
        let cmd = Prepared::new(&["/nonexistent/acp-usage-agent".into()], &[]).expect("prepared");
        let err = spawn(&cmd, None, true).expect_err("no such program");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }
}
