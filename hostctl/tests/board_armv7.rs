//! The user's day on the armv7 QEMU board (`ci/board/up --arch armv7`): a Thumb-2 6.1 kernel on
//! QEMU's `virt` with the Cortex-A15 PMU, the static armv7 agent, and the host symbolizing
//! 32-bit Arm (REL-relocated module DWARF, Thumb symbols, A32/Thumb-2 disassembly): must-holds 1
//! and 3 of the armv7 issue.
//!
//! Environment, as `ci/board/up --arch armv7` prints it: `KPROF_BOARD`, `KPROF_BOARD_SYMBOLS`,
//! `KPROF_BOARD_KEY` (see `board_day.rs`). Run one at a time:
//! `cargo test -p kprofctl --test board_armv7 -- --ignored --test-threads=1`.

use kprof_test_support::board::{self, find_file, report_json, Board};
use kprof_test_support::outcome;
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

/// The first `[mychardrv]` function of `perf report --sort dso,sym` on the capture's
/// perf.data, with its kallsyms snapshot and the board's vmlinux.
fn perf_top_in_module(capture: &Path, symbols: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("tar")
        .arg("xzf")
        .arg(capture)
        .arg("-C")
        .arg(dir.path())
        .args(["perf.data", "kallsyms"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vmlinux = find_file(symbols, "vmlinux").expect("vmlinux in KPROF_BOARD_SYMBOLS");
    let (ok, report, err) = outcome(
        Command::new("perf")
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
    );
    assert!(ok, "perf report: {err}");
    report
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "[mychardrv]").then(|| f[3].to_string())
        })
        .unwrap_or_else(|| panic!("no [mychardrv] row in perf report:\n{report}"))
}
