//! Issue 20 items 2 and 3: a capture dir that fills up (a real, small tmpfs) ends the capture
//! with a truncated but valid capture, a capture dir below the free-space floor is refused
//! before the workload starts, and a mapped file replaced by a FIFO does not block sealing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A tmpfs mounted for the test, unmounted on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={}k,mode=0700", bytes.div_ceil(4096) * 4))
            .arg("tmpfs")
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Runs the agent, killing it (and failing) if it has not ended after `limit`.
fn run_bounded(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(AGENT)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "kprof-agent {args:?} still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Room for the kallsyms and modules snapshots the agent writes first, the 1 MiB it sets
/// aside for sealing, and `extra` bytes of perf.data.
fn tmpfs_size(extra: u64) -> u64 {
    let kallsyms = std::fs::read("/proc/kallsyms").unwrap().len() as u64;
    let modules = std::fs::read("/proc/modules").map_or(0, |m| m.len() as u64);
    kallsyms + modules + (1 << 20) + extra
}

/// Independent readers take the sealed perf.data at `data` whole: linux-perf-data, and
/// Debian's perf script and report, which agree with it on the samples.
fn assert_perf_reads_whole(data: &Path) {
    let parsed = parse_perf_data(data);
    assert!(
        parsed.samples.len() > 100,
        "{} samples",
        parsed.samples.len()
    );
    let d = data.to_str().unwrap();
    // Fields that need no symbols: the system-wide dwarf stacks of every other process would
    // have perf run addr2line for minutes.
    let (script, err) = perf(&[
        "script",
        "-i",
        d,
        "--no-inline",
        "-F",
        "comm,tid,time,event",
    ]);
    assert!(
        !err.to_ascii_lowercase().contains("corrupt")
            && !err.contains("failed")
            && !err.contains("Error"),
        "perf script: {err}"
    );
    // One line per sample: perf reads every sample linux-perf-data reads (the workload may
    // have had none yet when a few MiB of other processes' stacks filled the disk).
    assert_eq!(
        script.lines().filter(|l| !l.trim().is_empty()).count(),
        parsed.samples.len(),
        "perf script samples"
    );
    let (report, err) = perf(&[
        "report",
        "--stdio",
        "-i",
        d,
        "--no-inline",
        "-g",
        "none",
        "--sort",
        "comm",
    ]);
    assert!(!err.contains("failed") && !err.contains("Error"), "{err}");
    assert!(
        report.contains(&format!("# Samples: {}", parsed.samples.len()))
            || report.contains(&format!("# Samples: {}K", parsed.samples.len() / 1000)),
        "perf report: {report}"
    );
}

/// Fills a tmpfs capture dir with `options` while a long busy loop runs; checks everything a
/// truncated capture promises and returns the unpacked dir.
fn fill_and_check(name: &str, options: &[&str]) -> PathBuf {
    let (base, busy) = workload(name, "busy");
    let caps = base.join("caps");
    let _fs = Tmpfs::mount(&caps, tmpfs_size(3 << 20));
    let mut args = vec!["record", "-o", caps.to_str().unwrap(), "--min-free", "1M"];
    args.extend_from_slice(options);
    // Minutes of work: only the full disk can end it within the limit.
    args.extend(["--", busy.to_str().unwrap(), "100000"]);
    let out = run_bounded(&args, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "exit status; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("writing {}/.", caps.display()))
            && stderr.contains("No space left on device"),
        "the write error names the file and the reason: {stderr}"
    );
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("is truncated")
            && last.contains(caps.to_str().unwrap())
            && last.contains("No space left on device"),
        "last line: {last}"
    );
    let archive = archive_of(&Output {
        status: std::process::ExitStatus::default(),
        ..out
    });
    assert!(archive.starts_with(&caps), "{}", archive.display());
    let unpacked = unpack(&archive, &base);
    let m = manifest(&unpacked);
    assert!(m.truncated, "manifest says truncated");
    let t = m.truncation.as_ref().expect("truncation details");
    assert!(t.reason.contains("No space left on device"), "{t:?}");
    assert!(t.lost_records.is_some_and(|n| n > 0), "{t:?}");
    assert!(t.lost_bytes.is_some_and(|n| n > 0), "{t:?}");
    assert_eq!(m.stop_reason, "write-error");
    let cmd = m.command.as_ref().unwrap();
    assert_eq!(
        (cmd.exit_code, cmd.signal),
        (None, Some(libc::SIGTERM)),
        "the agent stopped the workload"
    );
    let data = unpacked.join("perf.data");
    assert_eq!(
        std::fs::metadata(&data).unwrap().len(),
        m.perf_data.size,
        "manifest size"
    );
    assert_perf_reads_whole(&data);
    // Nothing but the archive is left in the capture dir.
    let left = dir_entries(&caps);
    assert_eq!(left.len(), 1, "{left:?}");
    unpacked
}

/// A capture whose perf.data (zstd records, the default) fills the capture dir stops the
/// workload, exits 3 naming the dir and the error, and leaves an archive whose perf.data ends
/// at its last whole compressed record: Debian's perf and linux-perf-data read it.
#[test]
fn record_perfdata_zstd_disk_full_truncated() {
    fill_and_check(
        "full-zstd",
        &["-e", "cpu-clock", "-F", "4000", "--call-graph", "dwarf"],
    );
}

/// The same with uncompressed records: perf.data ends at its last whole record.
#[test]
fn record_perfdata_uncompressed_disk_full_truncated() {
    fill_and_check(
        "full-raw",
        &[
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "--call-graph",
            "dwarf",
            "--no-compress",
        ],
    );
}

/// Below the free-space floor (16 MiB by default) the agent refuses before the workload
/// runs, naming the dir, its free space and the floor, and leaves nothing behind.
#[test]
fn record_capture_dir_below_floor_refused() {
    require_root();
    let base = scratch("floor");
    let caps = base.join("caps");
    let _fs = Tmpfs::mount(&caps, 8 << 20);
    let marker = base.join("ran");
    let script = format!("touch {}", marker.display());
    let out = run_bounded(
        &[
            "record",
            "-o",
            caps.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ],
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("capture dir {} has", caps.display()))
            && stderr.contains("below the 16.0 MiB floor")
            && stderr.contains("--min-free"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the workload ran");
    assert!(dir_entries(&caps).is_empty(), "{:?}", dir_entries(&caps));
}

/// A mapped file replaced by a FIFO before sealing (the workload execs a copy of `sleep`,
/// then renames a FIFO over it) is skipped and counted: the capture completes in bounded
/// time instead of blocking forever in open(2).
#[test]
fn record_seal_mapped_fifo_skipped() {
    require_root();
    let base = scratch("fifo");
    let caps = base.join("caps");
    let exe = base.join("kprof-sleeper");
    let script = format!(
        "cp /bin/sleep {e} && {e} 1 & sleep 0.5; mkfifo {e}.fifo && mv {e}.fifo {e}; wait",
        e = exe.display()
    );
    let out = run_bounded(
        &[
            "record",
            "-e",
            "cpu-clock",
            "-o",
            caps.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ],
        Duration::from_secs(60),
    );
    let archive = archive_of(&out);
    let m = manifest(&unpack(&archive, &base));
    let s = m.skipped_files.expect("a skipped file is counted");
    assert!(s.count >= 1);
    let line = format!("{}: not a regular file (a FIFO)", exe.display());
    assert!(s.examples.contains(&line), "{:?}", s.examples);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no build-id read for") && stderr.contains(&line),
        "{stderr}"
    );
}
