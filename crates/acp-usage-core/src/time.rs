//! Timestamps as transcripts and providers write them (RFC 3339, UTC or with an offset), read
//! into Unix milliseconds. Its own module because both the transcript parsers and the limits'
//! readers use it, and neither of those should name the other for it.

/// Parses an RFC 3339 UTC timestamp as transcripts write it (`2026-11-22T01:23:12.749Z`, also
/// with an offset such as `+00:00`) into Unix milliseconds.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let f = &frac[..digits];
        for (i, c) in f.bytes().take(3).enumerate() {
            ms += i64::from(c - b'0') * [100, 10, 1][i];
        }
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "" | "Z" | "z" => 0,
        r if r.len() == 6 && (r.starts_with('+') || r.starts_with('-')) => {
            let sign = if r.starts_with('-') { -1 } else { 1 };
            sign * (r[1..3].parse::<i64>().ok()? * 60 + r[4..6].parse::<i64>().ok()?)
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::parse_timestamp;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("2026-11-22T01:23:12.749Z"), Some(1_795_310_592_749));
        assert_eq!(parse_timestamp("2026-11-22T02:23:12.749+01:00"), Some(1_795_310_592_749));
        assert_eq!(parse_timestamp("2026-11-22T01:23:12.749123Z"), Some(1_795_310_592_749));
        assert_eq!(parse_timestamp("not a time"), None);
    }
}
