//! UTC calendar times without a date crate: capture ids, `kprof-agent list` and the host's
//! fetch times.

/// (year, month, day, hour, minute, second) in UTC of `secs` since the Unix epoch.
pub fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// `2026-11-22T11:44:34Z` of `ns` since the Unix epoch.
pub fn iso8601(ns: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(ns / 1_000_000_000);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known instants format as their calendar dates, leap day included.
    #[test]
    fn format_iso8601_known_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            iso8601(1_795_335_874 * 1_000_000_000),
            "2026-11-22T08:24:34Z"
        );
        assert_eq!(iso8601(951_782_400 * 1_000_000_000), "2000-02-29T00:00:00Z");
    }
}
