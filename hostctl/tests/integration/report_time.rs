//! `kprofctl report --time START..END` on the two-phase capture (`phases.c`, recorded by
//! Debian's perf): each half has its own phase on top, and a window counts exactly the
//! samples perf itself timestamps inside it.

use crate::render_support::{kprofctl, kprofctl_ok, phases};
use serde_json::Value;

/// `kprofctl report perf.data --symbols . ARGS --format json` in the capture's directory.
fn report_json(args: &[&str]) -> Value {
    let mut all = vec!["report", "perf.data", "--symbols", ".", "--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&kprofctl_ok(&all, phases::recorded().path())).expect("JSON report")
}

/// Nanoseconds as `--time` takes them: decimal seconds, exact to the ns.
pub fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The first row of the text report's functions table.
fn top_text_function(text: &str) -> String {
    let mut rows = text
        .lines()
        .skip_while(|l| !l.starts_with("Functions (self samples):"))
        .skip(2);
    rows.next()
        .unwrap_or_else(|| panic!("no functions table: {text}"))
        .to_string()
}

/// Each half of the two-phase capture reports its own phase function on top, in text and
/// JSON, and the halves' samples add up to the whole capture's (nothing counted twice).
#[test]
fn report_time_text_json_halves_top_own_phase() {
    let whole = report_json(&[]);
    let duration = whole["capture"]["duration_ns"]
        .as_u64()
        .expect("duration_ns");
    assert!(
        (1_900_000_000..4_000_000_000).contains(&duration),
        "two phases of 1 s: {duration} ns"
    );
    let half = secs(duration / 2);
    let dir = phases::recorded().path();
    let mut total = 0;
    for (window, phase) in [
        (format!("..{half}"), "phase_a"),
        (format!("{half}.."), "phase_b"),
    ] {
        let json = report_json(&["--time", &window]);
        assert_eq!(json["functions"][0]["symbol"], phase, "{window}: {json}");
        let w = &json["window"];
        assert_eq!(
            (w["start_ns"].as_u64(), w["end_ns"].as_u64()),
            if phase == "phase_a" {
                (None, Some(duration / 2))
            } else {
                (Some(duration / 2), None)
            }
        );
        total += json["events"][0]["samples"].as_u64().unwrap();
        let text = kprofctl_ok(
            &["report", "perf.data", "--symbols", ".", "--time", &window],
            dir,
        );
        let top = top_text_function(&text);
        assert!(top.contains(&format!(" {phase} ")), "{window}: {top}");
        assert!(text.contains("Window:  "), "{text}");
    }
    assert_eq!(total, whole["events"][0]["samples"].as_u64().unwrap());
    assert!(whole["window"].is_null());
}

/// The report without `--time` (merged stacks only, no per-sample records kept) counts
/// the same functions and totals as a window over the whole capture, which is recomputed
/// from every sample's record.
#[test]
fn report_time_json_whole_window_equals_lean_report() {
    let lean = report_json(&[]);
    let windowed = report_json(&["--time", "0.."]);
    assert!(lean["functions"].as_array().is_some_and(|f| !f.is_empty()));
    assert_eq!(lean["functions"], windowed["functions"]);
    assert_eq!(lean["images"], windowed["images"]);
    assert_eq!(
        lean["events"][0]["samples"],
        windowed["events"][0]["samples"]
    );
}

/// A window [a, b) counts exactly the samples whose perf timestamp t has
/// start + a <= t < start + b, as `perf script` prints them, per event total and per view.
#[test]
fn report_time_json_counts_equal_perf_script() {
    let p = phases::recorded();
    let out = kprof_test_support::system::perf()
        .args(["script", "-F", "time", "--ns", "-i"])
        .arg(p.perf_data())
        .output()
        .expect("perf script runs");
    assert!(out.status.success());
    let times: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (s, ns) = l.trim().trim_end_matches(':').split_once('.').unwrap();
            s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap()
        })
        .collect();
    let whole = report_json(&[]);
    let start = whole["capture"]["start_ns"].as_u64().expect("start_ns");
    assert!(
        times.iter().all(|t| *t >= start),
        "capture start is the earliest record"
    );
    assert_eq!(
        times.len() as u64,
        whole["events"][0]["total_samples"].as_u64().unwrap()
    );
    // Bounds on and next to sample timestamps: the half-open edges are where counts differ.
    // (How many samples 2 s give depends on the machine's load: indices are shares.)
    let n = times.len();
    assert!(n >= 100, "only {n} samples in 2 s");
    let t = |i: usize| times[i] - start;
    for (a, b) in [
        (250_000_000, 750_000_000),
        (t(n / 20), t(n * 3 / 4)),
        (t(n / 20) + 1, t(n * 3 / 4) + 1),
        (1_000_000_123, t(n - 1)),
    ] {
        let expected = times
            .iter()
            .filter(|x| start + a <= **x && **x < start + b)
            .count() as u64;
        let window = format!("{}..{}", secs(a), secs(b));
        let json = report_json(&["--time", &window]);
        assert_eq!(
            json["events"][0]["total_samples"].as_u64(),
            Some(expected),
            "{window}"
        );
        let rows: u64 = json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(rows, expected, "{window}: the functions view sums to it");
    }
}

/// Malformed or empty windows fail with the option and the value at fault, a window past
/// the capture's end with its length, and none panics.
#[test]
fn report_time_bad_window_refused() {
    let dir = phases::recorded().path();
    for (window, needle) in [
        ("2..1", "END must be after START"),
        ("1,5..", "is not a number of seconds"),
        ("3", "is not START..END"),
        ("60..", "the capture lasts"),
    ] {
        let out = kprofctl(
            &["report", "perf.data", "--symbols", ".", "--time", window],
            dir,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{window}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains("--time") && err.contains(needle),
            "{window}: {err}"
        );
    }
}

/// The other formats take the window too: the collapsed stacks of the two halves add up to
/// the whole capture's, line by line, and in the second half phase_b leaves outnumber
/// phase_a ones more than tenfold.
#[test]
fn report_time_collapsed_halves_add_up() {
    let dir = phases::recorded().path();
    let duration = report_json(&[])["capture"]["duration_ns"].as_u64().unwrap();
    let half = secs(duration / 2);
    let folded = |extra: &[&str]| {
        let mut args = vec![
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--format",
            "collapsed",
        ];
        args.extend_from_slice(extra);
        let mut lines = std::collections::BTreeMap::<String, u64>::new();
        for l in kprofctl_ok(&args, dir).lines() {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            *lines.entry(stack.to_string()).or_default() += n.parse::<u64>().unwrap();
        }
        lines
    };
    let whole = folded(&[]);
    let mut halves = folded(&["--time", &format!("..{half}")]);
    let second = folded(&["--time", &format!("{half}..")]);
    let leaf = |lines: &std::collections::BTreeMap<String, u64>, f: &str| -> u64 {
        lines
            .iter()
            .filter(|(s, _)| s.ends_with(&format!(":{f}")))
            .map(|(_, n)| n)
            .sum()
    };
    assert!(
        leaf(&second, "phase_b") > 10 * leaf(&second, "phase_a"),
        "second half: {second:?}"
    );
    for (stack, n) in second {
        *halves.entry(stack).or_default() += n;
    }
    assert_eq!(halves, whole);
}
