//! `kprofctl report` on perf.data files that recorded no build-ids, as perf 6.1 writes them
//! for `perf record -z` and pipe mode (`-o -`): the images are found by their recorded path,
//! as `perf report` finds them, and are labelled "unverified: no build-id recorded".

use crate::report_common::kprofctl;
use crate::report_perf::{json, perf_report};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory with `two` (big_one does 5× small_one's work) compiled in it.
fn workdir() -> PathBuf {
    let dir = tempfile::Builder::new()
        .prefix("kprof-nobuildid-")
        .tempdir()
        .unwrap()
        .keep();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/two.c");
    kprof_test_support::cc(
        &["-g", "-O1", "-fno-omit-frame-pointer"],
        &src,
        &dir.join("two"),
    );
    dir
}

/// `sh -c SCRIPT` in `dir`, which must succeed.
fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .current_dir(dir)
        .args(["-c", script])
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `perf report`'s share of each `(dso, symbol)` of `dir/file`, in percent of all samples.
fn perf_shares(dir: &Path, file: &str) -> Vec<((String, String), f64)> {
    let counts = perf_report(dir, file);
    let total: u64 = counts.iter().map(|c| c.1).sum();
    assert!(total > 0, "perf report found no samples in {file}");
    counts
        .into_iter()
        .map(|(k, n)| (k, n as f64 * 100.0 / total as f64))
        .collect()
}

/// Asserts that kprofctl's JSON report `v` names big_one and small_one of `two` with
/// `perf report`'s shares (within a point), and that `two` is marked unverified at a file
/// under `expected_dir`.
fn assert_like_perf(v: &serde_json::Value, perf: &[((String, String), f64)], expected_dir: &Path) {
    for f in ["big_one", "small_one"] {
        let theirs = perf
            .iter()
            .find(|(k, _)| k.0 == "two" && k.1 == f)
            .unwrap_or_else(|| panic!("perf report lacks two/{f}: {perf:?}"))
            .1;
        let ours = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["image"] == "two" && x["symbol"] == f)
            .unwrap_or_else(|| panic!("kprofctl lacks two/{f}: {}", v["functions"]))["percent"]
            .as_f64()
            .unwrap();
        assert!(
            (ours - theirs).abs() <= 1.0,
            "{f}: kprofctl {ours:.2} %, perf report {theirs:.2} %"
        );
    }
    let two = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "two")
        .unwrap();
    assert_eq!(two["symbols"]["status"], "unverified", "{two}");
    assert_eq!(two["symbols"]["why"], "no build-id recorded", "{two}");
    let used = Path::new(two["symbols"]["path"].as_str().unwrap());
    assert!(used.starts_with(expected_dir), "{two}");
}

/// Asserts that the text report labels `two` unverified and that one warning names it.
fn assert_text_labels(args: &[&str]) {
    let out = kprofctl(args);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let row = text
        .lines()
        .find(|l| l.contains(" two ") && l.contains("unverified"))
        .unwrap_or_else(|| panic!("no unverified row for two:\n{text}"));
    assert!(row.contains("no build-id recorded"), "{row}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("unverified: no build-id recorded"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("two"), "{err}");
}

/// `perf record -z` as users type it (perf 6.1 then writes no build-id table): with the
/// binary moved to a `--symbols` dir, big_one and small_one get perf report's shares.
#[test]
fn report_perfdata_compressed_no_buildid_found_by_name() {
    let dir = workdir();
    sh(&dir, "perf record -z -o z.data ./two 2>/dev/null");
    let perf = perf_shares(&dir, "z.data");
    // Only the symbol path has it now: the recorded path is gone.
    let symbols = dir.join("symbols");
    std::fs::create_dir(&symbols).unwrap();
    std::fs::rename(dir.join("two"), symbols.join("two")).unwrap();
    let z = dir.join("z.data");
    let (z, s) = (z.to_str().unwrap(), symbols.to_str().unwrap());
    let v = json(&["report", z, "--symbols", s, "--format", "json"]);
    assert_like_perf(&v, &perf, &symbols);
    assert_text_labels(&["report", z, "--symbols", s]);
    let html = kprofctl(&["report", z, "--symbols", s, "--format", "html"]);
    assert!(html.status.success());
    assert!(String::from_utf8_lossy(&html.stdout).contains("unverified: no build-id recorded"));
}

/// Pipe mode saved by `cat` (no build-ids, no `perf inject -b`): on this host the recorded
/// path is the file, and big_one and small_one get perf report's shares.
#[test]
fn report_perfdata_pipe_no_buildid_found_at_recorded_path() {
    let dir = workdir();
    sh(&dir, "perf record -o - ./two 2>/dev/null | cat > p.data");
    let perf = perf_shares(&dir, "p.data");
    let p = dir.join("p.data");
    let p = p.to_str().unwrap();
    let v = json(&["report", p, "--format", "json"]);
    assert_like_perf(&v, &perf, &dir);
    assert_text_labels(&["report", p]);
}
