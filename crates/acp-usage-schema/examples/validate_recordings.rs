//! Validates JSONL recordings (`{"dir":"out"|"in","msg":…}` per line, `out` = client to agent)
//! and prints every message that is not plainly valid, then the speed.
//!
//! `cargo run --release -p acp-usage-schema --example validate_recordings -- FILE...`

use std::time::Instant;

use acp_usage_schema::validate::{Direction, MessageValidator, Verdict};

fn main() {
    let mut lines = Vec::new();
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut conversation = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let dir = match v["dir"].as_str() {
                Some("out") => Direction::ClientToAgent,
                _ => Direction::AgentToClient,
            };
            conversation.push((n + 1, dir, serde_json::to_vec(&v["msg"]).unwrap()));
        }
        lines.push((path, conversation));
    }
    let mut count = 0;
    // The first pass also compiles every definition the messages need.
    let first = Instant::now();
    for (path, conversation) in &lines {
        let mut validator = MessageValidator::new();
        for (n, dir, bytes) in conversation {
            let checked = validator.check(*dir, bytes);
            count += 1;
            if checked.verdict != Verdict::Valid {
                eprintln!("{path}:{n} {dir:?} {:?} {:?}", checked.method, checked.verdict);
            }
        }
    }
    eprintln!("first pass, compiling the definitions it needs: {:.2?}", first.elapsed());
    // Speed: the same messages again, many times, after the definitions are compiled.
    let rounds = 200;
    let start = Instant::now();
    for _ in 0..rounds {
        for (_, conversation) in &lines {
            let mut validator = MessageValidator::new();
            for (_, dir, bytes) in conversation {
                std::hint::black_box(validator.check(*dir, bytes));
            }
        }
    }
    let elapsed = start.elapsed();
    let total = count * rounds;
    let bytes: usize = lines.iter().flat_map(|(_, c)| c.iter().map(|(_, _, b)| b.len())).sum();
    eprintln!(
        "{total} messages in {elapsed:.2?}: {:.0} messages/s, {:.1} MB/s",
        total as f64 / elapsed.as_secs_f64(),
        (bytes * rounds) as f64 / elapsed.as_secs_f64() / 1e6
    );
}
