//! Context switches (`sched:sched_switch` samples) paired into blocked spans: each switch-out
//! in state S or D lasts until the same thread's next switch-in, and becomes one off-CPU
//! sample weighing that many ns, with the switch-out's call chain.

use super::State;
use crate::profile::{Event, OffCpu, Sample};
use crate::tracing_data::TracingData;
use std::collections::HashMap;

/// The tracepoint as perf and the agent name it.
pub(super) const SWITCH_EVENT: &str = "sched:sched_switch";
/// The two off-CPU events the switch event becomes.
const SLEEPING: &str = "off-cpu:S";
const UNINTERRUPTIBLE: &str = "off-cpu:D";
/// `TASK_INTERRUPTIBLE` and `TASK_UNINTERRUPTIBLE` in the reported `prev_state`: the same
/// bits in the state index the kernel reports since 4.14 (`__trace_sched_switch_state`) and
/// in the raw state before it. Preemption (`R+`), idle kthreads (`I`) and exits have neither.
const STATE_S: u64 = 1;
const STATE_D: u64 = 2;

/// Where a field of the tracepoint's raw record is: (offset, size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    prev_pid: (usize, usize),
    prev_state: (usize, usize),
    next_pid: (usize, usize),
}

impl Layout {
    /// The layout of 64-bit kernels since 4.x, when the file carries no format.
    const DEFAULT_64: Layout = Layout {
        prev_pid: (24, 4),
        prev_state: (32, 8),
        next_pid: (56, 4),
    };

    /// The layout from sched_switch's format in perf.data's HEADER_TRACING_DATA.
    pub(super) fn from_tracing_data(td: &TracingData) -> Option<Layout> {
        let format = td.format("sched", "sched_switch")?;
        let field = |name: &str| format.field(name).map(|f| (f.offset, f.size));
        Some(Layout {
            prev_pid: field("prev_pid")?,
            prev_state: field("prev_state")?,
            next_pid: field("next_pid")?,
        })
    }

    fn read(raw: &[u8], (off, size): (usize, usize)) -> Option<u64> {
        let b = raw.get(off..off + size)?;
        Some(match size {
            1 => b[0] as u64,
            2 => u16::from_le_bytes(b.try_into().ok()?) as u64,
            4 => u32::from_le_bytes(b.try_into().ok()?) as u64,
            8 => u64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// One context switch as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Switch {
    time: u64,
    cpu: u32,
    prev: i32,
    state: u64,
    next: i32,
    /// The switch-out's stack (the sample's thread is `prev`).
    stack: u32,
}

/// What the symbolizer keeps about switches while reading.
#[derive(Debug, Default)]
pub(super) struct Switches {
    /// Index of the switch event, when the capture has one.
    pub(super) event: Option<usize>,
    /// Index of the uninterruptible event added for it.
    uninterruptible: usize,
    layout: Option<Layout>,
    read: Vec<Switch>,
    /// Switch samples without a time or readable raw fields.
    unreadable: u64,
}

impl State<'_> {
    /// Makes event `e`, the switch tracepoint, the sleeping off-CPU event and adds the
    /// uninterruptible one; `tracing_data` gives the field layout.
    pub(super) fn off_cpu_event(&mut self, e: usize, tracing_data: Option<&TracingData>) {
        let layout = tracing_data.and_then(Layout::from_tracing_data);
        if layout.is_none() {
            self.profile.warnings.push(format!(
                "{SWITCH_EVENT}: the capture has no format of its fields; assuming a 64-bit kernel's layout"
            ));
        }
        self.profile.events[e].name = SLEEPING.into();
        self.profile.events.push(Event {
            name: UNINTERRUPTIBLE.into(),
            total_samples: 0,
            total_period: 0,
            period_known: true,
        });
        self.profile.events[e].period_known = true;
        self.fixed_periods.push(None);
        self.throttles.push(0);
        self.switches = Switches {
            event: Some(e),
            uninterruptible: self.profile.events.len() - 1,
            layout: Some(layout.unwrap_or(Layout::DEFAULT_64)),
            ..Switches::default()
        };
    }

    /// Keeps a switch sample for pairing; its stack is interned now, while its process's
    /// mappings are the ones it ran with.
    pub(super) fn on_switch(
        &mut self,
        raw: Option<&[u8]>,
        time: Option<u64>,
        cpu: u32,
        stack: usize,
    ) {
        let layout = self.switches.layout.unwrap_or(Layout::DEFAULT_64);
        let fields = raw.and_then(|r| {
            Some((
                Layout::read(r, layout.prev_pid)? as u32 as i32,
                Layout::read(r, layout.prev_state)?,
                Layout::read(r, layout.next_pid)? as u32 as i32,
            ))
        });
        match (time, fields) {
            (Some(time), Some((prev, state, next))) => self.switches.read.push(Switch {
                time,
                cpu,
                prev,
                state,
                next,
                stack: stack as u32,
            }),
            _ => self.switches.unreadable += 1,
        }
    }

    /// Pairs every switch-out in S or D with its thread's next switch-in and counts the
    /// span as an off-CPU sample. Times are still absolute here.
    pub(super) fn finish_off_cpu(&mut self) {
        let Some(s_event) = self.switches.event else {
            return;
        };
        let d_event = self.switches.uninterruptible;
        let mut switches = std::mem::take(&mut self.switches.read);
        // Records of a file are in time order per CPU only.
        switches.sort_by_key(|s| s.time);
        let mut seen: HashMap<i32, (u64, u64)> = HashMap::new();
        let mut off = OffCpu {
            sleeping: s_event,
            uninterruptible: d_event,
            switches: switches.len() as u64,
            ..OffCpu::default()
        };
        let mut see = |tid: i32, t: u64| {
            if tid != 0 {
                let e = seen.entry(tid).or_insert((t, t));
                e.1 = e.1.max(t);
            }
        };
        for sw in &switches {
            see(sw.prev, sw.time);
            see(sw.next, sw.time);
        }
        let on_cpu = self.on_cpu_times(s_event);
        let (spans, out) = pair_spans(&switches, &on_cpu);
        let mut missed = 0u64;
        for span in &spans {
            missed += u64::from(span.missed_switch_in);
            let e = if span.out.state & STATE_D != 0 {
                d_event
            } else {
                s_event
            };
            self.count_blocked(&span.out, e, span.end.saturating_sub(span.out.time));
        }
        off.unmatched = out.len() as u64;
        off.missed_switch_ins = missed;
        if missed > 0 {
            self.profile.warnings.push(format!(
                "off-CPU: the kernel reported no switch-in for {missed} blocked spans (a thread switched out twice in a row); they end at the thread's first on-CPU sample or next switch-out, so they are over-estimated by up to the time it ran before"
            ));
        }
        off.wall_ns = seen.into_iter().map(|(t, (a, b))| (t, b - a)).collect();
        if off.unmatched > 0 {
            self.profile.warnings.push(format!(
                "off-CPU: {} threads were still blocked when the capture ended; that time is not counted",
                off.unmatched
            ));
        }
        if self.switches.unreadable > 0 {
            self.profile.warnings.push(format!(
                "off-CPU: {} context switches had no time or unreadable fields and were skipped",
                self.switches.unreadable
            ));
        }
        self.profile.off_cpu = Some(off);
    }

    /// Absolute times of the on-CPU samples (every event but the switches) per thread id,
    /// sorted.
    fn on_cpu_times(&self, switch_event: usize) -> HashMap<i32, Vec<u64>> {
        let mut by: HashMap<i32, Vec<u64>> = HashMap::new();
        for s in &self.profile.samples {
            if s.event as usize == switch_event || s.time == 0 {
                continue;
            }
            if let Some(st) = self.profile.stacks.get(s.stack as usize) {
                by.entry(self.profile.threads[st.thread].tid)
                    .or_default()
                    .push(s.time);
            }
        }
        for v in by.values_mut() {
            v.sort_unstable();
        }
        by
    }

    fn count_blocked(&mut self, o: &Switch, e: usize, ns: u64) {
        let ev = &mut self.profile.events[e];
        ev.total_samples += 1;
        ev.total_period = ev.total_period.saturating_add(ns);
        if let Some(stack) = self.profile.stacks.get_mut(o.stack as usize) {
            stack.counts[e] += 1;
            stack.periods[e] = stack.periods[e].saturating_add(ns);
        }
        self.profile.samples.push(Sample {
            time: o.time,
            stack: o.stack,
            event: e as u32,
            cpu: o.cpu,
            period: ns,
        });
    }
}

/// A blocked span: the switch-out that began it and when the thread ran again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    out: Switch,
    end: u64,
    /// The kernel reported no switch-in: the span ends at the thread's first on-CPU sample
    /// after it, or at its next switch-out.
    missed_switch_in: bool,
}

/// Pairs every switch-out in S or D (`switches` sorted by time) with its thread's next
/// switch-in. Returns the spans, and the switch-outs still open at the end by thread.
fn pair_spans(
    switches: &[Switch],
    on_cpu: &HashMap<i32, Vec<u64>>,
) -> (Vec<Span>, HashMap<i32, Switch>) {
    let mut out: HashMap<i32, Switch> = HashMap::new();
    let mut spans = Vec::new();
    for sw in switches {
        // The thread switched in ends its span. The thread switched out may have one open
        // too, when the kernel did not report its switch-in (some kernels drop idle → task
        // switches of a CPU): it ran before this switch-out, from its first on-CPU sample if
        // one came first. Both can happen at one switch, so each is looked at.
        if let Some(o) = out.remove(&sw.next) {
            spans.push(Span {
                out: o,
                end: sw.time,
                missed_switch_in: false,
            });
        }
        if let Some(o) = out.remove(&sw.prev) {
            let first_run = on_cpu.get(&sw.prev).and_then(|ts| {
                let i = ts.partition_point(|t| *t <= o.time);
                ts.get(i).copied()
            });
            spans.push(Span {
                out: o,
                end: first_run.map_or(sw.time, |t| t.min(sw.time)),
                missed_switch_in: true,
            });
        }
        // The idle task (pid 0) never blocks; a thread switched out while runnable is
        // preempted, not blocked.
        if sw.prev != 0 && sw.state & (STATE_S | STATE_D) != 0 {
            out.insert(sw.prev, *sw);
        }
    }
    (spans, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field layout is read from a 6.1 x86_64 sched_switch format as tracefs prints it.
    #[test]
    fn layout_tracing_data_format_fields() {
        let fmt = "name: sched_switch\nID: 316\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
            \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
            \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
            \nprint fmt: \"prev_comm=%s\"\n";
        let layout = |fmt: &str| {
            let bytes = crate::tracing_data::tests::tracing_data(&[], "sched", &[fmt]);
            Layout::from_tracing_data(&crate::tracing_data::parse(&bytes).unwrap())
        };
        assert_eq!(layout(fmt), Some(Layout::DEFAULT_64));
        let fmt32 = fmt.replace("offset:32;\tsize:8", "offset:32;\tsize:4");
        assert_eq!(layout(&fmt32).map(|l| l.prev_state), Some((32, 4)));
        assert_eq!(layout("name: sched_wakeup\n"), None);
    }
    fn switch(time: u64, prev: i32, state: u64, next: i32) -> Switch {
        Switch {
            time,
            cpu: 0,
            prev,
            state,
            next,
            stack: prev as u32,
        }
    }

    /// A sleep ends at the thread's switch-in, a preemption (state R) opens no span, and a
    /// thread still asleep at the end stays open.
    #[test]
    fn pair_spans_switches_sleep_until_switch_in() {
        let sw = [
            switch(10, 7, STATE_S, 0),
            switch(15, 8, 0, 0),
            switch(30, 0, 0, 7),
            switch(40, 7, STATE_D, 9),
        ];
        let (spans, open) = pair_spans(&sw, &HashMap::new());
        assert_eq!(
            spans
                .iter()
                .map(|s| (s.out.time, s.end, s.missed_switch_in))
                .collect::<Vec<_>>(),
            [(10, 30, false)]
        );
        assert_eq!(open.keys().copied().collect::<Vec<_>>(), [7]);
    }

    /// A switch-in the kernel did not report: the thread's next switch-out, which also
    /// switches in another sleeper, ends both spans — neither is dropped — and the missed one
    /// ends at the thread's first on-CPU sample.
    #[test]
    fn pair_spans_switches_missed_switch_in_keeps_both() {
        let sw = [
            switch(10, 7, STATE_S, 0),
            switch(12, 9, STATE_S, 0),
            // 7's switch-in is missing; it runs (sample at 25) and sleeps again, switching 9 in.
            switch(40, 7, STATE_S, 9),
        ];
        let on_cpu = HashMap::from([(7, vec![25u64, 30])]);
        let (spans, open) = pair_spans(&sw, &on_cpu);
        let mut got: Vec<_> = spans
            .iter()
            .map(|s| (s.out.prev, s.out.time, s.end, s.missed_switch_in))
            .collect();
        got.sort_unstable();
        assert_eq!(got, [(7, 10, 25, true), (9, 12, 40, false)]);
        assert_eq!(open.keys().copied().collect::<Vec<_>>(), [7]);
    }
}
