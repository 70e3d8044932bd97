//! `--format flamegraph` (being written).
