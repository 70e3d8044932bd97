//! `record -e SUBSYS:EVENT` (issue 25): any tracepoint recorded at every hit with its raw
//! fields, next to sampling events and --off-cpu, decoded by Linux `perf script` from the
//! capture's tracing data; an unknown tracepoint is an error naming it and where it was
//! looked for.

mod common;

use std::process::Command;

use common::*;

/// `sched:sched_process_exec` with cpu-clock, --off-cpu and --markers: the manifest lists the
/// four events, the tracepoint at period 1 with its tracefs id, and Debian's `perf script`
/// shows the exec of `/usr/bin/true` with its decoded fields and call chain, the switches
/// and the marker line (the tracing data carries a system section and the ftrace one).
#[test]
fn record_tracepoint_perf_script_decodes_fields() {
    require_root();
    let dir = scratch("tracepoint");
    let out = record(
        &[
            "-e",
            "cpu-clock,sched:sched_process_exec",
            "-g",
            "--off-cpu",
            "--markers",
        ],
        &dir,
        &[
            "sh",
            "-c",
            "/usr/bin/true; echo between > /sys/kernel/tracing/trace_marker; /usr/bin/true",
        ],
    );
    let archive = archive_of(&out);
    let unpacked = unpack(&archive, &dir);
    let m = manifest(&unpacked);
    let names: Vec<&str> = m.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpu-clock",
            "sched:sched_process_exec",
            "sched:sched_switch",
            "ftrace:print"
        ]
    );
    let exec = &m.events[1];
    let id: u64 = std::fs::read_to_string("/sys/kernel/tracing/events/sched/sched_process_exec/id")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!((exec.attr_type, exec.attr_config), (2, id));
    assert_eq!(exec.sample_period, Some(1));
    assert!(exec.samples >= 2, "{exec:?}");

    let (text, _) = perf(&["script", "-i", unpacked.join("perf.data").to_str().unwrap()]);
    let execs: Vec<&str> = text
        .split("\n\n")
        .filter(|s| s.contains("sched:sched_process_exec:"))
        .collect();
    assert_eq!(execs.len() as u64, exec.samples, "{text}");
    let true_exec = execs
        .iter()
        .find(|s| s.contains("filename=/usr/bin/true"))
        .unwrap_or_else(|| panic!("no exec of /usr/bin/true:\n{text}"));
    assert!(true_exec.contains("old_pid="), "{true_exec}");
    // The call chain the -g asked for: the execve path in the kernel.
    assert!(true_exec.contains("bprm_execve"), "{true_exec}");
    assert!(
        text.contains("sched:sched_switch:"),
        "off-CPU switches decoded too"
    );
    let mark = text
        .lines()
        .find(|l| l.contains("ftrace:print:"))
        .unwrap_or_else(|| panic!("no marker line:\n{text}"));
    assert!(
        mark.trim_end().ends_with("tracing_mark_write: between"),
        "{mark}"
    );
}

/// An unknown tracepoint fails before anything is recorded, naming the tracepoint, the
/// directory it was looked for in and where the kernel lists its tracepoints.
#[test]
fn record_tracepoint_unknown_named() {
    require_root();
    let dir = scratch("tracepoint-unknown");
    let out = Command::new(AGENT)
        .args(["record", "-e", "mychardrv:no_such_event", "-o"])
        .arg(&dir)
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in [
        "unknown tracepoint `mychardrv:no_such_event`",
        "/sys/kernel/tracing/events/mychardrv/no_such_event",
        "available_events",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(dir_entries(&dir).is_empty());
}
