//! UTC timestamps without a date crate: capture ids and `list` output.

use std::time::{SystemTime, UNIX_EPOCH};

use kprof_capture::time::civil;
pub use kprof_capture::time::iso8601;

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A capture id: `20261122-114434-0042-1a2b`: UTC time, the capture directory's sequence
/// number (at least 4 digits; it orders captures where the clock does not, see
/// `kprof_capture::listing`), then 16 bits from pid and nanoseconds so that captures of two
/// directories fetched into one place differ.
pub fn capture_id(ns: u64, sequence: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(ns / 1_000_000_000);
    let salt = ((ns % 1_000_000_000) as u32 ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}-{sequence:04}-{salt:04x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id carries the date, the time and the sequence number, which the host reads back.
    #[test]
    fn capture_id_format_sequence_read_back() {
        let id = capture_id(0, 7);
        assert!(id.starts_with("19700101-000000-0007-"), "{id}");
        assert_eq!(kprof_capture::listing::sequence(&id), Some(7));
        let id = capture_id(1_795_335_874 * 1_000_000_000, 123_456);
        assert!(id.starts_with("20261122-082434-123456-"), "{id}");
        assert_eq!(kprof_capture::listing::sequence(&id), Some(123_456));
    }
}
