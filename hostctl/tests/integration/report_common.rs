//! Shared by the report tests: the C workload, recorded once with Linux `perf record`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workload source.
pub fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/hotloop.c")
}

/// Line number of a marker comment in the workload source.
pub fn line_of(marker: &str) -> u32 {
    let src = std::fs::read_to_string(source()).unwrap();
    src.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

/// Compiles the workload with `-g -fno-omit-frame-pointer`; `variant` changes the code (and so
/// the build-id) without changing the function names.
pub fn compile(out: &Path, variant: bool) {
    let mut flags = vec!["-g", "-O1", "-fno-omit-frame-pointer"];
    if variant {
        flags.extend(["-DVARIANT=1", "-fno-inline-small-functions", "-O2"]);
    }
    kprof_test_support::cc(&flags, &source(), out);
}

/// A directory with `hotloop` and `perf.data` from `perf record -e cpu-clock -g` on it, made
/// once per test binary.
pub fn recorded() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kprof-report-")
            .tempdir()
            .unwrap()
            .keep();
        compile(&dir.join("hotloop"), false);
        perf_record(&dir, &[], "12");
        dir
    })
}

/// `perf record -e cpu-clock -c 250000 -g OPTIONS -o perf.data ./hotloop REPS` in `dir`, which
/// must succeed. A fixed period (250 µs of cpu-clock) makes perf's period-sorted order equal
/// to the sample-count order kprofctl uses.
pub fn perf_record(dir: &Path, options: &[&str], reps: &str) {
    let out = kprof_test_support::system::perf()
        .current_dir(dir)
        .args(["record", "-e", "cpu-clock", "-c", "250000", "-g"])
        .args(options)
        .args(["-o", "perf.data", "./hotloop", reps])
        .output()
        .expect("running perf (Debian's linux-perf)");
    assert!(
        out.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The kprofctl under test, isolated from the user's setup (`kprof.toml`, `KPROF_*`, HOME,
/// `DEBUGINFOD_*`: `kprof_test_support::system::isolate`).
pub fn kprofctl_command() -> Command {
    kprof_test_support::kprofctl_command(Path::new(env!("CARGO_BIN_EXE_kprofctl")))
}

/// Runs kprofctl with a private build-id index.
pub fn kprofctl(args: &[&str]) -> Output {
    kprofctl_env(args, &[])
}

/// Runs kprofctl with a private build-id index and `env` set. No debuginfod server unless
/// `env` names one: the tests' results must not depend on the environment's.
pub fn kprofctl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    kprofctl_command()
        .args(args)
        .env("KPROF_CACHE_DIR", cache.path())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Asserts a clear failure: non-zero exit, one `kprofctl:` message containing `needle`,
/// and no panic.
pub fn assert_clear_failure(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(
        err.contains("kprofctl:") && err.contains(needle),
        "stderr lacks {needle:?}: {err}"
    );
}
