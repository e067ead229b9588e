//! The terminal form of a report: an aligned table no wider than [`WIDTH`] columns, with a
//! totals row and notes for unpriced and estimated costs.
//!
//! Numbers are written in full with thousands separators; when that does not fit, token counts
//! are abbreviated (`1.23M`), and when even that does not fit, the first column is cut with
//! `…` (a project path from its start, since its end names it).

use std::io::{self, Write};

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::numbers::thousands;

use super::{Group, Report, Sums, Zone};

/// The widest table written.
pub const WIDTH: usize = 100;

/// The number columns' headers, on two lines so that the narrow columns stay narrow.
const HEADS: [(&str, &str); 8] = [
    ("", "CALLS"),
    ("", "INPUT"),
    ("CACHE", "READ"),
    ("CACHE", "WRITE"),
    ("", "OUTPUT"),
    ("", "THOUGHTS"),
    ("COST", "(USD)"),
    ("", "EXACT"),
];
const GAP: &str = "  ";
/// The first column is never cut narrower than this.
const MIN_KEY: usize = 12;

/// One line of the table before layout.
struct Entry<'a> {
    key: String,
    /// Cut from the start when too wide (paths).
    keep_end: bool,
    sums: &'a Sums,
}

/// Writes `report` as a table of at most `width` columns (sub-rows per model with
/// `breakdown`).
pub fn write(
    w: &mut impl Write,
    report: &Report,
    zone: Zone,
    breakdown: bool,
    width: usize,
) -> io::Result<()> {
    let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
    let mut entries = Vec::new();
    for row in &report.rows {
        let key = match (&row.key, report.group) {
            (Some(id), Group::Session) => {
                let s = row.session.clone().unwrap_or_default();
                // A title says more than an id; without one, the id's first 8 characters tell
                // sessions apart (`--json` has it whole).
                let what = s.title.unwrap_or_else(|| id.chars().take(8).collect());
                format!("{} {} {what}", zone.date_of(row.first_at), s.agent)
            }
            (Some(p), Group::Project) => match &home {
                Some(h) if p.starts_with(h.as_str()) && p[h.len()..].starts_with('/') => {
                    format!("~{}", &p[h.len()..])
                }
                _ => p.clone(),
            },
            (Some(k), _) => k.clone(),
            (None, Group::Project) => "(no project)".to_owned(),
            (None, _) => "(unknown)".to_owned(),
        };
        entries.push(Entry { key, keep_end: report.group == Group::Project, sums: &row.sums });
        // Per-model sub-rows of a per-model report would repeat their row.
        if breakdown && report.group != Group::Model {
            for (model, sums) in &row.models {
                let name = model.as_deref().unwrap_or("(unknown model)");
                entries.push(Entry { key: format!("  └ {name}"), keep_end: false, sums });
            }
        }
    }
    let rows = entries.len();
    entries.push(Entry { key: "TOTAL".to_owned(), keep_end: false, sums: &report.totals });

    let key_head = match report.group {
        Group::Daily | Group::Limits => "DATE",
        Group::Weekly => "WEEK OF",
        Group::Monthly => "MONTH",
        Group::Session => "SESSION",
        Group::Project => "PROJECT",
        Group::Agent => "AGENT",
        Group::Model => "MODEL",
    };
    let natural_key =
        entries.iter().map(|e| e.key.width()).chain([key_head.width()]).max().unwrap_or(0);
    let mut cells: Vec<[String; 8]> = entries.iter().map(|e| numbers(e.sums, false)).collect();
    let mut widths = column_widths(&cells);
    if natural_key + numbers_width(&widths) > width {
        cells = entries.iter().map(|e| numbers(e.sums, true)).collect();
        widths = column_widths(&cells);
    }
    let key_w = natural_key.min(width.saturating_sub(numbers_width(&widths)).max(MIN_KEY));
    let line_w = key_w + numbers_width(&widths);

    write_line(w, "", &HEADS.map(|h| h.0.to_owned()), key_w, &widths)?;
    write_line(w, key_head, &HEADS.map(|h| h.1.to_owned()), key_w, &widths)?;
    writeln!(w, "{}", "─".repeat(line_w))?;
    for (k, (e, c)) in entries.iter().zip(&cells).enumerate() {
        // A rule above the totals, unless it would double the header's.
        if k == rows && rows > 0 {
            writeln!(w, "{}", "─".repeat(line_w))?;
        }
        write_line(w, &cut(&e.key, key_w, e.keep_end), c, key_w, &widths)?;
    }

    for note in notes(report) {
        for line in wrap(&note, width) {
            writeln!(w, "{line}")?;
        }
    }
    Ok(())
}

/// What the table's reader must know to read it: the calls left unpriced (and their models),
/// and that EXACT is a share of the cost.
fn notes(report: &Report) -> Vec<String> {
    let t = &report.totals;
    let mut notes = Vec::new();
    if t.unpriced_calls > 0 {
        const LISTED: usize = 5;
        let mut models: Vec<&str> = report
            .unpriced_models
            .iter()
            .take(LISTED)
            .map(|m| m.as_deref().unwrap_or("(unknown model)"))
            .collect();
        let more = format!("{} more", report.unpriced_models.len().saturating_sub(LISTED));
        if report.unpriced_models.len() > LISTED {
            models.push(&more);
        }
        let calls = if t.unpriced_calls == 1 { "call" } else { "calls" };
        notes.push(format!(
            "Unpriced: {} {calls} of models the catalog does not know ({}) are left out of the \
             cost; * marks a partial cost, - a row with none priced.",
            thousands(t.unpriced_calls),
            models.join(", ")
        ));
    }
    if t.exact_cost < t.priced_cost * (1.0 - 1e-9) {
        notes.push("EXACT: the share of the cost from exact counts; the rest is estimated.".into());
    }
    notes
}

/// `text` in lines of at most `width` columns, broken at spaces (a longer word stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.width() + 1 + word.width() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The width the number columns take, gaps included.
fn numbers_width(widths: &[usize; 8]) -> usize {
    widths.iter().map(|w| w + GAP.len()).sum()
}

fn column_widths(cells: &[[String; 8]]) -> [usize; 8] {
    let mut widths = HEADS.map(|(top, bottom)| top.len().max(bottom.len()));
    for row in cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.width());
        }
    }
    widths
}

fn write_line(
    w: &mut impl Write,
    key: &str,
    cells: &[String; 8],
    key_w: usize,
    widths: &[usize; 8],
) -> io::Result<()> {
    let mut line = format!("{key}{}", " ".repeat(key_w.saturating_sub(key.width())));
    for (c, cw) in cells.iter().zip(widths) {
        line.push_str(GAP);
        line.push_str(&" ".repeat(cw.saturating_sub(c.width())));
        line.push_str(c);
    }
    // The first header line is blank under the key and the one-line headers.
    writeln!(w, "{}", line.trim_end())
}

/// The number cells of a line; token counts abbreviated when `short`.
fn numbers(s: &Sums, short: bool) -> [String; 8] {
    let tokens = |n: u64| if short { abbreviated(n) } else { thousands(n) };
    [
        thousands(s.calls),
        tokens(s.input),
        tokens(s.cache_read),
        tokens(s.cache_write),
        tokens(s.output),
        tokens(s.thought),
        match s.cost() {
            None => "-".to_owned(),
            Some(c) if s.unpriced_calls > 0 => format!("{}*", money(c)),
            Some(c) => money(c),
        },
        exact_share(s),
    ]
}

/// Three significant digits with a k/M/B/T suffix from 10,000 on: `12.3k`, `1.23M`.
pub(super) fn abbreviated(n: u64) -> String {
    if n < 10_000 {
        return thousands(n);
    }
    let units = [(1e3, "k"), (1e6, "M"), (1e9, "B"), (1e12, "T")];
    for (k, (unit, suffix)) in units.iter().enumerate() {
        let v = n as f64 / unit;
        // Past 999.5 it would print as 1000: the next unit says it in fewer digits.
        if v >= 999.5 && k + 1 < units.len() {
            continue;
        }
        return if v < 9.995 {
            format!("{v:.2}{suffix}")
        } else if v < 99.95 {
            format!("{v:.1}{suffix}")
        } else {
            format!("{v:.0}{suffix}")
        };
    }
    unreachable!("the last unit always returns")
}

/// Dollars with cents and thousands separators; `<0.01` for a cost that would print as 0.00.
pub(super) fn money(v: f64) -> String {
    if v > 0.0 && v < 0.005 {
        return "<0.01".to_owned();
    }
    let cents = (v * 100.0).round() as u64;
    format!("{}.{:02}", thousands(cents / 100), cents % 100)
}

/// The share of the cost from exact counts: `100%` only when all of it is, else rounded down.
fn exact_share(s: &Sums) -> String {
    match s.cost() {
        Some(c) if c > 0.0 => {
            if s.exact_cost >= c * (1.0 - 1e-9) {
                "100%".to_owned()
            } else {
                format!("{}%", ((s.exact_cost / c) * 100.0).floor().min(99.0) as u64)
            }
        }
        _ => "-".to_owned(),
    }
}

/// `s` cut to `w` columns with `…`, keeping its end when `keep_end`.
fn cut(s: &str, w: usize, keep_end: bool) -> String {
    if s.width() <= w {
        return s.to_owned();
    }
    let mut room = w.saturating_sub(1);
    let mut kept = Vec::new();
    let chars: Box<dyn Iterator<Item = char>> =
        if keep_end { Box::new(s.chars().rev()) } else { Box::new(s.chars()) };
    for ch in chars {
        let cw = ch.width().unwrap_or(0);
        if cw > room {
            break;
        }
        room -= cw;
        kept.push(ch);
    }
    if keep_end {
        kept.push('…');
        kept.iter().rev().collect()
    } else {
        kept.push('…');
        kept.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_at_a_glance() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567_890), "1,234,567,890");
        assert_eq!(abbreviated(9_999), "9,999");
        assert_eq!(abbreviated(12_345), "12.3k");
        assert_eq!(abbreviated(123_456), "123k");
        assert_eq!(abbreviated(999_600), "1.00M");
        assert_eq!(abbreviated(1_234_567), "1.23M");
        assert_eq!(abbreviated(45_600_000_000), "45.6B");
        assert_eq!(money(0.0), "0.00");
        assert_eq!(money(0.004), "<0.01");
        assert_eq!(money(1234.567), "1,234.57");
    }

    #[test]
    fn notes_wrap_at_spaces() {
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(wrap("unbreakable-word x", 5), ["unbreakable-word", "x"]);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn cut_keeps_the_informative_end() {
        assert_eq!(cut("short", 10, false), "short");
        assert_eq!(cut("abcdefghij", 5, false), "abcd…");
        assert_eq!(cut("/home/me/src/project", 10, true), "…c/project");
        // Wide characters count two columns.
        assert_eq!(cut("日本語のタイトル", 7, false), "日本語…");
        assert_eq!(cut("日本語のタイトル", 7, false).width(), 7);
    }
}
