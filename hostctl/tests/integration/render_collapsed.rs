//! `kprofctl report --format collapsed` on a real capture, against `perf report`.

use crate::render_support::{capture, perf_sample_count, report};

/// Every sample perf counts is in exactly one line; lines are `comm;root;...;leaf count`
/// with kernel frames marked `_[k]` under the user frames that made the system call.
#[test]
fn report_collapsed_real_capture_counts_match_perf() {
    let recorded = capture::record(100, 400);
    let dir = recorded.dir.path();
    let text = report(dir, "collapsed", None);
    let mut total = 0u64;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("STACK COUNT");
        total += count.parse::<u64>().expect("a count");
        assert!(stack.starts_with("prog;"), "{line}");
    }
    assert_eq!(total, perf_sample_count(&recorded.perf_data()));
    // A frame-pointer chain that meets an address outside every mapping (libc's write keeps
    // no frame) ends at `[unwind]:[truncated]` instead of going on with garbage: take a write
    // whose chain is whole.
    let syscall = text
        .lines()
        .find(|l| l.contains("vmlinux:ksys_write_[k]") && !l.contains("[truncated]"))
        .expect("a write(2) stack with its whole chain");
    // Root first: the program, then libc's write, then the kernel's entry down to ksys_write.
    let frames: Vec<&str> = syscall.rsplit_once(' ').unwrap().0.split(';').collect();
    let first_kernel = frames.iter().position(|f| f.ends_with("_[k]")).unwrap();
    assert!(
        frames[..first_kernel]
            .iter()
            .any(|f| f.starts_with("prog:")),
        "{syscall}"
    );
    assert!(
        frames[first_kernel - 1].starts_with("libc.so.6:"),
        "{syscall}"
    );
    assert!(
        frames[first_kernel..].iter().all(|f| f.ends_with("_[k]")),
        "{syscall}"
    );
}
