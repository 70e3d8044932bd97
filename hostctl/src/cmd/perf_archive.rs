//! `perf archive` tarballs given to `--symbols`: unpacked by `kprof_symbols::perf_archive`
//! into kprofctl's cache.

use std::path::{Path, PathBuf};

pub use kprof_symbols::perf_archive::is_perf_archive;

/// Unpacks `archive` below `cache` (once per version of the file) and returns the directory.
pub fn unpack(archive: &Path, cache: &Path) -> anyhow::Result<PathBuf> {
    kprof_symbols::perf_archive::unpack(archive, cache)
        .map_err(|e| anyhow::anyhow!("--symbols {e}"))
}
