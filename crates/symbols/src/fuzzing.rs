//! Entry points for the cargo-fuzz targets in `fuzz/` and the robustness tests: read
//! arbitrary bytes as a bare perf.data or as an archive, with no symbol sources.

use crate::{Capture, Options, Symbolizer};
use std::path::Path;

fn run(bytes: &[u8], name: &str) {
    let Ok(mut s) = Symbolizer::new(Options::default(), &mut |_| {}) else {
        return;
    };
    if let Ok(cap) = Capture::from_bytes(Path::new(name), bytes) {
        let _ = s.symbolize(&cap, &mut |_| {});
    }
}

/// Reads `bytes` as a bare perf.data; errors are fine, panics and aborts are bugs.
pub fn perf_data(bytes: &[u8]) {
    run(bytes, "fuzz.data");
}

/// Reads `bytes` as a kprof archive.
pub fn archive(bytes: &[u8]) {
    run(bytes, "fuzz.kprof.tar.gz");
}
