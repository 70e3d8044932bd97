//! `--format pprof` (being written).
