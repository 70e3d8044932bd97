//! The log2 histogram of call durations, in the unit and shape bcc's `funclatency` prints.

use std::io::{self, Write};

use kprof_symbols::latency::Stats;

/// A histogram unit: what funclatency's `-u` and `-m` choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    /// funclatency's header word: `nsecs`, `usecs`, `msecs`.
    pub name: &'static str,
    /// The unit's short form for labels: `ns`, `µs`, `ms`.
    pub short: &'static str,
    /// ns in one unit.
    pub ns: u64,
}

const NSECS: Unit = Unit {
    name: "nsecs",
    short: "ns",
    ns: 1,
};
const USECS: Unit = Unit {
    name: "usecs",
    short: "µs",
    ns: 1_000,
};
const MSECS: Unit = Unit {
    name: "msecs",
    short: "ms",
    ns: 1_000_000,
};

/// The unit a person would run funclatency with for these calls: nsecs (its default) when
/// the median call is under 1 µs, `-u` (usecs) under 1 ms, `-m` (msecs) above. By the
/// median, not the maximum: the buckets must resolve where most calls are; a few slow ones
/// just add rows at the bottom.
pub(crate) fn unit_for(stats: &Stats) -> Unit {
    match stats.p50 {
        p if p < 1_000 => NSECS,
        p if p < 1_000_000 => USECS,
        _ => MSECS,
    }
}

/// The log2 buckets of `durations` (ns) in `unit`, `(low, high, count)` from the first bucket
/// with a count to the last. As funclatency does in its BPF program (`delta /= 1000`), each
/// duration is divided by the unit, rounded down, before it is bucketed: the buckets are
/// recomputed in the unit, not the ns buckets relabelled (whose bounds are no powers of two
/// of µs).
pub(crate) fn buckets(durations: &[u64], unit: Unit) -> Vec<(u64, u64, u64)> {
    let scaled: Vec<u64> = durations.iter().map(|d| d / unit.ns).collect();
    Stats::of(&scaled).histogram
}

/// Stars of a count as bcc's `_stars` draws them: `width * count / max`, rounded down.
fn stars(count: u64, max: u64, width: usize) -> String {
    let n = if max == 0 {
        0
    } else {
        (width as u128 * u128::from(count) / u128::from(max)).min(width as u128) as usize
    };
    "*".repeat(n)
}

/// `hist` (buckets of [`buckets`]) as bcc's `print_log2_hist` prints it: the header, then a
/// row per bucket from `0 -> 1` to the last with a count, leading empty ones included, stars
/// scaled to the largest count; rows twice as wide (and stars half as many) when the last
/// bucket is past 2^32, as bcc switches at its slot 32.
pub(crate) fn write_bcc(
    out: &mut dyn Write,
    hist: &[(u64, u64, u64)],
    unit: Unit,
) -> io::Result<()> {
    let Some(&(last_low, _, _)) = hist.last() else {
        return Ok(());
    };
    // Bucket k holds 2^k ..= 2^(k+1)-1 (k 0: 0 and 1); bcc's slot of it is k + 1.
    let last = if last_low < 2 { 0 } else { last_low.ilog2() };
    let max = hist.iter().map(|b| b.2).max().unwrap_or(0);
    let wide = last + 1 > 32;
    if wide {
        writeln!(
            out,
            "               {:<29} : count     distribution",
            unit.name
        )?;
    } else {
        writeln!(out, "     {:<19} : count     distribution", unit.name)?;
    }
    for k in 0..=last {
        let low = if k == 0 { 0 } else { 1u64 << k };
        let high = if k == 63 {
            u64::MAX
        } else {
            (1u64 << (k + 1)) - 1
        };
        let count = hist.iter().find(|b| b.0 == low).map_or(0, |b| b.2);
        if wide {
            writeln!(
                out,
                "{low:>20} -> {high:<20} : {count:<8} |{:<20}|",
                stars(count, max, 20)
            )?;
        } else {
            writeln!(
                out,
                "{low:>10} -> {high:<10} : {count:<8} |{:<40}|",
                stars(count, max, 40)
            )?;
        }
    }
    Ok(())
}
