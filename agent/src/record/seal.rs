//! Sealing a capture: perf.data's feature sections (build-ids of everything that ran), the
//! manifest, the per-event summary on stderr, and the archive that replaces the work dir.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kprof_capture::manifest::{Command, EventRecord, FileDigest, Manifest, OffCpu};

use super::capture_dir::WorkDir;
use super::kernel_state::{KernelState, SYS_MODULE};
use super::open_events::Opened;
use super::sink::{Counters, Sink};
use super::stream::Stop;
use super::{warn, write_failed};
use crate::archive::{self, Member};
use crate::cli::{CallGraph, RecordOpts};
use crate::perf_data_writer::{self as writer, BuildIdEntry, Features};
use crate::sys::flag;
use crate::{elf_build_id, procfs, Error};

/// Everything the manifest says beyond what the sink counted.
pub(super) struct Ending<'a> {
    pub(super) o: &'a RecordOpts,
    /// The agent's own command line, for perf.data's CMDLINE.
    pub(super) agent_argv: &'a [String],
    pub(super) id: &'a str,
    pub(super) opened: &'a [Opened],
    /// `(id, value)` of every event fd read at the end.
    pub(super) counter_values: &'a [(u64, u64)],
    pub(super) cpus: &'a [u32],
    pub(super) online_cpus: usize,
    pub(super) kernel: KernelState,
    pub(super) command: Option<Command>,
    pub(super) start_ns: u64,
    pub(super) stop_ns: u64,
    pub(super) stop: Stop,
    /// The context-switch tracepoint, with `--off-cpu`.
    pub(super) tracepoint: Option<&'a super::off_cpu::Tracepoint>,
}

/// Finishes perf.data, writes the archive and removes the work dir; returns the archive path.
pub(super) fn seal(sink: Sink, end: Ending<'_>, work: &mut WorkDir) -> Result<PathBuf, Error> {
    let perf_path = work.member(kprof_capture::PERF_DATA);
    let (w, counts, files) = sink.into_parts();
    let features = features(&end, &files);
    let perf_size = w.finish(&features).map_err(write_failed(&perf_path))?;
    let sha =
        archive::sha256_file(&perf_path).map_err(|e| Error::io("cannot hash perf.data", e))?;
    let events = event_records(end.opened, &counts, end.counter_values);
    let sysctl = procfs::sysctls();
    report(&events, end.command.as_ref(), &sysctl);
    let o = end.o;
    let m = Manifest {
        schema: kprof_capture::MANIFEST_SCHEMA.into(),
        version: kprof_capture::MANIFEST_VERSION,
        capture_id: end.id.to_string(),
        agent_version: crate::AGENT_VERSION.into(),
        uname: end.kernel.uname,
        events,
        command: end.command,
        target_pid: o.pid,
        cpus: end.cpus.to_vec(),
        callchain: o.call_graph.is_some(),
        call_graph: o.call_graph.map(|c| c.name().to_string()),
        stack_user_size: match o.call_graph {
            Some(CallGraph::Dwarf { stack_size }) => Some(stack_size),
            _ => None,
        },
        start_time_ns: end.start_ns,
        stop_time_ns: end.stop_ns,
        stop_reason: end.stop.as_str().into(),
        kernel: end.kernel.kernel,
        modules: end.kernel.modules,
        perf_data: FileDigest {
            file: kprof_capture::PERF_DATA.into(),
            size: perf_size,
            sha256: sha,
        },
        sysctl,
        mmap_pages: Some(o.mmap_pages as u64),
        off_cpu: end.tracepoint.map(|t| OffCpu {
            method: super::off_cpu::METHOD.into(),
            event: super::off_cpu::EVENT_NAME.into(),
            tracefs: t.tracefs.display().to_string(),
            tracepoint_id: t.id,
        }),
    };
    let json = serde_json::to_vec_pretty(&m)
        .map_err(|e| Error::Other(format!("cannot encode manifest: {e}")))?;
    let kallsyms_path = work.member(kprof_capture::KALLSYMS);
    let modules_path = work.member(kprof_capture::MODULES);
    let members = [
        Member::Bytes(kprof_capture::MANIFEST, &json),
        Member::StoredFile(kprof_capture::PERF_DATA, &perf_path),
        Member::File(kprof_capture::KALLSYMS, &kallsyms_path),
        Member::File(kprof_capture::MODULES, &modules_path),
    ];
    let path = archive::write(&work.out_dir, end.id, &members, end.stop_ns / 1_000_000_000)
        .map_err(|e| {
            Error::io(
                format!(
                    "cannot write the archive (capture kept in {})",
                    work.path.display()
                ),
                e,
            )
        })?;
    work.keep = false;
    Ok(path)
}

/// perf.data's feature sections.
fn features(end: &Ending<'_>, files: &BTreeSet<Vec<u8>>) -> Features {
    let uname = &end.kernel.uname;
    // SAFETY: sysconf has no preconditions.
    let nr_conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
    Features {
        hostname: uname.nodename.clone(),
        osrelease: uname.release.clone(),
        version: format!("kprof-agent {}", crate::AGENT_VERSION),
        arch: uname.machine.clone(),
        nr_cpus_available: nr_conf.max(end.online_cpus as u32),
        nr_cpus_online: end.online_cpus as u32,
        cmdline: end.agent_argv.to_vec(),
        build_ids: build_ids(&end.kernel, files),
        tracing_data: end.tracepoint.map(|t| t.tracing_data.clone()),
    }
}

/// Build-ids: kernel, modules, every user ELF that was mapped.
fn build_ids(k: &KernelState, files: &BTreeSet<Vec<u8>>) -> Vec<BuildIdEntry> {
    let mut out = Vec::new();
    if let Some(bid) = &k
        .kernel
        .build_id
        .as_ref()
        .and_then(|_| procfs::kernel_build_id())
    {
        out.push(BuildIdEntry {
            misc: writer::MISC_KERNEL,
            pid: writer::HOST_PID,
            build_id: bid.clone(),
            filename: "[kernel.kallsyms]".into(),
        });
    }
    for m in &k.modules {
        if let Some(bid) = procfs::module_build_id(Path::new(SYS_MODULE), &m.name) {
            out.push(BuildIdEntry {
                misc: writer::MISC_KERNEL,
                pid: writer::HOST_PID,
                build_id: bid,
                filename: k.module_filename(&m.name),
            });
        }
    }
    for f in files {
        let name = String::from_utf8_lossy(f).into_owned();
        if name.ends_with(" (deleted)") {
            continue;
        }
        if let Ok(Some(bid)) = elf_build_id::elf_build_id(Path::new(&name)) {
            out.push(BuildIdEntry {
                misc: writer::MISC_USER,
                pid: writer::HOST_PID,
                build_id: bid,
                filename: name,
            });
        }
    }
    out
}

/// The manifest's event entries: what was opened, what the sink counted for it, and its
/// counter total (the values of its fds, found by their ids; `None` when none was read).
fn event_records(
    opened: &[Opened],
    counts: &[Counters],
    counter_values: &[(u64, u64)],
) -> Vec<EventRecord> {
    opened
        .iter()
        .zip(counts)
        .map(|(e, c)| {
            let freq = e.attr.flags & flag::FREQ != 0;
            let count = counter_values
                .iter()
                .filter(|(id, _)| e.ids.contains(id))
                .map(|(_, v)| *v)
                .reduce(u64::saturating_add);
            EventRecord {
                requested: e.requested.clone(),
                name: e.spec.name.clone(),
                attr_type: e.attr.type_,
                attr_config: e.attr.config,
                sample_period: (!freq).then_some(e.attr.sample_period_or_freq),
                sample_freq: freq.then_some(e.attr.sample_period_or_freq),
                fallback_from: e.fallback.as_ref().map(|f| f.0.clone()),
                fallback_reason: e.fallback.as_ref().map(|f| f.1.clone()),
                ids: e.ids.clone(),
                samples: c.samples,
                lost: c.lost,
                throttled: c.throttled,
                count,
                no_samples: c.samples == 0,
            }
        })
        .collect()
}

/// The per-event summary and the workload's exit, on stderr.
fn report(events: &[EventRecord], command: Option<&Command>, sysctl: &BTreeMap<String, String>) {
    let max_rate = sysctl
        .get("perf_event_max_sample_rate")
        .map_or("?", |v| v.trim());
    for e in events {
        let rate = if e.throttled > 0 {
            format!(" (perf_event_max_sample_rate={max_rate})")
        } else {
            String::new()
        };
        warn(format_args!(
            "{}: {} samples, {} lost, {} throttled{rate}",
            e.name, e.samples, e.lost, e.throttled
        ));
        if let Some(why) = no_samples_reason(e) {
            warn(format_args!(
                "warning: event `{}` produced no samples ({why})",
                e.name
            ));
        }
        if e.lost > 0 {
            warn(format_args!(
                "LOST {} samples of {}: the ring buffer overflowed (raise --mmap-pages, lower -F or drop -g)",
                e.lost, e.name
            ));
        }
        if e.throttled > 0 {
            warn(format_args!(
                "{} was throttled {} times by the kernel (kernel.perf_event_max_sample_rate={max_rate}): lower -F or raise /proc/sys/kernel/perf_event_max_sample_rate",
                e.name, e.throttled
            ));
        }
    }
    if let Some(c) = command {
        match (c.exit_code, c.signal) {
            (Some(0), _) => {}
            (Some(code), _) => warn(format_args!("command exited with status {code}")),
            (_, Some(sig)) => warn(format_args!("command killed by signal {sig}")),
            _ => {}
        }
    }
}

/// Why an event produced no sample, from its counter total; `None` when it has samples.
fn no_samples_reason(e: &EventRecord) -> Option<String> {
    if e.samples > 0 {
        return None;
    }
    Some(match (e.count, e.sample_period) {
        // A software event at 0 is a fact about the workload, a hardware one usually about
        // the event number (on the Arm board raw r03/r04 open fine and never count).
        (Some(0), _) if e.attr_type == crate::sys::PERF_TYPE_SOFTWARE => {
            "counter read 0: nothing of its kind happened while sampling".into()
        }
        (Some(0), _) => "counter read 0: the PMU accepted it but it counted nothing; check the event number for this CPU".into(),
        (Some(n), Some(p)) if n < p => format!("counted {n}, below its period {p}"),
        (Some(n), _) => format!("counted {n}, but the kernel raised no sample"),
        (None, _) => "its counter could not be read".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(samples: u64, count: Option<u64>, period: Option<u64>) -> EventRecord {
        EventRecord {
            requested: Some("r03".into()),
            name: "r03".into(),
            attr_type: 4,
            attr_config: 3,
            sample_period: period,
            sample_freq: period.is_none().then_some(4000),
            fallback_from: None,
            fallback_reason: None,
            ids: vec![1],
            samples,
            lost: 0,
            throttled: 0,
            count,
            no_samples: samples == 0,
        }
    }

    /// An event without samples is explained by its counter: zero, below the period, or
    /// unread; one with samples needs no explanation.
    #[test]
    fn no_samples_reason_event_counter_explains() {
        let r = no_samples_reason(&event(0, Some(0), None)).unwrap();
        assert!(r.starts_with("counter read 0: the PMU accepted it"), "{r}");
        assert_eq!(
            no_samples_reason(&event(0, Some(40), Some(100))).unwrap(),
            "counted 40, below its period 100"
        );
        assert_eq!(
            no_samples_reason(&event(0, None, None)).unwrap(),
            "its counter could not be read"
        );
        assert_eq!(no_samples_reason(&event(5, Some(0), None)), None);
    }
}
