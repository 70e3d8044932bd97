//! Files kprofctl writes on the host. Captures and the reports made of them hold the board's
//! kallsyms and kernel addresses: they are created 0600 (the captures directory 0700), as the
//! agent does on the board, whatever the umask; never chmod-ed after the data is in.
//!
//! A file written in a directory kprofctl did not make this run (the project's `.kprof/`, the
//! captures directory, the cache) may have a planted link under its name (git stores
//! symlinks): it is created under a random name with `O_EXCL` (which follows no link) and
//! renamed onto its name, which replaces a link rather than writing through it.

use anyhow::Context as _;
use std::io::Write as _;
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};

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

/// A file being written under a random name next to its final path; [`NewFile::commit`]
/// renames it into place, dropping it unfinished removes it.
pub struct NewFile {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl NewFile {
    /// A new private (0600) file in `path`'s directory, to become `path`.
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        // tempfile creates with O_CREAT|O_EXCL and mode 0600.
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| format!("creating a temporary file for {}", path.display()))?;
        Ok(Self {
            temp,
            path: path.to_path_buf(),
        })
    }

    pub fn file(&mut self) -> &mut std::fs::File {
        self.temp.as_file_mut()
    }

    /// Renames the complete file onto its path (replacing whatever is there, a link too).
    pub fn commit(self) -> anyhow::Result<PathBuf> {
        let path = self.path;
        self.temp
            .persist(&path)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
        Ok(path)
    }
}

/// Writes `bytes` to `path` through a [`NewFile`].
pub fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let mut f = NewFile::create(path)?;
    f.file()
        .write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    f.commit()
}

/// `dir`, a directory kprofctl keeps its own files in (the project's `.kprof/`), made 0700
/// when missing; an existing one must be a real directory (not a link), the user's own, and
/// not writable by others ([`writable_by_others`]), else it is refused naming what is wrong.
pub fn own_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display())),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", dir.display())),
        Ok(m) => {
            let why = if m.file_type().is_symlink() {
                "it is a symbolic link".to_string()
            } else if !m.is_dir() {
                "it is not a directory".to_string()
            } else if m.uid() != effective_uid() {
                format!("it is owned by uid {}, not you", m.uid())
            } else if writable_by_others(&m) {
                format!("it is writable by others (mode {:o})", m.mode() & 0o7777)
            } else {
                return Ok(());
            };
            anyhow::bail!("refusing to use {}: {why}", dir.display())
        }
    }
}

/// Why [`open_regular`] gave no file.
#[derive(Debug)]
pub enum NotOpened {
    /// Opening or reading its metadata failed.
    Io(std::io::Error),
    /// It is no regular file: what it is instead.
    Refused(&'static str),
}

/// `path` opened with `options` plus `O_NOFOLLOW|O_NONBLOCK` (a link planted under its name
/// is not followed, a FIFO not waited on), with its metadata, when it is a regular file.
pub fn open_regular(
    path: &Path,
    options: &mut std::fs::OpenOptions,
) -> Result<(std::fs::File, std::fs::Metadata), NotOpened> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => NotOpened::Refused("it is a symbolic link"),
            _ => NotOpened::Io(e),
        })?;
    let meta = file.metadata().map_err(NotOpened::Io)?;
    if !meta.is_file() {
        return Err(NotOpened::Refused("it is not a regular file"));
    }
    Ok((file, meta))
}

/// `path` opened for appending (a resumable download), created 0600 when missing. An
/// existing one must be a regular file of the user's with one link: a symlink or a hard
/// link planted under its name is refused, never appended to.
pub fn open_append_own(path: &Path) -> anyhow::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true).mode(0o600);
    let (file, m) = match open_regular(path, &mut options) {
        Ok(opened) => opened,
        Err(NotOpened::Refused(why)) => {
            anyhow::bail!("refusing to write {}: {why}", path.display())
        }
        Err(NotOpened::Io(e)) => {
            return Err(anyhow::Error::new(e).context(format!("cannot open {}", path.display())))
        }
    };
    let why = if m.uid() != effective_uid() {
        format!("it is owned by uid {}, not you", m.uid())
    } else if m.nlink() != 1 {
        format!("it has {} hard links", m.nlink())
    } else {
        return Ok(file);
    };
    anyhow::bail!("refusing to write {}: {why}", path.display())
}

/// Whether a user other than the owner can write the file: world-writable, or
/// group-writable for a group that is not the user's own (a user-private group, as with
/// umask 002, is no one else).
pub fn writable_by_others(m: &std::fs::Metadata) -> bool {
    // SAFETY: getegid has no preconditions and cannot fail.
    let own_group = m.gid() == unsafe { libc::getegid() };
    m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && !own_group)
}

/// The user kprofctl runs as.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn victim(dir: &Path) -> PathBuf {
        let v = dir.join("victim");
        std::fs::write(&v, "precious").unwrap();
        v
    }

    /// A download's `.part` that is a symlink or a hard link to another file is refused,
    /// never appended to; a real one is appended to.
    #[test]
    fn open_append_own_planted_links_refused() {
        let dir = tempfile::tempdir().unwrap();
        let v = victim(dir.path());
        let part = dir.path().join("c.kprof.tar.gz.part");
        std::os::unix::fs::symlink(&v, &part).unwrap();
        let err = open_append_own(&part).unwrap_err().to_string();
        assert!(err.contains("it is a symbolic link"), "{err}");
        std::fs::remove_file(&part).unwrap();
        std::fs::hard_link(&v, &part).unwrap();
        let err = open_append_own(&part).unwrap_err().to_string();
        assert!(err.contains("it has 2 hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&v).unwrap(), "precious");
        std::fs::remove_file(&part).unwrap();
        open_append_own(&part).unwrap().write_all(b"ab").unwrap();
        open_append_own(&part).unwrap().write_all(b"cd").unwrap();
        assert_eq!(std::fs::read_to_string(&part).unwrap(), "abcd");
    }

    /// A default-named output with a link planted under its name: the link is replaced by
    /// the new file (0600), the file it pointed to is untouched.
    #[test]
    fn write_new_replaces_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let v = victim(dir.path());
        let out = dir.path().join("c.kprof.tar.gz.html");
        std::os::unix::fs::symlink(&v, &out).unwrap();
        write_new(&out, b"<html>").unwrap();
        assert_eq!(std::fs::read_to_string(&v).unwrap(), "precious");
        let m = std::fs::symlink_metadata(&out).unwrap();
        assert!(m.is_file() && m.mode() & 0o777 == 0o600);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "<html>");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "no temporary file left behind");
    }
}
