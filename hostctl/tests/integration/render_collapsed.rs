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

/// A static program built with frame pointers, as the boards' busybox is: its `perf record -g`
/// chains end at glibc's entry code, the stack's root, and not in an invented caller after it
/// and `[truncated]`, counted in a warning that the code lacks frame pointers (what the user's
/// day showed for every sample of the shell before).
#[test]
fn report_collapsed_static_fp_program_ends_at_libc_entry() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.c"), capture::PROGRAM).unwrap();
    kprof_test_support::cc_in(
        dir.path(),
        &["-O2", "-g", "-fno-omit-frame-pointer", "-static"],
        "prog.c",
        "prog",
    );
    capture::run(
        kprof_test_support::system::perf()
            .current_dir(dir.path())
            .args(["record", "-q", "-e", "cpu-clock", "-F", "4000", "-g"])
            .args(["-o", "perf.data", "./prog", "100", "100"]),
        "perf record (root and apt-get install linux-perf)",
    );
    let out = crate::render_support::kprofctl(
        &[
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--format",
            "collapsed",
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let spin: Vec<&str> = text.lines().filter(|l| l.contains("prog:spin")).collect();
    assert!(!spin.is_empty(), "no samples in spin:\n{text}");
    for line in &spin {
        let frames: Vec<&str> = line.split(';').collect();
        assert_eq!(
            frames.get(1),
            Some(&"prog:__libc_start_call_main"),
            "the chain's root is glibc's entry code: {line}"
        );
    }
    // Samples in glibc's own start-up code (no frame pointers) may still be cut; the
    // program's are whole.
    for line in text.lines().filter(|l| l.contains("prog:main")) {
        assert!(!line.contains("[truncated]"), "{line}");
    }
}
