//! Per-session accounting: what each source said, resolved into one `used`, `size`, `cost` and
//! per-turn usage.
//!
//! A [`Account`] is fed events by the relay (through the agent's profile, which has already
//! normalised the agent's conventions) and answers [`Snapshot`]s and [`TurnUsage`]s. Sources rank
//! as DESIGN.md says: exact per-call records (tap, transcript) beat what the agent reports over
//! ACP, which beats estimates from the visible content. Within a turn the visible content is
//! also split into model calls (a `tool_call` ends a call, the next output starts one), so an
//! estimate has per-call shape: `used` is the last call's context, not the turn's sum.

mod accounted;
mod end_turn;
mod side;
mod snapshot;
mod tapped;
mod types;

pub use accounted::{AccountedCall, Priced, price_call};
pub use types::{Carried, Role, RoleTotals, Snapshot, TurnReport, TurnUsage};

use crate::catalog::Catalog;
use crate::tokens::{Source, TokenRecord, TokenTotals};

/// Everything the account needs from outside to price and size a session.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The model catalog.
    pub catalog: &'a Catalog,
    /// The window used when nothing else is known.
    pub default_window: u64,
    /// The share of a catalog window the agent lets the model use (Codex: 95).
    pub window_percent: u64,
    /// The last size seen for this agent and model in an earlier session, if any.
    pub remembered_size: Option<u64>,
}

/// One session's accounting.
#[derive(Debug, Default, Clone)]
pub struct Account {
    selected_model: Option<String>,
    selected_window: Option<u64>,
    seen_model: Option<String>,
    agent_window: Option<u64>,
    /// A window the agent reports but does not necessarily enforce (its `usage_update.size`, a
    /// `contextLimit`): above every guess, below the catalog entry of the model seen in calls.
    reported_window: Option<u64>,
    used: Option<Used>,
    stated_cost: Option<f64>,
    /// The agent's last cumulative report of the session's usage (Copilot's prompt `usage`
    /// counts everything since the session was opened in its process).
    agent_cumulative: Option<TokenRecord>,
    /// The last cost the agent stated for the session, kept even when a transcript replaces
    /// the agent's figures: the session's cost is never sent lower than it.
    stated_floor: Option<f64>,
    priced_cost: f64,
    priced_calls: u64,
    priced_exact: bool,
    unpriced_calls: u64,
    history_unseen: bool,
    totals: TokenTotals,
    totals_estimated: bool,
    turn: Option<Turn>,
    /// Estimated context left by replayed history (`session/load`), used until a turn reports.
    replayed: u64,
    /// Hidden context (system prompt, tool definitions) learned from earlier sessions of the same
    /// agent and model: the estimate of `used` before any source reports.
    baseline: u64,
    /// A baseline this session's first turn taught, not yet taken.
    learned_baseline: Option<u64>,
    turns_ended: u64,
    /// What an earlier run accounted for this session.
    carried: Option<Carried>,
    /// The session's calls come from its transcript: what the agent states as cost is ignored
    /// (it covers one process's calls, priced by the agent's own table).
    transcript: bool,
    /// The LLM-API tap has seen this session's calls: it sees every billed call, so neither the
    /// agent's stated cost nor its `used` is needed, and the cost floor does not apply.
    tap: bool,
    /// Calls settled since the sinks last took them (see [`Account::take_accounted`]).
    accounted: Vec<AccountedCall>,
    /// Exact calls of the turn in progress, as a source saw them, not yet taken by the sinks
    /// (see [`Account::take_provisional`]).
    provisional: Vec<AccountedCall>,
}

/// Who made each record being folded into the session, for the sinks; `None` for history an
/// earlier run or the agent's own transcript already accounts (it is not settled again).
#[derive(Debug, Default)]
struct Origin {
    roles: Vec<Role>,
    keys: Vec<Option<String>>,
    in_turn: bool,
}

impl Origin {
    fn one(role: Role, in_turn: bool) -> Option<Origin> {
        Some(Origin { roles: vec![role], keys: Vec::new(), in_turn })
    }
}

#[derive(Debug, Clone, Copy)]
struct Used {
    prompt: u64,
    output: u64,
    source: Source,
    /// False when the source's figure is known not to follow the definition exactly (an agent
    /// whose `used` includes hidden reasoning tokens).
    exact: bool,
}

/// The accumulators of the turn in progress.
#[derive(Debug, Default, Clone)]
struct Turn {
    /// Estimated calls from the visible content; the last one is open.
    est_calls: Vec<TokenRecord>,
    /// Estimated context entering the next call.
    ctx: u64,
    /// Whether a tool is running (the next output starts a new call).
    tool_running: bool,
    /// Exact calls: the record, its source, and who made it.
    exact_calls: Vec<(TokenRecord, Source, Role)>,
    /// The agent's own per-model counts of the turn, every call included (Claude Code's
    /// `modelUsage` increment): what exceeds the exact calls of a model is calls no other
    /// source showed (titles, prompt suggestions).
    agent_models: Vec<TokenRecord>,
    /// In-context totals per call, as the agent reported them (Codex's `used`).
    agent_call_totals: Vec<u64>,
    agent_report: Option<(TokenRecord, TurnReport, Option<u64>)>,
    /// The calls the LLM-API tap saw during the turn, with the role its attribution gave them.
    tap_calls: Vec<tapped::TapCall>,
    /// The transcript's keys of `exact_calls`, when it gave them (same order).
    exact_keys: Vec<Option<String>>,
    stated_cost_before: Option<f64>,
    /// Context before the prompt: what the turn's first call can read from the prompt cache.
    start_ctx: u64,
    /// Estimated tokens of the prompt itself.
    prompt: u64,
}

impl Account {
    /// A new, empty session.
    pub fn new() -> Account {
        Account { priced_exact: true, ..Account::default() }
    }

    /// The session turned out to be new (its `session/new` response came after notifications
    /// that made acp-usage start it as a restored one): it has no unseen history.
    pub fn mark_new(&mut self) {
        if !self.has_turns() {
            self.history_unseen = false;
        }
    }

    /// A session acp-usage did not see from the start (`session/load`, `session/resume`): its
    /// earlier cost is unknown until a source reports it.
    pub fn restored() -> Account {
        Account { history_unseen: true, ..Account::new() }
    }

    /// A session an earlier run of acp-usage accounted (`session/load`, `session/resume` in a new
    /// process): its cost and totals continue from there.
    pub fn carried_over(carried: Carried) -> Account {
        let used = carried.used.map(|(prompt, output, source, exact)| Used {
            prompt,
            output,
            source,
            exact,
        });
        Account { used, carried: Some(carried), ..Account::new() }
    }

    /// What to keep of this session for a later run.
    pub fn carry(&self, cx: &Context<'_>) -> Carried {
        let snap = self.snapshot(cx);
        Carried {
            cost: snap.cost,
            cost_source: snap.cost_source,
            cost_exact: snap.cost_source.is_exact()
                && !snap.cost_partial
                && snap.unpriced_calls == 0,
            cost_partial: snap.cost_partial,
            unpriced_calls: snap.unpriced_calls,
            totals: snap.totals,
            totals_exact: snap.totals_exact,
            used: self.used.map(|u| (u.prompt, u.output, u.source, u.exact)),
        }
    }

    /// The model option the user selected, as a catalog id, and the window the profile's alias
    /// rules give it (e.g. `[1m]`), if any.
    pub fn select_model(&mut self, model: Option<String>, window: Option<u64>) {
        if model != self.selected_model {
            // A reported window is the previous model's.
            self.reported_window = None;
        }
        self.selected_model = model;
        self.selected_window = window;
    }

    /// A window the agent itself enforces (Claude's `modelUsage.contextWindow`, Codex's
    /// `model_context_window`).
    pub fn agent_window(&mut self, size: u64) {
        if size > 0 {
            self.agent_window = Some(size);
        }
    }

    /// A window the agent reports without enforcing it itself (its `usage_update.size`, a
    /// `contextLimit` in `session/new`'s `_meta`): it beats every guess.
    pub fn reported_window(&mut self, size: u64) {
        if size > 0 {
            self.reported_window = Some(size);
        }
    }

    /// The concrete model seen in a call.
    pub fn model_seen(&mut self, model: &str) {
        self.seen_model = Some(model.to_string());
    }

    /// The agent's cumulative session cost in USD (a provider- or agent-stated cost beats the
    /// catalog).
    pub fn agent_cost(&mut self, amount: f64) {
        if !amount.is_finite() || amount < 0.0 {
            return;
        }
        // A session's cost never goes down: the highest figure the agent stated is the floor.
        self.stated_floor = Some(self.stated_floor.map_or(amount, |f| f.max(amount)));
        if !self.transcript && !self.tap {
            self.stated_cost = Some(amount);
        }
    }

    /// A cost the agent states for the whole session, its history included, priced by its own
    /// table (Mistral Vibe prices its cumulative counters): only a floor. This run's calls and
    /// what an earlier run carried already cover what it covers, so it never replaces them (as
    /// [`Account::agent_cost`] would, adding it to the carried cost).
    pub fn agent_cost_floor(&mut self, amount: f64) {
        if amount.is_finite() && amount >= 0.0 {
            self.stated_floor = Some(self.stated_floor.map_or(amount, |f| f.max(amount)));
        }
    }

    /// The agent's usage since the session was opened in its process, reported at the end of a
    /// turn: the turn's own usage is what it grew by. A report below the last one means the
    /// agent's count started over (a reload): it is then the turn's whole.
    pub fn agent_cumulative_turn(&mut self, now: TokenRecord) {
        let delta = match &self.agent_cumulative {
            Some(before)
                if now.input >= before.input
                    && now.output >= before.output
                    && now.cache_read >= before.cache_read
                    && now.cache_write_5m >= before.cache_write_5m =>
            {
                now.beyond(before)
            }
            _ => now.clone(),
        };
        self.agent_cumulative = Some(now);
        self.agent_turn(delta, TurnReport::Complete, None);
    }

    /// The agent's cumulative count of the session as it stands between model calls (Mistral
    /// Vibe's counters in each `usage_update`, which survive a reload): the base the next
    /// cumulative report's growth is measured from. Outside a turn it is the base; inside one it
    /// only fills a missing base (after a reload reset it: the counts an agent repeats as the
    /// turn starts, before its first call), since later counts of the turn include its calls.
    pub fn agent_cumulative_base(&mut self, now: TokenRecord) {
        if self.turn.is_none() || self.agent_cumulative.is_none() {
            self.agent_cumulative = Some(now);
        }
    }

    /// The agent opened the session anew in its process (`session/load`): its cumulative
    /// count starts over.
    pub fn reset_agent_cumulative(&mut self) {
        self.agent_cumulative = None;
    }

    /// The agent's per-model counts of the turn in progress, every call of the turn included
    /// (each record names its model).
    pub fn agent_turn_models(&mut self, models: Vec<TokenRecord>) {
        if let Some(turn) = &mut self.turn {
            turn.agent_models = models;
        }
    }

    /// `used` as the agent reported it, already normalised by the profile; `exact` is false when
    /// the agent's figure includes tokens the definition leaves out and that cannot be removed
    /// (Codex's hidden reasoning).
    pub fn agent_used(&mut self, used: u64, exact: bool) {
        if !self.tap {
            self.used = Some(Used { prompt: used, output: 0, source: Source::Agent, exact });
        }
        if let Some(turn) = &mut self.turn {
            turn.agent_call_totals.push(used);
        }
    }

    /// Hidden context learned from earlier sessions of the same agent and model.
    pub fn set_baseline(&mut self, tokens: u64) {
        self.baseline = tokens;
    }

    /// The hidden context this session's first turn revealed, once.
    pub fn take_learned_baseline(&mut self) -> Option<u64> {
        self.learned_baseline.take()
    }

    /// Estimated tokens of replayed history (during `session/load`); never counted as usage.
    pub fn replayed(&mut self, tokens: u64) {
        self.replayed += tokens;
    }

    /// The agent compacted the context; what remains is about `context_tokens` (the summary).
    pub fn compacted(&mut self, context_tokens: u64) {
        self.used = Some(Used {
            prompt: context_tokens,
            output: 0,
            source: Source::Estimate,
            exact: false,
        });
        if let Some(turn) = &mut self.turn {
            turn.ctx = context_tokens;
        }
    }

    /// A prompt turn starts.
    pub fn begin_turn(&mut self) {
        let ctx = match self.used {
            Some(u) => u.prompt + u.output,
            None => self.replayed + self.baseline,
        };
        self.turn = Some(Turn {
            est_calls: vec![TokenRecord { input: ctx, ..TokenRecord::default() }],
            ctx,
            start_ctx: ctx,
            stated_cost_before: self.stated_cost,
            ..Turn::default()
        });
    }

    /// Whether any usage was accounted (a turn ended or a call was recorded).
    pub fn has_turns(&self) -> bool {
        self.totals.calls > 0 || self.used.is_some_and(|u| u.source != Source::Estimate)
    }

    /// Whether a turn is in progress.
    pub fn in_turn(&self) -> bool {
        self.turn.is_some()
    }

    /// Estimated tokens of the user's prompt.
    pub fn prompt_tokens(&mut self, tokens: u64) {
        if let Some(turn) = &mut self.turn {
            turn.prompt += tokens;
            turn.ctx += tokens;
            if let Some(call) = turn.est_calls.last_mut() {
                call.input += tokens;
            }
        }
    }

    /// A user message shows up inside a turn: history an agent replays late (gemini-cli streams
    /// most of a `session/load` replay after answering it) or an injected message. What the turn
    /// estimated so far was not this turn's model calls: start its visible content over.
    pub fn user_message_in_turn(&mut self) {
        if let Some(turn) = &mut self.turn {
            let input = turn.start_ctx + turn.prompt;
            turn.est_calls = vec![TokenRecord { input, ..TokenRecord::default() }];
            turn.ctx = input;
            turn.tool_running = false;
        }
    }

    /// Estimated tokens the model generated (message text, tool call input). Output after a
    /// tool ran belongs to a new model call.
    pub fn output_tokens(&mut self, tokens: u64, thought: bool) {
        let Some(turn) = &mut self.turn else { return };
        if turn.tool_running {
            turn.tool_running = false;
            turn.est_calls.push(TokenRecord { input: turn.ctx, ..TokenRecord::default() });
        }
        let call = turn.est_calls.last_mut().expect("a turn always has an open call");
        call.output += tokens;
        if thought {
            call.thought += tokens;
        } else {
            turn.ctx += tokens;
        }
    }

    /// The model asked for a tool: the current call ends here.
    pub fn tool_call(&mut self, input_tokens: u64) {
        let Some(turn) = &mut self.turn else { return };
        if !turn.tool_running {
            // Parallel tool calls come from one model call: only the first ends it.
            turn.tool_running = true;
        }
        if let Some(call) = turn.est_calls.last_mut() {
            call.output += input_tokens;
        }
        turn.ctx += input_tokens;
    }

    /// Estimated tokens of a tool's result, which the next call carries as input.
    pub fn tool_output(&mut self, tokens: u64) {
        if let Some(turn) = &mut self.turn {
            turn.ctx += tokens;
        }
    }

    /// An exact model call (from the LLM API tap or a transcript) of the main agent.
    pub fn record_call(&mut self, rec: TokenRecord, source: Source, cx: &Context<'_>) {
        self.record_call_as(rec, source, Role::Main, cx);
    }

    /// An exact model call made by `role`, one by one as a source sees them (the tap, an agent
    /// that reports every call such as qwen-code).
    pub fn record_call_as(
        &mut self,
        rec: TokenRecord,
        source: Source,
        role: Role,
        cx: &Context<'_>,
    ) {
        if let (Some(model), Role::Main) = (&rec.model, role) {
            self.seen_model = Some(model.clone());
        }
        match &mut self.turn {
            Some(turn) => {
                turn.exact_calls.push((rec.clone(), source, role));
                self.provisionally(rec, source, role, None, cx);
            }
            // A call outside a turn (auxiliary, background): count it now.
            None => self.record_outside_turn(rec, source, role == Role::Main, cx),
        }
    }

    /// An exact call made outside any turn (a title generated after the result, a background
    /// compaction): it counts in the session's cost and totals at once; a main-agent call also
    /// says what is in context now.
    pub fn record_outside_turn(
        &mut self,
        rec: TokenRecord,
        source: Source,
        main: bool,
        cx: &Context<'_>,
    ) {
        if main {
            self.used = Some(used_of(&rec, source));
            if let Some(model) = &rec.model {
                self.seen_model = Some(model.clone());
            }
        }
        let role = if main { Role::Main } else { Role::Side };
        self.add_to_session(std::slice::from_ref(&rec), source, 1, cx, Origin::one(role, false));
    }

    /// A model call the LLM-API tap saw, attributed to this session, made by `role` as far as
    /// the tap can tell. During a turn it joins the turn's calls (merged with the transcript's
    /// at the turn's end); between turns it counts at once.
    pub fn tap_call(&mut self, rec: TokenRecord, id: Option<String>, role: Role, cx: &Context<'_>) {
        self.tapped_call(rec, id, role, Source::Tap, cx);
    }

    /// Like [`Account::tap_call`], for a call whose response carried no usage (a Chat
    /// Completions stream that did not ask for it in a way the server honours): the tap counted
    /// it from the content, so its figures, and a turn that holds it, are estimated.
    pub fn tap_estimated_call(
        &mut self,
        rec: TokenRecord,
        id: Option<String>,
        role: Role,
        cx: &Context<'_>,
    ) {
        self.tapped_call(rec, id, role, Source::Estimate, cx);
    }

    fn tapped_call(
        &mut self,
        rec: TokenRecord,
        id: Option<String>,
        role: Role,
        source: Source,
        cx: &Context<'_>,
    ) {
        self.tapped_now();
        match &mut self.turn {
            Some(turn) => {
                turn.tap_calls.push((rec.clone(), id.clone(), role, source));
                self.provisionally(rec, source, role, id, cx);
            }
            None => self.record_outside_turn(rec, source, role == Role::Main, cx),
        }
    }

    /// [`Account::tap_call`] for a call that ended before the turn in progress began (its
    /// report was read late): it happened between turns, and counts at once.
    pub fn tap_call_before_turn(&mut self, rec: TokenRecord, role: Role, cx: &Context<'_>) {
        self.tapped_now();
        self.record_outside_turn(rec, Source::Tap, role == Role::Main, cx);
    }

    fn tapped_now(&mut self) {
        if !self.tap {
            self.tap = true;
            self.stated_cost = None;
        }
    }

    /// Whether the LLM-API tap has seen this session's calls.
    pub fn tapped(&self) -> bool {
        self.tap
    }

    /// Whether the LLM-API tap has reported, in the turn in progress, every call `transcript`
    /// holds of it (the turn's calls as the transcript has them: record, main-agent flag, key),
    /// matched as the turn's end will match them. When it has not, the transcript would give
    /// those calls at the turn's end; the relay waits a moment for the tap's reports still under
    /// way, so that the tap wins whichever source reports first. True with no turn open.
    pub fn tap_covers(&self, transcript: &[(TokenRecord, bool, String)]) -> bool {
        let Some(turn) = &self.turn else { return true };
        if transcript.is_empty() {
            return true;
        }
        let others = transcript
            .iter()
            .map(|(rec, main, _)| {
                (rec.clone(), Source::Transcript, if *main { Role::Main } else { Role::Subagent })
            })
            .collect();
        let keys: Vec<Option<String>> =
            transcript.iter().map(|(_, _, k)| Some(k.clone())).collect();
        let (merged, _) = tapped::merge(turn.tap_calls.clone(), others, &keys);
        // A call the tap saw comes back with the tap's source: `Tap`, or `Estimate` for one
        // whose response carried no usage; only the transcript's own calls keep `Transcript`.
        merged.iter().all(|(_, source, _)| *source != Source::Transcript)
    }

    /// The session is followed through its transcript from now on: the agent's stated cost no
    /// longer counts.
    pub fn follow_transcript(&mut self) {
        self.transcript = true;
        self.stated_cost = None;
    }

    /// Whether the session is followed through its transcript.
    pub fn follows_transcript(&self) -> bool {
        self.transcript
    }

    /// The turn's calls as the transcript recorded them, in order, each marked main-agent or
    /// not (subagents, auxiliary calls): they replace whatever exact calls the turn had.
    pub fn transcript_turn(&mut self, calls: Vec<(TokenRecord, bool)>) {
        if let Some(turn) = &mut self.turn {
            turn.exact_calls = calls
                .into_iter()
                .map(|(rec, main)| {
                    let role = if main { Role::Main } else { Role::Subagent };
                    (rec, Source::Transcript, role)
                })
                .collect();
            turn.exact_keys.clear();
        }
    }

    /// [`Account::transcript_turn`] with each call's key in the transcript: where it is the
    /// provider's message id (Claude Code's), a call the tap also saw is matched by it.
    pub fn transcript_turn_keyed(&mut self, calls: Vec<(TokenRecord, bool, String)>) {
        let keys = calls.iter().map(|(_, _, k)| Some(k.clone())).collect();
        self.transcript_turn(calls.into_iter().map(|(rec, main, _)| (rec, main)).collect());
        if let Some(turn) = &mut self.turn {
            turn.exact_keys = keys;
        }
    }

    /// A session's whole history, read from its transcript (`session/load`, `session/resume`,
    /// `session/fork`): its `used` is the transcript's, and so are its cost and totals unless an
    /// earlier run of acp-usage accounted more of it.
    pub fn transcript_history(&mut self, calls: &[(TokenRecord, bool)], cx: &Context<'_>) {
        let carried = self.carried.take();
        let fresh = Account {
            selected_model: self.selected_model.take(),
            selected_window: self.selected_window.take(),
            seen_model: self.seen_model.take(),
            agent_window: self.agent_window.take(),
            reported_window: self.reported_window.take(),
            stated_floor: self.stated_floor.take(),
            baseline: self.baseline,
            turns_ended: self.turns_ended,
            transcript: true,
            tap: self.tap,
            ..Account::new()
        };
        *self = fresh;
        let records: Vec<TokenRecord> = calls.iter().map(|(r, _)| r.clone()).collect();
        if let Some((last, _)) = calls.iter().rev().find(|(_, main)| *main) {
            self.used = Some(used_of(last, Source::Transcript));
        }
        if let Some(model) =
            calls.iter().rev().find_map(|(r, main)| r.model.clone().filter(|_| *main))
        {
            self.seen_model = Some(model);
        }
        if !records.is_empty() {
            self.add_to_session(&records, Source::Transcript, 1, cx, None);
        }
        // An earlier run of acp-usage that saw more of the session than its transcript holds
        // (the tap's side calls, Claude Code's titles from its per-model counts) carried a
        // higher exact cost: that stands, and the transcript's sums are not added to it. A
        // transcript that holds more (the session went on without acp-usage) wins.
        if let Some(c) = carried.filter(|c| {
            c.cost_exact
                && c.cost.is_some_and(|k| k > self.priced_cost + 1e-9)
                && c.totals.total() >= self.totals.total()
        }) {
            self.priced_cost = 0.0;
            self.priced_calls = 0;
            self.unpriced_calls = 0;
            self.totals = TokenTotals::default();
            self.carried = Some(Carried { used: None, ..c });
        }
    }

    /// The agent's own per-turn usage, normalised, and how complete it is.
    pub fn agent_turn(&mut self, rec: TokenRecord, report: TurnReport, calls: Option<u64>) {
        if let Some(model) = &rec.model {
            self.seen_model = Some(model.clone());
        }
        if let Some(turn) = &mut self.turn {
            turn.agent_report = Some((rec, report, calls));
        }
    }
}

/// `used` after an exact call: its prompt and what it generated, minus dropped thoughts.
fn used_of(rec: &TokenRecord, source: Source) -> Used {
    Used {
        prompt: rec.input,
        output: rec.output.saturating_sub(rec.thought),
        source,
        exact: source.is_exact(),
    }
}
