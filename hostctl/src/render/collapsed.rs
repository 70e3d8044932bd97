//! `--format collapsed` (being written).
