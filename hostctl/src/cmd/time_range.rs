//! `--time START..END`: a window of seconds since capture start, parsed to exact
//! nanoseconds (decimal digits, never through a float, so `0.1` is 100000000 ns).

use anyhow::Context;

/// A half-open window `[start, end)` in ns since capture start; `None` is an open bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// First nanosecond in the window.
    pub start: Option<u64>,
    /// First nanosecond after the window.
    pub end: Option<u64>,
}

impl std::str::FromStr for TimeRange {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (a, b) = s.split_once("..").with_context(|| {
            format!("{s:?} is not START..END (seconds since capture start, e.g. 1.5..3, ..2, 2..)")
        })?;
        let bound = |v: &str| -> anyhow::Result<Option<u64>> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(None);
            }
            seconds_to_ns(v).map(Some)
        };
        let range = Self {
            start: bound(a)?,
            end: bound(b)?,
        };
        if let (Some(a), Some(b)) = (range.start, range.end) {
            if b <= a {
                anyhow::bail!("{s:?} is empty: END must be after START");
            }
        }
        Ok(range)
    }
}

/// Decimal seconds (`2`, `0.25`, `1.000000001`) to nanoseconds.
fn seconds_to_ns(v: &str) -> anyhow::Result<u64> {
    let bad = || anyhow::anyhow!("{v:?} is not a number of seconds (digits, at most 9 decimals)");
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |d: &str| d.bytes().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 9 {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac_ns: u64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    whole
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::TimeRange;

    fn parse(s: &str) -> anyhow::Result<TimeRange> {
        s.parse()
    }

    /// Bounds are exact nanoseconds and either may be left open.
    #[test]
    fn parse_time_range_bounds_exact_ns() {
        let r = parse("0.1..1.000000001").unwrap();
        assert_eq!((r.start, r.end), (Some(100_000_000), Some(1_000_000_001)));
        assert_eq!(parse("..2").unwrap().start, None);
        assert_eq!(parse("..2").unwrap().end, Some(2_000_000_000));
        assert_eq!(parse("3..").unwrap().end, None);
        assert_eq!(
            parse("..").unwrap(),
            TimeRange {
                start: None,
                end: None
            }
        );
        assert_eq!(parse(".5..").unwrap().start, Some(500_000_000));
    }

    /// Malformed or empty windows are refused with the text at fault.
    #[test]
    fn parse_time_range_malformed_refused() {
        for (bad, needle) in [
            ("1.5", "is not START..END"),
            ("a..2", "\"a\" is not a number of seconds"),
            ("-1..2", "\"-1\" is not a number"),
            ("1.0000000001..", "at most 9 decimals"),
            ("2..1", "END must be after START"),
            ("1..1", "is empty"),
            ("99999999999999999999..", "is not a number"),
        ] {
            let e = format!("{:#}", parse(bad).unwrap_err());
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}
