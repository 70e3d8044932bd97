//! Function latency and lock waits: what `record --latency` and `--contention` captured,
//! paired into calls and waits per thread, and the statistics the reports print.
//!
//! A call is the time from a function's entry probe to its return probe on the same thread;
//! a wait the time from a lock's `contention_begin` (or a waiting futex call's entry) to its
//! end on the same thread. Both are paired per thread, innermost first, so recursion and
//! nested calls pair correctly. What cannot be paired is counted, never paired wrongly: a
//! return without its entry (the call began before the capture, or its entry was lost) and an
//! entry without its return (still running at the end).
//!
//! Times are ns since capture start, as [`crate::profile::Sample::time`]; a `--time` window
//! keeps the calls and waits that began in it ([`crate::views::into_time_window`]).

use crate::profile::Profile;

/// The functions a capture timed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latency {
    /// In the order they were asked for.
    pub functions: Vec<TimedFunction>,
}

/// Where a timed function lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// A kernel function (kprobe).
    Kernel,
    /// A user function (uprobe).
    User,
}

/// One timed function and its calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedFunction {
    /// As the user named it (`mychardrv_read`, `/usr/bin/mychardrv-writer:write_request`).
    pub name: String,
    /// Kernel or user.
    pub kind: ProbeKind,
    /// Every paired call, by start time.
    pub calls: Vec<Call>,
    /// Entry-probe hits the kernel counted (the manifest's event count), when known.
    pub hits: Option<u64>,
    /// Entry and return records the kernel reported lost for this function's events: when
    /// not 0, some calls are missing and pairing may have failed around them.
    pub lost: u64,
    /// Returns with no entry before them on their thread: calls that began before the
    /// capture (or whose entry was lost). Not in `calls`.
    pub unmatched_returns: u64,
    /// Entries with no return by the end of the capture: calls still running. Not in
    /// `calls`.
    pub unfinished: u64,
}

/// One call of a timed function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Entry, ns since capture start.
    pub start: u64,
    /// From entry to return, ns.
    pub duration: u64,
    /// The entry's stack, an index into [`Profile::stacks`] (its thread is the stack's).
    pub stack: u32,
    /// CPU of the entry (`u32::MAX` when not recorded).
    pub cpu: u32,
    /// Calls of the same function open around it on its thread when it began (0: outermost).
    pub depth: u32,
}

/// Lock and futex waits (`record --contention`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contention {
    /// Kernel lock waits were recorded (`lock:contention_begin/end`).
    pub kernel_locks: bool,
    /// Futex waits were recorded (`syscalls:sys_enter_futex/sys_exit_futex`).
    pub futex: bool,
    /// Every paired wait, by start time.
    pub waits: Vec<Wait>,
    /// Ends without a start on their thread: waits that began before the capture.
    pub unmatched_ends: u64,
    /// Starts without an end: threads still waiting when the capture ended.
    pub unfinished: u64,
}

/// What a thread waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// A kernel lock; the flags of `lock:contention_begin` say which kind.
    Kernel {
        /// `LCB_F_*` flags of the wait's last begin (a mutex first spins, then sleeps).
        flags: u32,
    },
    /// A futex wait (`FUTEX_WAIT`, `FUTEX_LOCK_PI`, ...): a user-space lock or condition.
    Futex,
}

impl WaitKind {
    /// The lock type as `perf lock contention` prints it (`mutex`, `rwsem:W`, `spinlock`).
    pub fn type_name(&self) -> &'static str {
        let WaitKind::Kernel { flags } = *self else {
            return "futex";
        };
        // include/trace/events/lock.h's LCB_F_* and perf's lock_type_table.
        const SPIN: u32 = 1;
        const READ: u32 = 2;
        const WRITE: u32 = 4;
        const RT: u32 = 8;
        const PERCPU: u32 = 16;
        const MUTEX: u32 = 32;
        match flags {
            SPIN => "spinlock",
            f if f == SPIN | READ => "rwlock:R",
            f if f == SPIN | WRITE => "rwlock:W",
            READ => "rwsem:R",
            WRITE => "rwsem:W",
            RT => "rt-mutex",
            f if f == RT | READ => "rwlock-rt:R",
            f if f == RT | WRITE => "rwlock-rt:W",
            f if f == PERCPU | READ => "pcpu-sem:R",
            f if f == PERCPU | WRITE => "pcpu-sem:W",
            MUTEX => "mutex",
            f if f == MUTEX | SPIN => "mutex-spin",
            _ => "unknown",
        }
    }
}

/// One wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Kernel lock or futex.
    pub kind: WaitKind,
    /// The lock's address: kernel for a kernel lock, the futex word's user address.
    pub address: u64,
    /// The kernel symbol the lock is in (`dev+0x0 [mychardrv]`), for a static kernel lock.
    pub lock_name: Option<String>,
    /// Start, ns since capture start.
    pub start: u64,
    /// How long the thread waited, ns.
    pub duration: u64,
    /// The start's stack (where the thread waited), an index into [`Profile::stacks`].
    pub stack: u32,
    /// CPU of the start.
    pub cpu: u32,
}

/// Summary statistics of a set of durations (ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// How many.
    pub count: u64,
    /// Their sum.
    pub total: u64,
    /// Smallest.
    pub min: u64,
    /// Largest.
    pub max: u64,
    /// Median, by the nearest-rank method (a duration that occurred).
    pub p50: u64,
    /// 90th percentile, nearest rank.
    pub p90: u64,
    /// 99th percentile, nearest rank.
    pub p99: u64,
    /// Power-of-two buckets as bcc's `funclatency` prints them: `(low, high, count)` with
    /// `low <= d <= high`, from the first bucket with a count to the last one.
    pub histogram: Vec<(u64, u64, u64)>,
}

impl Stats {
    /// The statistics of `durations` (any order).
    pub fn of(durations: &[u64]) -> Stats {
        if durations.is_empty() {
            return Stats::default();
        }
        let mut d = durations.to_vec();
        d.sort_unstable();
        let rank = |p: u64| {
            // Nearest rank: the smallest value with at least p % of the values at or below.
            let n = d.len() as u64;
            let r = (p * n).div_ceil(100).clamp(1, n);
            d[(r - 1) as usize]
        };
        Stats {
            count: d.len() as u64,
            total: d.iter().fold(0u64, |a, b| a.saturating_add(*b)),
            min: d[0],
            max: d[d.len() - 1],
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            histogram: log2_histogram(&d),
        }
    }

    /// The mean, ns (0 when empty).
    pub fn mean(&self) -> u64 {
        self.total.checked_div(self.count).unwrap_or(0)
    }
}

/// funclatency's buckets: 0..1, 2..3, 4..7, ... (bucket k holds `2^k ..= 2^(k+1)-1`, bucket
/// 0 holds 0 and 1).
fn log2_histogram(sorted: &[u64]) -> Vec<(u64, u64, u64)> {
    let bucket = |d: u64| if d < 2 { 0 } else { 63 - d.leading_zeros() };
    let mut counts = [0u64; 64];
    for d in sorted {
        counts[bucket(*d) as usize] += 1;
    }
    let first = counts.iter().position(|c| *c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|c| *c > 0).unwrap_or(0);
    (first..=last)
        .map(|k| {
            let low = if k == 0 { 0 } else { 1u64 << k };
            let high = if k == 63 {
                u64::MAX
            } else {
                (1u64 << (k + 1)) - 1
            };
            (low, high, counts[k])
        })
        .collect()
}

impl TimedFunction {
    /// The statistics of its calls.
    pub fn stats(&self) -> Stats {
        Stats::of(&self.calls.iter().map(|c| c.duration).collect::<Vec<_>>())
    }

    /// Its `n` slowest calls, slowest first (earlier first among equals).
    pub fn slowest(&self, n: usize) -> Vec<&Call> {
        let mut calls: Vec<&Call> = self.calls.iter().collect();
        calls.sort_by(|a, b| b.duration.cmp(&a.duration).then(a.start.cmp(&b.start)));
        calls.truncate(n);
        calls
    }
}

/// Waits grouped by one key, with their statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitGroup {
    /// What the group is: the lock (`dev+0x0 [mychardrv]`, or its address) or the waiting
    /// function (the first frame of the wait's stack outside the locking code).
    pub name: String,
    /// The lock type (`mutex`, `futex`, ...); `mixed` when the group has several.
    pub kind: String,
    /// The waits' durations.
    pub stats: Stats,
    /// A stack of the group's longest wait, an index into [`Profile::stacks`].
    pub longest_stack: u32,
}

impl Contention {
    /// Waits grouped by lock (name, else address), most total wait first.
    pub fn by_lock(&self) -> Vec<WaitGroup> {
        group(&self.waits, |w| {
            w.lock_name
                .clone()
                .unwrap_or_else(|| format!("{:#x}", w.address))
        })
    }

    /// Waits grouped by the function that waited (`caller(stack)`), most total wait first.
    pub fn by_caller(&self, caller: impl Fn(u32) -> String) -> Vec<WaitGroup> {
        group(&self.waits, |w| caller(w.stack))
    }
}

fn group(waits: &[Wait], key: impl Fn(&Wait) -> String) -> Vec<WaitGroup> {
    let mut groups: std::collections::BTreeMap<String, Vec<&Wait>> = Default::default();
    for w in waits {
        groups.entry(key(w)).or_default().push(w);
    }
    let mut out: Vec<WaitGroup> = groups
        .into_iter()
        .map(|(name, ws)| {
            let kinds: std::collections::BTreeSet<&str> =
                ws.iter().map(|w| w.kind.type_name()).collect();
            let longest = ws
                .iter()
                .max_by_key(|w| (w.duration, std::cmp::Reverse(w.start)))
                .map_or(0, |w| w.stack);
            WaitGroup {
                name,
                kind: if kinds.len() == 1 {
                    kinds.into_iter().next().unwrap_or("unknown").to_string()
                } else {
                    "mixed".into()
                },
                stats: Stats::of(&ws.iter().map(|w| w.duration).collect::<Vec<_>>()),
                longest_stack: longest,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.stats
            .total
            .cmp(&a.stats.total)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// Per stack of `p`, whether a call or a wait starts from it.
pub(crate) fn referenced_stacks(p: &Profile) -> Vec<bool> {
    let mut r = vec![false; p.stacks.len()];
    let mut mark = |s: u32| {
        if let Some(x) = r.get_mut(s as usize) {
            *x = true;
        }
    };
    for f in p.latency.iter().flat_map(|l| &l.functions) {
        f.calls.iter().for_each(|c| mark(c.stack));
    }
    for w in p.contention.iter().flat_map(|c| &c.waits) {
        mark(w.stack);
    }
    r
}

/// Gives the calls and waits the stack indices `new_index` maps theirs to (every stack they
/// start from is kept: [`crate::views::retain_stacks`]).
pub(crate) fn renumber_stacks(p: &mut Profile, new_index: &[u32]) {
    let renumber = |s: &mut u32| *s = new_index.get(*s as usize).copied().unwrap_or(*s);
    for f in p.latency.iter_mut().flat_map(|l| &mut l.functions) {
        f.calls.iter_mut().for_each(|c| renumber(&mut c.stack));
    }
    for w in p.contention.iter_mut().flat_map(|c| &mut c.waits) {
        renumber(&mut w.stack);
    }
}

/// Keeps the calls and waits that began in `[start, end)` (times stay since capture start,
/// as the window's samples' do).
pub(crate) fn keep_window(profile: &mut Profile, start: u64, end: u64) {
    let inside = |t: u64| t >= start && t < end;
    if let Some(l) = &mut profile.latency {
        for f in &mut l.functions {
            f.calls.retain(|c| inside(c.start));
        }
    }
    if let Some(c) = &mut profile.contention {
        c.waits.retain(|w| inside(w.start));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest-rank percentiles and funclatency's buckets on a known set.
    #[test]
    fn stats_percentiles_and_histogram() {
        let d: Vec<u64> = (1..=100).collect();
        let s = Stats::of(&d);
        assert_eq!((s.count, s.min, s.max, s.total), (100, 1, 100, 5050));
        assert_eq!((s.p50, s.p90, s.p99), (50, 90, 99));
        assert_eq!(s.mean(), 50);
        assert_eq!(s.histogram[0], (0, 1, 1));
        assert_eq!(s.histogram[1], (2, 3, 2));
        assert_eq!(s.histogram.last(), Some(&(64, 127, 37)));
        let one = Stats::of(&[20_000_000]);
        assert_eq!((one.p50, one.p99), (20_000_000, 20_000_000));
        assert_eq!(one.histogram, [(16_777_216, 33_554_431, 1)]);
        assert_eq!(Stats::of(&[]), Stats::default());
    }

    /// perf lock's type names from the begin flags.
    #[test]
    fn wait_kind_type_names() {
        let k = |flags| WaitKind::Kernel { flags }.type_name();
        assert_eq!(k(32), "mutex");
        assert_eq!(k(33), "mutex-spin");
        assert_eq!(k(4), "rwsem:W");
        assert_eq!(k(1), "spinlock");
        assert_eq!(k(0x80), "unknown");
        assert_eq!(WaitKind::Futex.type_name(), "futex");
    }
}
