//! The perf.data reader: the header is checked against the file size ([`header`]), then every
//! record is checked (`record_checks`) before `linux-perf-data` parses it, so that a damaged
//! file ends as a damaged file, never as a crash or an abort of the report.

pub mod header;
mod record_checks;

use linux_perf_data::linux_perf_event_reader::EventRecord;
use linux_perf_data::{PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter};
use std::io::{BufReader, Read, Seek};

/// The largest marker of a sample's call chain (`enum perf_callchain_context`): values from
/// here up say which context the following addresses are in.
pub(crate) const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// Call chain marker: kernel addresses follow.
pub(crate) const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// Call chain marker: user addresses follow.
pub(crate) const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// `PROT_EXEC` in an MMAP2 record's protection.
pub(crate) const PROT_EXEC: u32 = 4;

/// An open perf.data: its header and feature sections, and its records.
pub(crate) struct Records<R: Read> {
    /// Header, attributes and feature sections.
    pub file: PerfFile,
    iter: PerfRecordIter<R>,
    /// Size of the data section in bytes.
    pub total: u64,
    /// The first damage seen; reading stops at damage the reader cannot step over.
    pub damaged: Option<String>,
}

impl<R: Read + Seek> Records<BufReader<R>> {
    /// Checks the header of a perf.data of `len` bytes and opens it.
    pub fn open(mut r: R, len: u64) -> Result<Self, String> {
        let header = header::check(&mut r, len)?;
        r.rewind().map_err(|e| e.to_string())?;
        let reader = BufReader::with_capacity(1 << 20, r);
        let PerfFileReader {
            perf_file,
            record_iter,
        } = PerfFileReader::parse_file(reader).map_err(|e| e.to_string())?;
        Ok(Self {
            file: perf_file,
            iter: record_iter,
            total: header.data.size,
            damaged: header.damage,
        })
    }
}

impl<R: Read> Records<R> {
    /// Calls `f` with each event record that parses, the index of its event attribute and
    /// the bytes of records read so far; damaged records are skipped and remembered in
    /// [`Records::damaged`].
    pub fn for_each(&mut self, mut f: impl FnMut(usize, EventRecord<'_>, u64)) {
        let mut bytes = 0u64;
        loop {
            let rec = match self.iter.next_record(&mut self.file) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    self.damaged = Some(e.to_string());
                    break;
                }
            };
            let record_type = match &rec {
                PerfFileRecord::EventRecord { record, .. } => record.record_type.0,
                PerfFileRecord::UserRecord(u) => u.record_type.record_type().0,
            };
            // The reader stops at the end of the data section without complaint when a
            // damaged size field made it read past it, so an impossible type is the sign
            // left to see.
            if !record_checks::known_record_type(record_type) {
                self.damaged
                    .get_or_insert_with(|| format!("record of unknown type {record_type}"));
                continue;
            }
            let PerfFileRecord::EventRecord { attr_index, record } = rec else {
                continue;
            };
            bytes = bytes.saturating_add(record.data.len() as u64 + 8);
            if let Some(why) = record_checks::damage(&record) {
                self.damaged.get_or_insert_with(|| why.into());
                continue;
            }
            // The record parser indexes and multiplies lengths from the file.
            match crate::quiet_panic::catch_quietly(|| record.parse()) {
                Some(Ok(parsed)) => f(attr_index, parsed, bytes),
                Some(Err(e)) => {
                    self.damaged
                        .get_or_insert_with(|| format!("unparsable record: {e}"));
                }
                None => {
                    self.damaged
                        .get_or_insert_with(|| "record with impossible lengths".into());
                }
            }
        }
    }
}
