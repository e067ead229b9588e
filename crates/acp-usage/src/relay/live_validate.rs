//! `--validate`: the relay's live check of its traffic against `schema/schema.json`, and the
//! checks and counts it shares with `acp-usage validate` ([`crate::commands::validate`]).
//!
//! The relay hands a copy of each line it forwards to a thread of its own ([`Live`]), which runs
//! it through one [`MessageValidator`] in order (so responses are checked against the method of
//! their request) and logs every finding. Forwarding never waits for it: a full queue drops the
//! copy (counted), and the summary is logged when the relay ends.

use std::collections::BTreeMap;
use std::time::Instant;

use acp_usage_schema::validate::{Checked, Direction, Kind, MessageValidator, Verdict};
use anyhow::Context;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::record::{CopiedLine, Dir};

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

/// How a direction is shown to humans.
pub fn dir_label(dir: Dir) -> &'static str {
    match dir {
        Dir::EditorToAgent => "client->agent",
        Dir::AgentToEditor => "agent->client",
        Dir::Injected => "injected",
    }
}

/// Message kinds in the order the summary lists them under a method.
pub const KIND_NAMES: [&str; 5] = ["request", "notification", "result", "error", "other"];

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

/// A message on one line, cut to a readable length.
pub fn shown(message: &str) -> String {
    let one_line = message.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= MESSAGE_SHOWN {
        return one_line;
    }
    let cut: String = one_line.chars().take(MESSAGE_SHOWN).collect();
    format!("{cut}… (--json has it whole)")
}

/// The relay's end of `--validate`: a thread that checks copies of the lines.
#[derive(Debug)]
pub struct Live {
    tx: Option<mpsc::Sender<CopiedLine>>,
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
    pub fn offer(&mut self, line: &CopiedLine) {
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
fn live_loop(mut rx: mpsc::Receiver<CopiedLine>) -> (Tally, f64) {
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
