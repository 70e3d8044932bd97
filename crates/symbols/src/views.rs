//! The report views computed from a [`Profile`]: functions, images, callers and callees trees.
//! Renderers format these; they do not aggregate themselves.

use crate::profile::{Profile, Stack};
use std::collections::HashMap;

/// Which samples a view counts (`--image`, `--kernel`/`--user`, `--comm`, `--pid`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Leaf image name (`mychardrv.ko`, `vmlinux`, `libc.so.6`) or its recorded path.
    pub image: Option<String>,
    /// Only samples whose leaf is in the kernel or a module.
    pub kernel: bool,
    /// Only samples whose leaf is in user space.
    pub user: bool,
    /// Only threads with this command name.
    pub comm: Option<String>,
    /// Only this process (or thread) id.
    pub pid: Option<i32>,
    /// Leave out the CPUs' idle loop (pid 0, `swapper`): on a board that is mostly waiting it
    /// otherwise tops every system-wide profile.
    pub hide_idle: bool,
}

impl Filter {
    /// Whether a stack is counted.
    pub fn keeps(&self, p: &Profile, s: &Stack) -> bool {
        let t = &p.threads[s.thread];
        if self.comm.as_ref().is_some_and(|c| *c != t.comm) {
            return false;
        }
        if self.pid.is_some_and(|pid| pid != t.pid && pid != t.tid) {
            return false;
        }
        if self.hide_idle && t.pid == 0 {
            return false;
        }
        let leaf = s
            .frames
            .first()
            .map(|f| &p.images[p.functions[p.frames[*f].function].image]);
        if let Some(name) = &self.image {
            match leaf {
                Some(img) if img.name == *name || img.recorded_path == *name => {}
                _ => return false,
            }
        }
        if self.kernel && !leaf.is_some_and(|i| i.kernel) {
            return false;
        }
        if self.user && leaf.is_none_or(|i| i.kernel) {
            return false;
        }
        true
    }
}

/// The profile with only the stacks the filter keeps (tables stay whole, so indices remain
/// valid). Takes the profile rather than copying it: a large capture's tables are most of
/// the report's memory.
pub fn filtered(mut p: Profile, f: &Filter) -> Profile {
    let f = f.clone();
    retain_stacks(&mut p, |p, s| f.keeps(p, s));
    p
}

/// Keeps the stacks `keep` says, and the samples of those stacks (their `stack` indices
/// renumbered): the one way stacks are dropped, so samples never point at the wrong one.
/// A stack a timed call or a wait starts from stays (the latency views show it), emptied
/// of its samples when `keep` does not keep it.
pub fn retain_stacks(p: &mut Profile, mut keep: impl FnMut(&Profile, &Stack) -> bool) {
    const DROPPED: u32 = u32::MAX;
    let referenced = crate::latency::referenced_stacks(p);
    let mut next = 0u32;
    let mut emptied = vec![false; p.stacks.len()];
    let new_index: Vec<u32> = p
        .stacks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let kept = keep(p, s);
            if kept || referenced.get(i).copied().unwrap_or(false) {
                emptied[i] = !kept;
                next += 1;
                next - 1
            } else {
                DROPPED
            }
        })
        .collect();
    let mut i = 0;
    p.stacks.retain_mut(|s| {
        i += 1;
        if emptied[i - 1] {
            s.counts.iter_mut().for_each(|c| *c = 0);
            s.periods.iter_mut().for_each(|c| *c = 0);
        }
        new_index[i - 1] != DROPPED
    });
    p.samples.retain_mut(|s| {
        let old = s.stack as usize;
        s.stack = new_index.get(old).copied().unwrap_or(DROPPED);
        s.stack != DROPPED && !emptied[old]
    });
    crate::latency::renumber_stacks(p, &new_index);
}

/// The profile with only the given events, in that order; stacks and samples of no selected
/// event are dropped.
pub fn select_events(mut p: Profile, events: &[usize]) -> Profile {
    let mut new_index = vec![u32::MAX; p.events.len()];
    for (new, old) in events.iter().enumerate().rev() {
        new_index[*old] = new as u32;
    }
    p.events = events.iter().map(|e| p.events[*e].clone()).collect();
    for s in &mut p.stacks {
        s.counts = events.iter().map(|e| s.counts[*e]).collect();
        s.periods = events.iter().map(|e| s.periods[*e]).collect();
    }
    p.samples.retain_mut(|s| {
        s.event = new_index.get(s.event as usize).copied().unwrap_or(u32::MAX);
        s.event != u32::MAX
    });
    retain_stacks(&mut p, |_, s| s.counts.iter().any(|c| *c > 0));
    p
}

/// [`into_time_window`] on a copy, for tests that keep the whole profile too.
#[cfg(test)]
pub(crate) fn time_window(p: &Profile, start: Option<u64>, end: Option<u64>) -> Profile {
    into_time_window(p.clone(), start, end)
}

/// The profile restricted to the samples with `start <= time < end` (ns since capture
/// start, either bound open): stack counts and periods and the events' totals recomputed
/// from those samples, stacks left without samples dropped, everything else kept. What
/// `kprofctl report --time` applies before any view, and what a timeline selection sums.
/// Takes the profile the caller gives up, so its tables are not copied.
pub fn into_time_window(mut p: Profile, start: Option<u64>, end: Option<u64>) -> Profile {
    let lo = start.unwrap_or(0);
    let hi = end.unwrap_or(u64::MAX).max(lo);
    // Samples are sorted by time.
    let a = p.samples.partition_point(|s| s.time < lo);
    let b = p.samples.partition_point(|s| s.time < hi);
    p.samples.truncate(b);
    p.samples.drain(..a);
    for s in &mut p.stacks {
        s.counts.iter_mut().for_each(|c| *c = 0);
        s.periods.iter_mut().for_each(|c| *c = 0);
    }
    for e in &mut p.events {
        e.total_samples = 0;
        e.total_period = 0;
    }
    for smp in &p.samples {
        let (st, ev) = (smp.stack as usize, smp.event as usize);
        let (Some(stack), Some(event)) = (p.stacks.get_mut(st), p.events.get_mut(ev)) else {
            continue;
        };
        if let (Some(c), Some(per)) = (stack.counts.get_mut(ev), stack.periods.get_mut(ev)) {
            *c += 1;
            *per = per.saturating_add(smp.period);
        }
        event.total_samples += 1;
        event.total_period = event.total_period.saturating_add(smp.period);
    }
    crate::latency::keep_window(&mut p, lo, hi);
    retain_stacks(&mut p, |_, s| s.counts.iter().any(|c| *c > 0));
    p.meta.window = Some(crate::profile::TimeWindow { start, end });
    p
}

/// Index of the function a stack's samples are "self" time of: its first non-inlined frame,
/// the symbol as `perf report` names it.
pub fn self_frame(p: &Profile, s: &Stack) -> Option<usize> {
    s.frames
        .iter()
        .copied()
        .find(|f| !p.frames[*f].inlined)
        .or_else(|| s.frames.first().copied())
}

/// Samples per `(file, line)`.
type LineCounts = HashMap<(std::sync::Arc<str>, u32), u64>;

/// A row of the functions view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRow {
    /// Index into [`Profile::functions`].
    pub function: usize,
    /// Self samples per event, parallel to [`Profile::events`].
    pub samples: Vec<u64>,
    /// Self event counts (summed sample periods) per event, parallel to `samples`.
    pub periods: Vec<u64>,
    /// The source line of this function with most samples of the first event.
    pub hot_line: Option<HotLine>,
}

/// The hottest source line of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotLine {
    /// Source file.
    pub file: String,
    /// Line of `file`.
    pub line: u32,
    /// Self samples on the line.
    pub samples: u64,
}

/// Self samples per function, most samples of event `sort_event` first.
pub fn functions(p: &Profile, f: &Filter) -> Vec<FunctionRow> {
    functions_by(p, f, 0)
}

/// [`functions`], sorted by the samples of event `sort_event`.
pub fn functions_by(p: &Profile, f: &Filter, sort_event: usize) -> Vec<FunctionRow> {
    let nev = p.events.len();
    let mut rows: HashMap<usize, (Vec<u64>, Vec<u64>, LineCounts)> = HashMap::new();
    for s in &p.stacks {
        if !f.keeps(p, s) {
            continue;
        }
        let Some(fr) = self_frame(p, s) else { continue };
        let frame = &p.frames[fr];
        let e = rows
            .entry(frame.function)
            .or_insert_with(|| (vec![0; nev], vec![0; nev], HashMap::new()));
        add(&mut e.0, &s.counts);
        add(&mut e.1, &s.periods);
        if let (Some(file), Some(line)) = (&frame.file, frame.line) {
            *e.2.entry((file.clone(), line)).or_default() +=
                s.counts.get(sort_event).copied().unwrap_or(0);
        }
    }
    let mut out: Vec<FunctionRow> = rows
        .into_iter()
        .map(|(function, (samples, periods, lines))| {
            let hot_line = lines
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|((file, line), samples)| HotLine {
                    file: file.to_string(),
                    line,
                    samples,
                });
            FunctionRow {
                function,
                samples,
                periods,
                hot_line,
            }
        })
        .collect();
    let name = |i: usize| p.functions[i].name.as_deref().unwrap_or("");
    out.sort_by(|a, b| {
        b.samples
            .get(sort_event)
            .cmp(&a.samples.get(sort_event))
            .then_with(|| {
                b.samples
                    .iter()
                    .sum::<u64>()
                    .cmp(&a.samples.iter().sum::<u64>())
            })
            .then_with(|| name(a.function).cmp(name(b.function)))
    });
    out
}

/// A row of the images summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRow {
    /// Index into [`Profile::images`].
    pub image: usize,
    /// Self samples per event.
    pub samples: Vec<u64>,
    /// Self event counts (summed sample periods) per event.
    pub periods: Vec<u64>,
}

/// Self samples per image, most first.
pub fn images(p: &Profile, f: &Filter) -> Vec<ImageRow> {
    let nev = p.events.len();
    let mut per: HashMap<usize, (Vec<u64>, Vec<u64>)> = HashMap::new();
    for s in &p.stacks {
        if !f.keeps(p, s) {
            continue;
        }
        let Some(fr) = self_frame(p, s) else { continue };
        let img = p.functions[p.frames[fr].function].image;
        let e = per
            .entry(img)
            .or_insert_with(|| (vec![0; nev], vec![0; nev]));
        add(&mut e.0, &s.counts);
        add(&mut e.1, &s.periods);
    }
    let mut out: Vec<ImageRow> = per
        .into_iter()
        .map(|(image, (samples, periods))| ImageRow {
            image,
            samples,
            periods,
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.image.cmp(&b.image)));
    out
}

/// Adds `b` to `a` element-wise (counts and periods of one more stack).
fn add(a: &mut [u64], b: &[u64]) {
    for (a, b) in a.iter_mut().zip(b) {
        *a = a.saturating_add(*b);
    }
}

/// Total samples per event that a filter keeps.
pub fn totals(p: &Profile, f: &Filter) -> Vec<u64> {
    let mut t = vec![0; p.events.len()];
    for s in p.stacks.iter().filter(|s| f.keeps(p, s)) {
        for (a, b) in t.iter_mut().zip(&s.counts) {
            *a += b;
        }
    }
    t
}

/// The count (summed sample periods) of event `event` over the stacks a filter keeps.
pub fn count_total(p: &Profile, f: &Filter, event: usize) -> u64 {
    p.stacks
        .iter()
        .filter(|s| f.keeps(p, s))
        .map(|s| s.periods.get(event).copied().unwrap_or(0))
        .fold(0, u64::saturating_add)
}

/// Functions whose name is `name`, or `image:name` to pick one image.
pub fn find_functions(p: &Profile, name: &str) -> Vec<usize> {
    let (image, func) = match name.split_once(':') {
        Some((i, f)) if !i.is_empty() && !f.starts_with(':') && !i.ends_with(':') => (Some(i), f),
        _ => (None, name),
    };
    p.functions
        .iter()
        .enumerate()
        .filter(|(_, f)| f.name.as_deref() == Some(func))
        .filter(|(_, f)| image.is_none_or(|i| p.images[f.image].name == i))
        .map(|(i, _)| i)
        .collect()
}

/// A node of a callers or callees tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallNode {
    /// Index into [`Profile::functions`].
    pub function: usize,
    /// Samples (of the chosen event) through this path.
    pub samples: u64,
    /// Source positions in this function that the path went through (for callers: the call
    /// sites; for callees: where the callee was when sampled), most samples first.
    pub sites: Vec<Site>,
    /// Children, most samples first.
    pub children: Vec<CallNode>,
}

/// A source position of a call tree node and the samples that passed through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Source file of the call site.
    pub file: String,
    /// Line of `file`.
    pub line: u32,
    /// Samples through the call site.
    pub samples: u64,
}

impl CallNode {
    fn new(function: usize) -> Self {
        CallNode {
            function,
            samples: 0,
            sites: Vec::new(),
            children: Vec::new(),
        }
    }

    fn count_site(&mut self, frame: &crate::profile::Frame, n: u64) {
        let (Some(file), Some(line)) = (&frame.file, frame.line) else {
            return;
        };
        match self
            .sites
            .iter_mut()
            .find(|s| s.line == line && *s.file == **file)
        {
            Some(s) => s.samples += n,
            None => self.sites.push(Site {
                file: file.to_string(),
                line,
                samples: n,
            }),
        }
    }

    /// The position most samples went through, falling back to none.
    pub fn top_site(&self) -> Option<&Site> {
        self.sites.first()
    }
}

/// Direction of a call tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Who calls the function: root = the function, children = its callers.
    Callers,
    /// What the function calls: root = the function, children = its callees.
    Callees,
}

/// The callers or callees tree of the functions `targets` (merged), counting event `event`.
/// Stacks run across the user→kernel boundary, so a syscall's user callers appear too.
pub fn call_tree(
    p: &Profile,
    f: &Filter,
    targets: &[usize],
    event: usize,
    dir: Direction,
) -> CallNode {
    let mut root = CallNode::new(targets.first().copied().unwrap_or(0));
    for s in p.stacks.iter().filter(|s| f.keeps(p, s)) {
        let n = s.counts.get(event).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        let func_of = |fr: &usize| p.frames[*fr].function;
        let path: Vec<usize> = match dir {
            Direction::Callers => match s.frames.iter().position(|x| targets.contains(&func_of(x)))
            {
                Some(i) => s.frames[i + 1..].to_vec(),
                None => continue,
            },
            Direction::Callees => {
                match s.frames.iter().rposition(|x| targets.contains(&func_of(x))) {
                    Some(i) => s.frames[..i].iter().rev().copied().collect(),
                    None => continue,
                }
            }
        };
        root.samples += n;
        let mut node = &mut root;
        let mut prev = node.function;
        for fr in path {
            let func = func_of(&fr);
            // Inline expansion repeats a function for consecutive frames of one address.
            if func == prev {
                continue;
            }
            prev = func;
            let i = match node.children.iter().position(|c| c.function == func) {
                Some(i) => i,
                None => {
                    node.children.push(CallNode::new(func));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
            node.samples += n;
            node.count_site(&p.frames[fr], n);
        }
    }
    sort_tree(&mut root);
    root
}

fn sort_tree(n: &mut CallNode) {
    n.sites
        .sort_by(|a, b| b.samples.cmp(&a.samples).then(a.line.cmp(&b.line)));
    n.children
        .sort_by(|a, b| b.samples.cmp(&a.samples).then(a.function.cmp(&b.function)));
    for c in &mut n.children {
        sort_tree(c);
    }
}

/// `A/B` for `--ratio`, given the two events' counts: their summed sample periods
/// ([`FunctionRow::periods`]), not their samples, which compare only when both events were
/// sampled at one fixed period. `None` when B counted nothing.
pub fn ratio(a: u64, b: u64) -> Option<f64> {
    (b != 0).then(|| a as f64 / b as f64)
}

/// Why the counts of events `a` and `b` cannot be compared, when they cannot: an event
/// sampled by frequency without PERF_SAMPLE_PERIOD stands for an unknown count per sample.
pub fn ratio_unknown(p: &Profile, a: usize, b: usize) -> Option<String> {
    let unknown: Vec<&str> = [a, b]
        .iter()
        .filter(|e| !p.events[**e].period_known)
        .map(|e| p.events[*e].name.as_str())
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "ratio unknown: the samples of {} carry no period (PERF_SAMPLE_PERIOD) and were taken by frequency, so the events they stand for are unknown",
            unknown.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Event, Frame, Function, Image, Sample, Stack, SymbolSource, Thread};

    fn frame(function: usize, line: u32) -> Frame {
        Frame {
            function,
            address: 0x1000 + u64::from(line),
            file: Some("drv.c".into()),
            line: Some(line),
            inlined: false,
        }
    }

    /// A callers tree names each caller's busiest call site, across distinct stacks.
    #[test]
    fn call_tree_callers_records_call_sites() {
        let image = Image {
            name: "drv.ko".into(),
            recorded_path: "[drv]".into(),
            build_id: None,
            kernel: true,
            symbols: SymbolSource::Kallsyms,
        };
        let func = |name: &str| Function {
            image: 0,
            name: Some(name.into()),
            start: 0,
            size: None,
            file: None,
            line: None,
        };
        let p = Profile {
            events: vec![Event {
                name: "cpu-clock".into(),
                total_samples: 5,
                total_period: 5,
                period_known: true,
            }],
            images: vec![image],
            functions: vec![func("hot"), func("caller")],
            // hot at line 3; the caller at line 10 (3 samples) and line 12 (2 samples).
            frames: vec![frame(0, 3), frame(1, 10), frame(1, 12)],
            threads: vec![Thread {
                pid: 1,
                tid: 1,
                comm: "sh".into(),
            }],
            stacks: vec![
                Stack {
                    frames: vec![0, 1],
                    thread: 0,
                    counts: vec![3],
                    periods: vec![3],
                },
                Stack {
                    frames: vec![0, 2],
                    thread: 0,
                    counts: vec![2],
                    periods: vec![2],
                },
            ],
            warnings: Vec::new(),
            ..Profile::default()
        };
        let idle_only = Filter {
            hide_idle: true,
            ..Filter::default()
        };
        let mut idle = p.clone();
        idle.threads[0].pid = 0;
        assert_eq!(totals(&idle, &idle_only), vec![0], "pid 0 is the idle loop");
        assert_eq!(totals(&p, &idle_only), vec![5], "other threads stay");
        let tree = call_tree(&p, &Filter::default(), &[0], 0, Direction::Callers);
        assert_eq!(tree.samples, 5);
        let caller = &tree.children[0];
        assert_eq!((caller.function, caller.samples), (1, 5));
        let sites: Vec<(u32, u64)> = caller.sites.iter().map(|s| (s.line, s.samples)).collect();
        assert_eq!(sites, vec![(10, 3), (12, 2)]);
        assert_eq!(caller.top_site().map(|s| s.line), Some(10));
    }

    /// Two stacks, one sampled at 0..5 ms and one at 5..10 ms (period 1000 each), on
    /// events 0 and 1 alternately: the samples behind the counts of a window are known.
    fn two_phases() -> Profile {
        let ev = |name: &str| Event {
            name: name.into(),
            total_samples: 0,
            total_period: 0,
            period_known: true,
        };
        let stack = || Stack {
            frames: Vec::new(),
            thread: 0,
            counts: vec![0, 0],
            periods: vec![0, 0],
        };
        let mut p = Profile {
            events: vec![ev("cpu-clock"), ev("page-faults")],
            stacks: vec![stack(), stack()],
            ..Profile::default()
        };
        for ms in 0..10u64 {
            p.samples.push(Sample {
                time: ms * 1_000_000,
                stack: u32::from(ms >= 5),
                event: (ms % 2) as u32,
                cpu: 0,
                period: 1000,
            });
        }
        into_time_window(p, None, None)
    }

    /// A window counts exactly the samples with start <= time < end, per stack and event,
    /// and drops the stacks it leaves empty (renumbering the samples' stacks).
    #[test]
    fn time_window_profile_half_open_counts() {
        let p = two_phases();
        assert_eq!(p.stacks[0].counts, vec![3, 2]);
        assert_eq!(p.events[0].total_period, 5000);
        let w = time_window(&p, Some(4_000_000), Some(7_000_000));
        assert_eq!(w.samples.len(), 3, "4, 5 and 6 ms; 7 ms is the open end");
        assert_eq!(w.stacks.len(), 2);
        assert_eq!(w.stacks[0].counts, vec![1, 0]);
        assert_eq!(w.stacks[1].counts, vec![1, 1]);
        assert_eq!(
            (w.events[1].total_samples, w.events[1].total_period),
            (1, 1000)
        );
        let late = time_window(&p, Some(5_000_000), None);
        assert_eq!(late.stacks.len(), 1, "the first phase's stack is dropped");
        assert!(late.samples.iter().all(|s| s.stack == 0));
        assert_eq!(late.stacks[0].counts, vec![2, 3]);
        let none = time_window(&p, Some(7_000_000), Some(7_000_000));
        assert!(none.samples.is_empty() && none.stacks.is_empty());
    }

    /// Selecting one event keeps only its samples, renumbered to the new event order.
    #[test]
    fn select_events_profile_samples_follow() {
        let p = select_events(two_phases(), &[1]);
        assert_eq!(p.events.len(), 1);
        assert_eq!(p.samples.len(), 5);
        assert!(p.samples.iter().all(|s| s.event == 0));
        let again = time_window(&p, None, None);
        assert_eq!(
            again.stacks, p.stacks,
            "the samples still add up to the stacks"
        );
    }
}
