//! Reading a source file that debug info names. The name comes from a symbol file, which may
//! come from anyone (a perf archive in a bug report, a debuginfod server): it may name a FIFO
//! (a plain read blocks for ever), a device (`/dev/zero`: memory without bound) or a file of
//! the user's that must not end up in a shared report. Only a regular file is read, without
//! blocking, and only up to [`MAX_SOURCE_SIZE`].

use crate::provider::Unavailable;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

/// The largest source file read (the biggest generated C files, SQLite's amalgamation among
/// them, are under 10 MiB).
pub const MAX_SOURCE_SIZE: u64 = 16 << 20;

/// `path` opened for reading, with its metadata, when it is a regular file: opened without
/// blocking (`O_NONBLOCK`, a FIFO answers at once) and without becoming a controlling
/// terminal, then checked with `fstat`. Symbol files are opened this way too.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta))
}

/// The text of the regular file `path`; the error says why not.
pub fn read(path: &Path) -> Result<String, Unavailable> {
    let (mut file, meta) = open_regular(path).map_err(|e| Unavailable(e.to_string()))?;
    if meta.len() > MAX_SOURCE_SIZE {
        return Err(Unavailable(format!(
            "{} bytes, over the {MAX_SOURCE_SIZE}-byte limit for a source file",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_SOURCE_SIZE)
        .read_to_end(&mut bytes)
        .map_err(|e| Unavailable(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Whether `path` lies below one of `roots`, with no `..` that could climb out of it.
pub fn is_below(path: &Path, roots: &[&Path]) -> bool {
    let plain = path
        .components()
        .all(|c| !matches!(c, Component::ParentDir));
    plain && roots.iter().any(|r| path.starts_with(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO and a device are refused at once (a plain read of the FIFO blocked for ever,
    /// one of `/dev/zero` grew without bound); a regular file is read.
    #[test]
    fn read_source_fifo_and_device_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.c");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read(&fifo).unwrap_err().0, "not a regular file");
        assert_eq!(
            read(Path::new("/dev/zero")).unwrap_err().0,
            "not a regular file"
        );
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x;\n").unwrap();
        assert_eq!(read(&src).unwrap(), "int x;\n");
    }

    #[test]
    fn is_below_refuses_parent_components() {
        let root = Path::new("/cache/a");
        assert!(is_below(Path::new("/cache/a/src/x.c"), &[root]));
        assert!(!is_below(Path::new("/cache/a/../../etc/passwd"), &[root]));
        assert!(!is_below(Path::new("/home/u/.ssh/id_ed25519"), &[root]));
    }
}
