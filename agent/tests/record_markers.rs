//! `record --markers` (issue 25): the lines written to tracefs `trace_marker` during a capture
//! become `ftrace:print` samples that Linux `perf script` prints, on perf's clock; ftrace's
//! `trace_clock` and `tracing_on` are what they were afterwards, also after SIGINT; a missing
//! tracefs is an error naming it.
//!
//! The tests that change ftrace's global settings hold [`FTRACE`] so they never overlap.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use common::*;
use kprof_test_support::system::{Tracefs, TRACEFS};

static FTRACE: Mutex<()> = Mutex::new(());

/// A shell busy loop of about a tenth of a second on this host.
const BUSY: &str = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";

/// ftrace for one test: the lock that keeps the tests that change its global settings apart,
/// tracefs to read and write them through (mounted privately for the test when the machine
/// has it unmounted, as a fresh one does), and ftrace's clock and `tracing_on` put back as
/// they were when made, whatever the test did.
struct Ftrace {
    tracefs: Tracefs,
    clock: String,
    tracing_on: String,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl Ftrace {
    fn take() -> Ftrace {
        require_root();
        let lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
        let tracefs = Tracefs::open();
        Ftrace {
            clock: tracefs.selected_clock(),
            tracing_on: tracefs.read("tracing_on").trim().to_string(),
            tracefs,
            _lock: lock,
        }
    }
}

impl std::ops::Deref for Ftrace {
    type Target = Tracefs;
    fn deref(&self) -> &Tracefs {
        &self.tracefs
    }
}

impl Drop for Ftrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path("trace_clock"), &self.clock);
        let _ = std::fs::write(self.path("tracing_on"), &self.tracing_on);
    }
}

/// `(pid, time in s, event)` of every sample, from `perf script -F pid,time,event`.
fn sample_times(perf_data: &str) -> Vec<(i32, f64, String)> {
    let (text, _) = perf(&["script", "-i", perf_data, "-F", "pid,time,event"]);
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let pid = it.next()?.parse().ok()?;
            let time = it.next()?.trim_end_matches(':').parse().ok()?;
            let event = it.next()?.trim_end_matches(':').to_string();
            Some((pid, time, event))
        })
        .collect()
}

/// Three phases marked by a shell: `perf script` prints the three `ftrace:print` lines in
/// order with the shell's pid, each between the shell's first and last cpu-clock samples
/// (the same clock), and the manifest counts three lines, none lost.
#[test]
fn record_markers_perf_script_lists_lines_in_order() {
    let ftrace = Ftrace::take();
    let dir = scratch("markers");
    let script = format!(
        "{BUSY}; for p in one two three; do echo \"phase $p\" > {}; {BUSY}; done",
        ftrace.path("trace_marker").display()
    );
    let out = record(
        &["-e", "cpu-clock", "--markers"],
        &dir,
        &["sh", "-c", &script],
    );
    let archive = archive_of(&out);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    let markers = m.markers.as_ref().expect("manifest markers entry");
    assert_eq!(
        (markers.source.as_str(), markers.event.as_str()),
        ("ftrace-trace_marker", "ftrace:print")
    );
    assert_eq!((markers.lines, markers.lost), (3, 0));
    assert_eq!(m.events[1].name, "ftrace:print");
    assert_eq!(m.events[1].samples, 3);
    let sh = m.command.as_ref().unwrap().pid.unwrap();

    let perf_data = unpacked.join("perf.data");
    let perf_data = perf_data.to_str().unwrap();
    let (text, _) = perf(&["script", "-i", perf_data]);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ftrace:print:"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for (l, phase) in lines.iter().zip(["phase one", "phase two", "phase three"]) {
        let words: Vec<&str> = l.split_whitespace().take(2).collect();
        assert_eq!(words, ["sh", sh.to_string().as_str()], "{l}");
        assert!(l.trim_end().ends_with(phase), "{l}");
    }
    let samples = sample_times(perf_data);
    let sh_clock: Vec<f64> = samples
        .iter()
        .filter(|(pid, _, e)| *pid == sh && e == "cpu-clock")
        .map(|s| s.1)
        .collect();
    let marks: Vec<f64> = samples
        .iter()
        .filter(|(pid, _, e)| *pid == sh && e == "ftrace:print")
        .map(|s| s.1)
        .collect();
    assert_eq!(marks.len(), 3);
    let (first, last) = (sh_clock[0], sh_clock[sh_clock.len() - 1]);
    for t in &marks {
        assert!(first < *t && *t < last, "{t} not within {first}..{last}");
    }
    assert!(marks.windows(2).all(|w| w[0] < w[1]), "{marks:?}");
}

/// On a machine where nothing mounted tracefs yet (a fresh one, a bare board), `--markers`
/// mounts it at /sys/kernel/tracing by itself and records the line written there. Run in a
/// mount namespace of its own (`unshare -m`) with tracefs unmounted inside it, so the machine's
/// mounts stay as they are whatever the test finds.
#[test]
fn record_markers_mounts_tracefs_when_nothing_did() {
    let _ftrace = Ftrace::take();
    let dir = scratch("markers-fresh");
    let script = format!(
        "while umount {TRACEFS} 2>/dev/null; do :; done; \
         [ ! -e {TRACEFS}/trace_marker ] || {{ echo 'tracefs still mounted' >&2; exit 99; }}; \
         exec \"$0\" record -e cpu-clock --markers -o \"$1\" -- \
           sh -c 'echo fresh-machine > {TRACEFS}/trace_marker'"
    );
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            AGENT,
        ])
        .arg(&dir)
        .output()
        .expect("unshare (util-linux)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let unpacked = unpack(&archive_of(&out), &dir);
    let markers = manifest(&unpacked).markers.expect("manifest markers entry");
    assert_eq!((markers.lines, markers.lost), (1, 0), "{stderr}");
}

/// A tracefs that is not there: one line naming the directory, the kernel options and the
/// mount command; no capture left behind, ftrace's clock untouched.
#[test]
fn record_markers_missing_tracefs_named() {
    let ftrace = Ftrace::take();
    let dir = scratch("markers-missing");
    let clock = ftrace.selected_clock();
    let out = Command::new(AGENT)
        .args(["record", "--markers", "-o"])
        .arg(&dir)
        .args(["--", "true"])
        .env("KPROF_TRACEFS", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in [
        "--markers: ftrace's trace_marker buffer is not available",
        "/nonexistent: no such directory",
        "CONFIG_FTRACE=y",
        "mount -t tracefs nodev /sys/kernel/tracing",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(dir_entries(&dir).is_empty(), "{:?}", dir_entries(&dir));
    assert_eq!(ftrace.selected_clock(), clock);
}

/// With `global` clock and tracing off before: during the capture the clock is `perf` and
/// tracing on; after a capture stopped by SIGINT both are back to `global` and off, and the
/// capture is sealed.
#[test]
fn record_markers_sigint_restores_trace_clock() {
    let ftrace = Ftrace::take();
    ftrace.write("trace_clock", "global");
    ftrace.write("tracing_on", "0");
    let dir = scratch("markers-sigint");
    let mut child = Command::new(AGENT)
        .args(["record", "-e", "cpu-clock", "--markers", "-o"])
        .arg(&dir)
        .args(["--", "sleep", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("recording ") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "agent ended early"
        );
    }
    assert_eq!(ftrace.selected_clock(), "perf");
    assert_eq!(ftrace.read("tracing_on").trim(), "1");
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(ftrace.selected_clock(), "global");
    assert_eq!(ftrace.read("tracing_on").trim(), "0");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.trim_end().ends_with(".kprof.tar.gz"), "{stdout}");
}

/// A burst of 300 000 lines written faster than the agent reads them: every line of the
/// writer is either recorded (a sample with its pid) or counted in the manifest's `lost`,
/// which the agent also reports on stderr.
#[test]
fn record_markers_burst_lost_lines_counted() {
    let ftrace = Ftrace::take();
    let dir = scratch("markers-burst");
    let n = 300_000u64;
    let script = format!(
        "import os\nfd = os.open('{}', os.O_WRONLY)\n\
         for i in range({n}): os.write(fd, b'burst %d' % i)\n",
        ftrace.path("trace_marker").display()
    );
    let out = record(
        &["-e", "cpu-clock", "--markers"],
        &dir,
        &["python3", "-c", &script],
    );
    let archive = archive_of(&out);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    let markers = m.markers.as_ref().unwrap();
    let writer = m.command.as_ref().unwrap().pid.unwrap();
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    let print = parsed
        .event_names
        .iter()
        .position(|n| n == "ftrace:print")
        .unwrap();
    let ours = parsed
        .samples
        .iter()
        .filter(|s| s.attr_index == print && s.pid == writer)
        .count() as u64;
    eprintln!("burst of {n}: {ours} recorded, {} lost", markers.lost);
    assert!(ours <= n && ours > 0, "{ours}");
    assert!(ours + markers.lost >= n, "{ours} + {} < {n}", markers.lost);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if markers.lost > 0 {
        assert!(
            stderr.contains(&format!("LOST {} trace_marker lines", markers.lost)),
            "{stderr}"
        );
    }
}

/// A capture that fails after ftrace's settings were changed (its capture dir cannot be
/// made) puts them back: clock `global` and tracing off as before, nothing recorded.
#[test]
fn record_markers_setup_error_restores_trace_clock() {
    let ftrace = Ftrace::take();
    ftrace.write("trace_clock", "global");
    ftrace.write("tracing_on", "0");
    let out = Command::new(AGENT)
        .args([
            "record",
            "--markers",
            "-o",
            "/proc/kprof-no-such-dir",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/proc/kprof-no-such-dir"), "{stderr}");
    assert_eq!(ftrace.selected_clock(), "global");
    assert_eq!(ftrace.read("tracing_on").trim(), "0");
}
