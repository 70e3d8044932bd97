//! A real capture for the renderers' tests: a small C program built with `-g`, recorded by
//! Debian's `perf record -e cpu-clock -g` (root, no PMU needed) and run through the
//! symbolizer. Built once per test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use kprof_symbols::profile::Profile;

/// The program: `spin` burns CPU in user space with an inlined `mix`, `chatter` writes to
/// /dev/null so that kernel stacks under `write(2)` are sampled too.
pub const PROGRAM: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline unsigned mix(unsigned x) { return x * 2654435761u ^ (x >> 13); }

__attribute__((noinline)) unsigned spin(unsigned n) {
    unsigned acc = 0;
    for (unsigned i = 0; i < n; i++)
        acc += mix(i + acc); /* kprof-hot-line */
    return acc;
}

__attribute__((noinline)) void chatter(int fd, int rounds) {
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < rounds; i++)
        if (write(fd, buf, sizeof buf) < 0) exit(1);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 300;
    int writes = argc > 2 ? atoi(argv[2]) : 200;
    int fd = open("/dev/null", O_WRONLY);
    unsigned total = 0;
    for (int r = 0; r < reps; r++) {
        total += spin(200000 + r); /* r: not hoistable out of the loop */
        chatter(fd, writes);
    }
    printf("%u\n", total);
    return 0;
}
"#;

/// A recorded capture: the directory with `prog`, `prog.c` and `perf.data`.
#[derive(Debug)]
pub struct Recorded {
    /// Removed when the capture is dropped.
    pub dir: tempfile::TempDir,
}

impl Recorded {
    /// `dir/perf.data`.
    pub fn perf_data(&self) -> PathBuf {
        self.dir.path().join("perf.data")
    }

    /// Symbolizes the capture with the program's directory as symbol path.
    pub fn profile(&self) -> Profile {
        self.symbolize().1
    }

    /// [`Recorded::profile`] with the symbolizer, which knows each image's symbol file.
    pub fn symbolize(&self) -> (kprof_symbols::Symbolizer, Profile) {
        let opts = kprof_symbols::Options {
            symbol_paths: vec![self.dir.path().to_owned()],
            index_store: None,
            // The libraries it runs with are found where perf recorded them.
            host_files: true,
            debug_roots: vec!["/usr/lib/debug".into()],
            ..kprof_symbols::Options::default()
        };
        let mut symbolizer =
            kprof_symbols::Symbolizer::new(opts, &mut |_| {}).expect("indexing the test program");
        let capture =
            kprof_symbols::Capture::open(&self.perf_data()).expect("opening the perf.data");
        let profile = symbolizer
            .symbolize(&capture, &mut |_| {})
            .expect("symbolizing the perf.data");
        (symbolizer, profile)
    }
}

/// Builds the program and records `./prog REPS WRITES` into a fresh directory.
pub fn record(reps: u32, writes: u32) -> Recorded {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("prog.c"), PROGRAM).unwrap();
    crate::cc_in(
        dir.path(),
        &["-O2", "-g", "-fno-omit-frame-pointer"],
        "prog.c",
        "prog",
    );
    run(
        crate::system::perf()
            .current_dir(dir.path())
            .args([
                "record",
                "-q",
                "-e",
                "cpu-clock",
                "-F",
                "4000",
                "-g",
                "-o",
                "perf.data",
                "./prog",
            ])
            .arg(reps.to_string())
            .arg(writes.to_string()),
        "perf record (root and apt-get install linux-perf)",
    );
    Recorded { dir }
}

/// The capture shared by the tests of one process (recording takes a few seconds).
pub fn shared() -> &'static (Recorded, Profile) {
    static SHARED: OnceLock<(Recorded, Profile)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let recorded = record(400, 300);
        let profile = recorded.profile();
        (recorded, profile)
    })
}

/// Runs `command`, which must start and succeed; `what` names it (and its package) in the
/// failure.
pub fn run(command: &mut Command, what: &str) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `perf report --stdio --no-children --sort sym` of a capture: (symbol, percent) rows.
pub fn perf_report_symbols(perf_data: &Path) -> Vec<(String, f64)> {
    let out = crate::system::perf()
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "sym",
            "-g",
            "none",
            "-i",
        ])
        .arg(perf_data)
        .output()
        .expect("perf report runs");
    assert!(out.status.success(), "perf report failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('%'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let pct = words.next()?.trim_end_matches('%').parse().ok()?;
            let _kind = words.next()?;
            Some((words.collect::<Vec<_>>().join(" "), pct))
        })
        .collect()
}
