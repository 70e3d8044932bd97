//! Checks of single records that `linux-perf-data` would otherwise trust: a damaged record
//! must end as a damaged record, not as a crash of the report.

use linux_perf_data::linux_perf_event_reader::{RawEventRecord, RecordType};

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carries a build-id, not inode numbers.
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Why a record whose type is known cannot be parsed safely, or `None` when it can.
pub(crate) fn damage(record: &RawEventRecord<'_>) -> Option<&'static str> {
    if record.record_type == RecordType::MMAP2 && record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0
    {
        // linux-perf-event-reader asserts on a build-id longer than 20 bytes.
        let len_byte = record.data.get(32..33).map(|d| d.as_slice()[0]);
        if len_byte.is_none_or(|l| l > 20) {
            return Some("MMAP2 record with a bad build-id length");
        }
    }
    if record.record_type == RecordType::SAMPLE && !callchain_fits(record) {
        return Some("sample with a call chain longer than its record");
    }
    None
}

/// Kernel record types (below 64) and perf's own (64 up), with room for new ones, and
/// simpleperf's (from 32768).
pub(crate) fn known_record_type(t: u32) -> bool {
    (1..128).contains(&t) || (32768..32768 + 128).contains(&t)
}

/// Whether a SAMPLE record's call chain length fits in the record; the parser multiplies it
/// unchecked. The READ block before it is walked the way the parser reads it.
fn callchain_fits(record: &RawEventRecord<'_>) -> bool {
    use linux_perf_data::linux_perf_event_reader::{ReadFormat as R, SampleFormat as F};
    let f = record.parse_info.sample_format;
    if !f.contains(F::CALLCHAIN) {
        return true;
    }
    let data = record.data.as_slice();
    let big_endian = matches!(
        record.parse_info.endian,
        linux_perf_data::Endianness::BigEndian
    );
    let u64_at = |at: usize| kprof_capture::bytes::u64_at(&data, at, big_endian);
    let mut at = [
        F::IDENTIFIER,
        F::IP,
        F::TID,
        F::TIME,
        F::ADDR,
        F::ID,
        F::STREAM_ID,
        F::CPU,
        F::PERIOD,
    ]
    .iter()
    .filter(|x| f.contains(**x))
    .count()
        * 8;
    if f.contains(F::READ) {
        let r = record.parse_info.read_format;
        let times = [R::TOTAL_TIME_ENABLED, R::TOTAL_TIME_RUNNING]
            .iter()
            .filter(|x| r.contains(**x))
            .count()
            * 8;
        let id = if r.contains(R::ID) { 8 } else { 0 };
        if r.contains(R::GROUP) {
            at += 8 + times + id;
        } else {
            let Some(nr) = u64_at(at) else {
                return false;
            };
            let values = usize::try_from(nr)
                .ok()
                .and_then(|nr| nr.checked_mul(8 + id))
                .and_then(|v| v.checked_add(at + 8 + times));
            match values {
                Some(end) if end <= data.len() => at = end,
                _ => return false,
            }
        }
    }
    let Some(nr) = u64_at(at) else {
        return false;
    };
    let room = (data.len() - at - 8) as u64 / 8;
    nr <= room
}
