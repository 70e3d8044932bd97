use kprof_symbols::latency::{Contention, Stats};
use kprof_symbols::profile::TimeWindow;
use serde_json::Value;

use super::*;
use crate::test_support::fixture;

fn latency_profile() -> Profile {
    let mut p = fixture::profile();
    fixture::add_latency(&mut p);
    p
}

fn text(p: &Profile, slowest: usize) -> String {
    let mut out = Vec::new();
    write_text(p, slowest, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn json(p: &Profile, slowest: usize) -> Value {
    let mut out = Vec::new();
    write_json(p, slowest, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// The lines of `text` from the one starting with `first`, `n` of them.
fn lines_from<'a>(text: &'a str, first: &str, n: usize) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no line starting {first:?} in:\n{text}"));
    lines[at..at + n].to_vec()
}

/// The driver's histogram is funclatency's to the character: usecs (a 10 µs median), every
/// row from 0 -> 1 on, the empty ones between, stars scaled to the largest bucket.
#[test]
fn write_text_histogram_is_funclatency_usecs() {
    let out = text(&latency_profile(), 0);
    let want = [
        "     usecs               : count     distribution",
        "         0 -> 1          : 1        |*****                                   |",
        "         2 -> 3          : 2        |**********                              |",
        "         4 -> 7          : 4        |********************                    |",
        "         8 -> 15         : 8        |****************************************|",
        "        16 -> 31         : 3        |***************                         |",
        "        32 -> 63         : 0        |                                        |",
        "        64 -> 127        : 0        |                                        |",
        "       128 -> 255        : 1        |*****                                   |",
    ];
    assert_eq!(lines_from(&out, "     usecs", want.len()), want);
    assert!(
        out.contains(
            "mychardrv_write (kernel): 19 calls, total 317 µs, mean 16.7 µs, p50 10.0 µs, \
             p90 20.0 µs, p99 150 µs, max 150 µs\n"
        ),
        "{out}"
    );
    // The user function's 4 ms median: msecs, buckets recomputed in ms.
    let want = [
        "     msecs               : count     distribution",
        "         0 -> 1          : 0        |                                        |",
        "         2 -> 3          : 2        |****************************************|",
        "         4 -> 7          : 2        |****************************************|",
        "         8 -> 15         : 0        |                                        |",
        "        16 -> 31         : 1        |********************                    |",
    ];
    assert_eq!(lines_from(&out, "     msecs", want.len()), want);
}

/// The unit follows the median (nsecs below 1 µs, usecs below 1 ms, msecs above); durations
/// are divided by it, rounded down, before bucketing; past bcc's slot 32 the rows widen.
#[test]
fn histogram_unit_by_median_and_wide_rows() {
    let unit = |d: &[u64]| unit_for(&Stats::of(d)).name;
    assert_eq!(unit(&[10, 999, 5_000_000]), "nsecs");
    assert_eq!(unit(&[10, 1_000, 5_000_000]), "usecs");
    assert_eq!(unit(&[999_999]), "usecs");
    assert_eq!(unit(&[1_000_000, 3]), "nsecs");
    assert_eq!(unit(&[1_000_000, 3_000_000]), "msecs");
    let us = unit_for(&Stats::of(&[1_000]));
    // 1999 ns is 1 µs: bucket 0 -> 1, as funclatency's integer division puts it.
    assert_eq!(
        histogram::buckets(&[1_999, 2_000, 7_999], us),
        [(0, 1, 1), (2, 3, 1), (4, 7, 1)]
    );
    let ns = unit_for(&Stats::of(&[5]));
    let mut out = Vec::new();
    let hist = histogram::buckets(&[5, 6, 5_000_000_000], ns);
    histogram::write_bcc(&mut out, &hist, ns).unwrap();
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "               nsecs                         : count     distribution"
    );
    assert_eq!(
        lines[3],
        "                   4 -> 7                    : 2        |********************|"
    );
    assert_eq!(
        lines.last().copied(),
        Some("          4294967296 -> 8589934591           : 1        |**********          |")
    );
    assert_eq!(lines.len(), 1 + 33);
}

/// Durations as people read them: three significant digits, the next unit once a value
/// would round to 1000.
#[test]
fn human_three_significant_digits() {
    let cases = [
        (0, "0 ns"),
        (999, "999 ns"),
        (1_000, "1.00 µs"),
        (1_234, "1.23 µs"),
        (12_345, "12.3 µs"),
        (999_499, "999 µs"),
        (999_500, "1.00 ms"),
        (45_600_000, "45.6 ms"),
        (2_000_000_000, "2.00 s"),
        (1_234_000_000_000, "1234 s"),
    ];
    for (ns, want) in cases {
        assert_eq!(human(ns), want, "{ns} ns");
    }
}

/// Calls without an entry or a return are said in words, outside the statistics (5 calls
/// counted, not 8); the kernel's hit count and lost records only when they tell of missing
/// calls.
#[test]
fn write_text_unpaired_and_lost_in_words() {
    let out = text(&latency_profile(), 0);
    assert!(out.contains(
        "/usr/bin/app:compute (user): 5 calls, total 34.0 ms, mean 6.80 ms, p50 4.00 ms, \
         p90 20.0 ms, p99 20.0 ms, max 20.0 ms\n  2 calls began before the capture (a return \
         without its entry): not in the statistics\n  1 call was still running at the end of \
         the capture (an entry without its return): not in the statistics\n"
    ));
    assert!(out.contains("  the kernel counted 25 hits of the entry probe; the capture has 19\n"));
    assert!(out.contains("  the kernel lost 3 of its entry and return records"));
    // Hits equal to the entries recorded (calls and unfinished ones) say nothing.
    let mut p = latency_profile();
    let drv = &mut p.latency.as_mut().unwrap().functions[0];
    (drv.hits, drv.lost) = (Some(19), 0);
    let out = text(&p, 0);
    assert!(!out.contains("the kernel"), "{out}");
    // In a window, the unpaired counts are the whole capture's and say so.
    p.meta.window = Some(TimeWindow {
        start: Some(0),
        end: Some(500_000_000),
    });
    let out = text(&p, 0);
    assert!(out.contains(
        "2 calls began before the capture (a return without its entry): not in the statistics \
         (a count of the whole capture)\n"
    ));
    assert!(out.contains("Window:  0.000 s .. 0.500 s (calls and waits that began in it)"));
}

/// Slowest first, the earlier first among equals; thread, CPU, nesting depth and the entry
/// stack innermost first.
#[test]
fn write_text_slowest_calls_ordered_with_paths() {
    let out = text(&latency_profile(), 3);
    let heads: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     ") && l.contains(" at "))
        .collect();
    assert_eq!(
        heads,
        [
            "    150 µs at 0.916 s  app (100)  CPU 1",
            "    20.0 µs at 0.880 s  app (100)  CPU 1",
            "    20.0 µs at 0.892 s  app (100)  CPU 1",
            "    20.0 ms at 0.300 s  app (100)  CPU 1",
            "    5.00 ms at 0.305 s  app (100)  CPU 1  depth 1",
            "    4.00 ms at 0.200 s  app (100)  CPU 1",
        ]
    );
    let path = lines_from(&out, "    150 µs", 4);
    assert_eq!(
        path[1..],
        [
            "        mychardrv_write [mychardrv.ko]",
            "        vfs_write [vmlinux] fs/read_write.c:584",
            "        ksys_write [vmlinux] fs/read_write.c:640",
        ]
    );
    assert!(!text(&latency_profile(), 0).contains("Slowest calls"));
}

/// A path deeper than 12 frames ends in how many more there are.
#[test]
fn write_text_slowest_path_capped_at_12_frames() {
    let mut p = latency_profile();
    let deep = fixture::DRV_CALL_STACK as usize;
    let frames = p.stacks[deep].frames.clone();
    p.stacks[deep].frames = [frames.clone(), frames].concat();
    let out = text(&p, 1);
    let block = lines_from(&out, "    150 µs", 14);
    assert_eq!(
        block[12],
        "        do_syscall_64 [vmlinux] arch/x86/entry/common.c:80"
    );
    assert_eq!(block[13], "        … 4 more frames");
}

/// The waiting function is the first frame outside the locking code, kernel names checked
/// only in kernel frames and the C library's only in user frames; unnamed frames are
/// skipped, and a stack of locking code alone has no caller.
#[test]
fn caller_skips_locking_code() {
    let p = latency_profile();
    assert_eq!(caller(&p, fixture::MUTEX_WAIT_STACK), "mychardrv_write");
    assert_eq!(caller(&p, fixture::FUTEX_WAIT_STACK), "worker");
    for name in [
        "mutex_lock",
        "__mutex_lock.constprop.0",
        "_raw_spin_lock_irqsave",
        "down_write",
        "rwsem_down_write_slowpath",
        "schedule_preempt_disabled",
        "__x64_sys_futex",
        "do_syscall_64",
    ] {
        assert!(callers::listed(name, callers::KERNEL_LOCKING), "{name}");
    }
    for name in ["mychardrv_write", "vfs_write", "down_and_out_helper_"] {
        assert!(
            !callers::listed(name, callers::KERNEL_LOCKING) || name.starts_with("down_"),
            "{name}"
        );
    }
    for name in [
        "syscall",
        "__lll_lock_wait",
        "___pthread_mutex_lock",
        "__futex_abstimed_wait_common64",
    ] {
        assert!(callers::listed(name, callers::USER_LOCKING), "{name}");
    }
    // Exact entries match whole names only.
    assert!(!callers::listed(
        "syscall_wrapper_of_mine",
        callers::USER_LOCKING
    ));
    assert!(!callers::listed("__waiter", callers::USER_LOCKING));

    // A user function named like kernel locking code is the caller; an unnamed frame is not.
    let mut p = latency_profile();
    p.functions[fixture::WORKER].name = Some("mutex_pool_get".to_owned());
    assert_eq!(caller(&p, fixture::FUTEX_WAIT_STACK), "mutex_pool_get");
    p.functions[fixture::WORKER].name = None;
    assert_eq!(caller(&p, fixture::FUTEX_WAIT_STACK), "_start");
    let s = fixture::MUTEX_WAIT_STACK as usize;
    // A chain that ends inside the locking code names its outermost locking function.
    p.stacks[s].frames.truncate(3);
    assert_eq!(caller(&p, fixture::MUTEX_WAIT_STACK), "mutex_lock");
    assert_eq!(caller(&p, 999), "[unknown]");
}

/// The lock waits as perf lock contention prints them: by lock and by waiting function,
/// most total wait first, times in perf's units; each caller with its longest wait's path.
#[test]
fn write_text_lock_waits_as_perf_lock_contention() {
    let out = text(&latency_profile(), 0);
    assert!(out.contains(
        "Lock waits (kernel locks, futex waits): 5 waits, 3.09 ms waited\n  1 wait began before \
         the capture (an end without its start): not counted\n"
    ));
    let by_lock = lines_from(&out, "By lock", 4);
    assert_eq!(
        by_lock[1..],
        [
            " contended   total wait     max wait     avg wait         type   lock",
            "         2      3.00 ms      2.00 ms      1.50 ms        futex   0x7ffd1000",
            "         3     90.00 us     50.00 us     30.00 us        mutex   dev+0x0 [mychardrv]",
        ]
    );
    let by_caller = lines_from(&out, "By waiting function", 9);
    assert_eq!(
        by_caller[2..7],
        [
            "         2      3.00 ms      2.00 ms      1.50 ms        futex   worker",
            "      longest 2.00 ms at 0.100 s  worker (101):",
            "        __lll_lock_wait [libc.so.6]",
            "        pthread_mutex_lock [libc.so.6]",
            "        worker [app] /src/app/worker.c:21",
        ]
    );
    assert!(out.contains("       mutex   mychardrv_write\n      longest 50.0 µs at 0.720 s  app (100):\n        schedule [vmlinux]"));
}

/// No waits: said, with what could not be paired.
#[test]
fn write_text_no_lock_waits_with_unpaired() {
    let mut p = latency_profile();
    p.contention = Some(Contention {
        kernel_locks: true,
        futex: false,
        waits: Vec::new(),
        unmatched_ends: 2,
        unfinished: 1,
    });
    p.latency = None;
    let out = text(&p, 5);
    assert!(out.contains("No function was timed in this capture"));
    assert!(
        out.ends_with(
            "Lock waits (kernel locks): no lock waits\n  2 waits began before the capture (an end \
         without its start): not counted\n  1 thread was still waiting at the end of the capture \
         (a start without its end): not counted\n"
        ),
        "{out}"
    );
}

/// The JSON parses back with every function's statistics, histogram in ns, unpaired counts
/// and slowest calls with their threads and frames.
#[test]
fn write_json_latency_fields() {
    let v = json(&latency_profile(), 2);
    assert_eq!(v["schema"], "kprof-report");
    assert_eq!(v["view"], "latency");
    let f = &v["latency"]["functions"][0];
    assert_eq!(f["name"], "mychardrv_write");
    assert_eq!(f["kind"], "kernel");
    let stats: Vec<u64> = [
        "count", "total_ns", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns",
    ]
    .iter()
    .map(|k| f[k].as_u64().unwrap())
    .collect();
    assert_eq!(
        stats,
        [19, 317_000, 16_684, 1_500, 10_000, 20_000, 150_000, 150_000]
    );
    assert_eq!(
        (f["hits"].as_u64(), f["lost"].as_u64()),
        (Some(25), Some(3))
    );
    assert_eq!(
        f["histogram"][0],
        serde_json::json!({"low_ns": 1024, "high_ns": 2047, "count": 1})
    );
    let counts: u64 = f["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, 19);
    let slow = &f["slowest"];
    assert_eq!(slow.as_array().unwrap().len(), 2);
    assert_eq!(slow[0]["duration_ns"], 150_000);
    assert_eq!(slow[0]["start_ns"], 916_000_000);
    assert_eq!(
        (slow[0]["pid"].as_i64(), slow[0]["tid"].as_i64()),
        (Some(100), Some(100))
    );
    assert_eq!(
        (slow[0]["comm"].as_str(), slow[0]["cpu"].as_u64()),
        (Some("app"), Some(1))
    );
    assert_eq!(
        slow[0]["frames"][0],
        serde_json::json!({"image": "mychardrv.ko", "symbol": "mychardrv_write", "file": null, "line": null, "inlined": false})
    );
    assert_eq!(slow[0]["frames"][1]["file"], "fs/read_write.c");
    let c = &v["latency"]["functions"][1];
    assert_eq!(
        (
            c["unmatched_returns"].as_u64(),
            c["unfinished"].as_u64(),
            c["hits"].is_null()
        ),
        (Some(2), Some(1), true)
    );
    assert_eq!(c["slowest"][1]["depth"], 1);
}

/// The waits by lock and by caller in the JSON, each with its longest wait.
#[test]
fn write_json_contention_fields() {
    let v = json(&latency_profile(), 2);
    let w = &v["contention"];
    assert_eq!(
        (
            w["waits"].as_u64(),
            w["total_ns"].as_u64(),
            w["unmatched_ends"].as_u64()
        ),
        (Some(5), Some(3_090_000), Some(1))
    );
    assert_eq!(w["by_lock"][0]["name"], "0x7ffd1000");
    assert_eq!(w["by_lock"][0]["type"], "futex");
    assert_eq!(w["by_lock"][1]["name"], "dev+0x0 [mychardrv]");
    assert_eq!(
        (
            w["by_lock"][1]["count"].as_u64(),
            w["by_lock"][1]["max_ns"].as_u64()
        ),
        (Some(3), Some(50_000))
    );
    assert_eq!(w["by_caller"][1]["name"], "mychardrv_write");
    let longest = &w["by_caller"][0]["longest"];
    assert_eq!(
        (longest["tid"].as_i64(), longest["cpu"].is_null()),
        (Some(101), true)
    );
    assert_eq!(longest["frames"][2]["symbol"], "worker");
}

/// What was not recorded is null.
#[test]
fn write_json_missing_parts_null() {
    let v = json(&fixture::profile(), 5);
    assert!(v["latency"].is_null() && v["contention"].is_null(), "{v}");
    let mut p = latency_profile();
    p.latency.as_mut().unwrap().functions[0].calls.clear();
    let v = json(&p, 5);
    let f = &v["latency"]["functions"][0];
    assert_eq!(
        (f["count"].as_u64(), f["histogram"].as_array().map(Vec::len)),
        (Some(0), Some(0))
    );
}
