//! `kprofctl diff` on two real captures of one program with different workloads.

use crate::render_support::{capture, kprofctl, kprofctl_ok};

/// Less computing and more writing: spin's share drops, the write path's rises, and JSON and
/// text agree on it.
#[test]
fn diff_json_real_captures_shift_from_user_to_kernel() {
    let base = capture::record(300, 20);
    let new = capture::record(40, 4000);
    let dir = tempfile::tempdir().unwrap();
    let (b, n) = (base.perf_data(), new.perf_data());
    let (b, n) = (b.to_str().unwrap(), n.to_str().unwrap());
    let symbols = [
        "--symbols",
        base.dir.path().to_str().unwrap(),
        "--symbols",
        new.dir.path().to_str().unwrap(),
    ];
    let mut args = vec!["diff", b, n, "--format", "json"];
    args.extend(symbols);
    let json: serde_json::Value =
        serde_json::from_str(&kprofctl_ok(&args, dir.path())).expect("JSON");
    assert_eq!(json["schema"], "kprof-diff");
    assert_eq!(json["event"], "cpu-clock");
    let row = |image: &str, symbol: &str| {
        json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["image"] == image && r["symbol"] == symbol)
            .unwrap_or_else(|| panic!("{image}:{symbol} missing: {json:#}"))
            .clone()
    };
    let spin = row("prog", "spin");
    assert!(spin["delta_pp"].as_f64().unwrap() < -10.0, "{spin}");
    let kernel_gain: f64 = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["image"] == "vmlinux")
        .map(|r| r["delta_pp"].as_f64().unwrap())
        .sum();
    assert!(
        kernel_gain > 10.0,
        "the kernel's share grows: {kernel_gain}"
    );
    // Sorted by the size of the change.
    let deltas: Vec<f64> = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["delta_pp"].as_f64().unwrap().abs())
        .collect();
    assert!(deltas.windows(2).all(|w| w[0] >= w[1]), "{deltas:?}");

    let mut args = vec!["diff", b, n];
    args.extend(symbols);
    let text = kprofctl_ok(&args, dir.path());
    assert!(text.starts_with(&format!("base: {b}  ")), "{text}");
    assert!(text.contains("  changed   prog:spin\n"), "{text}");
}

/// A capture that does not exist is named in one error line with a failing exit status.
#[test]
fn diff_missing_capture_fails_clearly() {
    let base = capture::record(20, 10);
    let out = kprofctl(
        &[
            "diff",
            "perf.data",
            "/nonexistent/new.data",
            "--symbols",
            ".",
        ],
        base.dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/new.data"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
