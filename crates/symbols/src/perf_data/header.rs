//! Checks a perf.data header against the file size before the reader trusts it.
//!
//! `linux-perf-data` allocates whatever a section header says, so a corrupted size would
//! abort the process with an allocation failure instead of giving an error.

use std::io::{Read, Seek, SeekFrom};

pub use super::walk::Damage;

/// `struct perf_file_header` is 104 bytes since perf 3.x.
const HEADER_SIZE: u64 = 104;

/// A `perf_file_section` from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// Offset in the file.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// The parts of the header the reader relies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The file was written big-endian (`2ELIFREP`).
    pub big_endian: bool,
    /// Size of one `perf_event_attr` entry with its ids section.
    pub attr_size: u64,
    /// The event attributes.
    pub attrs: Section,
    /// The records.
    pub data: Section,
    /// Old perf's event types.
    pub event_types: Section,
    /// Number of feature sections.
    pub features: u32,
    /// Damage in the records that still leaves the records before it readable.
    pub damage: Option<Damage>,
}

/// Reads and checks the header of a perf.data of `file_len` bytes, its compressed records
/// decompressing to at most the default input size limit.
pub fn check(r: &mut (impl Read + Seek), file_len: u64) -> Result<Header, String> {
    check_limited(r, file_len, crate::limits::DEFAULT_MAX_INPUT_SIZE)
}

/// Largest attribute or event type section: an entry is ~150 bytes and a recording has a
/// few events per CPU, so this is ~100000 of them. The reader reserves room for as many
/// entries as the size says.
const MAX_ATTR_SECTION: u64 = 16 << 20;

/// Largest total of the feature sections, which the reader holds in memory: perf's largest
/// (build-ids, tracing data) are a few MiB.
const MAX_FEATURE_SECTIONS: u64 = 256 << 20;

/// [`check`] with the compressed records decompressing to at most `max_decompressed` bytes.
pub fn check_limited(
    r: &mut (impl Read + Seek),
    file_len: u64,
    max_decompressed: u64,
) -> Result<Header, String> {
    let mut raw = [0u8; HEADER_SIZE as usize];
    r.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    r.read_exact(&mut raw).map_err(|_| {
        format!("{file_len} bytes is shorter than the {HEADER_SIZE}-byte perf.data header")
    })?;
    let big_endian = match &raw[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        other => return Err(format!("bad magic {other:02x?}, expected PERFILE2")),
    };
    let u = |i: usize| u64_at(&raw, i * 8, big_endian).expect("within the header");
    let size = u(1);
    if size != HEADER_SIZE {
        return Err(format!("header size {size}, expected {HEADER_SIZE}"));
    }
    let attr_size = u(2);
    let attrs = Section {
        offset: u(3),
        size: u(4),
    };
    let data = Section {
        offset: u(5),
        size: u(6),
    };
    let event_types = Section {
        offset: u(7),
        size: u(8),
    };
    let features: u32 = (9..13).map(|i| u(i).count_ones()).sum();
    if !(64..=4096).contains(&attr_size) {
        return Err(format!("attribute size {attr_size} is absurd"));
    }
    let within = |what: &str, s: Section| section_within(what, s, file_len);
    within("attribute", attrs)?;
    within("data", data)?;
    within("event type", event_types)?;
    for (what, s) in [("attribute", attrs), ("event type", event_types)] {
        if s.size > MAX_ATTR_SECTION {
            return Err(format!(
                "{what} section of {} bytes is larger than the {} any perf.data has (corrupted)",
                s.size,
                crate::limits::human(MAX_ATTR_SECTION)
            ));
        }
    }
    // `attr_size` covers the attr and the section of its sample ids that follows it.
    let entry = attr_size;
    if !attrs.size.is_multiple_of(entry) {
        return Err(format!(
            "attribute section size {} is not a multiple of the entry size {entry}",
            attrs.size
        ));
    }
    let bitmap = [u(9), u(10), u(11), u(12)];
    check_features(r, data.offset + data.size, bitmap, big_endian, file_len)?;
    check_event_types(r, event_types, attr_size, big_endian, file_len)?;
    let damage = super::walk::walk_records(r, data, big_endian, false, max_decompressed)?;
    Ok(Header {
        big_endian,
        attr_size,
        attrs,
        data,
        event_types,
        features,
        damage,
    })
}

/// The feature table at `table_offset` (one entry per set bit of `bitmap`) and the feature
/// sections it points at: within the file, not larger in all than any perf.data's, and the
/// command line and event descriptions with counts and lengths that fit their sections.
fn check_features(
    r: &mut (impl Read + Seek),
    table_offset: u64,
    bitmap: [u64; 4],
    big_endian: bool,
    file_len: u64,
) -> Result<(), String> {
    let table = Section {
        offset: table_offset,
        size: u64::from(bitmap.iter().map(|w| w.count_ones()).sum::<u32>()) * 16,
    };
    section_within("feature table", table, file_len)?;
    r.seek(SeekFrom::Start(table.offset))
        .map_err(|e| e.to_string())?;
    // Feature sections follow the table in the order of the set bits of the bitmap.
    let bits = (0..256u32).filter(|&b| bitmap[(b / 64) as usize] & (1 << (b % 64)) != 0);
    let mut sections = Vec::new();
    for (i, bit) in bits.enumerate() {
        let mut b = [0u8; 16];
        r.read_exact(&mut b).map_err(|e| e.to_string())?;
        let section = Section {
            offset: u64_at(&b, 0, big_endian).expect("16 bytes read"),
            size: u64_at(&b, 8, big_endian).expect("16 bytes read"),
        };
        section_within(&format!("feature #{i}"), section, file_len)?;
        sections.push((bit, section));
    }
    let features_total = sections
        .iter()
        .fold(0u64, |t, (_, s)| t.saturating_add(s.size));
    if features_total > MAX_FEATURE_SECTIONS {
        return Err(format!(
            "feature sections of {features_total} bytes in all, more than the {} any perf.data has (corrupted)",
            crate::limits::human(MAX_FEATURE_SECTIONS)
        ));
    }
    for (bit, section) in sections {
        let what = match bit {
            FEATURE_CMDLINE => "command line",
            FEATURE_EVENT_DESC => "event description",
            _ => continue,
        };
        let bytes = read_section(r, section)?;
        let fits = if bit == FEATURE_CMDLINE {
            cmdline_fits(&bytes, big_endian)
        } else {
            event_desc_fits(&bytes, big_endian)
        };
        if fits.is_none() {
            return Err(format!(
                "{what} feature section at offset {} has counts or lengths larger than its {} bytes (corrupted)",
                section.offset, section.size
            ));
        }
    }
    Ok(())
}

/// The event types section of old perf: each entry's ids section within the file.
fn check_event_types(
    r: &mut (impl Read + Seek),
    event_types: Section,
    attr_size: u64,
    big_endian: bool,
    file_len: u64,
) -> Result<(), String> {
    if event_types.size == 0 {
        return Ok(());
    }
    // Old perf: `attr_size` bytes of attr, then a section with that event's ids.
    let bytes = read_section(r, event_types)?;
    for entry in bytes.chunks_exact((attr_size + 16) as usize) {
        let ids = entry.len() - 16;
        let section = Section {
            offset: u64_at(entry, ids, big_endian).expect("within the entry"),
            size: u64_at(entry, ids + 8, big_endian).expect("within the entry"),
        };
        section_within("event type ids", section, file_len)?;
    }
    Ok(())
}

/// Whether section `s`, called `what`, lies within a file of `file_len` bytes.
fn section_within(what: &str, s: Section, file_len: u64) -> Result<(), String> {
    match s.offset.checked_add(s.size) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(format!(
            "{what} section at offset {} of {} bytes runs past the end of the {file_len}-byte file (truncated or corrupted)",
            s.offset, s.size
        )),
    }
}

/// `struct perf_pipe_file_header`: the magic and a size of 16, records follow.
const PIPE_HEADER_SIZE: u64 = 16;

/// Whether the 16 first bytes are the header of a pipe-mode perf.data (`perf record -o -`).
pub fn is_pipe(first: &[u8]) -> bool {
    let big_endian = first.starts_with(b"2ELIFREP");
    (first.starts_with(b"PERFILE2") || big_endian)
        && u64_at(first, 8, big_endian) == Some(PIPE_HEADER_SIZE)
}

/// Checks the records of a pipe-mode perf.data of `len` bytes as [`check`] does a file's
/// data section. Returns the damage that leaves the records before it readable: in a
/// stream, a last record cut short, which the reader takes for the end of the stream.
pub fn check_pipe(r: &mut (impl Read + Seek), len: u64) -> Result<Option<Damage>, String> {
    check_pipe_limited(r, len, crate::limits::DEFAULT_MAX_INPUT_SIZE)
}

/// [`check_pipe`] with the compressed records decompressing to at most `max_decompressed`
/// bytes.
pub fn check_pipe_limited(
    r: &mut (impl Read + Seek),
    len: u64,
    max_decompressed: u64,
) -> Result<Option<Damage>, String> {
    let mut first = [0u8; PIPE_HEADER_SIZE as usize];
    r.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    r.read_exact(&mut first)
        .map_err(|_| format!("{len} bytes is shorter than the pipe-mode header"))?;
    if !is_pipe(&first) {
        return Err("not a pipe-mode perf.data".into());
    }
    let data = Section {
        offset: PIPE_HEADER_SIZE,
        size: len - PIPE_HEADER_SIZE,
    };
    super::walk::walk_records(
        r,
        data,
        first.starts_with(b"2ELIFREP"),
        true,
        max_decompressed,
    )
}

/// `HEADER_CMDLINE` and `HEADER_EVENT_DESC` in perf's `util/header.h`.
pub(super) const FEATURE_CMDLINE: u32 = 11;
pub(super) const FEATURE_EVENT_DESC: u32 = 12;

fn read_section(r: &mut (impl Read + Seek), s: Section) -> Result<Vec<u8>, String> {
    r.seek(SeekFrom::Start(s.offset))
        .map_err(|e| e.to_string())?;
    let mut bytes = vec![0; s.size as usize];
    r.read_exact(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// `linux-perf-data` reserves room for as many strings as the count says, before reading any.
pub(super) fn cmdline_fits(b: &[u8], big_endian: bool) -> Option<()> {
    let nr = u32_at(b, 0, big_endian)?;
    let mut at = 4usize;
    for _ in 0..nr {
        at = at.checked_add(4)?.checked_add(u32_at(b, at, big_endian)?)?;
    }
    (at <= b.len()).then_some(())
}

/// The same for the events and their ids: `struct { u32 nr; u32 attr_size; events[nr] }`.
pub(super) fn event_desc_fits(b: &[u8], big_endian: bool) -> Option<()> {
    let nr = u32_at(b, 0, big_endian)?;
    let attr_size = u32_at(b, 4, big_endian)?;
    let mut at = 8usize;
    for _ in 0..nr {
        at = at.checked_add(attr_size)?;
        let ids = u32_at(b, at, big_endian)?;
        let name = u32_at(b, at.checked_add(4)?, big_endian)?;
        at = at
            .checked_add(8)?
            .checked_add(name)?
            .checked_add(ids.checked_mul(8)?)?;
        if at > b.len() {
            return None;
        }
    }
    Some(())
}

pub(super) use kprof_capture::bytes::{u16_at, u64_at};

/// A u32 count or length, as the `usize` it is used as.
pub(super) fn u32_at(b: &[u8], at: usize, big_endian: bool) -> Option<usize> {
    usize::try_from(kprof_capture::bytes::u32_at(b, at, big_endian)?).ok()
}
