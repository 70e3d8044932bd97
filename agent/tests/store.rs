//! `info`, `list` and `rm` against real captures.

mod common;

use common::*;
use kprof_capture::info::BoardInfo;

/// `list` shows every capture with its command; `rm` deletes by id and refuses unknown ids.
#[test]
fn list_rm_captures_roundtrip() {
    require_root();
    let dir = scratch("store");
    let caps = dir.join("caps");
    let caps_s = caps.to_str().unwrap();
    let cpu_clock = ["-e", "cpu-clock", "-F", "100"];
    let a = archive_of(&record(
        &[&cpu_clock[..], &["--duration", "0.3"]].concat(),
        &caps,
        &[],
    ));
    let b = archive_of(&record(&cpu_clock, &caps, &["true", "arg"]));
    let id = |p: &std::path::Path| {
        p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .strip_suffix(".kprof.tar.gz")
            .unwrap()
            .to_string()
    };
    let (ida, idb) = (id(&a), id(&b));

    let out = run_agent(&["list", "-o", caps_s]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let row_a = text
        .lines()
        .find(|l| l.starts_with(&ida))
        .unwrap_or_else(|| panic!("{text}"));
    let row_b = text
        .lines()
        .find(|l| l.starts_with(&idb))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row_a.contains("(system-wide)"), "{row_a}");
    assert!(row_b.ends_with("true arg"), "{row_b}");

    let out = run_agent(&["list", "--json", "-o", caps_s]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    let size_b = std::fs::metadata(&b).unwrap().len();
    assert!(arr
        .iter()
        .any(|e| e["id"] == idb.as_str() && e["size"] == size_b && e["command"] == "true arg"));

    let out = run_agent(&["rm", "-o", caps_s, &ida, "no-such-capture"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-capture"), "{err}");
    assert!(!a.exists() && b.exists());
    let out = run_agent(&["rm", "-o", caps_s, &idb]);
    assert!(out.status.success());
    assert!(dir_entries(&caps).is_empty());
    let out = run_agent(&["rm", "-o", caps_s, "../etc"]);
    assert!(!out.status.success());
}

/// `info` prints the board facts as the BoardInfo JSON the host reads.
#[test]
fn info_json_board_facts() {
    require_root();
    let out = run_agent(&["info"]);
    assert!(out.status.success());
    let info: BoardInfo = serde_json::from_slice(&out.stdout).expect("info is BoardInfo JSON");
    assert_eq!(info.schema, kprof_capture::info::INFO_SCHEMA);
    assert_eq!(info.events.get("cpu-clock").map(String::as_str), Some("ok"));
    assert_eq!(info.pmus.get("software"), Some(&1));
    let notes = std::fs::read("/sys/kernel/notes").unwrap();
    let bid = info.kernel.build_id.expect("kernel build-id");
    let raw: Vec<u8> = (0..bid.len() / 2)
        .map(|i| u8::from_str_radix(&bid[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(notes.windows(raw.len()).any(|w| w == raw.as_slice()));
    assert!(info.sysctl.contains_key("perf_event_paranoid"));
    assert_eq!(
        info.modules.len(),
        std::fs::read_to_string("/proc/modules")
            .unwrap_or_default()
            .lines()
            .count()
    );
}

/// Rewrites the archive's manifest start time to `ns` (and repacks it with the system tar), as
/// a board that booted again without a real-time clock would have dated the capture.
fn redate(archive: &std::path::Path, ns: u64, dir: &std::path::Path) {
    let d = unpack(archive, dir);
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("manifest.json")).unwrap()).unwrap();
    m["start_time_ns"] = ns.into();
    m["stop_time_ns"] = (ns + 1).into();
    std::fs::write(d.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    let members: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let st = std::process::Command::new("tar")
        .arg("czf")
        .arg(archive)
        .arg("-C")
        .arg(&d)
        .args(members)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::remove_dir_all(&d).unwrap();
}

/// Each capture of a directory gets the next sequence number (in its id and manifest, with
/// this boot's id); `list` orders by it, so a capture dated 1970 after a reboot without a
/// clock still comes after the earlier one.
#[test]
fn list_captures_no_rtc_sequence_order() {
    require_root();
    let dir = scratch("sequence");
    let caps = dir.join("caps");
    let opts = ["-e", "cpu-clock", "-F", "100"];
    let a = archive_of(&record(&opts, &caps, &["true"]));
    let b = archive_of(&record(&opts, &caps, &["true"]));
    let name = |p: &std::path::Path| p.file_name().unwrap().to_str().unwrap().to_owned();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    for (archive, n) in [(&a, 1u64), (&b, 2)] {
        let m = manifest(&unpack(archive, &dir));
        let s = m
            .sequence
            .unwrap_or_else(|| panic!("no sequence in {}", name(archive)));
        assert_eq!(s.number, n);
        assert_eq!(s.boot_id.as_deref(), Some(boot.trim()));
        assert_eq!(kprof_capture::listing::sequence(&m.capture_id), Some(n));
        std::fs::remove_dir_all(dir.join("unpacked")).unwrap();
    }
    redate(&a, 3_600_000_000_000, &dir);
    redate(&b, 5_000_000_000, &dir);
    let out = run_agent(&["list", "--json", "-o", caps.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let order: Vec<(&str, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["time"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            (a.to_str().unwrap(), "1970-01-01T01:00:00Z"),
            (b.to_str().unwrap(), "1970-01-01T00:00:05Z")
        ]
    );
}
