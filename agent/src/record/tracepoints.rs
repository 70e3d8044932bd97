//! The tracepoints a capture records (`-e SUBSYS:EVENT`, `--off-cpu`'s `sched:sched_switch`,
//! `--markers`' `ftrace:print`),
//! found in one tracefs, their ids put into the event specs, and the HEADER_TRACING_DATA
//! describing all of them.

use kprof_capture::manifest::{Contention, OffCpu};

use super::off_cpu;
use super::tracefs::{Tracefs, Tracepoint};
use crate::events::EventSpec;
use crate::sys::PERF_TYPE_TRACEPOINT;
use crate::Error;

/// What tracefs gave the capture.
#[derive(Debug, Clone)]
pub(super) struct Tracing {
    pub(super) tracefs: Tracefs,
    /// `--off-cpu`'s context-switch tracepoint.
    pub(super) off_cpu: Option<Tracepoint>,
    /// `--markers`' `ftrace:print`, the event the trace_marker lines are recorded as.
    pub(super) print: Option<Tracepoint>,
    /// `--contention`'s tracepoints (each wait's start before its end) and what was missing.
    pub(super) contention: Option<(Vec<Tracepoint>, Contention)>,
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

    /// The manifest's `contention` entry, with `--contention`.
    pub(super) fn contention_manifest(&self) -> Option<Contention> {
        self.contention.as_ref().map(|(_, c)| c.clone())
    }
}

/// Looks up every tracepoint the options ask for and sets the `-e` ones' ids in `events`;
/// `None` when they ask for none (tracefs is then not looked for at all).
pub(super) fn resolve(
    events: &mut [EventSpec],
    off_cpu: bool,
    markers: bool,
    contention: bool,
) -> Result<Option<Tracing>, Error> {
    let asked: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].attr_type == PERF_TYPE_TRACEPOINT)
        .collect();
    let needed_for = match (asked.first(), off_cpu, markers) {
        (_, _, true) => super::markers::NEEDED_FOR.to_string(),
        (_, true, _) => format!("--off-cpu: the {} tracepoint", off_cpu::EVENT_NAME),
        _ if contention => "--contention: the lock and futex tracepoints".to_string(),
        (Some(&i), false, false) => format!("-e {}: tracefs", events[i].requested),
        (None, false, false) => return Ok(None),
    };
    let tracefs = Tracefs::find(&needed_for)?;
    let mut recorded = Vec::new();
    for i in asked {
        let e = &mut events[i];
        let (system, event) = e.name.split_once(':').unwrap_or((&e.name, ""));
        let t = tracefs
            .tracepoint(system, event)
            .map_err(|err| Error::Usage(format!("-e {}: {err}", e.requested)))?;
        e.config = t.id;
        recorded.push(t);
    }
    let sw = if off_cpu {
        let sw = off_cpu::find(&tracefs)?;
        recorded.push(sw.clone());
        Some(sw)
    } else {
        None
    };
    let print = if markers {
        let print = super::markers::find(&tracefs)?;
        recorded.push(print.clone());
        Some(print)
    } else {
        None
    };
    let contention = if contention {
        let (tps, c) = super::contention::find(&tracefs)?;
        recorded.extend(tps.iter().cloned());
        Some((tps, c))
    } else {
        None
    };
    let tracing_data = tracefs.tracing_data(&recorded)?;
    Ok(Some(Tracing {
        tracefs,
        off_cpu: sw,
        print,
        contention,
        tracing_data,
    }))
}
