//! `kprofctl compare` on two real captures of one program with different workloads.

use std::collections::HashMap;

use crate::render_support::chromium::{assert_non_blank_png, chromium};
use crate::render_support::{capture, kprofctl, kprofctl_ok};

/// Self samples and share per `image:symbol` from `kprofctl report --format json` of one
/// capture, summed over rows of the same name as compare matches them.
fn report_shares(perf_data: &str, cwd: &std::path::Path) -> HashMap<String, (u64, f64)> {
    let args = ["report", perf_data, "--symbols", ".", "--format", "json"];
    let json: serde_json::Value = serde_json::from_str(&kprofctl_ok(&args, cwd)).expect("JSON");
    let mut shares = HashMap::new();
    for f in json["functions"].as_array().unwrap() {
        let key = format!(
            "{}:{}",
            f["image"].as_str().unwrap(),
            f["symbol"].as_str().unwrap()
        );
        let e = shares.entry(key).or_insert((0, 0.0));
        e.0 += f["samples"].as_u64().unwrap();
        e.1 += f["percent"].as_f64().unwrap();
    }
    shares
}

/// The key compare and report both match functions by.
fn name(r: &serde_json::Value) -> String {
    format!(
        "{}:{}",
        r["image"].as_str().unwrap(),
        r["symbol"].as_str().unwrap()
    )
}

/// Share of capture `i` in a compare row.
fn share(r: &serde_json::Value, i: usize) -> f64 {
    r["captures"][i]["percent"].as_f64().unwrap()
}

/// `kprofctl compare A B --symbols DIR_A --symbols DIR_B EXTRA...` of two recordings.
fn compare(
    a: &capture::Recorded,
    b: &capture::Recorded,
    extra: &[&str],
    cwd: &std::path::Path,
) -> String {
    let (pa, pb) = (a.perf_data(), b.perf_data());
    let mut args = vec!["compare", pa.to_str().unwrap(), pb.to_str().unwrap()];
    for c in [a, b] {
        args.extend(["--symbols", c.dir.path().to_str().unwrap()]);
    }
    args.extend(extra);
    kprofctl_ok(&args, cwd)
}

/// Column `i` of `rows` has, for each function it sampled, what `report --format json` of
/// that capture alone says, and no function is missing.
fn assert_column_matches_report(rows: &[serde_json::Value], i: usize, c: &capture::Recorded) {
    let alone = report_shares("perf.data", c.dir.path());
    let mut seen = 0;
    for r in rows {
        let n = r["captures"][i]["samples"].as_u64().unwrap();
        if n == 0 {
            continue;
        }
        seen += 1;
        let (samples, percent) = alone[&name(r)];
        assert_eq!(n, samples, "#{}: {}", i + 1, name(r));
        // report rounds to two decimals.
        let p = share(r, i);
        assert!(
            (p - percent).abs() < 0.02,
            "#{}: {} {p} vs {percent}",
            i + 1,
            name(r)
        );
    }
    assert_eq!(
        seen,
        alone.len(),
        "#{}: every function of the capture",
        i + 1
    );
}

/// A compute-heavy and a write-heavy run side by side: each column's shares are what
/// `report --format json` gives for that capture alone, and each has a different top function.
#[test]
fn compare_json_real_captures_match_report() {
    let spin = capture::record(300, 20);
    let write = capture::record(2, 50000);
    let dir = tempfile::tempdir().unwrap();
    let out = compare(
        &spin,
        &write,
        &["--format", "json", "--limit", "0"],
        dir.path(),
    );
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(json["schema"], "kprof-compare");
    assert_eq!(json["version"], 1);
    assert_eq!(json["event"], "cpu-clock");
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (i, c) in [&spin, &write].iter().enumerate() {
        let col = &json["captures"][i];
        assert_eq!(col["capture"], c.perf_data().to_str().unwrap());
        assert_eq!(col["hostname"], hostname.trim(), "{col}");
        assert_eq!(col["arch"], std::env::consts::ARCH, "{col}");
    }
    let rows = json["functions"].as_array().unwrap();
    let max = |r: &serde_json::Value| share(r, 0).max(share(r, 1));
    assert!(
        rows.windows(2).all(|w| max(&w[0]) >= max(&w[1])),
        "{json:#}"
    );
    assert_column_matches_report(rows, 0, &spin);
    assert_column_matches_report(rows, 1, &write);
    let top = |i: usize| {
        name(
            rows.iter()
                .max_by(|x, y| share(x, i).total_cmp(&share(y, i)))
                .unwrap(),
        )
    };
    assert_eq!(top(0), "prog:spin", "{json:#}");
    assert_ne!(top(1), "prog:spin", "{json:#}");
}

/// The text table: a header line per capture with the board's name and arch, one share
/// column per capture, `--limit` rows.
#[test]
fn compare_text_real_captures_columns() {
    let spin = capture::record(300, 20);
    let write = capture::record(2, 50000);
    let dir = tempfile::tempdir().unwrap();
    let text = compare(&spin, &write, &["--limit", "3"], dir.path());
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let header = format!(
        "#1: {}  {} ({})  ",
        spin.perf_data().display(),
        hostname.trim(),
        std::env::consts::ARCH
    );
    assert!(text.starts_with(&header), "{text}");
    assert!(
        text.contains(&format!("\n#2: {}  ", write.perf_data().display())),
        "{text}"
    );
    let spin_row = text
        .lines()
        .find(|l| l.ends_with(" prog:spin"))
        .expect(&text);
    assert_eq!(spin_row.matches('%').count(), 2, "{spin_row}");
    let rows = text.lines().filter(|l| l.contains("% ")).count();
    assert_eq!(rows, 3 + 1, "three rows and the column header: {text}");
    assert!(
        text.contains("more functions with smaller shares"),
        "{text}"
    );
}

/// The HTML page renders in headless Chromium with both boards' columns and the top rows.
#[test]
fn compare_html_real_captures_render_in_chromium() {
    let spin = capture::record(300, 20);
    let write = capture::record(2, 50000);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("compare.html");
    let out = compare(
        &spin,
        &write,
        &[
            "--format",
            "html",
            "--limit",
            "12",
            "-o",
            page.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(out.is_empty(), "{out}");
    let png = dir.path().join("compare.png");
    let dom = chromium(&page, &png, dir.path());
    assert_non_blank_png(&png);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let board = format!("{} ({})", hostname.trim(), std::env::consts::ARCH);
    assert_eq!(dom.matches(&board).count(), 2, "{dom}");
    assert!(dom.contains("prog:spin"), "{dom}");
    // The header row and twelve function rows.
    assert_eq!(dom.matches("<tr>").count(), 1 + 12, "{dom}");
}

/// A capture that does not exist is named in one error line with a failing exit status.
#[test]
fn compare_missing_capture_fails_clearly() {
    let one = capture::record(20, 10);
    let out = kprofctl(
        &[
            "compare",
            "perf.data",
            "/nonexistent/board2.data",
            "--symbols",
            ".",
        ],
        one.dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/board2.data"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A file that is not a capture is named, and nothing is printed on standard output.
#[test]
fn compare_garbage_capture_fails_clearly() {
    let one = capture::record(20, 10);
    std::fs::write(one.dir.path().join("garbage.data"), b"not a perf.data file").unwrap();
    let out = kprofctl(
        &["compare", "perf.data", "garbage.data", "--symbols", "."],
        one.dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("garbage.data"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}
