//! A tiny scripted ACP agent on stdio (plain serde_json, no SDK), for the SDK-client tests
//! (`tests/e2e/sdk_client.rs`; the client on the official SDK is `tests/sdk-client`).
//!
//! `sdk-scripted-agent [--no-usage] [--malformed] [--model ID]`
//!
//! * `initialize` → `loadSession: true`, agentInfo `sdk-scripted-agent`.
//! * `session/new` → session `sess-scripted-1` with a `model` config option; then a `usage_update`
//!   (`used` 0, `size` 200000), unless `--no-usage`.
//! * `session/prompt` → an `agent_message_chunk` `echo: <text>`; the prompt text may hold commands,
//!   one per line: `read PATH` (asks the client `fs/read_text_file`, echoes the content),
//!   `write PATH TEXT` (`fs/write_text_file`), `permission` (`session/request_permission`). Then,
//!   unless `--no-usage`, a `usage_update` with cost and `_meta`, and a response whose `usage`
//!   has turn n (1-based): input = 1000·n, output = 100·n, thought = 10·n, cachedRead = 500·n,
//!   total = input + output, plus `_meta`.
//! * `session/load` → replays the prompts as user/agent chunks, a `usage_update` (unless
//!   `--no-usage`), then answers `null` (as in the protocol docs).
//! * Other requests → `-32601`; notifications are ignored; EOF ends it.
//! * `--malformed`: each prompt turn also sends an unknown `sessionUpdate` variant, a
//!   `usage_update` whose `cost.amount` is a string, and a response whose `usage.totalTokens` is a
//!   string; the SDK rejects or silently drops these, which the tests check is noticed.

use std::io::{BufRead as _, Write as _};

use serde_json::{Value, json};

const SESSION_ID: &str = "sess-scripted-1";
const SIZE: u64 = 200_000;

struct Agent {
    usage: bool,
    malformed: bool,
    model: String,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
    next_id: u64,
    history: Vec<(String, String)>,
    used: u64,
    cost: f64,
}

impl Agent {
    fn send(&self, msg: &Value) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{msg}")?;
        out.flush()?;
        Ok(())
    }

    fn notify(&self, update: Value) -> anyhow::Result<()> {
        self.send(&json!({
            "jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": SESSION_ID, "update": update},
        }))
    }

    /// Sends a request to the client and waits for its response (the client sends nothing else
    /// meanwhile in these tests; anything else that arrives is ignored).
    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = format!("agent-{}", self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        for line in self.lines.by_ref() {
            let msg: Value = serde_json::from_str(&line?)?;
            if msg.get("method").is_none() && msg.get("id") == Some(&json!(id)) {
                if let Some(err) = msg.get("error") {
                    anyhow::bail!("{method} failed: {err}");
                }
                return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
            }
        }
        anyhow::bail!("EOF while waiting for {method}")
    }

    fn usage_update(&self, turn: usize) -> anyhow::Result<()> {
        if self.usage {
            self.notify(json!({
                "sessionUpdate": "usage_update", "used": self.used, "size": SIZE,
                "cost": {"amount": self.cost, "currency": "USD", "_meta": {"sdk-scripted-agent/priced": true}},
                "_meta": {"sdk-scripted-agent/turn": turn},
            }))?;
        }
        Ok(())
    }

    fn prompt(&mut self, params: &Value) -> anyhow::Result<Value> {
        let text: String = params["prompt"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let mut reply = format!("echo: {text}");
        for line in text.lines() {
            let mut words = line.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("read"), Some(path), _) => {
                    let r = self.request(
                        "fs/read_text_file",
                        json!({"sessionId": SESSION_ID, "path": path}),
                    )?;
                    reply.push_str(&format!("\nread: {}", r["content"].as_str().unwrap_or("")));
                }
                (Some("write"), Some(path), content) => {
                    let params = json!({"sessionId": SESSION_ID, "path": path, "content": content.unwrap_or("")});
                    self.request("fs/write_text_file", params)?;
                    reply.push_str(&format!("\nwrote: {path}"));
                }
                (Some("permission"), ..) => {
                    let r = self.request(
                        "session/request_permission",
                        json!({
                            "sessionId": SESSION_ID,
                            "toolCall": {"toolCallId": "call-1", "title": "Run a tool", "kind": "execute"},
                            "options": [
                                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                                {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                            ],
                        }),
                    )?;
                    reply.push_str(&format!("\npermission: {}", r["outcome"]));
                }
                _ => {}
            }
        }
        self.notify(json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": reply},
        }))?;
        self.history.push((text, reply));
        let turn = self.history.len() as u64;
        let (input, output) = (1000 * turn, 100 * turn);
        self.used += input + output;
        self.cost += 0.0125 * turn as f64;
        self.usage_update(self.history.len())?;
        if self.malformed {
            self.notify(json!({"sessionUpdate": "future_update", "detail": 1}))?;
            self.notify(json!({
                "sessionUpdate": "usage_update", "used": self.used, "size": SIZE,
                "cost": {"amount": "free", "currency": "USD"},
            }))?;
            return Ok(json!({
                "stopReason": "end_turn",
                "usage": {"totalTokens": "many", "inputTokens": input, "outputTokens": output},
            }));
        }
        let mut result =
            json!({"stopReason": "end_turn", "_meta": {"sdk-scripted-agent/turn": turn}});
        if self.usage {
            result["usage"] = json!({
                "totalTokens": input + output, "inputTokens": input, "outputTokens": output,
                "thoughtTokens": 10 * turn, "cachedReadTokens": 500 * turn,
                "_meta": {"sdk-scripted-agent/source": "scripted"},
            });
        }
        Ok(result)
    }

    fn load(&mut self) -> anyhow::Result<Value> {
        for (user, agent) in self.history.clone() {
            self.notify(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": user}}))?;
            self.notify(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": agent}}))?;
        }
        self.usage_update(self.history.len())?;
        Ok(Value::Null)
    }

    fn handle(&mut self, method: &str, params: &Value) -> anyhow::Result<Result<Value, Value>> {
        Ok(Ok(match method {
            "initialize" => json!({
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": true, "promptCapabilities": {}},
                "agentInfo": {"name": "sdk-scripted-agent", "version": "0.1.0"},
                "authMethods": [],
            }),
            "session/new" => json!({
                "sessionId": SESSION_ID,
                "configOptions": [{
                    "id": "model", "name": "Model", "category": "model", "type": "select",
                    "currentValue": self.model,
                    "options": [{"value": self.model, "name": self.model}],
                }],
            }),
            "session/prompt" => self.prompt(params)?,
            "session/load" => self.load()?,
            _ => {
                return Ok(Err(
                    json!({"code": -32601, "message": format!("Method not found: {method}")}),
                ));
            }
        }))
    }
}

fn main() -> anyhow::Result<()> {
    let mut usage = true;
    let mut malformed = false;
    let mut model = String::from("claude-sonnet-4-5");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-usage" => usage = false,
            "--malformed" => malformed = true,
            "--model" => {
                model = args.next().ok_or_else(|| anyhow::anyhow!("--model needs a value"))?
            }
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let mut agent = Agent {
        usage,
        malformed,
        model,
        lines: std::io::stdin().lock().lines(),
        next_id: 0,
        history: Vec::new(),
        used: 0,
        cost: 0.0,
    };
    while let Some(line) = agent.lines.next() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = serde_json::from_str(&line)?;
        let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        else {
            continue; // notifications (session/cancel, …) and stray responses
        };
        let (method, id) = (method.to_owned(), id.clone());
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let reply = match agent.handle(&method, &params)? {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        agent.send(&reply)?;
        if method == "session/new" {
            agent.usage_update(0)?;
        }
    }
    Ok(())
}
