//! acp-usage's own `/usage` command (`[commands] usage` renames it, `""` turns it off): listed
//! in every `available_commands_update` the editor gets (merged into the agent's lists, or a
//! list of its own right after a session opens when the agent has sent none yet), and a prompt
//! that is the command answered here, as agent message text, without reaching the agent: it
//! costs no tokens and stays out of the agent's history. While a turn runs in the session, the
//! prompt goes to the agent as before (ACP runs one prompt at a time). The text is
//! [`super::usage_text`]'s.

use std::collections::{HashMap, HashSet};

use acp_usage_core::account::RoleTotals;
use acp_usage_core::budget::Scope;
use acp_usage_core::{AccountedCall, Snapshot};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::usage_text::{self, Figures, View};
use super::*;
use crate::relay::splice::{range_in, replace};

/// What the command keeps per session.
#[derive(Debug, Default)]
pub(super) struct CommandState {
    /// Sessions whose agent has sent a command list (each is merged; none of ours is needed).
    listed: HashSet<String>,
    /// Each session's settled calls by role, as this process settled them.
    roles: HashMap<String, RoleTotals>,
}

impl CommandState {
    /// Counts a session's settled calls by role.
    pub(super) fn tally(&mut self, id: &str, calls: &[AccountedCall]) {
        if calls.is_empty() {
            return;
        }
        let roles = self.roles.entry(id.to_owned()).or_default();
        for c in calls {
            roles.add(c.role, &c.record);
            if let Some((_, t)) = roles.roles.iter_mut().find(|(r, _)| *r == c.role) {
                // A record may stand for several calls (an agent's per-turn sum).
                t.calls += c.calls.saturating_sub(1);
            }
        }
    }

    /// A reopened session's calls by role as the ledger has them, when this process has
    /// counted none of its own yet.
    pub(super) fn remember(&mut self, id: &str, roles: RoleTotals) {
        if !roles.roles.is_empty() {
            self.roles.entry(id.to_owned()).or_insert(roles);
        }
    }

    /// The session is closed or deleted.
    pub(super) fn forget(&mut self, id: &str) {
        self.listed.remove(id);
        self.roles.remove(id);
    }
}

/// A prompt that is the command: what it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invocation {
    /// A view of the figures.
    Show(View),
    /// An argument the command does not know: the one-line help.
    Help,
}

/// Whether a prompt's text is `/<name>` (then what it asks for): the name as a whole word,
/// then at most one argument.
pub fn invocation(text: &str, name: &str) -> Option<Invocation> {
    let rest = text.trim_start().strip_prefix('/')?.strip_prefix(name)?;
    if rest.chars().next().is_some_and(|c| !c.is_whitespace()) {
        // `/usagex` is another command.
        return None;
    }
    Some(match rest.trim().to_ascii_lowercase().as_str() {
        "" => Invocation::Show(View::All),
        "today" => Invocation::Show(View::Today),
        "month" => Invocation::Show(View::Month),
        "limits" => Invocation::Show(View::Limits),
        _ => Invocation::Help,
    })
}

/// The command as the `availableCommands` entry of an `available_commands_update`.
pub fn command_entry(name: &str) -> String {
    json!({
        "name": name,
        "description": "Context, cost, spending and limits (from acp-usage; uses no tokens)",
        "input": {"hint": "today, month or limits"},
    })
    .to_string()
}

/// An agent's `available_commands_update` line with the command appended to its list (an
/// agent command of the same name is left out while ours is on); only the array changes, every
/// other byte of the line stays. `None` (forward it as it is) when the list cannot be read.
pub fn merge_commands(line: &[u8], name: &str) -> Option<Vec<u8>> {
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        update: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Update<'a> {
        #[serde(rename = "availableCommands", borrow)]
        available: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow, default)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    let env = Envelope::parse(line)?;
    let params: Params<'_> = serde_json::from_str(env.params?.get()).ok()?;
    let update: Update<'_> = serde_json::from_str(params.update.get()).ok()?;
    let commands: Vec<&RawValue> = serde_json::from_str(update.available.get()).ok()?;
    let mut kept: Vec<&str> = Vec::with_capacity(commands.len() + 1);
    for c in &commands {
        let named: Option<Named<'_>> = serde_json::from_str(c.get()).ok();
        if named.and_then(|n| n.name).as_deref() != Some(name) {
            kept.push(c.get());
        }
    }
    let ours = command_entry(name);
    kept.push(&ours);
    let range = range_in(line, update.available.get())?;
    Some(replace(line, range, &format!("[{}]", kept.join(","))))
}

/// A result acp-usage writes itself, with the request's id as it was on the wire.
#[derive(Serialize)]
struct ResultLine<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RawValue>,
    result: Value,
}

impl Observer {
    /// The agent's `available_commands_update` for session `id`: the command merged into it.
    pub(super) fn agent_commands(&mut self, id: &str, line: &[u8]) -> Outcome {
        let Some(name) = self.settings.usage_command.as_deref() else {
            return Outcome::default();
        };
        self.usage.listed.insert(id.to_owned());
        let replace = merge_commands(line, name);
        if replace.is_none() {
            tracing::debug!(
                session = id,
                "an agent's command list that cannot be read passes as it is"
            );
        }
        Outcome { replace, ..Outcome::default() }
    }

    /// After a session opened (new, loaded, resumed, forked): a command list of acp-usage's
    /// own, when the agent has sent none for it yet (its list, when it comes, gets ours merged).
    pub(super) fn own_commands(&mut self, id: &str) -> Option<Vec<u8>> {
        let name = self.settings.usage_command.as_deref()?;
        if self.usage.listed.contains(id) {
            return None;
        }
        let entry = command_entry(name);
        let update = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":{},"update":{{"sessionUpdate":"available_commands_update","availableCommands":[{entry}]}}}}}}"#,
            serde_json::to_string(id).expect("strings serialise")
        );
        Some(update.into_bytes())
    }

    /// A `session/prompt` (id `raw_id` on the wire) in session `id` that is the command, in a
    /// session with no turn running: the lines that answer it (an update with the figures the
    /// text shows, the text, the result). `None`: it goes to the agent.
    pub(super) fn usage_prompt(
        &mut self,
        id: &str,
        raw_id: &str,
        params: Option<&Value>,
    ) -> Option<Vec<Vec<u8>>> {
        let name = self.settings.usage_command.clone()?;
        let text = params?
            .get("prompt")?
            .as_array()?
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("text"))?
            .get("text")?
            .as_str()?;
        let asked = invocation(text, &name)?;
        let s = self.sessions.get(id)?;
        if s.turn_owner.is_some() || !s.queued.is_empty() || s.loading {
            return None;
        }
        // Calls settled since the last batch are counted before the figures are read.
        if s.account.has_accounted() {
            self.record_settled(id, None);
        }
        self.between_turns.retain(|s| s != id);
        let snap = self.snapshot(id);
        let update = emit::usage_update(id, &snap, &self.label(), Trigger::Command);
        let text = match asked {
            Invocation::Help => usage_text::help(&name),
            Invocation::Show(view) => self.usage_text(id, &name, view, &snap),
        };
        tracing::info!(session = id, "answered /{name} itself");
        let chunk = emit::session_update(
            id,
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
        );
        let zero = json!({
            "stopReason": "end_turn",
            "usage": {"totalTokens": 0, "inputTokens": 0, "outputTokens": 0,
                      "thoughtTokens": 0, "cachedReadTokens": 0, "cachedWriteTokens": 0},
        });
        let result = ResultLine {
            jsonrpc: "2.0",
            id: serde_json::from_str::<&RawValue>(raw_id).ok(),
            result: zero,
        };
        let result = serde_json::to_vec(&result).expect("a result serialises");
        Some(vec![update, chunk, result])
    }

    /// The command's text for a session's snapshot.
    fn usage_text(&self, id: &str, name: &str, view: View, snap: &Snapshot) -> String {
        let period = |o: &Observer, scope: Scope| {
            if o.settings.ledger.is_none() {
                return Err("no ledger in this run".to_owned());
            }
            o.period_spent(scope).map_err(|(path, err)| {
                tracing::warn!("cannot read the ledger {} for /{name}: {err}", path.display());
                "the ledger cannot be read".to_owned()
            })
        };
        let wants_spend = matches!(view, View::All | View::Today | View::Month);
        let (today, month) = if wants_spend {
            (period(self, Scope::Day), period(self, Scope::Month))
        } else {
            (Ok(0.0), Ok(0.0))
        };
        let limits = self.current_limits();
        let credits = self.current_credits();
        let now = now_ms();
        let budgets_run_out: Vec<(Scope, i64)> = self
            .settings
            .budgets
            .limits
            .iter()
            .filter_map(|(scope, limit)| {
                let spent = match scope {
                    Scope::Day => today.as_ref().ok()?,
                    Scope::Month => month.as_ref().ok()?,
                    Scope::Session => return None,
                };
                let monthly = *scope == Scope::Month;
                let out = crate::sinks::ledger::budget_runs_out(monthly, *spent, *limit, now)?;
                Some((*scope, out / 1000))
            })
            .collect();
        let empty = RoleTotals::default();
        let figures = Figures {
            snapshot: snap,
            roles: self.usage.roles.get(id).unwrap_or(&empty),
            today,
            month,
            limits: &limits,
            credits: credits.as_ref(),
            budgets: &self.settings.budgets.limits,
            budgets_run_out: &budgets_run_out,
            now: now_ms() / 1000,
        };
        usage_text::render(name, view, &figures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_line(commands: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"available_commands_update","availableCommands":{commands}}}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn invocations() {
        use Invocation::*;
        assert_eq!(invocation("/usage", "usage"), Some(Show(View::All)));
        assert_eq!(invocation("  /usage  \n", "usage"), Some(Show(View::All)));
        assert_eq!(invocation("/usage today", "usage"), Some(Show(View::Today)));
        assert_eq!(invocation("/usage MONTH", "usage"), Some(Show(View::Month)));
        assert_eq!(invocation("/usage\tlimits ", "usage"), Some(Show(View::Limits)));
        assert_eq!(invocation("/usage foo", "usage"), Some(Help));
        assert_eq!(invocation("/usage today month", "usage"), Some(Help));
        assert_eq!(invocation("/usagex", "usage"), None);
        assert_eq!(invocation("usage", "usage"), None);
        assert_eq!(invocation("tell me about /usage", "usage"), None);
        assert_eq!(invocation("/usage", "cost"), None);
        assert_eq!(invocation("/cost today", "cost"), Some(Show(View::Today)));
    }

    #[test]
    fn appended_to_the_agents_list_every_other_byte_kept() {
        let line = update_line(r#"[ {"name":"compact","description":"Compact","_x":1e400} ]"#);
        let got = String::from_utf8(merge_commands(&line, "usage").unwrap()).unwrap();
        let want = String::from_utf8(update_line(&format!(
            r#"[{{"name":"compact","description":"Compact","_x":1e400}},{}]"#,
            command_entry("usage")
        )))
        .unwrap();
        assert_eq!(got, want);
        let empty = String::from_utf8(merge_commands(&update_line("[]"), "usage").unwrap());
        assert_eq!(
            empty.unwrap(),
            String::from_utf8(update_line(&format!("[{}]", command_entry("usage")))).unwrap()
        );
    }

    #[test]
    fn the_agents_own_command_of_that_name_is_hidden() {
        let line = update_line(
            r#"[{"name":"usage","description":"the agent's"},{"name":"review","description":"r"}]"#,
        );
        let got = merge_commands(&line, "usage").unwrap();
        let v: Value = serde_json::from_slice(&got).unwrap();
        let list = v.pointer("/params/update/availableCommands").unwrap().as_array().unwrap();
        let names: Vec<&str> = list.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["review", "usage"]);
        assert_eq!(
            list[1]["description"],
            json!("Context, cost, spending and limits (from acp-usage; uses no tokens)")
        );
        // Renamed: the agent's `usage` stays, ours is `cost`.
        let renamed: Value =
            serde_json::from_slice(&merge_commands(&line, "cost").unwrap()).unwrap();
        let names: Vec<&str> = renamed
            .pointer("/params/update/availableCommands")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["usage", "review", "cost"]);
    }

    #[test]
    fn a_list_that_cannot_be_read_passes() {
        for bad in [r#"{"name":"x"}"#, "null", r#""usage""#, "[1,"] {
            let line = update_line(bad);
            assert_eq!(merge_commands(&line, "usage"), None, "{bad}");
        }
        let no_list = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update"}}}"#;
        assert_eq!(merge_commands(no_list, "usage"), None);
    }

    #[test]
    fn two_hundred_commands_pass_untouched_but_for_ours() {
        let commands: Vec<String> = (0..200)
            .map(|i| format!(r#"{{"name":"cmd{i}","description":"Command \u00e9 {i}","input":{{"hint":"h"}}}}"#))
            .collect();
        let list = format!("[{}]", commands.join(","));
        let line = update_line(&list);
        let got = merge_commands(&line, "usage").unwrap();
        let want = update_line(&format!("[{},{}]", commands.join(","), command_entry("usage")));
        assert_eq!(got, want);
    }
}
