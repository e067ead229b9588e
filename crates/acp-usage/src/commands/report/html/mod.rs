//! `report --html FILE`: the report as one self-contained HTML page (cost per day stacked by
//! model, tokens per day by kind, how exact each day's cost is, the costliest sessions, totals).
//!
//! The charts are SVG written here by hand: the page must open offline with nothing fetched and
//! no script run, and no chart crate writes a dependency-free inline SVG page (they draw with
//! JavaScript, or bring a renderer and fonts). A bar chart is a few rectangles and lines.
//!
//! Every figure comes from the same [`Report`]s as the tables and `--json` (the per-day report
//! with its per-model sums, and the per-session report); nothing is summed twice differently.
//! Each figure is also in the DOM as a `data-*` attribute (`data-day`, `data-cost`, ...), to the
//! billionth of a dollar as `--json` has it, so a test or a script can read what was drawn.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::NaiveDate;

use super::query::dearest;
use super::table::{abbreviated, money};
use super::{Report, ReportOptions, Row, Sums, usd};
use crate::numbers::thousands;

mod svg;

use svg::{Axis, Column, HOLLOW, NONE, Segment, chart, legend, swatch};

/// A chart spans at most this many days; a longer range shows the days with calls.
const MAX_DAYS: u64 = 366;
/// Models with a colour of their own; the rest are drawn together as "other models".
const MODEL_COLOURS: [&str; 8] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#9467bd", "#17becf", "#bcbd22", "#e377c2"];
const OTHER_COLOUR: &str = "#8c8c8c";
const OTHER_MODELS: &str = "(other models)";
/// Rows of the costliest-sessions table.
const SESSIONS: usize = 15;

/// The token kinds of the tokens chart: name, class, colour.
const KINDS: [(&str, &str, &str); 4] = [
    ("input (uncached)", "uncached", "#4e79a7"),
    ("cache read", "cache-read", "#76b7b2"),
    ("cache write", "cache-write", "#edc948"),
    ("output", "output", "#e15759"),
];
const EXACT_COLOUR: &str = "#59a14f";
const ESTIMATED_COLOUR: &str = "#f28e2b";

/// `s` safe as HTML text and as a double- or single-quoted attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page for `daily` (a per-day report, with its per-model sums) and `sessions` (the same
/// calls per session), as `opts` selected them.
pub fn render(daily: &Report, sessions: &Report, opts: &ReportOptions) -> String {
    let days = days(daily, opts);
    let by_day: BTreeMap<NaiveDate, &Row> = daily
        .rows
        .iter()
        .filter_map(|r| Some((r.key.as_deref().and_then(parse_day)?, r)))
        .collect();
    let models = model_colours(daily);

    let mut h = String::with_capacity(64 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = write!(h, "<title>acp-usage report");
    if let (Some(a), Some(b)) = (days.first(), days.last()) {
        let _ = write!(h, ", {a} to {b}");
    }
    h.push_str("</title>\n<style>\n");
    h.push_str(CSS);
    h.push_str("</style>\n</head>\n<body>\n<main>\n");
    header(&mut h, &days, opts);
    totals(&mut h, &daily.totals);
    cost_chart(&mut h, &days, &by_day, &models);
    tokens_chart(&mut h, &days, &by_day);
    exactness_chart(&mut h, &days, &by_day);
    sessions_table(&mut h, sessions, &models);
    h.push_str(
        "<footer>Every figure is a sum of the ledger's columns, as <code>acp-usage report \
         --json</code> reads them; costs are those the calls were settled with.</footer>\n",
    );
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

fn parse_day(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

/// The days the charts span: `--since` to `--until` where given, else the first and last day
/// with calls, every day in between (a day without calls is an empty column).
fn days(daily: &Report, opts: &ReportOptions) -> Vec<NaiveDate> {
    let with_calls: Vec<NaiveDate> =
        daily.rows.iter().filter_map(|r| r.key.as_deref().and_then(parse_day)).collect();
    let (Some(&first), Some(&last)) = (with_calls.first(), with_calls.last()) else {
        return Vec::new();
    };
    let (mut lo, mut hi) = (opts.since.unwrap_or(first), opts.until.unwrap_or(last));
    if hi < lo || (hi - lo).num_days() as u64 >= MAX_DAYS {
        (lo, hi) = (first, last);
    }
    lo.iter_days().take_while(|d| *d <= hi).collect()
}

/// Each model's colour, most expensive over the whole period first; models past the palette
/// share [`OTHER_COLOUR`] under [`OTHER_MODELS`].
struct Models {
    /// Model (`None`: unknown) and its sums over the period, in legend order.
    named: Vec<(Option<String>, Sums, &'static str)>,
    /// The models drawn as one.
    other: Sums,
    other_any: bool,
}

impl Models {
    /// The legend name and colour of `model`.
    fn of(&self, model: &Option<String>) -> (String, &'static str) {
        match self.named.iter().find(|(m, _, _)| m == model) {
            Some((m, _, colour)) => (model_name(m), colour),
            None => (OTHER_MODELS.to_owned(), OTHER_COLOUR),
        }
    }
}

fn model_name(m: &Option<String>) -> String {
    m.clone().unwrap_or_else(|| "(unknown model)".to_owned())
}

fn model_colours(daily: &Report) -> Models {
    let mut all: BTreeMap<Option<String>, Sums> = BTreeMap::new();
    for row in &daily.rows {
        for (model, sums) in &row.models {
            all.entry(model.clone()).or_default().add(sums);
        }
    }
    let mut all: Vec<(Option<String>, Sums)> = all.into_iter().collect();
    all.sort_by(|a, b| dearest(&a.1, &b.1).then_with(|| a.0.cmp(&b.0)));
    let mut models = Models { named: Vec::new(), other: Sums::default(), other_any: false };
    let mut palette = MODEL_COLOURS.iter();
    for (model, sums) in all {
        // A model nothing of which was priced draws no bar: it takes no colour.
        let colour = if sums.priced_cost > 0.0 { palette.next() } else { Some(&HOLLOW) };
        match colour {
            Some(colour) => models.named.push((model, sums, colour)),
            None => {
                models.other.add(&sums);
                models.other_any = true;
            }
        }
    }
    models
}

fn header(h: &mut String, days: &[NaiveDate], opts: &ReportOptions) {
    h.push_str("<header>\n<h1>acp-usage report</h1>\n<p class=\"sub\">");
    let fmt = |d: NaiveDate| d.format("%a %Y-%m-%d").to_string();
    match (days.first(), days.last()) {
        (Some(&a), Some(&b)) if a == b => h.push_str(&fmt(a)),
        (Some(&a), Some(&b)) => {
            let _ = write!(h, "{} to {} ({} days)", fmt(a), fmt(b), days.len());
        }
        _ => h.push_str("No calls"),
    }
    let zone = match opts.zone {
        super::Zone::Utc => "UTC",
        super::Zone::Local => "local time",
    };
    let _ = write!(h, " · days in {zone} · costs in USD");
    for (what, v) in [("agent", &opts.agent), ("project", &opts.project), ("model", &opts.model)] {
        if let Some(v) = v {
            let _ = write!(h, " · {what} contains “{}”", escape(v));
        }
    }
    h.push_str("</p>\n</header>\n");
}

fn dollars(v: f64) -> String {
    format!("${}", money(v))
}

/// A cost as people read it: `$12.34`, `-` when nothing was priced, `*` when part was not.
fn cost_text(s: &Sums) -> String {
    match s.cost() {
        None => "–".to_owned(),
        Some(c) if s.unpriced_calls > 0 => format!("{}*", dollars(c)),
        Some(c) => dollars(c),
    }
}

/// A value for a `data-*` attribute: a cost as `--json` rounds it.
fn cost_attr(v: f64) -> String {
    format!("{}", usd(v))
}

fn uncached(s: &Sums) -> u64 {
    s.input.saturating_sub(s.cache_read + s.cache_write)
}

fn totals(h: &mut String, t: &Sums) {
    let _ = write!(
        h,
        "<section id=\"totals\" data-total-cost=\"{}\" data-exact-cost=\"{}\" data-calls=\"{}\" \
         data-uncached-tokens=\"{}\" data-cache-read-tokens=\"{}\" data-cache-write-tokens=\"{}\" \
         data-output-tokens=\"{}\" data-total-tokens=\"{}\" data-unpriced-calls=\"{}\" \
         data-unpriced-tokens=\"{}\">\n<h2>Totals</h2>\n<div class=\"cards\">\n",
        cost_attr(t.priced_cost),
        cost_attr(t.exact_cost),
        t.calls,
        uncached(t),
        t.cache_read,
        t.cache_write,
        t.output,
        t.total_tokens(),
        t.unpriced_calls,
        t.unpriced_tokens,
    );
    let exact = if t.priced_cost > 0.0 {
        format!("{:.0}% exact", (t.exact_cost / t.priced_cost * 100.0).floor().min(100.0))
    } else {
        String::new()
    };
    card(h, "Cost", &cost_text(t), &exact);
    card(h, "Calls", &thousands(t.calls), "model calls");
    card(
        h,
        "Tokens",
        &abbreviated(t.total_tokens()),
        &format!("{} in all", thousands(t.total_tokens())),
    );
    for (name, n) in [
        ("Input (uncached)", uncached(t)),
        ("Cache read", t.cache_read),
        ("Cache write", t.cache_write),
        ("Output", t.output),
    ] {
        card(h, name, &abbreviated(n), &thousands(n));
    }
    if t.unpriced_calls > 0 {
        card(
            h,
            "Unpriced",
            &format!("{} calls", thousands(t.unpriced_calls)),
            &format!("{} tokens, no price known: not in the cost", abbreviated(t.unpriced_tokens)),
        );
    }
    h.push_str("</div>\n</section>\n");
}

fn card(h: &mut String, name: &str, value: &str, note: &str) {
    let _ = writeln!(
        h,
        "<div class=\"card\"><div class=\"name\">{}</div><div class=\"value\">{}</div>\
         <div class=\"note\">{}</div></div>",
        escape(name),
        escape(value),
        escape(note)
    );
}

fn cost_chart(
    h: &mut String,
    days: &[NaiveDate],
    by_day: &BTreeMap<NaiveDate, &Row>,
    models: &Models,
) {
    h.push_str("<section id=\"cost-per-day\">\n<h2>Cost per day, by model</h2>\n");
    let columns: Vec<Column> = days
        .iter()
        .map(|&day| {
            let row = by_day.get(&day);
            let cost = row.map_or(0.0, |r| r.sums.priced_cost);
            // The day's models in legend order (the bottom of the stack is the dearest overall),
            // those past the palette summed into one part.
            let mut parts: Vec<(usize, String, &'static str, Sums)> = Vec::new();
            for (model, sums) in row.map(|r| r.models.as_slice()).unwrap_or_default() {
                let (name, colour) = models.of(model);
                let order = models
                    .named
                    .iter()
                    .position(|(m, _, _)| m == model)
                    .unwrap_or(models.named.len());
                match parts.iter_mut().find(|p| p.1 == name) {
                    Some(p) => p.3.add(sums),
                    None => parts.push((order, name, colour, sums.clone())),
                }
            }
            parts.sort_by_key(|p| p.0);
            let segments = parts
                .into_iter()
                .filter(|p| p.3.priced_cost > 0.0)
                .map(|(_, name, colour, sums)| Segment {
                    value: sums.priced_cost,
                    colour,
                    attrs: format!(
                        "data-model=\"{}\" data-cost=\"{}\"",
                        escape(&name),
                        cost_attr(sums.priced_cost)
                    ),
                    tip: format!("{name}: {}", cost_text(&sums)),
                })
                .collect();
            Column {
                day,
                attrs: format!("data-cost=\"{}\"", cost_attr(cost)),
                segments,
                note: None,
            }
        })
        .collect();
    chart(h, "cost-per-day", "Cost per day, stacked by model", &columns, Axis::Dollars);
    let mut entries: Vec<(&str, String)> = models
        .named
        .iter()
        .map(|(m, sums, colour)| {
            (
                *colour,
                format!(
                    "{} <span class=\"dim\">{}</span>",
                    escape(&model_name(m)),
                    match sums.cost() {
                        None => format!("unpriced ({} calls)", thousands(sums.calls)),
                        Some(_) => escape(&cost_text(sums)),
                    }
                ),
            )
        })
        .collect();
    if models.other_any {
        entries.push((
            OTHER_COLOUR,
            format!(
                "{OTHER_MODELS} <span class=\"dim\">{}</span>",
                escape(&cost_text(&models.other))
            ),
        ));
    }
    legend(h, &entries);
    h.push_str("</section>\n");
}

fn tokens_chart(h: &mut String, days: &[NaiveDate], by_day: &BTreeMap<NaiveDate, &Row>) {
    h.push_str("<section id=\"tokens-per-day\">\n<h2>Tokens per day, by kind</h2>\n");
    let columns: Vec<Column> = days
        .iter()
        .map(|&day| {
            let s = by_day.get(&day).map(|r| r.sums.clone()).unwrap_or_default();
            let counts = [uncached(&s), s.cache_read, s.cache_write, s.output];
            let segments = KINDS
                .iter()
                .zip(counts)
                .filter(|(_, n)| *n > 0)
                .map(|(&(name, class, colour), n)| Segment {
                    value: n as f64,
                    colour,
                    attrs: format!("data-kind=\"{class}\" data-tokens=\"{n}\""),
                    tip: format!("{name}: {}", thousands(n)),
                })
                .collect();
            Column {
                day,
                attrs: format!(
                    "data-uncached-tokens=\"{}\" data-cache-read-tokens=\"{}\" \
                     data-cache-write-tokens=\"{}\" data-output-tokens=\"{}\" data-tokens=\"{}\"",
                    counts[0],
                    counts[1],
                    counts[2],
                    counts[3],
                    s.total_tokens()
                ),
                segments,
                note: None,
            }
        })
        .collect();
    chart(h, "tokens-per-day", "Tokens per day, stacked by kind", &columns, Axis::Tokens);
    let entries: Vec<(&str, String)> =
        KINDS.iter().map(|&(name, _, colour)| (colour, escape(name))).collect();
    legend(h, &entries);
    h.push_str("</section>\n");
}

fn exactness_chart(h: &mut String, days: &[NaiveDate], by_day: &BTreeMap<NaiveDate, &Row>) {
    h.push_str(
        "<section id=\"exactness-per-day\">\n<h2>How exact each day's cost is</h2>\n<p \
         class=\"explain\">Exact: priced from exact token counts and exact prices. Estimated: \
         counts guessed from what the agent showed, or a modifier priced at 1x. Unpriced: calls \
         of models the catalog does not know, left out of the cost (their count is above the \
         bar).</p>\n",
    );
    let columns: Vec<Column> = days
        .iter()
        .map(|&day| {
            let s = by_day.get(&day).map(|r| r.sums.clone()).unwrap_or_default();
            let estimated = (s.priced_cost - s.exact_cost).max(0.0);
            let mut segments = Vec::new();
            for (what, v, colour) in
                [("exact", s.exact_cost, EXACT_COLOUR), ("estimated", estimated, ESTIMATED_COLOUR)]
            {
                if v > 0.0 {
                    segments.push(Segment {
                        value: v,
                        colour,
                        attrs: format!("data-kind=\"{what}\" data-cost=\"{}\"", cost_attr(v)),
                        tip: format!("{what}: {}", dollars(v)),
                    });
                }
            }
            Column {
                day,
                attrs: format!(
                    "data-cost=\"{}\" data-exact-cost=\"{}\" data-estimated-cost=\"{}\" \
                     data-unpriced-calls=\"{}\" data-unpriced-tokens=\"{}\"",
                    cost_attr(s.priced_cost),
                    cost_attr(s.exact_cost),
                    cost_attr(estimated),
                    s.unpriced_calls,
                    s.unpriced_tokens
                ),
                segments,
                note: (s.unpriced_calls > 0).then(|| format!("{}?", s.unpriced_calls)),
            }
        })
        .collect();
    chart(h, "exactness-per-day", "Exact and estimated cost per day", &columns, Axis::Dollars);
    legend(
        h,
        &[
            (EXACT_COLOUR, "exact".to_owned()),
            (ESTIMATED_COLOUR, "estimated".to_owned()),
            (
                NONE,
                "<span class=\"warn\">N?</span> calls with no price (not in the cost)".to_owned(),
            ),
        ],
    );
    // The same per day, in figures.
    h.push_str(
        "<table class=\"days\">\n<thead><tr><th>Day</th><th>Cost</th><th>Exact</th>\
         <th>Estimated</th><th>Unpriced calls</th><th>Unpriced tokens</th></tr></thead>\n<tbody>\n",
    );
    for (day, row) in by_day {
        let s = &row.sums;
        let _ = writeln!(
            h,
            "<tr data-day=\"{day}\"><td>{day}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            escape(&cost_text(s)),
            dollars(s.exact_cost),
            dollars((s.priced_cost - s.exact_cost).max(0.0)),
            thousands(s.unpriced_calls),
            thousands(s.unpriced_tokens)
        );
    }
    h.push_str("</tbody>\n</table>\n");
    if by_day.values().any(|r| r.sums.unpriced_calls > 0) {
        h.push_str(
            "<p class=\"explain\">* part of the day's calls have no price and are left out of \
             its cost; – none of them has one.</p>\n",
        );
    }
    h.push_str("</section>\n");
}

fn sessions_table(h: &mut String, sessions: &Report, models: &Models) {
    let mut rows: Vec<&Row> = sessions.rows.iter().collect();
    rows.sort_by(|a, b| dearest(&a.sums, &b.sums).then(a.first_at.cmp(&b.first_at)));
    let _ = writeln!(
        h,
        "<section id=\"sessions\">\n<h2>Costliest sessions</h2>\n<p class=\"explain\">The {} \
         dearest of {} sessions.</p>",
        rows.len().min(SESSIONS),
        rows.len()
    );
    h.push_str(
        "<table class=\"sessions\">\n<thead><tr><th>Agent</th><th>Session</th><th>Model</th>\
         <th>Calls</th><th>Tokens</th><th>Cost</th></tr></thead>\n<tbody>\n",
    );
    for row in rows.iter().take(SESSIONS) {
        let meta = row.session.clone().unwrap_or_default();
        let id = row.key.clone().unwrap_or_default();
        let what = match &meta.title {
            Some(t) => escape(t),
            None => format!(
                "<span class=\"dim\">{}</span>",
                escape(&id.chars().take(8).collect::<String>())
            ),
        };
        let project = meta
            .project
            .as_deref()
            .map(|p| format!("<div class=\"path\">{}</div>", escape(p)))
            .unwrap_or_default();
        let model = match row.models.first() {
            Some((m, _)) => {
                let (_, colour) = models.of(m);
                let more = match row.models.len() {
                    1 => String::new(),
                    n => format!(" <span class=\"dim\">+{}</span>", n - 1),
                };
                format!("{}{}{more}", swatch(colour), escape(&model_name(m)))
            }
            None => String::new(),
        };
        let s = &row.sums;
        let _ = writeln!(
            h,
            "<tr data-session=\"{}\" data-cost=\"{}\" data-calls=\"{}\" data-tokens=\"{}\">\
             <td>{}</td><td><div class=\"title\">{what}</div>{project}</td><td>{model}</td>\
             <td class=\"num\">{}</td><td class=\"num\" title=\"{}\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&id),
            cost_attr(s.priced_cost),
            s.calls,
            s.total_tokens(),
            escape(&meta.agent),
            thousands(s.calls),
            thousands(s.total_tokens()),
            abbreviated(s.total_tokens()),
            escape(&cost_text(s)),
        );
    }
    h.push_str("</tbody>\n</table>\n</section>\n");
}

const CSS: &str = include_str!("page.css");
