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
