//! Marks (issue 25) on a real capture: a C program busy in three phases, each in its own hot
//! function, with an `exec` of a tiny program of its own name before each phase and after
//! the last, recorded by Debian's `perf record -e sched:sched_process_exec -e cpu-clock`. The
//! exec tracepoints are the marks: `report --markers` lists them with their decoded fields,
//! `--time MARK..MARK` gives each phase its own function on top, and the Firefox export
//! carries them on the thread that exec'd.

use crate::render_support::{kprofctl, kprofctl_ok};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The three phases both programs run, each with its own hot function, and the clock they
/// time themselves with.
const PHASES: &str = r#"static volatile unsigned long sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void phase_a(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i * 3;
}

__attribute__((noinline)) void phase_b(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink ^= i * 7;
}

__attribute__((noinline)) void phase_c(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink -= i * 5;
}
"#;

/// The program: `marks SECONDS START_A START_B START_C END` runs each phase for SECONDS,
/// exec'ing (in a child it waits for) START_A before phase_a, ..., and END after phase_c.
const PROGRAM: [&str; 3] = [
    r#"#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

"#,
    PHASES,
    r#"
static void mark(const char *path) {
    pid_t pid = fork();
    if (pid == 0) {
        execl(path, path, (char *)0);
        _exit(127);
    }
    waitpid(pid, 0, 0);
}

int main(int argc, char **argv) {
    double seconds = atof(argv[1]);
    mark(argv[2]);
    phase_a(seconds);
    mark(argv[3]);
    phase_b(seconds);
    mark(argv[4]);
    phase_c(seconds);
    mark(argv[5]);
    return 0;
}
"#,
];

/// The programs exec'd as phase boundaries, in order.
const BOUNDARIES: [&str; 4] = ["start_a", "start_b", "start_c", "end"];

/// The capture's directory: `marks.c`, `marks`, the boundary programs and `perf.data`,
/// recorded once per test process.
fn recorded() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kprof-marks-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        std::fs::write(d.join("marks.c"), PROGRAM.concat()).unwrap();
        kprof_test_support::cc_in(
            d,
            &["-O2", "-g", "-fno-omit-frame-pointer"],
            "marks.c",
            "marks",
        );
        std::fs::write(d.join("nothing.c"), "int main(void) { return 0; }\n").unwrap();
        kprof_test_support::cc_in(d, &["-O2"], "nothing.c", "nothing");
        let mut args: Vec<String> = [
            "record",
            "-q",
            "-e",
            "sched:sched_process_exec",
            "-e",
            "cpu-clock",
            "-c",
            "250000",
            "-g",
            "--sample-cpu",
            "-o",
            "perf.data",
            "./marks",
            "0.5",
        ]
        .map(String::from)
        .to_vec();
        for b in BOUNDARIES {
            std::fs::copy(d.join("nothing"), d.join(b)).unwrap();
            args.push(d.join(b).display().to_string());
        }
        let out = kprof_test_support::system::perf()
            .current_dir(d)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "perf record (root and apt-get install linux-perf): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .path()
}

/// `kprofctl report perf.data --symbols . ARGS --format json`, parsed.
fn report_json(args: &[&str]) -> Value {
    let mut all = vec!["report", "perf.data", "--symbols", ".", "--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&kprofctl_ok(&all, recorded())).expect("JSON report")
}

/// `markers[]` of the JSON report, by the boundary program each exec'd (`marks` itself
/// first).
fn exec_marks(v: &Value) -> Vec<(String, &Value)> {
    v["markers"]
        .as_array()
        .expect("markers")
        .iter()
        .map(|m| {
            let file = m["fields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["name"] == "filename")
                .expect("filename field");
            let name = file["value"].as_str().unwrap().rsplit('/').next().unwrap();
            (name.to_string(), m)
        })
        .collect()
}

/// `--markers` lists the five execs in time order with their decoded fields (no `common_*`)
/// and their text; the tracepoint is no event column and counts no sample.
#[test]
fn report_markers_json_text_exec_tracepoint_fields() {
    let v = report_json(&["--markers"]);
    assert_eq!(v["version"], 3);
    let events: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["cpu-clock"], "{v}");
    let marks = exec_marks(&v);
    let names: Vec<&str> = marks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["marks", "start_a", "start_b", "start_c", "end"],
        "{v}"
    );
    let times: Vec<u64> = marks
        .iter()
        .map(|(_, m)| m["time_ns"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for (name, m) in &marks {
        assert_eq!(m["event"], "sched:sched_process_exec");
        let fields: Vec<&str> = m["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["filename", "pid", "old_pid"]);
        let pid = m["pid"].as_i64().unwrap();
        let text = m["text"].as_str().unwrap();
        assert!(
            text.ends_with(&format!("/{name} pid={pid} old_pid={pid}")),
            "{text}"
        );
        assert_eq!(m["comm"], *name, "the thread's name after its exec");
    }
    let only = report_json(&["--markers", "--comm", "start_b"]);
    let only: Vec<String> = exec_marks(&only).into_iter().map(|(n, _)| n).collect();
    assert_eq!(only, ["start_b"], "--comm picks the marking thread");
    let pid = marks[3].1["pid"].to_string();
    let only = report_json(&["--markers", "--pid", &pid]);
    let only: Vec<String> = exec_marks(&only).into_iter().map(|(n, _)| n).collect();
    assert_eq!(only, ["start_c"], "--pid picks the marking thread");
    let text = kprofctl_ok(
        &["report", "perf.data", "--symbols", ".", "--markers"],
        recorded(),
    );
    assert!(text.contains("Event:   cpu-clock"), "{text}");
    assert!(text.contains("Marks: 5"), "{text}");
    let start_b = marks[2].1;
    let line = format!("{:.6}", start_b["time_ns"].as_u64().unwrap() as f64 / 1e9);
    let row = text
        .lines()
        .find(|l| l.contains("sched:sched_process_exec") && l.contains("/start_b "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.trim_start().starts_with(&line), "{row} / {line}");
    assert!(
        row.contains(&format!("start_b/{0}/{0}", start_b["pid"])),
        "{row}"
    );
}

/// Every format of the capture with marks and cpu-clock works and counts cpu-clock samples
/// only: the collapsed stacks add up to the JSON report's cpu-clock samples, and no format
/// names the tracepoint as an event.
#[test]
fn report_formats_exec_marks_not_samples() {
    let d = recorded();
    let v = report_json(&[]);
    let samples = v["events"][0]["samples"].as_u64().unwrap();
    let collapsed = kprofctl_ok(
        &[
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--format",
            "collapsed",
        ],
        d,
    );
    let sum: u64 = collapsed
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, samples);
    for format in ["html", "svg", "pprof", "firefox"] {
        let out = format!("out.{format}");
        kprofctl_ok(
            &[
                "report",
                "perf.data",
                "--symbols",
                ".",
                "--format",
                format,
                "-o",
                &out,
            ],
            d,
        );
        assert!(
            std::fs::metadata(d.join(&out)).unwrap().len() > 0,
            "{format}"
        );
    }
    let text = kprofctl_ok(&["report", "perf.data", "--symbols", "."], d);
    assert!(!text.contains("Event:   sched:"), "{text}");
}

/// `--time MARK..MARK` with the exec marks' texts: each phase's own function is on top,
/// and the window is exactly the marks' times.
#[test]
fn report_time_json_mark_texts_phase_on_top() {
    let v = report_json(&["--markers"]);
    let marks = exec_marks(&v);
    let text = |name: &str| {
        marks.iter().find(|(n, _)| n == name).unwrap().1["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let time = |name: &str| marks.iter().find(|(n, _)| n == name).unwrap().1["time_ns"].as_u64();
    for (from, to, phase) in [
        ("start_a", "start_b", "phase_a"),
        ("start_b", "start_c", "phase_b"),
        ("start_c", "end", "phase_c"),
    ] {
        let window = format!("{}..{}", text(from), text(to));
        let r = report_json(&["--time", &window]);
        assert_eq!(r["functions"][0]["symbol"], phase, "{window}: {r}");
        assert_eq!(r["window"]["start_ns"].as_u64(), time(from));
        assert_eq!(r["window"]["end_ns"].as_u64(), time(to));
        // Marks in the window: the boundary it starts at, not the one it ends at.
        let inside: Vec<String> = exec_marks(&r).into_iter().map(|(n, _)| n).collect();
        assert_eq!(inside, [from], "{window}");
    }
}

/// A pipe-mode perf.data with a tracepoint (`perf record -o -`) carries its formats in a
/// record whose payload follows outside its size: refused naming it and the way out, not
/// misread as a cut stream.
#[test]
fn report_perfdata_pipe_tracepoint_refused_clearly() {
    let d = recorded();
    let out = kprof_test_support::system::perf()
        .current_dir(d)
        .args([
            "record",
            "-q",
            "-e",
            "sched:sched_process_exec",
            "-e",
            "cpu-clock",
            "-o",
            "-",
        ])
        .args(["--", "./end"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(d.join("pipe.data"), &out.stdout).unwrap();
    let out = kprofctl(&["report", "pipe.data", "--symbols", ".", "--markers"], d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("pipe.data")
            && err.contains("PERF_RECORD_HEADER_TRACING_DATA")
            && err.contains("record tracepoints to a file"),
        "{err}"
    );
}

/// A bound that names no mark is an error that lists the mark texts there are.
#[test]
fn report_time_mark_unknown_lists_marks() {
    let out = kprofctl(
        &[
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--time",
            "no such mark..",
        ],
        recorded(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no mark has the text \"no such mark\"") && err.contains("/start_b pid="),
        "{err}"
    );
    let out = kprofctl(
        &["report", "perf.data", "--symbols", ".", "--time", "phase_x"],
        recorded(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is called \"phase_x\"") && err.contains("has no spans"),
        "{err}"
    );
}

/// The Firefox export: one instant marker per exec on the thread that exec'd (named by the
/// event, its fields as text), at the mark's time.
#[test]
fn render_firefox_exec_marks_on_their_threads() {
    let v = report_json(&["--markers"]);
    let marks = exec_marks(&v);
    let d = recorded();
    let fx = firefox_export("perf.data", d);
    let mut found = Vec::new();
    for t in fx["threads"].as_array().unwrap() {
        let m = &t["markers"];
        let table = t["stringArray"].as_array().unwrap();
        for i in 0..m["length"].as_u64().unwrap_or(0) as usize {
            let data = &m["data"][i];
            if data["type"] != "kprof-mark" {
                continue;
            }
            let s = |v: &Value| {
                table[v.as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap()
                    .to_string()
            };
            found.push((
                t["tid"].to_string().trim_matches('"').to_string(),
                s(&m["name"][i]),
                s(&data["text"]),
                m["startTime"][i].as_f64().unwrap(),
                m["phase"][i].as_u64().unwrap(),
            ));
        }
    }
    assert_eq!(found.len(), marks.len(), "{found:?}");
    for (_, m) in &marks {
        let tid = m["tid"].to_string();
        let text = m["text"].as_str().unwrap();
        let ms = m["time_ns"].as_u64().unwrap() as f64 / 1e6;
        assert!(
            // The profiler writes a tid that repeats (a process that exec'd) as `tid.1`.
            found.iter().any(
                |(t, name, txt, at, phase)| t.split('.').next() == Some(&*tid)
                    && name == "sched:sched_process_exec"
                    && txt == text
                    && (at - ms).abs() < 0.001
                    && *phase == 0
            ),
            "{text} at {ms} ms on {tid}: {found:?}"
        );
    }
}

/// The phases program marking its phases with `kprof/marker.h` (the repository's
/// include/): `kprof_mark_begin("phase_x")` before a phase, `kprof_mark_end` after it, and a
/// plain `kprof_mark("all done")` at the end.
const TRACE_MARKER_PROGRAM: [&str; 3] = [
    r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <kprof/marker.h>

"#,
    PHASES,
    r#"
/* Marks must reach the capture: a mark that did nothing fails the program. */
static void check(int written, const char *what) {
    if (written) {
        fprintf(stderr, "%s: not written to trace_marker\n", what);
        exit(2);
    }
}


int main(int argc, char **argv) {
    double seconds = atof(argv[1]);
    check(kprof_mark_begin("phase_a"), "begin phase_a");
    phase_a(seconds);
    check(kprof_mark_end("phase_a"), "end phase_a");
    check(kprof_mark_begin("phase_b"), "begin phase_b");
    phase_b(seconds);
    check(kprof_mark_end("phase_b"), "end phase_b");
    check(kprof_mark_begin("phase_c"), "begin phase_c");
    phase_c(seconds);
    check(kprof_mark_end("phase_c"), "end phase_c");
    check(kprof_mark("all done"), "all done");
    return 0;
}
"#,
];

/// `kprof-agent record --markers` of the trace_marker phases program: the seven lines are
/// `ftrace:print` marks with their texts and span edges, `--time phase_x` (the span) and
/// `--time 'B|PID|phase_x'..'E|PID|phase_x'` (the marks' texts) each put phase_x's function
/// on top, and the Firefox export has an interval marker per phase on the program's thread.
#[test]
fn report_markers_trace_marker_phases_spans() {
    let dir = tempfile::Builder::new()
        .prefix("kprof-trace-marker-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    std::fs::write(d.join("tm.c"), TRACE_MARKER_PROGRAM.concat()).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../include");
    let include = format!("-I{include}");
    kprof_test_support::cc_in(
        d,
        &["-O2", "-g", "-fno-omit-frame-pointer", &include],
        "tm.c",
        "tm",
    );
    let out = Command::new(crate::remote_support::agent_binary())
        .args(["record", "-e", "cpu-clock", "-g", "--markers", "-o"])
        .arg(d.join("captures"))
        .args(["--", "./tm", "0.5"])
        .current_dir(d)
        .output()
        .expect("kprof-agent runs (as root)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let capture = stdout.lines().last().expect("the archive path").to_string();
    let json = |extra: &[&str]| -> Value {
        // The agent samples the whole system: the program's own samples are the phases'.
        let mut args = vec![
            "report",
            &capture,
            "--symbols",
            ".",
            "--format",
            "json",
            "--comm",
            "tm",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&kprofctl_ok(&args, d)).expect("JSON report")
    };
    let v = json(&["--markers"]);
    let marks = v["markers"].as_array().expect("markers");
    let texts: Vec<&str> = marks.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let pid = marks[0]["pid"].as_i64().unwrap();
    let want: Vec<String> = ["a", "b", "c"]
        .iter()
        .flat_map(|p| [format!("B|{pid}|phase_{p}"), format!("E|{pid}|phase_{p}")])
        .chain(["all done".to_string()])
        .collect();
    assert_eq!(texts, want, "{v}");
    assert!(marks
        .iter()
        .all(|m| m["event"] == "ftrace:print" && m["comm"] == "tm"));
    assert_eq!(marks[0]["edge"], serde_json::json!({"begin": "phase_a"}));
    assert_eq!(marks[1]["edge"], serde_json::json!({"end": "phase_a"}));
    assert!(marks[6]["edge"].is_null());
    for p in ["phase_a", "phase_b", "phase_c"] {
        let by_span = json(&["--time", p]);
        assert_eq!(
            by_span["functions"][0]["symbol"], p,
            "--time {p}: {by_span}"
        );
        let window = format!("B|{pid}|{p}..E|{pid}|{p}");
        let by_text = json(&["--time", &window]);
        assert_eq!(by_text["functions"][0]["symbol"], p, "{window}");
        assert_eq!(by_text["window"], by_span["window"]);
    }
    assert_eq!(
        firefox_intervals(&capture, d),
        ["phase_a", "phase_b", "phase_c"]
    );
}

/// `report CAPTURE --format firefox` in `d`, parsed.
fn firefox_export(capture: &str, d: &Path) -> Value {
    let args = [
        "report",
        capture,
        "--symbols",
        ".",
        "--format",
        "firefox",
        "-o",
        "fx.json",
    ];
    kprofctl_ok(&args, d);
    serde_json::from_slice(&std::fs::read(d.join("fx.json")).unwrap()).unwrap()
}

/// The names of the `kprof-mark` interval markers of `capture`'s Firefox export, in thread order.
fn firefox_intervals(capture: &str, d: &Path) -> Vec<String> {
    let fx = firefox_export(capture, d);
    let mut intervals = Vec::new();
    for t in fx["threads"].as_array().unwrap() {
        let m = &t["markers"];
        for i in 0..m["length"].as_u64().unwrap_or(0) as usize {
            if m["data"][i]["type"] == "kprof-mark" && m["phase"][i] == 1 {
                let name = &t["stringArray"][m["name"][i].as_u64().unwrap() as usize];
                intervals.push(name.as_str().unwrap().to_string());
            }
        }
    }
    intervals
}
