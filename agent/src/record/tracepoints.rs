//! The tracepoints a capture records (`--off-cpu`'s `sched:sched_switch` for now), found in
//! one tracefs, and the HEADER_TRACING_DATA describing all of them.

use kprof_capture::manifest::OffCpu;

use super::off_cpu;
use super::tracefs::{Tracefs, Tracepoint};
use crate::cli::RecordOpts;
use crate::Error;

/// What tracefs gave the capture.
#[derive(Debug, Clone)]
pub(super) struct Tracing {
    pub(super) tracefs: Tracefs,
    /// `--off-cpu`'s context-switch tracepoint.
    pub(super) off_cpu: Option<Tracepoint>,
    /// perf.data's HEADER_TRACING_DATA body for every tracepoint recorded.
    pub(super) tracing_data: Vec<u8>,
}

impl Tracing {
    /// The manifest's `off_cpu` entry, with `--off-cpu`.
    pub(super) fn off_cpu_manifest(&self) -> Option<OffCpu> {
        self.off_cpu.as_ref().map(|t| OffCpu {
            method: off_cpu::METHOD.into(),
            event: off_cpu::EVENT_NAME.into(),
            tracefs: self.tracefs.dir.display().to_string(),
            tracepoint_id: t.id,
        })
    }
}

/// Looks up every tracepoint the options ask for; `None` when they ask for none (tracefs is
/// then not looked for at all).
pub(super) fn resolve(o: &RecordOpts) -> Result<Option<Tracing>, Error> {
    if !o.off_cpu {
        return Ok(None);
    }
    let what = format!("--off-cpu: the {} tracepoint", off_cpu::EVENT_NAME);
    let tracefs = Tracefs::find(&what)?;
    let sw = off_cpu::find(&tracefs)?;
    let tracing_data = tracefs.tracing_data(std::slice::from_ref(&sw))?;
    Ok(Some(Tracing {
        tracefs,
        off_cpu: Some(sw),
        tracing_data,
    }))
}
