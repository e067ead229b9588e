//! `acp-usage status [--format TEMPLATE] [--empty TEXT] [--ledger FILE]`: one line for status
//! bars and prompts (tmux, starship, a shell's `PS1`) with the most recently active session's
//! figures and today's total, e.g. `claude · 42% of 200k · $0.31 · today $4.20`.
//!
//! A prompt runs it often, so it opens the ledger once, read-only, makes four small indexed
//! queries and never creates the file. No ledger, an empty one, or `ACP_USAGE_LEDGER=off`
//! print `--empty` (an empty line by default) and exit 0: a prompt shows nothing rather than
//! an error before the first metered session.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use acp_usage_core::limits::Limit;
use anyhow::Context;

use super::watch::{
    Money, SessionView, current_fullest, fmt_ago, fmt_tokens, has_schema, latest, limit_text,
    spent_since, today_start,
};
use crate::sinks::ledger::{self, Store};

/// What `status` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The ledger (default: [`ledger::path`]).
    pub ledger: Option<PathBuf>,
    /// The line's template (default: [`DEFAULT_FORMAT`]'s parts, the unknown ones left out).
    pub format: Option<String>,
    /// What to print when the ledger holds no session yet.
    pub empty: String,
}

/// The default line, for the documentation: parts whose figures are unknown are left out.
pub const DEFAULT_FORMAT: &str = "{agent} · {percent} of {size} · {cost} · today {today} · {limit}";

/// Runs the command.
pub fn run(opts: &Options) -> anyhow::Result<ExitCode> {
    // The template is checked before the ledger is read, so a typo shows at once, not only
    // once there is a session to show.
    let template = opts.format.as_deref().map(Template::parse).transpose()?;
    let line = match read(opts.ledger.as_deref(), template.as_ref())? {
        Some(line) => line,
        None => opts.empty.clone(),
    };
    let mut out = io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err.into()),
    }
}

fn read(given: Option<&Path>, template: Option<&Template>) -> anyhow::Result<Option<String>> {
    let Some(path) = given.map(Path::to_path_buf).or_else(ledger::path) else { return Ok(None) };
    // Checked first: opening read-only would fail on a missing file anyway, but the point is
    // that a prompt never creates it.
    if !path.exists() {
        return Ok(None);
    }
    let store = Store::open_read(&path)
        .with_context(|| format!("opening the ledger {}", path.display()))?;
    line(&store, template, ledger::now_ms(), today_start())
        .with_context(|| format!("reading the ledger {}", path.display()))
}

/// The status line from `store` at `now`, today starting at `today` (Unix ms); `None` when the
/// ledger holds no session.
pub fn line(
    store: &Store,
    template: Option<&Template>,
    now: i64,
    today: i64,
) -> rusqlite::Result<Option<String>> {
    if !has_schema(store)? {
        return Ok(None);
    }
    let Some(session) = latest(store)? else { return Ok(None) };
    let today = spent_since(store, today)?;
    let limits = store.latest_limits(now)?;
    let limit = current_fullest(&limits, now);
    let values = Values { s: &session, today: &today, now, limit };
    Ok(Some(match template {
        Some(t) => t.render(&values),
        None => default_line(&values),
    }))
}

/// `claude · 42% of 200k · $0.31 · today $4.20`, leaving out what is unknown (no window yet,
/// a cost no call had a price for).
fn default_line(v: &Values<'_>) -> String {
    let mut parts = vec![v.get(Field::Agent)];
    if v.s.percent().is_some() {
        parts.push(format!("{} of {}", v.get(Field::Percent), v.get(Field::Size)));
    }
    if v.s.cost.rows == 0 || v.s.cost.unpriced < v.s.cost.rows {
        parts.push(v.get(Field::Cost));
    }
    parts.push(format!("today {}", v.get(Field::Today)));
    if let Some(l) = v.limit {
        // Whose window it is, when a response said.
        let whose = l.account_label().map(|a| format!(" [{a}]")).unwrap_or_default();
        parts.push(format!("{}{whose}", v.get(Field::Limit)));
    }
    parts.join(" · ")
}

/// A placeholder of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Agent,
    AgentName,
    Model,
    Title,
    Project,
    Session,
    Used,
    Size,
    Percent,
    Cost,
    Today,
    Turns,
    Ago,
    State,
    Limit,
}

/// The placeholders' names, in the order `--format`'s help lists them.
pub fn placeholders() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|(name, _)| *name)
}

/// The placeholders, with what each stands for (shown in the error for an unknown one).
const FIELDS: &[(&str, Field)] = &[
    ("agent", Field::Agent),
    ("agent_name", Field::AgentName),
    ("model", Field::Model),
    ("title", Field::Title),
    ("project", Field::Project),
    ("session", Field::Session),
    ("used", Field::Used),
    ("size", Field::Size),
    ("percent", Field::Percent),
    ("cost", Field::Cost),
    ("today", Field::Today),
    ("turns", Field::Turns),
    ("ago", Field::Ago),
    ("state", Field::State),
    ("limit", Field::Limit),
];

/// The figures a line is made of.
struct Values<'a> {
    s: &'a SessionView,
    today: &'a Money,
    now: i64,
    /// The fullest subscription window, when one was seen.
    limit: Option<&'a Limit>,
}

impl Values<'_> {
    /// A placeholder's text; empty when the figure is unknown.
    fn get(&self, f: Field) -> String {
        let s = self.s;
        let opt = |v: Option<&String>| v.cloned().unwrap_or_default();
        match f {
            Field::Agent => s.agent_label().to_owned(),
            Field::AgentName => opt(s.agent_name.as_ref()),
            Field::Model => opt(s.model.as_ref()),
            Field::Title => opt(s.title.as_ref()),
            // A prompt has room for the directory's name, not its path.
            Field::Project => s
                .project
                .as_deref()
                .map(|p| {
                    Path::new(p)
                        .file_name()
                        .map_or_else(|| p.to_owned(), |n| n.to_string_lossy().into_owned())
                })
                .unwrap_or_default(),
            Field::Session => s.session_id.clone(),
            Field::Used => s.used.map(fmt_tokens).unwrap_or_default(),
            Field::Size => s.size.filter(|&z| z > 0).map(fmt_tokens).unwrap_or_default(),
            Field::Percent => s.percent().map(|p| format!("{p}%")).unwrap_or_default(),
            Field::Cost => s.cost.fmt(),
            Field::Today => self.today.fmt(),
            Field::Turns => s.turns.to_string(),
            Field::Ago => fmt_ago(self.now, s.last_seen),
            Field::State => if s.running { "running" } else { "ended" }.to_owned(),
            Field::Limit => self.limit.map(|l| limit_text(l, self.now)).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Field(Field),
}

/// A parsed `--format`: text with `{placeholder}`s; `{{` and `}}` are literal braces.
#[derive(Debug, Clone, PartialEq)]
pub struct Template(Vec<Piece>);

impl Template {
    /// Parses a template; an unknown placeholder or an unmatched brace is an error that says
    /// which, and lists the placeholders there are.
    pub fn parse(s: &str) -> anyhow::Result<Template> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => anyhow::bail!(
                                "--format: `{{{name}` is not closed (write `{{{{` for a literal brace)"
                            ),
                        }
                    }
                    let Some(&(_, field)) = FIELDS.iter().find(|(n, _)| *n == name.trim()) else {
                        anyhow::bail!(
                            "--format: unknown placeholder `{{{name}}}`; known: {}",
                            known()
                        );
                    };
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Field(field));
                }
                '}' => anyhow::bail!(
                    "--format: a `}}` that closes nothing (write `}}}}` for a literal brace)"
                ),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template(pieces))
    }

    fn render(&self, v: &Values<'_>) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(f) => out.push_str(&v.get(*f)),
            }
        }
        out
    }
}

fn known() -> String {
    let mut s = String::new();
    for (k, (name, _)) in FIELDS.iter().enumerate() {
        let sep = if k == 0 { "" } else { " " };
        let _ = write!(s, "{sep}{{{name}}}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::watch::tests::{Seen, TempLedger, add, dead_pid};

    fn status(store: &Store, format: Option<&str>, now: i64, today: i64) -> Option<String> {
        let t = format.map(|f| Template::parse(f).unwrap());
        line(store, t.as_ref(), now, today).unwrap()
    }

    #[test]
    fn default_line_and_templates() {
        let t = TempLedger::new("status-line");
        let mut store = Store::open(&t.path).unwrap();
        let now = ledger::now_ms();
        let today = now - 3_600_000;
        // Yesterday's spend is not today's.
        add(
            &mut store,
            Seen { id: "yesterday", agent: "codex", pid: None, at: today - 1 },
            &[Some(10.0)],
            5,
            10,
        );
        // Another session today, older than the latest one.
        add(
            &mut store,
            Seen { id: "earlier", agent: "codex", pid: None, at: now - 600_000 },
            &[Some(3.89)],
            5,
            10,
        );
        add(
            &mut store,
            Seen { id: "latest", agent: "claude", pid: Some(std::process::id()), at: now - 30_000 },
            &[Some(0.21), Some(0.1)],
            84_000,
            200_000,
        );

        assert_eq!(
            status(&store, None, now, today).unwrap(),
            "claude · 42% of 200k · $0.31 · today $4.20"
        );
        // As a template, a part whose figure is unknown stays empty (no window seen yet).
        assert_eq!(
            status(&store, Some(DEFAULT_FORMAT), now, today).unwrap(),
            "claude · 42% of 200k · $0.31 · today $4.20 · "
        );
        assert_eq!(
            status(
                &store,
                Some("{state} {model} {used}/{size} ({percent}) t{turns} {project} {ago} {{x}}"),
                now,
                today
            )
            .unwrap(),
            "running claude-sonnet-4-5 84k/200k (42%) t1 latest 30s ago {x}"
        );
    }

    #[test]
    fn the_fullest_live_window_is_the_limit() {
        let t = TempLedger::new("status-limit");
        let mut store = Store::open(&t.path).unwrap();
        let now = ledger::now_ms();
        add(
            &mut store,
            Seen { id: "s", agent: "claude", pid: Some(std::process::id()), at: now },
            &[Some(0.5)],
            84_000,
            200_000,
        );
        let mut headers = vec![
            ("anthropic-ratelimit-unified-5h-utilization", "0.8".to_owned()),
            ("anthropic-ratelimit-unified-5h-reset", (now / 1000 + 3600).to_string()),
            ("anthropic-ratelimit-unified-7d-utilization", "0.3".to_owned()),
            ("anthropic-ratelimit-unified-7d-reset", (now / 1000 + 86_400).to_string()),
        ];
        let pairs = |h: &Vec<(&'static str, String)>| {
            h.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>()
        };
        let observed = pairs(&headers);
        let limits = acp_usage_core::limits::from_headers(
            observed.iter().map(|(k, v)| (*k, v.as_str())),
            now - 5000,
        );
        store.limits(&limits, Some("s")).unwrap();
        assert_eq!(status(&store, Some("{limit}"), now, 0).unwrap(), "5h 80%");
        assert!(status(&store, None, now, 0).unwrap().ends_with(" · 5h 80%"));
        // The 5-hour window reset since: the weekly one is what is left.
        headers[1].1 = (now / 1000 - 10).to_string();
        let observed = pairs(&headers);
        let limits = acp_usage_core::limits::from_headers(
            observed.iter().map(|(k, v)| (*k, v.as_str())),
            now - 1000,
        );
        store.limits(&limits, None).unwrap();
        assert_eq!(status(&store, Some("{limit}"), now, 0).unwrap(), "7d 30%");
    }

    #[test]
    fn unknowns_are_left_out() {
        let t = TempLedger::new("status-unknown");
        let mut store = Store::open(&t.path).unwrap();
        let now = ledger::now_ms();
        // No window known (size 0), no priced call, its relay gone.
        add(
            &mut store,
            Seen { id: "s", agent: "gemini", pid: Some(dead_pid()), at: now },
            &[None],
            5,
            0,
        );
        assert_eq!(status(&store, None, now, now - 1000).unwrap(), "gemini · today ?");
        assert_eq!(
            status(&store, Some("[{percent}|{size}|{cost}|{state}]"), now, 0).unwrap(),
            "[||?|ended]"
        );
    }

    #[test]
    fn empty_ledger() {
        let t = TempLedger::new("status-empty");
        Store::open(&t.path).unwrap();
        let store = Store::open_read(&t.path).unwrap();
        assert_eq!(status(&store, None, 0, 0), None);
        // A missing file is not created.
        let missing = t.dir.join("sub/none.db");
        assert_eq!(read(Some(&missing), None).unwrap(), None);
        assert!(!missing.exists() && !t.dir.join("sub").exists());
    }

    #[test]
    fn template_errors() {
        let err = Template::parse("{agent} {nope}").unwrap_err().to_string();
        assert!(err.contains("unknown placeholder `{nope}`"), "{err}");
        assert!(err.contains("{agent} {agent_name} {model}"), "{err}");
        assert!(Template::parse("{agent").unwrap_err().to_string().contains("not closed"));
        assert!(Template::parse("a } b").unwrap_err().to_string().contains("closes nothing"));
        assert_eq!(
            Template::parse("{{{cost}}}").unwrap(),
            Template(vec![
                Piece::Text("{".into()),
                Piece::Field(Field::Cost),
                Piece::Text("}".into())
            ])
        );
    }
}
