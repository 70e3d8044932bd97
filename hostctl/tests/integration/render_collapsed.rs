//! `kprofctl report --format collapsed` on a real capture, against `perf report`.

use crate::render_support::{capture, perf_sample_count, report};

/// Every sample perf counts is in exactly one line; lines are `comm;root;...;leaf count`
/// with kernel frames marked `_[k]` under the user frames that made the system call.
#[test]
fn report_collapsed_real_capture_counts_match_perf() {
    // 400k writes: a few hundred write(2) samples (40k sometimes gave none).
    let recorded = capture::record(100, 4000);
    let dir = recorded.dir.path();
    let text = report(dir, "collapsed", None);
    let mut total = 0u64;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("STACK COUNT");
        total += count.parse::<u64>().expect("a count");
        assert!(stack.starts_with("prog;"), "{line}");
    }
    assert_eq!(total, perf_sample_count(&recorded.perf_data()));
    // The write(2) stacks are whole, root first: the program, then libc's write, then the
    // kernel's entry down to ksys_write. One sample may be the final printf's write to the
    // test's stdout pipe, from libc's stdio code without frame pointers: its chain ends at
    // `[unwind]:[truncated]`. More was issue 13 (an exec COMM sorted after the program's
    // MMAP2 dropped the program's mapping, and every write chain ended so).
    let mut truncated = 0;
    let mut whole = 0;
    for syscall in text
        .lines()
        .filter(|l| l.contains("vmlinux:ksys_write_[k]"))
    {
        let (stack, count) = syscall.rsplit_once(' ').unwrap();
        if stack.contains("[truncated]") {
            truncated += count.parse::<u64>().unwrap();
            continue;
        }
        whole += 1;
        let frames: Vec<&str> = stack.split(';').collect();
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
    assert!(
        whole > 0 && truncated <= 1,
        "{truncated} samples of write(2) chains cut, {whole} whole stacks:\n{text}"
    );
}
