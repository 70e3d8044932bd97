//! The perf.data reader: the header is checked against the file size ([`header`]), then every
//! record is checked (`record_checks`) before `linux-perf-data` parses it, so that a damaged
//! file ends as a damaged file, never as a crash or an abort of the report.

mod bounded;
pub mod header;
mod record_checks;
mod walk;

use bounded::Bounded;
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord};
use linux_perf_data::{
    CompressionInfo, DsoKey, PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter,
    UserRecordType,
};
use std::io::{BufReader, Read, Seek, SeekFrom};

/// The largest marker of a sample's call chain (`enum perf_callchain_context`): values from
/// here up say which context the following addresses are in.
pub(crate) const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// Call chain marker: kernel addresses follow.
pub(crate) const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// Call chain marker: user addresses follow.
pub(crate) const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// `PROT_EXEC` in an MMAP2 record's protection.
pub(crate) const PROT_EXEC: u32 = 4;

/// What [`Records::for_each`] hands on.
// Handed to the callback by value and never stored: boxing the event would allocate once
// per sample.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Item<'a> {
    /// An event record that parsed, the index of its event attribute, the bytes of
    /// records read so far and the record's timestamp (a sample's TIME, a side-band
    /// record's `sample_id_all` trailer), when it has one.
    Event(usize, EventRecord<'a>, u64, Option<u64>),
    /// A build-id from a HEADER_BUILD_ID record (pipe mode, `perf inject -b`): the same
    /// facts as an entry of a file's build-id table.
    BuildId(DsoKey, Vec<u8>),
}

/// An open perf.data: its header and feature sections, and its records.
pub(crate) struct Records<R: Read> {
    /// Header, attributes and feature sections.
    pub file: PerfFile,
    iter: PerfRecordIter<R>,
    /// Size of the data section in bytes.
    pub total: u64,
    /// The first damage seen; reading stops at damage the reader cannot step over.
    pub damaged: Option<String>,
    /// No record is read: they are compressed with an unknown type, and the reader would
    /// decode them as zstd.
    unreadable: bool,
}

impl<R: Read + Seek> Records<BufReader<Bounded<R>>> {
    /// Checks the header of a perf.data of `len` bytes and opens it, a file or a stream
    /// written in pipe mode (`perf record -o -`); its compressed records may decompress to
    /// `max_decompressed` bytes in all.
    pub fn open(mut r: R, len: u64, max_decompressed: u64) -> Result<Self, String> {
        let mut first = Vec::with_capacity(16);
        r.by_ref()
            .take(16)
            .read_to_end(&mut first)
            .map_err(|e| e.to_string())?;
        r.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        if header::is_pipe(&first) {
            return Self::open_pipe(r, len, max_decompressed);
        }
        let header = header::check_limited(&mut r, len, max_decompressed)?;
        r.rewind().map_err(|e| e.to_string())?;
        let r = match &header.damage {
            Some(d) if d.intact_end < header.data.offset + header.data.size => {
                let data = bounded::DataSection {
                    offset: header.data.offset,
                    end: header.data.offset + header.data.size,
                    features: header.features,
                    big_endian: header.big_endian,
                };
                Bounded::file(r, &data, d.intact_end)
            }
            _ => Bounded::whole(r),
        };
        let reader = BufReader::with_capacity(1 << 20, r);
        let PerfFileReader {
            perf_file,
            record_iter,
        } = PerfFileReader::parse_file(reader).map_err(|e| e.to_string())?;
        let unknown = unknown_compression(&perf_file);
        Ok(Self {
            unreadable: unknown.is_some(),
            damaged: unknown.or(header.damage.map(|d| d.why)),
            file: perf_file,
            iter: record_iter,
            total: header.data.size,
        })
    }

    /// Opens a pipe-mode perf.data: attributes and features come as records
    /// (HEADER_ATTR, HEADER_FEATURE) before the first event, build-ids as HEADER_BUILD_ID
    /// records among the events.
    fn open_pipe(mut r: R, len: u64, max_decompressed: u64) -> Result<Self, String> {
        let damage = header::check_pipe_limited(&mut r, len, max_decompressed)?;
        r.rewind().map_err(|e| e.to_string())?;
        let r = match &damage {
            Some(d) => Bounded::pipe(r, d.intact_end),
            None => Bounded::whole(r),
        };
        let reader = BufReader::with_capacity(1 << 20, r);
        // The attribute parser trusts the sizes inside a HEADER_ATTR record.
        let parsed = crate::quiet_panic::catch_quietly(|| PerfFileReader::parse_pipe(reader))
            .ok_or("pipe-mode header records with impossible lengths")?;
        let PerfFileReader {
            perf_file,
            record_iter,
        } = parsed.map_err(|e| e.to_string())?;
        let unknown = unknown_compression(&perf_file);
        Ok(Self {
            unreadable: unknown.is_some(),
            damaged: unknown.or(damage.map(|d| d.why)),
            file: perf_file,
            iter: record_iter,
            total: len.saturating_sub(16),
        })
    }
}

/// The damage of records compressed with something other than zstd (HEADER_COMPRESSED's
/// type): linux-perf-data would take them for zstd and fail on the first one, with a message
/// about zstd frames that does not say why.
fn unknown_compression(file: &PerfFile) -> Option<String> {
    let info = file.compression_info().ok()??;
    (info.type_ != CompressionInfo::ZSTD_TYPE).then(|| {
        format!(
            "records compressed with unknown type {} (only zstd, type 1, is read)",
            info.type_
        )
    })
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: byte 20 of the build-id field is its length.
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// The DSO and build-id of a HEADER_BUILD_ID record body (`struct
/// perf_record_header_build_id` after its header: pid, 24 bytes of build-id, file name), read
/// as linux-perf-data reads the entries of a file's build-id table: `Err` for a body too
/// short, `Ok(None)` for a name that is no DSO (skipped there too).
fn header_build_id(misc: u16, body: &[u8]) -> Result<Option<(DsoKey, Vec<u8>)>, ()> {
    let id = body.get(4..28).ok_or(())?;
    let len = if misc & PERF_RECORD_MISC_BUILD_ID_SIZE != 0 {
        usize::from(id[20].min(20))
    } else {
        // Old perf: the length is the 20 bytes less trailing all-zero 4-byte groups.
        let mut len = 20;
        while len > 0 && id[len - 4..len].iter().all(|b| *b == 0) {
            len -= 4;
        }
        len
    };
    let path = &body[28..];
    let path = &path[..path.iter().position(|b| *b == 0).unwrap_or(path.len())];
    Ok(DsoKey::detect(path, CpuMode::from_misc(misc)).map(|key| (key, id[..len].to_vec())))
}

impl<R: Read> Records<R> {
    /// Calls `f` with each event record that parses and each recorded build-id; damaged
    /// records are skipped and remembered in [`Records::damaged`].
    pub fn for_each(&mut self, mut f: impl FnMut(Item<'_>)) {
        if self.unreadable {
            return;
        }
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
            let (attr_index, record) = match rec {
                PerfFileRecord::EventRecord { attr_index, record } => (attr_index, record),
                PerfFileRecord::UserRecord(u) => {
                    if u.record_type == UserRecordType::PERF_HEADER_BUILD_ID {
                        match header_build_id(u.misc, &u.data.as_slice()) {
                            Ok(Some((key, id))) => f(Item::BuildId(key, id)),
                            Ok(None) => {}
                            Err(()) => {
                                self.damaged
                                    .get_or_insert_with(|| "unparsable build-id record".into());
                            }
                        }
                    }
                    continue;
                }
            };
            bytes = bytes.saturating_add(record.data.len() as u64 + 8);
            if let Some(why) = record_checks::damage(&record) {
                self.damaged.get_or_insert_with(|| why.into());
                continue;
            }
            let time = record.timestamp();
            // The record parser indexes and multiplies lengths from the file.
            match crate::quiet_panic::catch_quietly(|| record.parse()) {
                Some(Ok(parsed)) => f(Item::Event(attr_index, parsed, bytes, time)),
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
