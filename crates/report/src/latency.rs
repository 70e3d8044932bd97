//! `report` of function latency and lock waits (`record --latency`, `--contention`) in text
//! and JSON: per timed function its statistics, a log2 histogram as bcc's `funclatency`
//! prints it and its slowest calls with their call paths; the lock waits by lock and by
//! waiting function as `perf lock contention` prints them.
//!
//! What could not be paired (a return or wait end without its start, a call or wait still
//! open at the end) is said in words and never folded into the statistics: a duration
//! guessed for it would be wrong.

mod callers;
pub(crate) mod histogram;
mod json;
#[cfg(test)]
mod tests;
mod text;

use kprof_symbols::latency::{Contention, ProbeKind, Wait, WaitGroup};
use kprof_symbols::profile::{Profile, Thread};

pub use json::write_json;
pub use text::write_text;

pub(crate) use callers::caller;
pub(crate) use histogram::{unit_for, Unit};

/// Most frames of a slowest call's path the text prints: the interesting part of a path is
/// near the probed function; the rest is the same syscall entry or `main` every time.
const MAX_FRAMES: usize = 12;

/// A duration as people read it: ns, µs, ms or s with three significant digits (`999 ns`,
/// `1.23 µs`, `45.6 ms`, `120 ms`, `2.00 s`).
pub(crate) fn human(ns: u64) -> String {
    if ns < 1000 {
        return format!("{ns} ns");
    }
    const UNITS: [(f64, &str); 3] = [(1e3, "µs"), (1e6, "ms"), (1e9, "s")];
    let x = ns as f64;
    // The next unit as soon as three digits would round up to 1000 of this one.
    let mut i = 0;
    while i + 1 < UNITS.len() && x >= UNITS[i + 1].0 * 0.9995 {
        i += 1;
    }
    let (scale, unit) = UNITS[i];
    let v = x / scale;
    let digits = if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    format!("{digits} {unit}")
}

/// `kernel` or `user`.
pub(crate) fn kind_name(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Kernel => "kernel",
        ProbeKind::User => "user",
    }
}

/// The thread of stack `stack`, when the profile has both.
pub(crate) fn thread_of(p: &Profile, stack: u32) -> Option<&Thread> {
    let s = p.stacks.get(stack as usize)?;
    p.threads.get(s.thread)
}

/// `comm (tid)` of stack `stack`'s thread; `? (?)` when the profile does not have it.
pub(crate) fn thread_label(p: &Profile, stack: u32) -> String {
    match thread_of(p, stack) {
        Some(t) => format!("{} ({})", t.comm, t.tid),
        None => "? (?)".to_owned(),
    }
}

/// The frames of stack `stack`, innermost first (none when out of range).
pub(crate) fn frames_of(p: &Profile, stack: u32) -> &[usize] {
    p.stacks
        .get(stack as usize)
        .map_or(&[][..], |s| s.frames.as_slice())
}

/// Function name and image name of frame `frame` (`[unknown]` for what the profile lacks).
pub(crate) fn frame_names(p: &Profile, frame: usize) -> (&str, &str) {
    let function = p
        .frames
        .get(frame)
        .and_then(|f| p.functions.get(f.function));
    let name = function
        .and_then(|f| f.name.as_deref())
        .unwrap_or("[unknown]");
    let image = function
        .and_then(|f| p.images.get(f.image))
        .map_or("[unknown]", |i| i.name.as_str());
    (name, image)
}

/// A frame as the text views print one: `function [image] file:line`, `(inlined)` after an
/// inlined call.
pub(crate) fn frame_text(p: &Profile, frame: usize) -> String {
    let (name, image) = frame_names(p, frame);
    let mut text = format!("{name} [{image}]");
    if let Some(f) = p.frames.get(frame) {
        if let (Some(file), Some(line)) = (&f.file, f.line) {
            text.push_str(&format!(" {}:{line}", p.source_path(file)));
        }
        if f.inlined {
            text.push_str(" (inlined)");
        }
    }
    text
}

/// `n thing` or `n things`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The wait a group's [`WaitGroup::longest_stack`] is of: the longest on that stack, the
/// earliest of equals (as the group chose it).
pub(crate) fn longest<'c>(c: &'c Contention, g: &WaitGroup) -> Option<&'c Wait> {
    c.waits
        .iter()
        .filter(|w| w.stack == g.longest_stack && w.duration == g.stats.max)
        .min_by_key(|w| w.start)
}
