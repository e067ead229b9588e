//! What a session's account settles for the sinks: every call once, with its role, source, key
//! and cost; calls of a turn in progress kept provisionally; history never settled again.

use acp_usage_core::account::{Context, Role};
use acp_usage_core::{Account, Catalog, Source, TokenRecord};

const MODEL: &str = "claude-sonnet-4-5";

fn cx(catalog: &Catalog) -> Context<'_> {
    Context { catalog, default_window: 200_000, window_percent: 100, remembered_size: None }
}

fn rec(input: u64, output: u64) -> TokenRecord {
    TokenRecord { input, output, model: Some(MODEL.into()), ..TokenRecord::default() }
}

#[test]
fn a_tapped_turn_settles_each_call_once_with_the_transcripts_role_and_the_providers_id() {
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let mut l = Account::new();
    l.begin_turn();
    l.tap_call(rec(1000, 50), Some("msg_a".into()), Role::Main, &cx);
    l.tap_call(rec(300, 20), Some("msg_b".into()), Role::Main, &cx);
    // During the turn: both kept provisionally, nothing settled yet.
    let provisional = l.take_provisional();
    assert_eq!(provisional.iter().map(|c| c.record.input).collect::<Vec<_>>(), vec![1000, 300]);
    assert!(l.take_accounted().is_empty());
    // The transcript has the first call only (the second was a side call it does not record).
    l.transcript_turn_keyed(vec![(rec(1000, 50), true, "msg_a".into())]);
    let turn = l.end_turn(&cx).expect("a turn");
    let settled = l.take_accounted();
    let got: Vec<(u64, Role, Source, Option<&str>)> =
        settled.iter().map(|c| (c.record.input, c.role, c.source, c.key.as_deref())).collect();
    assert_eq!(
        got,
        vec![
            (1000, Role::Main, Source::Tap, Some("msg_a")),
            (300, Role::Side, Source::Tap, Some("msg_b")),
        ]
    );
    // Each call priced on its own, and together they are the turn's cost.
    let sum: f64 = settled.iter().map(|c| c.cost.unwrap()).sum();
    assert!((sum - turn.cost.unwrap()).abs() < 1e-12, "{sum} vs {:?}", turn.cost);
    assert!(settled.iter().all(|c| c.in_turn && c.calls == 1 && !c.cost_stated));
    assert_eq!(settled[0].provider.as_deref(), Some("anthropic"));
    // Taken once: nothing is settled twice.
    assert!(l.take_accounted().is_empty() && l.take_provisional().is_empty());
}

#[test]
fn a_call_between_turns_is_settled_at_once_and_history_never() {
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let mut l = Account::restored();
    l.transcript_history(&[(rec(5000, 100), true)], &cx);
    assert!(l.take_accounted().is_empty(), "history is what an earlier run or import recorded");
    l.record_outside_turn(rec(200, 10), Source::Transcript, false, &cx);
    let settled = l.take_accounted();
    assert_eq!(settled.len(), 1);
    assert_eq!((settled[0].role, settled[0].in_turn), (Role::Side, false));
}

#[test]
fn an_agents_stated_turn_cost_is_what_its_settled_calls_add_up_to() {
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let mut l = Account::new();
    l.begin_turn();
    l.agent_cost(0.5);
    l.agent_turn(rec(1000, 50), acp_usage_core::account::TurnReport::Complete, Some(2));
    let turn = l.end_turn(&cx).expect("a turn");
    let settled = l.take_accounted();
    assert_eq!(settled.len(), 1);
    assert_eq!((settled[0].calls, settled[0].source), (2, Source::Agent));
    assert!(settled[0].cost_stated);
    assert!((settled[0].cost.unwrap() - turn.cost.unwrap()).abs() < 1e-12);
    assert!((settled[0].cost.unwrap() - 0.5).abs() < 1e-12);
}

#[test]
fn a_fork_takes_none_of_its_parents_unsettled_calls() {
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let mut parent = Account::new();
    parent.record_outside_turn(rec(100, 5), Source::Tap, false, &cx);
    let mut fork = parent.fork();
    assert!(fork.take_accounted().is_empty());
    assert_eq!(parent.take_accounted().len(), 1);
}

#[test]
fn a_modifier_with_an_unknown_multiplier_is_priced_at_1x_and_not_exact() {
    use acp_usage_core::account::price_call;
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    // Sonnet 4.5 has no fast mode in the corrections: priced at the standard price, not exact.
    let mut fast = rec(1000, 50);
    fast.modifiers.fast = true;
    let standard = price_call(&rec(1000, 50), None, 1, &catalog);
    let priced = price_call(&fast, None, 1, &catalog);
    assert_eq!((priced.cost, priced.modifiers_unpriced), (standard.cost, true));
    // A stated cost already includes whatever the modifiers cost.
    let stated = TokenRecord { stated_cost: Some(0.5), ..fast.clone() };
    assert!(!price_call(&stated, None, 1, &catalog).modifiers_unpriced);

    let mut l = Account::new();
    l.begin_turn();
    l.tap_call(fast, Some("msg_f".into()), Role::Main, &cx);
    l.end_turn(&cx).expect("a turn");
    let settled = l.take_accounted();
    assert_eq!(settled.len(), 1);
    assert!(!settled[0].exact() && settled[0].modifiers_unpriced);
    // The session's cost is no longer exact either.
    let snap = l.snapshot(&cx);
    assert_eq!(snap.cost_source, Source::Estimate, "{snap:?}");
}

#[test]
fn a_fast_mode_call_costs_its_multiple_and_stays_exact() {
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let opus = |fast| TokenRecord {
        input: 10_000,
        output: 500,
        model: Some("claude-opus-4-6".into()),
        modifiers: acp_usage_core::Modifiers { fast, ..Default::default() },
        ..TokenRecord::default()
    };
    let mut standard = Account::new();
    standard.begin_turn();
    standard.tap_call(opus(false), Some("msg_s".into()), Role::Main, &cx);
    let mut fast = Account::new();
    fast.begin_turn();
    fast.tap_call(opus(true), Some("msg_f".into()), Role::Main, &cx);
    standard.end_turn(&cx).expect("a turn");
    let turn = fast.end_turn(&cx).expect("a turn");
    // The turn's `_meta` names the modifier; the call stays under its model.
    assert!(turn.modifiers.fast && !turn.modifiers.us_only);
    assert_eq!(turn.model.as_deref(), Some("claude-opus-4-6"));
    let s = standard.take_accounted().remove(0);
    let f = fast.take_accounted().remove(0);
    assert!((f.cost.unwrap() - 6.0 * s.cost.unwrap()).abs() < 1e-12);
    assert!(f.exact());
    assert_eq!(fast.snapshot(&cx).cost_source, Source::Catalog);
}

#[test]
fn a_tap_call_without_usage_on_the_wire_makes_the_turn_an_estimate() {
    // A Chat Completions stream that carried no usage: the tap counted it from the content.
    let catalog = Catalog::embedded().clone();
    let cx = cx(&catalog);
    let mut l = Account::new();
    l.begin_turn();
    l.tap_call(rec(1000, 50), Some("a".into()), Role::Main, &cx);
    l.tap_estimated_call(rec(400, 20), Some("b".into()), Role::Main, &cx);
    let turn = l.end_turn(&cx).expect("a turn");
    assert_eq!(turn.source, Source::Estimate);
    assert_eq!(turn.totals.input, 1400);
    // The turn's calls are settled under the turn's source.
    let sources: Vec<Source> = l.take_accounted().iter().map(|c| c.source).collect();
    assert_eq!(sources, vec![Source::Estimate, Source::Estimate]);
    // Between turns it counts at once, as an estimate too.
    l.tap_estimated_call(rec(100, 5), None, Role::Side, &cx);
    let between: Vec<Source> = l.take_accounted().iter().map(|c| c.source).collect();
    assert_eq!(between, vec![Source::Estimate]);
    // With usage on the wire every call is the tap's, exact.
    l.begin_turn();
    l.tap_call(rec(1000, 50), None, Role::Main, &cx);
    assert_eq!(l.end_turn(&cx).expect("a turn").source, Source::Tap);
}
