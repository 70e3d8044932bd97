//! Time bins for the page's timeline and range selection.
//!
//! Bin `i` covers `[i * width, (i + 1) * width)` ns since capture start, the half-open window
//! `kprofctl report --time` takes, so a selection snapped to bin edges sums to exactly the
//! counts `--time` prints for those bounds.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use kprof_symbols::profile::{MarkerKind, Profile};
use serde_json::{json, Value};

use super::model::IdHasher;
use super::pack::Packed;

/// Most bins over the capture: enough to resolve phases of a few ms in a 2 s capture, few
/// enough that per-bin data stays small.
pub const MAX_BINS: u64 = 1000;

/// Capture length in ns: the last record, or the last sample, marker, timed call's or lock
/// wait's end if that is later.
pub fn duration(profile: &Profile) -> u64 {
    let last = profile.samples.last().map_or(0, |s| s.time);
    let marker = profile
        .meta
        .markers
        .iter()
        .map(|m| m.time)
        .max()
        .unwrap_or(0);
    profile
        .meta
        .duration_ns
        .max(last)
        .max(marker)
        .max(super::latency::last_end(profile))
}

/// (time, kind, label) of every marker of the capture itself, drawn across all tracks: kind
/// is the page's CSS class. The profiled system's marks are not among them: they go on their
/// thread's mark row ([`super::marks`]).
pub fn markers(profile: &Profile) -> Vec<(u64, &'static str, String)> {
    profile
        .meta
        .markers
        .iter()
        .filter_map(|m| match &m.kind {
            MarkerKind::WorkloadStart => Some((m.time, "start", "workload start".to_owned())),
            MarkerKind::WorkloadExit => Some((m.time, "exit", "workload exit".to_owned())),
            MarkerKind::Lost { samples } => {
                Some((m.time, "lost", format!("{samples} samples lost")))
            }
            MarkerKind::Throttled => Some((m.time, "throttled", "event throttled".to_owned())),
            MarkerKind::Mark(_) => None,
        })
        .collect()
}

/// The smallest 1-2-5 step of ns that covers `duration` (inclusive) in at most `max` bins.
pub fn bin_width(duration: u64, max: u64) -> u64 {
    let mut decade = 1u64;
    loop {
        for step in [1, 2, 5] {
            let width = decade * step;
            if duration / width < max {
                return width;
            }
        }
        decade *= 10;
    }
}

/// Samples per key, with the integer hasher of the call tree.
type Counts<K> = HashMap<K, u64, BuildHasherDefault<IdHasher>>;

/// The entries of `counts` in key order.
fn sorted<K: Ord>(counts: Counts<K>) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = counts.into_iter().collect();
    v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The command index that stands for the idle loop (pid 0) in the per-CPU counts.
const IDLE_COMM: u32 = u32::MAX;

/// The samples counted per distinct key as they stream by: memory follows the (bin, stack),
/// (CPU, bin, command) and (thread, bin) pairs, not the samples.
struct Tally {
    /// Per event: (bin << 32 | page stack) → weight.
    per_event: Vec<Counts<u64>>,
    /// Per event, every bin: summed periods.
    periods: Vec<Vec<u64>>,
    /// (CPU, bin, command or [`IDLE_COMM`]) → weight, first event only.
    per_cpu: Counts<(u32, u64, u32)>,
    /// (thread, bin) → weight, first event only.
    per_thread: Counts<(u32, u64)>,
}

impl Tally {
    /// One pass over the samples into `count` bins of `width` ns.
    fn of(
        profile: &Profile,
        page_of: &[u32],
        thread_comm: &[usize],
        by_period: bool,
        width: u64,
        count: u64,
    ) -> Tally {
        let nev = profile.events.len();
        let mut t = Tally {
            per_event: vec![Counts::default(); nev],
            periods: vec![vec![0u64; count as usize]; nev],
            per_cpu: Counts::default(),
            per_thread: Counts::default(),
        };
        for s in &profile.samples {
            let stack_index = s.stack as usize;
            let event = s.event as usize;
            let (Some(&page), Some(stack)) =
                (page_of.get(stack_index), profile.stacks.get(stack_index))
            else {
                continue;
            };
            let bin = (s.time / width).min(count - 1);
            let weight = if by_period { s.period } else { 1 };
            if let Some(list) = t.per_event.get_mut(event) {
                *list.entry(bin << 32 | u64::from(page)).or_default() += weight;
                t.periods[event][bin as usize] += s.period;
            }
            if event != 0 {
                continue;
            }
            let idle = profile.threads.get(stack.thread).is_none_or(|t| t.pid == 0);
            let comm = if idle {
                IDLE_COMM
            } else {
                thread_comm.get(stack.thread).copied().unwrap_or(0) as u32
            };
            if s.cpu != u32::MAX {
                *t.per_cpu.entry((s.cpu, bin, comm)).or_default() += weight;
            }
            *t.per_thread.entry((stack.thread as u32, bin)).or_default() += weight;
        }
        t
    }
}

/// One event's (bin, stack) counts as runs: bin of each run, page stack, count.
fn pack_event(keys: Counts<u64>) -> (Packed, Packed, Packed) {
    let keys = sorted(keys);
    let (mut bins, mut stacks, mut counts) =
        (Packed::default(), Packed::default(), Packed::default());
    let (mut last_bin, mut last_stack) = (0u64, 0u64);
    for &(key, n) in &keys {
        let (bin, stack) = (key >> 32, key & 0xffff_ffff);
        if bin != last_bin {
            last_stack = 0;
        }
        // Bins as deltas from the previous run, stacks as deltas within a bin.
        bins.push(bin - last_bin);
        stacks.push(stack - last_stack);
        counts.push(n);
        (last_bin, last_stack) = (bin, stack);
    }
    (bins, stacks, counts)
}

/// Per CPU: (cpu, bins, dominant non-idle command or -1, non-idle samples, all samples).
fn pack_cpus(per_cpu: Counts<(u32, u64, u32)>) -> Vec<(u32, Packed, Packed, Packed, Packed)> {
    let per_cpu = sorted(per_cpu);
    let mut cpus: Vec<(u32, Packed, Packed, Packed, Packed)> = Vec::new();
    for cpu_runs in per_cpu.chunk_by(|a, b| a.0 .0 == b.0 .0) {
        let mut entry = (
            cpu_runs[0].0 .0,
            Packed::default(),
            Packed::default(),
            Packed::default(),
            Packed::default(),
        );
        let mut last_bin = 0;
        for bin_runs in cpu_runs.chunk_by(|a, b| a.0 .1 == b.0 .1) {
            let bin = bin_runs[0].0 .1;
            let mut best = (0u64, IDLE_COMM);
            let mut busy = 0;
            for &((_, _, comm), n) in bin_runs {
                if comm == IDLE_COMM {
                    continue;
                }
                busy += n;
                if n > best.0 {
                    best = (n, comm);
                }
            }
            entry.1.push(bin - last_bin);
            last_bin = bin;
            entry.2.push_signed(if best.1 == IDLE_COMM {
                -1
            } else {
                i64::from(best.1)
            });
            entry.3.push(busy);
            entry.4.push(bin_runs.iter().map(|r| r.1).sum());
        }
        cpus.push(entry);
    }
    cpus
}

/// Per thread with samples, busiest first (then by thread): (thread, bins, samples).
fn pack_threads(per_thread: Counts<(u32, u64)>) -> Vec<(usize, Packed, Packed)> {
    let per_thread = sorted(per_thread);
    let mut threads: Vec<(usize, u64, Packed, Packed)> = per_thread
        .chunk_by(|a, b| a.0 .0 == b.0 .0)
        .map(|runs| {
            let (mut bins, mut counts) = (Packed::default(), Packed::default());
            let mut last = 0;
            for &((_, bin), n) in runs {
                bins.push(bin - last);
                last = bin;
                counts.push(n);
            }
            let total = runs.iter().map(|r| r.1).sum();
            (runs[0].0 .0 as usize, total, bins, counts)
        })
        .collect();
    threads.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    threads.into_iter().map(|(t, _, b, c)| (t, b, c)).collect()
}

/// Per-bin data, all of it sparse.
#[derive(Debug, Default)]
pub struct Bins {
    width: u64,
    count: u64,
    duration: u64,
    /// Per event: bin of each run, page stack, count.
    events: Vec<(Packed, Packed, Packed)>,
    /// Per event, every bin: summed periods (the event's count), all threads.
    periods: Vec<Vec<u64>>,
    /// Per CPU seen: (cpu, bins, dominant non-idle command, non-idle samples, all samples),
    /// first event only.
    cpus: Vec<(u32, Packed, Packed, Packed, Packed)>,
    /// Per thread with samples, busiest first: (thread, bins, samples), first event only.
    threads: Vec<(usize, Packed, Packed)>,
    markers: Vec<(u64, &'static str, String)>,
}

impl Bins {
    /// Bins of the profile's samples, with `page_of` mapping profile stacks to the page's
    /// merged stacks. With `by_period`, a sample weighs its period instead of 1: the stack
    /// counts of a profile whose counts are not samples (`report --off-cpu`'s blocked ns) are
    /// those periods, and a window must sum to them.
    pub fn build(
        profile: &Profile,
        page_of: &[u32],
        thread_comm: &[usize],
        by_period: bool,
    ) -> Bins {
        let duration = duration(profile);
        let markers = markers(profile);
        // Timed calls and waits alone (`run --no-sample`) have a timeline too.
        if profile.samples.is_empty() && !super::latency::has_any(profile) {
            return Bins {
                duration,
                markers,
                ..Bins::default()
            };
        }
        let width = bin_width(duration, MAX_BINS);
        let count = duration / width + 1;
        let tally = Tally::of(profile, page_of, thread_comm, by_period, width, count);
        Bins {
            width,
            count,
            duration,
            events: tally.per_event.into_iter().map(pack_event).collect(),
            periods: tally.periods,
            cpus: pack_cpus(tally.per_cpu),
            threads: pack_threads(tally.per_thread),
            markers,
        }
    }

    /// Bin width in ns (0 without per-sample times).
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Number of bins.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The page's `time` object.
    pub fn to_json(&self) -> Value {
        json!({
            "width": self.width,
            "count": self.count,
            "duration": self.duration,
            "events": self.events.iter().map(|(b, s, c)| json!({
                "n": b.len(), "bin": b.finish(), "stack": s.finish(), "count": c.finish(),
            })).collect::<Vec<_>>(),
            "periods": self.periods.iter().map(|p| p.iter().copied().collect::<Packed>().finish()).collect::<Vec<_>>(),
            "cpus": self.cpus.iter().map(|(cpu, b, comm, busy, all)| json!({
                "cpu": cpu, "n": b.len(), "bin": b.finish(), "comm": comm.finish(),
                "busy": busy.finish(), "all": all.finish(),
            })).collect::<Vec<_>>(),
            "threads": self.threads.iter().map(|(t, b, c)| json!({
                "thread": t, "n": b.len(), "bin": b.finish(), "count": c.finish(),
            })).collect::<Vec<_>>(),
            "markers": self.markers.iter().map(|(t, k, l)| json!([t, k, l])).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Widths step 1-2-5 and never leave more than the maximum of bins.
    #[test]
    fn bin_width_steps_1_2_5() {
        assert_eq!(bin_width(0, 1000), 1);
        assert_eq!(bin_width(999, 1000), 1);
        assert_eq!(bin_width(1000, 1000), 2);
        assert_eq!(bin_width(2_000_000_000, 1000), 5_000_000);
        assert_eq!(bin_width(1_999_999_999, 1000), 2_000_000);
        for d in [1, 17, 4_999, 123_456_789, 12_000_000_000] {
            assert!(d / bin_width(d, 1000) < 1000, "{d}");
        }
    }
}
