//! The guard: a small process between acp-usage and its agent that ends the agent's whole
//! process tree when acp-usage dies, however it dies.
//!
//! acp-usage ends its agent's process group on every exit it controls, but a `kill -9`, the
//! OOM killer or a crash leaves nothing running to do it, and agents do not all exit when
//! their stdin closes (a codex-acp launcher and its native binary were seen running half an
//! hour after their relay was killed). No library covers this, and it needs calls made
//! between fork and exec, so it is written here on `libc`.
//!
//! On Linux the guard is forked first thing in `main`, when the command line has an agent
//! after `--`: the process has one thread then, so the fork may run any code, and the fork and
//! the guard's first steps happen while the relay parses its options. (Starting acp-usage's
//! executable again as the guard, as it once did, cost the editor's `initialize` round trip
//! 2 ms.) The guard leads a new process group, asks the kernel for a signal when its parent
//! dies (`PR_SET_PDEATHSIG`), becomes the subreaper of everything below it, and waits on a pipe
//! for the agent's command, which the relay sends once it knows it (the tap's settings are
//! part of it); a relay that ends without sending one (a subcommand, a bad option) closes the
//! pipe, and the guard exits. It starts the agent in its group with the agent's pipes as its
//! stdio, and then only waits: signals the relay sends the group reach the agent directly (the
//! guard blocks them for itself), the agent's exit becomes the guard's (the same code, or the
//! same signal re-raised), and its parent's death makes it end the group and every process
//! below it: SIGTERM, then SIGKILL after a grace. Elsewhere the agent is started directly.

use std::ffi::OsString;
#[cfg(unix)]
use std::os::fd::OwnedFd;

/// How long the agent's tree has, after its relay died, between SIGTERM and SIGKILL.
#[cfg(target_os = "linux")]
const GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// Whether the relay should start its agent under a guard: on Linux, unless
/// `ACP_USAGE_GUARD=0`.
pub fn enabled() -> bool {
    cfg!(target_os = "linux")
        && !matches!(std::env::var("ACP_USAGE_GUARD").as_deref(), Ok("0" | "false" | "off"))
}

/// A guard forked and waiting for its agent's command, with the relay's ends of the agent's
/// pipes. Dropped unused, it closes the command pipe and the guard exits.
#[derive(Debug)]
pub struct Guard {
    /// The guard's pid, which is also its group's id.
    pub pid: i32,
    /// Where the command goes.
    #[cfg(unix)]
    command: OwnedFd,
    /// Where the relay writes the agent's stdin.
    #[cfg(unix)]
    pub relay_in: OwnedFd,
    /// Where the relay reads the agent's stdout.
    #[cfg(unix)]
    pub relay_out: OwnedFd,
}

/// Forks the guard when the guard is [`enabled`] and `args` (the whole command line) name an
/// agent after `--`, so that it is ready by the time the relay knows the agent's command. Call
/// it before anything starts a thread. `None`: no guard is wanted; an error: none could be had
/// (the agent is then started directly, and the relay says why once it logs).
pub fn early(args: &[OsString]) -> Option<std::io::Result<Guard>> {
    let agent_follows = args.iter().position(|a| a == "--").is_some_and(|at| at + 1 < args.len());
    if !agent_follows || !enabled() {
        return None;
    }
    #[cfg(target_os = "linux")]
    return Some(imp::fork());
    #[cfg(not(target_os = "linux"))]
    None
}

#[cfg(unix)]
impl Guard {
    /// Sends the agent's command (`argv`, and `env` set on top of this process's environment);
    /// the guard starts it. Returns the relay's ends of the agent's pipes.
    pub fn start(
        self,
        argv: &[String],
        env: &[(String, String)],
    ) -> std::io::Result<(i32, OwnedFd, OwnedFd)> {
        use std::io::Write as _;
        let Guard { pid, command, relay_in, relay_out } = self;
        // Closed after the write: the guard reads to the end.
        std::fs::File::from(command).write_all(&command_message(argv, env))?;
        Ok((pid, relay_in, relay_out))
    }
}

/// The agent's command as the relay sends it to the guard: the number of arguments, the
/// arguments, then `NAME=value` for each variable to set; each ends with a NUL.
#[cfg(unix)]
fn command_message(argv: &[String], env: &[(String, String)]) -> Vec<u8> {
    let mut message = Vec::new();
    let mut push = |part: &[u8]| {
        message.extend_from_slice(part);
        message.push(0);
    };
    push(argv.len().to_string().as_bytes());
    for arg in argv {
        push(arg.as_bytes());
    }
    for (k, v) in env {
        push(format!("{k}={v}").as_bytes());
    }
    message
}

/// An agent's command: its arguments, and the variables set in its environment.
#[cfg(any(target_os = "linux", all(unix, test)))]
type AgentCommand = (Vec<String>, Vec<(String, String)>);

/// The agent's command as the relay sent it ([`command_message`]).
#[cfg(any(target_os = "linux", all(unix, test)))]
fn read_command(message: &[u8]) -> Option<AgentCommand> {
    // Every part ends with a NUL: a message cut short does not.
    let mut parts = message.strip_suffix(&[0])?.split(|b| *b == 0);
    let argc: usize = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    let text = |p: &[u8]| String::from_utf8(p.to_vec()).ok();
    let argv = parts.by_ref().take(argc).map(text).collect::<Option<Vec<_>>>()?;
    if argv.len() != argc || argc == 0 {
        return None;
    }
    let env = parts
        .map(|p| {
            let kv = text(p)?;
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((argv, env))
}

#[cfg(target_os = "linux")]
mod imp {
    //! The guard's side of the fork, on Linux.

    use std::os::fd::{FromRawFd, OwnedFd, RawFd};
    use std::time::Instant;

    use super::GRACE;
    use crate::relay::spawn::{Prepared, Stdio};

    /// The signal the kernel sends when the parent dies.
    const PARENT_DIED: i32 = libc::SIGUSR1;

    /// Whether this process runs one thread only.
    fn single_threaded() -> bool {
        std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
    }

    /// Forks the guard, with the agent's pipes and the pipe its command comes through.
    pub(super) fn fork() -> std::io::Result<super::Guard> {
        use std::os::fd::AsRawFd;

        if !single_threaded() {
            return Err(std::io::Error::other("acp-usage already runs more than one thread"));
        }
        let stdio = Stdio::pipes()?;
        let (command_in, command) = crate::relay::spawn::pipe()?;
        let parent = std::process::id() as i32;
        // SAFETY: the process has one thread, so the child may run any code; it never returns
        // into the relay's code (`main` ends in `_exit`).
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => main(
                parent,
                stdio.agent_in.as_raw_fd(),
                stdio.agent_out.as_raw_fd(),
                command_in.as_raw_fd(),
            ),
            pid => {
                // Also done by the child: whichever runs first, the group exists before the
                // relay signals it.
                // SAFETY: setpgid has no memory-safety preconditions.
                unsafe { libc::setpgid(pid, pid) };
                // The agent's ends are the guard's alone: the relay sees the agent's stdout end
                // when the agent's copy closes.
                let Stdio { relay_in, relay_out, .. } = stdio;
                Ok(super::Guard { pid, command, relay_in, relay_out })
            }
        }
    }

    /// The guard: runs until the agent has exited or the tree is ended, then ends the process
    /// as the agent ended.
    fn main(parent: i32, agent_in: RawFd, agent_out: RawFd, command: RawFd) -> ! {
        let code = run(parent, agent_in, agent_out, command);
        // SAFETY: ends this process (the fork) without running the relay's exit code.
        unsafe { libc::_exit(code) }
    }

    /// The signals the guard takes for itself, by waiting for them.
    fn guarded_set() -> libc::sigset_t {
        // The agent starts with these at their defaults (`spawn::default_signals`).
        crate::relay::spawn::default_signals()
    }

    fn run(parent: i32, agent_in: RawFd, agent_out: RawFd, command: RawFd) -> i32 {
        let set = guarded_set();
        // SAFETY: plain system calls on values owned here; the process has one thread.
        unsafe {
            libc::setpgid(0, 0);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DIED as libc::c_ulong, 0, 0, 0);
            // Orphans below the agent (a launcher's child whose launcher exited) become the
            // guard's, so they can still be found and ended.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        }
        // The parent may have died before the request took effect.
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != parent {
            return 1;
        }
        // The agent inherits the guard's stdio: its pipes, and the relay's stderr. Nothing else
        // of the relay's stays open here (the editor's pipes, the relay's ends).
        // SAFETY: dup2 and close on fds this process owns; `command` is moved to fd 3 first.
        unsafe {
            libc::dup2(agent_in, 0);
            libc::dup2(agent_out, 1);
            libc::dup2(command, 3);
        }
        close_from(4);
        // SAFETY: fd 3 is the command pipe's read end, owned by nothing else here.
        let mut command = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(3) });
        let mut message = Vec::new();
        let read = std::io::Read::read_to_end(&mut command, &mut message);
        drop(command);
        // Nothing sent: the relay ended (or runs a subcommand) without starting an agent.
        if read.is_err() || message.is_empty() {
            return 0;
        }
        let prepared =
            super::read_command(&message).and_then(|(argv, env)| Prepared::new(&argv, &env).ok());
        let Some(cmd) = prepared else {
            eprintln!("acp-usage: the guard could not read the agent's command");
            return 127;
        };
        let agent_pid = match crate::relay::spawn::spawn(&cmd, None, false) {
            Ok(pid) => pid,
            Err(err) => {
                eprintln!("acp-usage: cannot start the agent `{}`: {err}", cmd.program());
                return 127;
            }
        };
        // The guard's copies of the agent's pipes would keep them open after the agent closes
        // its ends: the relay must see the agent's stdout end when the agent's does.
        detach_stdio();

        loop {
            let sig = wait_signal(&set, None);
            if sig == libc::SIGCHLD {
                if let Some(status) = reap(agent_pid) {
                    // An agent that ended because its relay is dying (its stdin closed) may
                    // leave processes behind, and the parent-death signal may not have come yet.
                    if parent_leaving(parent) {
                        end_tree(&set, agent_pid, true);
                    }
                    return exit_like(status);
                }
            } else if sig == PARENT_DIED || parent_leaving(parent) {
                end_tree(&set, agent_pid, false);
                return 1;
            }
            // SIGTERM, SIGINT, SIGHUP...: sent to the group, so the agent has them too.
        }
    }

    /// Closes every fd from `low` up: `close_range`, else each fd /proc lists.
    fn close_from(low: libc::c_uint) {
        // SAFETY: closing fds this process owns; nothing here uses them afterwards.
        if unsafe { libc::syscall(libc::SYS_close_range, low, libc::c_uint::MAX, 0) } == 0 {
            return;
        }
        let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd >= low as i32)
            .collect();
        for fd in fds {
            // SAFETY: as above; the directory's own fd is closed already (EBADF is harmless).
            unsafe { libc::close(fd) };
        }
    }

    /// Points stdin and stdout at /dev/null.
    fn detach_stdio() {
        // SAFETY: open/dup2/close on descriptors this process owns.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup2(null, 0);
                libc::dup2(null, 1);
                libc::close(null);
            }
        }
    }

    /// The next guarded signal, or 0 when `timeout` passed first.
    fn wait_signal(set: &libc::sigset_t, timeout: Option<std::time::Duration>) -> i32 {
        loop {
            // SAFETY: the set and the timespec live for the call.
            let sig = unsafe {
                match timeout {
                    None => libc::sigwaitinfo(set, std::ptr::null_mut()),
                    Some(t) => {
                        let ts = libc::timespec {
                            tv_sec: t.as_secs() as _,
                            tv_nsec: t.subsec_nanos() as libc::c_long,
                        };
                        libc::sigtimedwait(set, std::ptr::null_mut(), &ts)
                    }
                }
            };
            if sig >= 0 {
                return sig;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return 0;
            }
        }
    }

    /// Reaps every child that has exited; the agent's status if it was among them.
    fn reap(agent_pid: i32) -> Option<i32> {
        let mut agent_status = None;
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only `status`.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return agent_status;
            }
            if pid == agent_pid {
                agent_status = Some(status);
            }
        }
    }

    /// Whether the relay that started the guard is gone or on its way out: no longer the
    /// parent, a zombie, or exiting (the kernel's `PF_EXITING` flag, set before it closes its
    /// files and long before it sends the parent-death signal).
    fn parent_leaving(parent: i32) -> bool {
        const PF_EXITING: u64 = 0x4;
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != parent {
            return true;
        }
        let Some(fields) = crate::procfs::stat_fields(parent.into()) else { return true };
        // From the state on: state, ppid, pgrp, session, tty, tpgid, flags.
        let zombie = matches!(fields.first().map(String::as_str), Some("Z" | "X"));
        let exiting =
            fields.get(6).and_then(|f| f.parse::<u64>().ok()).is_some_and(|f| f & PF_EXITING != 0);
        zombie || exiting
    }

    /// Ends the agent's group and every process below the guard: SIGTERM, then SIGKILL to
    /// whatever is left after the grace.
    fn end_tree(set: &libc::sigset_t, agent_pid: i32, agent_reaped: bool) {
        signal_tree(libc::SIGTERM);
        let deadline = Instant::now() + GRACE;
        let mut agent_done = agent_reaped;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if wait_signal(set, Some(left)) == libc::SIGCHLD && reap(agent_pid).is_some() {
                agent_done = true;
            }
            if agent_done && descendants().is_empty() {
                return;
            }
        }
        signal_tree(libc::SIGKILL);
    }

    /// Sends `sig` to the guard's process group (the agent's, unless it moved) and to every
    /// descendant, wherever its group.
    fn signal_tree(sig: i32) {
        // SAFETY: kill/killpg have no memory-safety preconditions. The guard's own copy of a
        // SIGTERM is blocked and waited for; a SIGKILL to the group ends the guard too, last.
        unsafe {
            for pid in descendants() {
                libc::kill(pid, sig);
            }
            libc::killpg(0, sig);
        }
    }

    /// Every process below this one, from /proc's parent links.
    fn descendants() -> Vec<i32> {
        let me = std::process::id() as i32;
        let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                let ppid = crate::procfs::stat_fields(pid.into())?.get(1)?.parse().ok()?;
                Some((pid, ppid))
            })
            .collect();
        let mut out = vec![me];
        let mut i = 0;
        while i < out.len() {
            let p = out[i];
            out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(pid, _)| *pid));
            i += 1;
        }
        out.remove(0);
        out
    }

    /// The guard's exit code for the agent's status: its code, or (when the signal raised again
    /// did not end the guard) 128 + its signal.
    fn exit_like(status: i32) -> i32 {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            // SAFETY: restoring the default action and unblocking one signal, then raising it.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(sig);
            }
            return 128 + sig;
        }
        libc::WEXITSTATUS(status)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_command_reaches_the_guard_as_it_was_sent() {
        let argv: Vec<String> = ["npx", "", "--flag=a=b", "two words"].map(String::from).to_vec();
        let env = vec![
            ("ANTHROPIC_BASE_URL".to_owned(), "http://127.0.0.1:1/s/anthropic".to_owned()),
            ("EMPTY".to_owned(), String::new()),
            ("WITH_EQ".to_owned(), "a=b=c".to_owned()),
        ];
        let got = read_command(&command_message(&argv, &env)).expect("read back");
        assert_eq!(got, (argv, env));
        assert_eq!(
            read_command(&command_message(&["agent".into()], &[])),
            Some((vec!["agent".into()], vec![]))
        );
    }

    #[test]
    fn a_command_cut_short_or_empty_is_refused() {
        let whole = command_message(&["a".into(), "b".into()], &[]);
        assert_eq!(read_command(&whole[..whole.len() - 2]), None, "an argument missing");
        assert_eq!(read_command(b""), None);
        assert_eq!(read_command(&command_message(&[], &[])), None, "no program");
    }

    #[test]
    fn the_guard_is_wanted_only_for_an_agent_after_the_separator() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        if !enabled() {
            return;
        }
        assert!(early(&args(&["acp-usage", "models"])).is_none());
        assert!(early(&args(&["acp-usage", "--"])).is_none(), "no agent after `--`");
        // The test runs on a thread of the harness's: a fork now would copy one thread of
        // several, so the guard is refused and the agent started directly.
        let refused = early(&args(&["acp-usage", "--", "agent"]));
        assert!(matches!(refused, Some(Err(_))), "{refused:?}");
    }
}
