//! Sealing a capture: perf.data's feature sections (build-ids of everything that ran), the
//! manifest, the per-event summary on stderr, and the archive that replaces the work dir.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kprof_capture::manifest::{
    Command, EventRecord, FileDigest, Manifest, RingDropped, SkippedFiles, Truncation,
};

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
    /// The tracepoints recorded, when any is.
    pub(super) tracing: Option<&'a super::tracepoints::Tracing>,
    /// `--latency`: the probes placed.
    pub(super) latency: Vec<kprof_capture::manifest::LatencyProbe>,
    /// `--markers`: the lines recorded and lost.
    pub(super) markers: Option<kprof_capture::manifest::Markers>,
    /// Ring data dropped for corrupt record headers.
    pub(super) ring_dropped: RingDropped,
    /// Why the capture was cut short, when writing perf.data failed.
    pub(super) write_error: Option<WriteError>,
}

/// A write error that ended the capture, and what the rings still held then.
pub(super) struct WriteError {
    pub(super) error: io::Error,
    /// Records emptied from the rings unwritten after the error, and their bytes.
    pub(super) discarded_records: u64,
    pub(super) discarded_bytes: u64,
}

/// A sealed capture.
#[derive(Debug)]
pub struct Sealed {
    /// The archive.
    pub path: PathBuf,
    /// Why the capture is truncated (and how much was lost), when it is.
    pub truncated: Option<String>,
}

/// Longest time spent reading build-ids of mapped files; the rest are skipped (counted).
const BUILD_ID_TIME: Duration = Duration::from_secs(30);
/// Skipped files named in the manifest; the others are only counted.
const SKIPPED_EXAMPLES: usize = 8;

/// Finishes perf.data, writes the archive and removes the work dir; returns the archive path.
/// After a write error, perf.data is first cut to its last complete record; if even that
/// capture cannot be sealed, the work dir is removed and the error says the capture is lost.
pub(super) fn seal(sink: Sink, end: Ending<'_>, work: &mut WorkDir) -> Result<Sealed, Error> {
    let perf_path = work.member(kprof_capture::PERF_DATA);
    let (mut w, counts, files) = sink.into_parts();
    work.release_reserve();
    let truncation = match &end.write_error {
        None => None,
        Some(we) => Some(cut_after_write_error(&mut w, we, work)?),
    };
    report_behind(w.behind_totals());
    let (build_ids, skipped) = build_ids(&end.kernel, &files);
    let features = features(&end, build_ids);
    let perf_size = w.finish(&features).map_err(|e| match &end.write_error {
        Some(we) => lost(work, we, "writing perf.data's header", e),
        None => write_failed(&perf_path)(e),
    })?;
    let sha =
        archive::sha256_file(&perf_path).map_err(|e| Error::io("cannot hash perf.data", e))?;
    let events = event_records(end.opened, &counts, end.counter_values);
    let sysctl = procfs::sysctls();
    report(&events, end.command.as_ref(), &sysctl);
    report_dropped(&end.ring_dropped, skipped.as_ref(), end.markers.as_ref());
    report_probe_rates(&end, &events);
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
        off_cpu: end.tracing.and_then(|t| t.off_cpu_manifest()),
        markers: end.markers.clone(),
        truncated: truncation.is_some(),
        truncation,
        ring_dropped: (end.ring_dropped.bytes > 0).then_some(end.ring_dropped),
        skipped_files: skipped,
        sequence: Some(work.sequence.clone()),
        latency: end.latency.clone(),
        contention: end.tracing.and_then(|t| t.contention_manifest()),
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
    let mtime = end.stop_ns / 1_000_000_000;
    let path = write_archive(work, end.id, &members, mtime, end.write_error.as_ref())?;
    work.keep = false;
    let truncated = end
        .write_error
        .as_ref()
        .map(|we| truncation_note(&work.out_dir, we, m.truncation.as_ref()));
    Ok(Sealed { path, truncated })
}

/// What `record` says of a capture cut short by a write error in `out_dir`.
fn truncation_note(out_dir: &Path, we: &WriteError, t: Option<&Truncation>) -> String {
    format!(
        "writing perf.data in {} failed ({}); {} records ({}) lost",
        out_dir.display(),
        we.error,
        t.and_then(|t| t.lost_records).unwrap_or(0),
        crate::cli::human_bytes(t.and_then(|t| t.lost_bytes).unwrap_or(0)),
    )
}

/// After a write error: perf.data cut to its last complete record, and what the capture
/// lost (cut off here, and emptied from the rings unwritten).
fn cut_after_write_error(
    w: &mut writer::Writer,
    we: &WriteError,
    work: &mut WorkDir,
) -> Result<Truncation, Error> {
    let cut = w
        .cut_to_complete()
        .map_err(|e| lost(work, we, "cutting perf.data to its last record", e))?;
    let t = Truncation {
        reason: we.error.to_string(),
        lost_bytes: Some(cut.lost_bytes + we.discarded_bytes),
        lost_records: Some(cut.lost_records + we.discarded_records),
    };
    warn(format_args!(
        "perf.data sealed after its last complete record: {} records ({}) kept, {} records ({}) lost",
        cut.kept_records,
        crate::cli::human_bytes(cut.kept_bytes),
        t.lost_records.unwrap_or(0),
        crate::cli::human_bytes(t.lost_bytes.unwrap_or(0)),
    ));
    Ok(t)
}

/// The archive of `members` in the capture dir. On a full disk it is written again, freeing
/// each member as it is copied; if that fails too the capture is lost and the error says why.
fn write_archive(
    work: &mut WorkDir,
    id: &str,
    members: &[Member<'_>],
    mtime: u64,
    write_error: Option<&WriteError>,
) -> Result<PathBuf, Error> {
    match archive::write(&work.out_dir, id, members, mtime, false) {
        Ok(p) => Ok(p),
        // perf.data is stored as it is: the archive needs as much room again. Give each
        // member's space back as it is copied.
        Err(e) if no_space(&e) => {
            warn(format_args!(
                "no room for the archive in {} ({e}): writing it again, freeing the capture's files as they are copied",
                work.out_dir.display()
            ));
            archive::write(&work.out_dir, id, members, mtime, true).map_err(|e| {
                let cause = match write_error {
                    Some(we) => format!(
                        "writing {} failed ({})",
                        work.member(kprof_capture::PERF_DATA).display(),
                        we.error
                    ),
                    None => "the capture dir is full".to_string(),
                };
                work.keep = false;
                Error::Other(format!(
                    "capture lost: {cause}, and writing its archive in {} failed too ({e}); the partial files are removed: free space there (or record into another dir with -o)",
                    work.out_dir.display()
                ))
            })
        }
        Err(e) => Err(Error::io(
            format!(
                "cannot write the archive (capture kept in {})",
                work.path.display()
            ),
            e,
        )),
    }
}

/// Disk full or over quota.
fn no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || e.kind() == io::ErrorKind::StorageFull
}

/// A truncated capture that could not be sealed either: the work dir goes (on drop), and the
/// error says so.
fn lost(work: &mut WorkDir, we: &WriteError, what: &str, e: io::Error) -> Error {
    work.keep = false;
    Error::Other(format!(
        "capture lost: writing perf.data in {} failed ({}), and {what} failed too ({e}); the partial files are removed: free space there (or record into another dir with -o)",
        work.out_dir.display(),
        we.error
    ))
}

/// Rounds compressed at the fastest level because the agent was behind
/// (`Writer::behind_round`).
fn report_behind((rounds, bytes): (u64, u64)) {
    if rounds > 0 {
        warn(format_args!(
            "{rounds} rounds of records ({}) compressed at zstd level {}: the agent was \
             behind, with ring buffers more than half full",
            crate::cli::human_bytes(bytes),
            writer::BEHIND_LEVEL
        ));
    }
}

/// A warning for each `--latency` probe that fired faster than its cost allows.
fn report_probe_rates(end: &Ending<'_>, events: &[EventRecord]) {
    let seconds = end.stop_ns.saturating_sub(end.start_ns) as f64 / 1e9;
    for w in super::latency::rate_warnings(&end.latency, events, seconds) {
        warn(w);
    }
}

/// Ring data dropped, mapped files skipped and marker lines lost, on stderr.
fn report_dropped(
    dropped: &RingDropped,
    skipped: Option<&SkippedFiles>,
    markers: Option<&kprof_capture::manifest::Markers>,
) {
    if let Some(m) = markers.filter(|m| m.lost > 0) {
        warn(format_args!(
            "LOST {} trace_marker lines: ftrace's ring buffer overflowed between two reads \
             (raise {}/buffer_size_kb)",
            m.lost, m.tracefs
        ));
    }
    if dropped.bytes > 0 {
        warn(format_args!(
            "LOST {} of ring buffer data at {} corrupt record header(s): the records in it are not in perf.data",
            crate::cli::human_bytes(dropped.bytes),
            dropped.batches
        ));
    }
    if let Some(s) = skipped {
        warn(format_args!(
            "warning: no build-id read for {} mapped file(s) (their samples may not symbolize): {}",
            s.count,
            s.examples.join("; ")
        ));
    }
}

/// perf.data's feature sections.
fn features(end: &Ending<'_>, build_ids: Vec<BuildIdEntry>) -> Features {
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
        build_ids,
        tracing_data: end.tracing.map(|t| t.tracing_data.clone()),
    }
}

/// Build-ids: kernel, modules, every user ELF that was mapped; and the mapped files skipped
/// because their path names no regular file now, or because [`BUILD_ID_TIME`] ran out.
fn build_ids(
    k: &KernelState,
    files: &BTreeSet<Vec<u8>>,
) -> (Vec<BuildIdEntry>, Option<SkippedFiles>) {
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
    let mut skipped = SkippedFiles::default();
    let mut skip = |name: &str, why: &dyn std::fmt::Display| {
        skipped.count += 1;
        if skipped.examples.len() < SKIPPED_EXAMPLES {
            skipped.examples.push(format!("{name}: {why}"));
        }
    };
    let names: Vec<String> = files
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .filter(|n| !n.ends_with(" (deleted)"))
        .collect();
    let (read, left) = super::build_id_reader::read(names, Instant::now() + BUILD_ID_TIME);
    for (name, result) in read {
        match result {
            Ok(Some(bid)) => out.push(BuildIdEntry {
                misc: writer::MISC_USER,
                pid: writer::HOST_PID,
                build_id: bid,
                filename: name,
            }),
            Ok(None) => {}
            Err(e @ elf_build_id::Unread::NotRegular(_)) => skip(&name, &e),
            // Gone or unreadable: no build-id, as for a file that has none.
            Err(elf_build_id::Unread::Io(_)) => {}
        }
    }
    for name in left {
        skip(
            &name,
            &format_args!("{} s spent reading build-ids", BUILD_ID_TIME.as_secs()),
        );
    }
    (out, (skipped.count > 0).then_some(skipped))
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
                "LOST {} samples of {}: the ring buffer overflowed (raise --mmap-pages, lower -F, drop -g, or on a fully loaded board give the agent priority with --nice -19)",
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
    if e.requested.as_deref() == Some("--markers") {
        return Some("no line was written to trace_marker while recording".into());
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
