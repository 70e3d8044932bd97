//! kprofctl's integration tests, built as one binary (one link instead of one per file).
//! They run the kprofctl binary against real captures (Debian's `perf`), a local OpenSSH
//! server as the board, headless Chromium and `go tool pprof`.
//!
//! The QEMU board tests stay their own binaries (`tests/board_*.rs`): `ci/test` runs each
//! with `--ignored` once the board is up.

mod compare_cli;
mod config_trust;
mod diff_cli;
mod layers_build;
mod quickstart_trust;
mod remote_day;
mod remote_deploy;
mod remote_fetch;
mod remote_jump;
mod remote_labgrid;
mod remote_latency;
mod remote_many;
mod remote_ssh;
mod remote_support;
mod render_collapsed;
mod render_firefox;
mod render_html;
mod render_pprof;
mod render_support;
mod render_svg;
mod render_viewer;
mod report_common;
mod report_debuginfod;
mod report_errors;
mod report_escape;
mod report_events;
mod report_files;
mod report_hostile;
mod report_marks;
mod report_no_buildid;
mod report_off_cpu;
mod report_perf;
mod report_perf_formats;
mod report_source_line;
mod report_time;
mod report_unwind;
mod report_warnings;
