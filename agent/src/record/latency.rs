//! `record --latency`: a probe at the entry and one at the return of each function asked
//! for, through perf's `kprobe` and `uprobe` PMUs, each hit a sample with its time (the entry
//! with its call chain), so the host pairs them into calls.
//!
//! The PMUs rather than tracefs' `kprobe_events`/`uprobe_events`: a probe made through the
//! PMU belongs to its perf event and the kernel removes it when the last fd of the event
//! closes, which happens on every way the agent ends, SIGKILL and a cut ssh included. A probe
//! written to `kprobe_events` outlives its writer and would need cleaning up by the next
//! run. The PMUs came with Linux 4.17 and need `CONFIG_KPROBE_EVENTS` / `CONFIG_UPROBE_EVENTS`.

use std::ffi::CString;
use std::fs;
use std::path::Path;

use kprof_capture::manifest::{LatencyProbe, PROBE_KPROBE, PROBE_UPROBE};

use crate::cli::LatencyTarget;
use crate::events::EventSpec;
use crate::sys::{self, PerfEventAttr};
use crate::Error;

/// Where the kernel lists its PMUs.
const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// Hits per second of one probe above which the agent warns: each hit costs the probed
/// thread a trap and a sample written (about 1–5 µs on the boards measured, docs/latency.md),
/// so above this the probes change what they measure by a few per cent or more.
pub(super) const WARN_HITS_PER_SEC: u64 = 10_000;

/// A kernel's `kprobe` or `uprobe` PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pmu {
    /// `perf_event_attr.type` of the PMU.
    pub(super) type_: u32,
    /// The `config` bit that makes a probe a return probe (`format/retprobe`: `config:0`).
    pub(super) retprobe: u64,
}

impl Pmu {
    /// The PMU `name` (`kprobe`, `uprobe`) of this kernel, or why there is none.
    fn find(name: &str, config: &str) -> Result<Pmu, Error> {
        let dir = Path::new(PMU_DIR).join(name);
        let missing = |why: String| {
            Error::Other(format!(
                "--latency: this kernel has no {name} PMU ({}: {why}); it needs \
                 {config}=y and Linux 4.17 or later",
                dir.display()
            ))
        };
        let type_ = fs::read_to_string(dir.join("type"))
            .map_err(|e| missing(e.to_string()))?
            .trim()
            .parse()
            .map_err(|_| missing("its type is not a number".into()))?;
        let format = fs::read_to_string(dir.join("format/retprobe"))
            .map_err(|e| missing(format!("format/retprobe: {e}")))?;
        let retprobe = retprobe_bit(&format)
            .ok_or_else(|| missing(format!("format/retprobe is `{}`", format.trim())))?;
        Ok(Pmu { type_, retprobe })
    }
}

/// The bit of `config:N` (a one-bit field), as the PMU's format file gives it.
fn retprobe_bit(format: &str) -> Option<u64> {
    let n: u32 = format.trim().strip_prefix("config:")?.parse().ok()?;
    (n < 64).then(|| 1u64 << n)
}

/// One function to time: its two events and what the probe is placed on.
#[derive(Debug)]
pub(super) struct Probe {
    pub(super) target: LatencyTarget,
    pmu: Pmu,
    /// The symbol (kprobe) or file path (uprobe) the kernel is given; kept here because
    /// `config1` points at it while the events are opened.
    place: CString,
}

impl Probe {
    /// The event names, as `perf probe` names its events: `probe:FUNC` and
    /// `probe:FUNC__return`, `probe_PROGRAM:FUNC` for a user function.
    pub(super) fn event_names(&self) -> (String, String) {
        let entry = match &self.target {
            LatencyTarget::Kernel { symbol } => {
                format!("probe:{}", symbol.rsplit(':').next().unwrap_or(symbol))
            }
            LatencyTarget::User { path, function, .. } => {
                let program = Path::new(path)
                    .file_name()
                    .map_or_else(|| path.clone(), |f| f.to_string_lossy().into_owned());
                format!("probe_{program}:{function}")
            }
        };
        let ret = format!("{entry}__return");
        (entry, ret)
    }

    /// The entry (`ret == false`) or return event's spec.
    pub(super) fn spec(&self, ret: bool) -> EventSpec {
        let (entry, return_) = self.event_names();
        EventSpec {
            requested: self.target.asked(),
            name: if ret { return_ } else { entry },
            attr_type: self.pmu.type_,
            config: if ret { self.pmu.retprobe } else { 0 },
            period: Some(1),
            freq: None,
            exclude_user: false,
            exclude_kernel: false,
        }
    }

    /// What a hit of this probe records beyond `build_attr`'s (which samples every hit): its
    /// call chain even without `-g` (the slowest calls are shown with their callers). The return's chain
    /// matters most: it starts in the caller, at a call boundary, where every unwinder is
    /// sure of itself, while at the entry the function has not yet saved its frame (an x86
    /// kernel's ORC unwinder stops there, a frame-pointer walk skips the caller); the host
    /// joins the entry's own frames to the return's chain. `config1`/`config2` name the
    /// place; the caller clears `config1` before the attr is stored, as it is an address of
    /// this process.
    pub(super) fn adjust(&self, a: &mut PerfEventAttr, ret: bool) {
        a.sample_type |= sys::SAMPLE_CALLCHAIN;
        if ret {
            // The kernel's registers at a return are the caller's: nothing for the arm64
            // leaf-caller fix-up to add.
            a.sample_type &= !sys::SAMPLE_REGS_INTR;
            a.sample_regs_intr = 0;
        }
        if ret && cfg!(target_arch = "arm") {
            // The 32-bit Arm kernel's unwinder oopses walking from a return probe's
            // trampoline (seen on the armv7 board, Linux 6.1): its returns carry no chain.
            super::open_events::strip_call_chain(a);
        }
        a.config1 = self.place.as_ptr() as usize as u64;
        a.config2 = match &self.target {
            LatencyTarget::Kernel { .. } => 0,
            LatencyTarget::User { offset, .. } => *offset,
        };
    }

    /// The manifest's entry for it.
    pub(super) fn manifest(&self) -> LatencyProbe {
        let (entry_event, return_event) = self.event_names();
        let (kind, target, offset, build_id) = match &self.target {
            LatencyTarget::Kernel { symbol } => (PROBE_KPROBE, symbol.clone(), None, None),
            LatencyTarget::User {
                path,
                offset,
                build_id,
                ..
            } => (PROBE_UPROBE, path.clone(), Some(*offset), build_id.clone()),
        };
        LatencyProbe {
            function: self.target.asked(),
            kind: kind.into(),
            target,
            offset,
            build_id,
            entry_event,
            return_event,
        }
    }

    /// Why the kernel refused to open this probe, in words.
    pub(super) fn refused(&self, source: &std::io::Error) -> Error {
        let why = match (&self.target, source.raw_os_error()) {
            (LatencyTarget::Kernel { symbol }, Some(libc::ENOENT | libc::EINVAL)) => format!(
                "no kernel function `{symbol}` that can be probed: not in /proc/kallsyms \
                 (inlined, or its module is not loaded), or on the kprobe blacklist ({source})"
            ),
            (LatencyTarget::User { path, offset, .. }, Some(libc::ENOENT | libc::EINVAL)) => {
                format!("the kernel refused an uprobe at {path}+{offset:#x} ({source})")
            }
            _ => format!("the kernel refused the probe ({source})"),
        };
        Error::Other(format!("--latency {}: {why}", self.target.asked()))
    }
}

/// The probes of `targets`, with their PMUs found and every user file's build-id checked
/// against the one the host resolved the function's offset from: an offset into another
/// build of the file would put a breakpoint in the middle of an instruction.
pub(super) fn prepare(targets: &[LatencyTarget]) -> Result<Vec<Probe>, Error> {
    let mut kprobe = None;
    let mut uprobe = None;
    let mut probes = Vec::new();
    for t in targets {
        let (pmu, place) = match t {
            LatencyTarget::Kernel { symbol } => {
                let pmu = match kprobe {
                    Some(p) => p,
                    None => *kprobe.insert(Pmu::find("kprobe", "CONFIG_KPROBE_EVENTS")?),
                };
                (pmu, symbol.as_str())
            }
            LatencyTarget::User { path, build_id, .. } => {
                let pmu = match uprobe {
                    Some(p) => p,
                    None => *uprobe.insert(Pmu::find("uprobe", "CONFIG_UPROBE_EVENTS")?),
                };
                check_build_id(t, path, build_id.as_deref())?;
                (pmu, path.as_str())
            }
        };
        let place = CString::new(place)
            .map_err(|_| Error::Usage(format!("--latency {}: NUL in the name", t.asked())))?;
        probes.push(Probe {
            target: t.clone(),
            pmu,
            place,
        });
    }
    Ok(probes)
}

/// Refuses to probe `path` when its build-id is not `expected`.
fn check_build_id(t: &LatencyTarget, path: &str, expected: Option<&str>) -> Result<(), Error> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let found = crate::elf_build_id::elf_build_id(Path::new(path)).map_err(|e| {
        Error::Other(format!(
            "--latency {}: cannot read the build-id of {path}: {e}",
            t.asked()
        ))
    })?;
    let found = found.map(|b| kprof_capture::build_id::hex(&b));
    if found.as_deref() != Some(expected) {
        return Err(Error::Other(format!(
            "--latency {}: {path} on the board has build-id {}, not {expected} (the file \
             the function's offset was read from): not probing another build",
            t.asked(),
            found.as_deref().unwrap_or("(none)")
        )));
    }
    Ok(())
}

/// A warning for each probe that fired more than [`WARN_HITS_PER_SEC`] on average.
pub(super) fn rate_warnings(
    probes: &[LatencyProbe],
    events: &[kprof_capture::manifest::EventRecord],
    seconds: f64,
) -> Vec<String> {
    let mut out = Vec::new();
    for p in probes {
        let Some(hits) = events
            .iter()
            .find(|e| e.name == p.entry_event)
            .and_then(|e| e.count)
        else {
            continue;
        };
        let rate = hits as f64 / seconds.max(1e-3);
        if rate > WARN_HITS_PER_SEC as f64 {
            out.push(format!(
                "warning: --latency {}: {hits} calls ({rate:.0}/s, above {WARN_HITS_PER_SEC}/s): \
                 each call paid for two probe hits, so the times include that cost \
                 (docs/latency.md)",
                p.function
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retprobe bit is read as the PMU's format file states it.
    #[test]
    fn retprobe_bit_format_file() {
        assert_eq!(retprobe_bit("config:0\n"), Some(1));
        assert_eq!(retprobe_bit("config:5"), Some(32));
        assert_eq!(retprobe_bit("config:64"), None);
        assert_eq!(retprobe_bit("config1:0"), None);
        assert_eq!(retprobe_bit(""), None);
    }

    /// Event names follow perf probe's, the module prefix dropped.
    #[test]
    fn event_names_like_perf_probe() {
        let pmu = Pmu {
            type_: 7,
            retprobe: 1,
        };
        let probe = |target| Probe {
            target,
            pmu,
            place: CString::new("x").unwrap(),
        };
        let k = probe(LatencyTarget::Kernel {
            symbol: "mychardrv:mychardrv_read".into(),
        });
        assert_eq!(
            k.event_names(),
            (
                "probe:mychardrv_read".into(),
                "probe:mychardrv_read__return".into()
            )
        );
        assert_eq!(k.spec(true).config, 1);
        assert_eq!(k.spec(false).config, 0);
        let u = probe(LatencyTarget::User {
            path: "/usr/bin/mychardrv-writer".into(),
            offset: 0x11a0,
            build_id: None,
            function: "write_request".into(),
        });
        assert_eq!(u.event_names().0, "probe_mychardrv-writer:write_request");
        assert_eq!(u.manifest().offset, Some(0x11a0));
    }
}
