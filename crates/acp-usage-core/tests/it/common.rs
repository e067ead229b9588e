//! Helpers shared by the transcript parser tests: fixtures, feeding lines, the surviving calls.

use std::collections::BTreeMap;

use acp_usage_core::transcript::{Call, Event, FileRole, Parser};

/// A fixture under `tests/fixtures/transcripts/<format>/`.
pub fn fixture(format: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/transcripts/{format}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// Feeds `lines` to `parser` as lines of a file with `role`; every line must parse.
pub fn feed<'a>(
    parser: &mut dyn Parser,
    role: FileRole,
    lines: impl IntoIterator<Item = &'a str>,
) -> Vec<Event> {
    let mut out = Vec::new();
    for line in lines {
        parser.line(role, line.as_bytes(), &mut out).expect("a valid transcript line");
    }
    out
}

/// The calls that survive, by key, in first-seen order (a later event replaces an earlier one).
pub fn calls(events: &[Event]) -> Vec<Call> {
    let mut order = Vec::new();
    let mut by_key = BTreeMap::new();
    for event in events {
        if let Event::Call(call) = event
            && by_key.insert(call.key.clone(), call.clone()).is_none()
        {
            order.push(call.key.clone());
        }
    }
    order.into_iter().map(|key| by_key[&key].clone()).collect()
}
