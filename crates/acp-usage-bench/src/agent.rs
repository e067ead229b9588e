//! The synthetic ACP agent (`bench-agent`): answers `initialize`, `session/new`, `session/load`
//! (replaying history chunks first), `session/prompt` (streaming chunks, then `stopReason`) and
//! `_bench/echo`, as real ACP JSON lines.
//!
//! How much to stream comes in the request's `_meta.bench` (`chunks`, `size` for a prompt;
//! `history`, `size` for a load). Streams of several sessions are interleaved round-robin. One
//! thread: chunks are patched into a template and written in large batches, and stdin is polled
//! between batches, so the agent is never the bottleneck of what it measures.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;

use serde_json::Value;

use crate::linebuf::LineBuf;
use crate::wire::{self, ChunkKind, ChunkTemplate};

/// Bytes gathered before a write.
const BATCH: usize = 256 * 1024;
/// Chunks per round, shared by the active streams.
const ROUND: usize = 256;

/// One stream of chunks ending with a response.
#[derive(Debug)]
struct Stream {
    /// The templates used in turn (one for a prompt, user/agent for a load replay).
    templates: Vec<ChunkTemplate>,
    next: u64,
    total: u64,
    /// The response written after the last chunk.
    done: Vec<u8>,
}

/// The agent's state.
#[derive(Debug)]
struct Agent {
    out: File,
    buf: Vec<u8>,
    streams: VecDeque<Stream>,
    sessions: u32,
}

/// Runs the agent on this process's stdin/stdout until stdin ends and every stream is done.
pub fn run() -> io::Result<()> {
    let mut input = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let out = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let mut agent =
        Agent { out, buf: Vec::with_capacity(2 * BATCH), streams: VecDeque::new(), sessions: 0 };
    let mut lines = LineBuf::with_capacity(1 << 20);
    let mut eof = false;
    loop {
        while let Some(r) = lines.next_line() {
            agent.handle(lines.get(r))?;
        }
        if agent.streams.is_empty() {
            agent.flush()?;
            if eof {
                return Ok(());
            }
            if lines.fill(&mut input, 1 << 20)? == 0 {
                eof = true;
            }
            continue;
        }
        agent.round()?;
        if !eof && readable(&input) && lines.fill(&mut input, 1 << 20)? == 0 {
            eof = true;
        }
    }
}

/// Whether a read would not block.
fn readable(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, a zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

impl Agent {
    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.len() >= BATCH {
            self.flush()?;
            return self.out.write_all(bytes);
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the next chunks of every active stream, round-robin.
    fn round(&mut self) -> io::Result<()> {
        let per = (ROUND / self.streams.len()).max(1);
        let mut streams = std::mem::take(&mut self.streams);
        for s in streams.iter_mut() {
            for _ in 0..per {
                if s.next == s.total {
                    break;
                }
                let n = s.templates.len() as u64;
                let t = &mut s.templates[(s.next % n) as usize];
                t.set_seq(s.next);
                s.next += 1;
                self.push(t.line())?;
            }
            if s.next == s.total {
                let done = std::mem::take(&mut s.done);
                self.push(&done)?;
            }
        }
        streams.retain(|s| s.next < s.total);
        self.streams = streams;
        Ok(())
    }

    fn reply(&mut self, id: &Value, result: &str) -> io::Result<()> {
        let line = response(id, result);
        self.push(&line)
    }

    fn handle(&mut self, line: &[u8]) -> io::Result<()> {
        let Ok(msg) = serde_json::from_slice::<Value>(line) else { return Ok(()) };
        let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        else {
            // Notifications (`session/cancel`) and responses need nothing.
            return Ok(());
        };
        let params = msg.get("params").unwrap_or(&Value::Null);
        let bench =
            |key: &str| params.pointer(&format!("/_meta/bench/{key}")).and_then(Value::as_u64);
        let size = bench("size").unwrap_or(200) as usize;
        match method {
            "initialize" => {
                let r = format!(
                    r#"{{"protocolVersion":1,"agentCapabilities":{{"loadSession":true}},"authMethods":[],"agentInfo":{{"name":"{}","version":"{}"}}}}"#,
                    wire::AGENT_NAME,
                    env!("CARGO_PKG_VERSION")
                );
                self.reply(id, &r)
            }
            "session/new" => {
                let sid = wire::session_id(self.sessions);
                self.sessions += 1;
                let m = wire::MODEL;
                let r = format!(
                    r#"{{"sessionId":"{sid}","models":{{"currentModelId":"{m}","availableModels":[{{"modelId":"{m}","name":"{m}"}}]}}}}"#
                );
                self.reply(id, &r)
            }
            "session/load" => {
                let index = session_of(params);
                let templates = vec![
                    ChunkTemplate::new(ChunkKind::User, index, size),
                    ChunkTemplate::new(ChunkKind::Agent, index, size),
                ];
                let m = wire::MODEL;
                let done = response(
                    id,
                    &format!(
                        r#"{{"models":{{"currentModelId":"{m}","availableModels":[{{"modelId":"{m}","name":"{m}"}}]}}}}"#
                    ),
                );
                self.start(templates, bench("history").unwrap_or(0), done)
            }
            "session/prompt" => {
                let index = session_of(params);
                let templates = vec![ChunkTemplate::new(ChunkKind::Agent, index, size)];
                let done = response(id, r#"{"stopReason":"end_turn"}"#);
                self.start(templates, bench("chunks").unwrap_or(0), done)
            }
            wire::ECHO_METHOD => self.reply(id, "{}"),
            _ => {
                let line = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"method not found"}}}}"#
                );
                self.push(format!("{line}\n").as_bytes())
            }
        }
    }

    fn start(
        &mut self,
        templates: Vec<ChunkTemplate>,
        total: u64,
        done: Vec<u8>,
    ) -> io::Result<()> {
        if total == 0 {
            return self.push(&done);
        }
        self.streams.push_back(Stream { templates, next: 0, total, done });
        Ok(())
    }
}

fn session_of(params: &Value) -> u32 {
    params.get("sessionId").and_then(Value::as_str).map(wire::session_index).unwrap_or(0)
}

fn response(id: &Value, result: &str) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n").into_bytes()
}
