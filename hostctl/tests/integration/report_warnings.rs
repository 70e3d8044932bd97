//! Warnings about images on a system-wide `--call-graph dwarf` recording of this host (Debian's
//! `perf record -a`): one line per kind, naming only images the shown samples touch, the rest
//! counted unless `--verbose`.

use crate::render_support::{kprofctl, phases::Phases};
use kprof_test_support::report::capture::run;
use std::collections::HashSet;

/// The kinds of image warnings, as their lines start.
const KINDS: &[&str] = &[
    "no symbols (",
    "user images ",
    "user stacks end in [no unwind info",
];

/// `kprofctl: warning: ` lines of `report sw.data --symbols . ARGS` (which must succeed).
fn warnings(dir: &std::path::Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["report", "sw.data", "--symbols", "."];
    all.extend_from_slice(args);
    let out = kprofctl(&all, dir);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err.lines()
        .filter_map(|l| l.strip_prefix("kprofctl: warning: "))
        .map(str::to_owned)
        .collect()
}

/// The image names a grouped line lists: after its last `: `, `NAME (N)` or `NAME`, without
/// the trailing `and N more (...)`.
fn named(line: &str) -> Vec<String> {
    let list = line.rsplit_once(": ").map_or("", |(_, l)| l);
    let list = list.split(" and ").next().unwrap_or(list);
    list.split(", ")
        .map(|n| match n.rsplit_once(" (") {
            Some((name, count)) if count.trim_end_matches(')').parse::<u64>().is_ok() => name,
            _ => n,
        })
        .map(str::to_owned)
        .collect()
}

/// `report --format collapsed ARGS`: every frame of the shown stacks as `;IMAGE:FUNCTION`.
fn shown_frames(dir: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec![
        "report",
        "sw.data",
        "--symbols",
        ".",
        "--format",
        "collapsed",
    ];
    all.extend_from_slice(args);
    let out = kprofctl(&all, dir);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `perf record -a --call-graph dwarf` of the phases program built without unwind tables:
/// with `--comm phases` each kind
/// of image warning is one line, naming only images with a frame in phases' stacks; every
/// line is distinct; `--verbose` names every image instead of counting the rest.
#[test]
fn report_text_system_wide_image_warnings_grouped() {
    // The phases program rebuilt without unwind tables for its own code (crt's remain), so
    // its stacks always stop at code the tables do not cover: one image warning there is
    // sure to be, whatever else runs on the machine.
    let prog = Phases::build();
    let dir = prog.path();
    kprof_test_support::cc_in(
        dir,
        &[
            "-O2",
            "-g",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
        "phases.c",
        "phases",
    );
    run(
        kprof_test_support::system::perf().current_dir(dir).args([
            "record",
            "-q",
            "-a",
            "--call-graph",
            "dwarf",
            "-F",
            "499",
            "-o",
            "sw.data",
            "./phases",
            "1",
        ]),
        "perf record -a (root and apt-get install linux-perf)",
    );
    for args in [&["--comm", "phases"][..], &[]] {
        let lines = warnings(dir, args);
        // No line per image: the unwind ones name no image in the marker, none starts with
        // the image's name.
        for line in &lines {
            assert!(
                !line.contains("[no unwind info: ") || line.contains("[no unwind info: IMAGE]"),
                "a line per image: {line}"
            );
            assert!(!line.contains(": no symbols ("), "a line per image: {line}");
        }
        let distinct: HashSet<&String> = lines.iter().collect();
        assert_eq!(distinct.len(), lines.len(), "repeated lines: {lines:#?}");
        let frames = shown_frames(dir, args);
        for kind in KINDS {
            let of_kind: Vec<&String> = lines.iter().filter(|l| l.starts_with(kind)).collect();
            // `no symbols (WHY)` is one line per reason; the others one line per kind.
            let reasons: HashSet<&str> = of_kind
                .iter()
                .map(|l| l.split_once("):").map_or(l.as_str(), |(k, _)| k))
                .collect();
            assert_eq!(reasons.len(), of_kind.len(), "{kind}: {of_kind:#?}");
            for line in of_kind {
                for image in named(line) {
                    assert!(
                        frames.contains(&format!(";{image}:")),
                        "{image} has no frame in the shown stacks ({args:?}): {line}"
                    );
                }
            }
        }
    }
    let verbose = warnings(dir, &["--verbose"]);
    assert!(
        verbose.iter().all(|l| !l.contains("--verbose lists them")),
        "{verbose:#?}"
    );
    assert!(
        verbose
            .iter()
            .any(|l| l.starts_with("user stacks end in [no unwind info")
                && l.contains("do not cover")
                && l.contains("phases (")),
        "{verbose:#?}"
    );
}
