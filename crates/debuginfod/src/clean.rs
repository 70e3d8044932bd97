//! elfutils' cache cleaning (`debuginfod_clean_cache`): at most once per
//! `cache_clean_interval_s` (the mtime of that file says when it last ran), delete the
//! entries nobody used (atime) for `max_unused_age_s`, and the build-id directories left empty
//! that long. Best effort, as in elfutils: a file another client removes first is no error.

use std::fs::{self, File, FileTimes};
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::cache::{
    setting, CLEAN_INTERVAL_DEFAULT_S, CLEAN_INTERVAL_FILE, MAX_UNUSED_AGE_DEFAULT_S,
    MAX_UNUSED_AGE_FILE,
};

/// Cleans the cache at `root` when the interval has passed; `Ok(true)` when it did.
pub(crate) fn clean_if_due(root: &Path) -> io::Result<bool> {
    let interval_path = root.join(CLEAN_INTERVAL_FILE);
    let interval = seconds(setting(&interval_path, CLEAN_INTERVAL_DEFAULT_S)?);
    let last = fs::metadata(&interval_path)?.modified()?;
    if age(last) < interval {
        return Ok(false);
    }
    // Touched first, as elfutils does, so that concurrent clients do not all clean.
    File::options()
        .write(true)
        .open(&interval_path)?
        .set_times(FileTimes::new().set_modified(SystemTime::now()))?;
    let max_unused = seconds(setting(
        &root.join(MAX_UNUSED_AGE_FILE),
        MAX_UNUSED_AGE_DEFAULT_S,
    )?);
    for entry in fs::read_dir(root)?.flatten() {
        let name = entry.file_name();
        let is_build_id = name.to_str().is_some_and(|n| {
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        });
        if is_build_id && entry.file_type().is_ok_and(|t| t.is_dir()) {
            clean_entry(&entry.path(), max_unused);
        }
    }
    Ok(true)
}

/// The files of one build-id directory that elfutils' pattern names (`debuginfo`,
/// `executable`, `source*`), unused for `max_unused`; then the directory if it is empty
/// and as old.
fn clean_entry(dir: &Path, max_unused: Duration) {
    // The directory's age before its files go (removing them makes it new), as fts
    // reports it to elfutils.
    let old = fs::metadata(dir)
        .and_then(|m| m.modified())
        .is_ok_and(|mtime| age(mtime) >= max_unused);
    let Ok(files) = fs::read_dir(dir) else { return };
    for file in files.flatten() {
        let name = file.file_name();
        let ours = name
            .to_str()
            .is_some_and(|n| n == "debuginfo" || n == "executable" || n.starts_with("source"));
        let unused = file
            .metadata()
            .and_then(|m| m.accessed())
            .is_ok_and(|atime| age(atime) >= max_unused);
        if ours && unused {
            let _ = fs::remove_file(file.path());
        }
    }
    if old {
        let _ = fs::remove_dir(dir); // fails, as it should, when not empty
    }
}

fn seconds(value: i64) -> Duration {
    Duration::from_secs(value.max(0) as u64)
}

fn age(when: SystemTime) -> Duration {
    when.elapsed().unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;

    fn set_times(path: &Path, when: SystemTime) {
        File::open(path)
            .unwrap()
            .set_times(FileTimes::new().set_accessed(when).set_modified(when))
            .unwrap();
    }

    /// Not before the interval; then files unused for max_unused_age_s go, used ones stay,
    /// an old empty build-id directory goes, and the interval file is touched.
    #[test]
    fn clean_if_due_unused_entries_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        Cache::open(root).unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(700_000);
        for (id, file) in [
            ("aa", "debuginfo"),
            ("bb", "debuginfo"),
            ("bb", "source##a.c"),
        ] {
            fs::create_dir_all(root.join(id)).unwrap();
            fs::write(root.join(id).join(file), "x").unwrap();
        }
        fs::write(root.join("bb/keep.txt"), "x").unwrap();
        set_times(&root.join("aa/debuginfo"), long_ago);
        set_times(&root.join("bb/source##a.c"), long_ago);
        set_times(&root.join("bb/keep.txt"), long_ago);
        assert!(!clean_if_due(root).unwrap(), "cleaned before the interval");

        set_times(&root.join(CLEAN_INTERVAL_FILE), long_ago);
        set_times(&root.join("aa"), long_ago);
        assert!(clean_if_due(root).unwrap());
        assert!(!root.join("aa").exists());
        assert!(root.join("bb/debuginfo").exists());
        assert!(!root.join("bb/source##a.c").exists());
        assert!(
            root.join("bb/keep.txt").exists(),
            "not elfutils' file: kept"
        );
        assert!(!clean_if_due(root).unwrap(), "interval file not touched");
    }
}
