//! `kprofctl report --callers` on user stacks of `perf record --call-graph dwarf` of a program
//! built without frame pointers: the callers come from the binary's `.eh_frame`; with
//! `--call-graph fp` the same program's paths end `[truncated]`.

use crate::report_common::kprofctl;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The unwinding demo of kprof-symbols' tests, built with -O2 -fomit-frame-pointer, and its
/// `perf record --call-graph dwarf` and `fp` recordings, made once.
fn recorded() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kprof-unwind-")
            .tempdir()
            .unwrap()
            .keep();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../crates/symbols/tests/data/unwind/unwind_demo.c");
        kprof_test_support::cc(
            &["-O2", "-g", "-fomit-frame-pointer"],
            &src,
            &dir.join("unwind_demo"),
        );
        for mode in ["dwarf", "fp"] {
            let out = kprof_test_support::system::perf()
                .current_dir(&dir)
                .args([
                    "record",
                    "--call-graph",
                    mode,
                    "-e",
                    "cpu-clock",
                    "-F",
                    "2000",
                ])
                .args(["-o", &format!("{mode}.data"), "./unwind_demo", "1"])
                .output()
                .expect("running perf");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The same program recorded by the agent, with its default zstd-compressed records.
        let out = Command::new(crate::remote_support::agent_binary())
            .current_dir(&dir)
            .args([
                "record",
                "--call-graph",
                "dwarf",
                "-e",
                "cpu-clock",
                "-F",
                "2000",
            ])
            .args(["-o", "agent", "--", "./unwind_demo", "1"])
            .output()
            .expect("running kprof-agent");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let archive = String::from_utf8(out.stdout).unwrap();
        let archive = archive.lines().last().expect("the archive's path");
        std::fs::rename(archive, dir.join("agent.data")).unwrap();
        dir
    })
}

fn callers(mode: &str) -> String {
    let dir = recorded();
    let out = kprofctl(&[
        "report",
        dir.join(format!("{mode}.data")).to_str().unwrap(),
        "--symbols",
        dir.join("unwind_demo").to_str().unwrap(),
        "--callers",
        "hot_leaf",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The share and name of each line of a callers tree: `(depth, percent, function)`.
fn tree(text: &str) -> Vec<(usize, f64, String)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let depth = (l.len() - l.trim_start().len()) / 2;
            let mut it = l.split_whitespace();
            let pct: f64 = it.next()?.strip_suffix('%')?.parse().ok()?;
            let _n = it.next()?;
            Some((depth, pct, it.next()?.to_string()))
        })
        .collect()
}

/// dwarf: hot_leaf ← middle ← outer ← main, each level at ≥ 95 %.
#[test]
fn report_callers_dwarf_full_path() {
    let text = callers("dwarf");
    let t = tree(&text);
    for (depth, name) in [(1, "middle"), (2, "outer"), (3, "main")] {
        assert!(
            t.iter()
                .any(|(d, p, f)| *d == depth && f == name && *p >= 95.0),
            "no {name} at depth {depth} with >= 95 %:\n{text}"
        );
    }
    assert!(!text.contains("[truncated]"), "{text}");
}

/// The agent's dwarf capture (zstd-compressed records in perf.data, SHA-256 checked against
/// its manifest) gives the same full path.
#[test]
fn report_callers_agent_dwarf_zstd_full_path() {
    let text = callers("agent");
    let t = tree(&text);
    for (depth, name) in [(1, "middle"), (2, "outer"), (3, "main")] {
        assert!(
            t.iter()
                .any(|(d, p, f)| *d == depth && f == name && *p >= 95.0),
            "no {name} at depth {depth} with >= 95 %:\n{text}"
        );
    }
}

/// fp: the frame-pointer chains of code without frame pointers end `[truncated]` right after
/// hot_leaf; no invented caller and no `middle`.
#[test]
fn report_callers_fp_truncated() {
    let text = callers("fp");
    let t = tree(&text);
    assert!(
        t.iter()
            .any(|(d, p, f)| *d == 1 && f == "[truncated]" && *p >= 90.0),
        "{text}"
    );
    assert!(!t.iter().any(|(_, _, f)| f == "middle"), "{text}");
}
