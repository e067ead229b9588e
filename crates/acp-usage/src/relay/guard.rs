//! The guard: a small process between acp-usage and its agent that ends the agent's whole
//! process tree when acp-usage dies, however it dies.
//!
//! acp-usage ends its agent's process group on every exit it controls, but a `kill -9`, the
//! OOM killer or a crash leaves nothing running to do it, and agents do not all exit when
//! their stdin closes (a codex-acp launcher and its native binary were seen running half an
//! hour after their relay was killed). No library covers this, and it needs calls made
//! between fork and exec, so it is written here on `libc`.
//!
//! On Linux the relay starts its own executable in guard mode as the leader of a new process
//! group; the guard asks the kernel for a signal when its parent dies (`PR_SET_PDEATHSIG`),
//! becomes the subreaper of everything below it, and starts the agent in its group with its
//! stdio. It then only waits: signals the relay sends the group reach the agent directly (the
//! guard blocks them for itself), the agent's exit becomes the guard's (the same code, or the
//! same signal re-raised), and its parent's death makes it end the group and every process
//! below it: SIGTERM, then SIGKILL after a grace. Elsewhere the agent is started directly.

use std::ffi::OsString;

/// The first argument that starts acp-usage as a guard: `acp-usage <ARG> <parent pid> --
/// AGENT [ARGS...]`. Not a subcommand: nobody types it.
pub const ARG: &str = "__acp-usage-guard";

/// How long the agent's tree has, after its relay died, between SIGTERM and SIGKILL.
const GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// Whether the relay should start its agent under a guard: on Linux, unless
/// `ACP_USAGE_GUARD=0`.
pub fn enabled() -> bool {
    cfg!(target_os = "linux")
        && !matches!(std::env::var("ACP_USAGE_GUARD").as_deref(), Ok("0" | "false" | "off"))
}

/// The command line that runs `argv` under a guard of this process: this executable, the
/// guard's argument, this process's id, `--`, the agent.
pub fn wrap(argv: &[String]) -> std::io::Result<Vec<OsString>> {
    let exe = self_exe()?;
    let mut out = vec![exe, ARG.into(), std::process::id().to_string().into(), "--".into()];
    out.extend(argv.iter().map(OsString::from));
    Ok(out)
}

/// This executable: its path, unless it was replaced or removed since it started (an
/// upgrade), when the kernel's link to the running image still execs it.
fn self_exe() -> std::io::Result<OsString> {
    match std::env::current_exe() {
        Ok(path) if path.exists() => Ok(path.into_os_string()),
        _ if cfg!(target_os = "linux") => Ok("/proc/self/exe".into()),
        Ok(path) => Ok(path.into_os_string()),
        Err(err) => Err(err),
    }
}

/// Runs the guard when the command line asks for it (`args` without the program name); the
/// process's exit code, or `None` for a normal start.
pub fn run_if_asked(args: &[OsString]) -> Option<std::process::ExitCode> {
    if args.first().map(|a| a.as_os_str()) != Some(ARG.as_ref()) {
        return None;
    }
    let parent = args.get(1).and_then(|p| p.to_str()).and_then(|p| p.parse::<i32>().ok());
    let agent = args.get(3..).filter(|_| args.get(2).is_some_and(|a| a == "--"));
    match (parent, agent) {
        (Some(parent), Some(agent)) if !agent.is_empty() => Some(imp::run(parent, agent)),
        _ => {
            eprintln!("acp-usage: {ARG} takes <parent pid> -- AGENT [ARGS...]");
            Some(std::process::ExitCode::from(2))
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    //! The guard's loop, on Linux.

    use std::ffi::OsString;
    use std::process::ExitCode;
    use std::time::Instant;

    use super::GRACE;

    /// The signal the kernel sends when the parent dies.
    const PARENT_DIED: i32 = libc::SIGUSR1;

    /// The signals the guard takes for itself, by waiting for them.
    fn guarded_set() -> libc::sigset_t {
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
                PARENT_DIED,
            ] {
                libc::sigaddset(&mut set, sig);
            }
            set
        }
    }

    pub(super) fn run(parent: i32, agent: &[OsString]) -> ExitCode {
        let set = guarded_set();
        // SAFETY: plain system calls on values owned here; the process has one thread.
        unsafe {
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DIED as libc::c_ulong, 0, 0, 0);
            // Orphans below the agent (a launcher's child whose launcher exited) become the
            // guard's, so they can still be found and ended.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        }
        // The parent may have died before the request took effect.
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != parent {
            return ExitCode::from(1);
        }

        let agent_pid = match spawn_agent(agent) {
            Ok(pid) => pid,
            Err(err) => {
                eprintln!(
                    "acp-usage: cannot start the agent `{}`: {err}",
                    agent[0].to_string_lossy()
                );
                return ExitCode::from(127);
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
                return ExitCode::from(1);
            }
            // SIGTERM, SIGINT, SIGHUP...: sent to the group, so the agent has them too.
        }
    }

    /// Starts the agent with `posix_spawnp`, its signal mask emptied and SIGPIPE (which Rust
    /// ignores in its own processes) and the guarded signals back at their defaults; returns
    /// its pid. Not std's `Command`: emptying the mask there takes a `pre_exec` hook, which
    /// makes it fork the guard, where glibc's posix_spawn shares its memory until the exec
    /// (the agent's start is on the editor's `initialize` round trip).
    fn spawn_agent(agent: &[OsString]) -> std::io::Result<i32> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;

        let nul = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in it");
        let c = |bytes: &[u8]| CString::new(bytes).map_err(|_| nul());
        let args: Vec<CString> = agent.iter().map(|a| c(a.as_bytes())).collect::<Result<_, _>>()?;
        let vars: Vec<CString> = std::env::vars_os()
            .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<Result<_, _>>()?;
        let ptrs = |strings: &[CString]| -> Vec<*mut libc::c_char> {
            strings
                .iter()
                .map(|s| s.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect()
        };
        let (argv, envp) = (ptrs(&args), ptrs(&vars));
        // SAFETY: the attribute object is initialised before use and destroyed after; every
        // pointer handed to posix_spawnp points into `args`/`vars`, alive for the call, and the
        // arrays end with a null pointer.
        unsafe {
            let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
            libc::posix_spawnattr_init(&mut attr);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::posix_spawnattr_setsigmask(&mut attr, &none);
            let mut defaults = guarded_set();
            libc::sigaddset(&mut defaults, libc::SIGPIPE);
            libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
            libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
            );
            let mut pid: libc::pid_t = 0;
            let rc = libc::posix_spawnp(
                &mut pid,
                argv[0],
                std::ptr::null(),
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            );
            libc::posix_spawnattr_destroy(&mut attr);
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc));
            }
            Ok(pid)
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
                            tv_sec: t.as_secs() as libc::time_t,
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

    /// Ends the guard the way the agent ended: its exit code, or its signal raised again.
    fn exit_like(status: i32) -> ExitCode {
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
            return ExitCode::from(128u8.wrapping_add(sig as u8));
        }
        ExitCode::from(libc::WEXITSTATUS(status) as u8)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    //! Without Linux's parent-death signal the relay starts its agent directly ([`super::enabled`]
    //! is false); a guard started by hand just runs the agent.

    use std::ffi::OsString;
    use std::process::ExitCode;

    pub(super) fn run(_parent: i32, agent: &[OsString]) -> ExitCode {
        match std::process::Command::new(&agent[0]).args(&agent[1..]).status() {
            Ok(status) => ExitCode::from(status.code().unwrap_or(1) as u8),
            Err(err) => {
                eprintln!(
                    "acp-usage: cannot start the agent `{}`: {err}",
                    agent[0].to_string_lossy()
                );
                ExitCode::from(127)
            }
        }
    }
}
