//! The user's day on the armv7 QEMU board (`ci/board/up --arch armv7`): a Thumb-2 6.1 kernel on
//! QEMU's `virt` with the Cortex-A15 PMU, the static armv7 agent, and the host symbolizing
//! 32-bit Arm (REL-relocated module DWARF, Thumb symbols, A32/Thumb-2 disassembly, user
//! stacks unwound by `.debug_frame` and EHABI tables): must-holds 1, 2 and 3 of the armv7
//! issue.
//!
//! Environment, as `ci/board/up --arch armv7` prints it: `KPROF_BOARD`, `KPROF_BOARD_SYMBOLS`,
//! `KPROF_BOARD_KEY` (see `board_day.rs`). Run one at a time:
//! `cargo test -p kprofctl --test board_armv7 -- --ignored --test-threads=1`.

use kprof_test_support::board::{self, find_file, report_json, Board};
use kprof_test_support::report::capture;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The board, refusing to go on if it is not the armv7 one.
fn armv7_board() -> Board {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let machine = board.ssh("uname -m");
    assert_eq!(
        machine.trim(),
        "armv7l",
        "KPROF_BOARD is not the armv7 board"
    );
    board
}

/// Must hold 1: `kprofctl run … -- sh -c 'echo 10000 > /dev/mychardrv'` and `fetch` on the
/// armv7 board. The agent samples `cycles` (the board's PMU has it); char_dev_cache_traverse
/// tops mychardrv.ko on a line of its loop; its callers are the kernel's write path (vmlinux
/// functions with file:line, unwound by the Thumb-2 kernel's own tables) from the shell's
/// system call; `--annotate` shows the loop's source over Thumb-2 instructions.
#[test]
#[ignore = "needs the armv7 QEMU board (ci/board/up --arch armv7)"]
fn board_armv7_day_cycles_top_function_line_and_callers() {
    let board = armv7_board();
    let (capture, run_err) = board.run_capture(&[]);
    assert!(
        run_err.contains("matches"),
        "kernel build-id check:\n{run_err}"
    );
    assert!(
        run_err.contains("cycles"),
        "no word of the event:\n{run_err}"
    );
    let local = board::fetch_day(&board, &capture);

    let json = report_json(&board, &local, &board.symbols, &["--image", "mychardrv.ko"]);
    assert_eq!(json["events"][0]["name"], "cycles", "{:#}", json["events"]);
    board::check_top_on_loop_line(&board, &json["functions"][0]);

    let tree = board::report_text(&board, &local, &["--callers", "char_dev_cache_traverse"]);
    for needle in [
        "mychardrv_write (mychardrv.ko)",
        "vfs_write (vmlinux)",
        "ksys_write (vmlinux)",
        // The system call's return address (lr set by `badr`, not a call): not the label
        // before it.
        "ret_fast_syscall (vmlinux)",
        "(busybox)",
    ] {
        assert!(tree.contains(needle), "`{needle}` missing from:\n{tree}");
    }
    assert!(
        tree.lines()
            .any(|l| l.contains("vfs_write") && l.contains(".c:")),
        "no file:line on the kernel write path:\n{tree}"
    );
    assert!(
        !tree.contains('$'),
        "a mapping symbol shown as a name:\n{tree}"
    );

    let ann = board::report_text(&board, &local, &["--annotate", "char_dev_cache_traverse"]);
    assert!(ann.contains("while (steps--)"), "no loop source:\n{ann}");
    // Thumb-2 loads of the list nodes.
    assert!(
        ann.split_whitespace()
            .any(|w| w == "ldr" || w == "ldrd" || w == "ldr.w"),
        "no Thumb-2 load in:\n{ann}"
    );

    // Must hold 3: Linux perf on this (x86_64) host reads the armv7 capture's perf.data, with
    // the capture's kallsyms and the board's vmlinux, and puts the same function on top of
    // the module.
    assert_eq!(
        perf_top_in_module(&local, &board.symbols),
        "char_dev_cache_traverse"
    );
}

/// One frame of a call path: its image and a test of its symbol.
type Frame<'a> = (&'a str, &'a dyn Fn(&str) -> bool);

/// Samples of the `--callers` subtree `node` whose path to the root passes the frames
/// `wanted` in that order, callee first (other frames between them allowed).
fn samples_through(node: &Value, wanted: &[Frame]) -> u64 {
    let Some(((image, symbol), rest)) = wanted.split_first() else {
        return node["samples"].as_u64().unwrap_or(0);
    };
    node["children"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let hit = c["image"] == *image && symbol(c["symbol"].as_str().unwrap_or_default());
            samples_through(c, if hit { rest } else { wanted })
        })
        .sum()
}

/// The `--callers mychardrv_write` tree of `capture` (against the board's output dir), and
/// what report warned on stderr.
fn writer_callers(board: &Board, capture: &Path) -> (Value, String) {
    let (json, warnings) = board::callers_json_warned(board, capture, "mychardrv_write");
    (json["tree"].clone(), warnings)
}

/// Must hold 2: mychardrv-writer built as a default Yocto armv7 image builds C (`-O2 -g
/// -mthumb`, no frame pointers, no `-funwind-tables`: its functions have no EHABI entry of
/// their own, only `.debug_frame`), installed stripped, unstripped on the host. With
/// `--call-graph dwarf`, at least 95 % of the samples through mychardrv_write have the whole
/// path: `_start` → main → run_batches → write_request → libc's write → the kernel's system
/// call → vfs_write → mychardrv_write. With frame pointers (the default) none reaches the
/// writer's functions: its chains end `[truncated]` after libc, with the warning that says why.
#[test]
#[ignore = "needs the armv7 QEMU board (ci/board/up --arch armv7)"]
fn board_armv7_writer_thumb_debug_frame_whole_path() {
    let board = armv7_board();
    let host = find_file(&board.symbols, "mychardrv-writer").expect("the unstripped writer");
    let exidx = Command::new("arm-linux-gnueabihf-readelf")
        .args(["-u", "-S"])
        .arg(&host)
        .output()
        .expect("arm-linux-gnueabihf-readelf (binutils-arm-linux-gnueabihf)");
    let exidx = String::from_utf8_lossy(&exidx.stdout);
    assert!(exidx.contains(".debug_frame"), "{exidx}");
    for f in ["<main>", "<run_batches>", "<write_request>"] {
        assert!(!exidx.contains(f), "{f} has an EHABI entry:\n{exidx}");
    }
    let on_board: u64 = board
        .ssh("wc -c < /usr/bin/mychardrv-writer")
        .trim()
        .parse()
        .unwrap();
    assert!(
        on_board < std::fs::metadata(&host).unwrap().len(),
        "the board's writer is not stripped"
    );

    let workload = ["mychardrv-writer", "10000", "4"];
    let (capture, _) = board::run_and_fetch(&board, &["--call-graph", "dwarf"], &workload);
    let (tree, _) = writer_callers(&board, &capture);
    let total = tree["samples"].as_u64().unwrap_or(0);
    assert!(total >= 100, "{total} samples through mychardrv_write");
    let whole: [Frame; 9] = [
        ("vmlinux", &|s| s == "vfs_write"),
        ("vmlinux", &|s| s == "ksys_write"),
        ("vmlinux", &|s| s == "ret_fast_syscall"),
        ("libc.so.6", &|s| s == "write"),
        ("mychardrv-writer", &|s| s == "write_request"),
        ("mychardrv-writer", &|s| s == "run_batches"),
        ("mychardrv-writer", &|s| s == "main"),
        ("libc.so.6", &|s| s.starts_with("__libc_start_main")),
        ("mychardrv-writer", &|s| s == "_start"),
    ];
    let complete = samples_through(&tree, &whole);
    assert!(
        complete * 100 >= total * 95,
        "the whole path in {complete} of {total} samples:\n{tree:#}"
    );

    let (capture, _) = board::run_and_fetch(&board, &[], &workload);
    let (tree, warnings) = writer_callers(&board, &capture);
    let total = tree["samples"].as_u64().unwrap_or(0);
    assert!(total >= 100, "{total} samples through mychardrv_write");
    let writer: [Frame; 1] = [("mychardrv-writer", &|_| true)];
    assert_eq!(samples_through(&tree, &writer), 0, "{tree:#}");
    let truncated: [Frame; 2] = [
        ("libc.so.6", &|_| true),
        ("[unwind]", &|s| s == "[truncated]"),
    ];
    let cut = samples_through(&tree, &truncated);
    assert!(
        cut * 100 >= total * 95,
        "[truncated] after libc in {cut} of {total} samples:\n{tree:#}"
    );
    assert!(
        warnings.contains("after the sampled user function") && warnings.contains("Thumb-2"),
        "no warning that says why:\n{warnings}"
    );
}

/// The first `[mychardrv]` function of `perf report --sort dso,sym` on the capture's
/// perf.data, with its kallsyms snapshot and the board's vmlinux.
fn perf_top_in_module(capture: &Path, symbols: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    capture::run(
        Command::new("tar")
            .arg("xzf")
            .arg(capture)
            .arg("-C")
            .arg(dir.path())
            .args(["perf.data", "kallsyms"]),
        "tar",
    );
    let vmlinux = find_file(symbols, "vmlinux").expect("vmlinux in KPROF_BOARD_SYMBOLS");
    let out = capture::run(
        kprof_test_support::system::perf()
            .current_dir(dir.path())
            .args([
                "report",
                "-i",
                "perf.data",
                "--stdio",
                "--no-children",
                "-g",
                "none",
            ])
            .args(["--sort", "dso,sym", "--kallsyms", "kallsyms", "--vmlinux"])
            .arg(&vmlinux),
        "perf report (linux-perf)",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    report
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "[mychardrv]").then(|| f[3].to_string())
        })
        .unwrap_or_else(|| panic!("no [mychardrv] row in perf report:\n{report}"))
}
