//! Blocked time per thread for the timeline's thread tracks, from a capture recorded with
//! `--off-cpu`.
//!
//! Every off-CPU sample is one span (switch-out in S or D → the thread's next switch-in). The
//! page gets no spans, only blocked ns per (thread, bin, state): what the drawing needs, and a
//! size that follows the bins, not the number of context switches.

use std::collections::BTreeMap;

use kprof_symbols::profile::Profile;
use serde_json::{json, Value};

use super::pack::Packed;

/// One blocked span of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Thread id (the page maps it to its thread table).
    pub tid: i32,
    /// Uninterruptible (D) rather than sleeping (S).
    pub uninterruptible: bool,
    /// Switch-out, ns since capture start.
    pub start: u64,
    /// ns until the switch-in.
    pub ns: u64,
}

/// The blocked spans of a profile that still has its off-CPU events (before
/// `kprof_symbols::off_cpu::on_cpu`); none when it recorded no context switches.
pub fn spans(p: &Profile) -> Vec<Span> {
    let Some(off) = &p.off_cpu else {
        return Vec::new();
    };
    p.samples
        .iter()
        .filter(|s| {
            let e = s.event as usize;
            e == off.sleeping || e == off.uninterruptible
        })
        .filter_map(|s| {
            let stack = p.stacks.get(s.stack as usize)?;
            Some(Span {
                tid: p.threads.get(stack.thread)?.tid,
                uninterruptible: s.event as usize == off.uninterruptible,
                start: s.time,
                ns: s.period,
            })
        })
        .collect()
}

/// Blocked ns of one thread: only the bins with any, both states.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ThreadBlocked {
    /// Index into `Profile::threads`.
    pub thread: usize,
    /// (bin, S ns, D ns), bins ascending.
    pub bins: Vec<(u64, u64, u64)>,
}

impl ThreadBlocked {
    /// S and D ns summed over every bin.
    pub fn total(&self) -> u64 {
        self.bins.iter().map(|b| b.1 + b.2).sum()
    }
}

/// Spans split over bins of `width` ns (`count` of them): a span crossing bin edges gives each
/// bin its part; time past the last bin stays in the last bin, so a thread's bins sum to its
/// blocked time exactly. Threads the profile does not have are left out.
pub fn bin(p: &Profile, spans: &[Span], width: u64, count: u64) -> Vec<ThreadBlocked> {
    if width == 0 || count == 0 {
        return Vec::new();
    }
    let thread_of: BTreeMap<i32, usize> = p
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| (t.tid, i))
        .collect();
    let mut per: BTreeMap<(usize, u64), (u64, u64)> = BTreeMap::new();
    for s in spans {
        let Some(&thread) = thread_of.get(&s.tid) else {
            continue;
        };
        let mut add = |b: u64, ns: u64| {
            let e = per.entry((thread, b)).or_default();
            if s.uninterruptible {
                e.1 += ns;
            } else {
                e.0 += ns;
            }
        };
        let (mut t, end) = (s.start, s.start.saturating_add(s.ns));
        while t < end {
            let b = t / width;
            if b >= count - 1 {
                add(count - 1, end - t);
                break;
            }
            let edge = (b + 1) * width;
            add(b, edge.min(end) - t);
            t = edge;
        }
    }
    let mut out: Vec<ThreadBlocked> = Vec::new();
    for ((thread, b), (s, d)) in per {
        if out.last().is_none_or(|t| t.thread != thread) {
            out.push(ThreadBlocked {
                thread,
                bins: Vec::new(),
            });
        }
        if let Some(t) = out.last_mut() {
            t.bins.push((b, s, d));
        }
    }
    out
}

/// The page's `blocked` array: per thread, bins as deltas and S/D ns per bin.
pub fn to_json(threads: &[ThreadBlocked]) -> Value {
    threads
        .iter()
        .map(|t| {
            let (mut bins, mut s, mut d) =
                (Packed::default(), Packed::default(), Packed::default());
            let mut last = 0;
            for &(b, sn, dn) in &t.bins {
                bins.push(b - last);
                last = b;
                s.push(sn);
                d.push(dn);
            }
            json!({
                "thread": t.thread, "n": bins.len(), "bin": bins.finish(),
                "s": s.finish(), "d": d.finish(), "total": t.total(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kprof_symbols::profile::Thread;

    fn profile(tids: &[i32]) -> Profile {
        let mut p = Profile::default();
        for &tid in tids {
            p.threads.push(Thread {
                pid: 100,
                tid,
                comm: format!("t{tid}"),
            });
        }
        p
    }

    fn span(tid: i32, d: bool, start: u64, ns: u64) -> Span {
        Span {
            tid,
            uninterruptible: d,
            start,
            ns,
        }
    }

    /// A span crossing bin edges is split at them, each part in its own bin and state.
    #[test]
    fn bin_spans_split_at_edges() {
        let p = profile(&[7, 8]);
        let got = bin(
            &p,
            &[
                span(8, false, 5, 20),
                span(8, true, 12, 3),
                span(7, true, 0, 10),
            ],
            10,
            5,
        );
        assert_eq!(
            got,
            vec![
                ThreadBlocked {
                    thread: 0,
                    bins: vec![(0, 0, 10)]
                },
                ThreadBlocked {
                    thread: 1,
                    bins: vec![(0, 5, 0), (1, 10, 3), (2, 5, 0)]
                },
            ]
        );
    }

    /// Time past the last bin stays in it: every thread's bins sum to its spans' ns.
    #[test]
    fn bin_spans_past_end_kept_in_last_bin() {
        let p = profile(&[1]);
        let spans = [span(1, false, 25, 100), span(1, true, 0, 7)];
        let got = bin(&p, &spans, 10, 3);
        assert_eq!(got[0].bins, vec![(0, 0, 7), (2, 100, 0)]);
        assert_eq!(got[0].total(), spans.iter().map(|s| s.ns).sum::<u64>());
    }

    /// Spans of threads the profile lacks, and a profile without bins, give nothing.
    #[test]
    fn bin_spans_unknown_thread_or_no_bins_empty() {
        let p = profile(&[1]);
        assert!(bin(&p, &[span(2, false, 0, 5)], 10, 3).is_empty());
        assert!(bin(&p, &[span(1, false, 0, 5)], 0, 0).is_empty());
    }

    /// The JSON has one entry per thread with bins as deltas and its total.
    #[test]
    fn to_json_blocked_packed_deltas() {
        let t = ThreadBlocked {
            thread: 3,
            bins: vec![(2, 5, 0), (4, 0, 9)],
        };
        let v = to_json(&[t]);
        assert_eq!(v[0]["thread"], 3);
        assert_eq!(v[0]["n"], 2);
        assert_eq!(v[0]["total"], 14);
        let deltas: Packed = [2u64, 2].into_iter().collect();
        assert_eq!(v[0]["bin"], deltas.finish());
    }
}
