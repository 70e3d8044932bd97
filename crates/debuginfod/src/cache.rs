//! elfutils' debuginfod client cache, laid out as `debuginfod-client.c` (0.188, Debian 12's)
//! lays it out, so gdb, perf, `debuginfod-find` and kprof share downloads and misses:
//!
//! - `CACHE/BUILDID/` (mode 0700) holds `debuginfo`, `executable` and
//!   `source##ESCAPED##PATH` (0.188's escape: `/` → `##`, `#` → `#_`); later elfutils
//!   (PR32218) names sources `source-HASH-ESCAPED`: lookups accept both, and a downloaded
//!   source gets both names (a hard link).
//! - A download goes to `TARGET.XXXXXX` in the same directory, gets the server's
//!   `Last-Modified` as mtime and mode 0400, then is renamed onto `TARGET`.
//! - A miss on every server is an empty `TARGET` (mode 0666 less umask): until its mtime is
//!   older than `cache_miss_s` seconds (default 600), nobody asks the servers again.
//! - `cache_miss_s`, `cache_clean_interval_s` (86400) and `max_unused_age_s` (604800) are
//!   created with those defaults when absent; module `clean` removes unused entries as
//!   elfutils does, and a hit here updates the file's atime so that cleaning (elfutils' or
//!   kprof's) sees what kprof uses.

use std::fs::{self, DirBuilder, File, FileTimes, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tempfile::NamedTempFile;

use crate::Artifact;

const CACHE_MISS_FILE: &str = "cache_miss_s";
const CACHE_MISS_DEFAULT_S: i64 = 600;
pub(crate) const CLEAN_INTERVAL_FILE: &str = "cache_clean_interval_s";
pub(crate) const CLEAN_INTERVAL_DEFAULT_S: i64 = 86400;
pub(crate) const MAX_UNUSED_AGE_FILE: &str = "max_unused_age_s";
pub(crate) const MAX_UNUSED_AGE_DEFAULT_S: i64 = 604800;

/// The client cache directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    root: PathBuf,
}

/// What the cache says about one file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A downloaded file.
    Hit(PathBuf),
    /// A miss recorded less than `cache_miss_s` ago: do not ask the servers.
    Negative,
    /// Nothing (or an expired miss).
    Miss,
}

impl Cache {
    /// The cache at `root`, created (0700) with its three settings files when absent.
    pub(crate) fn open(root: &Path) -> io::Result<Cache> {
        DirBuilder::new().recursive(true).mode(0o700).create(root)?;
        let cache = Cache {
            root: root.to_path_buf(),
        };
        for (name, default) in [
            (CLEAN_INTERVAL_FILE, CLEAN_INTERVAL_DEFAULT_S),
            (CACHE_MISS_FILE, CACHE_MISS_DEFAULT_S),
            (MAX_UNUSED_AGE_FILE, MAX_UNUSED_AGE_DEFAULT_S),
        ] {
            setting(&root.join(name), default)?;
        }
        Ok(cache)
    }

    /// The cache directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Where elfutils 0.188 keeps `artifact` of `build_id` (a validated build-id).
    pub(crate) fn target(&self, build_id: &str, artifact: Artifact<'_>) -> PathBuf {
        self.root.join(build_id).join(file_name(artifact))
    }

    /// The file names an elfutils client may have used for `artifact`, preferred first.
    fn candidates(&self, build_id: &str, artifact: Artifact<'_>) -> Vec<PathBuf> {
        let mut paths = vec![self.target(build_id, artifact)];
        if let Artifact::Source(path) = artifact {
            paths.push(self.hashed_source(build_id, path));
        }
        paths
    }

    /// Where elfutils since PR32218 keeps source `path` of `build_id`.
    fn hashed_source(&self, build_id: &str, path: &str) -> PathBuf {
        self.root
            .join(build_id)
            .join(format!("source-{}", hashed_escape(path)))
    }

    /// What the cache holds for `artifact` of `build_id`. An empty file younger than
    /// `cache_miss_s` is a recorded miss; an older one counts as nothing.
    pub(crate) fn lookup(&self, build_id: &str, artifact: Artifact<'_>) -> io::Result<Lookup> {
        let mut negative = false;
        for path in self.candidates(build_id, artifact) {
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                // elfutils before 0.184 marked misses with mode 000 files; they are stale.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => continue,
                Err(e) => return Err(e),
            };
            let meta = file.metadata()?;
            if meta.len() > 0 {
                // Best effort, as elfutils' update_atime: cleaning goes by atime.
                let _ = file.set_times(FileTimes::new().set_accessed(SystemTime::now()));
                return Ok(Lookup::Hit(path));
            }
            let age = meta.modified()?.elapsed().unwrap_or(Duration::ZERO);
            negative |= age.as_secs() <= self.cache_miss_s()?;
        }
        Ok(if negative {
            Lookup::Negative
        } else {
            Lookup::Miss
        })
    }

    /// `cache_miss_s`, created with elfutils' default when absent.
    fn cache_miss_s(&self) -> io::Result<u64> {
        let value = setting(&self.root.join(CACHE_MISS_FILE), CACHE_MISS_DEFAULT_S)?;
        Ok(value.max(0) as u64)
    }

    /// Removes what stands at `artifact`'s cache path before a download: an expired miss or an
    /// unreadable file (elfutils does the same before it asks the servers).
    pub(crate) fn clear_stale(&self, build_id: &str, artifact: Artifact<'_>) {
        let path = self.target(build_id, artifact);
        let stale = match File::open(&path) {
            Ok(file) => file.metadata().map(|m| m.len() == 0).unwrap_or(false),
            Err(e) => e.kind() == io::ErrorKind::PermissionDenied,
        };
        if stale {
            let _ = fs::remove_file(&path);
        }
    }

    /// Records that no server has `artifact` of `build_id`: an empty file, created only if
    /// nothing is there (another client may have just placed the real file).
    pub(crate) fn record_miss(&self, build_id: &str, artifact: Artifact<'_>) -> io::Result<()> {
        self.make_entry_dir(build_id)?;
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(self.target(build_id, artifact));
        match created {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }

    /// A new temporary file next to `artifact`'s cache path (`TARGET.XXXXXX`, mode 0600), so
    /// that the final rename is atomic and other clients never see a partial file.
    pub(crate) fn temp_file(
        &self,
        build_id: &str,
        artifact: Artifact<'_>,
    ) -> io::Result<NamedTempFile> {
        let dir = self.make_entry_dir(build_id)?;
        tempfile::Builder::new()
            .prefix(&format!("{}.", file_name(artifact)))
            .rand_bytes(6)
            .tempfile_in(dir)
    }

    /// Moves a complete download onto its cache path: mtime `mtime` (the server's
    /// `Last-Modified`, else now), mode 0400, then rename.
    pub(crate) fn place(
        &self,
        temp: NamedTempFile,
        build_id: &str,
        artifact: Artifact<'_>,
        mtime: Option<SystemTime>,
    ) -> io::Result<PathBuf> {
        let target = self.target(build_id, artifact);
        let when = mtime.unwrap_or_else(SystemTime::now);
        let file = temp.as_file();
        file.sync_all()?;
        let _ = file.set_times(FileTimes::new().set_accessed(when).set_modified(when));
        file.set_permissions(fs::Permissions::from_mode(0o400))?;
        temp.persist(&target).map_err(|e| e.error)?;
        if let Artifact::Source(path) = artifact {
            // Later elfutils looks for sources only under its hashed name: a second link
            // shares the download with it (best effort: the 0.188 name is the one kept).
            let _ = fs::hard_link(&target, self.hashed_source(build_id, path));
        }
        Ok(target)
    }

    fn make_entry_dir(&self, build_id: &str) -> io::Result<PathBuf> {
        let dir = self.root.join(build_id);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(dir),
        }
    }
}

/// The file name of `artifact` in its build-id directory, as elfutils 0.188 names it.
pub(crate) fn file_name(artifact: Artifact<'_>) -> String {
    match artifact {
        Artifact::Source(path) => format!("source{}", escape_0188(path)),
        other => other.kind().to_string(),
    }
}

/// elfutils 0.188's `path_escape`: `/` → `##`, `#` → `#_` (reversible, no directory escape).
fn escape_0188(path: &str) -> String {
    let mut out = String::with_capacity(path.len() * 2);
    for c in path.chars() {
        match c {
            '/' => out.push_str("##"),
            '#' => out.push_str("#_"),
            c => out.push(c),
        }
    }
    out
}

/// Later elfutils' `path_escape` (PR32218): djb2 hash of the path as 8 hex digits, `-`, then
/// the path's tail with every byte but `[A-Za-z0-9._-]` as `#`, the whole at most 126 bytes.
fn hashed_escape(path: &str) -> String {
    const NAME_MAX: usize = 255;
    let bytes = path.as_bytes();
    let total = (NAME_MAX / 2).min(bytes.len() + 10) - 1;
    let tail_len = total.saturating_sub(9).min(bytes.len());
    let tail: String = bytes[bytes.len() - tail_len..]
        .iter()
        .map(|&b| match b {
            b'.' | b'-' | b'_' | b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => b as char,
            _ => '#',
        })
        .collect();
    // C's `char` is signed on the hosts elfutils runs on: bytes ≥ 0x80 add negative values.
    let hash = bytes.iter().fold(5381u64, |h, &b| {
        h.wrapping_mul(33).wrapping_add(b as i8 as i64 as u64)
    });
    format!("{:08x}-{tail}", hash as u32)
}

/// One of elfutils' settings files: its number, or `default` written into it when it is
/// empty or new (`debuginfod_config_cache`). Text that is not a number reads as `default`.
pub(crate) fn setting(path: &Path, default: i64) -> io::Result<i64> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(path)?;
    let mut text = String::new();
    if file.read_to_string(&mut text).is_err() || text.is_empty() {
        if text.is_empty() {
            write!(file, "{default}")?;
        }
        return Ok(default);
    }
    Ok(leading_number(&text).unwrap_or(default))
}

/// `fscanf("%ld")`: optional white space and sign, then digits.
fn leading_number(text: &str) -> Option<i64> {
    let text = text.trim_start();
    let sign_len = usize::from(text.starts_with(['+', '-']));
    let digits = text[sign_len..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len() - sign_len);
    text[..sign_len + digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source names escape as 0.188 does, and as later elfutils does.
    #[test]
    fn file_name_source_escaped_as_elfutils() {
        assert_eq!(
            file_name(Artifact::Source("/usr/src/a#b/m.c")),
            "source##usr##src##a#_b##m.c"
        );
        assert_eq!(file_name(Artifact::Debuginfo), "debuginfo");
        // djb2("/a/b.c") computed by hand: 5381*33+'/' ... truncated to 32 bits.
        let h = "/a/b.c"
            .bytes()
            .fold(5381u32, |h, b| h.wrapping_mul(33).wrapping_add(b as u32));
        assert_eq!(hashed_escape("/a/b.c"), format!("{h:08x}-#a#b.c"));
        let long = format!("/{}", "d/".repeat(100)) + "x.c";
        let name = hashed_escape(&long);
        assert_eq!(name.len(), 126);
        assert!(name.ends_with("#d#x.c"), "{name}");
    }

    /// Settings files get elfutils' defaults and are read back as numbers.
    #[test]
    fn open_settings_defaults_written() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(&dir.path().join("c")).unwrap();
        let read = |n: &str| fs::read_to_string(cache.root().join(n)).unwrap();
        assert_eq!(read("cache_miss_s"), "600");
        assert_eq!(read("cache_clean_interval_s"), "86400");
        assert_eq!(read("max_unused_age_s"), "604800");
        fs::write(cache.root().join("cache_miss_s"), " 42\n").unwrap();
        assert_eq!(cache.cache_miss_s().unwrap(), 42);
        fs::write(cache.root().join("cache_miss_s"), "soon").unwrap();
        assert_eq!(cache.cache_miss_s().unwrap(), 600);
        let mode = fs::metadata(cache.root()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    /// A recorded miss is negative until cache_miss_s has passed, then nothing.
    #[test]
    fn lookup_negative_entry_expires() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let id = "abcd";
        assert_eq!(cache.lookup(id, Artifact::Debuginfo).unwrap(), Lookup::Miss);
        cache.record_miss(id, Artifact::Debuginfo).unwrap();
        assert_eq!(
            cache.lookup(id, Artifact::Debuginfo).unwrap(),
            Lookup::Negative
        );
        let old = SystemTime::now() - Duration::from_secs(601);
        File::options()
            .write(true)
            .open(cache.target(id, Artifact::Debuginfo))
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(cache.lookup(id, Artifact::Debuginfo).unwrap(), Lookup::Miss);
    }

    /// A placed file is 0400 with the given mtime, and found by lookup; no temp file remains.
    #[test]
    fn place_file_mode_mtime_rename() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let mut temp = cache.temp_file("abcd", Artifact::Executable).unwrap();
        temp.write_all(b"\x7fELF").unwrap();
        let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        let path = cache
            .place(temp, "abcd", Artifact::Executable, Some(mtime))
            .unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o400);
        assert_eq!(meta.modified().unwrap(), mtime);
        assert_eq!(
            cache.lookup("abcd", Artifact::Executable).unwrap(),
            Lookup::Hit(path)
        );
        let names: Vec<_> = fs::read_dir(dir.path().join("abcd")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    /// A placed source has 0.188's name and later elfutils' hashed name, one file.
    #[test]
    fn place_source_both_elfutils_names() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let source = Artifact::Source("/src/m.c");
        let mut temp = cache.temp_file("abcd", source).unwrap();
        temp.write_all(b"int m;").unwrap();
        let path = cache.place(temp, "abcd", source, None).unwrap();
        assert_eq!(path, dir.path().join("abcd/source##src##m.c"));
        let hashed = cache.hashed_source("abcd", "/src/m.c");
        assert!(hashed
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with("-#src#m.c"));
        assert_eq!(fs::read(hashed).unwrap(), b"int m;");
    }
}
