//! `record --off-cpu`: the `sched:sched_switch` tracepoint, sampled at every context switch
//! with its raw fields (prev_pid, prev_state, next_pid) and call chain, so the host can pair
//! each switch-out with the same thread's next switch-in.
//!
//! The tracepoint's id and field layout come from tracefs; the layout also goes into
//! perf.data's HEADER_TRACING_DATA, which Linux `perf script` needs to read any tracepoint
//! sample at all. No fallback to the `context-switches` software event: without the tracepoint
//! the task state (S vs D) is unknown, so a missing tracepoint is an error naming what is
//! missing (docs/off-cpu.md).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::events::EventSpec;
use crate::sys::{self, flag, PerfEventAttr};
use crate::Error;

/// The tracepoint's name as perf spells it (EVENT_DESC, the manifest, `perf script`).
pub(super) const EVENT_NAME: &str = "sched:sched_switch";
/// The manifest's `off_cpu.method`.
pub(super) const METHOD: &str = "sched_switch-tracepoint";
/// Overrides where tracefs is looked for (one directory, no fallback): for kernels that
/// mount it elsewhere, and for tests of the missing-tracefs error.
pub const TRACEFS_ENV: &str = "KPROF_TRACEFS";
const PERF_TYPE_TRACEPOINT: u32 = 2;
const SAMPLE_RAW: u64 = 1 << 10;
const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
const SWITCH_ID: &str = "events/sched/sched_switch/id";

/// The tracepoint found, ready to open.
#[derive(Debug, Clone)]
pub(super) struct Tracepoint {
    /// The tracefs directory it was found under.
    pub(super) tracefs: PathBuf,
    /// Its id: `perf_event_attr.config` for PERF_TYPE_TRACEPOINT.
    pub(super) id: u64,
    /// perf.data's HEADER_TRACING_DATA body describing it.
    pub(super) tracing_data: Vec<u8>,
}

/// Finds `sched:sched_switch` in tracefs (mounting tracefs at its usual place if it is not),
/// or says what is missing.
pub(super) fn find() -> Result<Tracepoint, Error> {
    let candidates: Vec<PathBuf> = match std::env::var_os(TRACEFS_ENV) {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![PathBuf::from(TRACEFS), PathBuf::from(DEBUGFS_TRACING)],
    };
    let mut why = Vec::new();
    for dir in &candidates {
        match probe(dir) {
            Ok(t) => return Ok(t),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(Error::Other(format!(
        "--off-cpu: the {EVENT_NAME} tracepoint is not available ({}); the kernel needs \
         CONFIG_FTRACE=y and CONFIG_ENABLE_DEFAULT_TRACERS=y (tracepoints and tracefs, in \
         kprof's kernel fragment) and tracefs mounted (mount -t tracefs nodev {TRACEFS})",
        why.join("; ")
    )))
}

/// Why one tracefs candidate does not offer the tracepoint; `find` lists one per candidate.
#[derive(Debug)]
enum ProbeError {
    NoDirectory,
    MountFailed(io::Error),
    NoEvents,
    ReadId(io::Error),
    BadId(String),
    Format(io::Error),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::NoDirectory => f.write_str("no such directory"),
            ProbeError::MountFailed(e) => {
                write!(f, "tracefs not mounted, and mounting it failed: {e}")
            }
            ProbeError::NoEvents => f.write_str(
                "no events/ directory (not a tracefs, or a kernel without event tracing)",
            ),
            ProbeError::ReadId(e) => write!(
                f,
                "cannot read {SWITCH_ID} ({e}): a kernel without sched tracepoints"
            ),
            ProbeError::BadId(held) => write!(f, "{SWITCH_ID} holds `{held}`, not an id"),
            ProbeError::Format(e) => write!(f, "cannot read its format: {e}"),
        }
    }
}

/// Reads the tracepoint's id and format under `dir`, mounting tracefs there first when `dir`
/// is the usual tracefs mount point and is empty.
fn probe(dir: &Path) -> Result<Tracepoint, ProbeError> {
    if !dir.is_dir() {
        return Err(ProbeError::NoDirectory);
    }
    if dir == Path::new(TRACEFS) && !dir.join("events").exists() {
        mount_tracefs(dir).map_err(ProbeError::MountFailed)?;
    }
    if !dir.join("events").is_dir() {
        return Err(ProbeError::NoEvents);
    }
    let id = fs::read_to_string(dir.join(SWITCH_ID)).map_err(ProbeError::ReadId)?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| ProbeError::BadId(id.trim().to_string()))?;
    let tracing_data = tracing_data(dir).map_err(ProbeError::Format)?;
    Ok(Tracepoint {
        tracefs: dir.to_path_buf(),
        id,
        tracing_data,
    })
}

fn mount_tracefs(dir: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no data.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The event spec the other events are opened from: every switch, no frequency.
pub(super) fn spec(t: &Tracepoint) -> EventSpec {
    EventSpec {
        requested: EVENT_NAME.into(),
        name: EVENT_NAME.into(),
        attr_type: PERF_TYPE_TRACEPOINT,
        config: t.id,
        period: Some(1),
        freq: None,
        exclude_user: false,
        exclude_kernel: false,
    }
}

/// What a switch sample carries beyond an on-CPU one: the raw fields, and a call chain even
/// without `-g` (a switch without its path says nothing about where the thread blocked).
pub(super) fn adjust(a: &mut PerfEventAttr) {
    a.sample_type |= SAMPLE_RAW | sys::SAMPLE_CALLCHAIN;
    a.sample_period_or_freq = 1;
    a.flags &= !flag::FREQ;
}

/// HEADER_TRACING_DATA as perf's `tracing_data_get` writes it (trace-event-info.c, version
/// 0.6): magic, version, endianness, sizeof(long), page size, header_page, header_event, no
/// ftrace events, one system (`sched`) with one event format, then empty kallsyms,
/// printk formats and saved cmdlines.
fn tracing_data(dir: &Path) -> io::Result<Vec<u8>> {
    let mut b = Vec::new();
    b.extend_from_slice(&[23, 8, 68]);
    b.extend_from_slice(b"tracing");
    b.extend_from_slice(b"0.6\0");
    b.push(u8::from(cfg!(target_endian = "big")));
    b.push(size_of::<libc::c_long>() as u8);
    b.extend_from_slice(&(sys::page_size() as u32).to_ne_bytes());
    for name in ["header_page", "header_event"] {
        let body = fs::read(dir.join("events").join(name))?;
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend_from_slice(&(body.len() as u64).to_ne_bytes());
        b.extend_from_slice(&body);
    }
    b.extend_from_slice(&0u32.to_ne_bytes()); // ftrace events
    b.extend_from_slice(&1u32.to_ne_bytes()); // systems
    b.extend_from_slice(b"sched\0");
    b.extend_from_slice(&1u32.to_ne_bytes()); // events of the system
    let format = fs::read(dir.join("events/sched/sched_switch/format"))?;
    b.extend_from_slice(&(format.len() as u64).to_ne_bytes());
    b.extend_from_slice(&format);
    b.extend_from_slice(&0u32.to_ne_bytes()); // kallsyms
    b.extend_from_slice(&0u32.to_ne_bytes()); // printk formats
    b.extend_from_slice(&0u64.to_ne_bytes()); // saved cmdlines
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory that is no tracefs is refused with the directory and the kernel options named.
    #[test]
    fn probe_tracefs_wrong_dir_named() {
        let dir = std::env::temp_dir().join(format!("kprof-no-tracefs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let e = probe(&dir).unwrap_err().to_string();
        assert!(e.contains("no events/ directory"), "{e}");
        fs::create_dir_all(dir.join("events/sched/sched_switch")).unwrap();
        let e = probe(&dir).unwrap_err().to_string();
        assert!(e.contains(SWITCH_ID), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The tracing data starts with perf's magic and carries the format read from the dir.
    #[test]
    fn tracing_data_fake_tracefs_layout() {
        let dir = std::env::temp_dir().join(format!("kprof-fake-tracefs-{}", std::process::id()));
        fs::create_dir_all(dir.join("events/sched/sched_switch")).unwrap();
        fs::write(dir.join("events/header_page"), "hp").unwrap();
        fs::write(dir.join("events/header_event"), "he").unwrap();
        fs::write(
            dir.join("events/sched/sched_switch/format"),
            "name: sched_switch\n",
        )
        .unwrap();
        fs::write(dir.join(SWITCH_ID), "316\n").unwrap();
        let t = probe(&dir).unwrap();
        assert_eq!(t.id, 316);
        let d = &t.tracing_data;
        assert_eq!(&d[..10], b"\x17\x08\x44tracing");
        assert_eq!(&d[10..14], b"0.6\0");
        let fmt = b"name: sched_switch\n";
        let at = d.windows(fmt.len()).position(|w| w == fmt).unwrap();
        let len = u64::from_ne_bytes(d[at - 8..at].try_into().unwrap());
        assert_eq!(len as usize, fmt.len());
        assert_eq!(d.len(), at + fmt.len() + 16);
        fs::remove_dir_all(&dir).unwrap();
    }
}
