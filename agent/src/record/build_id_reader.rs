//! Reading the build-ids of the mapped files at seal time within a deadline. A read can block
//! where `O_NONBLOCK` does not help (a file on a hung NFS or FUSE mount), so the reads run in
//! a child process that reports each result on a pipe, and the agent stops waiting at the
//! deadline and kills it. A child and not a thread: the static agent links no thread code
//! (pthread_create brings 140 KB of the C library with it), and a child that is stuck can be
//! killed.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;
use std::time::Instant;

use crate::elf_build_id::{self, Unread};

/// A mapped file and what reading its build-id gave.
pub(super) type BuildIdRead = (String, Result<Option<Vec<u8>>, Unread>);

/// What `Unread::NotRegular` can say, so that the child's words map back to them.
const KINDS: [&str; 12] = [
    "symbolic link",
    "FIFO",
    "device",
    "directory",
    "socket",
    "special file",
    "file of procfs",
    "file of sysfs",
    "file of debugfs",
    "file of tracefs",
    "file of securityfs",
    "file of configfs",
];

/// The build-ids of `names` in order until `deadline`, and the names not reached.
pub(super) fn read(names: Vec<String>, deadline: Instant) -> (Vec<BuildIdRead>, Vec<String>) {
    let read = match in_child(&names, deadline) {
        Some(read) => read,
        None => inline(&names, deadline),
    };
    let left = names[read.len()..].to_vec();
    (read, left)
}

/// Without a child (no pipe or fork): here, checking the deadline between files.
fn inline(names: &[String], deadline: Instant) -> Vec<BuildIdRead> {
    let mut read = Vec::with_capacity(names.len());
    for name in names {
        if Instant::now() >= deadline {
            break;
        }
        read.push((name.clone(), elf_build_id::elf_build_id(Path::new(name))));
    }
    read
}

/// Forks a child that reads every build-id and writes one line per file; `None` when no
/// child could be made.
fn in_child(names: &[String], deadline: Instant) -> Option<Vec<BuildIdRead>> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two-element array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: the two descriptors are new and owned here from now on.
    let (rd, wr) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    // SAFETY: the agent has one thread (it links no thread code), so the child may run
    // anything; it leaves with _exit, running no exit handlers of the parent's.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => None,
        0 => {
            drop(rd);
            child(names, wr);
            // SAFETY: ends the child without unwinding into the parent's code.
            unsafe { libc::_exit(0) }
        }
        _ => {
            drop(wr);
            let read = collect(names, rd, deadline);
            // SAFETY: pid is our child; a finished one is reaped, a stuck one killed (and
            // reaped later by init once the agent is gone).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
            Some(read)
        }
    }
}

/// The child: `INDEX B HEX`, `INDEX N` (no build-id), `INDEX R KIND` (not regular) or
/// `INDEX I` (unreadable), one line per file.
fn child(names: &[String], mut out: File) {
    for (i, name) in names.iter().enumerate() {
        let line = match elf_build_id::elf_build_id(Path::new(name)) {
            Ok(Some(b)) => format!("{i} B {}\n", kprof_capture::build_id::hex(&b)),
            Ok(None) => format!("{i} N\n"),
            Err(Unread::NotRegular(kind)) => format!("{i} R {kind}\n"),
            Err(Unread::Io(_)) => format!("{i} I\n"),
        };
        if out.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
}

/// The child's lines until it is done or `deadline` passes.
fn collect(names: &[String], rd: File, deadline: Instant) -> Vec<BuildIdRead> {
    let fd = rd.as_raw_fd();
    let mut lines = BufReader::new(rd);
    let mut read = Vec::with_capacity(names.len());
    let mut line = String::new();
    while read.len() < names.len() {
        // A line already buffered needs no wait; else wait for more, at most to the deadline.
        if lines.buffer().is_empty() && !readable_before(fd, deadline) {
            break;
        }
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some(result) = parse_line(&line, read.len()) else {
            break;
        };
        read.push((names[read.len()].clone(), result));
    }
    read
}

/// Whether `fd` has data (or its end) before `deadline`.
fn readable_before(fd: i32, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        match n {
            1.. => return true,
            0 => return false,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// One line of the child for file number `index`; `None` when it is not that file's.
fn parse_line(line: &str, index: usize) -> Option<Result<Option<Vec<u8>>, Unread>> {
    let mut f = line.trim_end().splitn(3, ' ');
    if f.next()?.parse::<usize>().ok()? != index {
        return None;
    }
    Some(match (f.next()?, f.next()) {
        ("B", Some(hex)) => Ok(Some(unhex(hex)?)),
        ("N", None) => Ok(None),
        ("R", Some(kind)) => Err(Unread::NotRegular(
            KINDS
                .iter()
                .find(|k| **k == kind)
                .copied()
                .unwrap_or("special file"),
        )),
        ("I", None) => Err(Unread::Io(std::io::Error::other("unreadable"))),
        _ => return None,
    })
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The child's answers come back in order: a build-id, a file without one, a FIFO, a
    /// missing file; every kind `elf_build_id` names is one the parent knows.
    #[test]
    fn read_build_ids_in_child_in_order() {
        let dir = std::env::temp_dir().join(format!("kprof-bidr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let text = dir.join("text");
        std::fs::write(&text, "not ELF").unwrap();
        let exe = std::env::current_exe().unwrap();
        let names: Vec<String> = [&exe, &text, &fifo, &dir.join("gone")]
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let (read, left) = read(names, Instant::now() + Duration::from_secs(30));
        assert!(left.is_empty());
        assert_eq!(read.len(), 4);
        let want = elf_build_id::elf_build_id(&exe).unwrap();
        assert_eq!(read[0].1.as_ref().unwrap(), &want);
        assert!(matches!(read[1].1, Ok(None)));
        assert!(matches!(read[2].1, Err(Unread::NotRegular("FIFO"))));
        assert!(matches!(read[3].1, Err(Unread::Io(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A deadline already past: nothing waited for, every name left.
    #[test]
    fn read_build_ids_deadline_past_leaves_all() {
        let names = vec![std::env::current_exe().unwrap().display().to_string()];
        let (read, left) = read(names.clone(), Instant::now());
        assert!(read.len() <= 1 && read.len() + left.len() == 1, "{left:?}");
    }
}
