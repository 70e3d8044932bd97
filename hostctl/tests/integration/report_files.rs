//! Files `kprofctl report` and `diff` write hold kernel addresses and symbol names of the
//! board: they are created 0600 whatever the umask.

use crate::report_common::recorded;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;

/// `report -o` (every format) and `diff -o` create their file 0600 under umask 022.
#[test]
fn report_output_file_private_under_umask_022() {
    let perf = recorded().join("perf.data");
    let perf = perf.to_str().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let runs: [(&str, Vec<&str>); 4] = [
        ("r.html", vec!["report", perf, "--format", "html"]),
        ("r.txt", vec!["report", perf]),
        ("r.json", vec!["report", perf, "--format", "json"]),
        ("d.txt", vec!["diff", perf, perf]),
    ];
    for (name, args) in runs {
        let file = out_dir.path().join(name);
        let mut cmd = kprof_test_support::kprofctl_command(std::path::Path::new(env!(
            "CARGO_BIN_EXE_kprofctl"
        )));
        cmd.args(&args)
            .arg("-o")
            .arg(&file)
            .env("KPROF_CACHE_DIR", cache.path());
        // SAFETY: umask is async-signal-safe and touches only the child between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0o022);
                Ok(())
            })
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{args:?} wrote {name} with mode {mode:o}");
    }
}
