//! Issue 37 on the QEMU boards (`ci/board/up`, any architecture): function latency through
//! kprobes and uprobes and lock waits, without BPF, against mychardrv's known delays; no
//! probe left behind.
//!
//! Environment as for board_day.rs. Run one at a time:
//! `cargo test -p kprofctl --test board_latency -- --ignored --test-threads=1`.

use kprof_test_support::board::{latency, Board};

/// A kernel function of the module: 10 reads of `read_delay_ms` each.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_latency_kernel_function_known_delay() {
    latency::check_kernel_function(&Board::from_env(env!("CARGO_BIN_EXE_kprofctl")));
}

/// A user function of the stripped mychardrv-writer, by the host's unstripped file.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_latency_user_function_stripped_binary() {
    latency::check_user_function(&Board::from_env(env!("CARGO_BIN_EXE_kprofctl")));
}

/// Two writers on the driver's mutex: its waits, its name, the waiting function.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_contention_driver_mutex_two_writers() {
    latency::check_contention(&Board::from_env(env!("CARGO_BIN_EXE_kprofctl")));
}

/// SIGKILL and a failed start leave no kprobe registered.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_latency_no_probe_left_after_kill_or_error() {
    latency::check_no_probe_left(&Board::from_env(env!("CARGO_BIN_EXE_kprofctl")));
}
