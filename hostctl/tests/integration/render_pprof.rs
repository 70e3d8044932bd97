//! `kprofctl report --format pprof` on a real capture, read back by `go tool pprof`.

use std::process::Command;

use crate::render_support::{build_id, capture, perf_sample_count, report};

fn go_pprof(args: &[&str], file: &std::path::Path) -> String {
    let out = capture::run(
        Command::new("go")
            .args(["tool", "pprof"])
            .args(args)
            .arg(file)
            .env("PPROF_BINARY_PATH", "/nonexistent"),
        "go tool pprof (apt-get install golang-go)",
    );
    String::from_utf8(out.stdout).unwrap()
}

/// pprof sees every sample, puts the hot function first, and maps the program by its path
/// and build-id, with line numbers.
#[test]
fn report_pprof_real_capture_go_pprof_reads_it() {
    let recorded = capture::record(300, 100);
    let dir = recorded.dir.path();
    report(dir, "pprof", Some("prof.pb.gz"));
    let file = dir.join("prof.pb.gz");
    let top = go_pprof(&["-top", "-sample_index=samples"], &file);
    let samples = perf_sample_count(&recorded.perf_data());
    assert!(
        top.contains(&format!("of {samples} total")),
        "all {samples} samples: {top}"
    );
    let first = top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .expect("a first row");
    assert!(
        first.ends_with(" spin") || first.ends_with(" mix (inline)"),
        "the hot loop first: {top}"
    );
    let raw = go_pprof(&["-raw"], &file);
    let prog = dir.join("prog").canonicalize().unwrap();
    let mapping = raw
        .lines()
        .skip_while(|l| *l != "Mappings")
        .find(|l| l.contains(prog.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no mapping for {}: {raw}", prog.display()));
    assert!(mapping.contains(&build_id(&prog)), "{mapping}");
    assert!(mapping.ends_with("[FN][FL][LN][IN]"), "{mapping}");
    assert!(
        raw.contains(" spin ") && raw.contains("prog.c:"),
        "lines resolved"
    );
}
