//! The two-phase capture of the timeline tests: a C program busy about SECONDS in
//! `phase_a()`, then as long in `phase_b()`, recorded by Debian's `perf record -e cpu-clock
//! -g --sample-cpu`, so that each half of the capture has its own top function and every
//! sample its CPU. Also used by kprofctl's integration tests, and meant for the HTML viewer's
//! range-selection test.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::capture::run;

/// The program. Each phase polls the clock between bursts, so it ends on time under load.
pub const PROGRAM: &str = r#"#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void phase_a(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i * 3; /* phase_a hot */
}

__attribute__((noinline)) void phase_b(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink ^= i * 7; /* phase_b hot */
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    phase_a(seconds);
    phase_b(seconds);
    return 0;
}
"#;

/// A directory with `phases.c` and `phases`, built `-O2 -g -fno-omit-frame-pointer`.
#[derive(Debug)]
pub struct Phases {
    /// Removed when the program is dropped.
    pub dir: tempfile::TempDir,
}

impl Phases {
    /// Writes and compiles the program into a fresh directory.
    pub fn build() -> Phases {
        let dir = tempfile::Builder::new()
            .prefix("kprof-phases-")
            .tempdir()
            .expect("a temporary directory");
        std::fs::write(dir.path().join("phases.c"), PROGRAM).unwrap();
        crate::cc_in(
            dir.path(),
            &["-O2", "-g", "-fno-omit-frame-pointer"],
            "phases.c",
            "phases",
        );
        Phases { dir }
    }

    /// The program's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `dir/perf.data`.
    pub fn perf_data(&self) -> PathBuf {
        self.dir.path().join("perf.data")
    }

    /// `perf record -e cpu-clock -c 250000 -g --sample-cpu -o perf.data ./phases SECONDS`.
    pub fn perf_record(&self, seconds: &str) {
        run(
            crate::system::perf().current_dir(self.path()).args([
                "record",
                "-q",
                "-e",
                "cpu-clock",
                "-c",
                "250000",
                "-g",
                "--sample-cpu",
                "-o",
                "perf.data",
                "./phases",
                seconds,
            ]),
            "perf record (root and apt-get install linux-perf)",
        );
    }
}

/// The program recorded for 1 s per phase, once per test process.
pub fn recorded() -> &'static Phases {
    static SHARED: OnceLock<Phases> = OnceLock::new();
    SHARED.get_or_init(|| {
        let p = Phases::build();
        p.perf_record("1");
        p
    })
}
