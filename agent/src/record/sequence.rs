//! The capture directory's sequence counter: a number that grows with every capture, across
//! reboots, where the clock may not (boards without an RTC start every boot at 1970-01-01).
//! Kept in `DIR/.kprof-seq` (decimal, 0600), taken under `flock` so that two agents recording
//! into one directory get different numbers.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use kprof_capture::manifest::Sequence;
use kprof_capture::ARCHIVE_SUFFIX;

use crate::Error;

/// The counter file in the capture directory.
pub(super) const COUNTER: &str = ".kprof-seq";

/// Takes the next number of `dir` (canonical, trusted) and records the boot it is taken in.
/// The number is one more than both the counter and every number in the directory's capture
/// ids, so a deleted or damaged counter file never makes a number come back while the
/// captures that had it are there.
pub(super) fn next(dir: &Path) -> Result<Sequence, Error> {
    let path = dir.join(COUNTER);
    let what = || format!("cannot update the capture counter {}", path.display());
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| Error::io(what(), e))?;
    // SAFETY: flock on a descriptor we own; the lock goes with it when `f` is dropped.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(what(), std::io::Error::last_os_error()));
    }
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(|e| Error::io(what(), e))?;
    let stored = text.trim().parse::<u64>().unwrap_or(0);
    let number = stored.max(highest_in(dir)).saturating_add(1);
    f.rewind()
        .and_then(|()| f.set_len(0))
        .and_then(|()| f.write_all(format!("{number}\n").as_bytes()))
        .map_err(|e| Error::io(what(), e))?;
    Ok(Sequence {
        number,
        boot_id: boot_id(),
        since_boot_ns: since_boot_ns(),
    })
}

/// The highest sequence number in the ids of `dir`'s archives and unfinished work dirs.
fn highest_in(dir: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name
                .strip_suffix(ARCHIVE_SUFFIX)
                .map(str::to_owned)
                .or_else(|| {
                    name.strip_prefix('.')?
                        .strip_suffix(".partial")
                        .map(str::to_owned)
                })?;
            kprof_capture::listing::sequence(&id)
        })
        .max()
        .unwrap_or(0)
}

/// This boot's random id, as `journalctl --list-boots` shows it.
fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// `CLOCK_BOOTTIME` in nanoseconds.
fn since_boot_ns() -> Option<u64> {
    // SAFETY: timespec is plain data, filled by clock_gettime below.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers grow by one per capture; a lost counter resumes above the ids still there.
    #[test]
    fn next_sequence_counter_lost_resumes_above_ids() {
        let d = &std::env::temp_dir().join(format!("kprof-seq-{}", std::process::id()));
        let _ = fs::remove_dir_all(d);
        fs::create_dir(d).unwrap();
        assert_eq!(next(d).unwrap().number, 1);
        assert_eq!(next(d).unwrap().number, 2);
        fs::write(d.join("19700101-000001-0041-abcd.kprof.tar.gz"), "").unwrap();
        fs::create_dir(d.join(".19700101-000002-0042-abcd.partial")).unwrap();
        fs::remove_file(d.join(COUNTER)).unwrap();
        let s = next(d).unwrap();
        assert_eq!(s.number, 43);
        assert!(s.since_boot_ns.is_some_and(|n| n > 0));
        assert_eq!(s.boot_id.map(|b| b.len()), Some(36));
        fs::write(d.join(COUNTER), "garbage").unwrap();
        assert_eq!(next(d).unwrap().number, 43);
        assert_eq!(fs::read_to_string(d.join(COUNTER)).unwrap(), "43\n");
        fs::remove_dir_all(d).unwrap();
    }
}
