//! Shared by the render and diff CLI tests: the recorded C program, headless Chromium, and
//! running kprofctl. The first two are the files the unit tests use.

pub use kprof_test_support::report::{capture, chromium, phases};

use std::path::Path;
use std::process::Output;

/// Runs kprofctl with `args`, with an empty kprof.toml search and no stored index.
pub fn kprofctl(args: &[&str], cwd: &Path) -> Output {
    crate::report_common::kprofctl_command()
        .args(args)
        .current_dir(cwd)
        .env("KPROF_CACHE_DIR", cwd.join("cache"))
        .output()
        .expect("kprofctl runs")
}

/// [`kprofctl`] that must succeed; returns its standard output.
pub fn kprofctl_ok(args: &[&str], cwd: &Path) -> String {
    let out = kprofctl(args, cwd);
    assert!(
        out.status.success(),
        "kprofctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `kprofctl report perf.data --symbols . --format FORMAT [-o OUT]` in `dir`, which must
/// succeed; returns its standard output.
pub fn report(dir: &Path, format: &str, out: Option<&str>) -> String {
    let mut args = vec!["report", "perf.data", "--symbols", ".", "--format", format];
    if let Some(out) = out {
        args.extend(["-o", out]);
    }
    kprofctl_ok(&args, dir)
}

/// The GNU build-id of an ELF file, as `readelf -n` prints it.
pub fn build_id(elf: &Path) -> String {
    kprof_test_support::readelf_build_id(elf)
}

/// The `perf report` header's sample count of a perf.data.
pub fn perf_sample_count(perf_data: &Path) -> u64 {
    let out = kprof_test_support::system::perf()
        .args(["report", "--stdio", "-i"])
        .arg(perf_data)
        .output()
        .expect("perf report runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("# Samples: "))
        .expect("perf report prints the sample count");
    line["# Samples: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .expect("a count")
}
