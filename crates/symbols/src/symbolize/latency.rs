//! Probe and wait samples (`record --latency`, `--contention`; perf's `probe:F` and
//! `probe:F__return` events too) kept while reading, then paired per thread into
//! [`crate::latency`]'s calls and waits. They are no on-CPU samples: they count nothing and
//! leave [`crate::Profile::events`] at the end.

use super::State;
use crate::capture::Capture;
use crate::latency::{Call, Contention, Latency, ProbeKind, TimedFunction, Wait, WaitKind};
use crate::tracing_data::TracingData;
use linux_perf_data::linux_perf_event_reader::SampleRecord;
use std::collections::HashMap;

/// The suffix of a return probe's event name, as `perf probe` and the agent name them.
const RETURN_SUFFIX: &str = "__return";
/// `FUTEX_CMD_MASK`'s complement: the private and clock flags of a futex op.
const FUTEX_FLAGS: u64 = 128 | 256;
/// Futex ops that wait: WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2.
const FUTEX_WAIT_OPS: [u64; 5] = [0, 6, 9, 11, 13];

/// What a probe or wait event is to the pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Entry(usize),
    Return(usize),
    LockBegin,
    LockEnd,
    FutexEnter,
    FutexExit,
}

/// One hit as read: absolute time, thread, and what pairing needs of its fields.
#[derive(Debug, Clone, Copy)]
struct Hit {
    time: u64,
    tid: i32,
    cpu: u32,
    role: Role,
    /// The stack of an entry, a return or a wait's start (0 for a wait's end).
    stack: u32,
    /// The sample carried a call chain or a user stack (a 32-bit Arm agent's returns do not).
    chained: bool,
    /// A lock's or futex word's address.
    address: u64,
    /// `contention_begin`'s flags, a futex call's op.
    flags: u64,
}

/// Where the fields pairing reads are in a tracepoint's raw record: (offset, size).
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    address: Option<(usize, usize)>,
    flags: Option<(usize, usize)>,
}

/// The probe and wait events of a capture and their hits while reading.
#[derive(Debug, Default)]
pub(super) struct Probes {
    roles: HashMap<usize, Role>,
    fields: HashMap<usize, Fields>,
    functions: Vec<TimedFunction>,
    kernel_locks: bool,
    futex: bool,
    hits: Vec<Hit>,
    big_endian: bool,
}

impl Probes {
    /// Whether event `e` is a probe or wait event.
    pub(super) fn is_probe(&self, e: usize) -> bool {
        self.roles.contains_key(&e)
    }
}

impl State<'_> {
    /// Finds the probe and wait events among the capture's events (named by now): each `F`
    /// with an `F__return` beside it, and the contention tracepoints.
    pub(super) fn probe_events(&mut self, capture: &Capture, tracing: Option<&TracingData>) {
        let names: Vec<String> = self.profile.events.iter().map(|e| e.name.clone()).collect();
        let asked = capture
            .manifest
            .as_ref()
            .map_or(&[][..], |m| &m.latency[..]);
        for (i, name) in names.iter().enumerate() {
            let ret = format!("{name}{RETURN_SUFFIX}");
            let Some(r) = names.iter().position(|n| *n == ret) else {
                continue;
            };
            let probe = asked.iter().find(|p| p.entry_event == *name);
            let f = self.probes.functions.len();
            self.probes.functions.push(TimedFunction {
                name: probe.map_or_else(|| name.clone(), |p| p.function.clone()),
                kind: match probe {
                    Some(p) if p.kind == kprof_capture::manifest::PROBE_UPROBE => ProbeKind::User,
                    Some(_) => ProbeKind::Kernel,
                    None if name.starts_with("probe_") => ProbeKind::User,
                    None => ProbeKind::Kernel,
                },
                calls: Vec::new(),
                hits: event_count(capture, i),
                lost: event_lost(capture, i) + event_lost(capture, r),
                unmatched_returns: 0,
                unfinished: 0,
            });
            self.probes.roles.insert(i, Role::Entry(f));
            self.probes.roles.insert(r, Role::Return(f));
        }
        let waits = [
            (
                "lock:contention_begin",
                Role::LockBegin,
                "lock_addr",
                "flags",
            ),
            ("lock:contention_end", Role::LockEnd, "lock_addr", ""),
            ("syscalls:sys_enter_futex", Role::FutexEnter, "uaddr", "op"),
            ("syscalls:sys_exit_futex", Role::FutexExit, "", ""),
            // 32-bit kernels' `futex` (240) beside `futex_time64`, traced as `futex`.
            (
                "syscalls:sys_enter_futex_time32",
                Role::FutexEnter,
                "uaddr",
                "op",
            ),
            ("syscalls:sys_exit_futex_time32", Role::FutexExit, "", ""),
        ];
        for (event, role, address, flags) in waits {
            let Some(i) = names.iter().position(|n| n == event) else {
                continue;
            };
            let format = event
                .split_once(':')
                .and_then(|(s, e)| tracing?.format(s, e));
            let at = |f: &str| {
                format
                    .and_then(|fm| fm.field(f))
                    .map(|f| (f.offset, f.size))
            };
            self.probes.fields.insert(
                i,
                Fields {
                    address: at(address),
                    flags: at(flags),
                },
            );
            self.probes.roles.insert(i, role);
            match role {
                Role::LockBegin => self.probes.kernel_locks = true,
                Role::FutexEnter => self.probes.futex = true,
                _ => {}
            }
        }
        self.probes.big_endian = tracing.is_some_and(|t| t.big_endian);
    }

    /// A sample of probe or wait event `e`: kept with its stack (entries and wait starts).
    pub(super) fn on_probe(
        &mut self,
        s: &SampleRecord<'_>,
        e: usize,
        time: Option<u64>,
        stack_buf: &mut Vec<usize>,
    ) {
        let (Some(&role), Some(time)) = (self.probes.roles.get(&e), time) else {
            return;
        };
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        let thread = self.stacks.thread(&mut self.profile.threads, pid, tid);
        let chained = matches!(
            role,
            Role::Entry(_) | Role::Return(_) | Role::LockBegin | Role::FutexEnter
        );
        let stack = if chained {
            stack_buf.clear();
            self.sample_frames(s, pid, stack_buf);
            let nev = self.profile.events.len();
            self.stacks
                .intern(&mut self.profile.stacks, thread, stack_buf, nev) as u32
        } else {
            0
        };
        let fields = self.probes.fields.get(&e).copied().unwrap_or_default();
        let raw = s.raw.as_ref().map(|r| r.as_slice());
        let read =
            |at: Option<(usize, usize)>| read_field(raw.as_deref()?, at?, self.probes.big_endian);
        self.probes.hits.push(Hit {
            time,
            tid,
            cpu: s.cpu.unwrap_or(u32::MAX),
            role,
            stack,
            chained: s.callchain.is_some() || s.user_stack.is_some(),
            address: read(fields.address).unwrap_or(0),
            flags: read(fields.flags).unwrap_or(0),
        });
    }

    /// Pairs the hits into calls and waits, with times since capture start (`finish_times`
    /// has set it).
    pub(super) fn finish_probes(&mut self, capture: &Capture) {
        let probes = std::mem::take(&mut self.probes);
        if probes.roles.is_empty() {
            return;
        }
        let start = self.profile.meta.start_ns.unwrap_or(0);
        let mut hits = probes.hits;
        // Records of a file are in time order per CPU only; stable, so a return and the
        // entry of the next call at one ns keep their order.
        hits.sort_by_key(|h| h.time);
        let mut functions = probes.functions;
        let returns = pair_calls(&hits, &mut functions, start);
        self.join_return_chains(&mut functions, &returns);
        for f in &functions {
            if f.lost > 0 {
                self.profile.warnings.push(format!(
                    "--latency {}: the kernel lost {} of its entry and return records: some calls are missing, and calls around them may be paired wrongly",
                    f.name, f.lost
                ));
            }
        }
        if !functions.is_empty() {
            self.profile.latency = Some(Latency { functions });
        }
        if probes.kernel_locks || probes.futex {
            let mut c = Contention {
                kernel_locks: probes.kernel_locks,
                futex: probes.futex,
                ..Contention::default()
            };
            pair_waits(&hits, &mut c, start);
            if let Some(text) = &capture.kallsyms {
                name_locks(&mut c.waits, text);
            }
            self.profile.contention = Some(c);
        }
    }
}

/// A field of a raw tracepoint record (an integer of 1, 2, 4 or 8 bytes).
fn read_field(raw: &[u8], (off, size): (usize, usize), big_endian: bool) -> Option<u64> {
    crate::tracing_data::uint(raw.get(off..off.checked_add(size)?)?, big_endian)
}

/// The kernel's count of event `i`'s hits, from the manifest.
fn event_count(capture: &Capture, i: usize) -> Option<u64> {
    capture.manifest.as_ref()?.events.get(i)?.count
}

/// Records of event `i` the kernel reported lost, from the manifest.
fn event_lost(capture: &Capture, i: usize) -> u64 {
    capture
        .manifest
        .as_ref()
        .and_then(|m| m.events.get(i))
        .map_or(0, |e| e.lost)
}

/// A return without a call chain, in the return stacks of [`pair_calls`].
const NO_CHAIN: u32 = u32::MAX;

/// The return trampolines of the kernel's return probes: in an entry's chain when a return
/// probe at the same function took the return address first (32-bit Arm), no caller.
const RETURN_TRAMPOLINES: [&str; 2] = ["__kretprobe_trampoline", "kretprobe_trampoline"];

/// Pairs entries and returns per function and thread, innermost first (hits sorted by
/// time; `start` is capture start). Returns, per function and parallel to its calls, the
/// stack of each call's return.
fn pair_calls(hits: &[Hit], functions: &mut [TimedFunction], start: u64) -> Vec<Vec<u32>> {
    let mut open: HashMap<(usize, i32), Vec<&Hit>> = HashMap::new();
    let mut returns: Vec<Vec<u32>> = vec![Vec::new(); functions.len()];
    for h in hits {
        match h.role {
            Role::Entry(f) => open.entry((f, h.tid)).or_default().push(h),
            Role::Return(f) => {
                let (Some(fun), Some(rets)) = (functions.get_mut(f), returns.get_mut(f)) else {
                    continue;
                };
                let stack = open.entry((f, h.tid)).or_default();
                match stack.pop() {
                    Some(entry) => {
                        fun.calls.push(Call {
                            start: entry.time.saturating_sub(start),
                            duration: h.time.saturating_sub(entry.time),
                            stack: entry.stack,
                            cpu: entry.cpu,
                            depth: stack.len() as u32,
                        });
                        rets.push(if h.chained { h.stack } else { NO_CHAIN });
                    }
                    None => fun.unmatched_returns += 1,
                }
            }
            _ => {}
        }
    }
    for ((f, _), entries) in open {
        if let Some(fun) = functions.get_mut(f) {
            fun.unfinished += entries.len() as u64;
        }
    }
    // The calls by start, their return stacks in the same order.
    for (f, rets) in functions.iter_mut().zip(returns.iter_mut()) {
        let mut both: Vec<(Call, u32)> = f.calls.drain(..).zip(rets.drain(..)).collect();
        both.sort_by_key(|(c, _)| c.start);
        (f.calls, *rets) = both.into_iter().unzip();
    }
    returns
}

impl State<'_> {
    /// Gives each call the path entry → caller: the entry's own frames (the function, and
    /// what is inlined at its first instruction) followed by the return's chain, which
    /// starts in the caller. `returns` is parallel to each function's calls.
    fn join_return_chains(&mut self, functions: &mut [TimedFunction], returns: &[Vec<u32>]) {
        let mut joined: HashMap<(u32, u32), u32> = HashMap::new();
        let mut buf: Vec<usize> = Vec::new();
        for (f, rets) in functions.iter_mut().zip(returns) {
            for (call, &ret) in f.calls.iter_mut().zip(rets) {
                if let Some(&s) = joined.get(&(call.stack, ret)) {
                    call.stack = s;
                    continue;
                }
                let Some(entry) = self.profile.stacks.get(call.stack as usize) else {
                    continue;
                };
                let empty = crate::profile::Stack {
                    frames: Vec::new(),
                    thread: entry.thread,
                    counts: Vec::new(),
                    periods: Vec::new(),
                };
                let back = match self.profile.stacks.get(ret as usize) {
                    Some(b) if ret != NO_CHAIN => b,
                    _ => &empty,
                };
                buf.clear();
                if ret == NO_CHAIN {
                    // The entry's chain as it is, without the trampoline.
                    let p = &self.profile;
                    buf.extend(entry.frames.iter().copied().filter(|fr| {
                        let name = p.frames.get(*fr).and_then(|x| {
                            p.functions.get(x.function).and_then(|f| f.name.as_deref())
                        });
                        !name.is_some_and(|n| RETURN_TRAMPOLINES.contains(&n))
                    }));
                } else {
                    // The entry's frames up to the function's own (the first not inlined).
                    let own = entry
                        .frames
                        .iter()
                        .position(|fr| self.profile.frames.get(*fr).is_some_and(|x| !x.inlined))
                        .map_or(entry.frames.len(), |i| i + 1);
                    buf.extend_from_slice(&entry.frames[..own]);
                    buf.extend_from_slice(&back.frames);
                }
                let (thread, nev) = (entry.thread, self.profile.events.len());
                let s = self
                    .stacks
                    .intern(&mut self.profile.stacks, thread, &buf, nev)
                    as u32;
                joined.insert((call.stack, ret), s);
                call.stack = s;
            }
        }
    }
}

/// Pairs wait starts and ends per thread: a kernel lock's end closes the thread's innermost
/// open wait for that lock (a mutex's spin and sleep are two begins of one wait); a futex
/// call's exit closes its entry, a wait when the op waits.
fn pair_waits(hits: &[Hit], c: &mut Contention, start: u64) {
    let mut locks: HashMap<i32, Vec<&Hit>> = HashMap::new();
    let mut futexes: HashMap<i32, &Hit> = HashMap::new();
    // The flags of a lock wait's last begin.
    let mut flags: HashMap<(i32, u64), u64> = HashMap::new();
    let push = |c: &mut Contention, begin: &Hit, end: &Hit, kind| {
        c.waits.push(Wait {
            kind,
            address: begin.address,
            lock_name: None,
            start: begin.time.saturating_sub(start),
            duration: end.time.saturating_sub(begin.time),
            stack: begin.stack,
            cpu: begin.cpu,
        })
    };
    for h in hits {
        match h.role {
            Role::LockBegin => {
                let open = locks.entry(h.tid).or_default();
                if open.last().is_none_or(|o| o.address != h.address) {
                    open.push(h);
                }
                flags.insert((h.tid, h.address), h.flags);
            }
            Role::LockEnd => {
                let open = locks.entry(h.tid).or_default();
                match open.iter().rposition(|o| o.address == h.address) {
                    Some(i) => {
                        let begin = open.remove(i);
                        let f = flags.remove(&(h.tid, h.address)).unwrap_or(begin.flags);
                        push(c, begin, h, WaitKind::Kernel { flags: f as u32 });
                    }
                    None => c.unmatched_ends += 1,
                }
            }
            Role::FutexEnter => {
                futexes.insert(h.tid, h);
            }
            Role::FutexExit => match futexes.remove(&h.tid) {
                Some(enter) if FUTEX_WAIT_OPS.contains(&(enter.flags & !FUTEX_FLAGS)) => {
                    push(c, enter, h, WaitKind::Futex)
                }
                Some(_) => {}
                None => c.unmatched_ends += 1,
            },
            _ => {}
        }
    }
    c.unfinished = locks.values().map(|v| v.len() as u64).sum::<u64>()
        + futexes
            .values()
            .filter(|e| FUTEX_WAIT_OPS.contains(&(e.flags & !FUTEX_FLAGS)))
            .count() as u64;
    c.waits.sort_by_key(|w| w.start);
}

/// Names kernel locks by the data symbol they are in.
fn name_locks(waits: &mut [Wait], kallsyms: &str) {
    let addrs: Vec<u64> = waits
        .iter()
        .filter(|w| matches!(w.kind, WaitKind::Kernel { .. }))
        .map(|w| w.address)
        .collect();
    if addrs.is_empty() {
        return;
    }
    let names = crate::kallsyms::name_data_addresses(kallsyms, &addrs);
    for w in waits {
        if matches!(w.kind, WaitKind::Kernel { .. }) {
            w.lock_name = names.get(&w.address).cloned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(time: u64, tid: i32, role: Role) -> Hit {
        Hit {
            time,
            tid,
            cpu: 0,
            role,
            stack: time as u32,
            chained: true,
            address: 0,
            flags: 0,
        }
    }

    fn function() -> TimedFunction {
        TimedFunction {
            name: "f".into(),
            kind: ProbeKind::Kernel,
            calls: Vec::new(),
            hits: None,
            lost: 0,
            unmatched_returns: 0,
            unfinished: 0,
        }
    }

    /// Recursion pairs innermost first per thread; another thread's calls interleave; a
    /// return before any entry and an entry never returned are counted, not paired.
    #[test]
    fn pair_calls_recursion_threads_and_edges() {
        let (e, r) = (Role::Entry(0), Role::Return(0));
        let hits = [
            hit(5, 1, r), // began before the capture
            hit(10, 1, e),
            hit(12, 2, e),
            hit(20, 1, e), // recursion
            hit(25, 1, r),
            hit(30, 2, r),
            hit(40, 1, r),
            hit(50, 2, e), // still running
        ];
        let mut fs = [function()];
        let returns = pair_calls(&hits, &mut fs, 0);
        // Each call's return stack (the test's stacks are the hits' times), in call order.
        assert_eq!(returns, [vec![40, 30, 25]]);
        let got: Vec<(u64, u64, u32)> = fs[0]
            .calls
            .iter()
            .map(|c| (c.start, c.duration, c.depth))
            .collect();
        assert_eq!(got, [(10, 30, 0), (12, 18, 0), (20, 5, 1)]);
        assert_eq!((fs[0].unmatched_returns, fs[0].unfinished), (1, 1));
    }

    /// A mutex's spin and sleep begins are one wait with the sleep's flags; an end closes the
    /// wait for its own lock; a futex wake is no wait; an end without begin is counted.
    #[test]
    fn pair_waits_spin_then_sleep_and_futex_ops() {
        let lock = |time, tid, role, address, flags| Hit {
            address,
            flags,
            ..hit(time, tid, role)
        };
        let hits = [
            lock(1, 9, Role::LockEnd, 0xa, 0),
            lock(10, 1, Role::LockBegin, 0xa, 33),
            lock(11, 1, Role::LockBegin, 0xa, 32),
            lock(50, 1, Role::LockEnd, 0xa, 0),
            lock(60, 2, Role::FutexEnter, 0x1000, 128), // FUTEX_WAIT_PRIVATE
            lock(62, 3, Role::FutexEnter, 0x1000, 129), // FUTEX_WAKE_PRIVATE
            lock(63, 3, Role::FutexExit, 0, 0),
            lock(90, 2, Role::FutexExit, 0, 0),
        ];
        let mut c = Contention::default();
        pair_waits(&hits, &mut c, 0);
        let got: Vec<(u64, u64, &str)> = c
            .waits
            .iter()
            .map(|w| (w.start, w.duration, w.kind.type_name()))
            .collect();
        assert_eq!(got, [(10, 40, "mutex"), (60, 30, "futex")]);
        assert_eq!((c.unmatched_ends, c.unfinished), (1, 0));
    }

    /// Little- and big-endian fields; out-of-range ones are `None`.
    #[test]
    fn read_field_endianness_and_bounds() {
        let raw = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(read_field(&raw, (0, 4), false), Some(0x0403_0201));
        assert_eq!(read_field(&raw, (0, 4), true), Some(0x0102_0304));
        assert_eq!(read_field(&raw, (6, 4), false), None);
        assert_eq!(read_field(&raw, (usize::MAX, 4), false), None);
    }
}
