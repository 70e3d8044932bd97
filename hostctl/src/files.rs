//! Files kprofctl writes on the host. Captures and the reports made of them hold the board's
//! kallsyms and kernel addresses: they are created 0600 (the captures directory 0700), as the
//! agent does on the board, whatever the umask; never chmod-ed after the data is in.

use anyhow::Context as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

/// Creates (or truncates) `path` for writing, mode 0600 when it is created. An existing file
/// keeps its mode, as with a shell's `>`: the user chose it.
pub fn create_private(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Makes the local captures directory `dir` (and missing parents) mode 0700. An existing one
/// that others can read or enter is left as it is with a warning: it may be shared on
/// purpose, and the captures in it are 0600 anyway; only their names show.
pub fn captures_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                crate::term::warning(format_args!(
                    "{} is mode {mode:03o}: other users can list the captures in it (the \
                     files themselves are 0600); `chmod 700 {}` keeps their names private too",
                    dir.display(),
                    dir.display()
                ));
            }
            Ok(())
        }
        _ => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display())),
    }
}
