//! The synthetic client: spawns a command (the agent itself, or a relay in front of it), runs a
//! scenario through it, and checks what comes back.
//!
//! Every chunk is checked by its tag: session, kind and sequence number must be the next
//! expected, none may be missing when its prompt's result arrives, and, for relays that must
//! forward byte for byte, its length must be the agent's. `usage_update`s and rewritten prompt
//! results (acp-usage's job) are allowed. The relay's CPU time and peak RSS are read from
//! `/proc` right after the last expected line, before the client closes its side.

use std::ffi::OsString;
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use memchr::memmem;

use crate::linebuf::LineBuf;
use crate::procfs::{self, ProcUsage};
use crate::scenario::{Kind, Scenario};
use crate::wire::{self, ChunkKind, ChunkTemplate, Msg, Scanner};

/// What to run and how to treat it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The command line (a relay followed by the agent, or the agent alone).
    pub argv: Vec<OsString>,
    /// Extra environment.
    pub env: Vec<(OsString, OsString)>,
    /// Where the command's stderr goes (`None`: discarded).
    pub stderr: Option<PathBuf>,
    /// Chunks must arrive byte for byte as the agent wrote them.
    pub byte_exact: bool,
    /// The spawned process is a relay whose CPU and memory are measured.
    pub measure: bool,
    /// Longest a scenario may take before the command is killed.
    pub timeout: Duration,
}

/// What one scenario run measured.
#[derive(Debug, Clone, Default)]
pub struct Measurement {
    /// Time from the first request of the timed phase to its last expected line.
    pub elapsed: Duration,
    /// Chunks received and checked.
    pub messages: u64,
    /// Bytes of those chunks (with their newlines).
    pub bytes: u64,
    /// Round-trip times, in microseconds.
    pub rtts_us: Vec<f64>,
    /// CPU time of the relay during the timed phase.
    pub cpu: Option<Duration>,
    /// The relay's peak RSS at the end, in KiB.
    pub hwm_kib: Option<u64>,
    /// `usage_update` notifications received.
    pub usage_updates: u64,
    /// Chunks whose bytes differ from what the agent wrote (re-serialised).
    pub altered: u64,
    /// Lines that were neither chunks, responses nor usage updates.
    pub other_lines: u64,
    /// How the command ended after the client closed its side.
    pub exit: String,
}

/// Runs `scenario` against `target`.
pub fn run(target: &Target, scenario: &Scenario) -> anyhow::Result<Measurement> {
    let mut conn = Conn::spawn(target)?;
    let res = match scenario.kind {
        Kind::Stream { sessions, chunks, size } => conn.stream(sessions, chunks, size, None),
        Kind::Slow { chunks, size, slow_bytes, rate } => {
            conn.stream(1, chunks, size, Some((slow_bytes, rate)))
        }
        Kind::Load { history, size } => conn.load(history, size),
        Kind::RoundTrip { trips, warmup } => conn.round_trips(trips, warmup),
    };
    let timed_out = conn.timed_out.load(Ordering::SeqCst);
    let exit = conn.close();
    match res {
        Ok(mut m) => {
            m.exit = exit;
            m.usage_updates = conn.usage_updates;
            m.other_lines = conn.other;
            Ok(m)
        }
        Err(e) if timed_out => {
            Err(e.context(format!("timed out after {:?}; killed", target.timeout)))
        }
        Err(e) => Err(e.context(format!("the command {exit}"))),
    }
}

/// Time from starting `target` to the response to its `initialize`: what an editor waits for
/// before its first answer, process start-up (the relay's and the agent's) included.
pub fn initialize_round_trip(target: &Target) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut conn = Conn::spawn(target)?;
    let res = conn.send(INITIALIZE).and_then(|()| conn.response(0).context("initialize"));
    let took = start.elapsed();
    let exit = conn.close();
    res.map_err(|e| e.context(format!("the command {exit}")))?;
    Ok(took)
}

/// The round trips of `initialize` and one `session/new` from spawn: what an editor waits for
/// before a session is open (the relay's ledger must be in place for the second).
pub fn open_round_trip(target: &Target) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut conn = Conn::spawn(target)?;
    let res = conn.handshake(1);
    let took = start.elapsed();
    let exit = conn.close();
    res.map_err(|e| e.context(format!("the command {exit}")))?;
    Ok(took)
}

/// `/usage` prompts answered by a relay in front of the bench agent, as an editor sends them:
/// one session, one turn of the agent's first (10 chunks), then `rounds` `/usage` prompts (one
/// untimed before them), each timed from the request to its result. Fails when an answer did
/// not come from the relay (no message text before the result: the prompt reached the agent).
pub fn usage_command_round_trips(target: &Target, rounds: usize) -> anyhow::Result<Vec<Duration>> {
    let mut conn = Conn::spawn(target)?;
    let sid = wire::session_id(0);
    let prompt = |id: usize, text: &str, chunks: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"{sid}","prompt":[{{"type":"text","text":"{text}"}}],"_meta":{{"bench":{{"chunks":{chunks}}}}}}}}}"#
        ) + "\n"
    };
    let run = |conn: &mut Conn| -> anyhow::Result<Vec<Duration>> {
        conn.handshake(1)?;
        conn.send(prompt(2, "hello", 10).as_bytes())?;
        conn.answer(2).context("the agent's turn")?;
        let mut times = Vec::with_capacity(rounds);
        for round in 0..=rounds {
            let id = 3 + round;
            let start = Instant::now();
            conn.send(prompt(id, "/usage", 0).as_bytes())?;
            let from_relay = conn.answer(id as u64)?;
            let took = start.elapsed();
            anyhow::ensure!(from_relay, "/usage (request {id}) got no text: it reached the agent");
            if round > 0 {
                times.push(took);
            }
        }
        Ok(times)
    };
    let res = run(&mut conn);
    let exit = conn.close();
    res.map_err(|e| e.context(format!("the command {exit}")))
}

/// The client's `initialize` request (id 0).
const INITIALIZE: &[u8] = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
"#;

/// A spawned command and the client's side of its pipes.
struct Conn {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    lines: LineBuf,
    scan: Scanner,
    end_turn: memmem::Finder<'static>,
    measure: bool,
    byte_exact: bool,
    usage_updates: u64,
    other: u64,
    received: u64,
    /// Reading slowly: (until this many bytes, bytes per second, since).
    throttle: Option<(u64, f64, Instant)>,
    timed_out: Arc<AtomicBool>,
    _watchdog: mpsc::Sender<()>,
}

impl Conn {
    fn spawn(t: &Target) -> anyhow::Result<Conn> {
        let (cmd, args) = t.argv.split_first().context("an empty command")?;
        let stderr = match &t.stderr {
            Some(p) => Stdio::from(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            ),
            None => Stdio::null(),
        };
        let mut child = Command::new(cmd)
            .args(args)
            .envs(t.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", cmd.to_string_lossy()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout pipe")?;
        // Kills the command when the scenario takes too long, so a wedged relay fails instead of
        // hanging the benchmark; dropping the sender (the connection) disarms it.
        let (tx, rx) = mpsc::channel::<()>();
        let timed_out = Arc::new(AtomicBool::new(false));
        let (pid, timeout, flag) = (child.id() as i32, t.timeout, timed_out.clone());
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(timeout) {
                flag.store(true, Ordering::SeqCst);
                // SAFETY: kill has no memory preconditions; the pid is our child's.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        Ok(Conn {
            child,
            stdin,
            stdout,
            lines: LineBuf::with_capacity(4 << 20),
            scan: Scanner::default(),
            end_turn: memmem::Finder::new(b"\"end_turn\""),
            measure: t.measure,
            byte_exact: t.byte_exact,
            usage_updates: 0,
            other: 0,
            received: 0,
            throttle: None,
            timed_out,
            _watchdog: tx,
        })
    }

    fn send(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(bytes).context("writing to the command's stdin")
    }

    /// The next line: what it is and where it is in the buffer.
    fn next(&mut self) -> anyhow::Result<(Msg, Range<usize>)> {
        loop {
            if let Some(r) = self.lines.next_line() {
                let msg = self.scan.classify(self.lines.get(r.clone()));
                match msg {
                    Msg::UsageUpdate => self.usage_updates += 1,
                    Msg::Other => self.other += 1,
                    _ => {}
                }
                return Ok((msg, r));
            }
            let max = match self.throttle {
                Some((until, rate, since)) if self.received < until => {
                    let allowed = rate * since.elapsed().as_secs_f64();
                    let ahead = self.received as f64 - allowed;
                    if ahead > 0.0 {
                        std::thread::sleep(Duration::from_secs_f64(ahead / rate));
                    }
                    16 * 1024
                }
                _ => 4 << 20,
            };
            let n =
                self.lines.fill(&mut self.stdout, max).context("reading the command's stdout")?;
            if n == 0 {
                bail!(
                    "the command closed its stdout early ({} bytes unterminated)",
                    self.lines.pending()
                );
            }
            self.received += n as u64;
        }
    }

    /// Waits for the response to `id`, allowing only usage updates and unknown lines meanwhile.
    fn response(&mut self, id: u64) -> anyhow::Result<Range<usize>> {
        loop {
            match self.next()? {
                (Msg::Response { id: got, error }, r) if got == id => {
                    if error {
                        bail!(
                            "request {id} failed: {}",
                            String::from_utf8_lossy(self.lines.get(r))
                        );
                    }
                    return Ok(r);
                }
                (Msg::Chunk { .. } | Msg::BadTag, r) => {
                    bail!(
                        "unexpected chunk while waiting for response {id}: {}",
                        excerpt(self.lines.get(r))
                    )
                }
                _ => {}
            }
        }
    }

    /// Reads up to the result of prompt `id`, whatever comes before it; whether message text
    /// that is no bench chunk came first (the relay's own answer).
    fn answer(&mut self, id: u64) -> anyhow::Result<bool> {
        let mut text = false;
        loop {
            match self.next()? {
                (Msg::Response { id: got, error }, r) if got == id => {
                    if error {
                        bail!("request {id} failed: {}", excerpt(self.lines.get(r)));
                    }
                    return Ok(text);
                }
                (Msg::Other, r) => {
                    text |= memmem::find(self.lines.get(r), b"\"agent_message_chunk\"").is_some();
                }
                _ => {}
            }
        }
    }

    /// `initialize`, then `sessions` `session/new`s sent together (ids 1..=sessions).
    fn handshake(&mut self, sessions: u32) -> anyhow::Result<()> {
        self.send(INITIALIZE)?;
        self.response(0).context("initialize")?;
        let mut batch = String::new();
        for i in 1..=sessions {
            batch.push_str(&format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"session/new","params":{{"cwd":"/tmp","mcpServers":[]}}}}"#
            ));
            batch.push('\n');
        }
        self.send(batch.as_bytes())?;
        let mut left = sessions;
        while left > 0 {
            match self.next()? {
                (Msg::Response { id, error }, r) if (1..=u64::from(sessions)).contains(&id) => {
                    if error {
                        bail!("session/new failed: {}", String::from_utf8_lossy(self.lines.get(r)));
                    }
                    left -= 1;
                }
                (Msg::Chunk { .. } | Msg::BadTag, _) => bail!("a chunk before any prompt"),
                _ => {}
            }
        }
        Ok(())
    }

    fn usage(&self) -> anyhow::Result<Option<ProcUsage>> {
        if !self.measure {
            return Ok(None);
        }
        let pid = self.child.id();
        procfs::read(pid).map(Some).with_context(|| format!("reading /proc/{pid}"))
    }

    fn finish(
        &self,
        m: &mut Measurement,
        before: Option<ProcUsage>,
        t0: Instant,
    ) -> anyhow::Result<()> {
        m.elapsed = t0.elapsed();
        if let (Some(b), Some(a)) = (before, self.usage()?) {
            m.cpu = Some(a.cpu.saturating_sub(b.cpu));
            m.hwm_kib = Some(a.hwm_kib);
        }
        Ok(())
    }

    fn stream(
        &mut self,
        sessions: u32,
        chunks: u64,
        size: usize,
        slow: Option<(u64, f64)>,
    ) -> anyhow::Result<Measurement> {
        self.handshake(sessions)?;
        let n = sessions as usize;
        let lens: Vec<usize> = (0..sessions)
            .map(|i| ChunkTemplate::new(ChunkKind::Agent, i, size).line().len() - 1)
            .collect();
        let base = u64::from(sessions) + 1;
        let mut batch = String::new();
        for i in 0..sessions {
            batch.push_str(&format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"session/prompt","params":{{"sessionId":"{}","prompt":[{{"type":"text","text":"stream please"}}],"_meta":{{"bench":{{"chunks":{chunks},"size":{size}}}}}}}}}"#,
                base + u64::from(i),
                wire::session_id(i)
            ));
            batch.push('\n');
        }
        let mut m = Measurement::default();
        let before = self.usage()?;
        let t0 = Instant::now();
        if let Some((until, rate)) = slow {
            self.throttle = Some((until, rate, t0));
        }
        self.send(batch.as_bytes())?;
        let mut expected = vec![0u64; n];
        let mut done = 0;
        while done < n {
            let (msg, r) = self.next()?;
            match msg {
                Msg::Chunk { kind: ChunkKind::Agent, session, seq } if (session as usize) < n => {
                    let s = session as usize;
                    if seq != expected[s] {
                        bail!(
                            "session {s}: chunk {seq} arrived where {} was expected (lost or reordered)",
                            expected[s]
                        );
                    }
                    expected[s] += 1;
                    self.check_len(&mut m, r.len(), lens[s])?;
                }
                Msg::Chunk { .. } => bail!("a chunk of an unknown session or kind: {msg:?}"),
                Msg::BadTag => bail!("a chunk with a damaged tag: {}", excerpt(self.lines.get(r))),
                Msg::Response { id, error } if (base..base + u64::from(sessions)).contains(&id) => {
                    let s = (id - base) as usize;
                    let line = self.lines.get(r);
                    if error {
                        bail!("prompt of session {s} failed: {}", String::from_utf8_lossy(line));
                    }
                    if expected[s] != chunks {
                        bail!(
                            "session {s}: prompt result after {} of {chunks} chunks",
                            expected[s]
                        );
                    }
                    if self.end_turn.find(line).is_none() {
                        bail!("session {s}: prompt result without end_turn: {}", excerpt(line));
                    }
                    done += 1;
                }
                _ => {}
            }
        }
        self.finish(&mut m, before, t0)?;
        Ok(m)
    }

    fn check_len(&self, m: &mut Measurement, got: usize, want: usize) -> anyhow::Result<()> {
        m.messages += 1;
        m.bytes += got as u64 + 1;
        if got != want {
            if self.byte_exact {
                bail!("chunk {} is {got} bytes, the agent wrote {want}", m.messages);
            }
            m.altered += 1;
        }
        Ok(())
    }

    fn load(&mut self, history: u64, size: usize) -> anyhow::Result<Measurement> {
        self.handshake(0)?;
        let len = |k| ChunkTemplate::new(k, 0, size).line().len() - 1;
        let (user_len, agent_len) = (len(ChunkKind::User), len(ChunkKind::Agent));
        let req = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"session/load","params":{{"sessionId":"{}","cwd":"/tmp","mcpServers":[],"_meta":{{"bench":{{"history":{history},"size":{size}}}}}}}}}"#,
            wire::session_id(0)
        ) + "\n";
        let mut m = Measurement::default();
        let before = self.usage()?;
        let t0 = Instant::now();
        self.send(req.as_bytes())?;
        let mut expected = 0u64;
        loop {
            let (msg, r) = self.next()?;
            match msg {
                Msg::Chunk { kind, session: 0, seq } => {
                    let want =
                        if seq.is_multiple_of(2) { ChunkKind::User } else { ChunkKind::Agent };
                    if seq != expected || kind != want {
                        bail!(
                            "history message {seq} ({kind:?}) arrived where {expected} was expected"
                        );
                    }
                    expected += 1;
                    let l = if kind == ChunkKind::User { user_len } else { agent_len };
                    self.check_len(&mut m, r.len(), l)?;
                }
                Msg::Chunk { .. } => bail!("a chunk of an unknown session: {msg:?}"),
                Msg::BadTag => {
                    bail!("a history message with a damaged tag: {}", excerpt(self.lines.get(r)))
                }
                Msg::Response { id: 1, error } => {
                    if error {
                        bail!(
                            "session/load failed: {}",
                            String::from_utf8_lossy(self.lines.get(r))
                        );
                    }
                    if expected != history {
                        bail!(
                            "session/load answered after {expected} of {history} history messages"
                        );
                    }
                    break;
                }
                _ => {}
            }
        }
        self.finish(&mut m, before, t0)?;
        Ok(m)
    }

    fn round_trips(&mut self, trips: usize, warmup: usize) -> anyhow::Result<Measurement> {
        self.handshake(0)?;
        let mut m = Measurement::default();
        let before = self.usage()?;
        let t0 = Instant::now();
        for i in 0..(warmup + trips) as u64 {
            let id = 1000 + i;
            let req = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{}","params":{{}}}}"#,
                wire::ECHO_METHOD
            ) + "\n";
            let t = Instant::now();
            self.send(req.as_bytes())?;
            self.response(id)?;
            if i >= warmup as u64 {
                m.rtts_us.push(t.elapsed().as_secs_f64() * 1e6);
                m.messages += 1;
            }
        }
        self.finish(&mut m, before, t0)?;
        Ok(m)
    }

    /// Closes the client's side and says how the command ended (killed if it lingers).
    fn close(&mut self) -> String {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return format!("exited ({st})"),
                Ok(None) if Instant::now() < deadline => {
                    // Keep its stdout flowing so a last write cannot wedge it.
                    let _ = drain_nonblocking(&self.stdout);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return "did not exit within 10 s of stdin closing; killed".into();
                }
                Err(e) => return format!("could not be waited for ({e})"),
            }
        }
    }
}

/// Reads whatever is buffered in a pipe without blocking.
fn drain_nonblocking(out: &ChildStdout) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = out.as_raw_fd();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, zero timeout.
        if unsafe { libc::poll(&mut p, 1, 0) } <= 0 {
            return Ok(());
        }
        // SAFETY: the buffer is valid for its length; the fd is open while `out` lives.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return Ok(());
        }
    }
}

/// The start of a line, for error messages.
fn excerpt(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned();
    if line.len() > 300 { s + "…" } else { s }
}
