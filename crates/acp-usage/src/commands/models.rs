//! `acp-usage models [QUERY] [--json]`: print what the catalog knows.
//!
//! The catalog is the one the relay would use (embedded, config file, `--catalog`), so this is
//! also how a user checks that an override took effect. Prices are shown in USD per million
//! tokens, the unit providers publish, with every default resolved (a missing cache price is
//! shown as the price actually billed).

use std::io::{self, Write};
use std::process::ExitCode;

use acp_usage_core::catalog::Corrections;
use acp_usage_core::pricing::prices_for_prompt;
use acp_usage_core::{Catalog, ModelInfo, Modifier, Prices};
use serde_json::{Value, json};

use crate::options::RelayOptions;

/// Runs the command: the models whose id contains `query` (all when `None`), as a table or as
/// JSON lines (`json`), from the catalog the relay would use with `args`.
pub fn run(args: &RelayOptions, query: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let config = args.load_config()?;
    let catalog = &config.catalog;
    let query = query.unwrap_or("").trim();
    let mut models = catalog.search(query);
    // A concrete id as an agent reports it (`claude-opus-4-8[1m]`, `models/gemini-2.5-pro`)
    // is not a substring of its catalog key; show what it resolves to.
    if models.is_empty()
        && let Some(hit) = catalog.lookup(query)
    {
        eprintln!("`{query}` resolves to `{}`", hit.id);
        models.push(hit);
    }
    if models.is_empty() {
        eprintln!("no model in the catalog matches `{query}` (catalog: {})", catalog.source());
        return Ok(ExitCode::from(1));
    }
    let written = if json { write_json(&models) } else { write_table(&models) };
    match written {
        Ok(()) => {}
        // `acp-usage models | head` closes the pipe early; that is not an error.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(err) => return Err(err.into()),
    }
    let noun = if models.len() == 1 { "model" } else { "models" };
    eprintln!(
        "{} {noun} matched; prices in USD per 1M tokens; catalog: {}",
        models.len(),
        source(catalog)
    );
    Ok(ExitCode::SUCCESS)
}

fn source(catalog: &Catalog) -> &str {
    if catalog.source().is_empty() { "(unnamed)" } else { catalog.source() }
}

/// Per-token price → USD per 1M tokens, rounded to a millionth of a dollar so that `3e-6`
/// prints as 3, not 2.9999999999999996.
fn per_million(v: f64) -> f64 {
    (v * 1e12).round() / 1e6
}

/// At least two decimals (`3.00`), more when the price needs them (`0.075`).
fn fmt_price(v: f64) -> String {
    let v = per_million(v);
    let two = format!("{v:.2}");
    if two.parse::<f64>().ok() == Some(v) { two } else { v.to_string() }
}

/// The base prices and, when there is a tier, its threshold and prices, all resolved.
fn resolved(p: &Prices) -> (Prices, Option<(u64, Prices)>) {
    let base = prices_for_prompt(p, 0);
    let tier = p.tier.as_ref().map(|t| (t.threshold, prices_for_prompt(p, t.threshold + 1)));
    (base, tier)
}

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".to_owned())
}

fn write_table(models: &[&ModelInfo]) -> io::Result<()> {
    let header = [
        "MODEL",
        "PROVIDER",
        "WINDOW",
        "MAX OUT",
        "INPUT",
        "OUTPUT",
        "CACHE READ",
        "WRITE 5M",
        "WRITE 1H",
        "LONG CONTEXT (IN/OUT)",
    ];
    let mut rows: Vec<[String; 10]> = Vec::with_capacity(models.len());
    for m in models {
        let mut row: [String; 10] = Default::default();
        row[0] = m.id.clone();
        row[1] = if m.provider.is_empty() { "-".to_owned() } else { m.provider.clone() };
        row[2] = opt(m.max_input);
        row[3] = opt(m.max_output);
        match &m.prices {
            Some(p) => {
                let (base, tier) = resolved(p);
                row[4] = fmt_price(base.input);
                row[5] = fmt_price(base.output);
                row[6] = fmt_price(base.cache_read.unwrap_or(base.input));
                row[7] = fmt_price(base.cache_write_5m.unwrap_or(base.input));
                row[8] = fmt_price(base.cache_write_1h.unwrap_or(base.input));
                row[9] = match tier {
                    Some((threshold, t)) => {
                        format!(">{threshold}: {}/{}", fmt_price(t.input), fmt_price(t.output))
                    }
                    None => "-".to_owned(),
                };
            }
            None => {
                for cell in &mut row[4..] {
                    *cell = "-".to_owned();
                }
            }
        }
        rows.push(row);
    }
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = io::stdout().lock();
    let header: [String; 10] = header.map(str::to_owned);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            // Names left-aligned, numbers right-aligned; the last column is not padded.
            match i {
                0 | 1 => line.push_str(&format!("{cell:<w$}")),
                9 => line.push_str(cell),
                _ => line.push_str(&format!("{cell:>w$}")),
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    out.flush()
}

fn write_json(models: &[&ModelInfo]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for m in models {
        let (prices, long_context) = match &m.prices {
            Some(p) => {
                let (base, tier) = resolved(p);
                let tier = tier.map(|(threshold, t)| {
                    let mut v = price_json(&t);
                    v["threshold"] = json!(threshold);
                    v
                });
                (price_json(&base), tier.unwrap_or(Value::Null))
            }
            None => (Value::Null, Value::Null),
        };
        let line = json!({
            "id": m.id,
            "provider": m.provider,
            "window": m.max_input,
            "max_output": m.max_output,
            "usd_per_million_tokens": prices,
            "long_context": long_context,
            "multipliers": multipliers_json(m),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()
}

/// The request modifiers' multipliers pricing uses for the model: the catalog's own (a user's
/// file), else the corrections file's (`null` each when unknown: such a call is priced at 1x
/// and is not exact).
fn multipliers_json(m: &ModelInfo) -> Value {
    let c = Corrections::embedded();
    let stated = m.prices.as_ref().map(|p| p.multipliers).unwrap_or_default();
    let by_name = Modifier::ALL.map(|k| (k.name().to_owned(), json!(c.resolved(&m.id, stated, k))));
    Value::Object(by_name.into_iter().collect())
}

fn price_json(p: &Prices) -> Value {
    let f = |v: Option<f64>| per_million(v.unwrap_or(p.input));
    json!({
        "input": per_million(p.input),
        "output": per_million(p.output),
        "cache_read": f(p.cache_read),
        "cache_write_5m": f(p.cache_write_5m),
        "cache_write_1h": f(p.cache_write_1h),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_print_per_million() {
        assert_eq!(fmt_price(3e-6), "3.00");
        assert_eq!(fmt_price(3.75e-6), "3.75");
        assert_eq!(fmt_price(7.5e-8), "0.075");
        assert_eq!(fmt_price(1.25e-7), "0.125");
        assert_eq!(fmt_price(0.0), "0.00");
    }
}
