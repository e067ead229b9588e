//! The scripted ACP agent that `acp-usage demo` wraps (`acp-usage demo-agent`, hidden).
//!
//! It behaves like a partly silent real agent: it answers every `session/prompt` with a per-turn
//! `usage` in Anthropic style, exactly as claude-agent-acp fills it (`inputTokens` without the
//! cache, `cachedReadTokens`, `cachedWriteTokens`, `outputTokens`, and `totalTokens` = the sum of
//! all four). Like claude-agent-acp on a Claude subscription it sends one `usage_update` of its
//! own, in the third turn, carrying its plan's windows in `_meta["_claude/rateLimit"]`
//! ([`RATE_LIMIT`]); and like most agents it sends its command list (`/init`) when a session is
//! loaded. Everything else in the demo's output is what acp-usage adds.
//!
//! The script is public so that the demo's tests and the agent share one source of truth: the
//! prompts ([`TURNS`]), the model calls behind each turn ([`Turn::calls`]) and what the agent
//! reports for them ([`reported_usage`]). Nothing depends on randomness; only the windows'
//! reset times depend on the clock.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

/// `agentInfo.name` (not one acp-usage has a profile for, so it gets the generic one).
pub const AGENT_NAME: &str = "acp-usage-demo-agent";
/// The one session the agent hands out.
pub const SESSION_ID: &str = "sess_demo_0001";
/// The working directory the demo client opens the session in (nothing is read from it).
pub const CWD: &str = "/home/you/hello-rs";
/// The models of the `model` config option: value, name, description. All are catalog ids.
pub const MODELS: [(&str, &str, &str); 3] = [
    ("claude-sonnet-4-5", "Claude Sonnet 4.5", "Fast and capable, 200k context"),
    ("claude-opus-4-6", "Claude Opus 4.6", "Most capable, 1M context"),
    ("claude-haiku-4-5", "Claude Haiku 4.5", "Fastest, 200k context"),
];
/// The turn (0-based) whose agent reports its plan's windows, as claude-agent-acp forwards
/// Claude Code's rate-limit event.
pub const RATE_LIMIT_TURN: usize = 2;
/// The plan's windows it reports: (window, utilization, seconds until it resets).
pub const RATE_LIMIT: [(&str, f64, u64); 2] =
    [("five_hour", 0.42, 2 * 3600), ("seven_day", 0.18, 4 * 86_400)];
/// The command the agent lists (after `session/load`): acp-usage adds its own `/usage`.
pub const AGENT_COMMAND: &str = "init";

/// The model a new session starts with.
pub const FIRST_MODEL: &str = MODELS[0].0;
/// The model the demo client switches to before the third prompt.
pub const SECOND_MODEL: &str = MODELS[1].0;

/// One model call, counted the Anthropic way: `input` excludes the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Call {
    /// Input tokens that were neither read from nor written to the cache.
    pub input: u64,
    /// Cache reads.
    pub cached_read: u64,
    /// Cache writes.
    pub cached_write: u64,
    /// Output tokens.
    pub output: u64,
}

/// What the agent does in a turn, in order.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// An `agent_message_chunk`.
    Say(&'static str),
    /// A tool call: `tool_call` (pending), then `tool_call_update` (completed) with its result.
    Tool {
        /// The tool call id.
        id: &'static str,
        /// Its title.
        title: &'static str,
        /// The file it reads, relative to [`CWD`].
        path: &'static str,
        /// What the tool returned.
        result: &'static str,
    },
}

/// One scripted prompt turn.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    /// What the user asks (the demo client sends it).
    pub prompt: &'static str,
    /// What the agent streams back.
    pub steps: &'static [Step],
    /// The model calls behind the turn; their sum is the turn's reported usage.
    pub calls: &'static [Call],
}

const MAIN_RS: &str = "use std::env;\n\nfn main() {\n    let name = env::args().nth(1).unwrap_or_else(|| \"world\".to_string());\n    println!(\"{}\", greeting(&name));\n}\n\nfn greeting(name: &str) -> String {\n    format!(\"Hello, {name}!\")\n}\n";

/// The script. Numbers grow as the conversation does: a ~14k-token system prompt and tool
/// definitions, mostly read from the cache; the switch to another model starts a new cache.
pub const TURNS: [Turn; 4] = [
    Turn {
        prompt: "What does this project do?",
        steps: &[Step::Say(
            "hello-rs is a small command-line program: it prints a greeting for the name given as \
             its first argument, or \"Hello, world!\" without one.",
        )],
        calls: &[Call { input: 4, cached_read: 11_842, cached_write: 2_716, output: 186 }],
    },
    Turn {
        prompt: "Add a --shout flag that prints the greeting in capitals.",
        steps: &[
            Step::Say("Let me read src/main.rs first."),
            Step::Tool {
                id: "toolu_01",
                title: "Read src/main.rs",
                path: "src/main.rs",
                result: MAIN_RS,
            },
            Step::Say(
                "Done: main() now checks for --shout and upper-cases the greeting with \
                 to_uppercase(); the name is the first argument that is not a flag.",
            ),
        ],
        calls: &[
            Call { input: 5, cached_read: 14_558, cached_write: 231, output: 94 },
            Call { input: 5, cached_read: 14_789, cached_write: 1_412, output: 463 },
        ],
    },
    Turn {
        prompt: "Write a unit test for greeting().",
        steps: &[Step::Say(
            "Added tests::greets_by_name, which asserts greeting(\"Ada\") == \"Hello, Ada!\", and \
             tests::shouts, which checks the --shout path.",
        )],
        calls: &[Call { input: 6, cached_read: 11_842, cached_write: 5_034, output: 352 }],
    },
    Turn {
        prompt: "Summarise what we changed today.",
        steps: &[Step::Say(
            "We added a --shout flag to hello-rs and two unit tests for greeting(): one for the \
             plain greeting and one for the capitals.",
        )],
        calls: &[Call { input: 4, cached_read: 16_876, cached_write: 398, output: 147 }],
    },
];

/// The per-turn `usage` the agent reports, Anthropic style as claude-agent-acp sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reported {
    /// `inputTokens`: input without the cache.
    pub input: u64,
    /// `cachedReadTokens`.
    pub cached_read: u64,
    /// `cachedWriteTokens`.
    pub cached_write: u64,
    /// `outputTokens`.
    pub output: u64,
    /// `totalTokens`: the sum of the four above.
    pub total: u64,
}

impl Reported {
    /// All prompt-side tokens, cache included: what acp-usage reports as `inputTokens`.
    pub fn input_with_cache(&self) -> u64 {
        self.input + self.cached_read + self.cached_write
    }

    fn to_json(self) -> Value {
        json!({
            "totalTokens": self.total,
            "inputTokens": self.input,
            "outputTokens": self.output,
            "cachedReadTokens": self.cached_read,
            "cachedWriteTokens": self.cached_write,
        })
    }
}

/// The script entry of the `n`-th prompt (0-based); prompts past the script repeat the last one.
pub fn turn(n: usize) -> &'static Turn {
    &TURNS[n.min(TURNS.len() - 1)]
}

/// What the agent reports for the `n`-th prompt (0-based): the sum over the turn's calls.
pub fn reported_usage(n: usize) -> Reported {
    let mut r = Reported::default();
    for c in turn(n).calls {
        r.input += c.input;
        r.cached_read += c.cached_read;
        r.cached_write += c.cached_write;
        r.output += c.output;
    }
    r.total = r.input + r.cached_read + r.cached_write + r.output;
    r
}

/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC "invalid params".
const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC "parse error".
const PARSE_ERROR: i32 = -32700;
/// ACP "resource not found".
const RESOURCE_NOT_FOUND: i32 = -32002;

/// The agent's state: one session, its model, its history and how many prompts it answered.
#[derive(Debug)]
pub struct Agent {
    model: &'static str,
    session: bool,
    prompts: usize,
    /// (from the user?, text), for replay on `session/load`.
    history: Vec<(bool, String)>,
}

impl Default for Agent {
    fn default() -> Agent {
        Agent { model: FIRST_MODEL, session: false, prompts: 0, history: Vec::new() }
    }
}

impl Agent {
    /// Answers one message from the client: the lines to write, in order.
    pub fn handle(&mut self, msg: &Value) -> Vec<Value> {
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // A response to a request of ours; the agent sends none.
            return Vec::new();
        };
        let Some(id) = msg.get("id").cloned() else {
            // Notifications (`session/cancel`, extensions): nothing to cancel, nothing to say.
            return Vec::new();
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let session_ok =
            params.get("sessionId").and_then(Value::as_str) == Some(SESSION_ID) && self.session;
        match method {
            "initialize" => vec![result(id, self.initialize())],
            "session/new" => {
                self.session = true;
                vec![result(
                    id,
                    json!({"sessionId": SESSION_ID, "configOptions": self.config_options()}),
                )]
            }
            "session/load"
                if params.get("sessionId").and_then(Value::as_str) == Some(SESSION_ID) =>
            {
                self.session = true;
                let mut out: Vec<Value> = self
                    .history
                    .iter()
                    .map(|(user, text)| {
                        let kind = if *user { "user_message_chunk" } else { "agent_message_chunk" };
                        update(json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}))
                    })
                    .collect();
                out.push(update(json!({
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [{"name": AGENT_COMMAND, "description": "Write an AGENTS.md for this project"}],
                })));
                out.push(result(id, Value::Null));
                out
            }
            "session/load" => vec![error(id, RESOURCE_NOT_FOUND, "no such session")],
            "session/set_config_option" if session_ok => {
                let value = params.get("value").and_then(Value::as_str);
                let known = MODELS.iter().find(|(v, _, _)| Some(*v) == value);
                match (params.get("configId").and_then(Value::as_str), known) {
                    (Some("model"), Some((v, _, _))) => {
                        self.model = v;
                        vec![result(id, json!({"configOptions": self.config_options()}))]
                    }
                    _ => vec![error(id, INVALID_PARAMS, "unknown config option or value")],
                }
            }
            "session/prompt" if session_ok => self.prompt(id, &params),
            "session/prompt" | "session/set_config_option" => {
                vec![error(id, RESOURCE_NOT_FOUND, "no such session")]
            }
            _ => vec![error(id, METHOD_NOT_FOUND, "Method not found")],
        }
    }

    fn initialize(&self) -> Value {
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            },
            "agentInfo": {"name": AGENT_NAME, "title": "acp-usage demo agent", "version": env!("CARGO_PKG_VERSION")},
            "authMethods": [],
        })
    }

    fn config_options(&self) -> Value {
        let options: Vec<Value> = MODELS
            .iter()
            .map(|(value, name, description)| json!({"value": value, "name": name, "description": description}))
            .collect();
        json!([{
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": self.model,
            "options": options,
        }])
    }

    fn prompt(&mut self, id: Value, params: &Value) -> Vec<Value> {
        let text: Vec<&str> = params
            .get("prompt")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect()
            })
            .unwrap_or_default();
        self.history.push((true, text.join("\n")));
        let n = self.prompts;
        self.prompts += 1;
        let mut out = Vec::new();
        for step in turn(n).steps {
            match *step {
                Step::Say(text) => {
                    self.history.push((false, text.to_string()));
                    out.push(update(json!({
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": text},
                    })));
                }
                Step::Tool { id: call, title, path, result } => {
                    let abs = format!("{CWD}/{path}");
                    out.push(update(json!({
                        "sessionUpdate": "tool_call",
                        "toolCallId": call,
                        "title": title,
                        "kind": "read",
                        "status": "pending",
                        "locations": [{"path": abs}],
                        "rawInput": {"file_path": abs},
                    })));
                    out.push(update(json!({
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call,
                        "status": "completed",
                        "content": [{"type": "content", "content": {"type": "text", "text": result}}],
                    })));
                }
            }
        }
        if n == RATE_LIMIT_TURN {
            // Its `size` is its model's window, as the catalog has it (the agent's own report).
            let window = acp_usage_core::Catalog::embedded()
                .lookup(self.model)
                .and_then(|m| m.max_input)
                .unwrap_or(200_000);
            out.push(rate_limit_update(reported_usage(n).total, window));
        }
        out.push(result(
            id,
            json!({"stopReason": "end_turn", "usage": reported_usage(n).to_json()}),
        ));
        out
    }
}

/// A `usage_update` as claude-agent-acp sends it on a subscription: its own `used` and `size`,
/// and the plan's windows in `_meta["_claude/rateLimit"]`, reset times counted from now.
fn rate_limit_update(used: u64, size: u64) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let windows: serde_json::Map<String, Value> = RATE_LIMIT
        .iter()
        .map(|(w, u, resets)| {
            ((*w).to_owned(), json!({"utilization": u, "resetsAt": now + resets}))
        })
        .collect();
    let (first, fraction, resets) = RATE_LIMIT[0];
    update(json!({
        "sessionUpdate": "usage_update",
        "used": used,
        "size": size,
        "_meta": {"_claude/rateLimit": {
            "status": "allowed", "rateLimitType": first, "utilization": fraction,
            "resetsAt": now + resets, "unifiedWindows": windows,
        }},
    }))
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: Value, code: i32, message: &str) -> Value {
    let error = jsonrpsee_types::ErrorObject::borrowed(code, message, None);
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn update(update: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SESSION_ID, "update": update},
    })
}

/// Runs the scripted agent on stdin/stdout until stdin closes.
pub fn run() -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut agent = Agent::default();
    for line in stdin.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let replies = match serde_json::from_str::<Value>(&line) {
            Ok(msg) => agent.handle(&msg),
            Err(_) => vec![error(Value::Null, PARSE_ERROR, "Parse error")],
        };
        let res = replies.iter().try_for_each(|r| writeln!(out, "{r}")).and_then(|()| out.flush());
        match res {
            Ok(()) => {}
            // The client went away: nothing left to do.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_turn_sums_its_calls() {
        let r = reported_usage(1);
        assert_eq!(r.input, 10);
        assert_eq!(r.cached_read, 14_558 + 14_789);
        assert_eq!(r.total, r.input_with_cache() + r.output);
        // Past the script, the last turn repeats.
        assert_eq!(reported_usage(9), reported_usage(TURNS.len() - 1));
    }

    #[test]
    fn prompt_answers_with_anthropic_usage_and_no_usage_update() {
        let mut a = Agent::default();
        a.handle(&json!({"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {"cwd": CWD, "mcpServers": []}}));
        let out = a.handle(&json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
            "params": {"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": TURNS[0].prompt}]}}));
        let last = out.last().unwrap();
        assert_eq!(last["result"]["usage"]["totalTokens"], 4 + 11_842 + 2_716 + 186);
        assert!(
            out.iter()
                .all(|m| m.pointer("/params/update/sessionUpdate") != Some(&json!("usage_update")))
        );
        let load = a.handle(&json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
            "params": {"sessionId": SESSION_ID, "cwd": CWD, "mcpServers": []}}));
        // The history replayed, the agent's command list, then the result.
        assert_eq!(load.len(), 4);
        let list = &load[2]["params"]["update"];
        assert_eq!(list["sessionUpdate"], "available_commands_update");
        assert_eq!(list["availableCommands"][0]["name"], AGENT_COMMAND);
        assert_eq!(load[3]["result"], Value::Null);
    }

    #[test]
    fn the_third_turn_reports_the_plans_windows_as_claude_agent_acp_does() {
        let mut a = Agent::default();
        a.handle(&json!({"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {"cwd": CWD, "mcpServers": []}}));
        let updates: Vec<Vec<Value>> = (0..TURNS.len())
            .map(|n| {
                let params = json!({"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": TURNS[n].prompt}]});
                a.handle(&json!({"jsonrpc": "2.0", "id": n + 1, "method": "session/prompt", "params": params}))
                    .into_iter()
                    .filter(|m| m.pointer("/params/update/sessionUpdate") == Some(&json!("usage_update")))
                    .collect()
            })
            .collect();
        let counts: Vec<usize> = updates.iter().map(Vec::len).collect();
        assert_eq!(counts, [0, 0, 1, 0]);
        let windows = &updates[RATE_LIMIT_TURN][0]["params"]["update"]["_meta"]["_claude/rateLimit"]
            ["unifiedWindows"];
        assert_eq!(windows["five_hour"]["utilization"], RATE_LIMIT[0].1);
        assert_eq!(windows["seven_day"]["utilization"], RATE_LIMIT[1].1);
    }
}
