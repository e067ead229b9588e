//! `bench-raw-relay AGENT [ARGS...]`: the physical limit of a relay. It spawns the agent and
//! copies stdin to the agent's stdin and the agent's stdout to stdout with large buffers,
//! parsing nothing; it exits with the agent's status. Its pipes get the same 1 MiB that
//! acp-usage asks for, so the two are compared on the same kernel buffers.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::process::{Command, ExitCode, Stdio};

const BUFFER: usize = 1 << 20;

/// Asks for a 1 MiB pipe buffer, as acp-usage does; anything but a pipe is left as it is.
fn grow_pipe(fd: impl AsRawFd) {
    // SAFETY: fcntl on an fd we hold; F_SETPIPE_SZ fails harmlessly on anything but a pipe.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, BUFFER as libc::c_int) };
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<_> = std::env::args_os().skip(1).collect();
    let Some((cmd, args)) = argv.split_first() else {
        eprintln!("usage: bench-raw-relay AGENT [ARGS...]");
        return ExitCode::from(2);
    };
    let fds = (io::stdin().as_fd().try_clone_to_owned(), io::stdout().as_fd().try_clone_to_owned());
    let (Ok(stdin), Ok(stdout)) = fds else {
        eprintln!("bench-raw-relay: cannot use stdin/stdout");
        return ExitCode::from(2);
    };
    let mut child =
        match Command::new(cmd).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("bench-raw-relay: cannot start {}: {e}", cmd.to_string_lossy());
                return ExitCode::from(2);
            }
        };
    let (Some(to_agent), Some(from_agent)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::from(2);
    };
    for fd in [stdin.as_raw_fd(), stdout.as_raw_fd(), to_agent.as_raw_fd(), from_agent.as_raw_fd()]
    {
        grow_pipe(fd);
    }
    // The copy to the agent ends (and closes its stdin) when our stdin ends.
    std::thread::spawn(move || copy(File::from(stdin), to_agent));
    copy(from_agent, File::from(stdout));
    match child.wait() {
        Ok(st) => ExitCode::from(st.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(_) => ExitCode::FAILURE,
    }
}
