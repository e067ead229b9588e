//! A turn's calls as the LLM-API tap saw them, merged with what another per-call source (the
//! transcript, an agent that reports each call) recorded of the same turn.
//!
//! The tap sees every billed call but can only guess who made it; the other source knows who
//! made each call it records but misses calls (titles, suggestions, classifiers). A call both
//! saw counts once, with the tap's figures and the other source's role: the same provider
//! message id where the transcript keeps it (Claude Code's), else the same counts within the
//! turn (Codex's, Gemini CLI's and opencode's records key calls their own way). When another
//! source covered the turn, a tap call it does not have is a call the agent made for itself: a
//! side call.

use super::Role;
use crate::tokens::{Modifiers, Source, TokenRecord};

/// One call the tap saw: its record, the provider's id, the role the tap's attribution gave
/// it, and its source (the tap's, or an estimate where the response carried no usage).
pub(super) type TapCall = (TokenRecord, Option<String>, Role, Source);

/// A turn's exact calls, with the key of each (the provider's id, else the other source's).
pub(super) type Merged = (Vec<(TokenRecord, Source, Role)>, Vec<Option<String>>);

fn same_call(a: &TokenRecord, b: &TokenRecord) -> bool {
    a.input == b.input && a.output == b.output && a.cache_read == b.cache_read
}

/// The turn's calls: the tap's, in the order it saw them, then calls only `others` had.
/// `keys` are the other source's keys of its calls, in order, where it has them; the merged
/// calls' keys come back with them (the tap's provider id first).
pub(super) fn merge(
    tap: Vec<TapCall>,
    others: Vec<(TokenRecord, Source, Role)>,
    keys: &[Option<String>],
) -> Merged {
    let covered = others.iter().any(|(_, _, role)| *role != Role::Side);
    let mut roles: Vec<Option<Role>> = vec![None; tap.len()];
    let mut other_keys: Vec<Option<String>> = vec![None; tap.len()];
    // Modifiers either source stated: a transcript may say `fast` where the tap's copy of the
    // response did not (a gateway rewriting usage), and the call was billed so either way.
    let mut other_modifiers = vec![Modifiers::default(); tap.len()];
    let mut only_others = Vec::new();
    let mut only_keys = Vec::new();
    for (k, (rec, source, role)) in others.into_iter().enumerate() {
        let key = keys.get(k).and_then(Option::as_deref);
        let free = |i: &usize| roles[*i].is_none();
        let by_id =
            (0..tap.len()).filter(free).find(|&i| key.is_some() && tap[i].1.as_deref() == key);
        let by_counts = || (0..tap.len()).filter(free).find(|&i| same_call(&tap[i].0, &rec));
        match by_id.or_else(by_counts) {
            Some(i) => {
                roles[i] = Some(role);
                other_keys[i] = key.map(str::to_string);
                other_modifiers[i] = rec.modifiers;
            }
            None => {
                only_others.push((rec, source, role));
                only_keys.push(key.map(str::to_string));
            }
        }
    }
    let mut out_keys: Vec<Option<String>> =
        tap.iter().zip(other_keys).map(|((_, id, _, _), other)| id.clone().or(other)).collect();
    out_keys.extend(only_keys);
    let mut out: Vec<(TokenRecord, Source, Role)> = tap
        .into_iter()
        .zip(roles)
        .zip(other_modifiers)
        .map(|(((mut rec, _, guessed, source), known), modifiers)| {
            let role = match known {
                Some(role) => role,
                None if covered => Role::Side,
                None => guessed,
            };
            rec.modifiers = rec.modifiers.union(modifiers);
            (rec, source, role)
        })
        .collect();
    out.extend(only_others);
    (out, out_keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(input: u64, output: u64) -> TokenRecord {
        TokenRecord { input, output, ..TokenRecord::default() }
    }

    #[test]
    fn a_call_both_saw_counts_once_with_the_other_sources_role() {
        let tap = vec![
            (rec(100, 10), None, Role::Main, Source::Tap),
            (rec(50, 5), None, Role::Main, Source::Tap),
            (rec(9, 1), None, Role::Side, Source::Tap),
        ];
        let transcript = vec![
            (rec(100, 10), Source::Transcript, Role::Main),
            (rec(50, 5), Source::Transcript, Role::Subagent),
        ];
        let (merged, _) = merge(tap, transcript, &[]);
        let roles: Vec<(u64, Source, Role)> =
            merged.iter().map(|(r, s, role)| (r.input, *s, *role)).collect();
        assert_eq!(
            roles,
            vec![
                (100, Source::Tap, Role::Main),
                (50, Source::Tap, Role::Subagent),
                (9, Source::Tap, Role::Side)
            ]
        );
    }

    #[test]
    fn calls_only_the_tap_saw_are_side_calls_when_another_source_covered_the_turn() {
        // Claude Code's prompt suggestion declares the main loop's tools: the tap alone would
        // call it main; the transcript, which records every main call, does not have it.
        let tap = vec![
            (rec(100, 10), None, Role::Main, Source::Tap),
            (rec(120, 4), None, Role::Main, Source::Tap),
        ];
        let transcript = vec![(rec(100, 10), Source::Transcript, Role::Main)];
        let (merged, _) = merge(tap, transcript, &[]);
        assert_eq!(merged[1].2, Role::Side);
        // Without another source the tap's own attribution stands.
        let (merged, _) =
            merge(vec![(rec(120, 4), None, Role::Main, Source::Tap)], Vec::new(), &[]);
        assert_eq!(merged[0].2, Role::Main);
    }

    #[test]
    fn a_modifier_either_source_stated_stays_on_the_merged_call() {
        let tap = vec![(rec(100, 10), Some("msg_a".to_owned()), Role::Main, Source::Tap)];
        let mut fast = rec(100, 10);
        fast.modifiers.fast = true;
        let (merged, _) =
            merge(tap, vec![(fast, Source::Transcript, Role::Main)], &[Some("msg_a".into())]);
        assert_eq!((merged[0].1, merged[0].0.modifiers.fast), (Source::Tap, true));
    }

    #[test]
    fn the_message_id_decides_before_the_counts() {
        // Two calls with equal counts: the ids say which is which.
        let tap = vec![
            (rec(100, 10), Some("msg_a".to_owned()), Role::Main, Source::Tap),
            (rec(100, 10), Some("msg_b".to_owned()), Role::Main, Source::Tap),
        ];
        let transcript = vec![(rec(100, 10), Source::Transcript, Role::Subagent)];
        let (merged, keys) = merge(tap, transcript, &[Some("msg_b".to_owned())]);
        assert_eq!((merged[0].2, merged[1].2), (Role::Side, Role::Subagent));
        assert_eq!(keys, vec![Some("msg_a".to_owned()), Some("msg_b".to_owned())]);
    }

    #[test]
    fn calls_the_tap_missed_are_kept_with_their_source() {
        let (merged, keys) = merge(
            vec![(rec(100, 10), None, Role::Main, Source::Tap)],
            vec![
                (rec(100, 10), Source::Transcript, Role::Main),
                (rec(7, 7), Source::Transcript, Role::Subagent),
            ],
            &[Some("t1".to_owned()), Some("t2".to_owned())],
        );
        assert_eq!(merged.len(), 2);
        // A tap call without an id takes the transcript's key of the call it matched.
        assert_eq!(keys, vec![Some("t1".to_owned()), Some("t2".to_owned())]);
        assert_eq!((merged[1].0.input, merged[1].1), (7, Source::Transcript));
    }
}
