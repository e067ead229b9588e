//! Doctor's report as lines for a person, or as one JSON document for a script.

use std::fmt::Write as _;

use serde_json::json;

use super::{Report, Status};

/// The width of the second column: the agent's profile name, or `acp-usage`.
const SCOPE_WIDTH: usize = 9;

/// One line per finding (`<status> <agent or acp-usage> <check>: <message>`), a blank line,
/// and the summary.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let scope = f.agent.unwrap_or("acp-usage");
        let _ = writeln!(
            out,
            "{:<4}  {scope:<SCOPE_WIDTH$}  {}: {}",
            f.status.mark(),
            f.check,
            f.message
        );
    }
    let _ = writeln!(out, "\n{}", summary(report));
    out
}

/// `3 agents found (claude, codex, qwen); 1 problem (claude tap), 2 warnings: exit 1.`
pub fn summary(report: &Report) -> String {
    let count = |s: Status| report.findings.iter().filter(|f| f.status == s).count();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let agents = match report.agents.len() {
        0 => "no agent found".to_owned(),
        n => format!("{} found ({})", plural(n, "agent", "agents"), report.agents.join(", ")),
    };
    let problems: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .map(|f| format!("{} {}", f.agent.unwrap_or("acp-usage"), f.check))
        .collect();
    let warnings = count(Status::Warn);
    let verdict = if problems.is_empty() {
        format!("no problem, {}: exit 0", plural(warnings, "warning", "warnings"))
    } else {
        format!(
            "{} ({}), {}: exit 1, something will not work",
            plural(problems.len(), "problem", "problems"),
            problems.join(", "),
            plural(warnings, "warning", "warnings")
        )
    };
    format!("{agents}; {verdict}.")
}

/// The report as one JSON document: `agents`, `findings` (each `agent`, `check`, `status`,
/// `message`, `path`), `summary` (counts by status) and `exit`.
pub fn json(report: &Report) -> String {
    let count = |s: Status| report.findings.iter().filter(|f| f.status == s).count();
    let doc = json!({
        "agents": report.agents,
        "findings": report.findings,
        "summary": {
            "ok": count(Status::Ok),
            "info": count(Status::Info),
            "warn": count(Status::Warn),
            "fail": count(Status::Fail),
        },
        "exit": report.exit_code(),
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value serialises");
    text.push('\n');
    text
}
