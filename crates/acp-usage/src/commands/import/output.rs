//! What `import` shows on stderr: a progress bar while it reads (on a terminal only), its
//! summary, and the one-line account of its warnings that `report` prints when it imports first.

use std::io::Write as _;
use std::time::{Duration, Instant};

use super::{ImportOptions, Progress, Summary};
use crate::numbers::thousands;

/// Width of the bar, in characters.
const BAR: usize = 24;

/// The progress bar on a terminal's stderr, rewritten in place at most ten times a second;
/// nothing at all when stderr is not a terminal.
pub(super) struct ProgressBar {
    terminal: bool,
    last: Option<Instant>,
    shown: bool,
}

impl ProgressBar {
    pub(super) fn new(terminal: bool) -> ProgressBar {
        ProgressBar { terminal, last: None, shown: false }
    }

    pub(super) fn show(&mut self, p: Progress) {
        let done = p.files_done == p.files_total;
        // Nothing to read: nothing to show (a second import only looks at the files).
        if !self.terminal
            || p.files_total == 0
            || (!done && self.last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)))
        {
            return;
        }
        self.last = Some(Instant::now());
        self.shown = true;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{}", bar_text(p));
        let _ = err.flush();
    }

    pub(super) fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            self.shown = false;
        }
    }
}

/// `importing [#########---------------] 312/750 files, 640 MB, 12,345 calls added`.
fn bar_text(p: Progress) -> String {
    let filled = (p.files_done * BAR).checked_div(p.files_total).unwrap_or(BAR).min(BAR);
    format!(
        "importing [{}{}] {}/{} files, {} MB, {} calls added",
        "#".repeat(filled),
        "-".repeat(BAR - filled),
        thousands(p.files_done as u64),
        thousands(p.files_total as u64),
        thousands(p.bytes_read / 1_000_000),
        thousands(p.calls_added)
    )
}

/// One line for what went wrong, when anything did (`report` prints it before its answer).
pub(super) fn warnings_line(s: &Summary) -> Option<String> {
    let first = s
        .unreadable
        .first()
        .map(|u| format!("{}: {}", u.path.display(), u.why))
        .or_else(|| s.skipped.first().map(|k| format!("{}: {}", k.path.display(), k.first)))?;
    Some(format!(
        "{} unreadable, {} with skipped lines (first: {first}); `acp-usage import` names them all",
        count(s.unreadable.len() as u64, "file"),
        count(s.skipped.len() as u64, "file"),
    ))
}

pub(super) fn print_summary(s: &Summary, path: &std::path::Path, opts: &ImportOptions) {
    const LISTED: usize = 20;
    for u in s.unreadable.iter().take(LISTED) {
        eprintln!("acp-usage import: warning: cannot read {}: {}", u.path.display(), u.why);
    }
    if s.unreadable.len() > LISTED {
        eprintln!(
            "acp-usage import: warning: ... and {} more unreadable files",
            s.unreadable.len() - LISTED
        );
    }
    for k in s.skipped.iter().take(LISTED) {
        let noun = if k.lines == 1 { "line" } else { "lines" };
        eprintln!(
            "acp-usage import: warning: {}: skipped {} unreadable {noun} ({})",
            k.path.display(),
            k.lines,
            k.first
        );
    }
    if s.skipped.len() > LISTED {
        eprintln!(
            "acp-usage import: warning: ... and {} more files with skipped lines",
            s.skipped.len() - LISTED
        );
    }
    if s.files == 0 {
        let which = if opts.agents.is_empty() {
            "any agent".to_owned()
        } else {
            opts.agents.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
        };
        let since = if opts.since.is_some() { " changed since the given date" } else { "" };
        eprintln!("acp-usage import: no transcripts of {which} found{since}");
    }
    for (agent, a) in &s.agents {
        let unpriced =
            if a.unpriced > 0 { format!(", {} unpriced", a.unpriced) } else { String::new() };
        eprintln!(
            "  {:<9} {}, {} added ({} input and {} output tokens, {}{unpriced}), {} already in the ledger",
            agent.name(),
            count(a.sessions as u64, "session"),
            count(a.calls_added, "call"),
            thousands(a.tokens.input),
            thousands(a.tokens.output),
            usd(a.cost),
            a.calls_present,
        );
    }
    let t = s.total();
    let updated = if t.calls_updated > 0 {
        format!(", {} updated", thousands(t.calls_updated))
    } else {
        String::new()
    };
    eprintln!(
        "imported {} ({} with new calls): {} added{updated}, {} already in the ledger, {} unreadable; \
         {} read, {} unchanged; ledger: {}",
        count(t.sessions as u64, "session"),
        t.sessions_added,
        count(t.calls_added, "call"),
        t.calls_present,
        count(s.unreadable.len() as u64, "file"),
        count(s.files_read as u64, "file"),
        s.files_unchanged,
        path.display()
    );
}

/// `1 call`, `2 calls`.
pub(super) fn count(n: u64, noun: &str) -> String {
    format!("{} {noun}{}", thousands(n), if n == 1 { "" } else { "s" })
}

fn usd(v: f64) -> String {
    if v < 0.01 && v > 0.0 { format!("${v:.4}") } else { format!("${v:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_files_read() {
        let p =
            Progress { files_done: 3, files_total: 12, bytes_read: 2_500_000, calls_added: 1234 };
        assert_eq!(
            bar_text(p),
            "importing [######------------------] 3/12 files, 2 MB, 1,234 calls added"
        );
        let none = Progress::default();
        assert!(bar_text(none).ends_with("0 calls added"));
        assert!(bar_text(none).starts_with("importing [########################] 0/0"));
    }

    #[test]
    fn warnings_are_one_line_naming_the_first() {
        use super::super::{SkippedLines, Unreadable};
        let unreadable = |p: &str| Unreadable { path: p.into(), why: "denied".into() };
        let s = Summary {
            unreadable: vec![unreadable("/a.jsonl"), unreadable("/b.jsonl")],
            skipped: vec![SkippedLines { path: "/c.jsonl".into(), lines: 1, first: "x".into() }],
            ..Summary::default()
        };
        let line = warnings_line(&s).unwrap();
        assert_eq!(
            line,
            "2 files unreadable, 1 file with skipped lines (first: /a.jsonl: denied); \
             `acp-usage import` names them all"
        );
        assert!(!line.contains('\n'));
        assert_eq!(warnings_line(&Summary::default()), None);
    }
}
