//! `acp-usage validate [FILE|-] [--from agent|client] [--json]` and the relay's `--validate`:
//! check ACP traffic against `schema/schema.json`.
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
//! `--validate` on the relay runs the same checks on copies of the live lines in a thread of its
//! own ([`Live`]); forwarding never waits for it, and a full queue drops the copy (counted).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::ExitCode;
use std::time::Instant;

use acp_usage_schema::validate::{Checked, Direction, Kind, MessageValidator, Verdict};
use anyhow::Context;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::cli::{FromSide, ValidateArgs};
use crate::record::{Dir, Entry, Tapped};

/// Depth of the live validator's queue, in lines.
pub const LIVE_DEPTH: usize = 4096;
/// Longest message shown in the human output (the JSON output has it whole).
const MESSAGE_SHOWN: usize = 400;

/// The kinds of findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    /// Does not match its schema definition.
    Invalid,
    /// Not a JSON-RPC message.
    Malformed,
    /// A method the schema does not define for its direction.
    UnknownMethod,
    /// A response to no request seen.
    UnmatchedResponse,
}

impl FindingKind {
    /// Whether it counts against the exit code.
    pub fn is_violation(self) -> bool {
        matches!(self, FindingKind::Invalid | FindingKind::Malformed)
    }

    /// The label in human output.
    pub fn label(self) -> &'static str {
        match self {
            FindingKind::Invalid => "invalid",
            FindingKind::Malformed => "malformed",
            FindingKind::UnknownMethod => "unknown method",
            FindingKind::UnmatchedResponse => "unmatched response",
        }
    }

    /// The name in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Invalid => "invalid",
            FindingKind::Malformed => "malformed",
            FindingKind::UnknownMethod => "unknown_method",
            FindingKind::UnmatchedResponse => "unmatched_response",
        }
    }
}

/// One finding about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// JSON pointer into the message (`""` is the whole message).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// The findings of one checked message (none when valid).
pub fn findings(c: &Checked) -> Vec<Finding> {
    let one = |kind, pointer: &str, message: String| {
        vec![Finding { kind, pointer: pointer.to_owned(), message }]
    };
    match &c.verdict {
        Verdict::Valid | Verdict::Extension => Vec::new(),
        Verdict::Invalid(vs) => vs
            .iter()
            .map(|v| Finding {
                kind: FindingKind::Invalid,
                pointer: v.pointer.clone(),
                message: v.message.clone(),
            })
            .collect(),
        Verdict::Malformed(why) => one(FindingKind::Malformed, "", why.clone()),
        Verdict::UnknownMethod => one(
            FindingKind::UnknownMethod,
            "/method",
            "not an ACP v1 method in this direction; not checked".into(),
        ),
        Verdict::UnmatchedResponse => one(
            FindingKind::UnmatchedResponse,
            "/id",
            "no request with this id was seen; not checked".into(),
        ),
    }
}

/// The direction the validator checks a line in.
pub fn direction(dir: Dir) -> Direction {
    match dir {
        Dir::EditorToAgent => Direction::ClientToAgent,
        Dir::AgentToEditor | Dir::Injected => Direction::AgentToClient,
    }
}

fn dir_label(dir: Dir) -> &'static str {
    match dir {
        Dir::EditorToAgent => "client->agent",
        Dir::AgentToEditor => "agent->client",
        Dir::Injected => "injected",
    }
}

fn dir_name(dir: Dir) -> &'static str {
    match dir {
        Dir::EditorToAgent => "client_to_agent",
        Dir::AgentToEditor => "agent_to_client",
        Dir::Injected => "injected",
    }
}

/// Message kinds in the order the summary lists them under a method.
const KIND_NAMES: [&str; 5] = ["request", "notification", "result", "error", "other"];

fn kind_rank(kind: Kind) -> u8 {
    match kind {
        Kind::Request => 0,
        Kind::Notification => 1,
        Kind::Response => 2,
        Kind::Error => 3,
        Kind::Other => 4,
    }
}

/// Per-row counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Messages.
    pub messages: u64,
    /// Valid (extensions with a valid envelope included).
    pub valid: u64,
    /// Invalid or malformed.
    pub invalid: u64,
    /// Unknown methods and unmatched responses.
    pub unchecked: u64,
}

impl Counts {
    fn add(&mut self, verdict: &Verdict) {
        self.messages += 1;
        match verdict {
            Verdict::Valid | Verdict::Extension => self.valid += 1,
            Verdict::Invalid(_) | Verdict::Malformed(_) => self.invalid += 1,
            Verdict::UnknownMethod | Verdict::UnmatchedResponse => self.unchecked += 1,
        }
    }
}

/// Counts over a whole run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Per (method, message kind as an index into the kind names); method `-` when unknown.
    pub rows: BTreeMap<(String, u8), Counts>,
    /// All messages.
    pub total: Counts,
    /// Findings that are violations.
    pub violations: u64,
    /// Messages with an unknown method.
    pub unknown_methods: u64,
    /// Responses to no request seen.
    pub unmatched: u64,
    /// Malformed messages.
    pub malformed: u64,
}

impl Tally {
    /// Counts one checked message and returns its findings.
    pub fn add(&mut self, c: &Checked) -> Vec<Finding> {
        let method = c.method.clone().unwrap_or_else(|| "-".into());
        self.rows.entry((method, kind_rank(c.kind))).or_default().add(&c.verdict);
        self.total.add(&c.verdict);
        match c.verdict {
            Verdict::UnknownMethod => self.unknown_methods += 1,
            Verdict::UnmatchedResponse => self.unmatched += 1,
            Verdict::Malformed(_) => self.malformed += 1,
            _ => {}
        }
        let found = findings(c);
        self.violations += found.iter().filter(|f| f.kind.is_violation()).count() as u64;
        found
    }
}

/// Where a message came from in the input.
struct At {
    line: u64,
    seq: Option<u64>,
    dir: Dir,
}

// ---------------------------------------------------------------------------------------------
// The command.

/// Runs `acp-usage validate`.
pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let path = args.input.as_deref().filter(|p| p.as_os_str() != "-");
    let name = path.map_or_else(|| "stdin".to_owned(), |p| p.display().to_string());
    let input: Box<dyn Read> = match path {
        Some(p) => Box::new(std::fs::File::open(p).with_context(|| format!("cannot read {name}"))?),
        None => Box::new(io::stdin().lock()),
    };
    let mut out = Output { json: args.json, out: io::stdout().lock() };
    match validate(BufReader::with_capacity(1 << 20, input), &name, args.from, &mut out) {
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

fn plural(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// A message on one line, cut to a readable length.
fn shown(message: &str) -> String {
    let one_line = message.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= MESSAGE_SHOWN {
        return one_line;
    }
    let cut: String = one_line.chars().take(MESSAGE_SHOWN).collect();
    format!("{cut}… (--json has it whole)")
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

// ---------------------------------------------------------------------------------------------
// Live validation.

/// The relay's end of `--validate`: a thread that checks copies of the lines.
#[derive(Debug)]
pub struct Live {
    tx: Option<mpsc::Sender<Tapped>>,
    dropped: u64,
    thread: Option<std::thread::JoinHandle<(Tally, f64)>>,
}

impl Live {
    /// Starts the validator thread.
    pub fn start() -> anyhow::Result<Live> {
        let (tx, rx) = mpsc::channel(LIVE_DEPTH);
        let thread = std::thread::Builder::new()
            .name("acp-usage-validate".into())
            .spawn(move || live_loop(rx))
            .context("starting the validator thread")?;
        Ok(Live { tx: Some(tx), dropped: 0, thread: Some(thread) })
    }

    /// Hands a copy to the validator without waiting; drops it (counted) when it is behind.
    pub fn offer(&mut self, line: &Tapped) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(line.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.dropped += 1,
            Err(TrySendError::Closed(_)) => self.tx = None,
        }
    }

    /// Lets the validator finish what is queued and logs the summary.
    pub async fn finish(mut self) {
        self.tx = None;
        let Some(thread) = self.thread.take() else { return };
        let Ok(Ok((t, busy))) = tokio::task::spawn_blocking(move || thread.join()).await else {
            tracing::warn!("the validator thread failed; no summary");
            return;
        };
        let rate = if busy > 0.0 { t.total.messages as f64 / busy } else { 0.0 };
        let per_method: Vec<String> = t
            .rows
            .iter()
            .filter(|(_, c)| c.invalid > 0)
            .map(|((m, k), c)| {
                format!("{m} {}: {} of {}", KIND_NAMES[usize::from(*k)], c.invalid, c.messages)
            })
            .collect();
        macro_rules! summary {
            ($level:ident) => {
                tracing::$level!(
                    messages = t.total.messages,
                    valid = t.total.valid,
                    invalid = t.total.invalid,
                    unchecked = t.total.unchecked,
                    violations = t.violations,
                    dropped = self.dropped,
                    messages_per_second = rate.round(),
                    invalid_by_method = per_method.join(", "),
                    "validation summary"
                )
            };
        }
        // A clean session is routine; violations or gaps deserve to be seen at the default level.
        if t.violations > 0 || self.dropped > 0 {
            summary!(warn);
        } else {
            summary!(info);
        }
    }
}

/// The validator thread; returns the tally and the time spent validating.
fn live_loop(mut rx: mpsc::Receiver<Tapped>) -> (Tally, f64) {
    let mut validator = MessageValidator::new();
    let mut tally = Tally::default();
    let mut busy = 0.0;
    while let Some(line) = rx.blocking_recv() {
        if line.bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let started = Instant::now();
        let checked = validator.check(direction(line.dir), &line.bytes);
        let found = tally.add(&checked);
        busy += started.elapsed().as_secs_f64();
        let method = checked.method.as_deref().unwrap_or("-");
        for f in found {
            if f.kind.is_violation() {
                tracing::warn!(
                    line = line.seq,
                    direction = dir_label(line.dir),
                    method,
                    pointer = %f.pointer,
                    "ACP {}: {}",
                    f.kind.label(),
                    shown(&f.message)
                );
            } else {
                tracing::info!(
                    line = line.seq,
                    direction = dir_label(line.dir),
                    method,
                    pointer = %f.pointer,
                    "ACP {}: {}",
                    f.kind.label(),
                    f.message
                );
            }
        }
    }
    (tally, busy)
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
