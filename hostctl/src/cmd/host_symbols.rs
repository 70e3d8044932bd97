//! This host's places for symbols, which the symbolizer library does not look into on its
//! own: the build-id index store, perf's `~/.debug` cache, `/usr/lib/debug`, and the
//! running kernel (`/sys/kernel/notes`, `/proc/kallsyms`).

use std::path::{Path, PathBuf};

/// The build-id index store: `$KPROF_CACHE_DIR/buildid-index.json`, else
/// `${XDG_CACHE_HOME:-~/.cache}/kprof/buildid-index.json`.
pub fn index_store() -> Option<PathBuf> {
    Some(cache_dir()?.join("buildid-index.json"))
}

/// kprofctl's cache: `$KPROF_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/kprof`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KPROF_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kprof"))
}

/// Symbolizer options that look into this host: `~/.debug`, `/usr/lib/debug`, the paths
/// images had on the target, and the running kernel.
pub fn options(symbol_paths: Vec<PathBuf>) -> kprof_symbols::Options {
    kprof_symbols::Options {
        symbol_paths,
        index_store: index_store(),
        perf_cache: std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")),
        debug_roots: vec![PathBuf::from("/usr/lib/debug")],
        host_files: true,
        host_kernel: Some(kprof_symbols::HostKernel {
            build_id: running_kernel_build_id(Path::new("/sys/kernel/notes")),
            kallsyms: Some(PathBuf::from("/proc/kallsyms")),
            vmlinux_dir: Some(PathBuf::from("/usr/lib/debug/boot")),
            nodename: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty()),
        }),
        source_prefix: Vec::new(),
        foreign_roots: Vec::new(),
        providers: Vec::new(),
        skip_sample_records: false,
    }
}

/// GNU build-id of the running kernel, from its notes (`/sys/kernel/notes`, in this host's
/// byte order).
fn running_kernel_build_id(notes: &Path) -> Option<String> {
    let notes = std::fs::read(notes).ok()?;
    let id = kprof_capture::build_id::in_notes(&notes, cfg!(target_endian = "big"), 4)?;
    Some(kprof_capture::build_id::hex(id))
}
