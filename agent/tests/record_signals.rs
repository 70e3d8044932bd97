//! Must-hold items 5 and 6 of issue 2: SIGINT finalizes a valid archive; overload (tiny ring
//! buffers at a high frequency) is reported on stderr and in the manifest, never silent.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use common::*;

/// SIGINT during a system-wide capture without a command finalizes a complete archive.
#[test]
fn record_archive_sigint_finalizes() {
    require_root();
    let dir = scratch("sigint");
    let caps = dir.join("caps");
    let mut child = Command::new(AGENT)
        .args(["record", "-F", "1000", "-g", "-o", caps.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // Wait for the agent to say it is recording (no timing assumption), then interrupt it.
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "agent exited early: {seen}"
        );
        seen.push_str(&line);
        if line.contains("recording") {
            break;
        }
    }
    // Let some samples accumulate: sampling runs at 1 kHz on every CPU.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    err.read_to_string(&mut seen).unwrap();
    assert!(out.status.success(), "{:?}: {seen}", out.status);
    let archive = archive_of(&out);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    assert_eq!(m.stop_reason, "signal");
    assert!(m.command.is_none());
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    assert!(!parsed.samples.is_empty());
    assert_eq!(
        parsed.samples.len() as u64,
        m.events.iter().map(|e| e.samples).sum::<u64>()
    );
    // No work dir or temp file is left next to the archive.
    assert_eq!(
        dir_entries(&caps),
        vec![archive.file_name().unwrap().to_string_lossy().into_owned()]
    );
    // The default event was reported and recorded (cycles, or cpu-clock with the reason).
    assert!(
        seen.contains("default event") || seen.contains("instead"),
        "{seen}"
    );
    let e = &m.events[0];
    assert!(e.requested.is_none());
    if e.name == "cpu-clock" {
        assert_eq!(e.fallback_from.as_deref(), Some("cycles"));
        assert!(e.fallback_reason.is_some());
    }
}

/// A one-page ring buffer at a high frequency with call chains under full CPU load loses
/// samples; the loss is on stderr, in the manifest, and in perf.data's LOST records alike.
#[test]
fn record_manifest_overload_reports_lost() {
    let (dir, busy) = workload("overload", "busy");
    let caps = dir.join("caps");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut load: Vec<_> = (0..2 * cpus)
        .map(|_| Command::new(&busy).arg("1000000").spawn().unwrap())
        .collect();
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let freq = max.min(50_000).to_string();
    let out = record(
        &[
            "-e",
            "cpu-clock",
            "-F",
            &freq,
            "-g",
            "--mmap-pages",
            "1",
            "--duration",
            "2",
        ],
        &caps,
        &[],
    );
    for c in &mut load {
        let _ = c.kill();
        let _ = c.wait();
    }
    let archive = archive_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    let lost: u64 = m.events.iter().map(|e| e.lost).sum();
    assert!(lost > 0, "no loss under overload: {stderr}");
    assert!(
        stderr.contains(&format!("LOST {lost} samples of cpu-clock")),
        "{stderr}"
    );
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    assert_eq!(
        parsed.lost.values().sum::<u64>(),
        lost,
        "manifest and perf.data disagree"
    );
    let ids: Vec<u64> = m.events[0].ids.clone();
    assert!(
        parsed.lost.keys().all(|id| ids.contains(id)),
        "LOST records for unknown ids"
    );
    assert_eq!(m.mmap_pages, Some(1));
    // perf itself sees the loss too: it warns about lost chunks and counts the LOST records.
    let data = unpacked.join("perf.data");
    let (stats, _) = perf(&["report", "--stats", "-i", data.to_str().unwrap()]);
    let perf_lost_records: u64 = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("LOST events:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no LOST line in perf report --stats:\n{stats}"));
    assert!(perf_lost_records > 0);
    let (_, report_err) = perf(&[
        "report",
        "--stdio",
        "-i",
        data.to_str().unwrap(),
        "--sort",
        "comm",
    ]);
    assert!(
        report_err.contains("lost"),
        "perf report did not warn about the loss: {report_err}"
    );
}

/// An agent stopped (SIGSTOP) while its small rings fill finds them more than half full when
/// it runs again: it compresses those rounds at zstd's fastest level, says so, and the
/// perf.data it seals holds zstd frames of two levels one after the other, which Linux perf
/// and linux-perf-data both read whole.
#[test]
fn record_perfdata_behind_rounds_fast_level() {
    let (dir, busy) = workload("behind", "busy");
    let caps = dir.join("caps");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut load: Vec<_> = (0..cpus)
        .map(|_| Command::new(&busy).arg("1000000").spawn().unwrap())
        .collect();
    let mut child = Command::new(AGENT)
        .args(["record", "-e", "cpu-clock", "-F", "4000", "-g", "-m", "8"])
        .args(["--duration", "3", "-o", caps.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("recording") {
        assert!(
            err.read_line(&mut seen).unwrap() > 0,
            "agent exited: {seen}"
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGCONT) }, 0);
    let out = child.wait_with_output().unwrap();
    for c in &mut load {
        let _ = c.kill();
        let _ = c.wait();
    }
    err.read_to_string(&mut seen).unwrap();
    assert!(out.status.success(), "{:?}: {seen}", out.status);
    assert!(
        seen.contains("compressed at zstd level -50: the agent was behind"),
        "{seen}"
    );
    let unpacked = unpack(&archive_of(&out), &dir);
    let m = manifest(&unpacked);
    let samples: u64 = m.events.iter().map(|e| e.samples).sum();
    let data = unpacked.join("perf.data");
    let kinds = record_types(&data);
    assert!(kinds.contains(&81), "no compressed record: {kinds:?}");
    assert!(!kinds.contains(&9), "a sample record left plain: {kinds:?}");
    assert_eq!(parse_perf_data(&data).samples.len() as u64, samples);
    let (stats, _) = perf(&["report", "--stats", "-i", data.to_str().unwrap()]);
    let perf_samples: u64 = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("SAMPLE events:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no SAMPLE line in perf report --stats:\n{stats}"));
    assert_eq!(perf_samples, samples, "{stats}");
}

/// The types of the records in perf.data's data section as they are in the file (compressed
/// ones not opened).
fn record_types(path: &std::path::Path) -> std::collections::BTreeSet<u32> {
    let b = std::fs::read(path).unwrap();
    let u64_at = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap());
    let (mut at, end) = (u64_at(40) as usize, (u64_at(40) + u64_at(48)) as usize);
    let mut kinds = std::collections::BTreeSet::new();
    while at + 8 <= end {
        kinds.insert(u32::from_ne_bytes(b[at..at + 4].try_into().unwrap()));
        at += usize::from(u16::from_ne_bytes([b[at + 6], b[at + 7]])).max(8);
    }
    kinds
}
