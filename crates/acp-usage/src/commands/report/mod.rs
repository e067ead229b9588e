//! `acp-usage report [daily|weekly|monthly|session|project|agent|model]`: what the ledger
//! recorded, summed per day, ISO week, month, session, project, agent or model, as a terminal
//! table or one JSON object.
//!
//! Every figure is a sum of ledger columns: costs are the ones the calls were settled with, never
//! re-priced, so a report agrees with what the editor was told. The ledger is opened read-only
//! here (the import the CLI runs first, `import::before_report`, is what may create or migrate
//! it); a missing or empty ledger is a note on stderr and an empty report, not an error, so
//! scripts can run it before anything was recorded.

mod html;
mod limits;
mod query;
mod table;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveTime, SecondsFormat, TimeZone,
};
use serde_json::{Map, Value, json};

use crate::sinks::ledger::{self, Store};

pub use limits::Per;
pub use query::{Report, Row, SessionMeta, Sums};

/// How the calls are grouped into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Group {
    /// One row per calendar day.
    #[default]
    Daily,
    /// One row per ISO week (Monday to Sunday), labelled by its Monday.
    Weekly,
    /// One row per calendar month (`YYYY-MM`).
    Monthly,
    /// One row per ACP session.
    Session,
    /// One row per project (the session's working directory).
    Project,
    /// One row per agent profile (`claude`, `codex`, ...).
    Agent,
    /// One row per model.
    Model,
    /// Subscription windows: one row per window and day (or hour).
    Limits,
}

impl Group {
    /// The command-line and JSON name of the report (`daily`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Group::Daily => "daily",
            Group::Weekly => "weekly",
            Group::Monthly => "monthly",
            Group::Session => "session",
            Group::Project => "project",
            Group::Agent => "agent",
            Group::Model => "model",
            Group::Limits => "limits",
        }
    }

    /// The JSON key of a row's group value.
    fn key(self) -> &'static str {
        match self {
            Group::Daily => "date",
            Group::Weekly => "week",
            Group::Monthly => "month",
            Group::Session => "session",
            Group::Project => "project",
            Group::Agent => "agent",
            Group::Model => "model",
            Group::Limits => "period",
        }
    }
}

/// Which clock days, weeks and months follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Zone {
    /// The machine's time zone (`TZ`, else `/etc/localtime`).
    #[default]
    Local,
    /// UTC.
    Utc,
}

impl Zone {
    /// The calendar day of a Unix-millisecond time.
    pub fn date_of(self, ms: i64) -> NaiveDate {
        let t = DateTime::from_timestamp_millis(ms).unwrap_or_default();
        match self {
            Zone::Local => t.with_timezone(&chrono::Local).date_naive(),
            Zone::Utc => t.date_naive(),
        }
    }

    /// When a calendar day starts, in Unix milliseconds.
    pub fn start_of(self, day: NaiveDate) -> i64 {
        match self {
            Zone::Local => start_of_day(&chrono::Local, day),
            Zone::Utc => start_of_day(&chrono::Utc, day),
        }
    }

    /// A Unix-millisecond time as RFC 3339 in this zone, to the second.
    pub fn timestamp(self, ms: i64) -> String {
        let t = DateTime::from_timestamp_millis(ms).unwrap_or_default();
        match self {
            Zone::Local => {
                t.with_timezone(&chrono::Local).to_rfc3339_opts(SecondsFormat::Secs, true)
            }
            Zone::Utc => t.to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }

    /// How `--json` names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Zone::Local => "local",
            Zone::Utc => "UTC",
        }
    }
}

/// The first instant of `day` in `tz`. Where a DST change skips midnight (clocks jump from
/// 00:00 to 01:00, as in some American zones), the day starts when the clocks resume; where
/// midnight happens twice, at the first.
fn start_of_day<Tz: TimeZone>(tz: &Tz, day: NaiveDate) -> i64 {
    let mut t = day.and_time(NaiveTime::MIN);
    // Every offset in use is a multiple of 15 minutes, so a gap ends on a quarter hour.
    for _ in 0..96 {
        match tz.from_local_datetime(&t) {
            LocalResult::Single(x) | LocalResult::Ambiguous(x, _) => return x.timestamp_millis(),
            LocalResult::None => t += chrono::TimeDelta::minutes(15),
        }
    }
    day.and_time(NaiveTime::MIN).and_utc().timestamp_millis()
}

/// What `acp-usage report` was asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOptions {
    /// The rows.
    pub group: Group,
    /// First day counted (inclusive, in `zone`).
    pub since: Option<NaiveDate>,
    /// Last day counted (inclusive, in `zone`).
    pub until: Option<NaiveDate>,
    /// Only sessions whose agent profile or agent name contains this, ignoring ASCII case.
    pub agent: Option<String>,
    /// Only sessions whose project (working directory) contains this, ignoring ASCII case.
    pub project: Option<String>,
    /// Only calls whose model id contains this, ignoring ASCII case.
    pub model: Option<String>,
    /// Per-model sub-rows within each row.
    pub breakdown: bool,
    /// One JSON object instead of a table.
    pub json: bool,
    /// Which clock days follow.
    pub zone: Zone,
    /// The ledger file (default: [`ledger::path`]).
    pub ledger: Option<PathBuf>,
    /// `report limits`: a row per day or per hour.
    pub per: Per,
    /// Write the report as one HTML page to this file (`-`: stdout) instead of a table.
    pub html: Option<PathBuf>,
}

/// Parses a `--since`/`--until` day: `YYYY-MM-DD` or `YYYYMMDD`.
pub fn parse_date(s: &str) -> Result<NaiveDate, String> {
    let s = s.trim();
    let format =
        if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) { "%Y%m%d" } else { "%Y-%m-%d" };
    NaiveDate::parse_from_str(s, format)
        .map_err(|err| format!("`{s}` is not a date (YYYY-MM-DD or YYYYMMDD): {err}"))
}

/// Runs the command: reads the ledger and prints the report on stdout. A missing, empty or
/// disabled ledger prints an empty report (exit 0) with a note on stderr.
pub fn run(opts: &ReportOptions) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    match write_report(&mut out, opts) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `acp-usage report | head` closes the pipe early; that is not an error.
        Err(err)
            if err
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => Err(err),
    }
}

/// Reads the ledger and writes the report to `out` (or, with `--html`, the page to its file).
fn write_report(out: &mut impl Write, opts: &ReportOptions) -> anyhow::Result<()> {
    if let (Some(since), Some(until)) = (opts.since, opts.until)
        && since > until
    {
        anyhow::bail!("--since {since} is after --until {until}: no day is in between");
    }
    if let Some(file) = &opts.html {
        if opts.group != Group::Daily {
            anyhow::bail!(
                "--html draws the page per day and per session; it takes no `{}`",
                opts.group.name()
            );
        }
        return write_html(out, file, opts);
    }
    if opts.group == Group::Limits {
        return write_limits(out, opts);
    }
    let store = open(opts)?;
    let report = read(store.as_ref(), opts)?;
    if opts.json {
        serde_json::to_writer(&mut *out, &to_json(&report, opts)).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        table::write(out, &report, opts.zone, opts.breakdown, table::WIDTH)?;
    }
    out.flush()?;
    Ok(())
}

/// The ledger `opts` names, open for reading; `None` (with a note on stderr) when there is none
/// to read.
fn open(opts: &ReportOptions) -> anyhow::Result<Option<(Store, PathBuf)>> {
    match opts.ledger.clone().or_else(ledger::path) {
        None => {
            if std::env::var_os(ledger::LEDGER_ENV).is_some_and(|v| v == "off") {
                eprintln!(
                    "acp-usage: the ledger is off (${}=off): nothing to report",
                    ledger::LEDGER_ENV
                );
            } else {
                eprintln!(
                    "acp-usage: no ledger location is known (no $HOME): set ${} or pass --ledger",
                    ledger::LEDGER_ENV
                );
            }
            Ok(None)
        }
        Some(path) if !path.exists() => {
            eprintln!(
                "acp-usage: no ledger at {} yet: nothing to report. acp-usage records every call \
                 there as it relays sessions; `acp-usage import` fills it from transcripts on disk.",
                path.display()
            );
            Ok(None)
        }
        Some(path) => {
            let store = Store::open_read(&path)
                .with_context(|| format!("cannot open the ledger {}", path.display()))?;
            Ok(Some((store, path)))
        }
    }
}

/// The report `opts` asks for from an open ledger (an empty one without), with a note on
/// stderr when no call matches.
fn read(store: Option<&(Store, PathBuf)>, opts: &ReportOptions) -> anyhow::Result<Report> {
    let Some((store, path)) = store else { return Ok(Report::empty(opts.group)) };
    let report = query::read(store, opts)
        .with_context(|| format!("cannot read the ledger {}", path.display()))?;
    if report.rows.is_empty() {
        if filtered(opts) {
            eprintln!("acp-usage: no call in the ledger {} matches", path.display());
        } else {
            eprintln!("acp-usage: the ledger {} has no calls yet", path.display());
        }
    }
    Ok(report)
}

/// `--html FILE`: the per-day report (with its per-model sums) and the per-session one, drawn
/// as one page and written to `file` whole (a temporary file renamed over it), or to `out` for
/// `-`.
fn write_html(out: &mut impl Write, file: &Path, opts: &ReportOptions) -> anyhow::Result<()> {
    let store = open(opts)?;
    let daily = read(store.as_ref(), &ReportOptions { group: Group::Daily, ..opts.clone() })?;
    let sessions = match &store {
        Some((s, path)) => query::read(s, &ReportOptions { group: Group::Session, ..opts.clone() })
            .with_context(|| format!("cannot read the ledger {}", path.display()))?,
        None => Report::empty(Group::Session),
    };
    let page = html::render(&daily, &sessions, opts);
    if file == Path::new("-") {
        out.write_all(page.as_bytes())?;
        out.flush()?;
        return Ok(());
    }
    write_atomically(file, page.as_bytes())
        .with_context(|| format!("cannot write the page to {}", file.display()))?;
    eprintln!(
        "acp-usage: wrote {} ({} days with calls, {} sessions)",
        file.display(),
        daily.rows.len(),
        sessions.rows.len()
    );
    Ok(())
}

/// Writes `bytes` to a temporary file next to `file` and renames it over `file`, so a reader
/// never sees half a page and a failed write leaves what was there.
fn write_atomically(file: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = file.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the path names a directory, not a file")
    })?;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// `report limits`: the windows' observations, grouped.
fn write_limits(out: &mut impl Write, opts: &ReportOptions) -> anyhow::Result<()> {
    let mut current = Vec::new();
    let observed = match opts.ledger.clone().or_else(ledger::path) {
        Some(path) if path.exists() => {
            let store = Store::open_read(&path)
                .with_context(|| format!("cannot open the ledger {}", path.display()))?;
            let since = opts.since.map_or(0, |d| opts.zone.start_of(d));
            let mut observed = store
                .limits_since(since)
                .with_context(|| format!("cannot read the ledger {}", path.display()))?;
            if let Some(until) = opts.until.and_then(|d| d.succ_opt()) {
                let end = opts.zone.start_of(until);
                observed.retain(|l| l.observed_ms < end);
            }
            if observed.is_empty() {
                eprintln!(
                    "acp-usage: no subscription window in the ledger {}: they are recorded when \
                     a provider states one (a subscription login, through the tap or the agent)",
                    path.display()
                );
            }
            let now = ledger::now_ms();
            current = (store.windows(Some(now / 1000)))
                .with_context(|| format!("cannot read the ledger {}", path.display()))?
                .iter()
                .map(|t| t.shown(now))
                .collect();
            observed
        }
        Some(path) => {
            eprintln!("acp-usage: no ledger at {} yet: nothing to report", path.display());
            Vec::new()
        }
        None => {
            eprintln!("acp-usage: no ledger location is known: set ${}", ledger::LEDGER_ENV);
            Vec::new()
        }
    };
    let mut rows = limits::rows(&observed, opts.zone, opts.per);
    limits::forecast(&mut rows, &current);
    if opts.json {
        serde_json::to_writer(&mut *out, &limits::to_json(&rows, opts, opts.per))
            .map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        limits::write_table(out, &rows, opts.zone, opts.per)?;
    }
    out.flush()?;
    Ok(())
}

fn filtered(opts: &ReportOptions) -> bool {
    opts.since.is_some()
        || opts.until.is_some()
        || opts.agent.is_some()
        || opts.project.is_some()
        || opts.model.is_some()
}

/// The `--json` form: `{"report", "currency", "timeZone", "rows": [...], "totals": {...}}`.
pub fn to_json(report: &Report, opts: &ReportOptions) -> Value {
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|row| {
            let mut o = Map::new();
            o.insert(report.group.key().into(), json!(row.key));
            if let Some(s) = &row.session {
                o.insert("agent".into(), json!(s.agent));
                o.insert("project".into(), json!(s.project));
                o.insert("title".into(), json!(s.title));
                o.insert("firstSeen".into(), json!(opts.zone.timestamp(row.first_at)));
                o.insert("lastSeen".into(), json!(opts.zone.timestamp(row.last_at)));
            }
            o.extend(sums_json(&row.sums));
            if opts.breakdown {
                let models = row
                    .models
                    .iter()
                    .map(|(model, sums)| {
                        let mut m = Map::new();
                        m.insert("model".into(), json!(model));
                        m.extend(sums_json(sums));
                        Value::Object(m)
                    })
                    .collect();
                o.insert("models".into(), Value::Array(models));
            }
            Value::Object(o)
        })
        .collect();
    json!({
        "report": report.group.name(),
        "currency": "USD",
        "timeZone": opts.zone.name(),
        "rows": rows,
        "totals": Value::Object(sums_json(&report.totals)),
    })
}

/// The figures of a row in ACP's `Usage` names, plus cost and call counts.
fn sums_json(s: &Sums) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("calls".into(), json!(s.calls));
    o.insert("inputTokens".into(), json!(s.input));
    o.insert("cachedReadTokens".into(), json!(s.cache_read));
    o.insert("cachedWriteTokens".into(), json!(s.cache_write));
    o.insert("outputTokens".into(), json!(s.output));
    o.insert("thoughtTokens".into(), json!(s.thought));
    o.insert("totalTokens".into(), json!(s.total_tokens()));
    o.insert("cost".into(), json!(s.cost().map(usd)));
    o.insert("exactCost".into(), json!(usd(s.exact_cost)));
    o.insert("unpricedCalls".into(), json!(s.unpriced_calls));
    o.insert("unpricedTokens".into(), json!(s.unpriced_tokens));
    o
}

/// Rounds a sum of costs to a billionth of a dollar, so that float addition's last digits
/// (`0.30000000000000004`) stay out of the JSON.
fn usd(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// The Monday of `day`'s ISO week.
fn monday_of(day: NaiveDate) -> NaiveDate {
    day - Days::new(u64::from(day.weekday().num_days_from_monday()))
}

#[cfg(test)]
mod tests;
