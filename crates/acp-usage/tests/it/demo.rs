//! `acp-usage demo` end to end: the built binary runs the scripted client against the real relay
//! wrapping the scripted agent, and prints what acp-usage added.

use std::process::{Command, Output};

use acp_usage::commands::demo::agent::{self, SECOND_MODEL, TURNS};
use acp_usage::numbers::thousands;
use acp_usage_core::Catalog;
use serde_json::Value;

fn demo(args: &[&str]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .arg("demo")
        .args(args)
        // The user's own config must not change the numbers.
        .env("ACP_USAGE_CONFIG", "/dev/null")
        .output()
        .expect("running acp-usage demo");
    let stdout = String::from_utf8(out.stdout.clone()).expect("utf-8 output");
    assert!(
        out.status.success(),
        "acp-usage demo failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (out, stdout)
}

/// The amount after `cost $` in a human line.
fn cost_of(line: &str) -> Option<f64> {
    let rest = &line[line.find("cost $")? + "cost $".len()..];
    rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next()?.parse().ok()
}

#[test]
fn demo_shows_what_acp_usage_adds() {
    let (_, out) = demo(&[]);
    let lines: Vec<&str> = out.lines().collect();
    let find = |from: usize, needle: &str| {
        lines[from..].iter().position(|l| l.contains(needle)).map(|i| i + from)
    };

    // An update right after session/new, and acp-usage's own command list, marked as its own.
    let new = find(0, "session/new result").expect("session/new answered");
    assert!(lines[new + 1].contains("INJECTED   usage_update (after session/new)"), "{out}");
    assert!(
        lines[new + 2].contains("INJECTED   available_commands_update /usage (acp-usage's own"),
        "{out}"
    );
    // The agent's list, after the reload, with /usage added: rewritten, not passed through.
    let list = find(new + 3, "available_commands_update").expect("the agent's list");
    assert!(lines[list].contains("REWRITTEN  available_commands_update /init /usage"), "{out}");
    // No line passes unmarked that acp-usage wrote or changed: every unmarked agent line is the
    // agent's own kind of message.
    for l in lines.iter().filter(|l| l.starts_with("agent → editor  ") && l.len() > 27) {
        let unmarked = l["agent → editor  ".len()..].starts_with("          ");
        assert!(
            !(unmarked && (l.contains("usage_update") || l.contains("available_commands"))),
            "an unmarked line of acp-usage's: {l}"
        );
    }

    // /usage: acp-usage's answer, every line of it marked, with the figures and the windows.
    let asked = find(0, "session/prompt \"/usage\"").expect("/usage asked");
    assert!(
        lines[asked + 1].contains("INJECTED   usage_update (before the /usage answer)"),
        "{out}"
    );
    assert!(lines[asked + 2].contains("INJECTED   agent_message_chunk, the answer:"), "{out}");
    let answer = find(asked, "INJECTED   session/prompt result: end_turn; usage").expect("result");
    let text = lines[asked + 3..answer].join("\n");
    assert!(text.contains("Context") && text.contains("Cost"), "{text}");
    assert!(text.contains("Claude 5-hour  42% used"), "{text}");
    // Zed's meter: from the turn whose agent reported its plan's windows on.
    let meter = format!(
        "Zed's meter 5h {:.0}% · 7d {:.0}%",
        agent::RATE_LIMIT[0].1 * 100.0,
        agent::RATE_LIMIT[1].1 * 100.0
    );
    let first = find(0, &meter).expect("the meter shows");
    assert!(lines[first].contains("REWRITTEN  usage_update (the agent's own)"), "{out}");
    let later: Vec<&&str> =
        lines[first + 1..].iter().filter(|l| l.contains(" usage_update (")).collect();
    assert!(later.len() >= 4 && later.iter().all(|l| l.contains(&meter)), "{out}");

    // One per turn, just before the rewritten prompt result, with the cost growing.
    let turn_updates: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("INJECTED   usage_update (end of turn)"))
        .collect();
    assert_eq!(turn_updates.len(), TURNS.len(), "{out}");
    let mut last = 0.0;
    for &i in &turn_updates {
        assert!(lines[i + 1].contains("REWRITTEN  session/prompt result: end_turn"), "{out}");
        let cost = cost_of(lines[i]).unwrap_or_else(|| panic!("no cost in {}", lines[i]));
        assert!(cost > last, "cost does not grow: {cost} after {last}\n{out}");
        last = cost;
    }

    // One after the model change, with the new model's window from the catalog.
    let change = find(0, "set_config_option result").expect("model switched");
    assert!(lines[change + 1].contains("INJECTED   usage_update (model change)"), "{out}");
    let window =
        Catalog::embedded().lookup(SECOND_MODEL).and_then(|m| m.max_input).expect("catalog window");
    assert!(
        lines[change + 1].contains(&format!("/{} (", thousands(window))),
        "{}",
        lines[change + 1]
    );

    // One after the reload, following the replayed history and the agent's command list.
    let load = find(0, "session/load result").expect("session reloaded");
    assert!(lines[load + 1].contains("INJECTED   usage_update (after session/load)"), "{out}");
    assert!(lines[load - 1].contains("available_commands_update"), "{out}");
    assert!(
        lines[load - 2].contains("agent_message_chunk"),
        "no replay before the load result\n{out}"
    );

    // The tool turn's usage is the sum of what the agent reported, normalised: input includes
    // the cache, the total is unchanged.
    let r = agent::reported_usage(1);
    let expected = format!(
        "usage input {} (cached read {}, cached write {}), output {}, total {}",
        thousands(r.input_with_cache()),
        thousands(r.cached_read),
        thousands(r.cached_write),
        thousands(r.output),
        thousands(r.total),
    );
    let tool_result = lines[turn_updates[1] + 1];
    assert!(tool_result.contains(&expected), "expected {expected:?} in {tool_result:?}");
    assert!(tool_result.contains("(source agent, exact)"), "{tool_result}");

    // The summary adds the turns up.
    let total: u64 = (0..TURNS.len()).map(|n| agent::reported_usage(n).total).sum();
    assert!(out.contains(&format!("{} turns, {} tokens", TURNS.len(), thousands(total))), "{out}");
    assert!(out.contains("acp-usage -- claude-agent-acp"), "{out}");
}

#[test]
fn raw_lines_are_json_and_carry_the_numbers() {
    let (_, out) = demo(&["--raw"]);
    let human = out
        .lines()
        .filter(|l| l.starts_with("editor → agent") || l.starts_with("agent → editor"))
        .count();
    let raw: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with("    {"))
        .map(|l| serde_json::from_str(l.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(raw.len(), human, "every message has its raw line\n{out}");
    // No other indented line looks like JSON but is not.
    for l in out.lines().filter(|l| l.trim_start().starts_with('{')) {
        assert!(serde_json::from_str::<Value>(l.trim()).is_ok(), "not JSON: {l}");
    }

    // The updates acp-usage sent, in order, and what triggered them.
    let updates: Vec<&Value> = raw
        .iter()
        .filter_map(|m| m.pointer("/params/update"))
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    let triggers: Vec<&str> = updates
        .iter()
        .map(|u| u.pointer("/_meta/acpUsage/trigger").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(
        triggers,
        [
            "session/new",
            "turn",
            "turn",
            "model_change",
            "agent",
            "turn",
            "session/load",
            "turn",
            "command"
        ],
        "{out}"
    );
    let costs: Vec<f64> = updates
        .iter()
        .zip(&triggers)
        .filter(|(_, t)| **t == "turn")
        .map(|(u, _)| {
            u.pointer("/cost/amount").and_then(Value::as_f64).expect("turn updates are priced")
        })
        .collect();
    assert!(costs.windows(2).all(|w| w[1] > w[0]), "cost must grow: {costs:?}");

    // Each prompt result carries the normalised sum of the agent's report, and the report itself.
    let mut results: Vec<&Value> = raw.iter().filter_map(|m| m.pointer("/result/usage")).collect();
    // The last is acp-usage's answer to /usage: no tokens.
    let own = results.pop().expect("the /usage result");
    assert_eq!(own["totalTokens"], 0, "{own}");
    assert_eq!(results.len(), TURNS.len());
    for (n, usage) in results.iter().enumerate() {
        let r = agent::reported_usage(n);
        assert_eq!(usage["inputTokens"], r.input_with_cache(), "turn {n}: {usage}");
        assert_eq!(usage["cachedReadTokens"], r.cached_read, "turn {n}: {usage}");
        assert_eq!(usage["cachedWriteTokens"], r.cached_write, "turn {n}: {usage}");
        assert_eq!(usage["outputTokens"], r.output, "turn {n}: {usage}");
        assert_eq!(usage["totalTokens"], r.total, "turn {n}: {usage}");
        let original = &usage["_meta"]["acpUsage"]["agent"];
        assert_eq!(original["inputTokens"], r.input, "turn {n}: {usage}");
        assert_eq!(original["totalTokens"], r.total, "turn {n}: {usage}");
    }
    // The tool turn really had two model calls behind it.
    assert_eq!(TURNS[1].calls.len(), 2);
}

#[test]
fn a_failing_relay_is_reported_with_its_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(["demo", "--catalog", "/nonexistent/acp-usage-demo-catalog.json"])
        .env("ACP_USAGE_CONFIG", "/dev/null")
        .output()
        .expect("running acp-usage demo");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("The relay's stderr"), "{stderr}");
    assert!(stderr.contains("acp-usage-demo-catalog.json"), "{stderr}");
}
