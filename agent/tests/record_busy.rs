//! Must-hold items 1 and 2 of issue 2: a frame-pointer C program with one hot function, recorded
//! system-wide at 4 kHz with call chains, read back by linux-perf-data and by Debian's perf.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::*;

struct Capture {
    dir: PathBuf,
    busy: PathBuf,
    archive: PathBuf,
    unpacked: PathBuf,
}

/// One capture shared by the tests of this file (the recording is the expensive part).
fn capture() -> &'static Capture {
    static C: OnceLock<Capture> = OnceLock::new();
    C.get_or_init(|| {
        let (dir, busy) = workload("busy", "busy");
        let out = record(
            CPU_CLOCK_4K_CALLCHAINS,
            &dir.join("captures"),
            &[busy.to_str().unwrap(), "50"],
        );
        let archive = archive_of(&out);
        let unpacked = unpack(&archive, &dir);
        Capture {
            dir,
            busy,
            archive,
            unpacked,
        }
    })
}

/// Symbol of each of the busy process's samples, by our own symbolization ("?" outside busy).
fn busy_symbols(c: &Capture) -> (Vec<String>, i32) {
    let m = manifest(&c.unpacked);
    let pid = m.command.as_ref().unwrap().pid.unwrap();
    let parsed = parse_perf_data(&c.unpacked.join("perf.data"));
    let elf = ElfSymbols::load(&c.busy);
    let busy_path = c.busy.to_str().unwrap();
    let syms = parsed
        .samples
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| match map_of(&parsed.maps, pid, s.ip) {
            Some(map) if map.path == busy_path => elf.lookup(s.ip, map).unwrap_or("?").to_string(),
            Some(map) => format!("?{}", map.path),
            None => "?".to_string(),
        })
        .collect();
    (syms, pid)
}

/// At least 80% of the busy process's samples fall in its hot function.
#[test]
fn record_perfdata_busy_hot_function_dominates() {
    let c = capture();
    let (syms, _) = busy_symbols(c);
    assert!(syms.len() >= 50, "too few samples of busy: {}", syms.len());
    let hot = syms.iter().filter(|s| *s == "hot").count();
    let share = hot as f64 / syms.len() as f64;
    assert!(
        share >= 0.80,
        "hot() has {hot} of {} samples ({:.1}%)",
        syms.len(),
        share * 100.0
    );
}

/// The manifest describes the capture: event, command exit status, digest of perf.data.
#[test]
fn record_manifest_busy_describes_capture() {
    let c = capture();
    let m = manifest(&c.unpacked);
    assert_eq!(m.schema, kprof_capture::MANIFEST_SCHEMA);
    assert_eq!(m.events.len(), 1);
    let e = &m.events[0];
    assert_eq!(
        (e.name.as_str(), e.requested.as_deref(), e.sample_freq),
        ("cpu-clock", Some("cpu-clock"), Some(4000))
    );
    assert!(e.samples > 0 && e.lost == 0);
    let cmd = m.command.as_ref().unwrap();
    assert_eq!(cmd.exit_code, Some(0));
    assert_eq!(cmd.argv[1], "50");
    assert_eq!(m.stop_reason, "command-exited");
    assert!(m.callchain);
    let data = std::fs::read(c.unpacked.join("perf.data")).unwrap();
    assert_eq!(m.perf_data.size, data.len() as u64);
    let sha = {
        use sha2::Digest;
        hex(&sha2::Sha256::digest(&data))
    };
    assert_eq!(m.perf_data.sha256, sha);
    assert!(m.stop_time_ns > m.start_time_ns);
    let kallsyms = std::fs::read_to_string(c.unpacked.join("kallsyms")).unwrap();
    assert!(
        kallsyms.lines().count() > 1000,
        "kallsyms snapshot too small"
    );
    assert!(c.unpacked.join("modules").is_file());
    // Mode 0600, and the sample count in the manifest is what is in perf.data.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&c.archive).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let parsed = parse_perf_data(&c.unpacked.join("perf.data"));
    assert_eq!(parsed.samples.len() as u64, e.samples);
    assert_eq!(parsed.event_names, vec!["cpu-clock".to_string()]);
    assert!(parsed.samples.iter().all(|s| !s.callchain.is_empty()));
}

/// Debian's perf script and perf report read the capture without warnings, and perf's top
/// symbol for busy is ours.
#[test]
fn report_perfdata_debian_perf_agrees() {
    let c = capture();
    let data = c.unpacked.join("perf.data");
    let data = data.to_str().unwrap();
    let bad = |stderr: &str| {
        stderr
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                [
                    "warn",
                    "error",
                    "fail",
                    "can't",
                    "cannot",
                    "unknown",
                    "unsupported",
                    "invalid",
                    "corrupt",
                    "lost",
                ]
                .iter()
                .any(|w| l.contains(w))
            })
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let (script, err) = perf(&["script", "-i", data]);
    assert!(bad(&err).is_empty(), "perf script complained: {err}");
    assert!(
        script.lines().any(|l| l.contains("hot")),
        "perf script shows no hot()"
    );

    let (_, pid) = busy_symbols(c);
    let pid_s = pid.to_string();
    let (report, err) = perf(&[
        "report",
        "--stdio",
        "-i",
        data,
        "--pid",
        &pid_s,
        "--no-children",
        "-g",
        "none",
        "--sort",
        "sym",
    ]);
    assert!(bad(&err).is_empty(), "perf report complained: {err}");
    // Rows are `  95.12%  [.] hot`; take the largest (perf does not always sort filtered output).
    let perf_top = report
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let pct: f64 = l
                .split_whitespace()
                .next()?
                .strip_suffix('%')?
                .parse()
                .ok()?;
            Some((pct, l.split_whitespace().last()?.to_string()))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or_else(|| panic!("no rows in perf report:\n{report}"))
        .1;

    let (syms, _) = busy_symbols(c);
    let mut counts = std::collections::BTreeMap::new();
    for s in &syms {
        *counts.entry(s.as_str()).or_insert(0usize) += 1;
    }
    let ours = counts
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(s, _)| s.to_string())
        .unwrap();
    assert_eq!(perf_top, ours, "perf report:\n{report}");
    assert_eq!(ours, "hot");
}

/// Parses the GNU build-id note out of /sys/kernel/notes (independently of the agent's reader).
fn kernel_build_id() -> String {
    let d = std::fs::read("/sys/kernel/notes").unwrap();
    let mut off = 0;
    while off + 12 <= d.len() {
        let u = |o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().unwrap()) as usize;
        let (nsz, dsz, ty) = (u(off), u(off + 4), u(off + 8));
        let name = off + 12;
        let desc = name + nsz.div_ceil(4) * 4;
        if ty == 3 && &d[name..name + nsz] == b"GNU\0" {
            return hex(&d[desc..desc + dsz]);
        }
        off = desc + dsz.div_ceil(4) * 4;
    }
    panic!("no build-id in /sys/kernel/notes");
}

/// `perf buildid-list` shows the kernel's build-id from /sys/kernel/notes and busy's from readelf.
#[test]
fn buildid_perfdata_matches_kernel_and_readelf() {
    let c = capture();
    let data = c.unpacked.join("perf.data");
    let (list, err) = perf(&["buildid-list", "-i", data.to_str().unwrap()]);
    assert!(!err.to_ascii_lowercase().contains("warn"), "{err}");
    let ids: std::collections::BTreeMap<&str, &str> = list
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(id, p)| (p.trim(), id)))
        .collect();
    assert_eq!(
        ids.get("[kernel.kallsyms]").copied(),
        Some(kernel_build_id().as_str()),
        "{list}"
    );
    let readelf = std::process::Command::new("readelf")
        .arg("-n")
        .arg(&c.busy)
        .output()
        .unwrap();
    let readelf = String::from_utf8_lossy(&readelf.stdout);
    let busy_id = readelf
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("busy has a build-id");
    assert_eq!(
        ids.get(c.busy.to_str().unwrap()).copied(),
        Some(busy_id),
        "{list}"
    );
    // linux-perf-data reads the same table.
    let parsed = parse_perf_data(&data);
    assert_eq!(
        parsed
            .build_ids
            .get(c.busy.to_str().unwrap())
            .map(String::as_str),
        Some(busy_id)
    );
    let _ = &c.dir;
}
