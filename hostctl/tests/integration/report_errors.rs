//! Bad input to `kprofctl report`: one clear message naming the file, a non-zero exit where
//! nothing can be shown, no panic; damaged data after good samples is shown with a warning.

use crate::render_support::capture;
use crate::report_common::{assert_clear_failure, compile, kprofctl, perf_record, recorded};
use std::path::{Path, PathBuf};

fn tmp_copy(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

fn perf_bytes() -> Vec<u8> {
    std::fs::read(recorded().join("perf.data")).unwrap()
}

fn report(p: &Path) -> std::process::Output {
    kprofctl(&["report", p.to_str().unwrap()])
}

/// A perf.data cut in half is refused, naming the file and saying it is truncated.
#[test]
fn report_perfdata_truncated_fails_clearly() {
    let b = perf_bytes();
    let (_d, p) = tmp_copy("perf.data", &b[..b.len() / 2]);
    assert_clear_failure(&report(&p), "truncated");
}

/// A data section size of 2^60 bytes is refused without trying to allocate it.
#[test]
fn report_perfdata_absurd_size_fails_clearly() {
    let mut b = perf_bytes();
    b[48..56].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let (_d, p) = tmp_copy("perf.data", &b);
    assert_clear_failure(&report(&p), "perf.data");
    let mut b = perf_bytes();
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_d, p) = tmp_copy("perf.data", &b);
    assert_clear_failure(&report(&p), "attribute size");
}

/// `perf record -e cpu-clock -c 250000 -g ./hotloop 12` with perf and the program on CPU 0
/// only: every record is in one ring, the program's MMAP2 before its samples. (Unpinned, the
/// exec's MMAP2 can be in the other CPU's ring, which perf writes after the first: damage
/// over the second half then hides the mapping of every sample before it, and the report
/// rightly shows them `[unknown]`, as one CI run did.) The directory, with `hotloop` at the
/// path perf recorded, lives as long as the caller keeps it: kprofctl finds the program
/// there, not in perf's build-id cache of some earlier run.
fn pinned_perf_bytes() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    compile(&dir.path().join("hotloop"), false);
    capture::run(
        std::process::Command::new("taskset")
            .env("PERF_CONFIG", "/dev/null")
            .current_dir(dir.path())
            .args([
                "-c",
                "0",
                "perf",
                "record",
                "-e",
                "cpu-clock",
                "-c",
                "250000",
                "-g",
            ])
            .args(["-o", "perf.data", "./hotloop", "12"]),
        "taskset (util-linux) and perf record (linux-perf)",
    );
    let bytes = std::fs::read(dir.path().join("perf.data")).unwrap();
    (dir, bytes)
}

/// Garbage over the second half of the records: the samples before it are shown, flagged.
/// perf woke up once for this recording, so all its records are one sorting round: the
/// reader must not drop the good half with the damaged one.
#[test]
fn report_perfdata_corrupted_records_keeps_good_samples() {
    let (_program, mut b) = pinned_perf_bytes();
    let data_off = u64::from_le_bytes(b[40..48].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(b[48..56].try_into().unwrap()) as usize;
    let from = data_off + data_len / 2;
    for (i, x) in b[from..data_off + data_len].iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    let (_d, p) = tmp_copy("perf.data", &b);
    let out = report(&p);
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("perf.data is damaged"), "{err}");
    assert!(err.contains("samples read before it"), "{err}");
    assert!(text.contains("hot_loop"), "{text}");
}

/// Not a capture at all: the first bytes are named.
#[test]
fn report_unknown_format_fails_clearly() {
    let (_d, p) = tmp_copy("notes.txt", b"hello, this is not a capture\n");
    assert_clear_failure(&report(&p), "not a kprof capture");
    assert_clear_failure(
        &report(Path::new("/nonexistent/capture.kprof.tar.gz")),
        "/nonexistent/capture.kprof.tar.gz",
    );
}

fn archive_of(dir: &Path, perf: &[u8]) -> PathBuf {
    let stage = dir.join("stage");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::write(stage.join("perf.data"), perf).unwrap();
    let out = dir.join("c.kprof.tar.gz");
    tar_czf(&out, &stage, "perf.data");
    out
}

/// Packs `stage/member` into the archive `out` with the system tar.
fn tar_czf(out: &Path, stage: &Path, member: &str) {
    let st = std::process::Command::new("tar")
        .arg("czf")
        .arg(out)
        .arg("-C")
        .arg(stage)
        .arg(member)
        .status()
        .unwrap();
    assert!(st.success());
}

/// An archive holding the perf.data reports like the bare file; cut or garbled, it fails clearly.
#[test]
fn report_archive_truncated_or_corrupted_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let a = archive_of(dir.path(), &perf_bytes());
    let out = report(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("hot_loop"));
    let bytes = std::fs::read(&a).unwrap();
    let (_d, cut) = tmp_copy("cut.kprof.tar.gz", &bytes[..bytes.len() * 2 / 3]);
    assert_clear_failure(&report(&cut), "bad kprof archive");
    let mut garbled = bytes.clone();
    for x in garbled[20..].iter_mut().step_by(7) {
        *x ^= 0x5a;
    }
    let (_d2, g) = tmp_copy("garbled.kprof.tar.gz", &garbled);
    assert_clear_failure(&report(&g), "garbled.kprof.tar.gz");
}

/// An archive without perf.data is named as such.
#[test]
fn report_archive_without_perfdata_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let stage = dir.path().join("s");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::write(stage.join("kallsyms"), "").unwrap();
    let a = dir.path().join("x.kprof.tar.gz");
    tar_czf(&a, &stage, "kallsyms");
    assert_clear_failure(&report(&a), "no perf.data member");
}

/// The binary at the recorded path was rebuilt: reported as a mismatch with both build-ids
/// and not used.
#[test]
fn report_user_buildid_mismatch_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("hotloop");
    compile(&bin, false);
    perf_record(dir.path(), &["--no-buildid-cache"], "2");
    let old_id = kprof_id(&bin);
    compile(&bin, true);
    let new_id = kprof_id(&bin);
    assert_ne!(old_id, new_id);
    // A private HOME: perf's ~/.debug cache may hold the old binary from another test.
    let home = tempfile::tempdir().unwrap();
    let out = crate::report_common::kprofctl_command()
        .args([
            "report",
            dir.path().join("perf.data").to_str().unwrap(),
            "--format",
            "json",
        ])
        .env("HOME", home.path())
        .env("KPROF_CACHE_DIR", home.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&old_id) && err.contains(&new_id) && err.contains("not used"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let img = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "hotloop")
        .unwrap();
    assert_eq!(img["symbols"]["status"], "mismatch");
    assert_eq!(img["symbols"]["expected"], old_id.as_str());
    assert_eq!(img["symbols"]["found"], new_id.as_str());
    assert!(!v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["symbol"] == "hot_loop"));
}

fn kprof_id(p: &Path) -> String {
    kprof_test_support::readelf_build_id(p)
}

/// Asking for a function or event that is not there fails with the name.
#[test]
fn report_unknown_function_or_event_fails_clearly() {
    let p = recorded().join("perf.data");
    let p = p.to_str().unwrap();
    assert_clear_failure(
        &kprofctl(&["report", p, "--annotate", "no_such_fn"]),
        "no_such_fn",
    );
    assert_clear_failure(&kprofctl(&["report", p, "--event", "cycles"]), "cycles");
    assert_clear_failure(&kprofctl(&["report", p, "--ratio", "a-b"]), "A/B");
}

/// A missing file's reason is printed once by every command that reads one (it was printed
/// twice: the message quoted the I/O error that the error chain printed again).
#[test]
fn report_missing_file_reason_once() {
    let perf = recorded().join("perf.data");
    let perf = perf.to_str().unwrap();
    let missing_out = "/nonexistent-kprof-dir/out.txt";
    let cases: [&[&str]; 6] = [
        &["report", "/nonexistent"],
        &["report", "/nonexistent", "--format", "json"],
        &["symbols", "/nonexistent"],
        &["diff", "/nonexistent", perf],
        &["diff", perf, "/nonexistent"],
        &["report", perf, "-o", missing_out],
    ];
    for args in cases {
        let out = kprofctl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "{args:?}: {err}"
        );
        assert!(err.contains("/nonexistent"), "{args:?}: {err}");
    }
}

/// A decoy `vmlinux` (another build-id) in `--symbols`: the kernel's status is `mismatch` with
/// the recorded and the found id in `kprofctl symbols` (JSON and text) and in the report's
/// JSON, while its names still come from kallsyms.
#[test]
fn symbols_json_decoy_vmlinux_mismatch() {
    let decoy_dir = tempfile::tempdir().unwrap();
    let decoy = decoy_dir.path().join("vmlinux");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/two.c");
    kprof_test_support::cc(&["-O1", "-Wl,--build-id"], &src, &decoy);
    let found = kprof_id(&decoy);
    // A capture with kernel samples for sure (its program writes to /dev/null): hotloop's
    // rarely enters the kernel, and a kernel without samples has no row to check.
    let p = capture::shared().0.perf_data();
    let (p, s) = (p.to_str().unwrap(), decoy_dir.path().to_str().unwrap());

    let v = crate::report_perf::json(&["symbols", p, "--symbols", s, "--json"]);
    let row = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["image"] == "vmlinux")
        .unwrap_or_else(|| panic!("no vmlinux row: {v}"));
    let expected = row["build_id"].as_str().expect("recorded kernel build-id");
    assert_ne!(expected, found);
    assert_eq!(row["status"], "mismatch", "{row}");
    assert_eq!(row["expected"], expected, "{row}");
    assert_eq!(row["found"], found.as_str(), "{row}");
    assert_eq!(row["kallsyms"], true, "{row}");

    let out = kprofctl(&["symbols", p, "--symbols", s]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(" vmlinux "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("MISMATCH") && line.contains(&found) && line.contains(expected),
        "{line}"
    );

    let r = crate::report_perf::json(&["report", p, "--symbols", s, "--format", "json"]);
    let img = r["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "vmlinux")
        .unwrap();
    assert_eq!(img["symbols"]["status"], "mismatch", "{img}");
    assert_eq!(img["symbols"]["expected"], expected, "{img}");
    assert_eq!(img["symbols"]["found"], found.as_str(), "{img}");
    let kernel_named = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["image"] == "vmlinux")
        .any(|f| f["symbol"] != "[unknown]");
    assert!(kernel_named, "kallsyms names lost: {}", r["functions"]);
}
