//! `record --off-cpu` (issue 15): every context switch as a `sched:sched_switch` sample with
//! its raw fields and call chain, readable by Linux `perf script`; a missing tracefs is an
//! error naming it.

mod common;

use std::process::Command;

use common::*;

/// A capture of `sleep 0.3` under --off-cpu: the manifest says how off-CPU was recorded, the
/// tracepoint sits next to the on-CPU event, and Debian's `perf script` decodes the sleep's
/// switch-out (prev_state=S) with its nanosleep call chain.
#[test]
fn record_off_cpu_perf_script_lists_switches() {
    require_root();
    let dir = scratch("off-cpu");
    let out = record(
        &["-e", "cpu-clock", "-g", "--off-cpu"],
        &dir,
        &["sleep", "0.3"],
    );
    let archive = archive_of(&out);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    let off = m.off_cpu.as_ref().expect("manifest off_cpu entry");
    assert_eq!(off.method, "sched_switch-tracepoint");
    assert_eq!(off.event, "sched:sched_switch");
    let names: Vec<&str> = m.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["cpu-clock", "sched:sched_switch"]);
    let sw = &m.events[1];
    assert_eq!((sw.attr_type, sw.attr_config), (2, off.tracepoint_id));
    assert_eq!(sw.sample_period, Some(1));
    assert!(sw.samples > 0, "no switch recorded");

    let script = kprof_test_support::system::perf()
        .args(["script", "-i"])
        .arg(unpacked.join("perf.data"))
        .output()
        .expect("Debian's perf must be installed");
    let text = String::from_utf8_lossy(&script.stdout);
    assert!(
        script.status.success(),
        "perf script failed: {}",
        String::from_utf8_lossy(&script.stderr)
    );
    let listed = text.matches("sched:sched_switch:").count() as u64;
    assert_eq!(listed, sw.samples, "perf script lists every switch");
    let sleep_out = text
        .split("\n\n")
        .find(|s| s.contains("prev_comm=sleep") && s.contains("prev_state=S"))
        .unwrap_or_else(|| panic!("no switch-out of sleep in state S:\n{text}"));
    assert!(sleep_out.contains("schedule"), "{sleep_out}");
    assert!(sleep_out.contains("nanosleep"), "{sleep_out}");
}

/// A tracefs directory that is not one: one line naming the directory and the kernel
/// options, no capture left behind.
#[test]
fn record_off_cpu_missing_tracefs_named() {
    require_root();
    let dir = scratch("off-cpu-missing");
    let out = Command::new(AGENT)
        .args(["record", "--off-cpu", "-o"])
        .arg(&dir)
        .args(["--", "true"])
        .env("KPROF_TRACEFS", "/nonexistent/tracing")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in [
        "sched:sched_switch tracepoint is not available",
        "/nonexistent/tracing: no such directory",
        "CONFIG_FTRACE",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}
