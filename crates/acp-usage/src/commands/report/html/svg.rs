//! The charts of `report --html`: stacked bars, one per day, drawn as inline SVG by hand (a
//! few rectangles, lines and labels; no chart crate writes a dependency-free inline SVG), with a
//! y axis of round steps and the dates under the bars.

use std::fmt::Write as _;

use chrono::NaiveDate;

use super::escape;
use crate::numbers::thousands;

/// The charts' drawing size (the SVG scales to the page's width).
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 280.0;
/// Room for the y axis' labels, the dates and a note above the bars.
const LEFT: f64 = 70.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 22.0;
const BOTTOM: f64 = 30.0;
/// At most this many date labels under a chart.
const MAX_LABELS: usize = 16;

/// One part of a day's bar.
pub(super) struct Segment {
    pub(super) value: f64,
    pub(super) colour: &'static str,
    /// `data-*` attributes (already escaped).
    pub(super) attrs: String,
    /// The tooltip.
    pub(super) tip: String,
}

/// One day's column.
pub(super) struct Column {
    pub(super) day: NaiveDate,
    /// The `<g>`'s `data-*` attributes besides `data-day` (already escaped).
    pub(super) attrs: String,
    pub(super) segments: Vec<Segment>,
    /// A short text above the bar (unpriced calls).
    pub(super) note: Option<String>,
}

/// How a chart's y axis reads.
#[derive(Clone, Copy)]
pub(super) enum Axis {
    Dollars,
    Tokens,
}

impl Axis {
    fn label(self, v: f64, step: f64) -> String {
        match self {
            Axis::Dollars => {
                // As many decimals as the step needs (0.25 needs two, 5 none).
                let decimals = (0..6).find(|d| {
                    let x = step * 10f64.powi(*d);
                    (x - x.round()).abs() < 1e-6
                });
                let decimals = decimals.unwrap_or(6) as usize;
                if decimals == 0 {
                    format!("${}", thousands(v.round() as u64))
                } else {
                    // Cents at least: $0.50, not $0.5.
                    let decimals = decimals.max(2);
                    format!("${v:.decimals$}")
                }
            }
            Axis::Tokens => short(v),
        }
    }
}

/// A token count for an axis: `0`, `500`, `1.5k`, `2M`.
fn short(v: f64) -> String {
    let (div, suffix) = match v {
        v if v >= 1e12 => (1e12, "T"),
        v if v >= 1e9 => (1e9, "B"),
        v if v >= 1e6 => (1e6, "M"),
        v if v >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let text = format!("{:.2}", v / div);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// A round step for about five grid lines up to `max`, and the top of the axis.
fn ticks(max: f64, axis: Axis) -> (f64, f64) {
    let max = if max > 0.0 {
        max
    } else {
        match axis {
            Axis::Dollars => 1.0,
            Axis::Tokens => 1000.0,
        }
    };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap();
    if matches!(axis, Axis::Tokens) {
        step = step.max(1.0).round();
    }
    (step, (max / step - 1e-9).ceil() * step)
}

/// A stacked bar chart, one column per day; `label` names it for screen readers.
pub(super) fn chart(h: &mut String, id: &str, label: &str, columns: &[Column], axis: Axis) {
    let _ = writeln!(
        h,
        "<figure class=\"chart\"><svg id=\"{id}-svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" aria-label=\"{}\">",
        escape(label)
    );
    if columns.is_empty() {
        let _ = writeln!(
            h,
            "<text class=\"empty\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">No calls in this \
             period</text>\n</svg></figure>",
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return;
    }
    let max =
        columns.iter().map(|c| c.segments.iter().map(|s| s.value).sum::<f64>()).fold(0.0, f64::max);
    let (step, top) = ticks(max, axis);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let base = TOP + plot_h;
    let scale = plot_h / top;
    // The grid and the y axis' labels.
    h.push_str("<g class=\"grid\">\n");
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let y = base - v * scale;
        let _ = writeln!(
            h,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.2}\" y2=\"{y:.2}\"/><text class=\"tick\" \
             x=\"{}\" y=\"{:.2}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 8.0,
            y + 4.0,
            escape(&axis.label(v, step))
        );
        v += step;
    }
    h.push_str("</g>\n");
    let slot = plot_w / columns.len() as f64;
    let bar = (slot * 0.7).clamp(1.0, 48.0);
    let every = columns.len().div_ceil(MAX_LABELS);
    for (k, col) in columns.iter().enumerate() {
        let x = LEFT + slot * k as f64 + (slot - bar) / 2.0;
        let _ = writeln!(h, "<g class=\"day\" data-day=\"{}\" {}>", col.day, col.attrs);
        let mut y = base;
        for s in &col.segments {
            let height = s.value * scale;
            y -= height;
            let _ = writeln!(
                h,
                "<rect class=\"bar\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{bar:.2}\" \
                 height=\"{height:.2}\" fill=\"{}\" {}><title>{} · {}</title></rect>",
                s.colour,
                s.attrs,
                col.day,
                escape(&s.tip)
            );
        }
        if let Some(note) = &col.note {
            let _ = writeln!(
                h,
                "<text class=\"note\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                (y - 5.0).max(10.0),
                escape(note)
            );
        }
        if k % every == 0 {
            let _ = writeln!(
                h,
                "<text class=\"date\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                base + 18.0,
                col.day.format("%b %-d")
            );
        }
        h.push_str("</g>\n");
    }
    let _ = writeln!(
        h,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{base}\" y2=\"{base}\"/>",
        WIDTH - RIGHT
    );
    h.push_str("</svg></figure>\n");
}

/// The swatch of a model with nothing priced (it has no bar).
pub(super) const HOLLOW: &str = "hollow";
/// No swatch.
pub(super) const NONE: &str = "";

/// A colour's swatch: a small square, an outline for [`HOLLOW`], nothing for [`NONE`].
pub(super) fn swatch(colour: &str) -> String {
    match colour {
        NONE => String::new(),
        HOLLOW => "<span class=\"swatch hollow\"></span>".to_owned(),
        c => format!("<span class=\"swatch\" style=\"background:{c}\"></span>"),
    }
}

/// A legend: each entry a swatch and a text (already escaped).
pub(super) fn legend(h: &mut String, entries: &[(&str, String)]) {
    h.push_str("<ul class=\"legend\">\n");
    for (colour, text) in entries {
        let _ = writeln!(h, "<li>{}{text}</li>", swatch(colour));
    }
    h.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_step_roundly_and_read_shortly() {
        assert_eq!(ticks(3.21, Axis::Dollars), (1.0, 4.0));
        assert_eq!(ticks(0.3, Axis::Dollars), (0.1, 0.30000000000000004));
        assert_eq!(ticks(0.0, Axis::Dollars), (0.2, 1.0));
        assert_eq!(ticks(1_210_000.0, Axis::Tokens), (250_000.0, 1_250_000.0));
        assert_eq!(ticks(3.0, Axis::Tokens), (1.0, 3.0));
        assert_eq!(Axis::Dollars.label(0.5, 0.5), "$0.50");
        assert_eq!(Axis::Dollars.label(0.05, 0.025), "$0.050");
        assert_eq!(Axis::Dollars.label(2000.0, 1000.0), "$2,000");
        assert_eq!(Axis::Tokens.label(1_250_000.0, 250_000.0), "1.25M");
        assert_eq!(short(0.0), "0");
        assert_eq!(short(500.0), "500");
        assert_eq!(short(1500.0), "1.5k");
        assert_eq!(short(2e9), "2B");
    }
}
