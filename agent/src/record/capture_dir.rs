//! The capture dir (created 0700) and the hidden work dir inside it where a capture is
//! assembled before it becomes `ID.kprof.tar.gz`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::Error;
use kprof_capture::manifest::Sequence;

/// Space set aside in the work dir while sampling and given back when perf.data cannot be
/// written any more: room for the feature sections, the manifest and the archive's own
/// overhead on a full disk.
const RESERVE: u64 = 1 << 20;
const RESERVE_NAME: &str = ".reserve";

/// `DIR/.ID.partial`: removed on drop unless [`WorkDir::keep`] says a failure must leave
/// what was captured for the user.
pub(super) struct WorkDir {
    /// The canonical capture dir the archive goes to.
    pub(super) out_dir: PathBuf,
    /// The work dir itself.
    pub(super) path: PathBuf,
    /// Whether drop leaves the work dir in place.
    pub(super) keep: bool,
    /// The capture id (`ID` of the archive's name).
    pub(super) id: String,
    /// When the id was made, nanoseconds since the Unix epoch.
    pub(super) created_ns: u64,
    /// The capture's number in the capture dir, and its boot.
    pub(super) sequence: Sequence,
}

impl WorkDir {
    /// Creates the capture dir if needed, takes the capture's sequence number and id, and
    /// creates the work dir inside it; creating the work dir proves the capture dir writable
    /// before sampling starts.
    /// Refuses, before anything is written, a capture dir with less than `min_free` bytes
    /// available.
    pub(super) fn create(out_dir: &Path, min_free: u64) -> Result<WorkDir, Error> {
        let out_dir = crate::dir_trust::create_checked(out_dir)?;
        check_free(&out_dir, min_free)?;
        let sequence = super::sequence::next(&out_dir)?;
        let created_ns = crate::timefmt::now_ns();
        let id = crate::timefmt::capture_id(created_ns, sequence.number);
        let path = out_dir.join(format!(".{id}.partial"));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| {
                Error::io(
                    format!("cannot write to capture dir {}", out_dir.display()),
                    e,
                )
            })?;
        Ok(WorkDir {
            out_dir,
            path,
            keep: false,
            id,
            created_ns,
            sequence,
        })
    }

    /// Sets [`RESERVE`] bytes aside in the work dir (real blocks, not a sparse file).
    pub(super) fn reserve(&self) -> Result<(), Error> {
        let path = self.member(RESERVE_NAME);
        let r = (|| {
            let mut f = fs::File::create(&path)?;
            // It allocates without writing (no flash wear); filesystems without it (ubifs,
            // jffs2) get zeros written instead.
            if crate::lfs::fallocate(&f, 0, 0, RESERVE).is_ok() {
                return Ok(());
            }
            let zeros = vec![0u8; 64 * 1024];
            for _ in 0..RESERVE / zeros.len() as u64 {
                f.write_all(&zeros)?;
            }
            f.sync_all()
        })();
        r.map_err(|e| {
            let _ = fs::remove_file(&path);
            Error::io(
                format!(
                    "cannot set {} KiB aside in capture dir {}",
                    RESERVE >> 10,
                    self.out_dir.display()
                ),
                e,
            )
        })
    }

    /// Gives the reserved space back, for sealing.
    pub(super) fn release_reserve(&self) {
        let _ = fs::remove_file(self.member(RESERVE_NAME));
    }

    /// Path of a capture member (`perf.data`, `kallsyms`...) in the work dir.
    pub(super) fn member(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Bytes available to the agent in the filesystem of `dir` (as `df` shows them).
pub(super) fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::lfs::available_bytes(&c)
}

fn check_free(dir: &Path, min_free: u64) -> Result<(), Error> {
    if min_free == 0 {
        return Ok(());
    }
    let free = free_bytes(dir).map_err(|e| {
        Error::io(
            format!("cannot read the free space of {}", dir.display()),
            e,
        )
    })?;
    if free < min_free {
        return Err(Error::Other(format!(
            "capture dir {} has {} free ({free} bytes), below the {} floor: free some space, \
             choose another dir with -o, or lower the floor with --min-free",
            dir.display(),
            crate::cli::human_bytes(free),
            crate::cli::human_bytes(min_free),
        )));
    }
    Ok(())
}
