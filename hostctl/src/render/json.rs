//! `--format json` (being written).
