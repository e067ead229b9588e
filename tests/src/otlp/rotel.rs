//! rotel, a real OpenTelemetry collector, between a sender and the tests' receiver: started from
//! the cache `.ci/install-rotel.sh` fills, on a loopback port it keeps across restarts.

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use super::{POLL, wait_for, wait_until};
use crate::agents::agents_cache;
use crate::raw_http::PATIENCE;

/// The rotel binary: `$ACP_USAGE_ROTEL`, else `rotel/rotel-agent` in the agents' cache (where
/// `.ci/install-rotel.sh` puts it). Missing: an error naming that script.
pub fn rotel_binary() -> anyhow::Result<PathBuf> {
    let (path, from) = match std::env::var_os("ACP_USAGE_ROTEL") {
        Some(path) => (PathBuf::from(path), "$ACP_USAGE_ROTEL"),
        None => (agents_cache().join("rotel/rotel-agent"), "the agents' cache"),
    };
    if !path.is_file() {
        bail!(
            "rotel is not installed: no {} ({from}); run .ci/install-rotel.sh (or \
             .ci/install-agents.sh, which runs it) to install it from PyPI",
            path.display()
        );
    }
    Ok(path)
}

/// A running rotel collector: OTLP/HTTP (and gRPC) in on 127.0.0.1, OTLP/HTTP out to one
/// endpoint (gzip, as rotel sends by default). Killed when dropped.
///
/// Each start appends rotel's output (stdout and stderr) to `rotel.log` in the directory it was
/// given, with a line saying which start follows.
#[derive(Debug)]
pub struct Rotel {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    grpc_port: u16,
    export_to: String,
    extra_args: Vec<String>,
    child: Option<Child>,
    starts: usize,
    started_in: Duration,
}

impl Rotel {
    /// Starts rotel on an ephemeral port, forwarding to `export_to` (a base URL such as
    /// [`super::OtlpReceiver::url`]), its files in `dir`. Returns once its OTLP/HTTP port accepts.
    pub fn start(dir: &Path, export_to: &str) -> anyhow::Result<Rotel> {
        Rotel::start_with(dir, export_to, 0, &[])
    }

    /// [`Rotel::start`] on `port` (0 = pick a free one), with more `rotel-agent start` flags
    /// (`rotel-agent start --help`; a flag given here wins over the same flag set by default).
    pub fn start_with(
        dir: &Path,
        export_to: &str,
        port: u16,
        extra_args: &[&str],
    ) -> anyhow::Result<Rotel> {
        let binary = rotel_binary()?;
        std::fs::create_dir_all(dir)?;
        // rotel panics when asked for port 0 on OTLP/HTTP (it cannot report the port it got),
        // so take a free one from the kernel and hand it over; the gap is a few milliseconds.
        // gRPC would take port 0, but then nobody could send to it.
        let free_port = || -> anyhow::Result<u16> {
            Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
        };
        let port = match port {
            0 => free_port()?,
            port => port,
        };
        let grpc_port = free_port()?;
        let mut rotel = Rotel {
            binary,
            dir: dir.to_owned(),
            port,
            grpc_port,
            export_to: export_to.to_owned(),
            extra_args: extra_args.iter().map(|arg| (*arg).to_owned()).collect(),
            child: None,
            starts: 0,
            started_in: Duration::ZERO,
        };
        rotel.spawn()?;
        Ok(rotel)
    }

    /// The OTLP/HTTP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`: the base endpoint senders point at (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT` of its OTLP/gRPC receiver (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`),
    /// also kept across restarts.
    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Where rotel's output goes.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("rotel.log")
    }

    /// rotel's output so far, every start.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// How long the last start took, from spawning to the port accepting.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Running (started and not exited).
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Stops rotel the way an operator does: SIGTERM, so it exports what it holds, then waits
    /// for it to exit (SIGKILL after [`PATIENCE`]). Once this returns, the port refuses.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid; the child is not reaped yet (we hold it).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let exited = wait_until("rotel to exit after SIGTERM", PATIENCE, || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if exited.is_err() {
            let _ = child.kill();
        }
        child.wait().context("waiting for rotel")?;
        Ok(())
    }

    /// Kills rotel with SIGKILL and waits: a crash. What it accepted but had not exported yet
    /// is lost (its batch timeout is 50 ms; wait for the receiver to have it first).
    pub fn kill(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let _ = child.kill();
        child.wait().context("waiting for rotel")?;
        Ok(())
    }

    /// Starts rotel again, same port and flags, after [`Rotel::stop`] or [`Rotel::kill`].
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            bail!("rotel is still running on port {}", self.port);
        }
        self.spawn()
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let log_path = self.log_path();
        let mut log = File::options().create(true).append(true).open(&log_path)?;
        writeln!(
            log,
            "--- acp-usage-tests: rotel start #{} on 127.0.0.1:{}",
            self.starts, self.port
        )?;

        let mut args: Vec<(&str, String)> = vec![
            ("--otlp-http-endpoint", format!("127.0.0.1:{}", self.port)),
            // Its own loopback port, not the default localhost:4317 another collector may hold.
            ("--otlp-grpc-endpoint", format!("127.0.0.1:{}", self.grpc_port)),
            ("--exporter", "otlp".into()),
            ("--otlp-exporter-endpoint", self.export_to.clone()),
            ("--otlp-exporter-protocol", "http".into()),
            // Forward within 50 ms (default 200 ms) so tests see data promptly.
            ("--batch-timeout", "50ms".into()),
            // Retry a downstream failure after 100 ms, not 5 s, so recovery is quick to observe.
            ("--otlp-exporter-retry-initial-backoff", "100ms".into()),
            ("--otlp-exporter-retry-max-backoff", "1s".into()),
            // Both default to fixed paths under /tmp that parallel tests would share (rotel
            // writes them only with --daemon, which we do not use).
            ("--pid-file", self.dir.join("rotel.pid").display().to_string()),
            ("--log-file", self.dir.join("rotel-daemon.log").display().to_string()),
        ];
        args.retain(|(flag, _)| {
            !self.extra_args.iter().any(|extra| extra.split('=').next() == Some(flag))
        });

        let mut command = Command::new(&self.binary);
        command.arg("start");
        for (flag, value) in args {
            command.arg(flag).arg(value);
        }
        command.args(&self.extra_args);
        // rotel reads every flag from ROTEL_* too: none of the developer's may leak in.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ROTEL_") {
                command.env_remove(name);
            }
        }
        // A RUST_LOG meant for acp-usage (debug, trace) would bury rotel's own lines.
        command.env("RUST_LOG", "info").stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);

        let start = Instant::now();
        let mut child =
            command.spawn().with_context(|| format!("starting {}", self.binary.display()))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let grpc_addr = SocketAddr::from(([127, 0, 0, 1], self.grpc_port));
        let listening = wait_for("rotel to listen", PATIENCE, || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Err(status));
            }
            let accepts = |addr| TcpStream::connect_timeout(addr, POLL).is_ok();
            (accepts(&addr) && accepts(&grpc_addr)).then_some(Ok(()))
        });
        match listening {
            Ok((Ok(()), _)) => {
                self.started_in = start.elapsed();
                self.child = Some(child);
                Ok(())
            }
            Ok((Err(status), _)) => bail!(
                "rotel exited ({status}) before listening on {addr}; its log ({}):\n{}",
                log_path.display(),
                tail(&self.log(), 40)
            ),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{err}; rotel's log ({}):\n{}", log_path.display(), tail(&self.log(), 40))
            }
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
