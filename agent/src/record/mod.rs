//! `kprof-agent record`: open the events, synthesize the running system's state, stream the
//! per-CPU ring buffers into perf.data until told to stop, then seal the capture archive.
//!
//! One module per step: `signals`, `workload`, `open_events`, `capture_dir` (with `sequence`),
//! `kernel_state`, `sink`, `synthesize`, `stream`, `seal` (private to this module); [`run`]
//! puts them in order.

mod build_id_reader;
mod capture_dir;
mod contention;
mod kernel_state;
mod latency;
mod markers;
mod off_cpu;
mod open_events;
mod priority;
mod seal;
mod sequence;
mod signals;
mod sink;
mod stream;
mod synthesize;
mod tracefs;
mod tracepoints;
mod workload;

use std::io;
use std::path::Path;
use std::time::Instant;

use crate::cli::{CallGraph, RecordOpts};
use crate::{procfs, sys, timefmt, Error};
use capture_dir::WorkDir;
use signals::Signals;
use sink::Sink;
use stream::{Rings, Stop, StopWhen};
use workload::Workload;

pub use seal::Sealed;

/// Exit status of `record` when the capture was cut short by a write error but its archive
/// was written (the last stdout line is its path, as for a complete capture).
pub const EXIT_TRUNCATED: u8 = 3;

/// Runs a capture and returns the absolute path of the archive, and whether it is truncated.
pub fn run(o: &RecordOpts, agent_argv: &[String]) -> Result<Sealed, Error> {
    raise_fd_limit();
    let mut o = o.clone(); // the `-e` tracepoints get their ids from tracefs
    let tracing = tracepoints::resolve(&mut o.events, o.off_cpu, o.markers, o.contention)?;
    let probes = latency::prepare(&o.latency)?;
    let o = &o;
    // The workload gets the original mask back before exec.
    let signals = Signals::block()?;
    let max_rate = sys::kernel_sysctl("perf_event_max_sample_rate").unwrap_or(i64::MAX) as u64;
    let global_freq = open_events::global_freq(o, max_rate)?;
    let online = procfs::online_cpus()
        .map_err(|e| Error::io("cannot read /sys/devices/system/cpu/online", e))?;
    let cpus = open_events::select_cpus(o.cpus.as_deref(), &online)?;
    let tids = open_events::targets(o)?;
    let program = (o.command.first().map(|c| workload::resolve_command(c))).transpose()?;

    // Printed once setup has succeeded, so a failing capture says one thing only.
    let mut notices: Vec<String> = Vec::new();
    let traced = traced(tracing.as_ref(), &probes, &mut notices);
    let mut opened = open_events::open_all(o, global_freq, &tids, &cpus, &traced, &mut notices)?;
    let mut rings = Rings::map(&mut opened, o.mmap_pages)?;
    let mut markers = start_markers(tracing.as_ref(), &mut opened, &online)?;
    let mut work = WorkDir::create(&o.out_dir, o.min_free)?;
    let (start_ns, id) = (work.created_ns, work.id.clone());
    work.reserve()?;
    let mut workload = fork_workload(o, program.as_deref(), &signals, &mut notices)?;
    let kernel = kernel_state::snapshot(&work, &mut notices)?;
    let perf_path = work.member(kprof_capture::PERF_DATA);
    let mut sink = Sink::create(&perf_path, &opened, o.compression)?;

    let start_ns = start_sampling(
        o,
        &mut rings,
        &mut sink,
        &perf_path,
        &kernel,
        workload.as_mut(),
        start_ns,
    )?;
    // From here on, a failure keeps what was captured.
    work.keep = true;
    announce(o, &notices, &opened, &cpus);

    let stop_when = StopWhen {
        signals: &signals,
        workload: workload.as_mut(),
        target: o.pid,
        deadline: o.duration.map(|d| Instant::now() + d),
    };
    let (stop, write_error, stop_ns) = stream_and_drain(
        &mut rings,
        &mut sink,
        markers.as_mut(),
        stop_when,
        &perf_path,
    );
    // Read while the fds are open: an event that counted nothing is told from one that
    // counted below its period.
    let counter_values = rings.counter_values();
    let ring_dropped = rings.dropped();
    end_workload(stop, workload.as_mut());
    drop(rings);

    let end = seal::Ending {
        o,
        agent_argv,
        id: &id,
        opened: &opened,
        counter_values: &counter_values,
        cpus: &cpus,
        online_cpus: online.len(),
        kernel,
        command: workload.as_ref().map(|w| w.manifest(&o.command)),
        start_ns,
        stop_ns,
        stop,
        tracing: tracing.as_ref(),
        latency: probes.iter().map(latency::Probe::manifest).collect(),
        // ftrace's settings go back here.
        markers: markers.map(markers::Markers::finish),
        ring_dropped,
        write_error,
    };
    seal::seal(sink, end, &mut work)
}

/// The events besides the sampling ones; what `--contention` found missing goes to
/// `notices`.
fn traced<'a>(
    tracing: Option<&'a tracepoints::Tracing>,
    probes: &'a [latency::Probe],
    notices: &mut Vec<String>,
) -> open_events::Traced<'a> {
    let contention = tracing.and_then(|t| t.contention.as_ref());
    if let Some((_, c)) = contention {
        notices.extend(c.missing.iter().cloned());
    }
    open_events::Traced {
        off_cpu: tracing.and_then(|t| t.off_cpu.as_ref()),
        probes,
        contention: contention.map_or(&[], |(tps, _)| tps.as_slice()),
    }
}

/// Forks the workload (held before exec), then raises the agent's priority (`--nice`): the
/// workload keeps the priority the agent was started with.
fn fork_workload(
    o: &RecordOpts,
    program: Option<&Path>,
    signals: &Signals,
    notices: &mut Vec<String>,
) -> Result<Option<Workload>, Error> {
    let workload = match program {
        Some(p) => Some(Workload::spawn(&o.command, p, signals.old_mask())?),
        None => None,
    };
    if let Some(Err(notice)) = o.nice.map(priority::raise) {
        notices.push(notice);
    }
    Ok(workload)
}

/// With `--markers`: the `ftrace:print` event added to `opened` and ftrace's buffers opened,
/// its clock switched to perf's (put back when the returned reader goes).
fn start_markers(
    tracing: Option<&tracepoints::Tracing>,
    opened: &mut Vec<open_events::Opened>,
    online: &[u32],
) -> Result<Option<markers::Markers>, Error> {
    let Some((t, print)) = tracing.and_then(|t| Some((t, t.print.as_ref()?))) else {
        return Ok(None);
    };
    let event = markers::event(print, opened);
    let m = markers::Markers::start(&t.tracefs, print, online, event.ids[0])?;
    opened.push(event);
    Ok(Some(m))
}

/// Enables the events, writes the records of what already runs and lets the workload exec.
/// Returns the capture's start time, not before the events were enabled.
fn start_sampling(
    o: &RecordOpts,
    rings: &mut Rings,
    sink: &mut Sink,
    perf_path: &Path,
    kernel: &kernel_state::KernelState,
    workload: Option<&mut Workload>,
    start_ns: u64,
) -> Result<u64, Error> {
    rings.enable()?;
    let start_ns = timefmt::now_ns().max(start_ns);
    let data_maps = matches!(o.call_graph, Some(CallGraph::Dwarf { .. }));
    synthesize::initial_state(sink, kernel, o.pid, data_maps)
        .map_err(|e| Error::io(format!("cannot write {}", perf_path.display()), e))?;
    if let Some(w) = workload {
        w.release()
            .map_err(|e| Error::Other(format!("cannot run `{}`: {e}", o.command[0])))?;
    }
    Ok(start_ns)
}

/// Streams the rings into perf.data until `stop_when` says stop, then drains them: why the
/// capture stopped, the write error that ended it if one did, and when. A write error (a
/// full disk) ends the capture as a signal would, and what reached the file is sealed: the
/// workload is not left running unobserved; what the rings still held is counted as lost.
fn stream_and_drain(
    rings: &mut Rings,
    sink: &mut Sink,
    mut markers: Option<&mut markers::Markers>,
    stop_when: StopWhen<'_>,
    perf_path: &Path,
) -> (Stop, Option<seal::WriteError>, u64) {
    let with_workload = stop_when.workload.is_some();
    let streamed = stream::until_stop(rings, sink, markers.as_deref_mut(), stop_when);
    rings.disable();
    let stop_ns = timefmt::now_ns();
    let (stop, write_error) = match streamed {
        Ok(stop) => match stream::drain_all(rings, sink, markers) {
            Ok(()) => (stop, None),
            Err(e) => (stop, Some(e)),
        },
        Err(e) => (Stop::WriteError, Some(e)),
    };
    let write_error = write_error.map(|error| {
        warn(format_args!(
            "writing {} failed: {error}: stopping the capture{} and sealing what was written",
            perf_path.display(),
            if with_workload {
                " and the command"
            } else {
                ""
            }
        ));
        let (discarded_records, discarded_bytes) = rings.discard();
        seal::WriteError {
            error,
            discarded_records,
            discarded_bytes,
        }
    });
    (stop, write_error, stop_ns)
}

/// Says which signal stopped the capture, if one did, and ends the workload if it still runs.
fn end_workload(stop: Stop, workload: Option<&mut Workload>) {
    if let Stop::Signal(sig @ 1..) = stop {
        warn(format_args!("stopping on signal {sig}"));
    }
    if let Some(w) = workload {
        w.terminate();
    }
}

/// The notices gathered during setup, then what is being recorded and until when.
fn announce(o: &RecordOpts, notices: &[String], opened: &[open_events::Opened], cpus: &[u32]) {
    for n in notices {
        warn(n);
    }
    let names: Vec<&str> = opened.iter().map(|e| e.spec.name.as_str()).collect();
    warn(format_args!(
        "recording {} on CPUs {}{}",
        names.join(","),
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        match (o.duration, o.pid, o.command.is_empty()) {
            (Some(_), _, _) | (_, _, false) => String::new(),
            (None, Some(pid), _) => format!(" until process {pid} exits or SIGINT/SIGTERM"),
            (None, None, true) => " until SIGINT/SIGTERM".to_string(),
        }
    ));
}

/// The error for a failed write once sampling has started.
fn write_failed(perf_path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |e| {
        Error::io(
            format!(
                "writing {} failed (partial capture kept)",
                perf_path.display()
            ),
            e,
        )
    }
}

/// A system-wide capture opens one fd per event and CPU: take the hard limit.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct; failure is harmless.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn warn(msg: impl std::fmt::Display) {
    eprintln!("kprof-agent: {msg}");
}
