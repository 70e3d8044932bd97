//! Function latency and lock waits for the page (`record --latency`, `--contention`): the
//! Latency tab's statistics, histograms and lock tables, and each call and wait as a span on
//! its thread's row of the timeline (html/latency.js draws both).
//!
//! A window of the timeline is summed from per-bin counts (calls and waits by the bin they
//! began in, as `--time` keeps them): each function's count, total, maximum and histogram
//! buckets per bin, each lock's and waiting function's count, total and maximum per bin. So
//! the window's numbers are exact whatever the number of calls, and the page's size follows
//! the bins. Percentiles need every duration: the page has them only when it has every call
//! as a span.
//!
//! Spans are packed columns as the marks are (html/pack.rs). At most [`MAX_SPANS`] calls of
//! a function and waits are drawn: the slowest, which are what a person looks for on the
//! timeline; the page says how many it left out.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use kprof_symbols::latency::{Contention, Stats, TimedFunction, Wait};
use kprof_symbols::profile::Profile;
use serde_json::{json, Value};

use super::pack::Packed;
use crate::latency::{caller, unit_for, Unit};

/// Most spans drawn per timed function, and of waits: 10,000 spans cost about 100 KB of
/// page, and more would not show on a timeline a few thousand pixels wide anyway.
pub const MAX_SPANS: usize = 10_000;

/// The timeline's bins: `count` bins of `width` ns from capture start (none when `width` is
/// 0: a profile without sample times has no timeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// ns per bin.
    pub width: u64,
    /// Number of bins.
    pub count: u64,
}

impl Grid {
    /// The bin of time `t`: the last bin for times past it, as the samples' bins.
    fn bin(&self, t: u64) -> Option<u64> {
        (self.width > 0 && self.count > 0).then(|| (t / self.width).min(self.count - 1))
    }
}

/// One call or wait drawn on the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// Index into `Profile::threads`; -1 when its stack has none.
    thread: i64,
    start: u64,
    duration: u64,
    /// A call's nesting depth, a wait's label.
    extra: u64,
    /// Row within the thread's latency row, shared by every function's calls and the waits.
    lane: u32,
}

/// funclatency's log2 bucket of `v`, as [`Stats::histogram`] numbers them.
fn bucket(v: u64) -> u64 {
    if v < 2 {
        0
    } else {
        u64::from(v.ilog2())
    }
}

fn thread_index(p: &Profile, stack: u32) -> i64 {
    p.stacks.get(stack as usize).map_or(-1, |s| s.thread as i64)
}

/// The `MAX_SPANS` slowest of `spans` (earlier first among equals), by start; and how many
/// were left out.
fn slowest_kept(mut spans: Vec<Span>) -> (Vec<Span>, usize) {
    let dropped = spans.len().saturating_sub(MAX_SPANS);
    if dropped > 0 {
        spans.sort_by_key(|s| (Reverse(s.duration), s.start));
        spans.truncate(MAX_SPANS);
    }
    spans.sort_by_key(|s| (s.start, Reverse(s.duration)));
    (spans, dropped)
}

/// Gives every span the lowest lane of its thread free at its start (every function's calls
/// and the waits together), so nested calls and a wait inside a call do not cover each other.
fn assign_lanes(groups: &mut [Vec<Span>]) {
    let mut order: Vec<(usize, usize)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, v)| (0..v.len()).map(move |i| (g, i)))
        .collect();
    order.sort_by_key(|&(g, i)| {
        let s = &groups[g][i];
        (s.thread, s.start, Reverse(s.duration))
    });
    // Per lane of the current thread: where its last span ends.
    let mut ends: Vec<u64> = Vec::new();
    let mut thread = None;
    for (g, i) in order {
        let s = &mut groups[g][i];
        if thread != Some(s.thread) {
            ends.clear();
            thread = Some(s.thread);
        }
        let end = s.start.saturating_add(s.duration);
        let lane = ends
            .iter()
            .position(|&e| e <= s.start)
            .unwrap_or(ends.len());
        match ends.get_mut(lane) {
            Some(e) => *e = end,
            None => ends.push(end),
        }
        s.lane = lane as u32;
    }
}

/// The spans' columns: thread, start (deltas, spans are by start), duration, lane, extra.
fn spans_json(spans: &[Span], extra: &str) -> Value {
    let (mut thread, mut start, mut duration, mut lane, mut ext) = (
        Packed::default(),
        Packed::default(),
        Packed::default(),
        Packed::default(),
        Packed::default(),
    );
    let mut last = 0;
    for s in spans {
        thread.push_signed(s.thread);
        start.push(s.start - last);
        last = s.start;
        duration.push(s.duration);
        lane.push(u64::from(s.lane));
        ext.push(s.extra);
    }
    json!({
        "n": spans.len(),
        "thread": thread.finish(),
        "start": start.finish(),
        "dur": duration.finish(),
        "lane": lane.finish(),
        extra: ext.finish(),
    })
}

fn stats_json(s: &Stats) -> Value {
    json!({
        "count": s.count, "total": s.total, "min": s.min, "max": s.max,
        "p50": s.p50, "p90": s.p90, "p99": s.p99, "mean": s.mean(),
    })
}

/// A function's calls per bin: total and maximum ns, and the count of each log2 bucket (in
/// the function's histogram unit) with calls: `nk` buckets per bin, then their `k` and `c`.
fn function_bins(f: &TimedFunction, unit: Unit, grid: Grid) -> Value {
    let mut per: BTreeMap<u64, (u64, u64, BTreeMap<u64, u64>)> = BTreeMap::new();
    for c in &f.calls {
        let Some(b) = grid.bin(c.start) else { continue };
        let e = per.entry(b).or_default();
        e.0 = e.0.saturating_add(c.duration);
        e.1 = e.1.max(c.duration);
        *e.2.entry(bucket(c.duration / unit.ns)).or_default() += 1;
    }
    let mut cols: [Packed; 6] = Default::default();
    let mut last = 0;
    for (&b, (total, max, buckets)) in &per {
        cols[0].push(b - last);
        last = b;
        cols[1].push(*total);
        cols[2].push(*max);
        cols[3].push(buckets.len() as u64);
        for (&k, &n) in buckets {
            cols[4].push(k);
            cols[5].push(n);
        }
    }
    let [bin, total, max, nk, k, c] = cols.map(|p| p.finish());
    json!({"n": per.len(), "bin": bin, "total": total, "max": max, "nk": nk, "k": k, "c": c})
}

fn function_json(f: &TimedFunction, spans: &[Span], dropped: usize, grid: Grid) -> Value {
    let stats = f.stats();
    let unit = unit_for(&stats);
    let durations: Vec<u64> = f.calls.iter().map(|c| c.duration).collect();
    json!({
        "name": f.name,
        "kind": crate::latency::kind_name(f.kind),
        "unit": unit.short,
        "unit_ns": unit.ns,
        "stats": stats_json(&stats),
        "hist": crate::latency::histogram::buckets(&durations, unit),
        "hits": f.hits,
        "lost": f.lost,
        "unmatched_returns": f.unmatched_returns,
        "unfinished": f.unfinished,
        "spans": spans_json(spans, "depth"),
        "dropped": dropped,
        "bins": function_bins(f, unit, grid),
    })
}

/// Per group, per bin: count, total and maximum ns of the waits of the group.
fn group_bins(waits: &[Wait], group_of: &[usize], groups: usize, grid: Grid) -> Vec<Value> {
    let mut per: Vec<BTreeMap<u64, (u64, u64, u64)>> = vec![BTreeMap::new(); groups];
    for (w, &g) in waits.iter().zip(group_of) {
        let (Some(b), Some(bins)) = (grid.bin(w.start), per.get_mut(g)) else {
            continue;
        };
        let e = bins.entry(b).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(w.duration);
        e.2 = e.2.max(w.duration);
    }
    per.iter()
        .map(|bins| {
            let mut cols: [Packed; 4] = Default::default();
            let mut last = 0;
            for (&b, &(n, total, max)) in bins {
                cols[0].push(b - last);
                last = b;
                cols[1].push(n);
                cols[2].push(total);
                cols[3].push(max);
            }
            let [bin, count, total, max] = cols.map(|p| p.finish());
            json!({"n": bins.len(), "bin": bin, "count": count, "total": total, "max": max})
        })
        .collect()
}

/// `groups` ([`Contention::by_lock`] or `by_caller`, whose names `key` gives a wait) with
/// their bins and the call path of their longest wait.
fn groups_json(
    p: &Profile,
    c: &Contention,
    groups: &[kprof_symbols::latency::WaitGroup],
    key: impl Fn(&Wait) -> String,
    grid: Grid,
) -> Vec<Value> {
    let index: HashMap<&str, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.name.as_str(), i))
        .collect();
    let group_of: Vec<usize> = c
        .waits
        .iter()
        .map(|w| index.get(key(w).as_str()).copied().unwrap_or(usize::MAX))
        .collect();
    let bins = group_bins(&c.waits, &group_of, groups.len(), grid);
    groups
        .iter()
        .zip(bins)
        .map(|(g, bins)| {
            let path: Vec<String> = crate::latency::frames_of(p, g.longest_stack)
                .iter()
                .map(|&fr| crate::latency::frame_text(p, fr))
                .collect();
            json!({"name": g.name, "type": g.kind, "stats": stats_json(&g.stats), "path": path, "bins": bins})
        })
        .collect()
}

/// The lock's name as [`Contention::by_lock`] groups by.
fn lock_key(w: &Wait) -> String {
    w.lock_name
        .clone()
        .unwrap_or_else(|| format!("{:#x}", w.address))
}

fn waits_json(
    p: &Profile,
    c: &Contention,
    spans: &[Span],
    labels: Vec<String>,
    dropped: usize,
    grid: Grid,
) -> Value {
    json!({
        "kernel_locks": c.kernel_locks,
        "futex": c.futex,
        "unmatched_ends": c.unmatched_ends,
        "unfinished": c.unfinished,
        "count": c.waits.len(),
        "spans": spans_json(spans, "label"),
        "labels": labels,
        "dropped": dropped,
        "locks": groups_json(p, c, &c.by_lock(), lock_key, grid),
        "callers": groups_json(p, c, &c.by_caller(|s| caller(p, s)), |w| caller(p, w.stack), grid),
    })
}

/// The waits as spans labelled `type lock` (a string table), and the labels.
fn wait_spans(p: &Profile, c: &Contention) -> (Vec<Span>, Vec<String>) {
    let mut labels: Vec<String> = Vec::new();
    let mut ids: HashMap<String, u64> = HashMap::new();
    let spans = c
        .waits
        .iter()
        .map(|w| {
            let label = format!("{} {}", w.kind.type_name(), lock_key(w));
            let next = labels.len() as u64;
            let id = *ids.entry(label.clone()).or_insert_with(|| {
                labels.push(label);
                next
            });
            Span {
                thread: thread_index(p, w.stack),
                start: w.start,
                duration: w.duration,
                extra: id,
                lane: 0,
            }
        })
        .collect();
    (spans, labels)
}

/// Whether the profile has a timed call or a lock wait.
pub fn has_any(p: &Profile) -> bool {
    p.latency
        .as_ref()
        .is_some_and(|l| l.functions.iter().any(|f| !f.calls.is_empty()))
        || p.contention.as_ref().is_some_and(|c| !c.waits.is_empty())
}

/// When the last timed call or lock wait ended, ns since capture start (0 without any).
pub fn last_end(p: &Profile) -> u64 {
    let calls = p
        .latency
        .iter()
        .flat_map(|l| &l.functions)
        .flat_map(|f| &f.calls)
        .map(|c| c.start.saturating_add(c.duration));
    let waits = p
        .contention
        .iter()
        .flat_map(|c| &c.waits)
        .map(|w| w.start.saturating_add(w.duration));
    calls.chain(waits).max().unwrap_or(0)
}

/// The page's `latency` object; null when the capture timed no function and recorded no
/// waits.
pub fn to_json(p: &Profile, grid: Grid) -> Value {
    if p.latency.is_none() && p.contention.is_none() {
        return Value::Null;
    }
    let functions: &[TimedFunction] = p.latency.as_ref().map_or(&[], |l| &l.functions);
    let mut groups = Vec::new();
    let mut dropped = Vec::new();
    for f in functions {
        let spans = f
            .calls
            .iter()
            .map(|c| Span {
                thread: thread_index(p, c.stack),
                start: c.start,
                duration: c.duration,
                extra: u64::from(c.depth),
                lane: 0,
            })
            .collect();
        let (kept, n) = slowest_kept(spans);
        groups.push(kept);
        dropped.push(n);
    }
    let (waits, labels) = p
        .contention
        .as_ref()
        .map(|c| wait_spans(p, c))
        .unwrap_or_default();
    let (waits, waits_dropped) = slowest_kept(waits);
    groups.push(waits);
    assign_lanes(&mut groups);
    let wait_spans = groups.pop().unwrap_or_default();
    json!({
        "functions": functions.iter().zip(&groups).zip(&dropped)
            .map(|((f, spans), &n)| function_json(f, spans, n, grid))
            .collect::<Vec<_>>(),
        "waits": p.contention.as_ref().map(|c| waits_json(p, c, &wait_spans, labels, waits_dropped, grid)),
    })
}

#[cfg(test)]
mod tests;
