//! A FORK record copied the parent's whole mapping list: many forks of a process with many
//! mappings made the report's memory forks × mappings. In a test binary of its own, so that
//! the peak resident size (VmHWM) is this test's.

mod common;

use common::perfdata::{self, Sample};
use kprof_symbols::{Capture, Options, Symbolizer};
use std::io::Write;

/// Peak resident set size of this process, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// 2000 forks of a process with 1000 mappings, one sample in each child: symbolized within
/// 48 MiB more than before (today's tree: 2 million mappings copied, ~160 MB).
#[test]
fn symbolize_perfdata_fork_bomb_bounded_memory() {
    const MAPS: u64 = 1000;
    const FORKS: i32 = 2000;
    let mut records = Vec::new();
    for m in 0..MAPS {
        let path = format!("/usr/lib/libbomb{m}.so");
        records.extend(perfdata::mmap2(
            100,
            0x1000_0000 + m * 0x10000,
            0x10000,
            &path,
            &[m as u8; 20],
        ));
    }
    for c in 0..FORKS {
        records.extend(perfdata::fork(1000 + c, 100));
    }
    let samples: Vec<Sample> = (0..FORKS)
        .map(|c| Sample {
            pid: 1000 + c,
            tid: 1000 + c,
            kernel: false,
            ip: 0x1000_0000 + (c as u64 % MAPS) * 0x10000 + 0x10,
            callers: vec![0x1000_0000 + 0x20],
        })
        .collect();
    let bytes = perfdata::write_with(&records, &samples);
    let mut f = tempfile::Builder::new().suffix(".data").tempfile().unwrap();
    f.write_all(&bytes).unwrap();
    drop(records);
    drop(bytes);
    let before = vm_hwm_kib();
    let mut s = Symbolizer::new(Options::default(), &mut |_| {}).unwrap();
    let cap = Capture::open_limited(f.path(), 1 << 30).unwrap();
    let profile = s.symbolize(&cap, &mut |_| {}).unwrap();
    let grown = vm_hwm_kib().saturating_sub(before);
    let total: u64 = profile.events.iter().map(|e| e.total_samples).sum();
    assert_eq!(total, FORKS as u64);
    assert!(grown < 48 << 10, "peak RSS grew by {grown} KiB");
}
