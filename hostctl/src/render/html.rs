//! `--format html` (being written).
