//! Off-CPU views: the capture's blocked time apart from its on-CPU samples, and blocked time
//! per function (inclusive: every function on the path it blocked under) and per call path,
//! split by task state.

use crate::profile::{Event, OffCpu, Profile};
use crate::views;
use std::collections::HashMap;

/// The on-CPU part of a profile: every event but the off-CPU ones.
pub fn on_cpu(mut p: Profile) -> Profile {
    let Some(off) = p.off_cpu.take() else {
        return p;
    };
    let keep: Vec<usize> = (0..p.events.len())
        .filter(|e| *e != off.sleeping && *e != off.uninterruptible)
        .collect();
    views::select_events(p, &keep)
}

/// The off-CPU part of a profile (events 0 = S, 1 = D), or `None` when the capture recorded
/// no context switches.
pub fn off_cpu(mut p: Profile) -> Option<Profile> {
    let off = p.off_cpu.take()?;
    let mut p = views::select_events(p, &[off.sleeping, off.uninterruptible]);
    p.off_cpu = Some(OffCpu {
        sleeping: 0,
        uninterruptible: 1,
        ..off
    });
    Some(p)
}

/// An off-CPU profile as one event, `off_cpu_ns`: sample counts are the times a thread
/// blocked, periods the ns it stayed blocked. With `ns_as_counts`, counts are the ns too, for
/// formats that weigh stacks by their counts (collapsed, flamegraph).
pub fn merged(p: &Profile, ns_as_counts: bool) -> Profile {
    let mut m = p.clone();
    let (s, d) = match &p.off_cpu {
        Some(o) => (o.sleeping, o.uninterruptible),
        None => (0, 0),
    };
    let sum = |v: &[u64]| {
        v.get(s).copied().unwrap_or(0)
            + if s == d {
                0
            } else {
                v.get(d).copied().unwrap_or(0)
            }
    };
    let total_period = p.events.iter().map(|e| e.total_period).sum();
    m.events = vec![Event {
        name: "off_cpu_ns".into(),
        total_samples: if ns_as_counts {
            total_period
        } else {
            p.events.iter().map(|e| e.total_samples).sum()
        },
        total_period,
        period_known: true,
    }];
    for st in &mut m.stacks {
        let (c, per) = (sum(&st.counts), sum(&st.periods));
        st.counts = vec![if ns_as_counts { per } else { c }];
        st.periods = vec![per];
    }
    for smp in &mut m.samples {
        smp.event = 0;
    }
    m.off_cpu = None;
    m
}

/// Blocked time of one function or call path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Blocked {
    /// ns blocked in state S (sleeping).
    pub sleeping_ns: u64,
    /// ns blocked in state D (uninterruptible).
    pub uninterruptible_ns: u64,
    /// Times it blocked.
    pub count: u64,
    /// Wall time of the threads it blocked on (each once, [`OffCpu::wall_ns`]): what "% of
    /// the threads' wall time" divides by.
    pub wall_ns: u64,
}

impl Blocked {
    /// S and D together.
    pub fn total_ns(&self) -> u64 {
        self.sleeping_ns + self.uninterruptible_ns
    }

    fn add(&mut self, p: &Profile, s: &crate::profile::Stack) {
        let (se, de) = events(p);
        self.sleeping_ns += s.periods.get(se).copied().unwrap_or(0);
        self.uninterruptible_ns += s.periods.get(de).copied().unwrap_or(0);
        self.count +=
            s.counts.get(se).copied().unwrap_or(0) + s.counts.get(de).copied().unwrap_or(0);
    }
}

fn events(p: &Profile) -> (usize, usize) {
    p.off_cpu
        .as_ref()
        .map_or((0, 1), |o| (o.sleeping, o.uninterruptible))
}

/// Functions by the time threads blocked with them on the path, most first; a function that
/// is on a path twice (recursion) counts once.
pub fn functions(p: &Profile, f: &views::Filter) -> Vec<(usize, Blocked)> {
    let mut by: HashMap<usize, (Blocked, Vec<i32>)> = HashMap::new();
    let mut seen = Vec::new();
    for s in p.stacks.iter().filter(|s| f.keeps(p, s)) {
        seen.clear();
        for fr in &s.frames {
            let func = p.frames[*fr].function;
            if !seen.contains(&func) {
                seen.push(func);
                let (b, tids) = by.entry(func).or_default();
                b.add(p, s);
                tids.push(p.threads[s.thread].tid);
            }
        }
    }
    let mut rows: Vec<(usize, Blocked)> = by
        .into_iter()
        .filter(|(_, (b, _))| b.count > 0)
        .map(|(func, (mut b, tids))| {
            b.wall_ns = wall_of(p, tids);
            (func, b)
        })
        .collect();
    rows.sort_by(|a, b| b.1.total_ns().cmp(&a.1.total_ns()).then(a.0.cmp(&b.0)));
    rows
}

/// Call paths (stacks, per thread) by blocked time, most first.
pub fn paths(p: &Profile, f: &views::Filter) -> Vec<(usize, Blocked)> {
    let mut rows: Vec<(usize, Blocked)> = p
        .stacks
        .iter()
        .enumerate()
        .filter(|(_, s)| f.keeps(p, s))
        .map(|(i, s)| {
            let mut b = Blocked::default();
            b.add(p, s);
            b.wall_ns = wall_of(p, vec![p.threads[s.thread].tid]);
            (i, b)
        })
        .filter(|(_, b)| b.count > 0)
        .collect();
    rows.sort_by(|a, b| b.1.total_ns().cmp(&a.1.total_ns()).then(a.0.cmp(&b.0)));
    rows
}

/// All blocked time the filter keeps.
pub fn total(p: &Profile, f: &views::Filter) -> Blocked {
    let mut b = Blocked::default();
    let mut tids = Vec::new();
    for s in p.stacks.iter().filter(|s| f.keeps(p, s)) {
        b.add(p, s);
        if s.counts.iter().any(|c| *c > 0) {
            tids.push(p.threads[s.thread].tid);
        }
    }
    b.wall_ns = wall_of(p, tids);
    b
}

/// The summed wall time of threads `tids` (duplicates counted once).
fn wall_of(p: &Profile, mut tids: Vec<i32>) -> u64 {
    let Some(off) = &p.off_cpu else { return 0 };
    tids.sort_unstable();
    tids.dedup();
    tids.iter().filter_map(|t| off.wall_ns.get(t)).sum()
}
