//! Following a session through its transcript: which calls belong to which turn, and when a
//! held result may go on.
//!
//! The worker (`crate::sources::transcripts`) reads the files; this module decides what the calls mean.
//! A call belongs to the session whose transcript it is in, and to the turn during which it was
//! written: calls read before the session's history is settled (`session/load`, `resume`,
//! `fork`) are history; calls written while a turn is open are the turn's (by their timestamps,
//! with some slack for a clock that ticks in whole seconds); anything else happened between
//! turns (a title generated after the result) and counts in the session's cost at once. A turn
//! whose transcript was late (the wait ran out) was accounted from the ACP numbers: its calls,
//! when they show up, are not counted again.

use std::collections::HashMap;

use acp_usage_core::TokenRecord;
use acp_usage_core::transcript::{Call, Event};

/// How far before the prompt a call's timestamp may be and still be the turn's (the agent's
/// clock is this machine's; this only absorbs rounding). Small, because a fork's transcript
/// carries its parent's calls and turn ends with their old timestamps.
const SLACK_MS: i64 = 250;

/// Least time between two reads of a session's transcript that its traffic asks for.
const POLL_EVERY_MS: i64 = 50;

/// What kind of answer is waiting for the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting {
    /// A `session/prompt` result: wait for the turn's end in the transcript.
    TurnEnd,
    /// A `session/load`/`resume`/`fork` response: wait for the history to be read.
    History,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bucket {
    History,
    Turn(u64),
    Outside,
}

/// One session's transcript state.
#[derive(Debug)]
pub struct Follow {
    calls: HashMap<String, (Call, Bucket)>,
    /// Keys in the order they were first seen.
    order: Vec<String>,
    /// The history is still being read (until the load/resume/fork response, or the first turn).
    history_open: bool,
    turn: Option<OpenTurn>,
    turns: u64,
    /// Calls written up to this time were already accounted from the ACP numbers.
    fallback_until_ms: Option<i64>,
    /// The main transcript has been found.
    pub found: bool,
    /// The transcript cannot be used.
    pub failed: bool,
    /// Results released because the wait ran out, in a row.
    pub timeouts_in_a_row: u32,
    awaiting: Option<Awaiting>,
    /// A read reached the end of the files (the history is all in).
    read_to_end: bool,
    /// A read reached the end of the files since the current wait began.
    read_to_end_since_wait: bool,
    /// Whether the format marks the end of a turn (Gemini CLI's chat records do not: a reply's
    /// text is recorded before the tool call that follows it, so no record says "done").
    marks_turn_end: bool,
    /// When traffic last asked for a read, in Unix ms.
    last_poll_ms: i64,
    /// When acp-usage started following the session, in Unix ms.
    created_ms: i64,
}

#[derive(Debug)]
struct OpenTurn {
    number: u64,
    start_ms: i64,
    end_seen: bool,
    /// Prompt tokens the agent says its main agent sent in the turn (gemini-cli's quota).
    reported_input: Option<u64>,
}

/// A call that happened between turns, to count in the session at once.
#[derive(Debug)]
pub struct Outside {
    /// The call.
    pub record: TokenRecord,
    /// Whether the main agent made it.
    pub main: bool,
}

impl Follow {
    /// A session followed from its creation (`history` false) or reopened with a history to read.
    pub fn new(history: bool, marks_turn_end: bool, now_ms: i64) -> Follow {
        Follow {
            calls: HashMap::new(),
            order: Vec::new(),
            history_open: history,
            turn: None,
            turns: 0,
            fallback_until_ms: None,
            found: false,
            failed: false,
            timeouts_in_a_row: 0,
            awaiting: None,
            read_to_end: false,
            read_to_end_since_wait: false,
            marks_turn_end,
            last_poll_ms: 0,
            created_ms: now_ms,
        }
    }

    /// Calls this session's transcript will repeat from another's (a fork's copy of its parent's
    /// history): they are history, never new usage.
    pub fn inherit(&mut self, calls: Vec<Call>) {
        for call in calls {
            if !self.calls.contains_key(&call.key) {
                self.order.push(call.key.clone());
                self.calls.insert(call.key.clone(), (call, Bucket::Outside));
            }
        }
    }

    /// Every call read so far, in the order first seen.
    pub fn calls(&self) -> Vec<Call> {
        self.order.iter().filter_map(|k| self.calls.get(k)).map(|(c, _)| c.clone()).collect()
    }

    /// The session's traffic says its transcript is growing: whether to ask for a read now (at
    /// most one per [`POLL_EVERY_MS`]).
    pub fn poll_due(&mut self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if self.failed || now - self.last_poll_ms < POLL_EVERY_MS {
            return false;
        }
        self.last_poll_ms = now;
        true
    }

    /// A turn starts at `now_ms`.
    pub fn begin_turn(&mut self, now_ms: i64) {
        self.history_open = false;
        self.turns += 1;
        self.turn = Some(OpenTurn {
            number: self.turns,
            start_ms: now_ms,
            end_seen: false,
            reported_input: None,
        });
    }

    /// Reads events; returns the calls that happened between turns, to count now.
    /// `settled`: the read began after the wait did, looked for new files and reached the end.
    pub fn events(
        &mut self,
        events: Vec<Event>,
        found: bool,
        at_end: bool,
        settled: bool,
    ) -> Vec<Outside> {
        self.found |= found;
        self.read_to_end |= at_end;
        self.read_to_end_since_wait |= settled && self.awaiting.is_some();
        let mut outside = Vec::new();
        for event in events {
            match event {
                Event::Call(call) => {
                    if let Some(o) = self.call(call) {
                        outside.push(o);
                    }
                }
                Event::TurnEnd { at_ms } => {
                    if let Some(t) = &mut self.turn
                        && at_ms.is_none_or(|at| at >= t.start_ms - SLACK_MS)
                    {
                        t.end_seen = true;
                    }
                }
                Event::Prompt { .. } | Event::Window(_) | Event::Limits(_) => {}
            }
        }
        outside
    }

    fn call(&mut self, call: Call) -> Option<Outside> {
        if let Some((known, bucket)) = self.calls.get_mut(&call.key) {
            // A revised record (a split line with more output, a re-appended message): it
            // replaces the earlier one where that is still open.
            let open = match *bucket {
                Bucket::History => self.history_open,
                Bucket::Turn(n) => self.turn.as_ref().is_some_and(|t| t.number == n),
                Bucket::Outside => false,
            };
            if open {
                *known = call;
            } else if known.record != call.record {
                tracing::debug!(
                    key = call.key,
                    "a call revised after it was accounted; kept as first read"
                );
            }
            return None;
        }
        let bucket = if self.history_open {
            Bucket::History
        } else if let Some(t) =
            self.turn.as_ref().filter(|t| call.at_ms.is_none_or(|at| at >= t.start_ms - SLACK_MS))
        {
            Bucket::Turn(t.number)
        } else {
            Bucket::Outside
        };
        self.order.push(call.key.clone());
        // Calls written before the session was followed are history, whenever they show up:
        // a fork's file appears at its first prompt with the parent's calls copied into it.
        let copied = bucket == Bucket::Outside
            && call.at_ms.is_some_and(|at| at < self.created_ms - SLACK_MS);
        let late = bucket == Bucket::Outside
            && (copied
                || self.fallback_until_ms.is_some_and(|f| call.at_ms.is_none_or(|at| at <= f)));
        let outside = (bucket == Bucket::Outside && !late)
            .then(|| Outside { record: call.record.clone(), main: call.main });
        if copied {
            tracing::debug!(
                key = call.key,
                "a call from before the session was followed (copied history); not counted"
            );
        } else if late {
            tracing::debug!(
                key = call.key,
                "a late call of a turn accounted from the ACP numbers; not counted again"
            );
        }
        self.calls.insert(call.key.clone(), (call, bucket));
        outside
    }

    /// A result is being held for the transcript.
    pub fn await_(&mut self, what: Awaiting) {
        self.awaiting = Some(what);
        self.read_to_end_since_wait = false;
    }

    /// The agent's result says how many prompt tokens its main agent sent in the turn: the
    /// transcript is complete only once its main calls add up to that.
    pub fn reported_input(&mut self, tokens: u64) {
        if let Some(t) = &mut self.turn {
            t.reported_input = Some(tokens);
        }
    }

    /// Whether the turn's main calls add up to what the agent reported (true when it did not).
    fn adds_up(&self, t: &OpenTurn) -> bool {
        let Some(want) = t.reported_input else { return true };
        let got: u64 = self
            .calls
            .values()
            .filter(|(c, b)| *b == Bucket::Turn(t.number) && c.main)
            .map(|(c, _)| c.record.input)
            .sum();
        got >= want
    }

    /// What a held result waits for, if any.
    pub fn awaiting(&self) -> Option<Awaiting> {
        self.awaiting
    }

    /// Whether a result of this kind can go on now.
    pub fn ready(&self, what: Awaiting) -> bool {
        if self.failed {
            return true;
        }
        match what {
            // Without a mark, a read to the end after the result came is the best sign: the
            // agent writes its records before it answers.
            Awaiting::TurnEnd if !self.marks_turn_end => {
                self.read_to_end_since_wait && self.turn.as_ref().is_some_and(|t| self.adds_up(t))
            }
            // The end mark alone is not enough: a subagent's file found by a search after the
            // result came may hold calls of the turn.
            Awaiting::TurnEnd => {
                self.read_to_end_since_wait && self.turn.as_ref().is_some_and(|t| t.end_seen)
            }
            Awaiting::History => self.read_to_end,
        }
    }

    /// The held result goes on; `timed_out` when the wait ran out first.
    pub fn released(&mut self, timed_out: bool, now_ms: i64) {
        let what = self.awaiting.take();
        if timed_out {
            self.timeouts_in_a_row += 1;
            if what == Some(Awaiting::TurnEnd) {
                self.fallback_until_ms = Some(now_ms);
            }
        } else {
            self.timeouts_in_a_row = 0;
        }
    }

    /// The turn's calls in order (main-agent flag with each), when the transcript has its end;
    /// `None` when the turn must be accounted from the ACP numbers. Closes the turn.
    pub fn end_turn(&mut self, now_ms: i64) -> Option<Vec<(TokenRecord, bool)>> {
        let calls = self.end_turn_keyed(now_ms)?;
        Some(calls.into_iter().map(|(rec, main, _)| (rec, main)).collect())
    }

    /// [`Follow::end_turn`] with each call's key (a provider's message id, where the format
    /// keeps it), so that a call the tap also saw counts once.
    pub fn end_turn_keyed(&mut self, now_ms: i64) -> Option<Vec<(TokenRecord, bool, String)>> {
        let turn = self.turn.take()?;
        let complete = if self.marks_turn_end {
            turn.end_seen
        } else {
            self.read_to_end && self.adds_up(&turn)
        };
        if self.failed || !complete {
            self.fallback_until_ms = Some(now_ms);
            return None;
        }
        let calls = self.calls_of_turn(turn.number);
        (!calls.is_empty()).then_some(calls)
    }

    /// The open turn's calls read so far, in order, with each one's main-agent flag and key;
    /// the turn stays open.
    pub fn turn_calls(&self) -> Vec<(TokenRecord, bool, String)> {
        self.turn.as_ref().map_or_else(Vec::new, |t| self.calls_of_turn(t.number))
    }

    fn calls_of_turn(&self, number: u64) -> Vec<(TokenRecord, bool, String)> {
        self.order
            .iter()
            .filter_map(|k| self.calls.get(k).map(|c| (k, c)))
            .filter(|(_, (_, b))| *b == Bucket::Turn(number))
            .map(|(k, (c, _))| (c.record.clone(), c.main, k.clone()))
            .collect()
    }

    /// The history's calls, when the transcript was found; closes the history.
    pub fn take_history(&mut self) -> Option<Vec<(TokenRecord, bool)>> {
        let was_open = std::mem::replace(&mut self.history_open, false);
        if !was_open || !self.found || self.failed {
            return None;
        }
        Some(self.in_bucket(Bucket::History))
    }

    fn in_bucket(&self, bucket: Bucket) -> Vec<(TokenRecord, bool)> {
        self.order
            .iter()
            .filter_map(|k| self.calls.get(k))
            .filter(|(_, b)| *b == bucket)
            .map(|(c, _)| (c.record.clone(), c.main))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(key: &str, at: i64, input: u64, main: bool) -> Event {
        Event::Call(Call {
            key: key.into(),
            record: TokenRecord { input, output: 10, ..TokenRecord::default() },
            at_ms: Some(at),
            main,
        })
    }

    #[test]
    fn history_then_turns_then_between_turns() {
        let mut f = Follow::new(true, true, 0);
        f.await_(Awaiting::History);
        assert!(!f.ready(Awaiting::History));
        f.events(vec![call("a", 1_000, 100, true), call("b", 2_000, 200, false)], true, true, true);
        assert!(f.ready(Awaiting::History));
        f.released(false, 3_000);
        let h = f.take_history().unwrap();
        assert_eq!(
            h.iter().map(|(r, m)| (r.input, *m)).collect::<Vec<_>>(),
            vec![(100, true), (200, false)]
        );

        f.begin_turn(10_000);
        f.await_(Awaiting::TurnEnd);
        let out = f.events(vec![call("c", 10_100, 300, true)], true, true, true);
        assert!(out.is_empty());
        // Split line: the same key again with more output replaces it.
        f.events(
            vec![Event::Call(Call {
                key: "c".into(),
                record: TokenRecord { input: 300, output: 50, ..TokenRecord::default() },
                at_ms: Some(10_100),
                main: true,
            })],
            true,
            true,
            true,
        );
        assert!(!f.ready(Awaiting::TurnEnd));
        f.events(vec![Event::TurnEnd { at_ms: Some(10_200) }], true, true, true);
        assert!(f.ready(Awaiting::TurnEnd));
        f.released(false, 10_300);
        let t = f.end_turn(10_300).unwrap();
        assert_eq!(t.iter().map(|(r, _)| (r.input, r.output)).collect::<Vec<_>>(), vec![(300, 50)]);

        // A title call after the result counts at once.
        let out = f.events(vec![call("d", 10_400, 40, false)], true, true, true);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].record.input, 40);
    }

    #[test]
    fn a_turn_without_its_end_falls_back_and_its_late_calls_are_not_counted_twice() {
        let mut f = Follow::new(false, true, 0);
        f.begin_turn(10_000);
        f.await_(Awaiting::TurnEnd);
        f.released(true, 10_500);
        assert_eq!(f.end_turn(10_500), None);
        // The turn's calls arrive late: already accounted from the ACP numbers.
        assert!(f.events(vec![call("x", 10_200, 1, true)], true, true, true).is_empty());
        // A call written after the fallback is new.
        assert_eq!(f.events(vec![call("y", 11_000, 1, false)], true, true, true).len(), 1);
    }

    #[test]
    fn without_turn_end_marks_a_read_to_the_end_after_the_result_will_do() {
        let mut f = Follow::new(false, false, 0);
        f.begin_turn(10_000);
        f.events(vec![call("a", 10_100, 5, true)], true, true, true);
        f.await_(Awaiting::TurnEnd);
        assert!(!f.ready(Awaiting::TurnEnd), "the read before the result does not count");
        f.events(vec![], true, false, false);
        assert!(!f.ready(Awaiting::TurnEnd), "a read that stopped short does not count");
        f.events(vec![], true, true, true);
        assert!(f.ready(Awaiting::TurnEnd));
        f.released(false, 10_200);
        assert_eq!(f.end_turn(10_200).map(|c| c.len()), Some(1));
    }

    #[test]
    fn calls_from_before_the_session_was_followed_are_not_new_usage() {
        // A fork: followed from 50 s; its file shows up later with the parent's calls in it.
        let mut f = Follow::new(true, true, 50_000);
        f.events(vec![], false, true, true);
        assert_eq!(f.take_history(), None, "no file yet: the fork keeps its parent's accounting");
        f.begin_turn(60_000);
        let out = f.events(
            vec![call("parent", 10_000, 100, true), call("new", 60_100, 5, true)],
            true,
            true,
            true,
        );
        assert!(out.is_empty(), "the copied call is not counted again");
        f.events(vec![Event::TurnEnd { at_ms: Some(60_200) }], true, true, true);
        let t = f.end_turn(60_300).unwrap();
        assert_eq!(t.iter().map(|(r, _)| r.input).collect::<Vec<_>>(), vec![5]);
    }

    #[test]
    fn an_end_mark_read_before_the_result_still_needs_a_search_after_it() {
        let mut f = Follow::new(false, true, 0);
        f.begin_turn(10_000);
        f.events(
            vec![call("m", 10_100, 5, true), Event::TurnEnd { at_ms: Some(10_200) }],
            true,
            true,
            false,
        );
        f.await_(Awaiting::TurnEnd);
        assert!(!f.ready(Awaiting::TurnEnd), "a subagent's file may not have been found yet");
        f.events(vec![call("sub", 10_150, 7, false)], true, true, true);
        assert!(f.ready(Awaiting::TurnEnd));
        f.released(false, 10_300);
        assert_eq!(f.end_turn(10_300).map(|c| c.len()), Some(2));
    }

    #[test]
    fn a_turn_end_from_before_the_prompt_does_not_count() {
        let mut f = Follow::new(false, true, 0);
        f.begin_turn(100_000);
        f.events(vec![Event::TurnEnd { at_ms: Some(50_000) }], true, true, true);
        assert!(!f.ready(Awaiting::TurnEnd));
        f.failed = true;
        assert!(f.ready(Awaiting::TurnEnd));
    }
}
