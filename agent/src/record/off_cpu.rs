//! `record --off-cpu`: the `sched:sched_switch` tracepoint, sampled at every context switch
//! with its raw fields (prev_pid, prev_state, next_pid) and call chain, so the host can pair
//! each switch-out with the same thread's next switch-in.
//!
//! The tracepoint's id and field layout come from tracefs; the layout also goes into
//! perf.data's HEADER_TRACING_DATA, which Linux `perf script` needs to read any tracepoint
//! sample at all. No fallback to the `context-switches` software event: without the tracepoint
//! the task state (S vs D) is unknown, so a missing tracepoint is an error naming what is
//! missing (docs/off-cpu.md).

use crate::sys::{self, flag, PerfEventAttr};
use crate::Error;

use super::tracefs::{Tracefs, Tracepoint};

/// The tracepoint's name as perf spells it (EVENT_DESC, the manifest, `perf script`).
pub(super) const EVENT_NAME: &str = "sched:sched_switch";
/// The manifest's `off_cpu.method`.
pub(super) const METHOD: &str = "sched_switch-tracepoint";

/// Finds `sched:sched_switch` in `tracefs`, or says what is missing.
pub(super) fn find(tracefs: &Tracefs) -> Result<Tracepoint, Error> {
    tracefs.tracepoint("sched", "sched_switch").map_err(|e| {
        Error::Other(format!(
            "--off-cpu: the {EVENT_NAME} tracepoint is not available: {e}"
        ))
    })
}

/// What a switch sample carries beyond an on-CPU one: the raw fields, and a call chain even
/// without `-g` (a switch without its path says nothing about where the thread blocked).
pub(super) fn adjust(a: &mut PerfEventAttr) {
    a.sample_type |= sys::SAMPLE_RAW | sys::SAMPLE_CALLCHAIN;
    a.sample_period_or_freq = 1;
    a.flags &= !flag::FREQ;
}
