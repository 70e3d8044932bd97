//! The HTML viewer (`kprofctl report --format html`) in Debian's chromium driven by
//! chromium-driver + selenium (`viewer_check.py`), on a real system-wide capture of a program
//! with two phases: layout at 1366 and 1920 px, timeline tracks, and mouse-dragged ranges whose
//! functions table must equal `kprofctl report --time` for the same bounds.
//!
//! Screenshots stay in `target/tmp/viewer-screenshots/` (every tab, both widths, each window).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::render_support::capture::run;
use crate::render_support::{kprofctl, kprofctl_ok, phases};

/// The workload's name here: a copy of the shared two-phase program under a name of its own,
/// because other tests run `phases` at the same time and this capture is system-wide.
const WORKLOAD: &str = "viewer-phases";

/// The shared two-phase program (`kprof_test_support::report::phases`), recorded system-wide here
/// (`-a`: every CPU has samples, idle and other processes included, so the CPU and thread
/// tracks and the idle rule are exercised too).
fn record_phases() -> phases::Phases {
    let p = phases::Phases::build();
    std::fs::copy(p.path().join("phases"), p.path().join(WORKLOAD)).unwrap();
    let exe = format!("./{WORKLOAD}");
    let args = [
        "-e",
        "cpu-clock",
        "-F",
        "1000",
        "-g",
        "-a",
        "-o",
        "perf.data",
        "--",
    ];
    run(
        kprof_test_support::system::perf()
            .current_dir(p.path())
            .args(["record", "-q"])
            .args(args)
            .args([exe.as_str(), "1"]),
        "perf record -a (root and apt-get install linux-perf)",
    );
    p
}

/// Where the screenshots are kept for a person to look at.
pub(crate) fn shots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs viewer_check.py on the page at `size` with `drags`; its JSON result.
fn check(page: &Path, size: &str, drags: &[&str]) -> Value {
    check_in(page, &shots_dir(), size, drags)
}

/// [`check`] with the screenshots in `shots`.
pub(crate) fn check_in(page: &Path, shots: &Path, size: &str, drags: &[&str]) -> Value {
    std::fs::create_dir_all(shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/viewer_check.py");
    // Debian's python3: python3-selenium is installed for it, not for other interpreters.
    let out = run(
        Command::new("/usr/bin/python3")
            .arg(script)
            .arg(page)
            .arg(shots)
            .arg(size)
            .args(drags),
        "viewer_check.py (apt-get install chromium-driver python3-selenium)",
    );
    serde_json::from_slice(&out.stdout).expect("viewer_check.py prints JSON")
}

/// The CPUs with samples in the capture, as `perf report --sort cpu` lists them.
fn perf_cpus(perf_data: &Path) -> usize {
    let out = run(
        kprof_test_support::system::perf()
            .args([
                "report", "--stdio", "-q", "--sort", "cpu", "-g", "none", "-i",
            ])
            .arg(perf_data),
        "perf report --sort cpu",
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains('%'))
        .count()
}

/// Self samples per `image:function` of `kprofctl report --time A..B [--no-idle] --format
/// json` (the page leaves the idle loop out by default, as the text summary does).
pub(crate) fn cli_window(
    dir: &Path,
    capture: &str,
    start_ns: u64,
    end_ns: u64,
    no_idle: bool,
) -> BTreeMap<String, u64> {
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let range = format!("{}..{}", secs(start_ns), secs(end_ns));
    let mut args = vec!["report", capture, "--symbols", ".", "--time", &range];
    if no_idle {
        args.push("--no-idle");
    }
    let mut out = BTreeMap::new();
    let run = kprofctl(&[&args[..], &["--format", "json"]].concat(), dir);
    // A window without samples is refused with this message (a sleeping workload's capture
    // may have none on-CPU there); the page then shows an empty table.
    if !run.status.success()
        && String::from_utf8_lossy(&run.stderr).contains("no samples match the filters")
    {
        return out;
    }
    assert!(
        run.status.success(),
        "kprofctl {args:?} failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: Value = serde_json::from_slice(&run.stdout).unwrap();
    for f in json["functions"].as_array().unwrap() {
        let key = format!(
            "{}:{}",
            f["image"].as_str().unwrap(),
            f["symbol"].as_str().unwrap()
        );
        *out.entry(key).or_insert(0) += f["counts"][0].as_u64().unwrap();
    }
    out
}

/// The page's and the CLI's self samples per function are the same; else the functions that
/// differ.
pub(crate) fn same_counts(page: &BTreeMap<String, u64>, cli: &BTreeMap<String, u64>, what: &str) {
    let differ: Vec<(&String, Option<&u64>, Option<&u64>)> = page
        .keys()
        .chain(cli.keys())
        .filter(|k| page.get(*k) != cli.get(*k))
        .map(|k| (k, page.get(k), cli.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: page against --time (function, page, CLI): {differ:?}"
    );
    assert!(!page.is_empty(), "{what}: samples in the window");
}

pub(crate) fn layout_ok(result: &Value, what: &str) {
    let layout = &result["layout"];
    assert!(
        layout["scrollWidth"].as_u64() <= layout["clientWidth"].as_u64(),
        "{what}: horizontal overflow: {layout}"
    );
    assert_eq!(
        layout["wide"],
        serde_json::json!([]),
        "{what}: past the right edge"
    );
    for (tab, lay) in result["tabs"].as_object().unwrap() {
        assert!(
            lay["scrollWidth"].as_u64() <= lay["clientWidth"].as_u64(),
            "{what}: horizontal overflow in tab {tab}: {lay}"
        );
    }
    let flame = &result["tabs"]["flamegraph"]["flame"];
    assert_eq!(
        flame["rootsVisible"], true,
        "{what}: the flame graph opens with its roots in view: {flame}"
    );
    assert_eq!(
        layout["headCells"], layout["bodyCells"],
        "{what}: as many cells per row as headers"
    );
    let heights: Vec<f64> = layout["rowHeights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_f64().unwrap())
        .collect();
    let line = layout["lineHeight"].as_f64().unwrap();
    assert!(heights.len() >= 10, "{what}: a page of rows: {heights:?}");
    assert!(
        heights.iter().all(|h| *h < line * 1.9),
        "{what}: a functions-table row taller than one line ({line} px): {heights:?}"
    );
    let console: Vec<&Value> = result["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["level"] == "SEVERE" || e["level"] == "WARNING")
        .collect();
    assert!(console.is_empty(), "{what}: console messages: {console:?}");
}

/// One dragged range of the viewer: bounds on bin edges, kept across a reload and shown to
/// the ns; its functions table is `report --time` of the window, `phase` on top of the
/// workload's functions and well above `other`.
fn check_phase_drag(dir: &Path, drag: &Value, phase: &str, other: &str) {
    let window = &drag["window"];
    let (start, end, width) = (
        window["start"].as_u64().unwrap(),
        window["end"].as_u64().unwrap(),
        window["width"].as_u64().unwrap(),
    );
    assert!(
        start % width == 0 && end % width == 0 && end > start,
        "{window}"
    );
    assert_eq!(
        drag["afterReload"], *window,
        "the fragment keeps the window"
    );
    let label = drag["label"].as_str().unwrap();
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    assert!(
        label.contains(&secs(start)) && label.contains(&secs(end)),
        "bounds shown with ns precision: {label}"
    );
    let page_counts: BTreeMap<String, u64> = drag["self"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    same_counts(
        &page_counts,
        &cli_window(dir, "perf.data", start, end, true),
        label,
    );
    // The machine may be busy with other work (the capture is system-wide): the phase
    // is judged within the workload.
    let top = page_counts
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{WORKLOAD}:")))
        .max_by_key(|(_, n)| **n)
        .unwrap()
        .0;
    assert_eq!(top, phase, "the workload's top function in {label}");
    let (mine, theirs) = (
        page_counts[phase],
        page_counts.get(other).copied().unwrap_or(0),
    );
    assert!(
        mine > 4 * theirs,
        "{phase} dominates {label}: {mine} against {other} {theirs}"
    );
}

/// The viewer on a real two-phase capture in Chromium: no console error, no horizontal
/// overflow at 1366x768 or 1920x1080 in any tab, the flame graph's roots on its first screen, one-line function rows, one track per CPU,
/// the busiest thread's track drawn, and a dragged range per phase whose functions table is
/// exactly `kprofctl report --time` of the window, with that phase's function on top of the
/// workload's and the window kept across a reload; with the idle loop included, the table
/// equals `--time` without `--no-idle`.
#[test]
fn report_html_viewer_two_phases_in_chromium() {
    let recorded = record_phases();
    let dir = recorded.path();
    kprofctl_ok(
        &[
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--format",
            "html",
            "-o",
            "report.html",
        ],
        dir,
    );
    let page = dir.join("report.html");

    let wide = check(&page, "1920x1080", &[]);
    layout_ok(&wide, "1920x1080");
    let result = check(&page, "1366x768", &["0.02:0.42", "0.58:0.95"]);
    layout_ok(&result, "1366x768");

    let layout = &result["layout"];
    assert_eq!(
        layout["cpuTracks"].as_u64().unwrap() as usize,
        perf_cpus(&dir.join("perf.data")),
        "one track per CPU"
    );
    assert!(layout["timelineDrawn"].as_bool().unwrap());
    let threads = layout["threadTracks"].as_array().unwrap();
    assert!(
        threads[0]["paintedPixels"].as_u64().unwrap() > 0,
        "the busiest thread's track is drawn: {threads:?}"
    );
    assert!(
        threads.iter().any(|t| t["label"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{WORKLOAD} "))),
        "the workload has a track: {threads:?}"
    );

    let drags = result["drags"].as_array().unwrap();
    let (phase_a, phase_b) = (format!("{WORKLOAD}:phase_a"), format!("{WORKLOAD}:phase_b"));
    for (drag, phase) in drags.iter().zip([&phase_a, &phase_b]) {
        let other = if phase == &phase_a {
            &phase_b
        } else {
            &phase_a
        };
        check_phase_drag(dir, drag, phase, other);
    }

    // "Include the idle loop": the same window now matches --time without --no-idle.
    let idle = &result["idle"];
    assert!(idle["hash"].as_str().unwrap().contains("idle=1"), "{idle}");
    let (start, end) = (
        idle["window"]["start"].as_u64().unwrap(),
        idle["window"]["end"].as_u64().unwrap(),
    );
    let page_counts: BTreeMap<String, u64> = idle["self"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    same_counts(
        &page_counts,
        &cli_window(dir, "perf.data", start, end, false),
        "idle included",
    );
}

/// An agent capture of the two-phase program (its manifest names the command's pid): the
/// timeline marks the workload's start before its exit, both within the capture, and draws
/// the workload's thread.
#[test]
fn report_html_viewer_agent_capture_marks_workload() {
    let p = phases::Phases::build();
    let out = Command::new(crate::remote_support::agent_binary())
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-g",
            "-F",
            "1000",
            "--mmap-pages",
            "1024",
        ])
        .arg("-o")
        .arg(p.path().join("captures"))
        .args(["--", "./phases", "0.5"])
        .current_dir(p.path())
        .output()
        .expect("kprof-agent runs (as root)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let archive = stdout.lines().last().expect("the archive path");
    kprofctl_ok(
        &[
            "report",
            archive,
            "--symbols",
            ".",
            "--format",
            "html",
            "-o",
            "report.html",
        ],
        p.path(),
    );
    let page = p.path().join("report.html");
    let shot = shots_dir().join("viewer-agent-capture.png");
    let dom = crate::render_support::chromium::chromium(&page, &shot, p.path());
    let left = |kind: &str| -> f64 {
        let at = dom
            .find(&format!("class=\"marker {kind}\""))
            .unwrap_or_else(|| panic!("no {kind} marker"));
        let style = &dom[at..];
        let style = &style[style.find("left: ").expect("a position") + 6..];
        style[..style.find("px").unwrap()].parse().unwrap()
    };
    let (start, exit) = (left("start"), left("exit"));
    assert!(
        0.0 <= start && start < exit,
        "start at {start} px, exit at {exit} px"
    );
    assert!(
        dom.contains("data-thread=") && dom.contains(">phases "),
        "the workload's thread has a track"
    );
}
