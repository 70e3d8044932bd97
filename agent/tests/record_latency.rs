//! `record --latency`, `--latency-user`, `--contention`, `--no-sample` (issue 37) on this
//! machine's kernel: an uprobe pair on a function of a test program, recorded at every hit
//! and read by Linux `perf script`; the build-id check that keeps a probe out of another
//! build; and a kernel without the kprobe PMU named as such.

mod common;

use std::path::Path;

use common::*;
use object::{Object, ObjectSegment, ObjectSymbol};

/// `PATH:OFFSET:BUILD_ID:pause_ms` for the agent, from the program's own symbol and segments.
fn pause_ms_spec(exe: &Path) -> String {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let addr = obj
        .symbols()
        .find(|s| s.name() == Ok("pause_ms"))
        .expect("pause_ms symbol")
        .address();
    let offset = obj
        .segments()
        .find_map(|s| {
            let (off, size) = s.file_range();
            (addr >= s.address() && addr < s.address() + size).then(|| off + (addr - s.address()))
        })
        .expect("pause_ms in a segment");
    let id = hex(obj.build_id().unwrap().expect("a build-id"));
    format!("{}:{offset:#x}:{id}:pause_ms", exe.display())
}

/// 5 calls of a 15 ms function: 5 entry and 5 return samples, the kernel's hit counts, the
/// manifest's probe entry, and perf script showing both events with the entry's call chain.
#[test]
fn record_latency_user_probe_pairs_read_by_perf() {
    let (dir, exe) = workload("latency-user", "pause");
    let spec = pause_ms_spec(&exe);
    let out = record(
        &["--no-sample", "--latency-user", &spec],
        &dir,
        &[exe.to_str().unwrap(), "5", "15"],
    );
    let unpacked = unpack(&archive_of(&out), &dir);
    let m = manifest(&unpacked);
    let names: Vec<&str> = m.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["probe_pause:pause_ms", "probe_pause:pause_ms__return"]
    );
    for e in &m.events {
        assert_eq!(
            (e.samples, e.count, e.sample_period),
            (5, Some(5), Some(1)),
            "{e:?}"
        );
    }
    assert_eq!(m.latency.len(), 1);
    let p = &m.latency[0];
    assert_eq!(
        (p.kind.as_str(), p.function.as_str()),
        ("uprobe", &*format!("{}:pause_ms", exe.display()))
    );
    assert_eq!(p.return_event, "probe_pause:pause_ms__return");
    let (text, _) = perf(&["script", "-i", unpacked.join("perf.data").to_str().unwrap()]);
    assert_eq!(text.matches("probe_pause:pause_ms:").count(), 5, "{text}");
    assert_eq!(
        text.matches("probe_pause:pause_ms__return:").count(),
        5,
        "{text}"
    );
    assert!(text.contains("pause_ms"), "{text}");
}

/// A build-id other than the file's is refused before anything is recorded, naming both.
#[test]
fn record_latency_user_other_build_refused() {
    let (dir, exe) = workload("latency-wrong-build", "pause");
    let spec = pause_ms_spec(&exe);
    let mut parts: Vec<&str> = spec.splitn(4, ':').collect();
    let real = parts[2].to_string();
    parts[2] = "00112233445566778899aabbccddeeff00112233";
    let out = record(
        &["--no-sample", "--latency-user", &parts.join(":")],
        &dir,
        &[exe.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&real) && err.contains("00112233445566778899aabbccddeeff00112233"),
        "{err}"
    );
    assert!(err.contains("not probing another build"), "{err}");
    assert!(
        dir_entries(&dir)
            .iter()
            .all(|e| !e.ends_with(".kprof.tar.gz")),
        "{:?}",
        dir_entries(&dir)
    );
}

/// A kernel function on a kernel without the kprobe PMU (this machine's has no KPROBES): the
/// error names the PMU and the kernel option; where the PMU exists, an unknown function is
/// named instead.
#[test]
fn record_latency_kernel_missing_pmu_or_function_named() {
    require_root();
    let dir = scratch("latency-kernel");
    let has_pmu = Path::new("/sys/bus/event_source/devices/kprobe").exists();
    let func = if has_pmu {
        "no_such_function_kprof"
    } else {
        "do_nanosleep"
    };
    let out = record(&["--no-sample", "--latency", func], &dir, &["true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    if has_pmu {
        assert!(
            err.contains(&format!("no kernel function `{func}`")),
            "{err}"
        );
    } else {
        assert!(
            err.contains("no kprobe PMU") && err.contains("CONFIG_KPROBE_EVENTS"),
            "{err}"
        );
    }
}

/// `--no-sample` alone records nothing and says what it needs.
#[test]
fn record_no_sample_needs_something_to_record() {
    let out = run_agent(&["record", "--no-sample", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--no-sample needs --latency"), "{err}");
}
