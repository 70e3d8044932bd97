//! Finding the user's `kprof.toml`, as git finds a repository since CVE-2022-24765: a file
//! found by searching up from the working directory is read only when its owner is the user
//! (or root) and nobody else can write it or swap it, the search never goes above `$HOME`
//! nor onto another file system, and what such a file names never makes kprofctl run a
//! program (bitbake) there. `$KPROF_CONFIG` names a file outright and is trusted as named.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file name searched for.
pub const FILE_NAME: &str = "kprof.toml";

/// A `kprof.toml` larger than this is refused (a real one is a few lines).
const MAX_SIZE: u64 = 1 << 20;

/// How the configuration file was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Named by `$KPROF_CONFIG`: the user chose it.
    Named,
    /// Found by searching up from the working directory: anyone able to write a directory
    /// above may have put it there, so it never makes kprofctl run a program.
    Found,
}

/// A configuration file and its text.
#[derive(Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub text: String,
    pub origin: Origin,
}

/// The user's `kprof.toml`: `$KPROF_CONFIG`, else the nearest trusted one from the working
/// directory up. A file found but not trusted is ignored with a warning naming it and why.
pub fn find() -> anyhow::Result<Option<ConfigFile>> {
    if let Some(p) = std::env::var_os("KPROF_CONFIG") {
        let path = PathBuf::from(p);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("KPROF_CONFIG={}: {e}", path.display()))?;
        return Ok(Some(ConfigFile {
            path,
            text,
            origin: Origin::Named,
        }));
    }
    let Ok(cwd) = std::env::current_dir() else {
        return Ok(None);
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let Some(path) = search(&cwd, home.as_deref()) else {
        return Ok(None);
    };
    match read_trusted(&path, crate::files::effective_uid()) {
        Ok(text) => Ok(Some(ConfigFile {
            path,
            text,
            origin: Origin::Found,
        })),
        Err(why) => {
            crate::term::warning(format_args!(
                "ignoring {}: {why} (a {FILE_NAME} found by search is read only when it is \
                 yours or root's and nobody else can write it; KPROF_CONFIG=FILE names one \
                 outright; docs/security.md)",
                path.display()
            ));
            Ok(None)
        }
    }
}

/// The nearest `kprof.toml` (any kind of file, a symlink included: the trust check decides)
/// in `start` or a directory above it, stopping after `home` and before a directory on
/// another file system than `start`.
pub fn search(start: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let device = std::fs::metadata(start).ok()?.dev();
    let home = home.and_then(|h| std::fs::canonicalize(h).ok());
    let mut dir = std::fs::canonicalize(start).ok()?;
    loop {
        let candidate = dir.join(FILE_NAME);
        if std::fs::symlink_metadata(&candidate).is_ok() {
            return Some(candidate);
        }
        if home.as_deref() == Some(dir.as_path()) || !dir.pop() {
            return None;
        }
        if std::fs::metadata(&dir).map(|m| m.dev()).ok() != Some(device) {
            return None;
        }
    }
}

/// The text of `path` if it is a regular file (not a symlink) owned by `uid` or root, not
/// writable by others ([`crate::files::writable_by_others`]), at most [`MAX_SIZE`], in a directory owned by `uid` or root
/// that others cannot write (or that is sticky, as `/tmp`); else why not.
pub fn read_trusted(path: &Path, uid: u32) -> Result<String, String> {
    let trusted_owner = |owner: u32| owner == uid || owner == 0;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let d = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !trusted_owner(d.uid()) {
        return Err(format!(
            "its directory is owned by uid {}, not you",
            d.uid()
        ));
    }
    if crate::files::writable_by_others(&d) && d.mode() & 0o1000 == 0 {
        return Err(format!(
            "its directory is writable by others (mode {:o})",
            d.mode() & 0o7777
        ));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let (mut file, m) = crate::files::open_regular(path, &mut options).map_err(|e| match e {
        crate::files::NotOpened::Refused(why) => why.to_string(),
        crate::files::NotOpened::Io(e) => e.to_string(),
    })?;
    if !trusted_owner(m.uid()) {
        return Err(format!("it is owned by uid {}, not you", m.uid()));
    }
    if crate::files::writable_by_others(&m) {
        return Err(format!(
            "it is writable by others (mode {:o})",
            m.mode() & 0o7777
        ));
    }
    if m.len() > MAX_SIZE {
        return Err(format!("it is {} bytes, over {MAX_SIZE}", m.len()));
    }
    read_capped(&mut file)
}

fn read_capped(file: &mut File) -> Result<String, String> {
    let mut text = String::new();
    file.take(MAX_SIZE)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let deep = top.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        (top, deep)
    }

    #[test]
    fn search_finds_nearest_above() {
        let (top, deep) = tree();
        std::fs::write(top.path().join(FILE_NAME), "").unwrap();
        std::fs::write(top.path().join("a").join(FILE_NAME), "").unwrap();
        let found = search(&deep, None).unwrap();
        assert_eq!(
            found,
            top.path().join("a").join(FILE_NAME).canonicalize().unwrap()
        );
    }

    #[test]
    fn search_stops_at_home() {
        let (top, deep) = tree();
        std::fs::write(top.path().join(FILE_NAME), "").unwrap();
        assert_eq!(search(&deep, Some(&top.path().join("a"))), None);
        assert!(search(&deep, Some(top.path())).is_some());
    }

    #[test]
    fn read_trusted_refusals_named() {
        let (top, _) = tree();
        let file = top.path().join(FILE_NAME);
        std::fs::write(&file, "[symbols]\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let me = crate::files::effective_uid();
        assert_eq!(read_trusted(&file, me).unwrap(), "[symbols]\n");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = read_trusted(&file, me).unwrap_err();
        assert!(err.contains("writable by others (mode 666)"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        if me != 0 {
            return; // the rest needs files owned by another user
        }
        // root reads only its own: as uid 1234, the file (root's) is fine, but a file of
        // uid 1234 read by root is not.
        std::os::unix::fs::chown(&file, Some(1234), None).unwrap();
        let err = read_trusted(&file, 0).unwrap_err();
        assert!(err.contains("owned by uid 1234, not you"), "{err}");
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &file).unwrap();
        let err = read_trusted(&file, 0).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
