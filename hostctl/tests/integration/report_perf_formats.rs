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
        let (out, stderr) = report_json_in(elsewhere.path(), home.path(), extra);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
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

/// A tar member: its path and its size (of zeros).
type Member = (&'static str, u64);

/// `kprofctl report perf.data --format json ARGS` in `dir` with `HOME` and a private cache,
/// which must succeed: stdout and stderr.
fn report_json_in(dir: &Path, home: &Path, args: &[&str]) -> (String, String) {
    let cache = tempfile::tempdir().unwrap();
    let out = crate::report_common::kprofctl_command()
        .current_dir(dir)
        .args(["report", "perf.data", "--format", "json"])
        .args(args)
        .env("HOME", home)
        .env("KPROF_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// A `perf archive` tarball whose members are `(path, size)` zeros, bzip2-compressed: a few
/// KiB on disk for tens of MiB unpacked.
fn zeros_perf_archive(path: &Path, members: &[Member]) {
    let file = std::fs::File::create(path).unwrap();
    let bz = bzip2::write::BzEncoder::new(file, bzip2::Compression::best());
    let mut tar = tar::Builder::new(bz);
    for (name, size) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(*size);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, std::io::Read::take(std::io::repeat(0), *size))
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// Issue 36, item 5: a bzip2 bomb given as `--symbols x.tar.bz2` is refused at
/// `KPROF_MAX_INPUT_SIZE`, like a capture, and leaves nothing in the cache (before: unpacked
/// in full into the cache, whatever its size).
#[test]
fn report_perfarchive_bomb_limit_named() {
    let data = crate::report_common::recorded().join("perf.data");
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[Member], &str); 2] = [
        (
            "one.tar.bz2",
            &[("b/1234/elf", 48 << 20)],
            "member b/1234/elf claims 50331648 bytes",
        ),
        (
            "many.tar.bz2",
            &[("a/x", 12 << 20), ("a/y", 12 << 20), ("a/z", 12 << 20)],
            "decompresses to more than it may",
        ),
    ];
    for (name, members, needle) in cases {
        let bomb = dir.path().join(name);
        zeros_perf_archive(&bomb, members);
        assert!(std::fs::metadata(&bomb).unwrap().len() < 64 << 10);
        let cache = tempfile::tempdir().unwrap();
        let out = crate::report_common::kprofctl_command()
            .args(["report", data.to_str().unwrap(), "--symbols"])
            .arg(&bomb)
            .env("KPROF_CACHE_DIR", cache.path())
            .env("KPROF_MAX_INPUT_SIZE", "16M")
            .output()
            .unwrap();
        crate::report_common::assert_clear_failure(&out, needle);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("KPROF_MAX_INPUT_SIZE"),
            "the message says how to raise it"
        );
        let left: u64 = walk_sizes(cache.path());
        assert!(left < 1 << 20, "{left} bytes left in the cache");
    }
}

fn walk_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk_sizes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

/// Issue 36, item 3: the DWARF of a symbol file from a perf archive names a file of this host
/// (here the compiled source, overwritten with a secret after the recording, standing for
/// `~/.ssh/id_ed25519`): `--annotate` does not read it and says why (before: its text landed
/// in the report); a root the user names with `--source-prefix` is read as before.
#[test]
fn report_perfarchive_source_paths_not_read_from_host() {
    let dir = tempfile::Builder::new()
        .prefix("kprof-foreign-src-")
        .tempdir()
        .unwrap();
    let src_dir = dir.path().join("src");
    std::fs::create_dir(&src_dir).unwrap();
    let src = src_dir.join("hotloop.c");
    std::fs::copy(crate::report_common::source(), &src).unwrap();
    kprof_test_support::cc(
        &["-g", "-O1", "-fno-omit-frame-pointer"],
        &src,
        &dir.path().join("hotloop"),
    );
    let mut args = RECORD.to_vec();
    args.extend(["-o", "perf.data", "./hotloop", "8"]);
    perf(dir.path(), &args);
    perf(dir.path(), &["archive", "perf.data"]);
    std::fs::remove_file(dir.path().join("hotloop")).unwrap();
    let lines = std::fs::read_to_string(&src).unwrap().lines().count();
    std::fs::write(&src, "SECRET-KEY-MATERIAL\n".repeat(lines)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let report = |extra: &[&str]| {
        let mut args = vec!["--annotate", "hot_loop", "--symbols", "perf.data.tar.bz2"];
        args.extend_from_slice(extra);
        report_json_in(dir.path(), home.path(), &args).0
    };
    let json = report(&[]);
    assert!(json.contains("hot_loop"), "{json}");
    assert!(
        !json.contains("SECRET-KEY-MATERIAL"),
        "the host file was read"
    );
    assert!(json.contains("not read from this host"), "{json}");
    let root = format!("{}={}", src_dir.display(), src_dir.display());
    let json = report(&["--source-prefix", &root]);
    assert!(json.contains("SECRET-KEY-MATERIAL"), "a named root is read");
}
