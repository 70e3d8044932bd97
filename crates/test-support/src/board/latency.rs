//! Issue 37's checks on a QEMU board, any architecture: mychardrv's known delays timed
//! through a kprobe (`mychardrv_read`, which waits `read_delay_ms`) and an uprobe on the
//! stripped mychardrv-writer (`pause_between_batches`), the driver's mutex held
//! `write_hold_ms` seen as lock waits, and no probe left after the agent is SIGKILLed or
//! fails.

use super::{report_json, run_and_fetch, Board};
use crate::outcome;
use std::time::{Duration, Instant};

/// Long enough that a TCG board's wake-up cost (a couple of ms) stays well under the 10 %
/// the checks allow (as the off-CPU check's 50 ms reads).
const DELAY_MS: u64 = 50;
/// The mutex hold of the contention check: two writers arrive a few ms apart under TCG, and
/// the second waits the hold minus that; 200 ms keeps it within 10 %.
const HOLD_MS: u64 = 200;

/// Sets mychardrv's parameter `name` to `value` until dropped, then puts the old one back.
struct Param<'a> {
    board: &'a Board,
    path: String,
    old: String,
}

impl<'a> Param<'a> {
    fn set(board: &'a Board, name: &str, value: u64) -> Param<'a> {
        let path = format!("/sys/module/mychardrv/parameters/{name}");
        let old = board.ssh(&format!("cat {path}")).trim().to_owned();
        board.ssh(&format!("echo {value} > {path}"));
        Param { board, path, old }
    }
}

impl Drop for Param<'_> {
    fn drop(&mut self) {
        self.board
            .ssh(&format!("echo {} > {}", self.old, self.path));
    }
}

/// The one timed function of `report --latency --format json`, checked for `count` calls
/// with a p50 within 10 % of `ms`.
fn check_timed(json: &serde_json::Value, name: &str, count: u64, ms: u64) -> serde_json::Value {
    let f = json["latency"]["functions"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["name"] == name))
        .unwrap_or_else(|| panic!("no timed function {name}: {json:#}"))
        .clone();
    assert_eq!(f["count"], count, "{f:#}");
    assert_eq!(f["hits"], count, "{f:#}");
    let p50 = f["p50_ns"].as_u64().unwrap() as f64;
    let want = (ms * 1_000_000) as f64;
    assert!(
        (p50 - want).abs() <= want * 0.1,
        "{name}: p50 {p50} ns, set {want} ns: {f:#}"
    );
    f
}

/// The function names of a slowest call's path, innermost first, without the calls inlined
/// at the entry (its first instruction may belong to one).
fn path_of(call: &serde_json::Value) -> Vec<String> {
    let frames = call["frames"].as_array().cloned().unwrap_or_default();
    let own = frames
        .iter()
        .position(|f| f["inlined"] == false)
        .unwrap_or(0);
    frames[own..]
        .iter()
        .filter_map(|f| f["symbol"].as_str().map(str::to_owned))
        .collect()
}

/// `run --latency mychardrv.ko:mychardrv_read --no-sample` of 10 one-byte reads that each
/// wait `read_delay_ms`: 10 calls, p50 within 10 % of it, its path through the kernel's read
/// path up to dd.
pub fn check_kernel_function(board: &Board) {
    let _delay = Param::set(board, "read_delay_ms", DELAY_MS);
    let (local, err) = run_and_fetch(
        board,
        &["--latency", "mychardrv.ko:mychardrv_read", "--no-sample"],
        &[
            "dd",
            "if=/dev/mychardrv",
            "of=/dev/null",
            "bs=1",
            "count=10",
        ],
    );
    assert!(err.contains("probe:mychardrv_read: 10 samples"), "{err}");
    let json = report_json(board, &local, &board.symbols, &["--latency"]);
    let f = check_timed(&json, "mychardrv:mychardrv_read", 10, DELAY_MS);
    // The entry's own frame, then the return's chain from the caller up to dd. The 32-bit
    // Arm kernel records no chain for a return probe (docs/latency.md): its own frame only.
    let path = path_of(&f["slowest"][0]);
    let at = |n: &str| path.iter().position(|f| f == n);
    if is_arm32(board) {
        assert_eq!(at("mychardrv_read"), Some(0), "{path:?}");
        return;
    }
    assert!(
        at("mychardrv_read") == Some(0)
            && at("vfs_read") == Some(1)
            && at("ksys_read") == Some(2)
            && at("dd_main").is_some(),
        "mychardrv_read ← vfs_read ← ksys_read ← … ← dd_main: {path:?}"
    );
}

/// `run --latency /usr/bin/mychardrv-writer:pause_between_batches`: the board's file is
/// stripped, the offset comes from the unstripped one in the symbols dir; 4 batches make 3
/// pauses of `DELAY_MS`.
pub fn check_user_function(board: &Board) {
    let func = "/usr/bin/mychardrv-writer:pause_between_batches";
    let pause = DELAY_MS.to_string();
    let (local, err) = run_and_fetch(
        board,
        &["--latency", func, "--no-sample"],
        &["mychardrv-writer", "40", "4", "/dev/mychardrv", &pause],
    );
    assert!(err.contains("pause_between_batches: 3 samples"), "{err}");
    let json = report_json(board, &local, &board.symbols, &["--latency"]);
    let f = check_timed(&json, func, 3, DELAY_MS);
    assert_eq!(f["kind"], "user", "{f:#}");
    assert_eq!(
        path_of(&f["slowest"][0]).first().map(String::as_str),
        Some("pause_between_batches")
    );
}

/// `run --contention` of two writers at once, the driver holding its mutex `HOLD_MS` per
/// write, three times: three waits for mychardrv's `dev.lock` (in the module's `dev`), each
/// within 10 % of the hold, waited in mychardrv_write.
pub fn check_contention(board: &Board) {
    let _hold = Param::set(board, "write_hold_ms", HOLD_MS);
    let script = "for i in 1 2 3; do echo 1 > /dev/mychardrv & echo 1 > /dev/mychardrv; wait; done";
    let (local, err) = run_and_fetch(
        board,
        &["--contention", "--no-sample"],
        &["sh", "-c", script],
    );
    assert!(err.contains("lock:contention_begin"), "{err}");
    let json = report_json(board, &local, &board.symbols, &["--latency"]);
    let lock = json["contention"]["by_lock"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|g| g["name"].as_str().is_some_and(|n| n.starts_with("dev+0x0")))
        })
        .unwrap_or_else(|| panic!("no wait for mychardrv's dev.lock: {json:#}"))
        .clone();
    assert_eq!(lock["type"], "mutex", "{lock:#}");
    assert_eq!(lock["count"], 3, "{lock:#}");
    let p50 = lock["p50_ns"].as_u64().unwrap() as f64;
    let want = (HOLD_MS * 1_000_000) as f64;
    assert!((p50 - want).abs() <= want * 0.1, "p50 {p50} ns: {lock:#}");
    if is_arm32(board) {
        // Its Thumb-2 kernel unwinds no tracepoint's chain (docs/latency.md).
        return;
    }
    let callers = json["contention"]["by_caller"].as_array().unwrap();
    assert!(
        callers.iter().any(|c| c["name"] == "mychardrv_write"),
        "no wait in mychardrv_write: {json:#}"
    );
}

/// Whether the board is 32-bit Arm.
fn is_arm32(board: &Board) -> bool {
    board.ssh("uname -m").trim().starts_with("armv")
}

/// The kprobes the kernel has registered (`/sys/kernel/debug/kprobes/list`, which lists the
/// perf PMU's probes too, unlike tracefs' `kprobe_events`), with tracefs' dynamic events.
fn registered_probes(board: &Board) -> String {
    board.ssh(
        "mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; \
         cat /sys/kernel/debug/kprobes/list; \
         cat /sys/kernel/tracing/kprobe_events /sys/kernel/tracing/uprobe_events",
    )
}

/// The agent SIGKILLed mid-capture (none of its own cleanup runs), and an agent that fails
/// after placing its first probe: neither leaves a kprobe; while the first ran, its probe
/// was listed.
pub fn check_no_probe_left(board: &Board) {
    let mut child = board
        .on_board("run")
        .args(["--latency", "mychardrv_read", "--no-sample", "--symbols"])
        .arg(&board.symbols)
        .args(["--", "sh", "-c", "sleep 60"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !registered_probes(board).contains("mychardrv_read") {
        assert!(Instant::now() < deadline, "the probe never appeared");
        std::thread::sleep(Duration::from_millis(300));
    }
    board.ssh("pkill -KILL -f 'kprof-agent record'");
    let _ = child.wait();
    let left = registered_probes(board);
    assert!(
        !left.contains("mychardrv"),
        "probe left after SIGKILL:\n{left}"
    );
    // The second probe is refused after the first was placed.
    let (ok, _, err) = outcome(
        board
            .on_board("run")
            .args([
                "--latency",
                "mychardrv_read,no_such_function_kprof",
                "--no-sample",
            ])
            .args(["--", "true"]),
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("no kernel function `no_such_function_kprof`"),
        "{err}"
    );
    let left = registered_probes(board);
    assert!(
        !left.contains("mychardrv"),
        "probe left after an error:\n{left}"
    );
}
