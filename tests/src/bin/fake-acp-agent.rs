//! `fake-acp-agent`: a scripted ACP agent whose every output line is fixed text, for testing
//! that the relay forwards what it does not own byte for byte.
//!
//! Its lines are deliberately written the way no serializer would write them (odd spacing,
//! `\u` escapes, `1.50`, `1e3`, key order, a line that is not JSON), so any re-serialization
//! shows. It echoes every line it receives in a `_fake/received` notification (the raw text as a
//! JSON string), so the test can check the client→agent direction too. With `FAKE_AGENT_LOG` set
//! it appends every line it writes to that file.
//!
//! Behaviour: `initialize`, `session/new` (`fake-session-1`), `session/load` (one replayed chunk,
//! then `{}`), `session/prompt` (asks for permission first; once the answer arrives it streams a
//! few updates, its own `usage_update`, and ends with its own per-turn `usage`), `_fake/ext`
//! (answered), anything else with an id: -32601.
//!
//! `FAKE_AGENT_NAME` is the name it gives in `agentInfo` (default `fake-acp-agent`).
//!
//! With `FAKE_AGENT_CALL_AT_EXIT` set, at the end of its stdin it starts one streamed Anthropic
//! Messages call to `$ANTHROPIC_BASE_URL` (sent as Claude Code's side calls are, naming
//! `fake-session-1` in `x-claude-code-session-id`), waits for the answer's status line, and
//! exits without reading the rest: an agent that goes while its last call is being answered.
//! With `FAKE_AGENT_CALL_AT_START` set, it makes one such call before it reads its stdin and
//! reads the whole answer: an agent that calls its model before it answers `initialize`.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};

use serde_json::Value;

/// The per-turn usage the fake agent reports, as written (`e2e/relay_fake.rs` has a copy).
const AGENT_USAGE: &str = r#"{"totalTokens":1300,"inputTokens":1200,"outputTokens":100}"#;

struct Agent {
    out: io::Stdout,
    log: Option<File>,
    /// The id of a prompt waiting for its permission answer.
    pending_prompt: Option<String>,
}

impl Agent {
    fn write(&mut self, line: &str) {
        let mut out = self.out.lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.write_all(b"\n");
        let _ = out.flush();
        if let Some(log) = self.log.as_mut() {
            let _ = writeln!(log, "{line}");
        }
    }

    fn handle(&mut self, line: &str) {
        let echo = serde_json::to_string(line).unwrap_or_default();
        self.write(&format!(
            r#"{{"jsonrpc":"2.0","method":"_fake/received","params":{{"raw":{echo}}}}}"#
        ));
        let Ok(message) = serde_json::from_str::<Value>(line) else { return };
        // Ids go back exactly as they came (number or string), as raw JSON text.
        let id = message.get("id").map(Value::to_string);
        let method = message["method"].as_str();
        match (method, id) {
            (Some("initialize"), Some(id)) => {
                let name = serde_json::to_string(&agent_name()).unwrap_or_default();
                self.write(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":1,"agentCapabilities":{{"loadSession":true,"sessionCapabilities":{{"resume":{{}}}}}},"agentInfo":{{"name":{name},"version":"0.0.1"}},"authMethods":[]}}}}"#
                ));
            }
            (Some("session/new"), Some(id)) => {
                self.write(r#"{"jsonrpc":"2.0","method":"_fake/hello", "params":{"b":2,"a":1}}"#);
                self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"sessionId":"fake-session-1"}}}}"#));
            }
            (Some("session/load"), Some(id)) => {
                self.write(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"Earlier question"}}}}"#);
                self.write(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Earlier answer"}}}}"#);
                self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#));
            }
            (Some("session/resume"), Some(id)) => self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)),
            (Some("session/prompt"), Some(id)) => {
                self.pending_prompt = Some(id);
                self.write(r#"{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"fake-session-1","toolCall":{"toolCallId":"call-1","title":"Look"},"options":[{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}"#);
            }
            (Some("_fake/ext"), Some(id)) => {
                self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"ok":true, "n":1.50}}}}"#));
            }
            (Some(_), Some(id)) => self.write(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found"}}}}"#
            )),
            (None, Some(id)) if id == r#""perm-1""# => self.finish_prompt(),
            _ => {}
        }
    }

    /// The rest of the turn, once the permission answer came back.
    fn finish_prompt(&mut self) {
        let Some(id) = self.pending_prompt.take() else { return };
        let lines = [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello, \u00e9t\u00e9 \ud83d\ude00"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"future_kind","x":1.50}}}"#,
            r#"{"method":"_fake/vendor","jsonrpc":"2.0","params":{"n":1e3}}"#,
            "this line is not JSON {",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-session-1","update":{"sessionUpdate":"usage_update","used":1234,"size":200000,"_meta":{"fake/extra":true}}}}"#,
        ];
        for line in lines {
            self.write(line);
        }
        self.write(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn","usage":{AGENT_USAGE},"_meta":{{"fake/keep":1}}}}}}"#
        ));
    }
}

/// The name it gives in `initialize`'s `agentInfo`: `$FAKE_AGENT_NAME`, else `fake-acp-agent`.
fn agent_name() -> String {
    std::env::var("FAKE_AGENT_NAME").unwrap_or_else(|_| "fake-acp-agent".to_owned())
}

fn main() {
    let log = std::env::var_os("FAKE_AGENT_LOG")
        .and_then(|path| File::options().create(true).append(true).open(path).ok());
    let mut agent = Agent { out: io::stdout(), log, pending_prompt: None };
    call_if("FAKE_AGENT_CALL_AT_START", true);
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        agent.handle(&line);
    }
    call_if("FAKE_AGENT_CALL_AT_EXIT", false);
}

/// With `var` set (and a base URL), one [`call`].
fn call_if(var: &str, whole: bool) {
    if std::env::var_os(var).is_some()
        && let Ok(base) = std::env::var("ANTHROPIC_BASE_URL")
        && let Err(e) = call(&base, whole)
    {
        eprintln!("fake-acp-agent: the call of {var} failed: {e}");
    }
}

/// Sends a streamed Messages call to `base` (`http://HOST:PORT/PATH`) and returns once the
/// answer's status line is in, leaving its body unread, or (`whole`) once all of it is in.
fn call(base: &str, whole: bool) -> io::Result<()> {
    let rest = base.strip_prefix("http://").ok_or_else(|| io::Error::other("not http://"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
    let body = r#"{"model":"claude-test-1","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Suggest a next prompt."}]}"#;
    let request = format!(
        "POST {prefix}/v1/messages HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\nx-api-key: sk-ant-fake\r\nx-claude-code-session-id: fake-session-1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(authority)?;
    stream.write_all(request.as_bytes())?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1];
    while !seen.ends_with(b"\r\n") {
        if stream.read(&mut buf)? == 0 {
            return Err(io::Error::other("the connection closed before the status line"));
        }
        seen.push(buf[0]);
    }
    if whole {
        stream.read_to_end(&mut seen)?;
    }
    Ok(())
}
