//! Issue 25 on the QEMU boards (`ci/board/up`, either architecture): marks from an
//! application (kprof/marker.h) and a driver's tracepoint, recorded with `run --markers -e
//! SUBSYS:EVENT`, decoded, selectable by name, and readable by Linux `perf script`.
//!
//! Environment as for board_day.rs. Run one at a time:
//! `cargo test -p kprofctl --test board_markers -- --ignored --test-threads=1`.

use kprof_test_support::board::{self, Board};
use kprof_test_support::outcome;

/// The writer's batch spans and the driver's tracepoint come back decoded, `--time 'batch 2'`
/// shows the module's hot function, and perf reads the same capture.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_run_markers_writer_spans_driver_tracepoint() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    board::check_markers(&board);
}

/// A tracepoint the board's kernel does not have is refused before anything runs, naming it.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_run_unknown_tracepoint_named() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let (ok, _, err) =
        outcome(
            board
                .on_board("run")
                .args(["-e", "mychardrv:no_such_event", "--", "true"]),
        );
    assert!(!ok, "run with an unknown tracepoint succeeded:\n{err}");
    assert!(err.contains("mychardrv:no_such_event"), "{err}");
}
