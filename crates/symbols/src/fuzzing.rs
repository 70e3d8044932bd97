//! Entry points for the cargo-fuzz targets in `fuzz/` and the robustness tests: read
//! arbitrary bytes as a bare perf.data or as an archive, with no symbol sources.

use crate::{Capture, Options, Symbolizer};
use std::io::Write;

fn run(bytes: &[u8], suffix: &str) {
    let Ok(mut f) = tempfile::Builder::new().suffix(suffix).tempfile() else {
        return;
    };
    if f.write_all(bytes).is_err() {
        return;
    }
    let opts = Options {
        symbol_paths: Vec::new(),
        index_store: None,
        system_paths: false,
        host_files: false,
        source_prefix: Vec::new(),
    };
    let Ok(mut s) = Symbolizer::new(opts, &mut |_| {}) else {
        return;
    };
    if let Ok(cap) = Capture::open(f.path()) {
        let _ = s.symbolize(&cap, &mut |_| {});
    }
}

/// Reads `bytes` as a bare perf.data; errors are fine, panics and aborts are bugs.
pub fn perf_data(bytes: &[u8]) {
    run(bytes, ".data");
}

/// Reads `bytes` as a kprof archive.
pub fn archive(bytes: &[u8]) {
    run(bytes, ".kprof.tar.gz");
}
