//! How a session folds calls into its figures, and the calls it settled, one by one, for the
//! sinks that remember them (the SQLite ledger file): what was counted, who made it, where the
//! counts came from and what it cost.
//!
//! A sink never prices or merges: it stores what [`AccountedCall`] says. [`price_call`] is the
//! one pricing rule, shared by the session's account and by `acp-usage import` (calls read from
//! transcripts on disk, outside any session this run accounts).

use super::{Account, Context, Origin, Role};
use crate::catalog::{Catalog, Corrections};
use crate::pricing;
use crate::tokens::{Source, TokenRecord};

/// One settled record: usually one model call; an agent's per-turn sums stand for `calls`.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountedCall {
    /// The counts; `model` is the model the call was priced as (the record's own, else the
    /// session's), `None` when nothing names it.
    pub record: TokenRecord,
    /// How many model calls the record stands for (1 unless an agent's turn sums).
    pub calls: u64,
    /// Who made it.
    pub role: Role,
    /// The model's provider as the catalog names it (`anthropic`, `openai`, `gemini`, ...).
    pub provider: Option<String>,
    /// Where its counts come from.
    pub source: Source,
    /// Its cost in USD, `None` when the model has no price.
    pub cost: Option<f64>,
    /// Whether the cost was stated (by the provider, the agent or its transcript) rather than
    /// priced from the catalog.
    pub cost_stated: bool,
    /// The call carried a modifier (`record.modifiers`) whose multiplier for its model is
    /// unknown: it was priced at 1x, so its cost is a floor, not exact.
    pub modifiers_unpriced: bool,
    /// The provider's message id (from the tap, or a transcript that keeps it), else the
    /// transcript's own key of the call: what a later import matches to count it once.
    pub key: Option<String>,
    /// Whether it was made during a turn (else between turns: a title, a background call).
    pub in_turn: bool,
}

impl AccountedCall {
    /// Whether both its counts and its cost are exact.
    pub fn exact(&self) -> bool {
        self.source.is_exact() && !self.modifiers_unpriced
    }
}

/// What one record costs, as [`price_call`] settles it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Priced {
    /// USD, `None` when neither a stated cost nor a price is known.
    pub cost: Option<f64>,
    /// Whether the cost was stated rather than priced from the catalog.
    pub stated: bool,
    /// The catalog's provider of the model, when the catalog knows the model.
    pub provider: Option<String>,
    /// A modifier of the record has no known multiplier for the model: priced at 1x.
    pub modifiers_unpriced: bool,
}

/// What one record costs: its stated cost, else the catalog's price of its model (the
/// record's own, else `model`), the tier chosen per call as if it summed `calls` calls, times
/// the multipliers of the request's modifiers (fast mode, US-only inference) from the
/// corrections file. A stated cost already includes them.
pub fn price_call(rec: &TokenRecord, model: Option<&str>, calls: u64, catalog: &Catalog) -> Priced {
    let model = rec.model.as_deref().or(model);
    let info = model.and_then(|m| catalog.lookup(m));
    let provider = info.map(|i| i.provider.clone()).filter(|p| !p.is_empty());
    match (rec.stated_cost, info.and_then(|i| i.prices.as_ref().map(|p| (i, p)))) {
        (Some(c), _) => Priced { cost: Some(c), stated: true, provider, modifiers_unpriced: false },
        (None, Some((info, p))) => {
            let (factor, known) =
                Corrections::embedded().factor(&info.id, p.multipliers, rec.modifiers);
            Priced {
                cost: Some(pricing::cost_of_calls(rec, p, calls) * factor),
                stated: false,
                provider,
                modifiers_unpriced: !known,
            }
        }
        (None, None) => Priced { cost: None, stated: false, provider, modifiers_unpriced: false },
    }
}

/// Scales the costs of a turn's settled calls so that they add up to `turn_cost` (what the
/// agent stated the turn cost): the per-call split follows the catalog's, or falls on the
/// first call when the catalog priced none.
pub(super) fn scale_to(calls: &mut [AccountedCall], turn_cost: f64) {
    let priced: f64 = calls.iter().filter_map(|c| c.cost).sum();
    for (k, call) in calls.iter_mut().enumerate() {
        call.cost = if priced > 0.0 {
            call.cost.map(|c| c * turn_cost / priced)
        } else {
            Some(if k == 0 { turn_cost } else { 0.0 })
        };
        call.cost_stated = true;
        // The agent's figure covers whatever the call's modifiers cost.
        call.modifiers_unpriced = false;
    }
}

/// Who made a record being settled and how it was seen: the settled call's role, source, key
/// and whether it was made in a turn.
struct Made {
    role: Role,
    source: Source,
    key: Option<String>,
    in_turn: bool,
}

/// The account's side of the sinks: what it settled and has not handed over yet.
impl Account {
    /// Keeps an exact call of the turn in progress for the sinks, as it was seen: a process
    /// killed before the turn ends then loses at most the call in flight. The turn's settled
    /// calls replace these at its end.
    pub(super) fn provisionally(
        &mut self,
        rec: TokenRecord,
        source: Source,
        role: Role,
        key: Option<String>,
        cx: &Context<'_>,
    ) {
        if rec.input == 0 && rec.output == 0 {
            return;
        }
        let call = self.settle(&rec, 1, Made { role, source, key, in_turn: true }, cx);
        self.provisional.push(call);
    }

    /// One record as the sinks get it: priced as the model it names, else the session's.
    fn settle(&self, rec: &TokenRecord, calls: u64, made: Made, cx: &Context<'_>) -> AccountedCall {
        let Made { role, source, key, in_turn } = made;
        let model =
            rec.model.as_deref().or(self.seen_model.as_deref()).or(self.selected_model.as_deref());
        let priced = price_call(rec, model, calls, cx.catalog);
        AccountedCall {
            record: TokenRecord { model: model.map(str::to_string), ..rec.clone() },
            calls,
            role,
            provider: priced.provider,
            source,
            cost: priced.cost,
            cost_stated: priced.stated,
            modifiers_unpriced: priced.modifiers_unpriced,
            key,
            in_turn,
        }
    }

    /// Exact calls of the turn in progress seen since the last call (the tap's, an agent's
    /// per-call reports), for the sinks to keep until the turn's settled calls replace them.
    pub fn take_provisional(&mut self) -> Vec<AccountedCall> {
        std::mem::take(&mut self.provisional)
    }

    /// A fork of this session (`session/fork`): its context and cost so far, but none of the
    /// calls still waiting for the sinks (they are this session's, not the fork's).
    pub fn fork(&self) -> Account {
        Account { accounted: Vec::new(), provisional: Vec::new(), ..self.clone() }
    }

    /// The calls settled since the last call, for the sinks: a turn's at its end, a call made
    /// between turns at once. History read from a transcript on reopening is not among them.
    pub fn take_accounted(&mut self) -> Vec<AccountedCall> {
        std::mem::take(&mut self.accounted)
    }

    /// The cost of the calls settled since the sinks last took them.
    pub fn accounted_cost(&self) -> f64 {
        self.accounted.iter().filter_map(|c| c.cost).sum()
    }

    /// Whether calls were settled since the sinks last took them.
    pub fn has_accounted(&self) -> bool {
        !self.accounted.is_empty() || !self.provisional.is_empty()
    }

    /// Folds records into the session totals and cost; returns their cost when priced. With an
    /// `origin`, each record is also settled for the sinks.
    pub(super) fn add_to_session(
        &mut self,
        records: &[TokenRecord],
        source: Source,
        calls_per_record: u64,
        cx: &Context<'_>,
        origin: Option<Origin>,
    ) -> Option<f64> {
        let mut cost = None;
        let mut calls = 0;
        if !source.is_exact() {
            self.totals_estimated = true;
        }
        for (k, rec) in records.iter().enumerate() {
            // A record without a token is no model call (a local command's turn): nothing to
            // count or price.
            if rec.input == 0 && rec.output == 0 {
                continue;
            }
            self.totals += rec;
            calls += 1;
            let (role, key, in_turn) = match &origin {
                Some(o) => (
                    o.roles.get(k).copied().unwrap_or(Role::Main),
                    o.keys.get(k).cloned().flatten(),
                    o.in_turn,
                ),
                None => (Role::Main, None, false),
            };
            let made = Made { role, source, key, in_turn };
            let call = self.settle(rec, calls_per_record, made, cx);
            match call.cost {
                Some(c) => *cost.get_or_insert(0.0) += c,
                None => self.unpriced_calls += 1,
            }
            // A modifier priced at 1x: the session's cost is a floor from here on.
            if call.modifiers_unpriced {
                self.priced_exact = false;
            }
            if origin.is_some() {
                self.accounted.push(call);
            }
        }
        if let Some(c) = cost {
            self.priced_cost += c;
            self.priced_calls += calls;
            if !source.is_exact() {
                self.priced_exact = false;
            }
        }
        cost
    }
}
