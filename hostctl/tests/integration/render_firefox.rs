//! `kprofctl report --format firefox` on the two-phase capture: recorded by Debian's perf
//! (threads, stacks, CPU tracks, counters) and by kprof-agent with a ring buffer too small
//! to keep up (workload start/exit and lost-sample markers, from its manifest).

use std::collections::BTreeMap;
use std::process::Command;

use crate::remote_support::agent_binary;
use crate::render_support::{kprofctl_ok, phases};
use serde_json::Value;

/// `kprofctl report CAPTURE --symbols . --format firefox -o fx.json` in `dir`, parsed.
fn firefox(dir: &std::path::Path, capture: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "report",
        capture,
        "--symbols",
        ".",
        "--format",
        "firefox",
        "-o",
        "fx.json",
    ];
    args.extend_from_slice(extra);
    kprofctl_ok(&args, dir);
    serde_json::from_slice(&std::fs::read(dir.join("fx.json")).unwrap()).expect("JSON")
}

/// A thread of the processed format: its string table and columns.
struct Track<'a>(&'a Value);

impl Track<'_> {
    fn string(&self, i: &Value) -> &str {
        self.0["stringArray"][i.as_u64().unwrap() as usize]
            .as_str()
            .unwrap()
    }

    /// Sample weights summed: the samples the track stands for.
    fn samples(&self) -> u64 {
        let s = &self.0["samples"];
        match s["weight"].as_array() {
            Some(w) => w.iter().map(|w| w.as_u64().unwrap()).sum(),
            None => s["length"].as_u64().unwrap(),
        }
    }

    /// `(time in ms, leaf frame's function name)` of every sample.
    fn leaves(&self) -> Vec<(f64, String)> {
        let t = self.0;
        let mut time = 0.0;
        let deltas = t["samples"]["timeDeltas"].as_array().unwrap();
        let stacks = t["samples"]["stack"].as_array().unwrap();
        deltas
            .iter()
            .zip(stacks)
            .map(|(d, s)| {
                time += d.as_f64().unwrap();
                let frame = &t["stackTable"]["frame"][s.as_u64().unwrap() as usize];
                let func = &t["frameTable"]["func"][frame.as_u64().unwrap() as usize];
                let name = &t["funcTable"]["name"][func.as_u64().unwrap() as usize];
                (time, self.string(name).to_string())
            })
            .collect()
    }
}

/// Samples per `(comm, tid)` as `perf script` reads the capture.
fn perf_threads(perf_data: &std::path::Path) -> BTreeMap<(String, String), u64> {
    let out = kprof_test_support::system::perf()
        .args(["script", "-F", "comm,tid", "-i"])
        .arg(perf_data)
        .output()
        .expect("perf script runs");
    assert!(out.status.success());
    let mut counts = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (comm, tid) = line.trim().rsplit_once(char::is_whitespace).unwrap();
        *counts
            .entry((comm.trim().to_string(), tid.to_string()))
            .or_default() += 1;
    }
    counts
}

/// The processed format (meta with preprocessedProfileVersion, threads with sample, stack,
/// frame and func tables); thread names and sample counts equal perf script's; stacks of
/// `function [image] file:line` labels with phase_a on top of the first half and phase_b
/// of the second; a CPU track per CPU holding every sample; no counter track for a
/// capture of software events only; `-o fx.json.gz` writes the same profile gzipped.
#[test]
fn render_firefox_perf_capture_threads_stacks_cpus() {
    let p = phases::recorded();
    let fx = firefox(p.path(), "perf.data", &[]);
    let meta = &fx["meta"];
    assert!(
        meta["preprocessedProfileVersion"].as_u64().is_some(),
        "{meta}"
    );
    assert_eq!(meta["symbolicated"], true);
    let threads = fx["threads"].as_array().expect("threads");
    let (cpus, tasks): (Vec<&Value>, Vec<&Value>) =
        threads.iter().partition(|t| t["processName"] == "CPUs");
    let ours: BTreeMap<(String, String), u64> = tasks
        .iter()
        .map(|t| {
            let tid = t["tid"].as_str().unwrap();
            // The crate suffixes a tid seen twice (".1"): the same thread under two names.
            let tid = tid.split('.').next().unwrap().to_string();
            let name = t["name"].as_str().unwrap().to_string();
            ((name, tid), Track(t).samples())
        })
        .collect();
    let expected = perf_threads(&p.perf_data());
    assert_eq!(ours, expected);
    let total: u64 = expected.values().sum();

    let workload = tasks
        .iter()
        .find(|t| t["name"] == "phases")
        .expect("the phases thread");
    let leaves = Track(workload).leaves();
    let end = leaves.last().unwrap().0;
    let top = |from: f64, to: f64| {
        let mut n: BTreeMap<&str, u64> = BTreeMap::new();
        for (t, f) in &leaves {
            if (from..to).contains(t) {
                *n.entry(f.as_str()).or_default() += 1;
            }
        }
        n.into_iter().max_by_key(|(_, c)| *c).unwrap().0.to_string()
    };
    let first = top(0.0, end / 2.0);
    let second = top(end / 2.0, end + 1.0);
    assert!(
        first.starts_with("phase_a [phases] phases.c:"),
        "first half: {first}"
    );
    assert!(
        second.starts_with("phase_b [phases] phases.c:"),
        "second half: {second}"
    );

    assert!(!cpus.is_empty(), "a CPU track");
    assert!(cpus
        .iter()
        .all(|t| t["name"].as_str().unwrap().starts_with("CPU ")));
    assert_eq!(
        cpus.iter().map(|t| Track(t).samples()).sum::<u64>(),
        total,
        "every sample is on its CPU's track"
    );
    assert_eq!(
        fx["counters"].as_array().map_or(0, Vec::len),
        0,
        "cpu-clock is a software event: no counter track"
    );
    assert_gzipped_same(p.path(), &fx);
}

/// `-o fx.json.gz` in `dir` writes `fx`, gzipped.
fn assert_gzipped_same(dir: &std::path::Path, fx: &Value) {
    kprofctl_ok(
        &[
            "report",
            "perf.data",
            "--symbols",
            ".",
            "--format",
            "firefox",
            "-o",
            "fx.json.gz",
        ],
        dir,
    );
    let unzipped = Command::new("gzip")
        .args(["-dc", "fx.json.gz"])
        .current_dir(dir)
        .output()
        .expect("gzip runs");
    assert!(unzipped.status.success(), "-o *.gz writes gzip");
    let again: Value = serde_json::from_slice(&unzipped.stdout).unwrap();
    assert_eq!(&again, fx, "the same profile, gzipped");
}

/// `kprof-agent record -e cpu-clock -g OPTIONS -o captures -- ./phases SECONDS` in `dir`:
/// the archive it printed.
fn agent_record(dir: &std::path::Path, options: &[&str], seconds: &str) -> String {
    let out = Command::new(agent_binary())
        .args(["record", "-e", "cpu-clock", "-g"])
        .args(options)
        .arg("-o")
        .arg(dir.join("captures"))
        .args(["--", "./phases", seconds])
        .current_dir(dir)
        .output()
        .expect("kprof-agent runs (as root)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().last().expect("the archive path").to_string()
}

/// The markers of the one thread that has any: `(thread, [(name, time ms, samples)])`.
fn markers(fx: &Value) -> (&Value, Vec<(String, f64, f64)>) {
    let marked: Vec<&Value> = fx["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["markers"]["length"].as_u64() > Some(0))
        .collect();
    assert_eq!(marked.len(), 1, "markers on one thread");
    let (t, m) = (Track(marked[0]), &marked[0]["markers"]);
    let list = (0..m["length"].as_u64().unwrap() as usize)
        .map(|i| {
            (
                t.string(&m["name"][i]).to_string(),
                m["startTime"][i].as_f64().unwrap(),
                m["data"][i]["samples"].as_f64().unwrap(),
            )
        })
        .collect();
    (marked[0], list)
}

/// The agent's capture (its manifest names the command's pid): a "workload start" and a
/// "workload exit" marker on the workload's thread, start first, each within 50 ms of its
/// first and last sample.
#[test]
fn render_firefox_agent_capture_workload_markers() {
    let p = phases::Phases::build();
    // A large ring buffer: a lost COMM or EXIT record would take its marker with it.
    let archive = agent_record(p.path(), &["-F", "1000", "--mmap-pages", "1024"], "0.5");
    let fx = firefox(p.path(), &archive, &[]);
    let (thread, list) = markers(&fx);
    let manifest = Command::new("tar")
        .args(["xzf", &archive, "-O", "manifest.json"])
        .output()
        .expect("tar runs");
    let manifest: Value = serde_json::from_slice(&manifest.stdout).expect("the manifest");
    let pid = manifest["command"]["pid"].as_u64().expect("command.pid");
    assert_eq!(
        (thread["pid"].as_str(), thread["isMainThread"].as_bool()),
        (Some(pid.to_string().as_str()), Some(true)),
        "the workload's main thread has the markers"
    );
    let at = |name: &str| {
        list.iter()
            .find(|m| m.0 == name)
            .unwrap_or_else(|| panic!("no {name} marker in {list:?}"))
            .1
    };
    let leaves = Track(thread).leaves();
    let (first, last) = (leaves[0].0, leaves.last().unwrap().0);
    let (start, exit) = (at("workload start"), at("workload exit"));
    let why = format!("start {start} exit {exit} ms, samples {first}..{last} ms");
    // The kernel still samples the exit path after it wrote the EXIT record.
    assert!(start < exit, "{why}");
    assert!((first - start).abs() < 50.0, "{why}");
    assert!((exit - last).abs() < 50.0, "{why}");
}

/// The agent's capture with a one-page ring buffer at 50 kHz, which overflows: lost-sample
/// markers that add up to the samples the capture lost.
#[test]
fn render_firefox_agent_capture_lost_markers() {
    let p = phases::Phases::build();
    let archive = agent_record(p.path(), &["-c", "20000", "--mmap-pages", "1"], "0.3");
    let fx = firefox(p.path(), &archive, &[]);
    let report: Value = serde_json::from_str(&kprofctl_ok(
        &["report", &archive, "--symbols", ".", "--format", "json"],
        p.path(),
    ))
    .unwrap();
    let lost = report["capture"]["lost_samples"].as_u64().unwrap();
    assert!(lost > 0, "the ring buffer overflowed");
    let (_, list) = markers(&fx);
    let marked: f64 = list
        .iter()
        .filter(|m| m.0 == "lost samples")
        .map(|m| m.2)
        .sum();
    assert_eq!(marked as u64, lost, "lost-sample markers add up: {list:?}");
}
