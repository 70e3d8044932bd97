//! Checks a perf.data header against the file size before the reader trusts it.
//!
//! `linux-perf-data` allocates whatever a section header says, so a corrupted size would
//! abort the process with an allocation failure instead of giving an error.

use std::io::{BufReader, Read, Seek, SeekFrom};

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
    /// Damage in the records that still leaves the records before it readable: a zstd
    /// stream of `perf record -z` that ends inside a block or a record (a cut file).
    pub damage: Option<String>,
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
    let within = |what: &str, s: Section| -> Result<(), String> {
        match s.offset.checked_add(s.size) {
            Some(end) if end <= file_len => Ok(()),
            _ => Err(format!(
                "{what} section at offset {} of {} bytes runs past the end of the {file_len}-byte file (truncated or corrupted)",
                s.offset, s.size
            )),
        }
    };
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
    let table = Section {
        offset: data.offset + data.size,
        size: u64::from(features) * 16,
    };
    within("feature table", table)?;
    r.seek(SeekFrom::Start(table.offset))
        .map_err(|e| e.to_string())?;
    // Feature sections follow the table in the order of the set bits of the bitmap.
    let bits = (0..256u32).filter(|&b| u((9 + b / 64) as usize) & (1 << (b % 64)) != 0);
    let mut sections = Vec::new();
    for (i, bit) in bits.enumerate() {
        let mut b = [0u8; 16];
        r.read_exact(&mut b).map_err(|e| e.to_string())?;
        let section = Section {
            offset: u64_at(&b, 0, big_endian).expect("16 bytes read"),
            size: u64_at(&b, 8, big_endian).expect("16 bytes read"),
        };
        within(&format!("feature #{i}"), section)?;
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
    if event_types.size != 0 {
        // Old perf: `attr_size` bytes of attr, then a section with that event's ids.
        let bytes = read_section(r, event_types)?;
        for entry in bytes.chunks_exact((attr_size + 16) as usize) {
            let ids = entry.len() - 16;
            within(
                "event type ids",
                Section {
                    offset: u64_at(entry, ids, big_endian).expect("within the entry"),
                    size: u64_at(entry, ids + 8, big_endian).expect("within the entry"),
                },
            )?;
        }
    }
    let damage = walk_records(r, data, big_endian, false, max_decompressed)?;
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
pub fn check_pipe(r: &mut (impl Read + Seek), len: u64) -> Result<Option<String>, String> {
    check_pipe_limited(r, len, crate::limits::DEFAULT_MAX_INPUT_SIZE)
}

/// [`check_pipe`] with the compressed records decompressing to at most `max_decompressed`
/// bytes.
pub fn check_pipe_limited(
    r: &mut (impl Read + Seek),
    len: u64,
    max_decompressed: u64,
) -> Result<Option<String>, String> {
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
    walk_records(
        r,
        data,
        first.starts_with(b"2ELIFREP"),
        true,
        max_decompressed,
    )
}

/// `HEADER_CMDLINE` and `HEADER_EVENT_DESC` in perf's `util/header.h`.
const FEATURE_CMDLINE: u32 = 11;
const FEATURE_EVENT_DESC: u32 = 12;

fn read_section(r: &mut (impl Read + Seek), s: Section) -> Result<Vec<u8>, String> {
    r.seek(SeekFrom::Start(s.offset))
        .map_err(|e| e.to_string())?;
    let mut bytes = vec![0; s.size as usize];
    r.read_exact(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// `linux-perf-data` reserves room for as many strings as the count says, before reading any.
fn cmdline_fits(b: &[u8], big_endian: bool) -> Option<()> {
    let nr = u32_at(b, 0, big_endian)?;
    let mut at = 4usize;
    for _ in 0..nr {
        at = at.checked_add(4)?.checked_add(u32_at(b, at, big_endian)?)?;
    }
    (at <= b.len()).then_some(())
}

/// The same for the events and their ids: `struct { u32 nr; u32 attr_size; events[nr] }`.
fn event_desc_fits(b: &[u8], big_endian: bool) -> Option<()> {
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

fn bytes_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u16_at(b: &[u8], at: usize, big_endian: bool) -> Option<u16> {
    let a = bytes_at(b, at)?;
    Some(if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    })
}

/// A u32 count or length, as the `usize` it is used as.
fn u32_at(b: &[u8], at: usize, big_endian: bool) -> Option<usize> {
    let a = bytes_at(b, at)?;
    let v = if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    };
    usize::try_from(v).ok()
}

fn u64_at(b: &[u8], at: usize, big_endian: bool) -> Option<u64> {
    let a = bytes_at(b, at)?;
    Some(if big_endian {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

/// `PERF_RECORD_AUXTRACE`: the first u64 of its body is the number of trace bytes that follow
/// the record, and linux-perf-data sizes a buffer to it before reading them.
const RECORD_AUXTRACE: u32 = 71;

/// `PERF_RECORD_COMPRESSED` and `PERF_RECORD_COMPRESSED2` (perf 6.15 on): zstd data, after a
/// u64 of its length in the second.
const RECORD_COMPRESSED: u32 = 81;
const RECORD_COMPRESSED2: u32 = 83;
/// `PERF_RECORD_HEADER_FEATURE`: a feature section, in pipe mode.
const RECORD_HEADER_FEATURE: u32 = 80;

/// Walks the record headers of the data section (one sequential read) so that an AUXTRACE
/// record claiming more trace data than the section holds is an error, not an abort, and
/// follows the zstd stream of compressed records (see [`ZstdWalk`]). Returns the damage that
/// leaves the records before it readable. In a `pipe`, HEADER_FEATURE records carry the
/// feature sections, checked like a file's, and a record cut by the end of the stream is
/// damage (in a file the reader reports it itself).
fn walk_records(
    r: &mut (impl Read + Seek),
    data: Section,
    big_endian: bool,
    pipe: bool,
    max_decompressed: u64,
) -> Result<Option<String>, String> {
    r.seek(SeekFrom::Start(data.offset))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::with_capacity(1 << 16, r);
    let end = data.offset + data.size;
    let mut at = data.offset;
    let mut h = [0u8; 16];
    let mut zstd = ZstdWalk {
        left: max_decompressed,
        ..ZstdWalk::default()
    };
    while at + 8 <= end {
        r.read_exact(&mut h[..8]).map_err(|e| e.to_string())?;
        let ty = u32_at(&h, 0, big_endian).expect("4 bytes") as u32;
        let size = u64::from(u16_at(&h, 6, big_endian).expect("8 bytes read"));
        if size < 8 || (ty == RECORD_AUXTRACE && size < 16) {
            // Shorter than its own header or body: the reader reports these itself.
            return Ok(None);
        }
        if pipe && at + size > end {
            return Ok(Some(format!(
                "the stream ends inside a record at offset {at} (cut)"
            )));
        }
        if pipe && ty == RECORD_HEADER_FEATURE {
            let mut body = vec![0; (size - 8) as usize];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            // `struct perf_record_header_feature`: a u64 feature id, then the section.
            // linux-perf-data keeps the id's low 32 bits, so they decide here too.
            let feature = u64_at(&body, 0, big_endian).unwrap_or(0) as u32;
            let section = body.get(8..).unwrap_or_default();
            let fits = match feature {
                FEATURE_CMDLINE => cmdline_fits(section, big_endian),
                FEATURE_EVENT_DESC => event_desc_fits(section, big_endian),
                _ => Some(()),
            };
            if fits.is_none() {
                return Err(format!(
                    "feature record #{feature} at offset {at} has counts or lengths larger than its {} bytes (corrupted)",
                    section.len()
                ));
            }
            at += size;
            continue;
        }
        if ty == RECORD_COMPRESSED || ty == RECORD_COMPRESSED2 {
            let mut body = vec![0; (size - 8) as usize];
            if r.read_exact(&mut body).is_err() {
                return Ok(None);
            }
            let payload = if ty == RECORD_COMPRESSED2 {
                let len = u64_at(&body, 0, big_endian).and_then(|l| usize::try_from(l).ok());
                match len.and_then(|l| body.get(8..8usize.checked_add(l)?)) {
                    Some(p) => p,
                    // The reader reports a length past the record itself.
                    None => return Ok(None),
                }
            } else {
                &body[..]
            };
            match zstd.feed(payload, big_endian) {
                Fed::Ok => {}
                Fed::Damaged(why) => {
                    return Ok(Some(format!("compressed record at offset {at}: {why}")));
                }
                // The reader would hold it all in memory before any check of ours.
                Fed::TooLarge => {
                    return Err(format!(
                        "compressed record at offset {at} expands past {} MiB (corrupted)",
                        MAX_DECOMPRESSED_RECORD >> 20
                    ));
                }
                Fed::TotalTooLarge => {
                    return Err(format!(
                        "the compressed records decompress to more than {} ({} times the input \
                         size limit, at offset {at}): {}",
                        crate::limits::human(max_decompressed),
                        crate::limits::RECORDS_PER_INPUT,
                        crate::limits::how_to_raise(
                            max_decompressed / crate::limits::RECORDS_PER_INPUT
                        )
                    ));
                }
            }
            at += size;
            continue;
        }
        let mut skip = size - 8;
        if ty == RECORD_AUXTRACE {
            r.read_exact(&mut h[8..16]).map_err(|e| e.to_string())?;
            let aux = u64_at(&h, 8, big_endian).expect("16 bytes read");
            if at
                .checked_add(size)
                .and_then(|e| e.checked_add(aux))
                .is_none_or(|e| e > end)
            {
                return Err(format!(
                    "AUXTRACE record at offset {at} claims {aux} bytes of trace data, past the end of the data section (corrupted)"
                ));
            }
            skip = size - 16 + aux;
            at += aux;
        }
        r.seek_relative(skip as i64).map_err(|e| e.to_string())?;
        at += size;
    }
    if pipe && at < end {
        return Ok(Some(format!(
            "the stream ends inside a record header at offset {at} (cut)"
        )));
    }
    Ok(zstd.end())
}

/// Largest output of one compressed record: perf compresses at most one ring buffer flush
/// (a few MiB) into it, and linux-perf-data holds a record's whole output in memory, so a
/// crafted record must not expand to gigabytes.
const MAX_DECOMPRESSED_RECORD: usize = 256 << 20;

/// `ZSTD_blockHeaderSize`: what the decoder asks for next when it stands between blocks.
const ZSTD_BLOCK_HEADER: usize = 3;

/// The zstd stream of a `perf record -z` file, decoded once ahead of the reader. perf keeps
/// one zstd frame open for the whole recording and flushes it at the end of each compressed
/// record, so a record's output may end inside a perf record (the next one continues it),
/// but the whole stream must end between blocks and between records. A cut file does not,
/// and the reader would drop its last partial record without a word.
#[derive(Default)]
struct ZstdWalk {
    dctx: Option<zstd_safe::DCtx<'static>>,
    /// Decoded bytes of a perf record not yet complete.
    tail: Vec<u8>,
    /// The decoder's last hint of the input it needs next (0 at the end of a frame).
    hint: usize,
    fed: bool,
    /// What the records may still decompress to, in all: the reader processes every byte,
    /// so a small file of tiny records expanding a millionfold is a bomb too.
    left: u64,
}

/// What one compressed record's zstd data gave.
enum Fed {
    Ok,
    /// Corrupt data: the records before it are readable.
    Damaged(String),
    /// More output than [`MAX_DECOMPRESSED_RECORD`].
    TooLarge,
    /// More output, over all records, than the input size limit.
    TotalTooLarge,
}

impl ZstdWalk {
    /// Decodes one record's zstd data.
    fn feed(&mut self, payload: &[u8], big_endian: bool) -> Fed {
        self.fed = true;
        let dctx = self.dctx.get_or_insert_with(zstd_safe::DCtx::create);
        let mut input = zstd_safe::InBuffer::around(payload);
        let mut out = vec![0u8; 1 << 16];
        let mut produced = 0usize;
        loop {
            let mut o = zstd_safe::OutBuffer::around(&mut out[..]);
            match dctx.decompress_stream(&mut o, &mut input) {
                Ok(hint) => self.hint = hint,
                Err(code) => {
                    return Fed::Damaged(format!("zstd: {}", zstd_safe::get_error_name(code)))
                }
            }
            let n = o.pos();
            produced += n;
            if produced > MAX_DECOMPRESSED_RECORD {
                return Fed::TooLarge;
            }
            match self.left.checked_sub(n as u64) {
                Some(left) => self.left = left,
                None => return Fed::TotalTooLarge,
            }
            self.tail.extend_from_slice(&out[..n]);
            // Keep only the bytes of the perf record not yet complete.
            let mut at = 0usize;
            while let Some(size) = u16_at(&self.tail, at + 6, big_endian) {
                let size = usize::from(size);
                if size < 8 {
                    // The reader reports a record shorter than its header.
                    self.tail.clear();
                    at = 0;
                    break;
                }
                if at + size > self.tail.len() {
                    break;
                }
                at += size;
            }
            self.tail.drain(..at);
            if n < out.len() && input.pos() == payload.len() {
                return Fed::Ok;
            }
        }
    }

    /// The damage at the end of the data section, if the stream was cut.
    fn end(self) -> Option<String> {
        if !self.fed {
            return None;
        }
        if !self.tail.is_empty() {
            return Some(format!(
                "the compressed records end {} bytes into a record (cut)",
                self.tail.len()
            ));
        }
        (self.hint != 0 && self.hint != ZSTD_BLOCK_HEADER)
            .then(|| "the compressed records end inside a zstd block (cut)".to_string())
    }
}
