//! Printing the demo's traffic for a human: one compact line per message, marked where
//! acp-usage added or changed it, and a closing summary.
//!
//! A line is acp-usage's own when it carries `_meta.acpUsage`: a `usage_update` whose trigger is
//! not `agent` was injected; one with trigger `agent` is the agent's own, rewritten; a prompt
//! result whose `usage` carries it was rewritten. A command list holding only acp-usage's
//! `/usage` entry was injected, an agent's list with it added was rewritten. While acp-usage
//! answers `/usage` itself ([`Printer::answering`]), every line up to the result is its own.

use std::io::{self, Write};

use acp_usage_schema::META_KEY;

use crate::numbers::thousands;
use serde_json::Value;

/// Width of the direction column.
const DIR_WIDTH: usize = 15;
/// Width of the mark column.
const MARK_WIDTH: usize = 10;
/// Longest quoted text shown for a message.
const TEXT_MAX: usize = 64;

/// What the editor received, summed for the closing summary.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stats {
    /// Prompt results seen.
    pub turns: u64,
    /// Sum of the turns' `totalTokens`.
    pub total: u64,
    /// Sum of the turns' `inputTokens` (cache included, as acp-usage reports it).
    pub input: u64,
    /// Sum of the turns' `cachedReadTokens`.
    pub cached_read: u64,
    /// Sum of the turns' `outputTokens`.
    pub output: u64,
    /// `usage_update`s acp-usage injected.
    pub injected: u64,
    /// Other lines acp-usage wrote itself: its command list, its answers to `/usage`.
    pub injected_other: u64,
    /// Lines acp-usage rewrote (prompt results, the agent's own updates and command lists).
    pub rewritten: u64,
    /// `usage_update`s the agent sent itself (passed through or rewritten).
    pub agent_updates: u64,
    /// The cost of the latest `usage_update`, with its source and whether it is partial.
    pub cost: Option<(f64, String, bool)>,
    /// Zed's plan-usage meter as the latest `usage_update` draws it (`5h 42% · 7d 18%`).
    pub meter: Option<String>,
}

/// Writes the annotated traffic to `out`.
#[derive(Debug)]
pub struct Printer<W: Write> {
    out: W,
    raw: bool,
    /// acp-usage answers the prompt in flight itself: the agent never sees it.
    answering: bool,
    /// Running totals for the summary.
    pub stats: Stats,
}

impl<W: Write> Printer<W> {
    /// A printer; with `raw`, every message's JSON line follows its human line.
    pub fn new(out: W, raw: bool) -> Printer<W> {
        Printer { out, raw, answering: false, stats: Stats::default() }
    }

    /// From now until the next response, the lines are acp-usage's answer to its own command.
    pub fn answering(&mut self, on: bool) {
        self.answering = on;
    }

    /// Gives the writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// A free-form line.
    pub fn text(&mut self, text: &str) -> io::Result<()> {
        writeln!(self.out, "{text}")
    }

    /// A section heading.
    pub fn section(&mut self, title: &str) -> io::Result<()> {
        writeln!(self.out, "\n── {title} ──")
    }

    /// A message the demo client (the editor) sent.
    pub fn editor(&mut self, line: &str, msg: &Value) -> io::Result<()> {
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("?");
        let p = msg.get("params").unwrap_or(&Value::Null);
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
        let desc = match method {
            "initialize" => format!(
                "initialize (protocol {})",
                p.get("protocolVersion").unwrap_or(&Value::Null)
            ),
            "session/new" => format!("session/new in {}", s("cwd")),
            "session/load" => format!("session/load {}", s("sessionId")),
            "session/prompt" => {
                let text = p
                    .get("prompt")
                    .and_then(Value::as_array)
                    .and_then(|b| b.first())
                    .and_then(|b| b.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("session/prompt {}", quote(text))
            }
            "session/set_config_option" => {
                format!("session/set_config_option {} = {}", s("configId"), s("value"))
            }
            other => other.to_string(),
        };
        self.line("editor → agent", "", &desc, line)
    }

    /// A message from the agent, as acp-usage forwarded it; `request` is the method of the
    /// editor's request when this is a response.
    pub fn agent(&mut self, line: &str, msg: &Value, request: Option<&str>) -> io::Result<()> {
        if msg.get("method").is_none() {
            return self.response(line, msg, request.unwrap_or("?"));
        }
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("?");
        let update = msg.pointer("/params/update").filter(|_| method == "session/update");
        let Some(update) = update else {
            return self.line("agent → editor", "", method, line);
        };
        let kind = update.get("sessionUpdate").and_then(Value::as_str).unwrap_or("?");
        let s = |k: &str| update.get(k).and_then(Value::as_str).unwrap_or("?");
        let desc = match kind {
            "usage_update" => return self.usage_update(line, update),
            "available_commands_update" => return self.commands(line, update),
            "agent_message_chunk" if self.answering => {
                let text = update.pointer("/content/text").and_then(Value::as_str).unwrap_or("");
                self.stats.injected_other += 1;
                self.line("agent → editor", "INJECTED", "agent_message_chunk, the answer:", line)?;
                let pad = " ".repeat(DIR_WIDTH + MARK_WIDTH + 2);
                for l in text.lines() {
                    writeln!(self.out, "{pad}  {l}")?;
                }
                return Ok(());
            }
            "agent_message_chunk" | "user_message_chunk" | "agent_thought_chunk" => {
                let text = update.pointer("/content/text").and_then(Value::as_str).unwrap_or("");
                format!("{kind} {}", quote(text))
            }
            "tool_call" => {
                format!("tool_call {} {} ({})", s("toolCallId"), quote(s("title")), s("status"))
            }
            "tool_call_update" => {
                let text: String = update
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
                    .collect();
                let lines = text.lines().count();
                format!(
                    "tool_call_update {} {} ({lines} lines of output)",
                    s("toolCallId"),
                    s("status")
                )
            }
            other => other.to_string(),
        };
        self.line("agent → editor", "", &desc, line)
    }

    /// A command list: acp-usage's own (only its entry), or the agent's with its entry added.
    fn commands(&mut self, line: &str, update: &Value) -> io::Result<()> {
        let list = update.get("availableCommands").and_then(Value::as_array);
        let entries = list.map(Vec::as_slice).unwrap_or_default();
        let is_ours = |c: &Value| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            serde_json::from_str::<Value>(&crate::relay::observer::command_entry(name)).ok()
                == Some(c.clone())
        };
        let names: Vec<String> = entries
            .iter()
            .map(|c| format!("/{}", c.get("name").and_then(Value::as_str).unwrap_or("?")))
            .collect();
        let ours = entries.iter().filter(|c| is_ours(c)).count();
        let (mark, how) = match (ours, entries.len() - ours) {
            (0, _) => ("", String::new()),
            (_, 0) => ("INJECTED", " (acp-usage's own command)".to_owned()),
            (_, _) => ("REWRITTEN", " (the agent's list, acp-usage's /usage added)".to_owned()),
        };
        match mark {
            "INJECTED" => self.stats.injected_other += 1,
            "REWRITTEN" => self.stats.rewritten += 1,
            _ => {}
        }
        let desc = format!("available_commands_update {}{how}", names.join(" "));
        self.line("agent → editor", mark, &desc, line)
    }

    fn response(&mut self, line: &str, msg: &Value, request: &str) -> io::Result<()> {
        if let Some(err) = msg.get("error") {
            let code = err.get("code").unwrap_or(&Value::Null);
            let message = err.get("message").and_then(Value::as_str).unwrap_or("");
            return self.line(
                "agent → editor",
                "",
                &format!("{request} error {code}: {message}"),
                line,
            );
        }
        let r = msg.get("result").unwrap_or(&Value::Null);
        let desc = match request {
            "initialize" => {
                let info = |k: &str| {
                    r.pointer(&format!("/agentInfo/{k}")).and_then(Value::as_str).unwrap_or("?")
                };
                let load = r.pointer("/agentCapabilities/loadSession") == Some(&Value::Bool(true));
                format!(
                    "initialize result: {} {}{}",
                    info("name"),
                    info("version"),
                    if load { ", loadSession" } else { "" }
                )
            }
            "session/new" | "session/set_config_option" | "session/load" => {
                let mut d = format!("{request} result:");
                if let Some(id) = r.get("sessionId").and_then(Value::as_str) {
                    d.push_str(&format!(" {id},"));
                }
                match selected_model(r) {
                    Some(m) => d.push_str(&format!(" model {m}")),
                    None => d.push_str(&format!(" {r}")),
                }
                d
            }
            "session/prompt" => return self.prompt_result(line, r),
            other => format!("{other} result"),
        };
        self.line("agent → editor", "", &desc, line)
    }

    fn prompt_result(&mut self, line: &str, r: &Value) -> io::Result<()> {
        let stop = r.get("stopReason").and_then(Value::as_str).unwrap_or("?");
        if std::mem::take(&mut self.answering) {
            self.stats.injected_other += 1;
            let desc = format!(
                "session/prompt result: {stop}; usage {} (acp-usage answered: no model call)",
                r.get("usage").map_or_else(|| "none".to_owned(), usage_counts)
            );
            return self.line("agent → editor", "INJECTED", &desc, line);
        }
        let Some(usage) = r.get("usage").filter(|u| u.is_object()) else {
            return self.line(
                "agent → editor",
                "",
                &format!("session/prompt result: {stop}, no usage"),
                line,
            );
        };
        let ours = usage.pointer(&format!("/_meta/{META_KEY}"));
        let count = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        self.stats.turns += 1;
        self.stats.total += count("totalTokens");
        self.stats.input += count("inputTokens");
        self.stats.cached_read += count("cachedReadTokens");
        self.stats.output += count("outputTokens");
        let mut desc = format!("session/prompt result: {stop}; usage {}", usage_counts(usage));
        let mark = match ours {
            Some(meta) => {
                self.stats.rewritten += 1;
                let src = meta.get("source").and_then(Value::as_str).unwrap_or("?");
                let exact = meta.get("exact").and_then(Value::as_bool).unwrap_or(false);
                desc.push_str(&format!(
                    " (source {src}, {})",
                    if exact { "exact" } else { "estimated" }
                ));
                if let Some(cost) = meta.get("cost").and_then(Value::as_f64) {
                    desc.push_str(&format!(", turn cost {}", usd(cost)));
                }
                "REWRITTEN"
            }
            None => "",
        };
        self.line("agent → editor", mark, &desc, line)?;
        if let Some(agent) = ours.and_then(|m| m.get("agent")) {
            let pad = " ".repeat(DIR_WIDTH + MARK_WIDTH + 2);
            writeln!(self.out, "{pad}  the agent had sent: {}", wire_fields(agent))?;
        }
        Ok(())
    }

    fn usage_update(&mut self, line: &str, u: &Value) -> io::Result<()> {
        let used = u.get("used").and_then(Value::as_u64).unwrap_or(0);
        let size = u.get("size").and_then(Value::as_u64).unwrap_or(0);
        let cost = u.pointer("/cost/amount").and_then(Value::as_f64);
        let meta = u.pointer(&format!("/_meta/{META_KEY}"));
        let trigger = meta.and_then(|m| m.get("trigger")).and_then(Value::as_str);
        let (mark, label) = match trigger {
            None => {
                self.stats.agent_updates += 1;
                ("", "the agent's own".to_string())
            }
            Some("agent") => {
                self.stats.rewritten += 1;
                self.stats.agent_updates += 1;
                ("REWRITTEN", "the agent's own".to_string())
            }
            Some(t) => {
                self.stats.injected += 1;
                let label = match t {
                    "turn" => "end of turn".to_string(),
                    "command" => "before the /usage answer".to_string(),
                    "model_change" => "model change".to_string(),
                    t if t.starts_with("session/") => format!("after {t}"),
                    t => t.to_string(),
                };
                ("INJECTED", label)
            }
        };
        let source = |k: &str| {
            meta.and_then(|m| m.pointer(&format!("/{k}/source")))
                .and_then(Value::as_str)
                .unwrap_or("—")
        };
        let cost_meta = meta.and_then(|m| m.get("cost"));
        let partial =
            cost_meta.and_then(|c| c.get("partial")).and_then(Value::as_bool).unwrap_or(false);
        if let Some(c) = cost {
            self.stats.cost = Some((c, source("cost").to_string(), partial));
        }
        let pct = if size > 0 { used as f64 * 100.0 / size as f64 } else { 0.0 };
        let cost_text = match cost {
            Some(c) if partial => format!("cost {} (partial)", usd(c)),
            Some(c) => format!("cost {}", usd(c)),
            None => "cost —".to_string(),
        };
        let mut desc = format!(
            "usage_update ({label}): {}/{} ({pct:.1}%) {cost_text} (sources: used={}, size={}, cost={})",
            thousands(used),
            thousands(size),
            source("used"),
            source("size"),
            source("cost"),
        );
        if let Some(meter) = meter(u) {
            desc.push_str(&format!("; Zed's meter {meter}"));
            self.stats.meter = Some(meter);
        }
        self.line("agent → editor", mark, &desc, line)
    }

    fn line(&mut self, dir: &str, mark: &str, desc: &str, raw: &str) -> io::Result<()> {
        // Pad by characters: the arrows are multi-byte.
        let pad = DIR_WIDTH.saturating_sub(dir.chars().count());
        writeln!(self.out, "{dir}{} {mark:<MARK_WIDTH$} {desc}", " ".repeat(pad))?;
        if self.raw {
            writeln!(self.out, "    {}", raw.trim_end())?;
        }
        Ok(())
    }

    /// The closing summary and the hint for real use.
    pub fn summary(&mut self) -> io::Result<()> {
        let s = self.stats.clone();
        self.section("summary")?;
        let cost = match &s.cost {
            Some((c, src, partial)) => {
                let how = match src.as_str() {
                    "catalog" => "priced from the catalog",
                    "agent" => "as the agent stated it",
                    _ => "estimated",
                };
                format!(
                    "session cost {} ({how}{})",
                    usd(*c),
                    if *partial { ", partial" } else { "" }
                )
            }
            None => "session cost unknown (no catalog price for the model)".to_string(),
        };
        writeln!(
            self.out,
            "{} turns, {} tokens (input {}, of which {} cache reads; output {}); {cost}.",
            s.turns,
            thousands(s.total),
            thousands(s.input),
            thousands(s.cached_read),
            thousands(s.output),
        )?;
        writeln!(
            self.out,
            "acp-usage injected {} usage_update notifications and {} other lines (its command list, its /usage answer) and rewrote {} lines; the agent itself sent {} usage_update.",
            s.injected,
            s.injected_other,
            s.rewritten,
            if s.agent_updates == 0 { "no".to_string() } else { s.agent_updates.to_string() },
        )?;
        if let Some(meter) = &s.meter {
            writeln!(
                self.out,
                "Zed's plan-usage meter, from the windows the agent reported: {meter} (on every \
                 usage_update since, in _meta[\"_claude/rateLimit\"], whatever the provider)."
            )?;
        }
        writeln!(
            self.out,
            "With a real agent, put acp-usage in front of its command, e.g. `acp-usage -- claude-agent-acp` (see `acp-usage --help`)."
        )
    }
}

/// Zed's meter as an update's `_meta["_claude/rateLimit"]` draws it: `5h 42% · 7d 18%`.
fn meter(u: &Value) -> Option<String> {
    let windows = u.pointer("/_meta/_claude~1rateLimit/unifiedWindows")?.as_object()?;
    let parts: Vec<String> = [("five_hour", "5h"), ("seven_day", "7d")]
        .iter()
        .filter_map(|(key, short)| {
            let f = windows.get(*key)?.get("utilization")?.as_f64()?;
            Some(format!("{short} {:.0}%", f * 100.0))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// The `currentValue` of the model option (category or id `model`).
fn selected_model(r: &Value) -> Option<&str> {
    r.get("configOptions")?
        .as_array()?
        .iter()
        .find(|o| {
            o.get("category").and_then(Value::as_str) == Some("model")
                || o.get("id").and_then(Value::as_str) == Some("model")
        })?
        .get("currentValue")?
        .as_str()
}

/// `input 14,562 (cached read 11,842, cached write 2,716), output 186, total 14,748`.
fn usage_counts(u: &Value) -> String {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let mut s = format!("input {}", thousands(n("inputTokens").unwrap_or(0)));
    let cache: Vec<String> =
        [("cachedReadTokens", "cached read"), ("cachedWriteTokens", "cached write")]
            .iter()
            .filter_map(|(k, name)| n(k).map(|v| format!("{name} {}", thousands(v))))
            .collect();
    if !cache.is_empty() {
        s.push_str(&format!(" ({})", cache.join(", ")));
    }
    s.push_str(&format!(", output {}", thousands(n("outputTokens").unwrap_or(0))));
    if let Some(t) = n("thoughtTokens").filter(|t| *t > 0) {
        s.push_str(&format!(" (thought {})", thousands(t)));
    }
    s.push_str(&format!(", total {}", thousands(n("totalTokens").unwrap_or(0))));
    s
}

/// An agent's own `usage` as it was on the wire: `inputTokens 4, cachedReadTokens 11,842, …`.
fn wire_fields(u: &Value) -> String {
    let Some(map) = u.as_object() else { return u.to_string() };
    let fields: Vec<String> = map
        .iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| match v.as_u64() {
            Some(n) => format!("{k} {}", thousands(n)),
            None => format!("{k} {v}"),
        })
        .collect();
    fields.join(", ")
}

/// A quoted, one-line, shortened text.
fn quote(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > TEXT_MAX {
        let cut: String = flat.chars().take(TEXT_MAX - 1).collect();
        format!("\"{}…\"", cut.trim_end())
    } else {
        format!("\"{flat}\"")
    }
}

/// Dollars with four decimals (six below a hundredth of a cent).
pub fn usd(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 0.0001 {
        format!("${amount:.6}")
    } else {
        format!("${amount:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(usd(0.0165396), "$0.0165");
        assert_eq!(quote("a\n  b"), "\"a b\"");
    }

    #[test]
    fn marks_injected_and_rewritten_lines() {
        let mut p = Printer::new(Vec::new(), false);
        let injected = json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{
            "sessionUpdate":"usage_update","used":1500,"size":200000,"cost":{"amount":0.01,"currency":"USD"},
            "_meta":{"acpUsage":{"used":{"source":"estimate"},"size":{"source":"catalog"},"cost":{"source":"catalog"},"trigger":"turn"}}}}});
        p.agent(&injected.to_string(), &injected, None).unwrap();
        let result = json!({"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{
            "totalTokens":30,"inputTokens":20,"outputTokens":10,"cachedReadTokens":15,"cachedWriteTokens":0,
            "_meta":{"acpUsage":{"source":"agent","exact":true,"agent":{"totalTokens":30,"inputTokens":5,"outputTokens":10}}}}}});
        p.agent(&result.to_string(), &result, Some("session/prompt")).unwrap();
        let text = String::from_utf8(p.into_inner()).unwrap();
        assert!(
            text.contains(
                "INJECTED   usage_update (end of turn): 1,500/200,000 (0.8%) cost $0.0100"
            ),
            "{text}"
        );
        assert!(text.contains("REWRITTEN  session/prompt result: end_turn; usage input 20 (cached read 15, cached write 0)"), "{text}");
        assert!(
            text.contains("the agent had sent: totalTokens 30, inputTokens 5, outputTokens 10"),
            "{text}"
        );
    }
}
