//! `--format text` (being written).
