//! `report --off-cpu` (issue 15, must-hold 1 and 3) on real captures of kprof-agent
//! `record --off-cpu` (real perf_event_open, the host's sched:sched_switch tracepoint): a
//! program that nanosleeps 50 x 20 ms from a known function and one that blocks on a pipe fed
//! by an interval timer. The blocked time on their paths matches what the programs measured
//! around their blocking calls within 10 %; on-CPU and off-CPU of one capture do not mix.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::remote_support::agent_binary;
use crate::report_common::{assert_clear_failure, kprofctl};

/// A recorded run of tests/report_data/blocking.c.
struct Blocking {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    /// What the program measured around its blocking calls, in ns.
    measured_ns: u64,
}

/// Builds tests/report_data/blocking.c into `dir/blocking`, with frame pointers.
fn build_blocking(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/blocking.c");
    kprof_test_support::cc(
        &["-g", "-O1", "-fno-omit-frame-pointer"],
        &src,
        &dir.join("blocking"),
    )
}

fn record(mode: &str, extra: &[&str]) -> Blocking {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_blocking(dir.path());
    let out = Command::new(agent_binary())
        // A large ring and a modest rate: the tests share the machine with busy neighbours,
        // and a lost switch loses a blocked span.
        .args(["record", "-e", "cpu-clock", "-F", "1000", "-g", "--off-cpu"])
        .args(["--mmap-pages", "2048"])
        .args(extra)
        .arg("-o")
        .arg(dir.path().join("captures"))
        .arg("--")
        .arg(&exe)
        .args([mode, "50", "20"])
        .output()
        .expect("kprof-agent runs (as root)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured_ns = stdout
        .lines()
        .find_map(|l| l.strip_prefix("blocked_ns="))
        .expect("the program's measurement")
        .parse()
        .unwrap();
    // Never less than asked: 50 x 20 ms.
    assert!(measured_ns >= 990_000_000, "{measured_ns}");
    let archive = PathBuf::from(stdout.lines().last().unwrap());
    Blocking {
        _dir: dir,
        archive,
        measured_ns,
    }
}

fn sleeping() -> &'static Blocking {
    static R: OnceLock<Blocking> = OnceLock::new();
    R.get_or_init(|| record("sleep", &[]))
}

fn piped() -> &'static Blocking {
    static R: OnceLock<Blocking> = OnceLock::new();
    R.get_or_init(|| record("pipe", &[]))
}

fn ok(args: &[&str]) -> String {
    let out = kprofctl(args);
    assert!(
        out.status.success(),
        "kprofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn off_cpu_json(b: &Blocking) -> Value {
    let text = ok(&[
        "report",
        "--off-cpu",
        "--format",
        "json",
        b.archive.to_str().unwrap(),
    ]);
    serde_json::from_str(&text).unwrap()
}

/// The blocked time of `function` in the JSON's functions, and its S and D parts.
fn blocked_of(v: &Value, function: &str) -> (u64, u64, u64) {
    let f = v["off_cpu"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["symbol"] == function)
        .unwrap_or_else(|| {
            panic!(
                "{function} not in the off-CPU functions (warnings: {})",
                v["warnings"]
            )
        });
    (
        f["blocked_ns"].as_u64().unwrap(),
        f["sleeping_ns"].as_u64().unwrap(),
        f["uninterruptible_ns"].as_u64().unwrap(),
    )
}

fn within_10_percent(got: u64, want: u64, what: &str) {
    let ratio = got as f64 / want as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{what}: {got} ns blocked, the program measured {want} ns (ratio {ratio:.3})"
    );
}

/// nanosleep from sleep_in_known_function: its blocked time (state S) matches the measured
/// total, on the kernel path do_nanosleep, and is nearly all of the thread's wall time.
#[test]
fn report_off_cpu_json_nanosleep_known_function() {
    let b = sleeping();
    let v = off_cpu_json(b);
    assert_eq!(v["version"], 3);
    assert_eq!(v["view"], "off-cpu");
    let (total, s, d) = blocked_of(&v, "sleep_in_known_function");
    within_10_percent(total, b.measured_ns, "sleep_in_known_function");
    assert_eq!((s, d), (total, 0), "nanosleep sleeps in S");
    let path = v["off_cpu"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["symbol"] == "sleep_in_known_function")
        })
        .expect("a path through sleep_in_known_function");
    let names: Vec<&str> = path["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["symbol"].as_str().unwrap())
        .collect();
    let at = |n: &str| names.iter().position(|f| *f == n);
    assert!(
        at("schedule") < at("do_nanosleep") && at("do_nanosleep") < at("sleep_in_known_function"),
        "the kernel path of the sleeps, leaf first: {names:?}"
    );
    assert_eq!(path["blocked_ns"].as_u64(), Some(total));
    assert_eq!(path["thread"]["comm"], "blocking");
    assert_eq!(path["state"], "S");
    // 50 sleeps; under a loaded machine a switch may be lost (the capture says so), and
    // with it one span: the total above stays within 10 % of the measured time.
    let times = path["times"].as_u64().unwrap();
    let lost = v["capture"]["lost_samples"].as_u64().unwrap();
    assert!(
        times == 50 || (lost > 0 && times >= 45),
        "{times} sleeps seen, {lost} events lost"
    );
    let pct = path["percent_of_wall"].as_f64().unwrap();
    assert!(pct > 80.0 && pct <= 100.0, "{path}");
}

/// The pipe read in wait_on_pipe: blocked under anon_pipe_read ← vfs_read ← ksys_read for
/// the measured time, in text as in JSON.
#[test]
fn report_off_cpu_text_pipe_read_path() {
    let b = piped();
    let v = off_cpu_json(b);
    let (total, s, _) = blocked_of(&v, "wait_on_pipe");
    within_10_percent(total, b.measured_ns, "wait_on_pipe");
    assert_eq!(s, total);
    let text = ok(&[
        "report",
        "--off-cpu",
        "--comm",
        "blocking",
        b.archive.to_str().unwrap(),
    ]);
    assert!(text.contains("Off-CPU: "), "{text}");
    let chain = text
        .lines()
        .find(|l| l.contains("wait_on_pipe") && l.contains(" ← "))
        .unwrap_or_else(|| panic!("no call path through wait_on_pipe:\n{text}"));
    assert!(
        chain.contains("vfs_read ← ksys_read") && chain.contains("schedule"),
        "{chain}"
    );
    let row = text
        .lines()
        .find(|l| l.ends_with("blocking:wait_on_pipe"))
        .expect("functions row of wait_on_pipe");
    let ms: f64 = row.split_whitespace().next().unwrap().parse().unwrap();
    within_10_percent((ms * 1e6) as u64, b.measured_ns, "text row");
}

/// On-CPU and off-CPU of one capture do not mix: the on-CPU report has only cpu-clock and
/// counts samples; the off-CPU one only the states S and D.
#[test]
fn report_off_cpu_on_cpu_apart() {
    let b = sleeping();
    let on: Value = serde_json::from_str(&ok(&[
        "report",
        "--format",
        "json",
        b.archive.to_str().unwrap(),
    ]))
    .unwrap();
    let names: Vec<&str> = on["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu-clock"]);
    assert!(on.get("off_cpu").is_none());
    let off = off_cpu_json(b);
    let names: Vec<&str> = off["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["off-cpu:S", "off-cpu:D"]);
    // The sleeping program is nearly never on the CPU: it is no top on-CPU function.
    let top = on["functions"][0]["symbol"].as_str().unwrap();
    assert_ne!(top, "sleep_in_known_function");
}

/// Collapsed stacks weigh each path by its blocked ns; pprof has an off_cpu_ns sample type
/// in nanoseconds that `go tool pprof` reads; the flamegraph names the function.
#[test]
fn report_off_cpu_collapsed_pprof_svg_blocked_ns() {
    let b = sleeping();
    let cap = b.archive.to_str().unwrap();
    let collapsed = ok(&["report", "--off-cpu", "--format", "collapsed", cap]);
    let ns: u64 = collapsed
        .lines()
        .filter(|l| l.contains("sleep_in_known_function"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    within_10_percent(ns, b.measured_ns, "collapsed");
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("off.pb.gz");
    ok(&[
        "report",
        "--off-cpu",
        "--format",
        "pprof",
        "-o",
        pb.to_str().unwrap(),
        cap,
    ]);
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&pb)
        .env("PPROF_BINARY_PATH", "/nonexistent")
        .output()
        .expect("go tool pprof (apt-get install golang-go)");
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(raw.contains("PeriodType: off_cpu_ns nanoseconds"), "{raw}");
    assert!(raw.contains("off_cpu_ns/nanoseconds"), "{raw}");
    let svg = ok(&["report", "--off-cpu", "--format", "svg", cap]);
    assert!(svg.contains("sleep_in_known_function"));
}

/// A plain perf.data of Debian's `perf record -e sched:sched_switch -g -a` (with perf's
/// side-band `dummy` event) is read the same way: the pipe reads' blocked time under
/// wait_on_pipe matches what the program measured. `--buildid-all`: perf records the build-ids
/// of the images its samples' IPs hit, and a switch's IP is always in the kernel.
#[test]
fn report_off_cpu_perf_record_capture() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_blocking(dir.path());
    let data = dir.path().join("perf.data");
    let out = kprof_test_support::system::perf()
        .args([
            "record",
            "-q",
            "--buildid-all",
            "-e",
            "sched:sched_switch",
            "-g",
            "-a",
            "-m",
            "2048",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(&exe)
        .args(["pipe", "20", "20"])
        .output()
        .expect("Debian's perf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("blocked_ns=")?.parse().ok())
        .expect("the program's measurement");
    let v: Value = serde_json::from_str(&ok(&[
        "report",
        "--off-cpu",
        "--format",
        "json",
        data.to_str().unwrap(),
    ]))
    .unwrap();
    let (total, s, _) = blocked_of(&v, "wait_on_pipe");
    within_10_percent(total, measured, "wait_on_pipe (perf record)");
    assert_eq!(s, total);
}

/// A capture without context switches: `--off-cpu` says so and how to record them, never an
/// empty "no blocking" report.
#[test]
fn report_off_cpu_capture_without_switches_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(agent_binary())
        .args(["record", "-e", "cpu-clock", "-g", "-o"])
        .arg(dir.path())
        .args(["--", "sleep", "0.1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let archive = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let out = kprofctl(&["report", "--off-cpu", &archive]);
    assert_clear_failure(&out, "the capture has no context switches");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--off-cpu"));
}

/// Blocked ns per thread id in `report --off-cpu --format json`'s call paths.
fn blocked_by_tid(v: &Value) -> std::collections::BTreeMap<i64, u64> {
    let mut by = std::collections::BTreeMap::new();
    for p in v["off_cpu"]["paths"].as_array().unwrap() {
        *by.entry(p["thread"]["tid"].as_i64().unwrap()).or_insert(0) +=
            p["blocked_ns"].as_u64().unwrap();
    }
    by
}

/// `kprofctl report CAPTURE ARGS --format html` of the sleeper's capture, checked in Chromium
/// at 1366 px with one drag over 0.2..0.6 of the timeline; screenshots under `NAME`.
fn viewer_of(b: &Blocking, args: &[&str], name: &str) -> Value {
    use crate::render_viewer::{check_in, shots_dir};
    let page = b._dir.path().join(format!("{name}.html"));
    let archive = b.archive.to_str().unwrap();
    let out = kprofctl(
        &[
            &["report", archive][..],
            args,
            &["--format", "html", "-o", page.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_in(&page, &shots_dir().join(name), "1366x768", &["0.2:0.6"])
}

/// The HTML viewer of an agent `--off-cpu` capture in Chromium at 1366 px: no console error,
/// the S/D legend, the blocking program's thread track carries blocked time (S, from
/// nanosleep) equal to `report --off-cpu`'s for that thread within 1 %, and a dragged range
/// still gives exactly `report --time`'s functions.
#[test]
fn report_html_off_cpu_thread_blocked_spans_in_chromium() {
    use crate::render_viewer::{cli_window, layout_ok};
    let b = sleeping();
    let dir = b._dir.path();
    let archive = b.archive.to_str().unwrap();
    let result = viewer_of(b, &["--symbols", dir.to_str().unwrap()], "off-cpu");
    layout_ok(&result, "off-CPU capture, on-CPU page");
    let layout = &result["layout"];
    let legend = layout["legend"].as_str().unwrap();
    assert!(
        legend.contains("blocked, sleeping (S)") && legend.contains("blocked, uninterruptible (D)"),
        "{legend}"
    );
    let report = blocked_by_tid(&off_cpu_json(b));
    let track = layout["threadTracks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"].as_str().unwrap().starts_with("blocking "))
        .unwrap_or_else(|| {
            panic!(
                "no track of the blocking thread: {}",
                layout["threadTracks"]
            )
        });
    let tid: i64 = track["label"].as_str().unwrap()["blocking ".len()..]
        .parse()
        .unwrap();
    let (s, d) = (
        track["blockedS"]
            .as_u64()
            .expect("blocked S ns on the track"),
        track["blockedD"]
            .as_u64()
            .expect("blocked D ns on the track"),
    );
    let want = report[&tid];
    let ratio = (s + d) as f64 / want as f64;
    assert!(
        (0.99..=1.01).contains(&ratio),
        "track of tid {tid}: {s} + {d} ns blocked, report --off-cpu {want} ns"
    );
    assert!(s > d, "nanosleep blocks in S: S {s} ns, D {d} ns");
    assert!(
        track["paintedPixels"].as_u64().unwrap() > 0,
        "the track is drawn"
    );
    let drag = &result["drags"][0];
    let (start, end) = (
        drag["window"]["start"].as_u64().unwrap(),
        drag["window"]["end"].as_u64().unwrap(),
    );
    let page_counts: std::collections::BTreeMap<String, u64> = drag["self"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    // The sleeper may have no on-CPU sample in the window: then both must be empty.
    assert_eq!(
        page_counts,
        cli_window(dir, archive, start, end, true),
        "a window of the off-CPU capture: page against --time"
    );
}

/// `report --off-cpu --format html` says its counts are blocked ns, shows them as ms in the
/// functions table, and opens in Chromium without a console error.
#[test]
fn report_html_off_cpu_labels_blocked_time() {
    let b = sleeping();
    let result = viewer_of(b, &["--off-cpu"], "off-cpu-report");
    let layout = &result["layout"];
    let console: Vec<&Value> = result["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["level"] == "SEVERE" || e["level"] == "WARNING")
        .collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(
        layout["unitNote"].as_str().unwrap().contains("blocked ns"),
        "{}",
        layout["unitNote"]
    );
    let heads: Vec<&str> = layout["heads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(heads.contains(&"off_cpu_ns self ms"), "{heads:?}");
    // The header's total is the report's blocked ns, named as such.
    let v = off_cpu_json(b);
    let html = std::fs::read_to_string(b._dir.path().join("off-cpu-report.html")).unwrap();
    let total = format!("<td class=\"n\">{}</td>", v["off_cpu"]["blocked_ns"]);
    assert!(html.contains(&total), "the header shows {total}");
    assert!(
        html.contains("blocked ns shown</th>"),
        "the header names the unit"
    );
    // A dragged window holds the blocked ns of the spans that started in it, as
    // `report --off-cpu --time` counts them.
    let drag = &result["drags"][0];
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let range = format!(
        "{}..{}",
        secs(drag["window"]["start"].as_u64().unwrap()),
        secs(drag["window"]["end"].as_u64().unwrap())
    );
    let page_ns: u64 = drag["self"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let cli: Value = serde_json::from_str(&ok(&[
        "report",
        "--off-cpu",
        "--time",
        &range,
        "--format",
        "json",
        b.archive.to_str().unwrap(),
    ]))
    .unwrap();
    assert!(page_ns > 0, "blocked time in window {range}");
    assert_eq!(
        page_ns, cli["off_cpu"]["blocked_ns"],
        "window {range}: the page's blocked ns against report --off-cpu --time"
    );
    assert_eq!(
        layout["wide"],
        serde_json::json!([]),
        "nothing past the right edge"
    );
}
