//! Issue 20 item 2 on the QEMU board (`ci/board/up`): a capture dir that fills up ends the
//! capture with the truncation reported by `kprofctl run` and a capture `kprofctl fetch` reads;
//! a capture dir below the free-space floor is refused before anything runs.
//!
//! Environment as for board_day.rs. Run one at a time:
//! `cargo test -p kprofctl --test board_capture_faults -- --ignored --test-threads=1`.

use kprof_test_support::board::{report_json, Board};
use kprof_test_support::outcome;

/// A tmpfs mounted on the board for one test; unmounted and removed on drop, also when the
/// test fails.
struct BoardTmpfs<'a> {
    board: &'a Board,
    dir: String,
}

impl<'a> BoardTmpfs<'a> {
    fn mount(board: &'a Board, name: &str, bytes: u64) -> BoardTmpfs<'a> {
        let dir = format!("/tmp/kprof-{name}-{}", std::process::id());
        let t = BoardTmpfs { board, dir };
        board.ssh(&format!(
            "mkdir -m 700 {d} && mount -t tmpfs -o size={}k,mode=0700 tmpfs {d}",
            bytes.div_ceil(4096) * 4,
            d = t.dir
        ));
        t
    }
}

impl Drop for BoardTmpfs<'_> {
    fn drop(&mut self) {
        self.board.ssh(&format!(
            "umount {d} 2>/dev/null; rmdir {d} 2>/dev/null; true",
            d = self.dir
        ));
    }
}

/// The capture dir fills up during `run` (a tmpfs with room for the kallsyms snapshot, the
/// agent's 1 MiB reserve and 2 MiB of perf.data): run stops, says the capture is TRUNCATED
/// and why, and fails; `fetch` downloads the sealed capture, warns that it is truncated, and
/// its report has the samples recorded until the disk was full.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_run_tmpfs_full_truncated_fetch_readable() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let snapshots: u64 = board
        .ssh("cat /proc/kallsyms /proc/modules 2>/dev/null | wc -c")
        .trim()
        .parse()
        .unwrap();
    let fs = BoardTmpfs::mount(&board, "full", snapshots + (3 << 20));
    let (ok, out, err) = outcome(
        board
            .on_board("run")
            .args(["-o", &fs.dir, "--min-free", "1M", "--no-compress"])
            .args(["--call-graph", "dwarf", "--symbols"])
            .arg(&board.symbols)
            // Runs until stopped: only the full disk ends it.
            .args(["--", "sh", "-c", "while :; do :; done"]),
    );
    assert!(!ok, "run succeeded on a full disk:\n{err}");
    assert!(
        err.contains("No space left on device") && err.contains(&fs.dir),
        "the agent's message names the dir and the error:\n{err}"
    );
    assert!(
        err.contains("the capture is TRUNCATED") && !err.contains("capture lost"),
        "{err}"
    );
    let capture = out.lines().last().unwrap_or_default().trim().to_owned();
    assert!(
        capture.starts_with(&fs.dir) && capture.ends_with(".kprof.tar.gz"),
        "{out}\n{err}"
    );
    let name = capture.rsplit('/').next().unwrap().to_owned();
    let id = name.trim_end_matches(".kprof.tar.gz");

    let (ok, _, ferr) = outcome(
        board
            .on_board("fetch")
            .args([id, "--capture-dir", &fs.dir, "--symbols"])
            .arg(&board.symbols),
    );
    assert!(ok, "fetch failed: {ferr}");
    assert!(
        ferr.contains("warning: the capture is TRUNCATED")
            && ferr.contains("No space left on device"),
        "fetch warns: {ferr}"
    );
    let local = board.work.path().join("kprof-captures").join(&name);
    let json = report_json(&board, &local, &board.symbols, &[]);
    let samples = json["events"][0]["samples"].as_u64().unwrap_or(0);
    assert!(samples > 0, "no samples in the truncated capture: {json:#}");
    let manifest = std::process::Command::new("tar")
        .arg("xzOf")
        .arg(&local)
        .arg("manifest.json")
        .output()
        .unwrap();
    let m: serde_json::Value = serde_json::from_slice(&manifest.stdout).unwrap();
    assert_eq!(m["truncated"], true, "{m:#}");
    assert_eq!(m["stop_reason"], "write-error");
    assert_eq!(
        m["command"]["signal"], 15,
        "the workload was stopped: {m:#}"
    );
    // Nothing but the archive is left on the board (and the directory's capture counter,
    // `.kprof-seq`, which orders captures on boards without a clock).
    let left = board.ssh(&format!("ls -A {}", fs.dir));
    let left: Vec<&str> = left.lines().filter(|l| *l != ".kprof-seq").collect();
    assert_eq!(left, [name.as_str()], "left on the board: {left:?}");
}

/// A capture dir with less than the agent's 16 MiB floor free is refused before the workload
/// runs, naming the dir, the free space and the floor.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_run_capture_dir_below_floor_refused() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let fs = BoardTmpfs::mount(&board, "floor", 4 << 20);
    let marker = format!("{}-ran", fs.dir);
    let (ok, _, err) = outcome(board.on_board("run").args([
        "-o",
        &fs.dir,
        "--",
        "sh",
        "-c",
        &format!("touch {marker}"),
    ]));
    assert!(!ok, "run started on a dir below the floor:\n{err}");
    assert!(
        err.contains(&format!("capture dir {} has", fs.dir))
            && err.contains("below the 16.0 MiB floor")
            && err.contains("--min-free"),
        "{err}"
    );
    let ran = board.ssh(&format!("ls {marker} 2>/dev/null; rm -f {marker}; true"));
    assert!(ran.trim().is_empty(), "the workload ran");
    assert!(board.ssh(&format!("ls -A {}", fs.dir)).trim().is_empty());
}
