//! Event sets and sampling scope: several events at once, `-p PID`, `-C CPUS`.

mod common;

use std::process::Command;

use common::*;

/// Two events sample together; every sample names its event and the manifest's per-event
/// counts equal what perf.data holds for each.
#[test]
fn record_perfdata_two_events_attributed() {
    let (dir, busy) = workload("events", "busy");
    let out = record(
        &["-e", "cpu-clock,page-faults/period=1/", "-F", "2000"],
        &dir.join("caps"),
        &[busy.to_str().unwrap(), "10"],
    );
    let unpacked = unpack(&archive_of(&out), &dir);
    let m = manifest(&unpacked);
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    assert_eq!(
        parsed.event_names,
        vec!["cpu-clock".to_string(), "page-faults".to_string()]
    );
    assert_eq!(m.events[1].sample_period, Some(1));
    assert_eq!(m.events[0].sample_freq, Some(2000));
    for (i, e) in m.events.iter().enumerate() {
        let n = parsed.samples.iter().filter(|s| s.attr_index == i).count() as u64;
        assert_eq!(n, e.samples, "event {}", e.name);
        assert!(n > 0, "no samples of {}", e.name);
    }
    // Every process start faults pages in: busy itself has page-fault samples.
    let pid = m.command.unwrap().pid.unwrap();
    assert!(parsed
        .samples
        .iter()
        .any(|s| s.attr_index == 1 && s.pid == pid));
    let (report, err) = perf(&[
        "report",
        "--stdio",
        "-i",
        unpacked.join("perf.data").to_str().unwrap(),
        "--sort",
        "comm",
    ]);
    assert!(
        report.contains("of event 'cpu-clock'") && report.contains("of event 'page-faults'"),
        "{report}{err}"
    );
}

/// A software event that never fires (no alignment faults on x86) opens with cpu-clock:
/// stderr warns about it by name, the manifest flags it with its counter total 0, and the
/// event that sampled has a counter total of its own.
#[test]
fn record_manifest_zero_count_event_flagged() {
    let (dir, busy) = workload("zero-count", "busy");
    let out = record(
        &["-e", "cpu-clock,alignment-faults", "-F", "1000"],
        &dir.join("caps"),
        &[busy.to_str().unwrap(), "3"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "kprof-agent: warning: event `alignment-faults` produced no samples (counter read 0"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("kprof-agent: alignment-faults: 0 samples, 0 lost, 0 throttled"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("event `cpu-clock` produced no samples"),
        "{stderr}"
    );
    let m = manifest(&unpack(&archive_of(&out), &dir));
    let faults = &m.events[1];
    assert_eq!(
        (faults.samples, faults.count, faults.no_samples),
        (0, Some(0), true)
    );
    let clock = &m.events[0];
    assert!(clock.samples > 0 && !clock.no_samples);
    // cpu-clock counts nanoseconds: its total is at least a nanosecond per sample period.
    assert!(clock.count.is_some_and(|c| c >= clock.samples), "{clock:?}");
}

/// `-p PID` samples only that process and stops when it exits; `-C` limits the CPUs.
#[test]
fn record_perfdata_pid_and_cpu_scope() {
    let (dir, busy) = workload("scope", "busy");
    let caps = dir.join("caps");
    let mut child = Command::new(&busy).arg("60").spawn().unwrap();
    let pid = child.id() as i32;
    let out = record(&["-p", &pid.to_string(), "-e", "cpu-clock"], &caps, &[]);
    let _ = child.wait();
    let unpacked = unpack(&archive_of(&out), &dir);
    let m = manifest(&unpacked);
    assert_eq!(m.target_pid, Some(pid));
    assert_eq!(m.stop_reason, "target-exited");
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    assert!(!parsed.samples.is_empty());
    assert!(
        parsed.samples.iter().all(|s| s.pid == pid),
        "samples of other processes with -p"
    );

    let out = record(
        &[
            "-C",
            "0",
            "-e",
            "cpu-clock",
            "-F",
            "500",
            "--duration",
            "0.5",
        ],
        &caps,
        &[],
    );
    let archive = archive_of(&out);
    let d2 = dir.join("cpu0");
    std::fs::create_dir_all(&d2).unwrap();
    let unpacked = unpack(&archive, &d2);
    let m = manifest(&unpacked);
    assert_eq!(m.cpus, vec![0]);
    assert_eq!(m.stop_reason, "duration");
    assert_eq!(m.events[0].ids.len(), 1);
}

/// The agent records at the priority it was started with (here nice 5) unless `--nice` raises
/// it, and the command it profiles keeps the priority the agent was started with.
#[test]
fn record_priority_agent_raised_workload_kept() {
    let dir = scratch("nice");
    // The workload prints its parent's (the agent's) nice value, then its own.
    let probe = "cut -d' ' -f19 /proc/$PPID/stat; cut -d' ' -f19 /proc/$$/stat";
    for (options, agent_nice) in [(&[][..], "5"), (&["--nice", "-3"][..], "-3")] {
        let mut args = vec!["-n", "5", AGENT, "record", "-e", "cpu-clock"];
        args.extend_from_slice(options);
        let caps = dir.join("caps");
        args.extend(["-o", caps.to_str().unwrap(), "--", "sh", "-c", probe]);
        let out = Command::new("nice").args(&args).output().unwrap();
        archive_of(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines[..2], [agent_nice, "5"], "{stdout}");
    }
}

/// Without CAP_SYS_NICE, `--nice -19` says the priority could not be raised, and records anyway.
#[test]
fn record_priority_no_cap_sys_nice_noticed() {
    let dir = scratch("nice-nocap");
    let caps = dir.join("caps");
    let out = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-sys_nice",
            "--inh-caps",
            "-sys_nice",
            AGENT,
        ])
        .args(["record", "-e", "cpu-clock", "--nice", "-19"])
        .args(["-o", caps.to_str().unwrap()])
        .args(["--", "true"])
        .output()
        .expect("setpriv (util-linux)");
    archive_of(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot raise the agent's priority to nice -19"),
        "{err}"
    );
}
