//! The latency and lock-wait report for a terminal.

use std::io::{self, Write};

use kprof_symbols::latency::{Contention, Stats, TimedFunction, WaitGroup};
use kprof_symbols::profile::Profile;

use super::{count, frame_text, frames_of, histogram, human, kind_name, thread_label};
use crate::Error;

/// The text report: each timed function (statistics, what could not be paired, the kernel's
/// counts when they tell of missing calls, a funclatency histogram, the `slowest` slowest
/// calls with their call paths), then the lock waits by lock and by waiting function.
pub fn write_text(p: &Profile, slowest: usize, out: &mut dyn Write) -> Result<(), Error> {
    // Names come from the board and from binaries: no raw control characters to the terminal.
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    writeln!(out, "Capture: {}", p.meta.capture)?;
    if let Some(w) = &p.meta.window {
        writeln!(
            out,
            "Window:  {} (calls and waits that began in it)",
            w.describe()
        )?;
    }
    // Unpaired counts are of the whole capture: a window cannot tell when those began.
    let whole = if p.meta.window.is_some() {
        " (a count of the whole capture)"
    } else {
        ""
    };
    match &p.latency {
        Some(l) if !l.functions.is_empty() => {
            for f in &l.functions {
                writeln!(out)?;
                write_function(p, f, slowest, whole, out)?;
            }
        }
        _ => writeln!(
            out,
            "\nNo function was timed in this capture (record --latency FUNC times one)."
        )?,
    }
    if let Some(c) = &p.contention {
        writeln!(out)?;
        write_contention(p, c, whole, out)?;
    }
    Ok(())
}

/// `NAME (kind): N calls, total T, mean M, p50 A, p90 B, p99 C, max D`.
fn stats_line(f: &TimedFunction, s: &Stats) -> String {
    let head = format!("{} ({})", f.name, kind_name(f.kind));
    if s.count == 0 {
        return format!("{head}: no calls");
    }
    format!(
        "{head}: {}, total {}, mean {}, p50 {}, p90 {}, p99 {}, max {}",
        count(s.count, "call", "calls"),
        human(s.total),
        human(s.mean()),
        human(s.p50),
        human(s.p90),
        human(s.p99),
        human(s.max)
    )
}

/// What the statistics leave out, in words: calls without an entry or a return, and calls
/// the kernel made that the capture does not have.
fn unpaired_lines(f: &TimedFunction, whole: &str) -> Vec<String> {
    let mut lines = Vec::new();
    if f.unmatched_returns > 0 {
        lines.push(format!(
            "{} began before the capture (a return without its entry): not in the statistics{whole}",
            count(f.unmatched_returns, "call", "calls")
        ));
    }
    if f.unfinished > 0 {
        lines.push(format!(
            "{} still running at the end of the capture (an entry without its return): not in the statistics{whole}",
            count(f.unfinished, "call was", "calls were")
        ));
    }
    let recorded = f.calls.len() as u64 + f.unfinished;
    match f.hits {
        // Only a whole capture's entries compare with the kernel's count of them.
        Some(hits) if hits != recorded && whole.is_empty() => lines.push(format!(
            "the kernel counted {} of the entry probe; the capture has {recorded}",
            count(hits, "hit", "hits")
        )),
        _ => {}
    }
    if f.lost > 0 {
        lines.push(format!(
            "the kernel lost {} of its entry and return records: some calls are missing, and calls around them may be paired wrongly",
            f.lost
        ));
    }
    lines
}

fn write_function(
    p: &Profile,
    f: &TimedFunction,
    slowest: usize,
    whole: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let stats = f.stats();
    writeln!(out, "{}", stats_line(f, &stats))?;
    for line in unpaired_lines(f, whole) {
        writeln!(out, "  {line}")?;
    }
    if stats.count == 0 {
        return Ok(());
    }
    let unit = histogram::unit_for(&stats);
    let durations: Vec<u64> = f.calls.iter().map(|c| c.duration).collect();
    histogram::write_bcc(out, &histogram::buckets(&durations, unit), unit)?;
    let calls = f.slowest(slowest);
    if calls.is_empty() {
        return Ok(());
    }
    writeln!(out, "  Slowest calls (call path, innermost first):")?;
    for c in calls {
        let mut head = format!(
            "    {} at {:.3} s  {}",
            human(c.duration),
            c.start as f64 / 1e9,
            thread_label(p, c.stack)
        );
        if c.cpu != u32::MAX {
            head.push_str(&format!("  CPU {}", c.cpu));
        }
        if c.depth > 0 {
            head.push_str(&format!("  depth {}", c.depth));
        }
        writeln!(out, "{head}")?;
        write_path(p, c.stack, Some(super::MAX_FRAMES), out)?;
    }
    Ok(())
}

/// The frames of `stack`, one a line, at most `cap` of them then how many more.
fn write_path(p: &Profile, stack: u32, cap: Option<usize>, out: &mut dyn Write) -> io::Result<()> {
    let frames = frames_of(p, stack);
    if frames.is_empty() {
        return writeln!(out, "        (no call chain recorded)");
    }
    let shown = cap.unwrap_or(frames.len()).min(frames.len());
    for &fr in &frames[..shown] {
        writeln!(out, "        {}", frame_text(p, fr))?;
    }
    if frames.len() > shown {
        writeln!(
            out,
            "        … {} more {}",
            frames.len() - shown,
            if frames.len() - shown == 1 {
                "frame"
            } else {
                "frames"
            }
        )?;
    }
    Ok(())
}

/// A time as `perf lock contention` prints one: `%9.2f` in the largest unit it reaches (`us`,
/// `ms`, `s `, `m `, `h `), ns as an integer below 1 µs; 12 characters.
fn perf_time(ns: u64) -> String {
    const UNITS: [(f64, &str); 5] = [
        (1e9 * 3600.0, "h "),
        (1e9 * 60.0, "m "),
        (1e9, "s "),
        (1e6, "ms"),
        (1e3, "us"),
    ];
    for (base, unit) in UNITS {
        if ns as f64 >= base {
            return format!("{:9.2} {unit}", ns as f64 / base);
        }
    }
    format!("{ns:9} ns")
}

/// perf lock contention's header: its default fields, then the group's columns.
fn perf_header(last: &str) -> String {
    format!(
        "{:>10} {:>12} {:>12} {:>12}   {:>10}   {last}",
        "contended", "total wait", "max wait", "avg wait", "type"
    )
}

/// A group's row as perf lock contention prints it.
fn perf_row(g: &WaitGroup) -> String {
    let s = &g.stats;
    format!(
        "{:>10} {} {} {}   {:>10}   {}",
        s.count,
        perf_time(s.total),
        perf_time(s.max),
        perf_time(s.mean()),
        g.kind,
        g.name
    )
}

fn write_contention(
    p: &Profile,
    c: &Contention,
    whole: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let what: Vec<&str> = [(c.kernel_locks, "kernel locks"), (c.futex, "futex waits")]
        .iter()
        .filter_map(|&(on, name)| on.then_some(name))
        .collect();
    let total = c
        .waits
        .iter()
        .fold(0u64, |a, w| a.saturating_add(w.duration));
    if c.waits.is_empty() {
        writeln!(out, "Lock waits ({}): no lock waits", what.join(", "))?;
    } else {
        writeln!(
            out,
            "Lock waits ({}): {}, {} waited",
            what.join(", "),
            count(c.waits.len() as u64, "wait", "waits"),
            human(total)
        )?;
    }
    if c.unmatched_ends > 0 {
        writeln!(
            out,
            "  {} began before the capture (an end without its start): not counted{whole}",
            count(c.unmatched_ends, "wait", "waits")
        )?;
    }
    if c.unfinished > 0 {
        writeln!(
            out,
            "  {} still waiting at the end of the capture (a start without its end): not counted{whole}",
            count(c.unfinished, "thread was", "threads were")
        )?;
    }
    if c.waits.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nBy lock (as perf lock contention -l), most total wait first:"
    )?;
    writeln!(out, "{}", perf_header("lock"))?;
    for g in c.by_lock() {
        writeln!(out, "{}", perf_row(&g))?;
    }
    writeln!(
        out,
        "\nBy waiting function (as perf lock contention), with the call path of its longest wait:"
    )?;
    writeln!(out, "{}", perf_header("caller"))?;
    for g in c.by_caller(|s| super::caller(p, s)) {
        writeln!(out, "{}", perf_row(&g))?;
        if let Some(w) = super::longest(c, &g) {
            writeln!(
                out,
                "      longest {} at {:.3} s  {}:",
                human(w.duration),
                w.start as f64 / 1e9,
                thread_label(p, w.stack)
            )?;
        }
        write_path(p, g.longest_stack, None, out)?;
        writeln!(out)?;
    }
    Ok(())
}
