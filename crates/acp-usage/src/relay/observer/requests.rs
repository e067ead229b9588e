//! The observer's reading of the editor's requests: which are tracked until answered, a
//! turn's start, a session reopened, a prompt a spent budget refuses, and a prompt that is
//! acp-usage's own `/usage`.

use super::*;

/// What to do with a line from the editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditorOutcome {
    /// Forward the line to the agent (as it came: editor lines are never changed).
    pub forward: bool,
    /// Lines to write to the editor, in order (a request acp-usage answers itself: whatever it
    /// says, then the response).
    pub to_editor: Vec<Vec<u8>>,
}

impl Default for EditorOutcome {
    fn default() -> EditorOutcome {
        EditorOutcome { forward: true, to_editor: Vec::new() }
    }
}

impl EditorOutcome {
    /// A request answered here with `lines`, not forwarded.
    pub fn answered(lines: Vec<Vec<u8>>) -> EditorOutcome {
        EditorOutcome { forward: false, to_editor: lines }
    }
}

impl Observer {
    /// Observes a line from the editor. Editor lines are never changed; a prompt that a
    /// budget in `block` mode refuses, or that is acp-usage's own `/usage` command, is not
    /// forwarded at all: the lines to send the editor in its place come back.
    pub fn from_editor(&mut self, line: &[u8]) -> EditorOutcome {
        let Some(env) = Envelope::parse(line) else {
            self.counters.not_objects += 1;
            return EditorOutcome::default();
        };
        let Some(method) = env.method.as_deref() else { return EditorOutcome::default() };
        let known = Method::from_name(method);
        if env.kind() != Kind::Request {
            if known.is_none() {
                self.count_other(method);
            }
            return EditorOutcome::default();
        }
        let key = env.id_key().expect("requests have ids");
        let raw_id = env.id.expect("requests have ids").get().to_string();
        let Some(method) = known else {
            self.count_other(method);
            let pending =
                Pending { method: Method::Other, raw_id, session: None, model: None, cwd: None };
            self.pending.insert(key, pending);
            return EditorOutcome::default();
        };
        let params: Option<Value> = env.params.and_then(|p| serde_json::from_str(p.get()).ok());
        let session = params
            .as_ref()
            .and_then(|p| p.get("sessionId"))
            .and_then(Value::as_str)
            .map(String::from);
        let model = params
            .as_ref()
            .and_then(|p| p.get("modelId"))
            .and_then(Value::as_str)
            .map(String::from);
        let cwd =
            params.as_ref().and_then(|p| p.get("cwd")).and_then(Value::as_str).map(String::from);
        let mut to_editor = Vec::new();
        match method {
            Method::Initialize => {
                // Notices go only to a client that said it shows them.
                self.alerting.notices = params
                    .as_ref()
                    .and_then(|p| p.pointer("/clientCapabilities/session/notices"))
                    .is_some_and(Value::is_object);
            }
            Method::Prompt => {
                if let Some(id) = &session {
                    if let Some(answer) = self.on_prompt(id, &key, &raw_id, params.as_ref()) {
                        return EditorOutcome::answered(answer);
                    }
                    // This prompt's turn starts now (not queued behind another): the crossings
                    // that waited for a turn go to the chat at its first moment.
                    if self.sessions.get(id).is_some_and(|s| s.turn_owner.as_ref() == Some(&key)) {
                        to_editor = self.take_chat(id, false);
                    }
                }
            }
            Method::Resume => {
                if let Some(id) = &session {
                    self.reopened(id);
                    self.follow(id, true);
                }
            }
            Method::Load => {
                if let Some(id) = &session {
                    // What the agent replays is history, not usage. A session this relay already
                    // accounted for keeps its account; an unknown one starts from the replay.
                    self.reopened(id).loading = true;
                    self.follow(id, true);
                }
            }
            _ => {}
        }
        self.pending.insert(key, Pending { method, raw_id, session, model, cwd });
        EditorOutcome { forward: true, to_editor }
    }

    /// A `session/prompt` request (id `key`, `raw_id` on the wire) in session `id`: answered
    /// here when it is acp-usage's `/usage` or a budget is spent (the lines to send instead),
    /// else its turn starts, or waits for the one in progress.
    fn on_prompt(
        &mut self,
        id: &str,
        key: &str,
        raw_id: &str,
        params: Option<&Value>,
    ) -> Option<Vec<Vec<u8>>> {
        // `/usage` spends nothing, so a spent budget does not refuse it.
        if let Some(lines) = self.usage_prompt(id, raw_id, params) {
            return Some(lines);
        }
        if let Some(answer) = self.refuse_prompt(id, raw_id) {
            return Some(vec![answer]);
        }
        let family = self.family(id);
        let blocks = params.and_then(|p| p.get("prompt"));
        let tokens = content::blocks_tokens(blocks, family);
        let first_text = blocks
            .and_then(|b| b.get(0))
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if first_text
            .split_whitespace()
            .next()
            .is_some_and(|word| self.profile.restarts_transcript(word))
            && self.sessions.get(id).is_some_and(|s| s.follow.is_some())
        {
            // Claude Code starts a new inner transcript for the same ACP session.
            self.commands.push(Command::Restarted(id.to_string(), now_ms()));
        }
        self.session(id, Account::restored);
        self.sync_baseline(id);
        if self.settings.tap {
            self.tap_prompt(id, first_text);
        }
        let s = self.session(id, Account::restored);
        if s.turn_owner.is_none() {
            s.turn_owner = Some(key.to_string());
            s.begin_turn(tokens, now_ms());
            self.poll(id);
        } else {
            // A prompt sent before the previous one's result (e.g. right after a cancel)
            // starts its turn when that result has arrived.
            s.queued.push_back((key.to_string(), tokens, now_ms()));
        }
        None
    }
}
