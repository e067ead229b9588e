//! acp-usage's own `/usage` command with claude-agent-acp against the Anthropic mock, through
//! the relay (tap on, as by default) writing a scratch ledger.
//!
//! Guarantees checked:
//! - after two turns, `/usage` is answered by acp-usage: a `usage_update`, the text, and
//!   `{"stopReason":"end_turn","usage":{all zero}}`; the mock served no call for it and Claude
//!   Code's transcript holds no `/usage` (how fast it answers is a figure of the benchmark,
//!   `acp-usage-bench --scenario usage-cmd`, in docs/performance.md);
//! - the text's figures equal the `usage_update` the editor got last (context, cost, tokens),
//!   and its day's and month's spending equal `report daily|monthly --json` and `status` on its
//!   ledger;
//! - the next turn is the agent's as usual: the mock's next scripted reply, counted;
//! - every `available_commands_update` the editor got lists `usage` once, and every command
//!   the agent listed (the agent's list is read through a relay with `[commands] usage = ""`,
//!   which also shows that the empty name turns the command off).

use std::path::Path;
use std::time::{Duration, Instant};

use acp_usage::numbers::thousands;
use acp_usage_tests::agents::Agent;
use acp_usage_tests::client::{AcpClient, Dir};
use acp_usage_tests::lab::{Lab, run_turn};
use acp_usage_tests::mock_llm::MockLlm;
use serde_json::{Value, json};

use crate::flows;
use crate::support::{self, Checks};

const AGENT: Agent = Agent::Claude;

/// The dollars as `/usage` writes them: four decimals under a dollar.
fn money(v: f64) -> String {
    if v.abs() < 1.0 { format!("${v:.4}") } else { format!("${v:.2}") }
}

/// The rows of the text's code block, label and value.
fn rows(text: &str) -> Vec<(String, String)> {
    let Some((_, block)) = text.split_once("```text\n") else { return Vec::new() };
    let block = block.split("```").next().unwrap_or_default();
    block
        .lines()
        .filter_map(|line| {
            let (label, value) = line.split_once("  ")?;
            Some((label.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

fn row<'a>(rows: &'a [(String, String)], label: &str) -> &'a str {
    rows.iter().find(|(l, _)| l == label).map_or("(absent)", |(_, v)| v.as_str())
}

/// Waits until the mock has served nothing for `quiet` (the side calls Claude Code makes after
/// a result, a prompt suggestion, are over).
fn settle(mock: &MockLlm, quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = mock.mark();
    let mut since = Instant::now();
    while Instant::now() < deadline && since.elapsed() < quiet {
        std::thread::sleep(Duration::from_millis(100));
        if mock.mark() != seen {
            seen = mock.mark();
            since = Instant::now();
        }
    }
}

/// The names in every `available_commands_update` the client got for `session`.
fn command_lists(client: &AcpClient, session: &str) -> Vec<Vec<String>> {
    client
        .all_lines()
        .iter()
        .filter(|l| l.dir == Dir::In)
        .filter_map(|l| l.json.clone())
        .filter(|v| v["params"]["sessionId"] == session)
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .map(|v| {
            let list = v["params"]["update"]["availableCommands"].as_array().cloned();
            list.unwrap_or_default()
                .iter()
                .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .collect()
}

/// Every `usage_update` the client got for `session`, in order.
fn usage_updates(client: &AcpClient, session: &str) -> Vec<Value> {
    let lines = client.all_lines();
    let updates = lines.iter().filter(|l| l.dir == Dir::In).filter_map(|l| {
        let u = l.session_update()?;
        let mine = l.json.as_ref()?["params"]["sessionId"] == session;
        (mine && u["sessionUpdate"] == "usage_update").then(|| u.clone())
    });
    updates.collect()
}

/// The last `usage_update` the client got for `session`.
fn last_update(client: &AcpClient, session: &str) -> Value {
    usage_updates(client, session).pop().unwrap_or_default()
}

/// What an update says caused it (`turn`, `between_turns`, `command`, ...).
fn trigger(update: &Value) -> &str {
    update["_meta"]["acpUsage"]["trigger"].as_str().unwrap_or_default()
}

/// The cost of the last row (this day, this month: the ledger is this test's) of a report.
fn report_cost(ledger: &Path, group: &str) -> f64 {
    let text = support::on_ledger(ledger, &["report", group, "--json", "--no-import"]);
    let v: Value = serde_json::from_str(&text).expect("report prints JSON");
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    rows.last().and_then(|r| r["cost"].as_f64()).unwrap_or(-1.0)
}

/// Every file under `dir` (Claude Code's transcripts under its config directory).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn claude_usage_command() {
    let mut lab = Lab::new(AGENT, support::script(AGENT)).expect("lab");
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    let mut checks = Checks::new(AGENT);
    let client = lab.relayed().expect("relay");
    client.initialize().expect("initialize");
    let id = flows::session_id(&client.new_session(&lab.scratch.work()).expect("new")).unwrap();
    run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn 1");
    run_turn(&client, &lab.mock, &id, flows::TOOL_PROMPT).expect("turn 2");
    settle(&lab.mock, Duration::from_secs(2));

    let (served, mark) = (lab.mock.mark(), client.mark());
    let result = client.prompt(&id, "/usage").expect("/usage");
    let zero = json!({"totalTokens": 0, "inputTokens": 0, "outputTokens": 0, "thoughtTokens": 0,
                      "cachedReadTokens": 0, "cachedWriteTokens": 0});
    checks.check(result == json!({"stopReason": "end_turn", "usage": zero}), || {
        format!("/usage's result: {result}")
    });
    // Calls that ended after the second result (Claude Code's prompt suggestion) are counted
    // in an update of the relay's own between turns, which may come as late as right before
    // the answer; the answer repeats whatever the editor got last before it.
    let updates: Vec<Value> = client
        .notifications_since(mark)
        .into_iter()
        .map(|p| p["update"].clone())
        .skip_while(|u| u["sessionUpdate"] == "usage_update" && trigger(u) == "between_turns")
        .collect();
    let kinds: Vec<&str> =
        updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap_or("")).collect();
    checks.check(kinds == ["usage_update", "agent_message_chunk"], || {
        format!("/usage sent {kinds:?}")
    });
    let all = usage_updates(&client, &id);
    let at = all.iter().rposition(|u| trigger(u) == "command");
    checks
        .check(at.is_some_and(|at| at > 0), || format!("no /usage update after another: {all:?}"));
    let update = at.map(|at| all[at].clone()).unwrap_or_default();
    let before = at.and_then(|at| at.checked_sub(1)).map(|i| all[i].clone()).unwrap_or_default();
    for key in ["used", "size", "cost"] {
        checks.check(update[key] == before[key], || {
            format!("/usage's update {key} {} != the last one's {}", update[key], before[key])
        });
    }
    let text =
        updates.iter().find_map(|u| u["content"]["text"].as_str()).unwrap_or_default().to_owned();
    eprintln!("/usage's text:\n{text}");
    let rows = rows(&text);
    let (used, size) = (update["used"].as_u64().unwrap_or(0), update["size"].as_u64().unwrap_or(1));
    let context = format!(
        "{} of {} tokens ({:.0}%)",
        thousands(used),
        thousands(size),
        used as f64 * 100.0 / size as f64
    );
    checks.check(row(&rows, "Context") == context, || format!("Context {context:?}: {text}"));
    let cost = update["cost"]["amount"].as_f64().unwrap_or(-1.0);
    checks.check(row(&rows, "Cost").starts_with(&format!("{} (", money(cost))), || {
        format!("Cost {}: {text}", money(cost))
    });
    let usage = &update["_meta"]["usage"];
    for (label, key) in [("Input", "inputTokens"), ("Output", "outputTokens")] {
        let want = format!("{} tokens", thousands(usage[key].as_u64().unwrap_or(0)));
        checks.check(row(&rows, label).starts_with(&want), || format!("{label} {want:?}: {text}"));
    }
    checks.check(row(&rows, "Calls").contains(" main"), || format!("Calls: {text}"));
    checks.check(lab.mock.mark() == served, || {
        format!("the mock served {:?} for /usage", lab.mock.calls_since(served))
    });

    // The day's and month's spending: what `report` and `status` read from the ledger, once
    // the relay's writer has written what it was handed.
    for (label, group) in [("Today", "daily"), ("This month", "monthly")] {
        let shown = row(&rows, label).to_owned();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut reported = report_cost(&ledger, group);
        while format!("{} across all sessions", money(reported)) != shown
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(200));
            reported = report_cost(&ledger, group);
        }
        checks.check(format!("{} across all sessions", money(reported)) == shown, || {
            format!("{label}: /usage showed {shown:?}, report {group} says {reported}")
        });
        if group == "daily" {
            let status = support::on_ledger(&ledger, &["status", "--format", "{today}"]);
            let today: f64 = status.trim().trim_start_matches('$').parse().unwrap_or(-1.0);
            checks.check((today - reported).abs() < 0.006, || {
                format!("status says today {status:?}, report {reported}")
            });
        }
    }

    // The next turn is the agent's: the script's next reply, counted.
    let turn = run_turn(&client, &lab.mock, &id, flows::PLAIN_PROMPT).expect("turn 3");
    let reply: String = turn
        .updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    let script = support::script(AGENT);
    checks.check(reply.contains(&script.steps[3].text), || format!("turn 3 replied {reply:?}"));
    let total = turn.result["usage"]["totalTokens"].as_u64().unwrap_or(0);
    let main = support::sum(&turn.main_calls());
    checks.check(total >= main.total() && main.total() > 0, || {
        format!("turn 3's usage {} < its main calls' {}", turn.result["usage"], main.total())
    });
    let after = last_update(&client, &id)["cost"]["amount"].as_f64().unwrap_or(0.0);
    checks.check(after > cost, || format!("the cost {after} did not grow from {cost}"));

    // Claude Code never saw the command.
    let transcripts = files_under(&lab.scratch.home().join(".claude"));
    let leaked: Vec<_> = transcripts
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("/usage")))
        .collect();
    checks.check(transcripts.iter().any(|p| p.extension().is_some_and(|e| e == "jsonl")), || {
        "no Claude Code transcript found".to_owned()
    });
    checks.check(leaked.is_empty(), || format!("/usage is in {leaked:?}"));

    let lists = command_lists(&client, &id);
    drop(client);
    check_command_lists(&mut checks, &lab, lists);
    checks.finish();
}

/// The lists the editor got (`first`: in the session above) against the agent's own, read
/// through a relay with the command off: each has the agent's commands but its own `usage`,
/// then acp-usage's (or ours alone, before the agent sent one).
fn check_command_lists(checks: &mut Checks, lab: &Lab, first: Vec<Vec<String>>) {
    let config = lab.scratch.path("commands-off.toml");
    std::fs::write(&config, "[commands]\nusage = \"\"\n").expect("config");
    let off = lab.relayed_with(&["--config", config.to_str().expect("utf-8")]).expect("relay");
    off.initialize().expect("initialize");
    let id = flows::session_id(&off.new_session(&lab.scratch.work()).expect("new")).unwrap();
    let listed = |c: &AcpClient, id: &str| {
        // The agent's own list (more than acp-usage's one command); not coming is a failure.
        c.wait_for_line(0, Duration::from_secs(20), |l| {
            l.session_update().is_some_and(|u| {
                u["sessionUpdate"] == "available_commands_update"
                    && u["availableCommands"].as_array().is_some_and(|a| a.len() > 1)
            }) && l.json.as_ref().is_some_and(|j| j["params"]["sessionId"] == id)
        })
        .expect("the agent's command list");
        command_lists(c, id)
    };
    let agents = listed(&off, &id);
    eprintln!("the agent's command lists: {agents:?}");
    checks.check(agents.iter().all(|l| l != &["usage"]), || {
        format!("a list of acp-usage's own with the command off: {agents:?}")
    });
    let Some(agent_list) = agents.last().cloned() else {
        checks.fail("the agent sent no command list".to_owned());
        return;
    };
    drop(off);
    let mut want: Vec<String> = agent_list.into_iter().filter(|n| n != "usage").collect();
    want.push("usage".to_owned());
    // A fresh session through the relay with the command on, in the same HOME.
    let on = lab.relayed().expect("relay");
    on.initialize().expect("initialize");
    let id = flows::session_id(&on.new_session(&lab.scratch.work()).expect("new")).unwrap();
    let second = listed(&on, &id);
    eprintln!("command lists through the relay: {first:?}, {second:?}");
    for lists in [&first, &second] {
        // Claude Code's list changes as a session goes on (commands come and go after its
        // turns): the agent's list right after `session/new` is the one to compare.
        let after_new = lists.iter().find(|l| l.as_slice() != ["usage"]);
        checks.check(after_new == Some(&want), || format!("lists {lists:?}, want {want:?}"));
        for list in lists.iter() {
            let ours = list.iter().filter(|n| *n == "usage").count();
            checks.check(ours == 1 && list.last().is_some_and(|n| n == "usage"), || {
                format!("a list with {ours} `usage`, not last: {list:?}")
            });
        }
    }
}
