//! The record walk of a perf.data data section (or a pipe) before the reader trusts it:
//! record sizes against the section, AUXTRACE lengths, pipe-mode feature records, and the zstd
//! stream of `perf record -z` records decompressed record by record under a total budget.

use std::io::{BufReader, Read, Seek, SeekFrom};

use kprof_capture::perf_abi::{RECORD_COMPRESSED, RECORD_COMPRESSED2};

use super::header::{
    cmdline_fits, event_desc_fits, u16_at, u32_at, u64_at, Section, FEATURE_CMDLINE,
    FEATURE_EVENT_DESC,
};

/// `PERF_RECORD_AUXTRACE`: the first u64 of its body is the number of trace bytes that follow
/// the record, and linux-perf-data sizes a buffer to it before reading them.
const RECORD_AUXTRACE: u32 = 71;

/// `PERF_RECORD_HEADER_TRACING_DATA`: the tracepoint formats, in pipe mode, followed by more
/// bytes than its header's size says.
const RECORD_HEADER_TRACING_DATA: u32 = 66;
/// `PERF_RECORD_HEADER_FEATURE`: a feature section, in pipe mode.
const RECORD_HEADER_FEATURE: u32 = 80;

/// Damage in the records that leaves the records before it readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong, and where.
    pub why: String,
    /// File offset of the first record not to be read: the reader is shown the records before
    /// it only. The reader sorts records by time a round at a time and drops its round on an
    /// error, so without this bound a damaged record would lose every good one before it up to
    /// the last `FINISHED_ROUND` (all of them in a recording that woke up once).
    pub intact_end: u64,
}

/// Walks the record headers of the data section (one sequential read) so that an AUXTRACE
/// record claiming more trace data than the section holds is an error, not an abort, and
/// follows the zstd stream of compressed records (see [`ZstdWalk`]). Returns the damage that
/// leaves the records before it readable: a record shorter than its header, of a type no perf
/// writes, running past the section, or a zstd stream that does not decode. In a `pipe`,
/// HEADER_FEATURE records carry the feature sections, checked like a file's.
pub(super) fn walk_records(
    r: &mut (impl Read + Seek),
    data: Section,
    big_endian: bool,
    pipe: bool,
    max_decompressed: u64,
) -> Result<Option<Damage>, String> {
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
    let stop = |why: String, at: u64| {
        Ok(Some(Damage {
            why,
            intact_end: at,
        }))
    };
    while at + 8 <= end {
        r.read_exact(&mut h[..8]).map_err(|e| e.to_string())?;
        let ty = u32_at(&h, 0, big_endian).expect("4 bytes") as u32;
        let size = u64::from(u16_at(&h, 6, big_endian).expect("8 bytes read"));
        if let Some(why) = header_damage(ty, size, (at, end), pipe) {
            return stop(why, at);
        }
        if pipe && ty == RECORD_HEADER_FEATURE {
            let mut body = vec![0; (size - 8) as usize];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            check_feature_record(&body, at, big_endian)?;
            at += size;
            continue;
        }
        if ty == RECORD_COMPRESSED || ty == RECORD_COMPRESSED2 {
            let mut body = vec![0; (size - 8) as usize];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            let record = (&body[..], ty == RECORD_COMPRESSED2, at);
            if let Walked::Stop(why) =
                feed_compressed(&mut zstd, record, big_endian, max_decompressed)?
            {
                return stop(why, at);
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
    if at < end {
        let why = if pipe {
            format!("the stream ends inside a record header at offset {at} (cut)")
        } else {
            format!("the data section ends inside a record header at offset {at}")
        };
        return stop(why, at);
    }
    // The reader drops a cut stream's last partial record by itself.
    Ok(zstd.end().map(|why| Damage {
        why,
        intact_end: end,
    }))
}

/// What is wrong with the header of a record of type `ty` and `size` bytes at `at` of a
/// section (or `pipe` stream) ending at `end`, if anything.
fn header_damage(ty: u32, size: u64, (at, end): (u64, u64), pipe: bool) -> Option<String> {
    if !super::record_checks::known_record_type(ty) {
        return Some(format!("record of unknown type {ty} at offset {at}"));
    }
    if size < 8 || (ty == RECORD_AUXTRACE && size < 16) {
        return Some(format!(
            "record at offset {at} is shorter than its header ({size} bytes)"
        ));
    }
    if pipe && ty == RECORD_HEADER_TRACING_DATA {
        // Its payload follows outside the record's size, which the record reader does
        // not know: every record after it would be misread.
        return Some(format!(
            "tracepoint formats in pipe mode (PERF_RECORD_HEADER_TRACING_DATA at offset {at}) are not read: record tracepoints to a file (perf record -o FILE), not to a pipe"
        ));
    }
    if at + size > end {
        return Some(if pipe {
            format!("the stream ends inside a record at offset {at} (cut)")
        } else {
            format!("record at offset {at} runs past the end of the data section")
        });
    }
    None
}

/// What one record leaves of the walk.
enum Walked {
    /// Go on with the next record.
    Next,
    /// Stop: the records before are readable, with this damage.
    Stop(String),
}

/// Checks a pipe-mode HEADER_FEATURE record's `body` at offset `at`.
fn check_feature_record(body: &[u8], at: u64, big_endian: bool) -> Result<(), String> {
    // `struct perf_record_header_feature`: a u64 feature id, then the section.
    // linux-perf-data keeps the id's low 32 bits, so they decide here too.
    let feature = u64_at(body, 0, big_endian).unwrap_or(0) as u32;
    let section = body.get(8..).unwrap_or_default();
    let fits = match feature {
        FEATURE_CMDLINE => cmdline_fits(section, big_endian),
        FEATURE_EVENT_DESC => event_desc_fits(section, big_endian),
        _ => Some(()),
    };
    match fits {
        Some(()) => Ok(()),
        None => Err(format!(
            "feature record #{feature} at offset {at} has counts or lengths larger than its {} bytes (corrupted)",
            section.len()
        )),
    }
}

/// Feeds the payload of a compressed record's `body` (COMPRESSED2: `compressed2`) at offset
/// `at` to the zstd walk: too large in itself or in all (`max_decompressed`) is an error,
/// damage stops the walk.
fn feed_compressed(
    zstd: &mut ZstdWalk,
    (body, compressed2, at): (&[u8], bool, u64),
    big_endian: bool,
    max_decompressed: u64,
) -> Result<Walked, String> {
    let payload = if compressed2 {
        let len = u64_at(body, 0, big_endian).and_then(|l| usize::try_from(l).ok());
        match len.and_then(|l| body.get(8..8usize.checked_add(l)?)) {
            Some(p) => p,
            None => {
                return Ok(Walked::Stop(format!(
                    "compressed record at offset {at} claims more data than it holds"
                )))
            }
        }
    } else {
        body
    };
    match zstd.feed(payload, big_endian) {
        Fed::Ok => Ok(Walked::Next),
        Fed::Damaged(why) => Ok(Walked::Stop(format!(
            "compressed record at offset {at}: {why}"
        ))),
        // The reader would hold it all in memory before any check of ours.
        Fed::TooLarge => Err(format!(
            "compressed record at offset {at} expands past {} MiB (corrupted)",
            MAX_DECOMPRESSED_RECORD >> 20
        )),
        Fed::TotalTooLarge => Err(format!(
            "the compressed records decompress to more than {} ({} times the input \
                 size limit, at offset {at}): {}",
            crate::limits::human(max_decompressed),
            crate::limits::RECORDS_PER_INPUT,
            crate::limits::how_to_raise(max_decompressed / crate::limits::RECORDS_PER_INPUT)
        )),
    }
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
