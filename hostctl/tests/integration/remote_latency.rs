//! `run --latency` and `--contention` against the local sshd "board" with the real agent
//! (issue 37): a user function of a stripped program timed through an uprobe placed at the
//! offset kprofctl resolved from the unstripped file with the same build-id, futex waits of a
//! known length, and the probe gone from the program's code after the agent is SIGKILLed.

use crate::remote_day::{capture_dir, deploy, spawn_watched, wait_for};
use crate::remote_support::{board, Client};
use kprof_test_support::outcome;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The workload built unstripped (the host's symbol file, in `symbols/`) and stripped (the
/// "board's" file, in `board/`), with the same build-id.
struct Workload {
    dir: tempfile::TempDir,
}

impl Workload {
    fn build() -> Workload {
        let dir = tempfile::tempdir().unwrap();
        for d in ["symbols", "board"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/latency.c");
        let full = dir.path().join("symbols/latency");
        kprof_test_support::cc(&["-O2", "-g", "-pthread"], &src, &full);
        let stripped = dir.path().join("board/latency");
        let ok = Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&full)
            .status()
            .unwrap()
            .success();
        assert!(ok, "strip failed");
        Workload { dir }
    }

    fn board_file(&self) -> PathBuf {
        self.dir.path().join("board/latency")
    }

    fn symbols(&self) -> PathBuf {
        self.dir.path().join("symbols")
    }
}

/// `kprofctl report CAPTURE --latency --comm latency --format json --symbols DIR` as a JSON
/// value: the workload's calls and waits, not those of whatever else ran on this machine.
fn latency_json(client: &Client, capture: &str, symbols: &Path) -> serde_json::Value {
    let (ok, out, err) = outcome(client.kprofctl().args([
        "report",
        capture,
        "--latency",
        "--comm",
        "latency",
        "--format",
        "json",
        "--symbols",
        symbols.to_str().unwrap(),
    ]));
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn within(got: u64, want_ms: u64, tolerance: f64) -> bool {
    let want = want_ms as f64 * 1e6;
    (got as f64 - want).abs() <= want * tolerance
}

/// 10 calls of a 20 ms function in the stripped program, timed by an uprobe kprofctl placed
/// by the host's unstripped file: count 10, p50 within 10 % of 20 ms; and 10 futex waits for
/// a mutex held 30 ms each, grouped under one futex word, p50 within 10 % of 30 ms.
#[test]
fn run_latency_user_function_and_futex_waits() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let w = Workload::build();
    let board_file = w.board_file();
    let func = format!("{}:pause_ms", board_file.display());
    // And libc's nanosleep, named as users name it, resolved in this machine's libc (its
    // .dynsym has the name, which a split debug file's .symtab may lack).
    let libc = std::fs::canonicalize("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
    let (ok, out, err) = outcome(
        client
            .keyed(&["run", &sshd.target(), "--latency", &func, "--contention"])
            .args(["--latency", "libc.so.6:nanosleep"])
            .args(["--no-sample", "-o", &caps, "--symbols"])
            .arg(w.symbols())
            .arg("--symbols")
            .arg(&libc)
            .arg("--")
            .arg(&board_file)
            .args(["10", "20", "30"]),
    );
    assert!(ok, "{err}");
    assert!(err.contains("probe_latency:pause_ms: 10 samples"), "{err}");
    let capture = out.lines().last().unwrap_or_default().to_owned();
    assert!(capture.ends_with(".kprof.tar.gz"), "{out}");

    let j = latency_json(&client, &capture, &w.symbols());
    let f = &j["latency"]["functions"][0];
    assert_eq!(f["name"], func.as_str(), "{j}");
    assert_eq!(f["kind"], "user", "{j}");
    assert_eq!(f["count"], 10, "{j}");
    assert_eq!(f["hits"], 10, "{j}");
    assert_eq!(
        (f["unmatched_returns"].as_u64(), f["unfinished"].as_u64()),
        (Some(0), Some(0))
    );
    let p50 = f["p50_ns"].as_u64().unwrap();
    assert!(within(p50, 20, 0.10), "p50 {p50} ns: {j}");
    let sleep = j["latency"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "/usr/lib/x86_64-linux-gnu/libc.so.6:nanosleep")
        .unwrap_or_else(|| panic!("no libc nanosleep: {j}"));
    // pause_ms's 10 sleeps of 20 ms and the holder's 10 of 30 ms.
    assert_eq!(sleep["count"], 20, "{sleep}");
    let (min, max) = (
        sleep["min_ns"].as_u64().unwrap(),
        sleep["max_ns"].as_u64().unwrap(),
    );
    assert!(
        within(min, 20, 0.10) && within(max, 30, 0.10),
        "nanosleep: {sleep}"
    );
    // The entry's own frame; its first instruction may be attributed to a call inlined in it.
    let frames = f["slowest"][0]["frames"].as_array().unwrap();
    let own = frames.iter().find(|fr| fr["inlined"] == false).unwrap();
    assert_eq!(own["symbol"], "pause_ms", "{j}");

    // A capture without samples says where its calls are instead of an empty table.
    let (ok, _, err) = outcome(client.kprofctl().args(["report", &capture]));
    assert!(!ok && err.contains("kprofctl report --latency"), "{err}");

    let locks = j["contention"]["by_lock"].as_array().unwrap();
    let mutex = locks
        .iter()
        .find(|g| g["type"] == "futex" && g["count"] == 10)
        .unwrap_or_else(|| panic!("no futex word waited on 10 times: {j}"));
    let p50 = mutex["p50_ns"].as_u64().unwrap();
    assert!(within(p50, 30, 0.10), "futex wait p50 {p50} ns: {j}");
}

/// The byte at `offset` of `file` as mapped into process `pid` (its code, as it runs).
fn mapped_byte(pid: u32, file: &Path, offset: u64) -> u8 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let file = file.canonicalize().unwrap();
    let addr = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (range, perms, pgoff, path) = (f[0], f[1], f[2], f.get(5)?);
            if Path::new(path) != file || !perms.contains('x') {
                return None;
            }
            let (lo, hi) = range.split_once('-')?;
            let (lo, hi) = (
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            );
            let pgoff = u64::from_str_radix(pgoff, 16).ok()?;
            let a = lo + offset.checked_sub(pgoff)?;
            (a < hi).then_some(a)
        })
        .unwrap_or_else(|| {
            panic!(
                "offset {offset:#x} of {} not mapped:\n{maps}",
                file.display()
            )
        });
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8];
    std::os::unix::fs::FileExt::read_exact_at(&mem, &mut b, addr).unwrap();
    b[0]
}

/// `pause_ms`'s file offset, from the unstripped file's symbol and segments.
fn pause_ms_offset(symbols: &Path) -> u64 {
    let file = kprof_symbols::elf::SymbolFile::open(&symbols.join("latency"), None, None).unwrap();
    file.function_offset("pause_ms").unwrap().0
}

/// A process of the workload waiting on its stdin, with `pause_ms`'s first byte as mapped.
fn probed_byte_of_new_process(w: &Workload, offset: u64) -> u8 {
    let mut child = Command::new(w.board_file())
        .args(["0", "0", "0"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    // pause_ms(0) has run once: the program is mapped and past the loader.
    std::thread::sleep(Duration::from_millis(200));
    let b = mapped_byte(child.id(), &w.board_file(), offset);
    drop(child.stdin.take());
    child.wait().unwrap();
    b
}

/// The agent killed with SIGKILL during a capture (no cleanup of its own runs) leaves no
/// probe: a process of the probed program started after it runs its original code, and
/// tracefs lists no uprobe on it. While the agent ran, the same check saw the breakpoint.
#[cfg(target_arch = "x86_64")]
#[test]
fn run_latency_sigkill_leaves_no_probe() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let w = Workload::build();
    let offset = pause_ms_offset(&w.symbols());
    let original = std::fs::read(w.board_file()).unwrap()[offset as usize];
    assert_ne!(original, 0xcc);
    let func = format!("{}:pause_ms", w.board_file().display());
    let (mut child, rx) = spawn_watched(
        client
            .keyed(&["run", &sshd.target(), "--latency", &func, "--no-sample"])
            .args(["-o", &caps, "--symbols"])
            .arg(w.symbols())
            .args(["--", "sh", "-c", "echo workload-started; sleep 60"]),
    );
    let mut seen = Vec::new();
    wait_for(&rx, "workload-started", &mut seen);
    // x86's int3: the uprobe's breakpoint, written into each process mapping the file.
    assert_eq!(probed_byte_of_new_process(&w, offset), 0xcc);
    let killed = Command::new("pkill")
        .args(["-KILL", "-f", &format!("kprof-agent record.*{caps}")])
        .status()
        .unwrap();
    assert!(killed.success(), "no agent to kill");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "kprofctl did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(probed_byte_of_new_process(&w, offset), original);
    // (Other tests' `perf probe` events may be listed: not on this file.)
    let events = kprof_test_support::system::Tracefs::open().read("uprobe_events");
    let file = w.board_file().display().to_string();
    assert!(!events.contains(&file), "{events}");
}

/// Removes the `perf probe` events of group `probe_latency` when dropped, also after a
/// failed assertion: they live in tracefs' uprobe_events until removed.
struct PerfProbes;

impl Drop for PerfProbes {
    fn drop(&mut self) {
        let _ = kprof_test_support::system::perf()
            .args(["probe", "-q", "-d", "probe_latency:*"])
            .status();
    }
}

/// The durations (ns) of the calls in `perf script` output of an entry and a return event of
/// one single-threaded function, in order.
fn perf_script_durations(text: &str) -> Vec<u64> {
    let mut entry: Option<u64> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(time), Some(event)) = (f.next(), f.next()) else {
            continue;
        };
        let Ok(secs) = time.trim_end_matches(':').parse::<f64>() else {
            continue;
        };
        let ns = (secs * 1e9).round() as u64;
        if event.starts_with("probe_latency:pause_ms__return") {
            if let Some(e) = entry.take() {
                out.push(ns - e);
            }
        } else if event.starts_with("probe_latency:pause_ms") {
            entry = Some(ns);
        }
    }
    out
}

/// The same user function measured by Debian's perf (`perf probe -x` and `perf record`, paired
/// from `perf script`) and by kprof, the same workload: counts equal, medians within 10 %;
/// and kprofctl reads perf's own recording of the probes with the same answer.
#[test]
fn latency_same_function_perf_probe_and_kprof_agree() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let w = Workload::build();
    // The unstripped file: perf probe finds the function by its own symbol table.
    let exe = w.symbols().join("latency");
    let _probes = PerfProbes;
    for spec in ["pause_ms", "pause_ms%return"] {
        let (ok, _, err) = outcome(
            kprof_test_support::system::perf()
                .args(["probe", "-q", "-x"])
                .arg(&exe)
                .arg(spec),
        );
        assert!(ok, "perf probe {spec}: {err}");
    }
    let data = w.dir.path().join("perf.data");
    let (ok, _, err) = outcome(
        kprof_test_support::system::perf()
            .args(["record", "-q", "-e", "probe_latency:pause_ms"])
            .args(["-e", "probe_latency:pause_ms__return", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&exe)
            .args(["10", "20", "0"]),
    );
    assert!(ok, "perf record: {err}");
    let (ok, text, err) = outcome(
        kprof_test_support::system::perf()
            .args(["script", "--ns", "-F", "time,event", "-i"])
            .arg(&data),
    );
    assert!(ok, "perf script: {err}");
    let mut perf_ns = perf_script_durations(&text);
    assert_eq!(perf_ns.len(), 10, "{text}");
    perf_ns.sort_unstable();
    let perf_median = perf_ns[4];

    // As a user runs it: `--fetch` downloads it and prints the summary.
    let func = format!("{}:pause_ms", exe.display());
    let (ok, out, err) = outcome(
        client
            .keyed(&[
                "run",
                &sshd.target(),
                "--latency",
                &func,
                "--no-sample",
                "--fetch",
            ])
            .args(["-o", &caps, "--symbols"])
            .arg(w.symbols())
            .arg("--")
            .arg(&exe)
            .args(["10", "20", "0"]),
    );
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{func} (user): 10 calls")), "{out}");
    assert!(
        out.contains("msecs") && out.contains("HTML report: "),
        "{out}"
    );
    let capture = err
        .lines()
        .find_map(|l| l.split_once(&format!("capture on {}: ", sshd.target())))
        .map(|(_, c)| c.trim().to_owned())
        .unwrap_or_else(|| panic!("no capture path: {err}"));
    let ours = latency_json(&client, &capture, &w.symbols());
    let f = &ours["latency"]["functions"][0];
    assert_eq!(f["count"], 10, "{ours}");
    let p50 = f["p50_ns"].as_u64().unwrap();
    let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.1;
    assert!(
        close(p50, perf_median),
        "kprof p50 {p50} ns, perf median {perf_median} ns"
    );

    // perf's own perf.data: its probe events are paired as the agent's are.
    let theirs = latency_json(&client, data.to_str().unwrap(), &w.symbols());
    let f = &theirs["latency"]["functions"][0];
    assert_eq!(f["name"], "probe_latency:pause_ms", "{theirs}");
    assert_eq!(f["count"], 10, "{theirs}");
    assert_eq!(f["p50_ns"].as_u64().unwrap(), perf_median, "{theirs}");
}
