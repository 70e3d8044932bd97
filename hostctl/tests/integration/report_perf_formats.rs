//! `kprofctl report` on the other perf.data forms Linux `perf record` writes: zstd-compressed
//! records (`-z`) and pipe mode (`-o -`), compared with `perf report` on the plain file
//! `perf inject` makes of the same recording.
//!
//! perf 6.1 writes no build-ids into `-z` files or pipe mode, and kprofctl then matches by path,
//! unverified (report_no_buildid.rs); these check the build-id path: the `-z` recordings add
//! `--buildid-mmap`, the pipes go through `perf inject
//! -b`, which adds HEADER_BUILD_ID records to the stream for the user objects with samples
//! (perf 6.1 adds none for the kernel, hence user-space events only).

use crate::report_common::{compile, kprofctl, line_of};
use crate::report_perf::{assert_top10_json, assert_top10_matches, perf_report};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory with the `hotloop` workload compiled in it.
fn workdir() -> PathBuf {
    let dir = tempfile::Builder::new()
        .prefix("kprof-formats-")
        .tempdir()
        .unwrap()
        .keep();
    compile(&dir.join("hotloop"), false);
    dir
}

/// Runs `perf ARGS` in `dir`, which must succeed.
fn perf(dir: &Path, args: &[&str]) {
    let out = kprof_test_support::system::perf()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running perf (Debian's linux-perf)");
    assert!(
        out.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `perf record` options of the report tests (fixed period, call chains), user space only:
/// without perf's build-id table (`-z`, pipe mode) the kernel's build-id is not recorded, and
/// kprofctl rightly does not take the host's kallsyms for an unknown kernel.
const RECORD: [&str; 6] = ["record", "-e", "cpu-clock:u", "-c", "250000", "-g"];

/// A `-z --buildid-mmap` recording gives the top 10 functions and counts `perf report` gives on the same
/// samples decompressed into a plain file by `perf inject`.
#[test]
fn report_perfdata_compressed_top10_matches_perf_report() {
    let dir = workdir();
    let mut args = RECORD.to_vec();
    // perf 6.1 writes no build-id table for `-z` files; `--buildid-mmap` puts the build-ids
    // in the MMAP2 records instead, which kprofctl matches like the table's.
    args.extend(["-z", "--buildid-mmap", "-o", "z.data", "./hotloop", "12"]);
    perf(&dir, &args);
    perf(&dir, &["inject", "-i", "z.data", "-o", "plain.data"]);
    let expected = perf_report(&dir, "plain.data");
    assert_top10_matches(&expected, &["report", dir.join("z.data").to_str().unwrap()]);
}

/// Cuts the zstd data of a `PERF_RECORD_COMPRESSED` record of the perf.data `b` in
/// half, as a write that stopped mid-record would, and fills the freed bytes with 8-byte
/// FINISHED_ROUND records so that the file's layout stays intact.
fn cut_compressed(b: &mut [u8]) {
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (off, len) = (u64_at(b, 40) as usize, u64_at(b, 48) as usize);
    let mut compressed = Vec::new();
    let mut at = off;
    while at < off + len {
        let ty = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let size = u16::from_le_bytes([b[at + 6], b[at + 7]]) as usize;
        if ty == 81 {
            compressed.push((at, size));
        }
        at += size;
    }
    assert!(
        compressed.len() >= 2,
        "{} COMPRESSED records",
        compressed.len()
    );
    // The largest after the first (which holds the synthesized mmaps): one full of samples.
    let (at, size) = *compressed[1..].iter().max_by_key(|c| c.1).unwrap();
    let cut = size - 8 * ((size - 8) / 16);
    b[at + 6..at + 8].copy_from_slice(&(cut as u16).to_le_bytes());
    for filler in (at + cut..at + size).step_by(8) {
        b[filler..filler + 8].copy_from_slice(&[68, 0, 0, 0, 0, 0, 8, 0]);
    }
}

/// A `-z` file whose compressed stream is cut in a record reports the samples before the cut
/// with a "damaged" warning.
#[test]
fn report_perfdata_compressed_cut_keeps_samples_damaged() {
    let dir = workdir();
    let mut args = RECORD.to_vec();
    // A small ring (`-m 4`) makes perf flush, and so write a compressed record, often.
    args.extend([
        "-z",
        "--buildid-mmap",
        "-m",
        "4",
        "-o",
        "z.data",
        "./hotloop",
        "12",
    ]);
    perf(&dir, &args);
    let mut bytes = std::fs::read(dir.join("z.data")).unwrap();
    let total = samples_of(&dir.join("z.data")).0;
    cut_compressed(&mut bytes);
    let cut = dir.join("cut.data");
    std::fs::write(&cut, &bytes).unwrap();
    let (kept, stderr) = samples_of(&cut);
    assert!(kept > 0 && kept < total, "{kept} of {total} samples kept");
    assert!(stderr.contains("damaged"), "no damage warning: {stderr}");
}

/// The samples `kprofctl report FILE` counts, with its stderr.
fn samples_of(file: &Path) -> (u64, String) {
    let out = kprofctl(&["report", file.to_str().unwrap(), "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["samples"].as_u64().unwrap())
        .sum();
    (n, stderr)
}

/// `sh -c SCRIPT` in `dir`, which must succeed; the script sees `$KPROFCTL`, and neither it
/// nor perf sees the user's configuration (a private HOME).
fn sh(dir: &Path, script: &str) {
    let cache = tempfile::tempdir().unwrap();
    let out = kprof_test_support::system::isolate(&mut Command::new("sh"), cache.path())
        .env("PERF_CONFIG", "/dev/null")
        .current_dir(dir)
        .args(["-c", script])
        .env("KPROFCTL", env!("CARGO_BIN_EXE_kprofctl"))
        .env("KPROF_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `perf record -o -` through `perf inject -b`: the pipe-mode file gives the top 10 functions
/// and counts that `perf report` gives on it; the build-ids come from HEADER_BUILD_ID records.
#[test]
fn report_perfdata_pipe_file_top10_matches_perf_report() {
    let dir = workdir();
    sh(
        &dir,
        "perf record -e cpu-clock:u -c 250000 -g -o - ./hotloop 12 2>/dev/null | perf inject -b > p.data",
    );
    // perf 6.1's `perf inject -i p.data -o plain.data` writes a file its own `perf report`
    // refuses ("failed to process sample"), so perf reads the pipe-mode file itself.
    let expected = perf_report(&dir, "p.data");
    assert_top10_matches(&expected, &["report", dir.join("p.data").to_str().unwrap()]);
}

/// `perf record -o - … | kprofctl report -` reads a real pipe (standard input) and gives what
/// `perf report` gives on the same stream saved by `tee`.
#[test]
fn report_stdin_pipe_top10_matches_perf_report() {
    let dir = workdir();
    sh(
        &dir,
        "perf record -e cpu-clock:u -c 250000 -g -o - ./hotloop 12 2>/dev/null | perf inject -b \
         | tee p.data | \"$KPROFCTL\" report - --format json > report.json",
    );
    // perf 6.1's `perf inject -i p.data -o plain.data` writes a file its own `perf report`
    // refuses ("failed to process sample"), so perf reads the pipe-mode file itself.
    let expected = perf_report(&dir, "p.data");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_top10_json(&expected, &v);
}

/// A pipe-mode stream cut inside a record reports the samples before the cut with a
/// "damaged" warning.
#[test]
fn report_perfdata_pipe_cut_keeps_samples_damaged() {
    let dir = workdir();
    sh(
        &dir,
        "perf record -e cpu-clock:u -c 250000 -g -o - ./hotloop 12 2>/dev/null | perf inject -b > p.data",
    );
    let bytes = std::fs::read(dir.join("p.data")).unwrap();
    let total = samples_of(&dir.join("p.data")).0;
    let cut = dir.join("cut.data");
    // An odd length: the cut falls inside a record, not between two.
    std::fs::write(&cut, &bytes[..(bytes.len() * 2 / 3) | 1]).unwrap();
    let (kept, stderr) = samples_of(&cut);
    assert!(kept > 0 && kept < total, "{kept} of {total} samples kept");
    assert!(stderr.contains("damaged"), "no damage warning: {stderr}");
}

/// `perf archive` of a capture, moved with it to another directory, the workload deleted and
/// no `~/.debug`: `--symbols perf.data.tar.bz2` names the hot function with its source line.
#[test]
fn report_perfarchive_moved_hot_loop_source_line() {
    let dir = workdir();
    let mut args = RECORD.to_vec();
    args.extend(["-o", "perf.data", "./hotloop", "12"]);
    perf(&dir, &args);
    perf(&dir, &["archive", "perf.data"]);
    let elsewhere = tempfile::tempdir().unwrap();
    for f in ["perf.data", "perf.data.tar.bz2"] {
        std::fs::rename(dir.join(f), elsewhere.path().join(f)).unwrap();
    }
    std::fs::remove_file(dir.join("hotloop")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let report = |extra: &[&str]| {
        let cache = tempfile::tempdir().unwrap();
        let out = crate::report_common::kprofctl_command()
            .current_dir(elsewhere.path())
            .args(["report", "perf.data", "--format", "json"])
            .args(extra)
            .env("HOME", home.path())
            .env("KPROF_CACHE_DIR", cache.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, stderr)
    };
    // Without the archive nothing names the workload's functions any more.
    let (v, _) = report(&[]);
    assert_ne!(v["functions"][0]["symbol"], "hot_loop");
    let (v, stderr) = report(&["--symbols", "perf.data.tar.bz2"]);
    let f = &v["functions"][0];
    assert_eq!(f["symbol"], "hot_loop", "{stderr}");
    let file = f["hot_line"]["file"].as_str().unwrap();
    assert!(file.ends_with("hotloop.c"), "{file}");
    assert_eq!(
        f["hot_line"]["line"].as_u64(),
        Some(u64::from(line_of("HOT_LINE"))),
        "{f}"
    );
}

/// A `perf archive` tarball cut in half is refused with one clear message naming it.
#[test]
fn report_perfarchive_truncated_fails_clearly() {
    let dir = workdir();
    let mut args = RECORD.to_vec();
    args.extend(["-o", "perf.data", "./hotloop", "2"]);
    perf(&dir, &args);
    perf(&dir, &["archive", "perf.data"]);
    let bytes = std::fs::read(dir.join("perf.data.tar.bz2")).unwrap();
    let cut = dir.join("cut.tar.bz2");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = kprofctl(&[
        "report",
        dir.join("perf.data").to_str().unwrap(),
        "--symbols",
        cut.to_str().unwrap(),
    ]);
    crate::report_common::assert_clear_failure(&out, "bad perf archive");
}
