//! tracefs: where it is (mounting it at its usual place when that is empty), any
//! `SUBSYS:EVENT` tracepoint's id and format, and perf.data's HEADER_TRACING_DATA for the
//! tracepoints of a capture, which Linux `perf script` needs to decode any tracepoint sample.
//!
//! Shared by `--off-cpu` (`sched:sched_switch`), `-e SUBSYS:EVENT` and `--markers`
//! (`ftrace:print`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys;
use crate::Error;

/// Overrides where tracefs is looked for (one directory, no fallback): for kernels that
/// mount it elsewhere, and for tests of the missing-tracefs error.
pub const TRACEFS_ENV: &str = "KPROF_TRACEFS";
/// Where tracefs lives on kernels since 4.1, and where the agent mounts it when it is empty.
pub(super) const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
/// The kernel options and the mount command every tracefs error ends with.
const HOW_TO_FIX: &str = "the kernel needs CONFIG_FTRACE=y and CONFIG_FTRACE_SYSCALLS=y \
     (tracepoints and tracefs, in kprof's kernel fragment) and tracefs mounted \
     (mount -t tracefs nodev /sys/kernel/tracing)";

/// The whole of a tracefs file. `events/header_page` and `header_event` are generated per
/// read and answer a read at an offset with nothing, so the small probe read of
/// `fs::read` would cut them after 32 bytes: one read of a large buffer, as perf does.
pub(super) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let mut out = vec![0u8; 64 << 10];
    let mut len = 0;
    loop {
        if len == out.len() {
            out.resize(len * 2, 0);
        }
        match f.read(&mut out[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(len);
    Ok(out)
}

/// A tracefs directory with an `events/` tree.
#[derive(Debug, Clone)]
pub(super) struct Tracefs {
    /// The directory (`/sys/kernel/tracing`, or `KPROF_TRACEFS`).
    pub(super) dir: PathBuf,
}

/// One tracepoint found in tracefs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tracepoint {
    /// Its system (`sched`, `ftrace`, a module's name).
    pub(super) system: String,
    /// Its event name within the system.
    pub(super) event: String,
    /// `perf_event_attr.config` for PERF_TYPE_TRACEPOINT; ftrace's `common_type`.
    pub(super) id: u64,
    /// The text of its `format` file.
    pub(super) format: Vec<u8>,
}

impl Tracepoint {
    /// `SUBSYS:EVENT`, as perf names it (EVENT_DESC, `perf script`, the manifest).
    pub(super) fn name(&self) -> String {
        format!("{}:{}", self.system, self.event)
    }

    /// The event spec of a tracepoint recorded at every hit (`--off-cpu`, `--contention`).
    pub(super) fn spec(&self) -> crate::events::EventSpec {
        crate::events::EventSpec {
            requested: self.name(),
            name: self.name(),
            attr_type: sys::PERF_TYPE_TRACEPOINT,
            config: self.id,
            period: Some(1),
            freq: None,
            exclude_user: false,
            exclude_kernel: false,
        }
    }
}

impl Tracefs {
    /// Finds tracefs: `KPROF_TRACEFS` alone if set, else `/sys/kernel/tracing` (mounting
    /// tracefs there if it is empty), then `/sys/kernel/debug/tracing`. `needed_for` starts
    /// the error (`--markers: ftrace's trace_marker lines`), which names every directory
    /// tried, why each failed, the kernel options and the mount command.
    pub(super) fn find(needed_for: &str) -> Result<Tracefs, Error> {
        let candidates: Vec<PathBuf> = match std::env::var_os(TRACEFS_ENV) {
            Some(dir) => vec![PathBuf::from(dir)],
            None => vec![PathBuf::from(TRACEFS), PathBuf::from(DEBUGFS_TRACING)],
        };
        let mut why = Vec::new();
        for dir in &candidates {
            match probe(dir) {
                Ok(()) => return Ok(Tracefs { dir: dir.clone() }),
                Err(e) => why.push(format!("{}: {e}", dir.display())),
            }
        }
        Err(Error::Other(format!(
            "{needed_for} is not available ({}); {HOW_TO_FIX}",
            why.join("; ")
        )))
    }

    /// Looks up `system:event`: its id and format, or an error naming the tracepoint and the
    /// directory it was looked for in.
    pub(super) fn tracepoint(&self, system: &str, event: &str) -> Result<Tracepoint, Error> {
        let valid = |s: &str| {
            !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\0')
        };
        let dir = self.dir.join("events").join(system).join(event);
        if !valid(system) || !valid(event) || !dir.is_dir() {
            return Err(Error::Other(format!(
                "unknown tracepoint `{system}:{event}`: no {} (the kernel's tracepoints are \
                 listed in {}; a module's appear once it is loaded)",
                dir.display(),
                self.dir.join("available_events").display()
            )));
        }
        let read = |name: &str| {
            let p = dir.join(name);
            read_file(&p).map_err(|e| {
                Error::io(
                    format!("tracepoint `{system}:{event}`: cannot read {}", p.display()),
                    e,
                )
            })
        };
        let id_text = read("id")?;
        let id = std::str::from_utf8(&id_text)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                Error::Other(format!(
                    "tracepoint `{system}:{event}`: {} holds `{}`, not an id",
                    dir.join("id").display(),
                    String::from_utf8_lossy(&id_text).trim()
                ))
            })?;
        Ok(Tracepoint {
            system: system.to_string(),
            event: event.to_string(),
            id,
            format: read("format")?,
        })
    }

    /// perf.data's HEADER_TRACING_DATA describing `tps` (duplicates once).
    pub(super) fn tracing_data(&self, tps: &[Tracepoint]) -> Result<Vec<u8>, Error> {
        let read = |name: &str| {
            let p = self.dir.join("events").join(name);
            read_file(&p).map_err(|e| Error::io(format!("cannot read {}", p.display()), e))
        };
        Ok(tracing_data(
            &read("header_page")?,
            &read("header_event")?,
            tps,
            sys::page_size() as u32,
        ))
    }
}

/// Why one tracefs candidate is not usable; [`Tracefs::find`] lists one per candidate.
#[derive(Debug)]
enum ProbeError {
    NoDirectory,
    MountFailed(io::Error),
    NoEvents,
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
        }
    }
}

/// Whether `dir` is a tracefs with events, mounting tracefs there first when `dir` is the
/// usual mount point and is empty.
fn probe(dir: &Path) -> Result<(), ProbeError> {
    if !dir.is_dir() {
        return Err(ProbeError::NoDirectory);
    }
    if dir == Path::new(TRACEFS) && !dir.join("events").exists() {
        mount_tracefs(dir).map_err(ProbeError::MountFailed)?;
    }
    if !dir.join("events").is_dir() {
        return Err(ProbeError::NoEvents);
    }
    Ok(())
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

/// HEADER_TRACING_DATA as perf's `tracing_data_get` writes it (trace-event-info.c, version
/// 0.6): magic, version, endianness, sizeof(long), page size, header_page, header_event, the
/// formats of the `ftrace` system's events (a section of their own: perf's reader parses
/// them as ftrace's), then the other systems with their events, then empty kallsyms, printk
/// formats and saved cmdlines.
fn tracing_data(header_page: &[u8], header_event: &[u8], tps: &[Tracepoint], page: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&[23, 8, 68]);
    b.extend_from_slice(b"tracing");
    b.extend_from_slice(b"0.6\0");
    b.push(u8::from(cfg!(target_endian = "big")));
    b.push(size_of::<libc::c_long>() as u8);
    b.extend_from_slice(&page.to_ne_bytes());
    for (name, body) in [("header_page", header_page), ("header_event", header_event)] {
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend_from_slice(&(body.len() as u64).to_ne_bytes());
        b.extend_from_slice(body);
    }
    let mut unique: Vec<&Tracepoint> = Vec::new();
    for t in tps {
        if !unique
            .iter()
            .any(|u| u.system == t.system && u.event == t.event)
        {
            unique.push(t);
        }
    }
    let formats = |b: &mut Vec<u8>, of: &[&&Tracepoint]| {
        b.extend_from_slice(&(of.len() as u32).to_ne_bytes());
        for t in of {
            b.extend_from_slice(&(t.format.len() as u64).to_ne_bytes());
            b.extend_from_slice(&t.format);
        }
    };
    let ftrace: Vec<&&Tracepoint> = unique.iter().filter(|t| t.system == "ftrace").collect();
    formats(&mut b, &ftrace);
    let mut systems: Vec<&str> = Vec::new();
    for t in unique.iter().filter(|t| t.system != "ftrace") {
        if !systems.contains(&t.system.as_str()) {
            systems.push(&t.system);
        }
    }
    b.extend_from_slice(&(systems.len() as u32).to_ne_bytes());
    for s in systems {
        b.extend_from_slice(s.as_bytes());
        b.push(0);
        let of: Vec<&&Tracepoint> = unique.iter().filter(|t| t.system == s).collect();
        formats(&mut b, &of);
    }
    b.extend_from_slice(&0u32.to_ne_bytes()); // kallsyms
    b.extend_from_slice(&0u32.to_ne_bytes()); // printk formats
    b.extend_from_slice(&0u64.to_ne_bytes()); // saved cmdlines
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tracefs(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kprof-tracefs-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("events")).unwrap();
        fs::write(dir.join("events/header_page"), "hp").unwrap();
        fs::write(dir.join("events/header_event"), "he").unwrap();
        for (sys, ev, id) in [("sched", "sched_switch", 316), ("ftrace", "print", 5)] {
            let d = dir.join("events").join(sys).join(ev);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("id"), format!("{id}\n")).unwrap();
            fs::write(d.join("format"), format!("name: {ev}\n")).unwrap();
        }
        dir
    }

    /// A directory that is no tracefs is refused, naming it, the kernel options and the mount.
    #[test]
    fn find_tracefs_wrong_dir_named() {
        let dir = std::env::temp_dir().join(format!("kprof-no-tracefs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(matches!(probe(&dir), Err(ProbeError::NoEvents)));
        assert!(matches!(
            probe(&dir.join("missing")),
            Err(ProbeError::NoDirectory)
        ));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// An unknown tracepoint is an error naming it and the directory it was looked for in;
    /// a known one has its id and format; path tricks are unknown tracepoints.
    #[test]
    fn tracepoint_fake_tracefs_lookup() {
        let dir = fake_tracefs("lookup");
        let t = Tracefs { dir: dir.clone() };
        let sw = t.tracepoint("sched", "sched_switch").unwrap();
        assert_eq!((sw.id, sw.name().as_str()), (316, "sched:sched_switch"));
        assert_eq!(sw.format, b"name: sched_switch\n");
        let e = t.tracepoint("mychardrv", "nope").unwrap_err().to_string();
        assert!(e.contains("unknown tracepoint `mychardrv:nope`"), "{e}");
        assert!(
            e.contains(&dir.join("events/mychardrv/nope").display().to_string()),
            "{e}"
        );
        assert!(e.contains("available_events"), "{e}");
        assert!(t.tracepoint("..", "sched").is_err());
        assert!(t.tracepoint("sched", "").is_err());
        fs::write(dir.join("events/sched/sched_switch/id"), "x\n").unwrap();
        let e = t
            .tracepoint("sched", "sched_switch")
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds `x`, not an id"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Tracing data: perf's magic, the ftrace formats in their own section, one system entry
    /// per other system, duplicates once, and the three empty tails.
    #[test]
    fn tracing_data_fake_tracefs_layout() {
        let dir = fake_tracefs("layout");
        let t = Tracefs { dir: dir.clone() };
        let sw = t.tracepoint("sched", "sched_switch").unwrap();
        let pr = t.tracepoint("ftrace", "print").unwrap();
        let d = t.tracing_data(&[sw.clone(), pr, sw]).unwrap();
        assert_eq!(&d[..10], b"\x17\x08\x44tracing");
        assert_eq!(&d[10..14], b"0.6\0");
        let after_headers = 14 + 2 + 4 + (12 + 8 + 2) + (13 + 8 + 2);
        let mut want = Vec::new();
        want.extend_from_slice(&1u32.to_ne_bytes());
        want.extend_from_slice(&12u64.to_ne_bytes());
        want.extend_from_slice(b"name: print\n");
        want.extend_from_slice(&1u32.to_ne_bytes());
        want.extend_from_slice(b"sched\0");
        want.extend_from_slice(&1u32.to_ne_bytes());
        want.extend_from_slice(&19u64.to_ne_bytes());
        want.extend_from_slice(b"name: sched_switch\n");
        want.extend_from_slice(&[0; 16]);
        assert_eq!(&d[after_headers..], &want[..]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
