//! `PERF_RECORD_COMPRESSED` records, as `perf record -z` writes them: one zstd frame kept open
//! for the whole capture, flushed at the end of every batch so that each compressed record
//! decodes to whole perf records on its own (given the ones before it). A change of level
//! ([`Encoder::set_level`], while the agent is behind) ends the frame and starts another:
//! zstd's streaming decoders, perf's included, read frames one after the other.
//!
//! Records are batched rather than fed to zstd one by one: every flush ends a zstd block, and a
//! block per 6 KiB sample would cost ratio and speed. A batch ends when the caller closes a
//! round (each drain of the rings) or when it would outgrow [`BATCH_LIMIT`], which is also what
//! the file's COMPRESSED feature announces as the most one record decodes to (perf sizes its
//! decompression buffer by it).

use std::io::{self, Write};

use zstd_safe::{
    zstd_sys::ZSTD_EndDirective, CCtx, CParameter, InBuffer, OutBuffer, ResetDirective,
};

pub use kprof_capture::perf_abi::RECORD_COMPRESSED;

const HEADER: usize = 8;
/// perf's limit for one compressed record's payload (`PERF_SAMPLE_MAX_SIZE` less the header
/// and one byte): the header's size field is a u16.
const MAX_PAYLOAD: usize = u16::MAX as usize - HEADER - 1;
/// Raw bytes compressed into one record at most: zstd's worst case for them
/// (`ZSTD_COMPRESSBOUND`: 64,512 + 252 + 32, plus an 18-byte frame header) fits
/// [`MAX_PAYLOAD`].
const SLICE: usize = 63 * 1024;
/// The largest batch of raw records compressed at once, and so the most one compressed record
/// decodes to: perf's reader allocates this much per compressed record.
pub const BATCH_LIMIT: usize = 256 * 1024;

/// zstd levels perf accepts for `-z`/`--compression-level`.
pub const LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// The highest level whose zstd strategy this build has, when ci/build-agent left zstd's
/// slower strategies out (`KPROF_ZSTD_MAX_STRATEGY_LEVEL` at build time; docs/agent.md,
/// "Compression"); `None`: all of them.
const MAX_STRATEGY_LEVEL: Option<&str> = option_env!("KPROF_ZSTD_MAX_STRATEGY_LEVEL");

/// What the user should know about `level` in this build: above the highest level whose
/// strategy was built in, zstd compresses with that level's strategy (it cascades down),
/// with the asked level's window and table sizes.
pub fn level_note(level: i32) -> Option<String> {
    level_note_for(level, MAX_STRATEGY_LEVEL.and_then(|m| m.parse().ok()))
}

fn level_note_for(level: i32, max_strategy_level: Option<i32>) -> Option<String> {
    let max = max_strategy_level?;
    (level > max).then(|| {
        format!(
            "zstd level {level} compresses with level {max}'s strategy in this static agent \
             (built without zstd's slower strategies to fit 1.5 MiB; docs/agent.md), at level \
             {level}'s window and table sizes"
        )
    })
}

/// Turns batches of perf records into compressed records.
pub struct Encoder {
    cctx: CCtx<'static>,
    level: i32,
    /// The level of the frame being written, and the one asked by [`Encoder::set_level`],
    /// which the next batch brings in by ending the frame.
    current: i32,
    target: i32,
    /// A frame is open: something was compressed since the last one ended.
    in_frame: bool,
    /// The compressed bytes of one slice, before they go out as records.
    zout: Vec<u8>,
    batch: Vec<u8>,
    raw_bytes: u64,
    compressed_bytes: u64,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("level", &self.level)
            .field("batch", &self.batch.len())
            .field("raw_bytes", &self.raw_bytes)
            .field("compressed_bytes", &self.compressed_bytes)
            .finish()
    }
}

fn zstd_error(what: &str, code: usize) -> io::Error {
    io::Error::other(format!("zstd {what}: {}", zstd_safe::get_error_name(code)))
}

impl Encoder {
    /// An encoder at zstd `level` (one of [`LEVELS`]).
    pub fn new(level: i32) -> io::Result<Encoder> {
        let mut cctx = CCtx::try_create()
            .ok_or_else(|| io::Error::other("zstd: cannot allocate a compression context"))?;
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(|c| zstd_error("level", c))?;
        Ok(Encoder {
            cctx,
            level,
            current: level,
            target: level,
            in_frame: false,
            zout: Vec::with_capacity(MAX_PAYLOAD),
            batch: Vec::with_capacity(BATCH_LIMIT),
            raw_bytes: 0,
            compressed_bytes: 0,
        })
    }

    /// The zstd level, for the file's COMPRESSED feature.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// Raw bytes in, compressed bytes out (record headers included) so far.
    pub fn totals(&self) -> (u64, u64) {
        (self.raw_bytes, self.compressed_bytes)
    }

    /// Adds one whole record to the batch; a full batch is compressed into `w` first. Returns
    /// the bytes written to `w`.
    pub fn push(&mut self, rec: &[u8], w: &mut impl Write) -> io::Result<u64> {
        let mut written = 0;
        if self.batch.len() + rec.len() > BATCH_LIMIT {
            written = self.flush(w)?;
        }
        self.batch.extend_from_slice(rec);
        Ok(written)
    }

    /// Drops the batch not yet compressed (after a failed write, nothing more is written).
    pub fn discard(&mut self) {
        self.batch.clear();
    }

    /// Compresses the batch into compressed records written to `w`; each ends with a zstd
    /// flush, so the file decodes up to its last whole record. Returns the bytes written.
    pub fn flush(&mut self, w: &mut impl Write) -> io::Result<u64> {
        if self.batch.is_empty() {
            return Ok(0);
        }
        self.compress_batch(w)
    }

    /// Compresses what follows at zstd `level` (the file's level, or a faster one while the
    /// agent is behind). A frame already open ends with the next batch, compressed at the
    /// old level: an end of frame alone would be a compressed record that decodes to
    /// nothing, which perf refuses ("Couldn't decompress data").
    pub fn set_level(&mut self, level: i32) -> io::Result<()> {
        self.target = level;
        if !self.in_frame && self.target != self.current {
            self.apply_target()?;
        }
        Ok(())
    }

    /// Starts the next frame at the target level.
    fn apply_target(&mut self) -> io::Result<()> {
        self.cctx
            .reset(ResetDirective::SessionOnly)
            .map_err(|c| zstd_error("reset", c))?;
        self.cctx
            .set_parameter(CParameter::CompressionLevel(self.target))
            .map_err(|c| zstd_error("level", c))?;
        self.current = self.target;
        self.in_frame = false;
        Ok(())
    }

    /// Compresses the batch (its last slice ends the frame when the level changes) in slices
    /// of whole records up to [`SLICE`] bytes, each flushed into one compressed
    /// record: a flush ends a zstd block, so every compressed record decodes to its slice by
    /// itself, whole records (one holding only part of a compressed block, or the bare end
    /// of a frame, would decode to nothing, which perf refuses: "Couldn't decompress data").
    /// Returns the bytes written.
    fn compress_batch(&mut self, w: &mut impl Write) -> io::Result<u64> {
        let end = if self.target != self.current {
            ZSTD_EndDirective::ZSTD_e_end
        } else {
            ZSTD_EndDirective::ZSTD_e_flush
        };
        self.raw_bytes += self.batch.len() as u64;
        let mut written = 0u64;
        let mut start = 0;
        while start < self.batch.len() {
            let stop = slice_end(&self.batch, start);
            let directive = if stop == self.batch.len() {
                end
            } else {
                ZSTD_EndDirective::ZSTD_e_flush
            };
            let slice = &self.batch[start..stop];
            start = stop;
            let mut input = InBuffer::around(slice);
            self.zout.clear();
            loop {
                self.zout.reserve(MAX_PAYLOAD);
                let pos = self.zout.len();
                let mut output = OutBuffer::around_pos(&mut self.zout, pos);
                let left = self
                    .cctx
                    .compress_stream2(&mut output, &mut input, directive)
                    .map_err(|c| zstd_error("compression", c))?;
                if left == 0 && input.pos() == slice.len() {
                    break;
                }
            }
            // A slice's flush fits one record (zstd's bound for SLICE bytes is under
            // MAX_PAYLOAD). Only a single record larger than that, which does not compress,
            // is split: zstd writes it as a raw block, which decodes in parts.
            for chunk in self.zout.chunks(MAX_PAYLOAD) {
                let mut header = [0u8; HEADER];
                header[..4].copy_from_slice(&RECORD_COMPRESSED.to_ne_bytes());
                header[6..8].copy_from_slice(&((HEADER + chunk.len()) as u16).to_ne_bytes());
                w.write_all(&header)?;
                w.write_all(chunk)?;
                written += (HEADER + chunk.len()) as u64;
            }
        }
        self.compressed_bytes += written;
        self.batch.clear();
        if end == ZSTD_EndDirective::ZSTD_e_end {
            self.apply_target()?;
        } else {
            self.in_frame = true;
        }
        Ok(written)
    }
}

/// Where the slice of `batch` (whole records, each with its size at bytes 6-7 of its header)
/// that starts at `start` ends: after as many records as fit [`SLICE`], at least one.
fn slice_end(batch: &[u8], start: usize) -> usize {
    let mut at = start;
    while at < batch.len() {
        let size = batch.get(at + 6..at + 8).map_or(batch.len() - at, |s| {
            usize::from(u16::from_ne_bytes([s[0], s[1]])).max(HEADER)
        });
        if at > start && at + size - start > SLICE {
            break;
        }
        at += size;
    }
    at.min(batch.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Levels above the build's last strategy get a note; the others, and full builds, none.
    #[test]
    fn level_note_zstd_without_slow_strategies() {
        assert_eq!(level_note_for(4, Some(4)), None);
        assert_eq!(level_note_for(19, None), None);
        let n = level_note_for(19, Some(4)).unwrap();
        assert!(
            n.starts_with("zstd level 19 compresses with level 4's strategy"),
            "{n}"
        );
    }

    /// Decodes every compressed record of `data` (a sequence of them) with one stream, as
    /// perf's reader does; each must decode to whole 8-byte-header records by itself.
    fn decode_records(data: &[u8]) -> Vec<Vec<u8>> {
        let mut d = zstd_safe::DCtx::create();
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let ty = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
            let size = u16::from_ne_bytes(data[at + 6..at + 8].try_into().unwrap()) as usize;
            assert_eq!(ty, RECORD_COMPRESSED);
            let mut input = InBuffer::around(&data[at + HEADER..at + size]);
            let mut buf = vec![0u8; BATCH_LIMIT];
            let mut o = OutBuffer::around(&mut buf[..]);
            while input.pos() < input.src.len() {
                d.decompress_stream(&mut o, &mut input).unwrap();
            }
            let n = o.pos();
            assert!(
                n <= BATCH_LIMIT,
                "one record decodes to at most the batch limit"
            );
            out.push(buf[..n].to_vec());
            at += size;
        }
        out
    }

    fn sample(i: u32, len: usize) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[..4].copy_from_slice(&9u32.to_ne_bytes());
        r[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
        for (k, b) in r[8..].iter_mut().enumerate() {
            *b = ((k as u32).wrapping_mul(2654435761) ^ i) as u8;
        }
        r
    }

    /// Records pushed in batches come back byte for byte, every compressed record decodes to
    /// whole records within the batch limit, and the totals count what went in and out.
    #[test]
    fn compress_records_zstd_round_trip() {
        let mut e = Encoder::new(1).unwrap();
        let mut file = Vec::new();
        let mut raw = Vec::new();
        let mut written = 0;
        for i in 0..200u32 {
            let r = sample(i, 8 * (1 + (i as usize * 97) % 1000));
            raw.extend_from_slice(&r);
            written += e.push(&r, &mut file).unwrap();
            if i % 50 == 49 {
                written += e.flush(&mut file).unwrap();
            }
        }
        written += e.flush(&mut file).unwrap();
        assert_eq!(written, file.len() as u64);
        let parts = decode_records(&file);
        for p in &parts {
            let mut at = 0;
            while at < p.len() {
                at += u16::from_ne_bytes(p[at + 6..at + 8].try_into().unwrap()) as usize;
            }
            assert_eq!(at, p.len(), "a compressed record ends on a record boundary");
        }
        assert_eq!(parts.concat(), raw);
        assert_eq!(e.totals(), (raw.len() as u64, file.len() as u64));
    }

    /// Data that does not compress still fits: a batch's output is split over several
    /// compressed records, each within the u16 size limit.
    #[test]
    fn compress_records_zstd_incompressible_split() {
        let mut e = Encoder::new(3).unwrap();
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut raw = Vec::new();
        for _ in 0..4 {
            let mut r = vec![0u8; 60000];
            r[..4].copy_from_slice(&9u32.to_ne_bytes());
            r[6..8].copy_from_slice(&60000u16.to_ne_bytes());
            for b in &mut r[8..] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            raw.extend_from_slice(&r);
        }
        let mut file = Vec::new();
        e.push(&raw, &mut file).unwrap();
        e.flush(&mut file).unwrap();
        let parts = decode_records(&file);
        assert!(parts.len() >= 4, "{} records", parts.len());
        assert_eq!(parts.concat(), raw);
    }
}
