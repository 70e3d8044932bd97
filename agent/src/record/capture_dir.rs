//! The capture dir (created 0700) and the hidden work dir inside it where a capture is
//! assembled before it becomes `ID.kprof.tar.gz`.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// `DIR/.ID.partial`: removed on drop unless [`WorkDir::keep`] says a failure must leave
/// what was captured for the user.
pub(super) struct WorkDir {
    /// The canonical capture dir the archive goes to.
    pub(super) out_dir: PathBuf,
    /// The work dir itself.
    pub(super) path: PathBuf,
    /// Whether drop leaves the work dir in place.
    pub(super) keep: bool,
}

impl WorkDir {
    /// Creates the capture dir if needed and the work dir inside it; creating the work dir
    /// proves the capture dir writable before sampling starts.
    pub(super) fn create(out_dir: &Path, id: &str) -> Result<WorkDir, Error> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(out_dir)
            .map_err(|e| {
                Error::io(
                    format!("cannot create capture dir {}", out_dir.display()),
                    e,
                )
            })?;
        let out_dir = fs::canonicalize(out_dir)
            .map_err(|e| Error::io(format!("cannot use capture dir {}", out_dir.display()), e))?;
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
        })
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
