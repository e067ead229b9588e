//! The end of a turn: its usage resolved from the best source the turn had, in the order of
//! DESIGN.md's precedence, and folded into the session.

use super::accounted;
use super::side::unseen_calls;
use super::{Account, Context, Origin, Role, RoleTotals, Turn, TurnReport, TurnUsage, Used};
use super::{tapped, used_of};
use crate::tokens::{Modifiers, Source, TokenRecord, TokenTotals};

/// A turn's usage as one source tells it, before it is folded into the session.
struct Resolved {
    records: Vec<TokenRecord>,
    source: Source,
    cache_known: bool,
    thought_known: bool,
    calls: Option<u64>,
    /// The first call's prompt, when the source tells it: teaches the hidden baseline.
    first_input: Option<u64>,
    origin: Origin,
    roles: RoleTotals,
}

impl Resolved {
    /// A turn resolved from one source, with no per-call roles; the caller fills in the rest.
    fn summed(records: Vec<TokenRecord>, source: Source, known: (bool, bool)) -> Resolved {
        Resolved {
            records,
            source,
            cache_known: known.0,
            thought_known: known.1,
            calls: None,
            first_input: None,
            origin: Origin { in_turn: true, ..Origin::default() },
            roles: RoleTotals::default(),
        }
    }
}

/// The agent's whole-turn report: its record, how complete it is, and its call count.
type AgentReport = (TokenRecord, TurnReport, Option<u64>);

impl Account {
    /// The turn ended (its `session/prompt` result arrived): resolve its usage from the best
    /// source and fold it into the session.
    pub fn end_turn(&mut self, cx: &Context<'_>) -> Option<TurnUsage> {
        let mut turn = self.turn.take()?;
        // The settled calls replace the provisional ones; those not yet taken need not be.
        self.provisional.clear();
        if !turn.tap_calls.is_empty() {
            let others = std::mem::take(&mut turn.exact_calls);
            let keys = std::mem::take(&mut turn.exact_keys);
            (turn.exact_calls, turn.exact_keys) =
                tapped::merge(std::mem::take(&mut turn.tap_calls), others, &keys);
        }
        // The source precedence: calls recorded one by one (tap, transcript, the agent's own
        // per-call records), then the agent's whole-turn report, then its per-call in-context
        // totals, then the estimate from the visible content.
        let resolved = if !turn.exact_calls.is_empty() {
            self.by_exact_calls(&mut turn)
        } else if let Some(report) = turn.agent_report.take() {
            self.by_agent_report(report, &turn)
        } else if !turn.agent_call_totals.is_empty() {
            by_agent_call_totals(&turn)
        } else {
            self.by_estimate(&turn)
        };
        self.learn_baseline(&turn, resolved.first_input);
        self.turns_ended += 1;
        Some(self.settle_turn(resolved, turn.stated_cost_before, cx))
    }

    /// Exact calls, one record each: the turn's source is that of the calls recorded one by one.
    fn by_exact_calls(&mut self, turn: &mut Turn) -> Resolved {
        let mut exact_calls = std::mem::take(&mut turn.exact_calls);
        // With the tap every call is seen as it ends, so the agent's per-model counts show
        // nothing more: a side call they include may have been counted between turns.
        if !self.tap {
            exact_calls.extend(
                unseen_calls(&exact_calls, &turn.agent_models)
                    .into_iter()
                    .map(|rec| (rec, Source::Agent, Role::Side)),
            );
        }
        // The turn's source is that of the calls a source recorded one by one; side calls the
        // agent's per-model counts revealed show in the role breakdown.
        let source = exact_calls
            .iter()
            .filter(|(_, _, role)| *role != Role::Side)
            .map(|(_, s, _)| *s)
            .max()
            .unwrap_or(Source::Agent);
        // `used` is what the main agent's last call left in context; a subagent's context
        // is its own.
        let main = |role: &Role| *role == Role::Main;
        if let Some((last, s, _)) = exact_calls.iter().rev().find(|(_, _, r)| main(r)) {
            self.used = Some(used_of(last, *s));
        }
        let first_input = exact_calls.iter().find(|(_, _, r)| main(r)).map(|(r, _, _)| r.input);
        let mut roles = RoleTotals::default();
        let mut origin = Origin { in_turn: true, ..Origin::default() };
        for (k, (rec, _, role)) in exact_calls.iter().enumerate() {
            roles.add(*role, rec);
            origin.roles.push(*role);
            origin.keys.push(turn.exact_keys.get(k).cloned().flatten());
        }
        let recs: Vec<TokenRecord> = exact_calls.into_iter().map(|(r, _, _)| r).collect();
        let n = recs.len() as u64;
        Resolved {
            calls: Some(n),
            first_input,
            origin,
            roles,
            ..Resolved::summed(recs, source, (true, true))
        }
    }

    /// The agent's report of the whole turn, complete or without cache reads and thoughts.
    fn by_agent_report(&mut self, report: AgentReport, turn: &Turn) -> Resolved {
        let (rec, report, calls) = report;
        let est = &turn.est_calls;
        let one_call = est.len() == 1;
        match report {
            TurnReport::Complete => {
                if self.used.is_none_or(|u| u.source == Source::Estimate) {
                    // The agent gave the turn's sums but not `used`: the last call's share
                    // of them, by the shape of the estimated calls.
                    self.used = Some(scaled_used(&rec, est, calls));
                }
                let first_input = (one_call && calls.unwrap_or(1) == 1).then_some(rec.input);
                Resolved {
                    calls,
                    first_input,
                    ..Resolved::summed(vec![rec], Source::Agent, (true, true))
                }
            }
            TurnReport::WithoutCacheAndThoughts => {
                // Input and visible output are the agent's; thoughts are estimated from the
                // thought chunks, and `used` from the estimated calls scaled to the agent's
                // input.
                let est_thought: u64 = est.iter().map(|c| c.thought).sum();
                let mut rec = rec;
                rec.output += est_thought;
                rec.thought = est_thought;
                let inputs: Vec<u64> = est.iter().map(|c| c.input).collect();
                let afters: Vec<u64> = est.iter().map(TokenRecord::context_after).collect();
                let est_input: u64 = inputs.iter().sum();
                let cached = cached_prefixes(turn.start_ctx, &inputs, &afters);
                if est_input > 0 {
                    // The agent's input is larger than the visible estimate; the cached
                    // share scales with it.
                    rec.cache_read =
                        (rec.input as u128 * cached as u128 / est_input as u128) as u64;
                }
                let n = calls.unwrap_or(est.len() as u64).max(1);
                self.used = Some(scaled_used(&rec, est, Some(n)));
                let first_input = one_call.then_some(rec.input);
                Resolved {
                    calls: Some(n),
                    first_input,
                    ..Resolved::summed(vec![rec], Source::Estimate, (false, true))
                }
            }
        }
    }

    /// Nothing but the visible content: the estimated calls, each reading from the prompt
    /// cache what was in context before it.
    fn by_estimate(&mut self, turn: &Turn) -> Resolved {
        let last_est = turn.est_calls.last().cloned().unwrap_or_default();
        self.used = Some(estimated_used(&last_est));
        let n = turn.est_calls.len() as u64;
        let mut recs = turn.est_calls.clone();
        let mut prefix = turn.start_ctx;
        for rec in &mut recs {
            rec.cache_read = prefix.min(rec.input);
            prefix = rec.context_after();
        }
        Resolved { calls: Some(n), ..Resolved::summed(recs, Source::Estimate, (false, false)) }
    }

    /// The first turn of a fresh session teaches the agent's hidden context.
    fn learn_baseline(&mut self, turn: &Turn, first_input: Option<u64>) {
        if self.turns_ended == 0
            && !self.history_unseen
            && self.replayed == 0
            && self.carried.is_none()
        {
            // What the first call carried beyond the visible prompt is the agent's hidden
            // context (system prompt, tool definitions): the baseline of its next sessions.
            // A turn always opens with one estimated call; none says nothing visible.
            let visible =
                turn.est_calls.first().map_or(0, |c| c.input).saturating_sub(self.baseline);
            if let Some(first) = first_input.filter(|f| *f > visible) {
                self.learned_baseline = Some(first - visible);
            }
        }
    }

    /// Fold the resolved turn into the session: its calls settled and priced (scaled to the
    /// cost the agent states, when it does), and the turn's usage summed.
    fn settle_turn(
        &mut self,
        resolved: Resolved,
        stated_cost_before: Option<f64>,
        cx: &Context<'_>,
    ) -> TurnUsage {
        let Resolved {
            records,
            source,
            cache_known,
            thought_known,
            calls,
            origin,
            roles,
            first_input: _,
        } = resolved;
        // One aggregated record stands for several calls: its tier is decided per call.
        let per_record = if records.len() == 1 { calls.unwrap_or(1).max(1) } else { 1 };
        let settled = self.accounted.len();
        let mut cost = self.add_to_session(&records, source, per_record, cx, Some(origin));
        if let Some(now) = self.stated_cost {
            // The agent states the session's cost: the turn cost is what it grew by.
            cost = Some(now - stated_cost_before.unwrap_or(0.0)).filter(|c| *c >= 0.0);
            if let Some(c) = cost {
                accounted::scale_to(&mut self.accounted[settled..], c);
            }
        }
        let mut totals = TokenTotals::default();
        for rec in &records {
            totals += rec;
        }
        totals.calls = calls.unwrap_or(totals.calls);
        let model = records.iter().rev().find_map(|r| r.model.clone()).or(self.seen_model.clone());
        let modifiers = records.iter().fold(Modifiers::default(), |m, r| m.union(r.modifiers));
        TurnUsage {
            totals,
            cache_known,
            thought_known,
            source,
            calls,
            model,
            cost,
            roles,
            modifiers,
        }
    }
}

/// The agent reported each call's in-context total (input + output): the totals are exact, the
/// split between input and output is estimated.
fn by_agent_call_totals(turn: &Turn) -> Resolved {
    let est = &turn.est_calls;
    let totals = &turn.agent_call_totals;
    let est_output: u64 = est.iter().map(|c| c.output).sum();
    let est_thought: u64 = est.iter().map(|c| c.thought).sum();
    let total: u64 = totals.iter().sum();
    let output = est_output.min(total);
    let n = totals.len() as u64;
    let inputs: Vec<u64> = totals
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let out = if est.len() == totals.len() { est[k].output } else { output / n };
            t.saturating_sub(out)
        })
        .collect();
    let rec = TokenRecord {
        input: total - output,
        cache_read: cached_prefixes(turn.start_ctx, &inputs, totals).min(total - output),
        output,
        thought: est_thought.min(output),
        ..TokenRecord::default()
    };
    let first_input = totals.first().map(|t| t.saturating_sub(est.first().map_or(0, |c| c.output)));
    Resolved {
        calls: Some(n),
        first_input,
        ..Resolved::summed(vec![rec], Source::Estimate, (false, false))
    }
}

/// Estimated prompt-cache reads of a turn's calls: providers cache prompt prefixes (Anthropic
/// with cache breakpoints, OpenAI and Gemini implicitly), so each call reads from the cache what
/// was already in context before it: the context before the prompt for the first call, the
/// previous call's context for the others. Only used to price estimated turns.
fn cached_prefixes(start_ctx: u64, inputs: &[u64], contexts_after: &[u64]) -> u64 {
    let mut prefix = start_ctx;
    let mut cached = 0;
    for (input, after) in inputs.iter().zip(contexts_after) {
        cached += prefix.min(*input);
        prefix = *after;
    }
    cached
}

/// `used` from a turn's summed record: the last estimated call's share of the summed input
/// (hidden context such as system prompts scales with it), and an even share of the output.
fn scaled_used(sum: &TokenRecord, est: &[TokenRecord], calls: Option<u64>) -> Used {
    let n = calls.unwrap_or(est.len() as u64).max(1);
    let est_input: u64 = est.iter().map(|c| c.input).sum();
    let last_input = est.last().map_or(0, |c| c.input);
    let prompt = if est_input > 0 && est.len() as u64 == n {
        (sum.input as u128 * last_input as u128 / est_input as u128) as u64
    } else {
        sum.input / n
    };
    let output = sum.output.saturating_sub(sum.thought) / n;
    Used { prompt, output, source: Source::Estimate, exact: false }
}

fn estimated_used(last: &TokenRecord) -> Used {
    Used {
        prompt: last.input,
        output: last.output - last.thought,
        source: Source::Estimate,
        exact: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn cx() -> Context<'static> {
        Context {
            catalog: Catalog::embedded(),
            default_window: 200_000,
            window_percent: 100,
            remembered_size: None,
        }
    }

    #[test]
    fn a_turn_without_estimated_calls_ends_without_a_panic() {
        // Every turn opens with one estimated call (`begin_turn`, `user_message_in_turn`); a
        // turn without one must still end, whatever source resolves it.
        let rec = TokenRecord { input: 900, output: 40, ..TokenRecord::default() };
        let sources: [&dyn Fn(&mut Turn); 4] = [
            &|_| (),
            &|t| t.agent_call_totals = vec![940, 1000],
            &|t| t.agent_report = Some((rec.clone(), TurnReport::WithoutCacheAndThoughts, None)),
            &|t| t.exact_calls = vec![(rec.clone(), Source::Transcript, Role::Main)],
        ];
        for fill in sources {
            let mut account = Account::new();
            let mut turn = Turn::default();
            fill(&mut turn);
            account.turn = Some(turn);
            let ended = account.end_turn(&cx()).expect("the turn ends");
            assert!(ended.totals.total() > 0 || ended.source == Source::Estimate);
        }
    }
}
