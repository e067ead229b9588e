//! Reading one line of the compact catalog format (`catalog.tsv`, tab-separated, [`COLUMNS`]):
//! shared by the crate (`Catalog::parse_compact`) and by `build.rs`, which compiles the embedded
//! file into a static table, so that both read a line by the same rules. It uses nothing but
//! `std`, since the build script includes it by path. Trailing empty fields are left out of a
//! line.

/// The columns, in order; prices in USD per token, an empty field is unknown.
pub const COLUMNS: [&str; 15] = [
    "id",
    "provider",
    "window",
    "max_output",
    "input",
    "output",
    "cache_read",
    "cache_write_5m",
    "cache_write_1h",
    "tier_threshold",
    "tier_input",
    "tier_output",
    "tier_cache_read",
    "tier_cache_write_5m",
    "tier_cache_write_1h",
];

/// One line, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub id: &'a str,
    /// Empty when unknown.
    pub provider: &'a str,
    pub window: Option<u64>,
    pub max_output: Option<u64>,
    /// The standard prices and, inside them, the long-context tier.
    pub prices: Option<LinePrices>,
}

/// Prices of a line: input, output, cache read, 5-minute and 1-hour cache writes.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePrices {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write_5m: Option<f64>,
    pub cache_write_1h: Option<f64>,
    /// The tier's threshold and prices (a tier has no tier of its own).
    pub tier: Option<(u64, Box<LinePrices>)>,
}

/// Reads one line (not a comment, not empty).
pub fn read_line(line: &str) -> Result<Line<'_>, String> {
    let fields: Vec<&str> = line.split('\t').collect();
    if fields.len() > COLUMNS.len() {
        return Err(format!("{} fields, at most {} expected", fields.len(), COLUMNS.len()));
    }
    let field = |i: usize| fields.get(i).copied().unwrap_or("");
    let id = field(0);
    if id.is_empty() {
        return Err("empty model id".to_owned());
    }
    let uint = |i: usize| -> Result<Option<u64>, String> {
        let f = field(i);
        if f.is_empty() {
            return Ok(None);
        }
        f.parse().map(Some).map_err(|_| format!("{}: `{f}` is not a whole number", COLUMNS[i]))
    };
    let price = |i: usize| -> Result<Option<f64>, String> {
        let f = field(i);
        if f.is_empty() {
            return Ok(None);
        }
        match f.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(format!("{}: `{f}` is not a price", COLUMNS[i])),
        }
    };
    let required = |i: usize| -> Result<f64, String> {
        price(i)?.ok_or_else(|| format!("{} is required when prices are given", COLUMNS[i]))
    };
    let has_any = |range: std::ops::Range<usize>| range.into_iter().any(|i| !field(i).is_empty());
    // Columns from `at`: input, output, cache read, 5-minute and 1-hour cache writes.
    let prices_at = |at: usize| -> Result<LinePrices, String> {
        Ok(LinePrices {
            input: required(at)?,
            output: required(at + 1)?,
            cache_read: price(at + 2)?,
            cache_write_5m: price(at + 3)?,
            cache_write_1h: price(at + 4)?,
            tier: None,
        })
    };
    let prices = if has_any(4..COLUMNS.len()) {
        let mut prices = prices_at(4)?;
        if has_any(9..COLUMNS.len()) {
            let threshold = uint(9)?.ok_or("tier_threshold is required for a tier")?;
            prices.tier = Some((threshold, Box::new(prices_at(10)?)));
        }
        Some(prices)
    } else {
        None
    };
    Ok(Line { id, provider: field(1), window: uint(2)?, max_output: uint(3)?, prices })
}
