//! `kprofctl report` on a perf.data written by Linux `perf record`: the same top functions and
//! counts as `perf report`, and the hot loop's source line.

use crate::report_common::{kprofctl, line_of, recorded};
use std::collections::HashMap;

/// `perf report -n --no-children --sort dso,sym` on `dir/file` as `(dso, symbol) → samples`,
/// in perf's order.
pub fn perf_report(dir: &std::path::Path, file: &str) -> Vec<((String, String), u64)> {
    let out = kprof_test_support::system::perf()
        .current_dir(dir)
        .args([
            "report",
            "-i",
            file,
            "--no-children",
            "--stdio",
            "--sort",
            "dso,sym",
            "-n",
            "-q",
            "-g",
            "none",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter_map(|l| {
            // "    48.39%           764  hotloop            [.] hot_loop"
            let mut it = l.split_whitespace();
            let _pct = it.next().filter(|p| p.ends_with('%'))?;
            let n: u64 = it.next()?.parse().ok()?;
            let dso = it.next()?.to_string();
            let _kind = it.next()?;
            let sym = it.collect::<Vec<_>>().join(" ");
            Some(((dso, sym), n))
        })
        .collect()
}

pub fn json(args: &[&str]) -> serde_json::Value {
    let out = kprofctl(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The top 10 functions and their sample counts equal `perf report`'s on the same file.
#[test]
fn report_perfdata_top10_matches_perf_report() {
    let dir = recorded();
    let perf = perf_report(dir, "perf.data");
    assert_top10_matches(&perf, &["report", dir.join("perf.data").to_str().unwrap()]);
}

/// Asserts that kprofctl's top 10 functions for `report_args` (plus `--format json`) have
/// the counts `perf` lists for them, and that the four loops lead.
pub fn assert_top10_matches(perf: &[((String, String), u64)], report_args: &[&str]) {
    assert!(perf.len() >= 4, "{perf:?}");
    let mut args = report_args.to_vec();
    args.extend(["--format", "json"]);
    assert_top10_json(perf, &json(&args));
}

/// Asserts that the top 10 functions of kprofctl's JSON report `v` have the counts `perf`
/// lists for them, and that the four loops lead.
pub fn assert_top10_json(perf: &[((String, String), u64)], v: &serde_json::Value) {
    let by_key: HashMap<(String, String), u64> = perf.iter().cloned().collect();
    let funcs = v["functions"].as_array().unwrap();
    let ours: Vec<((String, String), u64)> = funcs
        .iter()
        .take(10)
        .map(|f| {
            let image = f["image"].as_str().unwrap();
            let dso = if image == "vmlinux" {
                "[kernel.kallsyms]"
            } else {
                image
            };
            (
                (dso.to_string(), f["symbol"].as_str().unwrap().to_string()),
                f["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    for (key, n) in &ours {
        assert_eq!(
            by_key.get(key),
            Some(n),
            "{key:?}: kprofctl {n}, perf report {:?}\nperf: {perf:?}",
            by_key.get(key)
        );
    }
    let mut a: Vec<u64> = ours.iter().map(|x| x.1).collect();
    let mut b: Vec<u64> = perf.iter().take(10).map(|x| x.1).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "top-10 counts differ\nours: {ours:?}\nperf: {perf:?}");
    let names: Vec<&str> = ours.iter().take(4).map(|x| x.0 .1.as_str()).collect();
    assert_eq!(names, ["hot_loop", "warm_loop", "cool_loop", "cold_loop"]);
}

/// The hottest line of hot_loop is the marked line of hotloop.c, and its source is given.
#[test]
fn report_perfdata_hot_loop_source_line() {
    let dir = recorded();
    let v = json(&[
        "report",
        dir.join("perf.data").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let f = &v["functions"][0];
    assert_eq!(f["symbol"], "hot_loop");
    assert!(f["hot_line"]["file"]
        .as_str()
        .unwrap()
        .ends_with("hotloop.c"));
    let hot = line_of("HOT_LINE") as u64;
    let got = f["hot_line"]["line"].as_u64().unwrap();
    // The loop's increment and compare (line above) may collect samples too; the body wins.
    assert_eq!(got, hot, "{f}");
    assert!(f["source"]["line"].as_u64().unwrap() < hot);
    assert_eq!(v["schema"], "kprof-report");
    assert_eq!(v["version"], 3);
}

/// `--callees main` lists the four loops by weight, `--callers hot_loop` has main (gcc -O1
/// gives the leaf loops no frame, so frame-pointer unwinding skips `driver`, as in perf);
/// `--annotate` counts add up to the function's.
#[test]
fn report_perfdata_callers_and_annotate() {
    let dir = recorded();
    let p = dir.join("perf.data");
    let p = p.to_str().unwrap();
    let v = json(&["report", p, "--format", "json", "--callees", "main"]);
    let t = &v["tree"];
    assert_eq!(t["symbol"], "main");
    let kids: Vec<&str> = t["children"]
        .as_array()
        .unwrap()
        .iter()
        .take(4)
        .map(|c| c["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["hot_loop", "warm_loop", "cool_loop", "cold_loop"]);
    let v = json(&["report", p, "--format", "json", "--callers", "hot_loop"]);
    let t = &v["tree"];
    assert_eq!(t["children"][0]["symbol"], "main");
    let total = t["samples"].as_u64().unwrap();
    let self_samples = json(&["report", p, "--format", "json"])["functions"][0]["samples"]
        .as_u64()
        .unwrap();
    // Stacks through hot_loop include kernel interrupts on top of it: inclusive >= self.
    assert!(
        total >= self_samples && total - self_samples < self_samples / 10,
        "{total} {self_samples}"
    );
    let a = json(&["report", p, "--format", "json", "--annotate", "hot_loop"]);
    let ann = &a["annotation"];
    assert_eq!(ann["totals"][0].as_u64().unwrap(), self_samples);
    let total = self_samples;
    // The first event's counts of the annotation's rows of one kind, summed.
    let counted = |rows: &str| -> u64 {
        ann[rows]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["counts"][0].as_u64().unwrap())
            .sum()
    };
    let sum_ins = counted("instructions");
    let sum_lines = counted("lines");
    assert_eq!(sum_ins, total);
    assert_eq!(sum_lines, total);
    let hot = line_of("HOT_LINE") as u64;
    assert!(ann["lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["line"] == hot && l["text"].as_str().unwrap().contains("HOT_LINE")));
    // Text output of the same views works too.
    let out = kprofctl(&["report", p, "--annotate", "hot_loop"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Disassembly:"));
}

/// Filters keep only what they say: `--kernel` only kernel images, `--image`, `--comm`, `--pid`.
#[test]
fn report_perfdata_filters_select_samples() {
    let dir = recorded();
    let p = dir.join("perf.data");
    let p = p.to_str().unwrap();
    let all = json(&["report", p, "--format", "json"]);
    let total = all["events"][0]["samples"].as_u64().unwrap();
    let user = json(&["report", p, "--format", "json", "--user"]);
    assert!(user["images"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["kernel"] == false));
    let user_n = user["events"][0]["samples"].as_u64().unwrap();
    let out = kprofctl(&["report", p, "--format", "json", "--kernel"]);
    let kernel_n = if out.status.success() {
        let k: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(k["images"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["kernel"] == true));
        k["events"][0]["samples"].as_u64().unwrap()
    } else {
        // A run without any kernel sample: the filter leaves nothing, which is an error.
        assert!(String::from_utf8_lossy(&out.stderr).contains("no samples match"));
        0
    };
    assert_eq!(user_n + kernel_n, total);
    let img = json(&["report", p, "--format", "json", "--image", "hotloop"]);
    assert!(img["functions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["image"] == "hotloop"));
    let comm = json(&["report", p, "--format", "json", "--comm", "hotloop"]);
    assert_eq!(comm["functions"][0]["symbol"], "hot_loop");
    let out = kprofctl(&["report", p, "--comm", "no-such-comm"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no samples match"));
}

/// `--callers` on a perf.data recorded without `-g` says that call chains were not recorded
/// (text and JSON); on one recorded with them it does not.
#[test]
fn report_text_callers_without_call_chains_says_not_recorded() {
    let dir = tempfile::Builder::new()
        .prefix("kprof-nochain-")
        .tempdir()
        .unwrap();
    crate::report_common::compile(&dir.path().join("hotloop"), false);
    let out = kprof_test_support::system::perf()
        .current_dir(dir.path())
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-c",
            "250000",
            "-o",
            "flat.data",
        ])
        .args(["./hotloop", "4"])
        .output()
        .expect("running perf (Debian's linux-perf)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flat = dir.path().join("flat.data");
    let flat = flat.to_str().unwrap();
    let out = kprofctl(&["report", flat, "--callers", "hot_loop"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("call chains were not recorded"), "{text}");
    assert!(text.contains("--no-call-graph"), "{text}");
    let v = json(&["report", flat, "--callers", "hot_loop", "--format", "json"]);
    assert!(
        v["note"]
            .as_str()
            .is_some_and(|n| n.contains("call chains were not recorded")),
        "{v}"
    );

    let with_chains = recorded().join("perf.data");
    let out = kprofctl(&[
        "report",
        with_chains.to_str().unwrap(),
        "--callers",
        "hot_loop",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(!text.contains("call chains were not recorded"), "{text}");
}
