//! The observer's reading of `session/update` notifications (the hot path: every streamed chunk),
//! and of a reopened session's history.

use super::*;

impl Observer {
    /// The hot path: every chunk of every stream comes through here, so it reads the update
    /// from the view parsed with the envelope (no second pass), looks its session up once,
    /// uses the session's cached family, and counts tokens only when the account will use them.
    pub(super) fn on_session_update(&mut self, line: &[u8], env: &Envelope<'_>) -> Outcome {
        let (Some(params), Some(n)) = (env.params, env.update.as_ref()) else {
            return Outcome::default();
        };
        let id = n.session_id.as_ref();
        let profile = self.profile;
        let s = self.updated_session(id);
        let family = s.family(profile);
        let update = &n.update;
        let kind = update.session_update.as_deref().unwrap_or("");
        let content_kind = is_content_kind(kind);
        if s.loading && content_kind {
            if let Some((rec, role)) = profile.call_in_chunk(params.get()) {
                s.replayed_calls.push((rec, role == Role::Main));
            }
            // Replayed history fills the context but is not new usage; an account that saw the
            // session's turns already knows that context.
            if !s.account.has_turns() {
                s.account.replayed(content::update_tokens(update, family));
            }
            return Outcome::default();
        }
        if content_kind && !s.account.in_turn() {
            // Outside a turn the account ignores content (and a user message resets nothing):
            // nothing to count.
            return Outcome::default();
        }
        match kind {
            "user_message_chunk" => s.account.user_message_in_turn(),
            "agent_message_chunk" => {
                s.account.output_tokens(content::update_tokens(update, family), false);
                if let Some((rec, role)) = profile.call_in_chunk(params.get()) {
                    let cx = ledger_context(&self.settings, self.context_parts(id));
                    let s = self.sessions.get_mut(id).expect("the session exists");
                    s.account.record_call_as(rec, Source::Agent, role, &cx);
                }
            }
            "agent_thought_chunk" => {
                s.account.output_tokens(content::update_tokens(update, family), true)
            }
            "tool_call" => {
                s.account.tool_call(content::tool_input_tokens(update, family));
                s.account.tool_output(content::tool_output_tokens(update, family));
            }
            "tool_call_update" => {
                s.account.tool_output(content::tool_output_tokens(update, family))
            }
            "usage_update" => return self.agent_usage_update(id, line, params.get()),
            "available_commands_update" => return self.agent_commands(id, line),
            "compaction_summary_chunk" => {
                s.compaction_summary += content::update_tokens(update, family);
            }
            "compaction_update" => {
                // A `summary` in the update replaces the chunks seen so far.
                if let Some(summary) = update.summary
                    && let Ok(v) = serde_json::from_str::<Value>(summary.get())
                {
                    s.compaction_summary = content::blocks_tokens(Some(&v), family);
                }
                if update.status.as_deref() == Some("completed") {
                    let tokens = std::mem::take(&mut s.compaction_summary);
                    s.account.compacted(tokens);
                    return Outcome {
                        after: vec![self.update_line(id, Trigger::Compaction)],
                        ..Outcome::default()
                    };
                }
            }
            "config_option_update" => {
                let v: Option<Value> = serde_json::from_str(params.get()).ok();
                if let Some(u) = v.as_ref().and_then(|v| v.get("update"))
                    && self.read_models(id, u)
                {
                    let after = vec![self.update_line(id, Trigger::ModelChange)];
                    return Outcome { after, ..Outcome::default() };
                }
            }
            _ => {}
        }
        Outcome::default()
    }

    /// The agent's own `usage_update`: read into the session's account (and the subscription
    /// windows in its `_meta`), and rewritten with acp-usage's figures unless they are kept.
    fn agent_usage_update(&mut self, id: &str, line: &[u8], params: &str) -> Outcome {
        // One typed pass over the params, no intermediate `Value`.
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(default)]
            update: AgentUpdate,
        }
        let agent = serde_json::from_str::<Params>(params).map(|p| p.update).unwrap_or_default();
        let s = self.sessions.get_mut(id).expect("the session exists");
        self.profile.on_usage_update(&mut s.account, &agent);
        // claude-agent-acp forwards Claude Code's rate-limit event in `_meta`.
        let limits = claude_rate_limit(params);
        self.limits_observed(limits, Some(id));
        if self.settings.keep_agent_usage {
            return Outcome::default();
        }
        let snap = self.snapshot(id);
        // This update shows what was counted so far: no other needed.
        self.between_turns.retain(|s| s != id);
        let replace = emit::rewrite_agent_update(line, &snap, &self.label());
        Outcome { replace, ..Outcome::default() }
    }

    /// A reopened or forked session's history, when its transcript was read: its cost, totals
    /// and `used` are the transcript's.
    pub(super) fn settle_history(&mut self, id: &str) {
        let cx = ledger_context(&self.settings, self.context_parts(id));
        let Some(s) = self.sessions.get_mut(id) else { return };
        let replayed = std::mem::take(&mut s.replayed_calls);
        // An empty history says nothing (a fork's transcript holds only its parent's calls,
        // which the fork inherits): the account keeps what it has.
        if let Some(calls) = s
            .follow
            .as_mut()
            .and_then(Follow::take_history)
            .or(Some(replayed))
            .filter(|c| !c.is_empty())
        {
            tracing::info!(
                session = id,
                calls = calls.len(),
                "the session's history read from its transcript"
            );
            s.account.transcript_history(&calls, &cx);
        }
    }
}

/// The windows in a `usage_update`'s `_meta["_claude/rateLimit"]` (claude-agent-acp), read only
/// when the key is in the line.
fn claude_rate_limit(params: &str) -> Vec<acp_usage_core::limits::Limit> {
    if memchr::memmem::find(params.as_bytes(), b"\"_claude/rateLimit\"").is_none() {
        return Vec::new();
    }
    let Ok(v) = serde_json::from_str::<Value>(params) else { return Vec::new() };
    match v.pointer("/update/_meta/_claude~1rateLimit") {
        Some(info) => {
            acp_usage_core::limits::from_claude_rate_limit(info.to_string().as_bytes(), now_ms())
        }
        None => Vec::new(),
    }
}
