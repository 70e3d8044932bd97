//! Comparing events and events that counted nothing: `--ratio` divides event counts (summed
//! sample periods), and every event without samples is warned about, on captures of Debian's
//! `perf record` and of the agent. cpu-clock and task-clock both count nanoseconds of the
//! workload, so sampled at periods 10 apart their count ratio is ~1 and their sample ratio ~10.

use crate::remote_support::{agent_binary, run_ok};
use crate::report_common::{compile, kprofctl};
use std::path::Path;
use std::process::Command;

/// Repetitions of the hot loop: ~1.2 s, so that 10 ms task-clock periods are ~120 samples
/// per CPU. The periods stay low (1 kHz and 100 Hz): under the load of the other tests the
/// kernel lowers perf_event_max_sample_rate and throttles a 10 kHz cpu-clock, and the
/// samples a throttled event loses are counts missing from its side of the ratio.
const REPS: &str = "100";

/// `kprofctl report CAPTURE --format json --ratio cpu-clock/task-clock`, and its stderr.
fn ratio_report(capture: &Path) -> (serde_json::Value, String) {
    let out = kprofctl(&[
        "report",
        capture.to_str().unwrap(),
        "--format",
        "json",
        "--ratio",
        "cpu-clock/task-clock",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// The count ratio is ~1 where the sample ratio is ~10; `warning` is in stderr and JSON.
fn assert_counts_and_warning(v: &serde_json::Value, stderr: &str, warning: &str) {
    let total = v["ratio_total"].as_f64().expect("ratio_total");
    let samples = |i: usize| v["events"][i]["total_samples"].as_f64().unwrap();
    let sample_ratio = samples(0) / samples(1);
    assert!((0.9..1.1).contains(&total), "count ratio {total}");
    assert!(
        (8.0..12.0).contains(&sample_ratio),
        "sample ratio {sample_ratio}"
    );
    assert!(
        stderr.contains(&format!("kprofctl: warning: {warning}")),
        "{stderr}"
    );
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains(warning)),
        "{warnings:?}"
    );
}

/// perf.data of `perf record` with two clocks at periods 10 apart and a software event that
/// never fires: the ratio is of counts, the silent event is warned about.
#[test]
fn report_perfdata_ratio_counts_zero_event_warned() {
    let dir = tempfile::tempdir().unwrap();
    compile(&dir.path().join("hotloop"), false);
    run_ok(
        kprof_test_support::system::perf()
            .current_dir(dir.path())
            .args([
                "record",
                "-e",
                "cpu-clock/period=1000000/,task-clock/period=10000000/,alignment-faults",
                "-o",
                "perf.data",
                "./hotloop",
                REPS,
            ]),
    );
    let (v, stderr) = ratio_report(&dir.path().join("perf.data"));
    assert_counts_and_warning(&v, &stderr, "event alignment-faults has no samples");
}

/// The agent's capture: its stderr and manifest name the event that counted nothing, and
/// kprofctl warns about it from the manifest's counter total.
#[test]
fn report_capture_agent_ratio_counts_zero_event_warned() {
    let dir = tempfile::tempdir().unwrap();
    compile(&dir.path().join("hotloop"), false);
    let out = run_ok(
        Command::new(agent_binary())
            .current_dir(dir.path())
            .args(["record", "-e"])
            .arg("cpu-clock/period=1000000/,task-clock/period=10000000/,emulation-faults")
            .args(["-o", "caps", "--", "./hotloop", REPS]),
    );
    let agent_err = String::from_utf8_lossy(&out.stderr);
    assert!(
        agent_err.contains("warning: event `emulation-faults` produced no samples (counter read 0"),
        "{agent_err}"
    );
    let archive = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let manifest = run_ok(Command::new("tar").args(["xzf", &archive, "-O", "manifest.json"]));
    let m: kprof_capture::Manifest = serde_json::from_slice(&manifest.stdout).unwrap();
    let faults = &m.events[2];
    assert_eq!((faults.count, faults.no_samples), (Some(0), true));
    assert!(m.events[0].count.is_some_and(|c| c > 0) && !m.events[0].no_samples);
    let (v, stderr) = ratio_report(Path::new(&archive));
    // The sample-weighted ratio estimates the counters' own ratio, read at the end.
    let counted = m.events[0].count.unwrap() as f64 / m.events[1].count.unwrap() as f64;
    let weighted = v["ratio_total"].as_f64().unwrap();
    assert!(
        (weighted / counted - 1.0).abs() < 0.05,
        "sample-weighted {weighted}, counters {counted}"
    );
    assert_counts_and_warning(
        &v,
        &stderr,
        "event emulation-faults has no samples: it counted nothing (counter total 0;",
    );
}
