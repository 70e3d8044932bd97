//! Opening the events: the sampling rate each one gets, the threads and CPUs it is opened on,
//! its `perf_event_attr`, and the fallback from a missing hardware default to `cpu-clock`.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::cli::{CallGraph, RecordOpts, DEFAULT_FREQ};
use crate::events::{self, EventSpec};
use crate::sys::{self, flag, PerfEventAttr};
use crate::Error;

/// An event after opening: what was asked, what the kernel accepted, its fds.
pub(super) struct Opened {
    pub(super) spec: EventSpec,
    /// What the user asked for; `None` for the default event.
    pub(super) requested: Option<String>,
    pub(super) attr: PerfEventAttr,
    /// The event that could not be opened and the kernel's reason, when this one replaced it.
    pub(super) fallback: Option<(String, String)>,
    /// One per (thread, CPU); taken by the rings once mapped.
    pub(super) fds: Vec<(u32, OwnedFd)>,
    /// The perf.data sample id of each fd, in `fds` order.
    pub(super) ids: Vec<u64>,
}

/// The frequency of events that name neither a frequency nor a period: `-F`, none with `-c`,
/// else the default capped to `kernel.perf_event_max_sample_rate`. Checks every frequency.
pub(super) fn global_freq(o: &RecordOpts, max_rate: u64) -> Result<Option<u64>, Error> {
    let check_freq = |f: u64, what: &str| -> Result<(), Error> {
        if f == 0 {
            return Err(Error::Usage(format!(
                "{what}: frequency must be greater than 0"
            )));
        }
        if f > max_rate {
            return Err(Error::Other(format!(
                "{what}: frequency {f} Hz is above kernel.perf_event_max_sample_rate ({max_rate} Hz)"
            )));
        }
        Ok(())
    };
    let global = match (o.freq, o.period) {
        (Some(f), _) => {
            check_freq(f, "-F")?;
            Some(f)
        }
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_FREQ.min(max_rate)),
    };
    for e in &o.events {
        if let Some(f) = e.freq {
            check_freq(f, &e.requested)?;
        }
    }
    Ok(global)
}

/// The CPUs to sample: `-C`'s list if all of it is online, else every online CPU.
pub(super) fn select_cpus(requested: Option<&[u32]>, online: &[u32]) -> Result<Vec<u32>, Error> {
    match requested {
        None => Ok(online.to_vec()),
        Some(list) => {
            if let Some(c) = list.iter().find(|c| !online.contains(c)) {
                return Err(Error::Usage(format!(
                    "CPU {c} is not online (online: {online:?})"
                )));
            }
            Ok(list.to_vec())
        }
    }
}

/// Threads of the target, or `-1` (all tasks) for system-wide sampling.
pub(super) fn targets(o: &RecordOpts) -> Result<Vec<i32>, Error> {
    let Some(pid) = o.pid else {
        return Ok(vec![-1]);
    };
    let dir = fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| Error::io(format!("no process with pid {pid}"), e))?;
    let mut tids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// Opens every requested event (or the default) on every (thread, CPU) and reads its ids.
/// What the user should hear once the capture is under way is pushed to `notices`.
pub(super) fn open_all(
    o: &RecordOpts,
    global_freq: Option<u64>,
    tids: &[i32],
    cpus: &[u32],
    traced: &Traced<'_>,
    notices: &mut Vec<String>,
) -> Result<Vec<Opened>, Error> {
    if matches!(o.call_graph, Some(CallGraph::Dwarf { .. })) && sys::DWARF_REGS_USER == 0 {
        return Err(Error::Usage(format!(
            "--call-graph dwarf: no user register set known for {}",
            std::env::consts::ARCH
        )));
    }
    // Saturating: 2^20 pages are more than a 32-bit usize holds (Ring::new refuses them).
    let watermark =
        (o.mmap_pages.saturating_mul(sys::page_size()) / 4).clamp(8, u32::MAX as usize) as u32;
    // Cleared for good once the kernel refuses it, so the fallback is tried and told once.
    let mut regs_intr = kernel_leaf_regs(o);
    let specs = if o.no_sample {
        Vec::new()
    } else {
        requested_specs(o)?
    };
    let mut opened: Vec<Opened> = Vec::new();
    for (i, (spec, requested)) in specs.into_iter().enumerate() {
        let (freq, period) = rates(&spec, global_freq, o.period);
        let attr = build_attr(&spec, i == 0, o, freq, period, watermark, regs_intr);
        match open_with_regs_intr(attr, tids, cpus, &spec.requested, &mut regs_intr, notices) {
            Ok((attr, fds)) => {
                if requested.is_none() {
                    notices.push(format!(
                        "sampling `{}` (default event: this CPU's PMU counts it)",
                        spec.name
                    ));
                }
                opened.push(Opened {
                    spec,
                    requested,
                    attr,
                    fallback: None,
                    fds,
                    ids: Vec::new(),
                });
            }
            Err(Error::Event { source, .. })
                if requested.is_none() && is_missing_event(&source) =>
            {
                let fb = events::parse("cpu-clock")?;
                let attr = build_attr(&fb, i == 0, o, freq, period, watermark, regs_intr);
                let (attr, fds) =
                    open_with_regs_intr(attr, tids, cpus, "cpu-clock", &mut regs_intr, notices)?;
                notices.push(format!(
                    "no `{}` on this machine ({source}); sampling `cpu-clock` instead",
                    spec.name
                ));
                opened.push(Opened {
                    spec: fb,
                    requested: None,
                    attr,
                    fallback: Some((spec.name.clone(), source.to_string())),
                    fds,
                    ids: Vec::new(),
                });
            }
            Err(e) => return Err(e),
        }
    }
    let at = At { o, cpus, watermark };
    open_traced(&mut opened, traced, &at, &mut regs_intr, notices)?;
    read_ids(&mut opened)?;
    Ok(opened)
}

/// The events other than the sampling ones a capture records.
pub(super) struct Traced<'a> {
    /// `--off-cpu`'s context-switch tracepoint.
    pub(super) off_cpu: Option<&'a super::tracefs::Tracepoint>,
    /// `--latency`'s probes.
    pub(super) probes: &'a [super::latency::Probe],
    /// `--contention`'s tracepoints.
    pub(super) contention: &'a [super::tracefs::Tracepoint],
}

/// Where and how the traced events are opened: every thread of the CPUs of the capture, with
/// its ring wake-up.
struct At<'a> {
    o: &'a RecordOpts,
    cpus: &'a [u32],
    watermark: u32,
}

/// Opens `traced`'s events after the sampling ones; the first gets the tracking flags when
/// there is no sampling event (`--no-sample`).
fn open_traced(
    opened: &mut Vec<Opened>,
    traced: &Traced<'_>,
    at: &At<'_>,
    regs_intr: &mut bool,
    notices: &mut Vec<String>,
) -> Result<(), Error> {
    if let Some(t) = traced.off_cpu {
        let tracking = opened.is_empty();
        opened.push(open_off_cpu(t, at, tracking, regs_intr, notices)?);
    }
    if at.o.pid.is_some() && (!traced.probes.is_empty() || !traced.contention.is_empty()) {
        notices.push(
            "--latency and --contention record every process's calls and waits (a probe              event inherited by a fork makes the kernel read its function name again in the              child, where it is not): `kprofctl report --latency --pid PID` keeps the              process's"
                .into(),
        );
    }
    for probe in traced.probes {
        for ret in [false, true] {
            let spec = probe.spec(ret);
            let mut attr = at.attr(&spec, opened.is_empty(), *regs_intr);
            probe.adjust(&mut attr, ret);
            attr.flags &= !flag::INHERIT;
            let (mut attr, fds) =
                open_with_regs_intr(attr, &[-1], at.cpus, &spec.name, regs_intr, notices).map_err(
                    |e| match e {
                        Error::Event { source, .. } => probe.refused(&source),
                        e => e,
                    },
                )?;
            // An address in the agent: meaningless in the file, and not to be disclosed.
            attr.config1 = 0;
            opened.push(Opened {
                requested: Some(format!("--latency {}", spec.requested)),
                spec,
                attr,
                fallback: None,
                fds,
                ids: Vec::new(),
            });
        }
    }
    for t in traced.contention {
        let spec = t.spec();
        let mut attr = at.attr(&spec, opened.is_empty(), *regs_intr);
        super::contention::adjust(&mut attr, super::contention::is_begin(t));
        attr.flags &= !flag::INHERIT;
        let (attr, fds) =
            open_with_regs_intr(attr, &[-1], at.cpus, &spec.name, regs_intr, notices)?;
        opened.push(Opened {
            spec,
            requested: Some("--contention".into()),
            attr,
            fallback: None,
            fds,
            ids: Vec::new(),
        });
    }
    Ok(())
}

impl At<'_> {
    /// An event of every hit (period 1).
    fn attr(&self, spec: &EventSpec, tracking: bool, regs_intr: bool) -> PerfEventAttr {
        build_attr(
            spec,
            tracking,
            self.o,
            None,
            Some(1),
            self.watermark,
            regs_intr,
        )
    }
}

/// The `-e` events with what the user typed, or the default `cycles` (requested: `None`).
fn requested_specs(o: &RecordOpts) -> Result<Vec<(EventSpec, Option<String>)>, Error> {
    Ok(if o.events.is_empty() {
        vec![(events::parse("cycles")?, None)]
    } else {
        o.events
            .iter()
            .map(|e| (e.clone(), Some(e.requested.clone())))
            .collect()
    })
}

/// The kernel's sample id of every fd, which perf.data's attrs list.
fn read_ids(opened: &mut [Opened]) -> Result<(), Error> {
    for ev in opened {
        for (_, fd) in &ev.fds {
            ev.ids.push(
                sys::event_id(fd.as_raw_fd()).map_err(|e| Error::io("PERF_EVENT_IOC_ID", e))?,
            );
        }
    }
    Ok(())
}

/// An event's frequency and period: its own (`-e cycles/period=N/`), else the global `-F`
/// or `-c` unless the event set the other one.
fn rates(
    spec: &EventSpec,
    global_freq: Option<u64>,
    global_period: Option<u64>,
) -> (Option<u64>, Option<u64>) {
    let freq = spec.freq.or(if spec.period.is_some() {
        None
    } else {
        global_freq
    });
    let period = spec.period.or(if spec.freq.is_some() {
        None
    } else {
        global_period
    });
    (freq, period)
}

/// `--off-cpu`'s context-switch tracepoint on every CPU.
fn open_off_cpu(
    t: &super::tracefs::Tracepoint,
    at: &At<'_>,
    tracking: bool,
    regs_intr: &mut bool,
    notices: &mut Vec<String>,
) -> Result<Opened, Error> {
    let (o, cpus) = (at.o, at.cpus);
    let spec = t.spec();
    let mut attr = at.attr(&spec, tracking, *regs_intr);
    super::off_cpu::adjust(&mut attr);
    // A thread's switch-in is recorded in the context of the thread leaving that CPU: a
    // per-thread event would see only the switch-outs. So the switches of every CPU.
    if o.pid.is_some() {
        notices.push(
            "--off-cpu records the context switches of every thread (a switch-in is seen \
             from the thread leaving the CPU): `kprofctl report --off-cpu --pid PID` keeps \
             the process's"
                .into(),
        );
        attr.flags &= !flag::INHERIT;
    }
    let (attr, fds) = open_with_regs_intr(attr, &[-1], cpus, &spec.name, regs_intr, notices)?;
    Ok(Opened {
        spec,
        requested: Some("--off-cpu".into()),
        attr,
        fallback: None,
        fds,
        ids: Vec::new(),
    })
}

/// Whether to ask for the interrupted kernel context's LR/SP/PC: on arm64 with call chains. The
/// kernel's frame-pointer walk starts at the leaf's frame record, which a leaf that has not
/// pushed one yet does not have: its caller is only in LR. x86_64 kernels unwind with ORC and
/// need no help.
fn kernel_leaf_regs(o: &RecordOpts) -> bool {
    cfg!(target_arch = "aarch64") && o.call_graph.is_some()
}

/// Opens `attr`; if it asks for `REGS_INTR` and the kernel refuses that (some PMUs cannot
/// sample interrupted registers), opens it without and says so once.
fn open_with_regs_intr(
    mut attr: PerfEventAttr,
    tids: &[i32],
    cpus: &[u32],
    name: &str,
    regs_intr: &mut bool,
    notices: &mut Vec<String>,
) -> Result<(PerfEventAttr, Vec<(u32, OwnedFd)>), Error> {
    match open_event(&attr, tids, cpus, name) {
        Err(Error::Event { source, .. })
            if attr.sample_type & sys::SAMPLE_REGS_INTR != 0
                && matches!(
                    source.raw_os_error(),
                    Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)
                ) =>
        {
            attr.sample_type &= !sys::SAMPLE_REGS_INTR;
            attr.sample_regs_intr = 0;
            let fds = open_event(&attr, tids, cpus, name)?;
            *regs_intr = false;
            notices.push(format!(
                "`{name}` cannot sample kernel registers ({source}): kernel leaf functions' \
                 callers may be missing from call chains"
            ));
            Ok((attr, fds))
        }
        r => r.map(|fds| (attr, fds)),
    }
}

fn build_attr(
    spec: &EventSpec,
    tracking: bool,
    o: &RecordOpts,
    freq: Option<u64>,
    period: Option<u64>,
    watermark: u32,
    regs_intr: bool,
) -> PerfEventAttr {
    let mut a = PerfEventAttr {
        type_: spec.attr_type,
        size: sys::ATTR_SIZE,
        config: spec.config,
        sample_type: sys::SAMPLE_IDENTIFIER
            | sys::SAMPLE_IP
            | sys::SAMPLE_TID
            | sys::SAMPLE_TIME
            | sys::SAMPLE_CPU
            | sys::SAMPLE_PERIOD,
        read_format: sys::FORMAT_ID,
        flags: flag::DISABLED | flag::SAMPLE_ID_ALL | flag::WATERMARK,
        wakeup: watermark,
        ..Default::default()
    };
    if spec.attr_type == sys::PERF_TYPE_TRACEPOINT {
        // A tracepoint's hit is worth nothing without its fields.
        a.sample_type |= sys::SAMPLE_RAW;
    }
    if let Some(p) = period {
        a.sample_period_or_freq = p;
    } else {
        a.sample_period_or_freq = freq.unwrap_or(DEFAULT_FREQ);
        a.flags |= flag::FREQ;
    }
    if o.pid.is_some() {
        a.flags |= flag::INHERIT;
    }
    if spec.exclude_user {
        a.flags |= flag::EXCLUDE_USER;
    }
    if spec.exclude_kernel {
        a.flags |= flag::EXCLUDE_KERNEL | flag::EXCLUDE_HV;
    }
    match o.call_graph {
        None => {}
        Some(CallGraph::Fp) => a.sample_type |= sys::SAMPLE_CALLCHAIN,
        Some(CallGraph::Dwarf { stack_size }) => {
            // perf's evsel__config_callchain for CALLCHAIN_DWARF: the kernel still walks its
            // own stack (the callchain keeps the kernel part), the user part is left out
            // (it would be a frame-pointer guess the host then ignores) and replaced by the
            // registers and stack copy the host unwinds with CFI.
            a.sample_type |= sys::SAMPLE_CALLCHAIN | sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER;
            a.sample_regs_user = sys::DWARF_REGS_USER;
            a.sample_stack_user = stack_size;
            a.flags |= flag::EXCLUDE_CALLCHAIN_USER;
            if tracking {
                // Maps of non-executable segments too, as perf's `--call-graph dwarf` asks
                // for (its sample_address implies mmap_data): an ELF's .eh_frame_hdr and
                // .eh_frame usually sit in the read-only segment after the text, and an
                // unwinder reading them through the process's maps must find that segment.
                a.flags |= flag::MMAP_DATA;
            }
        }
    }
    if regs_intr && o.call_graph.is_some() {
        a.sample_type |= sys::SAMPLE_REGS_INTR;
        a.sample_regs_intr = sys::ARM64_REGS_INTR_LR_SP_PC;
    }
    if tracking {
        // Only the first event reports process lifecycle, or every record would be doubled.
        a.flags |= flag::MMAP | flag::COMM | flag::TASK | flag::MMAP2 | flag::COMM_EXEC;
    }
    a
}

/// Takes the call chain out of an event built by [`build_attr`] (its user registers and stack
/// copy, the arm64 interrupted registers): for the events whose time is all the host needs.
pub(super) fn strip_call_chain(a: &mut PerfEventAttr) {
    a.sample_type &= !(sys::SAMPLE_CALLCHAIN
        | sys::SAMPLE_REGS_USER
        | sys::SAMPLE_STACK_USER
        | sys::SAMPLE_REGS_INTR);
    a.sample_regs_user = 0;
    a.sample_stack_user = 0;
    a.sample_regs_intr = 0;
}

fn is_missing_event(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV)
    )
}

/// Opens one event on every (thread, CPU).
fn open_event(
    attr: &PerfEventAttr,
    tids: &[i32],
    cpus: &[u32],
    name: &str,
) -> Result<Vec<(u32, OwnedFd)>, Error> {
    let mut fds = Vec::new();
    for &tid in tids {
        for &cpu in cpus {
            match sys::perf_event_open(attr, tid, cpu as i32) {
                Ok(fd) => fds.push((cpu, fd)),
                // A thread of `-p` may exit while we open: not an error.
                Err(e) if tid > 0 && e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(source) => {
                    return Err(Error::Event {
                        event: name.to_string(),
                        source,
                    })
                }
            }
        }
    }
    if fds.is_empty() {
        return Err(Error::Event {
            event: name.to_string(),
            source: io::Error::from_raw_os_error(libc::ESRCH),
        });
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> RecordOpts {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match crate::cli::parse(&argv).unwrap() {
            crate::cli::Command::Record(o) => o,
            c => panic!("not record: {c:?}"),
        }
    }

    /// Without -F or -c the default frequency applies, capped to the kernel's maximum.
    #[test]
    fn global_freq_default_capped_to_kernel_max() {
        assert_eq!(global_freq(&opts(&["record"]), 1000).unwrap(), Some(1000));
        assert_eq!(
            global_freq(&opts(&["record"]), u64::MAX).unwrap(),
            Some(DEFAULT_FREQ)
        );
        assert_eq!(
            global_freq(&opts(&["record", "-c", "10000"]), 1000).unwrap(),
            None
        );
    }

    /// -F above the kernel's maximum is refused, naming the option.
    #[test]
    fn global_freq_above_kernel_max_refused() {
        let e = global_freq(&opts(&["record", "-F", "5000"]), 1000).unwrap_err();
        assert!(e.to_string().starts_with("-F: frequency 5000 Hz"), "{e}");
    }

    /// -C must name online CPUs; without it every online CPU is sampled.
    #[test]
    fn select_cpus_offline_refused() {
        assert_eq!(select_cpus(None, &[0, 1]).unwrap(), vec![0, 1]);
        assert_eq!(select_cpus(Some(&[1]), &[0, 1]).unwrap(), vec![1]);
        assert!(matches!(
            select_cpus(Some(&[2]), &[0, 1]),
            Err(Error::Usage(_))
        ));
    }

    /// Only the first event tracks processes; a period turns frequency mode off.
    #[test]
    fn build_attr_tracking_and_period() {
        let o = opts(&["record", "-g"]);
        let spec = events::parse("cpu-clock").unwrap();
        let first = build_attr(&spec, true, &o, Some(99), None, 64, false);
        assert_ne!(first.flags & flag::MMAP2, 0);
        assert_ne!(first.flags & flag::FREQ, 0);
        assert_eq!(first.sample_period_or_freq, 99);
        assert_ne!(first.sample_type & sys::SAMPLE_CALLCHAIN, 0);
        let second = build_attr(&spec, false, &o, None, Some(10_000), 64, false);
        assert_eq!(second.flags & (flag::MMAP2 | flag::COMM | flag::FREQ), 0);
        assert_eq!(second.sample_period_or_freq, 10_000);
    }

    /// `--call-graph dwarf,SIZE` sets what perf sets: kernel callchain without its user part,
    /// perf's user register mask and the stack size; fp sets none of those.
    #[test]
    fn build_attr_dwarf_like_perf() {
        let spec = events::parse("cpu-clock").unwrap();
        let a = build_attr(
            &spec,
            true,
            &opts(&["record", "--call-graph", "dwarf,4096"]),
            Some(99),
            None,
            64,
            false,
        );
        let want = sys::SAMPLE_CALLCHAIN | sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER;
        assert_eq!(a.sample_type & want, want);
        assert_eq!(a.sample_type & sys::SAMPLE_REGS_INTR, 0);
        assert_eq!(a.sample_stack_user, 4096);
        assert_eq!(a.sample_regs_user, sys::DWARF_REGS_USER);
        assert_ne!(a.flags & flag::EXCLUDE_CALLCHAIN_USER, 0);
        assert_ne!(a.flags & flag::MMAP_DATA, 0);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(a.sample_regs_user, 0xff0fff);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(a.sample_regs_user, 0x1_ffff_ffff);
        #[cfg(target_arch = "arm")]
        assert_eq!(a.sample_regs_user, 0xffff);

        let fp = build_attr(
            &spec,
            true,
            &opts(&["record", "-g"]),
            Some(99),
            None,
            64,
            false,
        );
        assert_eq!(
            fp.sample_type & (sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER),
            0
        );
        assert_eq!((fp.sample_regs_user, fp.sample_stack_user), (0, 0));
        assert_eq!(
            fp.flags & (flag::EXCLUDE_CALLCHAIN_USER | flag::MMAP_DATA),
            0
        );
    }

    /// Kernel leaf registers (LR, SP, PC) are asked for only with call chains and only where
    /// the caller decided (arm64); without call chains they are never added.
    #[test]
    fn build_attr_regs_intr_with_callchains_only() {
        let spec = events::parse("cpu-clock").unwrap();
        let a = build_attr(&spec, true, &opts(&["record", "-g"]), None, None, 64, true);
        assert_ne!(a.sample_type & sys::SAMPLE_REGS_INTR, 0);
        assert_eq!(a.sample_regs_intr, 0x1_c000_0000);
        let none = build_attr(&spec, true, &opts(&["record"]), None, None, 64, true);
        assert_eq!(none.sample_type & sys::SAMPLE_REGS_INTR, 0);
        assert_eq!(none.sample_regs_intr, 0);
        assert_eq!(
            kernel_leaf_regs(&opts(&["record", "-g"])),
            cfg!(target_arch = "aarch64")
        );
    }
}
