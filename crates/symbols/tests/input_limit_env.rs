//! `KPROF_MAX_INPUT_SIZE`, in a test binary of its own: the variable is process-wide and
//! other tests open captures with the default limit.

mod common;

use common::perfdata::{self, Sample};
use kprof_symbols::Capture;
use std::io::Write;

/// `KPROF_MAX_INPUT_SIZE` sets the limit; a value that is not a size is an error naming it.
/// (The only test of this binary.)
#[test]
fn open_capture_max_input_size_env_used() {
    let perf = perfdata::write(&[Sample {
        pid: 1,
        tid: 1,
        kernel: false,
        ip: 0x40_1000,
        callers: vec![],
    }]);
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_size(perf.len() as u64);
    h.set_mode(0o600);
    tar.append_data(&mut h, "perf.data", &perf[..]).unwrap();
    let bytes = tar.into_inner().unwrap().finish().unwrap();
    let mut f = tempfile::Builder::new()
        .suffix(".kprof.tar.gz")
        .tempfile()
        .unwrap();
    f.write_all(&bytes).unwrap();
    std::env::set_var("KPROF_MAX_INPUT_SIZE", "1K");
    let small = Capture::open(f.path()).map(|_| ());
    std::env::set_var("KPROF_MAX_INPUT_SIZE", "lots");
    let bad = Capture::open(f.path()).map(|_| ());
    std::env::remove_var("KPROF_MAX_INPUT_SIZE");
    let small = small.unwrap_err().to_string();
    assert!(
        small.contains("the limit is 1 KiB (KPROF_MAX_INPUT_SIZE)"),
        "{small}"
    );
    let bad = bad.unwrap_err().to_string();
    assert!(
        bad.contains("KPROF_MAX_INPUT_SIZE=\"lots\" is not a size"),
        "{bad}"
    );
}
