//! pprof output read back by Go's own `go tool pprof`, an independent decoder.

use std::path::Path;
use std::process::Command;

use super::*;
use crate::test_support::fixture;

/// Runs `go tool pprof ARGS FILE` and returns its standard output.
fn go_pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        // Nothing to fetch or symbolize: every mapping says has_functions.
        .env("PPROF_BINARY_PATH", "/nonexistent")
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .expect("go runs (apt-get install golang-go)");
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn fixture_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("profile.pb.gz");
    let mut file = std::fs::File::create(&path).unwrap();
    write(&fixture::profile(), &mut file).unwrap();
    path
}

/// `go tool pprof -raw` decodes every part: value types, samples with labels, inline
/// locations, mappings with build-ids, comments.
#[test]
fn write_pprof_go_tool_reads_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let raw = go_pprof(&["-raw"], &fixture_file(dir.path()));
    assert!(
        raw.contains(
            "samples/count cpu/nanoseconds[dflt] page-faults_samples/count page-faults/events"
        ),
        "{raw}"
    );
    assert!(
        raw.contains("PeriodType: cpu nanoseconds\nPeriod: 1000000\n"),
        "{raw}"
    );
    assert!(
        raw.contains("Comment: libc.so.6: no file with build-id 9 found"),
        "{raw}"
    );
    // The 25 driver samples under write(2): 9 locations, values of both events.
    let driver = raw
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("25   25000000          3          3:")
        })
        .unwrap_or_else(|| panic!("driver sample missing: {raw}"));
    assert_eq!(
        driver.split(':').nth(1).unwrap().split_whitespace().count(),
        9,
        "{driver}"
    );
    assert!(
        raw.contains("comm:[app]") && raw.contains("pid:[100] tid:[100]"),
        "{raw}"
    );
    // hot_loop<int> inlined into compute: one location, two lines, innermost first.
    let at = raw
        .find("hot_loop /src/app/compute.h:5 s=3(hot_loop<int>)")
        .expect("inline leaf");
    let next = raw[at..].lines().nth(1).unwrap();
    assert_eq!(next.trim(), "compute /src/app/compute.c:12 s=10", "{raw}");
    // Mappings: the main binary first, build-ids, symbol resolution flags.
    let mappings = &raw[raw.find("Mappings\n").expect("mappings")..];
    let first = mappings.lines().nth(1).unwrap();
    assert!(
        first.starts_with("1: ") && first.contains("/usr/bin/app"),
        "{first}"
    );
    assert!(
        first.ends_with("0000000000000000000000000000000000000003 [FN][FL][LN][IN]"),
        "{first}"
    );
    assert!(mappings
        .contains("[kernel.kallsyms] 0000000000000000000000000000000000000007 [FN][FL][LN][IN]"));
    assert!(mappings.contains("[mychardrv] 0000000000000000000000000000000000000012 [FN]\n"));
}

/// pprof's own aggregation agrees with the profile: flat and cumulative time per function.
#[test]
fn write_pprof_go_tool_top_matches_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_file(dir.path());
    let top = go_pprof(&["-top", "-sample_index=cpu"], &path);
    let row = |name: &str| -> Vec<String> {
        top.lines()
            .find(|l| {
                l.split_whitespace().last() == Some(name)
                    || l.ends_with(&format!("{name} (inline)"))
            })
            .unwrap_or_else(|| panic!("{name} missing: {top}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("hot_loop")[..2], ["60ms", "60.00%"], "{top}");
    assert_eq!(row("mychardrv_checksum")[..2], ["25ms", "25.00%"], "{top}");
    assert_eq!(row("compute")[3..5], ["70ms", "70.00%"], "{top}");
    assert_eq!(row("main")[3..5], ["100ms", "100%"], "{top}");
    let faults = go_pprof(&["-top", "-sample_index=page-faults_samples"], &path);
    assert!(
        faults.contains("Showing nodes accounting for 10, 100% of 10 total"),
        "{faults}"
    );
}

/// Equal profiles give byte-equal files, so a fleet's uploads deduplicate.
#[test]
fn write_pprof_fixture_is_deterministic() {
    let mut a = Vec::new();
    let mut b = Vec::new();
    write(&fixture::profile(), &mut a).unwrap();
    write(&fixture::profile(), &mut b).unwrap();
    assert_eq!(a, b);
    assert_eq!(&a[..2], [0x1f, 0x8b], "gzip magic");
}

/// A profile without events is refused with a message.
#[test]
fn write_pprof_no_events_fails_clearly() {
    let err = write(&Profile::default(), &mut Vec::new()).unwrap_err();
    assert!(format!("{err:#}").contains("no sampled events"), "{err:#}");
}
