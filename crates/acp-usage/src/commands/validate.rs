//! `acp-usage validate [FILE|-] [--from agent|client] [--json]`: check recorded ACP traffic
//! against `schema/schema.json`; and `acp-usage schema`, which prints that schema.
//!
//! The input is a recording made with `--record` (see [`crate::record`]; `injected` lines count
//! as agent to client), or with `--from` a raw NDJSON stream of one direction. Every message goes
//! through one [`MessageValidator`] in order, so responses are checked against the method of
//! their request. Blank lines are skipped.
//!
//! What is reported, one line per finding (`LINE DIRECTION METHOD POINTER KIND: MESSAGE`):
//! - `invalid` (a violation): the message does not match its definition; one finding per
//!   schema error, with the JSON pointer of the offending value;
//! - `malformed` (a violation): not a JSON-RPC 2.0 message at all;
//! - `unknown method` (not a violation): a method ACP v1 does not define for that direction;
//!   it may be newer than the schema, so it is reported but not held against the peer;
//! - `unmatched response` (not a violation): a response to no request seen, so its definition is
//!   unknown (e.g. a recording that starts mid-session, or records dropped).
//!
//! `_`-prefixed extension methods only need a valid envelope and count as valid. `LINE` is the
//! line of the input file (for a recording, the record's line, not its `seq`). The summary table
//! counts per method and message kind. Exit code: 0 clean, 1 violations found, 2 the input could
//! not be read (missing file, not a recording, an unreadable record, an I/O error).
//!
//! The checks and counts are the ones the relay's `--validate` runs on live traffic
//! ([`crate::relay::live_validate`]).

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use acp_usage_schema::validate::MessageValidator;
use anyhow::Context;
use serde_json::json;

use crate::record::{Dir, Entry};
use crate::relay::live_validate::{
    Counts, Finding, KIND_NAMES, Tally, dir_label, direction, shown,
};

/// The side that sent a raw NDJSON stream (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromSide {
    /// Messages the agent sent (to the client).
    Agent,
    /// Messages the client (the editor) sent (to the agent).
    Client,
}

/// Runs `acp-usage validate` on `input` (`None` or `-`: stdin), a recording unless `from` names
/// the side of a raw stream; `json` prints JSON lines instead of text.
pub fn run(input: Option<&Path>, from: Option<FromSide>, json: bool) -> anyhow::Result<ExitCode> {
    let path = input.filter(|p| p.as_os_str() != "-");
    let name = path.map_or_else(|| "stdin".to_owned(), |p| p.display().to_string());
    let input: Box<dyn Read> = match path {
        Some(p) => Box::new(std::fs::File::open(p).with_context(|| format!("cannot read {name}"))?),
        None => Box::new(io::stdin().lock()),
    };
    let mut out = Output { json, out: io::stdout().lock() };
    match validate(BufReader::with_capacity(1 << 20, input), &name, from, &mut out) {
        Ok(code) => Ok(code),
        // `acp-usage validate … | head` closed the pipe: not an error, nothing more to say.
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(Failure::Output(e)) => Err(anyhow::Error::new(e).context("writing the report")),
        Err(Failure::Input(e)) => Err(e),
    }
}

enum Failure {
    /// The input could not be read: exit 2.
    Input(anyhow::Error),
    /// stdout failed.
    Output(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Output(e)
    }
}

fn validate<R: BufRead>(
    mut input: R,
    name: &str,
    from: Option<FromSide>,
    out: &mut Output<impl Write>,
) -> Result<ExitCode, Failure> {
    let started = Instant::now();
    let mut validator = MessageValidator::new();
    let mut tally = Tally::default();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut bad_records = 0u64;
    let mut seen_record = false;
    loop {
        buf.clear();
        let n = input.read_until(b'\n', &mut buf).map_err(|e| {
            Failure::Input(anyhow::Error::new(e).context(format!("reading {name}")))
        })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let raw = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (at, entry_line);
        let message: &[u8] = match from {
            Some(side) => {
                if line_no == 1 && Entry::parse(raw).is_ok() {
                    eprintln!(
                        "acp-usage: {name} looks like a recording; validate it without --from"
                    );
                }
                let dir = match side {
                    FromSide::Agent => Dir::AgentToEditor,
                    FromSide::Client => Dir::EditorToAgent,
                };
                at = At { line: line_no, seq: None, dir };
                raw
            }
            None => match Entry::parse(raw) {
                Ok(e) => {
                    seen_record = true;
                    at = At { line: line_no, seq: e.seq, dir: e.dir };
                    entry_line = e.line;
                    if entry_line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    &entry_line
                }
                Err(why) if !seen_record => {
                    return Err(Failure::Input(anyhow::anyhow!(
                        "{name} is not an acp-usage recording (line {line_no}: {why}); \
                         for a raw NDJSON stream of one side use --from agent|client"
                    )));
                }
                Err(why) => {
                    bad_records += 1;
                    eprintln!(
                        "acp-usage: {name}:{line_no}: not a recording entry ({why}); skipped"
                    );
                    continue;
                }
            },
        };
        let checked = validator.check(direction(at.dir), message);
        for f in tally.add(&checked) {
            out.finding(&at, checked.method.as_deref(), &f)?;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    out.summary(&tally, secs)?;
    if bad_records > 0 {
        return Err(Failure::Input(anyhow::anyhow!(
            "{bad_records} lines of {name} are not recording entries (see above)"
        )));
    }
    Ok(if tally.violations > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Where a message came from in the input.
struct At {
    line: u64,
    seq: Option<u64>,
    dir: Dir,
}

/// The report, for humans or as JSON lines.
struct Output<W: Write> {
    json: bool,
    out: W,
}

impl<W: Write> Output<W> {
    fn finding(&mut self, at: &At, method: Option<&str>, f: &Finding) -> io::Result<()> {
        if self.json {
            let v = json!({
                "type": "finding",
                "line": at.line,
                "seq": at.seq,
                "direction": dir_name(at.dir),
                "method": method,
                "kind": f.kind.name(),
                "violation": f.kind.is_violation(),
                "pointer": f.pointer,
                "message": f.message,
            });
            return writeln!(self.out, "{v}");
        }
        let pointer = if f.pointer.is_empty() { "(root)" } else { &f.pointer };
        writeln!(
            self.out,
            "{}  {}  {}  {}  {}: {}",
            at.line,
            dir_label(at.dir),
            method.unwrap_or("-"),
            pointer,
            f.kind.label(),
            shown(&f.message)
        )
    }

    fn summary(&mut self, t: &Tally, secs: f64) -> io::Result<()> {
        let rate = if secs > 0.0 { t.total.messages as f64 / secs } else { 0.0 };
        if self.json {
            let methods: Vec<_> = t
                .rows
                .iter()
                .map(|((m, k), c)| {
                    json!({"method": m, "kind": KIND_NAMES[usize::from(*k)], "messages": c.messages, "valid": c.valid,
                        "invalid": c.invalid, "unchecked": c.unchecked})
                })
                .collect();
            let v = json!({
                "type": "summary",
                "messages": t.total.messages,
                "valid": t.total.valid,
                "invalid": t.total.invalid,
                "unchecked": t.total.unchecked,
                "violations": t.violations,
                "unknown_methods": t.unknown_methods,
                "unmatched_responses": t.unmatched,
                "malformed": t.malformed,
                "seconds": secs,
                "messages_per_second": rate.round(),
                "methods": methods,
            });
            return writeln!(self.out, "{v}");
        }
        let label = |(m, k): &(String, u8)| match (m.as_str(), KIND_NAMES[usize::from(*k)]) {
            ("-", "other") => "(malformed)".to_owned(),
            ("-", k) => format!("(unmatched {k})"),
            (m, k @ ("result" | "error")) => format!("{m} ({k})"),
            (m, _) => m.to_owned(),
        };
        let width = t.rows.keys().map(|k| label(k).len()).max().unwrap_or(0).max(6);
        let mut table = format!(
            "\n{:<width$}  {:>8}  {:>8}  {:>8}  {:>9}\n",
            "METHOD", "MESSAGES", "VALID", "INVALID", "UNCHECKED"
        );
        let mut row = |name: &str, c: &Counts| {
            // Writing to a String cannot fail.
            let _ = writeln!(
                table,
                "{name:<width$}  {:>8}  {:>8}  {:>8}  {:>9}",
                c.messages, c.valid, c.invalid, c.unchecked
            );
        };
        for (k, c) in &t.rows {
            row(&label(k), c);
        }
        row("total", &t.total);
        write!(self.out, "{table}")?;
        writeln!(
            self.out,
            "\n{} in {:.3} s ({:.0} messages/s): {} in {}; not checked: {}, {} \
             (reported, not violations)",
            plural(t.total.messages, "message"),
            secs,
            rate,
            plural(t.violations, "violation"),
            plural(t.total.invalid, "message"),
            plural(t.unknown_methods, "unknown method"),
            plural(t.unmatched, "unmatched response"),
        )
    }
}

fn dir_name(dir: Dir) -> &'static str {
    match dir {
        Dir::EditorToAgent => "client_to_agent",
        Dir::AgentToEditor => "agent_to_client",
        Dir::Injected => "injected",
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// Runs `acp-usage schema`: prints the embedded `schema/schema.json`.
pub fn print_schema() -> anyhow::Result<ExitCode> {
    let text = acp_usage_schema::SCHEMA_JSON;
    anyhow::ensure!(
        !text.trim().is_empty(),
        "this build has no schema (schema/schema.json was empty)"
    );
    let mut out = io::stdout().lock();
    let res = out
        .write_all(text.as_bytes())
        .and_then(|()| if text.ends_with('\n') { Ok(()) } else { out.write_all(b"\n") })
        .and_then(|()| out.flush());
    match res {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("writing the schema")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_on(
        input: &str,
        from: Option<FromSide>,
        json: bool,
    ) -> (Result<ExitCode, String>, String) {
        let mut out = Output { json, out: Vec::new() };
        let res = validate(input.as_bytes(), "test", from, &mut out).map_err(|e| match e {
            Failure::Input(e) => format!("{e:#}"),
            Failure::Output(e) => e.to_string(),
        });
        (res, String::from_utf8(out.out).unwrap())
    }

    #[test]
    fn not_a_recording_is_an_input_error() {
        let (res, _) = run_on("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", None, false);
        let err = res.unwrap_err();
        assert!(err.contains("not an acp-usage recording (line 1"), "{err}");
    }

    #[test]
    fn empty_input_is_clean_and_summarised() {
        let (res, out) = run_on("", None, false);
        assert_eq!(res.unwrap(), ExitCode::SUCCESS);
        assert!(out.contains("0 messages in"), "{out}");
    }

    #[test]
    fn long_messages_are_cut_for_humans() {
        let m = "x".repeat(1000);
        assert!(shown(&m).ends_with("(--json has it whole)"));
        assert_eq!(shown("a\nb"), "a b");
    }
}
