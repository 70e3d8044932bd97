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

static FTRACE: Mutex<()> = Mutex::new(());
const TRACEFS: &str = "/sys/kernel/tracing";

/// A shell busy loop of about a tenth of a second on this host.
const BUSY: &str = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{TRACEFS}/{name}")).unwrap()
}

fn selected_clock() -> String {
    let c = read("trace_clock");
    let start = c.find('[').unwrap() + 1;
    c[start..start + c[start..].find(']').unwrap()].to_string()
}

/// Puts ftrace's clock and tracing_on back as they were when made, whatever the test did.
struct Restore(String, String);

impl Restore {
    fn now() -> Restore {
        Restore(selected_clock(), read("tracing_on").trim().to_string())
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("{TRACEFS}/trace_clock"), &self.0);
        let _ = std::fs::write(format!("{TRACEFS}/tracing_on"), &self.1);
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
    require_root();
    let _lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore::now();
    let dir = scratch("markers");
    let script = format!(
        "{BUSY}; for p in one two three; do echo \"phase $p\" > {TRACEFS}/trace_marker; {BUSY}; done"
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

/// A tracefs that is not there: one line naming the directory, the kernel options and the
/// mount command; no capture left behind, ftrace's clock untouched.
#[test]
fn record_markers_missing_tracefs_named() {
    require_root();
    let _lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("markers-missing");
    let clock = selected_clock();
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
    assert_eq!(selected_clock(), clock);
}

/// With `global` clock and tracing off before: during the capture the clock is `perf` and
/// tracing on; after a capture stopped by SIGINT both are back to `global` and off, and the
/// capture is sealed.
#[test]
fn record_markers_sigint_restores_trace_clock() {
    require_root();
    let _lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore::now();
    std::fs::write(format!("{TRACEFS}/trace_clock"), "global").unwrap();
    std::fs::write(format!("{TRACEFS}/tracing_on"), "0").unwrap();
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
    assert_eq!(selected_clock(), "perf");
    assert_eq!(read("tracing_on").trim(), "1");
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(selected_clock(), "global");
    assert_eq!(read("tracing_on").trim(), "0");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.trim_end().ends_with(".kprof.tar.gz"), "{stdout}");
}

/// A burst of 300 000 lines written faster than the agent reads them: every line of the
/// writer is either recorded (a sample with its pid) or counted in the manifest's `lost`,
/// which the agent also reports on stderr.
#[test]
fn record_markers_burst_lost_lines_counted() {
    require_root();
    let _lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore::now();
    let dir = scratch("markers-burst");
    let n = 300_000u64;
    let script = format!(
        "import os\nfd = os.open('{TRACEFS}/trace_marker', os.O_WRONLY)\n\
         for i in range({n}): os.write(fd, b'burst %d' % i)\n"
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
    require_root();
    let _lock = FTRACE.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore::now();
    std::fs::write(format!("{TRACEFS}/trace_clock"), "global").unwrap();
    std::fs::write(format!("{TRACEFS}/tracing_on"), "0").unwrap();
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
    assert_eq!(selected_clock(), "global");
    assert_eq!(read("tracing_on").trim(), "0");
}
