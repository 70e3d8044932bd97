//! A hand-written perf.data (PERFILE2) writer.
//!
//! File layout, as `perf record` lays it out and perf's `perf_session__read_header` expects:
//! `[header 104 B][ids u64 arrays][attrs: (attr, ids section)...][data records...]`
//! `[feature section table][feature bodies]`. The header is written last, once the data size is
//! known; a crash before then leaves a file whose zero magic no reader mistakes for complete.
//! With zstd on, the data records go into `PERF_RECORD_COMPRESSED` records as `perf record -z`
//! writes them ([`crate::zstd_records`]), announced by the COMPRESSED feature.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use crate::sys::{PerfEventAttr, ATTR_SIZE};
use crate::zstd_records::{self, Encoder};

const MAGIC: &[u8; 8] = b"PERFILE2";
const HEADER_SIZE: u64 = 104;
/// perf aligns strings in feature sections to this.
const NAME_ALIGN: usize = 64;

/// Feature bits (`HEADER_*` in perf's util/header.h).
pub mod feat {
    /// `HEADER_TRACING_DATA`: tracepoint formats.
    pub const TRACING_DATA: u32 = 1;
    /// `HEADER_BUILD_ID`: build-ids of the images samples hit.
    pub const BUILD_ID: u32 = 2;
    /// `HEADER_HOSTNAME`: `uname -n`.
    pub const HOSTNAME: u32 = 3;
    /// `HEADER_OSRELEASE`: `uname -r`.
    pub const OSRELEASE: u32 = 4;
    /// `HEADER_VERSION`: the recorder's version.
    pub const VERSION: u32 = 5;
    /// `HEADER_ARCH`: `uname -m`.
    pub const ARCH: u32 = 6;
    /// `HEADER_NRCPUS`: CPUs available and online.
    pub const NRCPUS: u32 = 7;
    /// `HEADER_CMDLINE`: the recording command line.
    pub const CMDLINE: u32 = 11;
    /// `HEADER_EVENT_DESC`: each event's attr, name and ids.
    pub const EVENT_DESC: u32 = 12;
    /// `HEADER_COMPRESSED`: zstd parameters of the compressed records.
    pub const COMPRESSED: u32 = 27;
}

/// `perf_event_header.misc` values used in BUILD_ID entries and synthesized maps:
/// `PERF_RECORD_MISC_KERNEL`, the entry is the kernel's or a module's.
pub const MISC_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`: the entry is a user-space image's.
pub const MISC_USER: u16 = 2;
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// perf's `HOST_KERNEL_ID`: the pid that marks host-machine entries.
pub const HOST_PID: i32 = -1;

/// One event as it goes into the attrs section and EVENT_DESC.
#[derive(Debug, Clone)]
pub struct FileAttr {
    /// The attr the event was opened with.
    pub attr: PerfEventAttr,
    /// Its name in EVENT_DESC.
    pub name: String,
    /// The ids of its opened instances (one per CPU, or per thread).
    pub ids: Vec<u64>,
}

/// One BUILD_ID feature entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// [`MISC_KERNEL`] or [`MISC_USER`].
    pub misc: u16,
    /// [`HOST_PID`] for the kernel and modules, else the process.
    pub pid: i32,
    /// The raw build-id bytes.
    pub build_id: Vec<u8>,
    /// `[kernel.kallsyms]`, `[module]` or an absolute path.
    pub filename: String,
}

/// The feature sections written after the data.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// HEADER_HOSTNAME.
    pub hostname: String,
    /// HEADER_OSRELEASE.
    pub osrelease: String,
    /// HEADER_VERSION: the agent's version.
    pub version: String,
    /// HEADER_ARCH.
    pub arch: String,
    /// HEADER_NRCPUS: CPUs configured on the machine.
    pub nr_cpus_available: u32,
    /// HEADER_NRCPUS: CPUs online.
    pub nr_cpus_online: u32,
    /// HEADER_CMDLINE: the argv.
    pub cmdline: Vec<String>,
    /// HEADER_BUILD_ID.
    pub build_ids: Vec<BuildIdEntry>,
    /// HEADER_TRACING_DATA: the formats of the tracepoints recorded, when any is.
    pub tracing_data: Option<Vec<u8>>,
}

/// The zstd level of rounds written while the agent is behind (`--fast=50`): measured on 200 MB
/// of a `perf record --call-graph dwarf -a` file with 256 KiB blocks, it compresses 2.4 times
/// as fast as level 1 (2,390 against 1,010 MB/s) to 3.6:1 instead of 12.3:1.
pub const BEHIND_LEVEL: i32 = -50;

/// Streams records into a perf.data file.
#[derive(Debug)]
pub struct Writer {
    out: BufWriter<File>,
    attrs: Vec<FileAttr>,
    attrs_offset: u64,
    data_offset: u64,
    data_size: u64,
    /// `Some` when the records are written zstd-compressed.
    zstd: Option<Encoder>,
    /// This round's records are compressed at [`BEHIND_LEVEL`] (the agent is behind).
    behind: bool,
    /// Rounds and record bytes (before compression) written that way.
    behind_rounds: u64,
    behind_bytes: u64,
    /// Records handed to the writer, and their bytes before compression: what a cut after a
    /// write error compares with what reached the file.
    records_in: u64,
    raw_in: u64,
}

/// What [`Writer::cut_to_complete`] kept of the data section and what it could not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Records in the file after the cut (as written: uncompressed sizes).
    pub kept_records: u64,
    /// Their bytes before compression.
    pub kept_bytes: u64,
    /// Records handed to the writer that are not in the file.
    pub lost_records: u64,
    /// Their bytes before compression.
    pub lost_bytes: u64,
}

fn align_up(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

/// perf's `do_write_string`: u32 padded length, then the NUL-terminated string padded to 64.
fn put_string(buf: &mut Vec<u8>, s: &str) {
    let len = align_up(s.len() + 1, NAME_ALIGN);
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    let start = buf.len();
    buf.extend_from_slice(s.as_bytes());
    buf.resize(start + len, 0);
}

impl Writer {
    /// Creates the file and writes everything that precedes the data section; records are
    /// zstd-compressed at `zstd_level` when it is given.
    pub fn create(file: File, attrs: Vec<FileAttr>, zstd_level: Option<i32>) -> io::Result<Writer> {
        let zstd = zstd_level.map(Encoder::new).transpose()?;
        let mut out = BufWriter::with_capacity(256 * 1024, file);
        out.write_all(&[0u8; HEADER_SIZE as usize])?;
        let mut pos = HEADER_SIZE;
        let mut id_sections = Vec::new();
        for a in &attrs {
            for id in &a.ids {
                out.write_all(&id.to_ne_bytes())?;
            }
            let size = 8 * a.ids.len() as u64;
            id_sections.push((pos, size));
            pos += size;
        }
        let attrs_offset = pos;
        for (a, (off, size)) in attrs.iter().zip(&id_sections) {
            let mut attr = a.attr;
            attr.size = ATTR_SIZE;
            out.write_all(&attr.to_bytes())?;
            out.write_all(&off.to_ne_bytes())?;
            out.write_all(&size.to_ne_bytes())?;
            pos += ATTR_SIZE as u64 + 16;
        }
        Ok(Writer {
            out,
            attrs,
            attrs_offset,
            data_offset: pos,
            data_size: 0,
            zstd,
            behind: false,
            behind_rounds: 0,
            behind_bytes: 0,
            records_in: 0,
            raw_in: 0,
        })
    }

    /// Appends one record (header included) to the data section.
    pub fn write_record(&mut self, rec: &[u8]) -> io::Result<()> {
        self.records_in += 1;
        self.raw_in += rec.len() as u64;
        match &mut self.zstd {
            Some(z) => {
                self.data_size += z.push(rec, &mut self.out)?;
                if self.behind {
                    self.behind_bytes += rec.len() as u64;
                }
            }
            None => {
                self.out.write_all(rec)?;
                self.data_size += rec.len() as u64;
            }
        }
        Ok(())
    }

    /// Compresses the records that follow, up to the next one ending the round, at
    /// [`BEHIND_LEVEL`] (`behind`) or at the file's level. A round starting with the rings
    /// more than half full is the agent falling behind the kernel: zstd's fastest levels
    /// drain it 2.4 times as fast as level 1 (measured on `--call-graph dwarf` records) and
    /// still shrink it 3.6 times, where writing it plain would cost more CPU in all, since
    /// what is not compressed is hashed and archived at the end, byte for byte.
    pub fn behind_round(&mut self, behind: bool) -> io::Result<()> {
        let Some(z) = &mut self.zstd else {
            return Ok(());
        };
        let level = if behind { BEHIND_LEVEL } else { z.level() };
        z.set_level(level)?;
        if behind {
            self.behind_rounds += 1;
        }
        self.behind = behind;
        Ok(())
    }

    /// `(rounds, record bytes)` compressed at [`BEHIND_LEVEL`] by [`Writer::behind_round`].
    pub fn behind_totals(&self) -> (u64, u64) {
        (self.behind_rounds, self.behind_bytes)
    }

    /// Ends a round with `rec` (a FINISHED_ROUND): the round's records are compressed and
    /// written first, and `rec` itself goes in uncompressed, as perf does.
    pub fn end_round(&mut self, rec: &[u8]) -> io::Result<()> {
        self.records_in += 1;
        self.raw_in += rec.len() as u64;
        if let Some(z) = &mut self.zstd {
            self.data_size += z.flush(&mut self.out)?;
        }
        self.out.write_all(rec)?;
        self.data_size += rec.len() as u64;
        Ok(())
    }

    /// After a failed write: drops what is still buffered and cuts the file after the last
    /// complete record that reached it (with zstd, after the last compressed record that ends
    /// on a record boundary), so that [`Writer::finish`] then seals a valid perf.data of what
    /// was written. The file itself says what is complete: a short write leaves any prefix.
    pub fn cut_to_complete(&mut self) -> io::Result<Cut> {
        let clone = self.out.get_ref().try_clone()?;
        let failed = std::mem::replace(&mut self.out, BufWriter::with_capacity(64 * 1024, clone));
        // Not flushed: what it holds did not fit and is counted lost below.
        drop(failed.into_parts());
        if let Some(z) = &mut self.zstd {
            z.discard();
        }
        let file = self.out.get_mut();
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(self.data_offset))?;
        let data_len = len.saturating_sub(self.data_offset);
        let (keep, kept_records, kept_bytes) = complete_prefix(
            BufReader::with_capacity(256 * 1024, (&mut *file).take(data_len)),
            self.zstd.is_some(),
        )?;
        file.set_len(self.data_offset + keep)?;
        file.seek(SeekFrom::Start(self.data_offset + keep))?;
        self.data_size = keep;
        Ok(Cut {
            kept_records,
            kept_bytes,
            lost_records: self.records_in.saturating_sub(kept_records),
            lost_bytes: self.raw_in.saturating_sub(kept_bytes),
        })
    }

    /// Writes the feature sections and the header, flushes and syncs. Returns the file size.
    pub fn finish(mut self, f: &Features) -> io::Result<u64> {
        let mut bodies: Vec<(u32, Vec<u8>)> = Vec::new();
        if let Some(z) = &mut self.zstd {
            self.data_size += z.flush(&mut self.out)?;
            bodies.push((feat::COMPRESSED, compressed_section(z)));
        }
        bodies.push((feat::BUILD_ID, build_id_section(&f.build_ids)));
        for (bit, s) in [
            (feat::HOSTNAME, &f.hostname),
            (feat::OSRELEASE, &f.osrelease),
            (feat::VERSION, &f.version),
            (feat::ARCH, &f.arch),
        ] {
            let mut b = Vec::new();
            put_string(&mut b, s);
            bodies.push((bit, b));
        }
        let mut b = Vec::new();
        b.extend_from_slice(&f.nr_cpus_available.to_ne_bytes());
        b.extend_from_slice(&f.nr_cpus_online.to_ne_bytes());
        bodies.push((feat::NRCPUS, b));
        let mut b = Vec::new();
        b.extend_from_slice(&(f.cmdline.len() as u32).to_ne_bytes());
        for a in &f.cmdline {
            put_string(&mut b, a);
        }
        bodies.push((feat::CMDLINE, b));
        bodies.push((feat::EVENT_DESC, self.event_desc_section()));
        if let Some(t) = &f.tracing_data {
            bodies.push((feat::TRACING_DATA, t.clone()));
        }
        bodies.sort_by_key(|(bit, _)| *bit);

        // The section table sits right after the data; bodies follow it.
        let table_at = self.data_offset + self.data_size;
        let mut at = table_at + 16 * bodies.len() as u64;
        for (_, body) in &bodies {
            self.out.write_all(&at.to_ne_bytes())?;
            self.out.write_all(&(body.len() as u64).to_ne_bytes())?;
            at += body.len() as u64;
        }
        for (_, body) in &bodies {
            self.out.write_all(body)?;
        }
        let mut bitmap = [0u8; 32];
        for (bit, _) in &bodies {
            bitmap[(*bit / 8) as usize] |= 1 << (bit % 8);
        }
        let mut h = Vec::with_capacity(HEADER_SIZE as usize);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&HEADER_SIZE.to_ne_bytes());
        h.extend_from_slice(&(ATTR_SIZE as u64 + 16).to_ne_bytes());
        let attrs_size = self.attrs.len() as u64 * (ATTR_SIZE as u64 + 16);
        for v in [
            self.attrs_offset,
            attrs_size,
            self.data_offset,
            self.data_size,
            0,
            0,
        ] {
            h.extend_from_slice(&v.to_ne_bytes());
        }
        // The bitmap is an array of unsigned longs: on a big-endian host perf reads it so.
        for chunk in bitmap.chunks(8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            h.extend_from_slice(&word.to_ne_bytes());
        }
        debug_assert_eq!(h.len() as u64, HEADER_SIZE);
        self.out.flush()?;
        let mut file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&h)?;
        file.sync_all()?;
        Ok(at)
    }

    fn event_desc_section(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(self.attrs.len() as u32).to_ne_bytes());
        b.extend_from_slice(&ATTR_SIZE.to_ne_bytes());
        for a in &self.attrs {
            let mut attr = a.attr;
            attr.size = ATTR_SIZE;
            b.extend_from_slice(&attr.to_bytes());
            b.extend_from_slice(&(a.ids.len() as u32).to_ne_bytes());
            put_string(&mut b, &a.name);
            for id in &a.ids {
                b.extend_from_slice(&id.to_ne_bytes());
            }
        }
        b
    }
}

/// Reads `n` bytes, or fewer at the end of the input; true when all were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Ok(false),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The longest prefix of a data section made of whole records: `(bytes, records, record
/// bytes)`, the last two counting the records inside compressed ones. With `compressed`,
/// PERF_RECORD_COMPRESSED payloads are decoded as one zstd stream (as perf reads them) and
/// the prefix ends only where the decoded records end whole.
pub fn complete_prefix(mut r: impl Read, compressed: bool) -> io::Result<(u64, u64, u64)> {
    let mut dctx = compressed.then(zstd_safe::DCtx::create);
    let mut chunk = vec![0u8; if compressed { 256 * 1024 } else { 0 }];
    // Decoded bytes not yet making a whole record.
    let mut pending: Vec<u8> = Vec::new();
    let (mut pos, mut records, mut bytes) = (0u64, 0u64, 0u64);
    let mut good = (0, 0, 0);
    let mut hdr = [0u8; 8];
    let mut body = Vec::new();
    'records: while read_full(&mut r, &mut hdr)? {
        let ty = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as usize;
        if size < 8 {
            break;
        }
        body.resize(size - 8, 0);
        if !read_full(&mut r, &mut body)? {
            break;
        }
        pos += size as u64;
        match &mut dctx {
            Some(d) if ty == zstd_records::RECORD_COMPRESSED => {
                let mut input = zstd_safe::InBuffer::around(&body);
                loop {
                    let mut out = zstd_safe::OutBuffer::around(&mut chunk[..]);
                    if d.decompress_stream(&mut out, &mut input).is_err() {
                        break 'records;
                    }
                    let n = out.pos();
                    pending.extend_from_slice(&chunk[..n]);
                    if input.pos() == body.len() && n < chunk.len() {
                        break;
                    }
                }
                let mut at = 0;
                while pending.len() - at >= 8 {
                    let s = u16::from_ne_bytes([pending[at + 6], pending[at + 7]]) as usize;
                    if s < 8 {
                        break 'records;
                    }
                    if pending.len() - at < s {
                        break;
                    }
                    records += 1;
                    bytes += s as u64;
                    at += s;
                }
                pending.drain(..at);
            }
            _ => {
                records += 1;
                bytes += size as u64;
            }
        }
        if pending.is_empty() {
            good = (pos, records, bytes);
        }
    }
    Ok(good)
}

/// perf's `write_compressed`: version 0, type 1 (zstd), level, ratio (raw / compressed, rounded
/// down as perf does), and the most one compressed record decodes to.
fn compressed_section(z: &Encoder) -> Vec<u8> {
    let (raw, compressed) = z.totals();
    let ratio = raw
        .checked_div(compressed)
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32;
    let mut b = Vec::with_capacity(20);
    for v in [
        0,
        1,
        z.level() as u32,
        ratio,
        zstd_records::BATCH_LIMIT as u32,
    ] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b
}

/// `struct perf_record_header_build_id` entries with the build-id size flag perf ≥ 5.11 reads.
fn build_id_section(entries: &[BuildIdEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    for e in entries {
        let name_len = align_up(e.filename.len() + 1, NAME_ALIGN);
        let size = 8 + 4 + 24 + name_len;
        let bid = &e.build_id[..e.build_id.len().min(20)];
        b.extend_from_slice(&0u32.to_ne_bytes()); // type: unused in the table
        b.extend_from_slice(&(e.misc | MISC_BUILD_ID_SIZE).to_ne_bytes());
        b.extend_from_slice(&(size as u16).to_ne_bytes());
        b.extend_from_slice(&e.pid.to_ne_bytes());
        let mut id = [0u8; 24];
        id[..bid.len()].copy_from_slice(bid);
        id[20] = bid.len() as u8;
        b.extend_from_slice(&id);
        let start = b.len();
        b.extend_from_slice(e.filename.as_bytes());
        b.resize(start + name_len, 0);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize) -> Vec<u8> {
        let len = 8 * (2 + i % 40);
        let mut r = vec![0u8; len];
        r[..4].copy_from_slice(&9u32.to_ne_bytes());
        r[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
        for (k, b) in r[8..].iter_mut().enumerate() {
            *b = (k ^ i) as u8;
        }
        r
    }

    /// A data section of zstd records cut at any byte (as a short write on a full disk leaves
    /// it) keeps exactly the compressed records that are whole: every cut ends after a
    /// compressed record (a round's batch goes out in slices of whole records, each its own
    /// record) or a FINISHED_ROUND and counts the records up to there, never a partial
    /// compressed record.
    #[test]
    fn cut_perfdata_zstd_any_length_whole_slices() {
        let mut z = Encoder::new(1).unwrap();
        let mut data = Vec::new();
        let round_end = crate::perf_records::finished_round();
        let mut sizes = Vec::new();
        for round in 0..12 {
            for i in 0..(50 + round * 37) {
                let r = record(i);
                z.push(&r, &mut data).unwrap();
                sizes.push(r.len() as u64);
            }
            z.flush(&mut data).unwrap();
            data.extend_from_slice(&round_end);
            sizes.push(round_end.len() as u64);
        }
        // (section length, records, record bytes) after each compressed or plain record.
        let mut ends = vec![(0u64, 0u64, 0u64)];
        let mut d = zstd_safe::DCtx::create();
        let (mut at, mut decoded, mut n, mut bytes) = (0usize, 0u64, 0u64, 0u64);
        let mut buf = vec![0u8; 1 << 20];
        while at < data.len() {
            let size = usize::from(u16::from_ne_bytes([data[at + 6], data[at + 7]]));
            if u32::from_ne_bytes(data[at..at + 4].try_into().unwrap())
                == zstd_records::RECORD_COMPRESSED
            {
                let mut input = zstd_safe::InBuffer::around(&data[at + 8..at + size]);
                let mut o = zstd_safe::OutBuffer::around(&mut buf[..]);
                d.decompress_stream(&mut o, &mut input).unwrap();
                decoded += o.pos() as u64;
            } else {
                decoded += size as u64;
            }
            at += size;
            while let Some(s) = sizes.get(n as usize).filter(|s| bytes + **s <= decoded) {
                bytes += s;
                n += 1;
            }
            assert_eq!(bytes, decoded, "every record ends on a record boundary");
            ends.push((at as u64, n, bytes));
        }
        assert!(ends.len() > 2 * 12 + 2, "rounds went out in several slices");
        for cut in (0..=data.len()).step_by(7).chain([data.len()]) {
            let got = complete_prefix(&data[..cut], true).unwrap();
            let want = *ends.iter().rev().find(|r| r.0 <= cut as u64).unwrap();
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    /// Uncompressed records: the prefix ends after the last whole record.
    #[test]
    fn cut_perfdata_plain_last_whole_record() {
        let recs: Vec<Vec<u8>> = (0..30).map(record).collect();
        let data = recs.concat();
        let mut ends = vec![0usize];
        for r in &recs {
            ends.push(ends.last().unwrap() + r.len());
        }
        for cut in 0..=data.len() {
            let (len, n, bytes) = complete_prefix(&data[..cut], false).unwrap();
            let k = ends.iter().rposition(|&e| e <= cut).unwrap();
            assert_eq!((len, n, bytes), (ends[k] as u64, k as u64, ends[k] as u64));
        }
    }

    /// The records of a data section in file order, compressed ones decoded as perf does
    /// (one zstd stream across them).
    fn decoded(data: &[u8]) -> Vec<Vec<u8>> {
        let mut d = zstd_safe::DCtx::create();
        let (mut out, mut pending, mut at) = (Vec::new(), Vec::new(), 0usize);
        while at + 8 <= data.len() {
            let size = usize::from(u16::from_ne_bytes([data[at + 6], data[at + 7]]));
            let rec = &data[at..at + size];
            if u32::from_ne_bytes(rec[..4].try_into().unwrap()) == zstd_records::RECORD_COMPRESSED {
                let mut buf = vec![0u8; 1 << 20];
                let mut input = zstd_safe::InBuffer::around(&rec[8..]);
                let mut o = zstd_safe::OutBuffer::around(&mut buf[..]);
                d.decompress_stream(&mut o, &mut input).unwrap();
                let n = o.pos();
                // perf refuses a compressed record that decodes to nothing.
                assert!(n > 0, "compressed record at {at} decodes to nothing");
                pending.extend_from_slice(&buf[..n]);
                while pending.len() >= 8 {
                    let s = usize::from(u16::from_ne_bytes([pending[6], pending[7]]));
                    out.push(pending.drain(..s).collect());
                }
            } else {
                out.push(rec.to_vec());
            }
            at += size;
        }
        out
    }

    /// Rounds at the level for catching up after records still in the zstd batch, then at
    /// the file's level again (each change a new zstd frame): one decoding stream, as perf's,
    /// gives every record once, in the order they came.
    #[test]
    fn write_perfdata_behind_rounds_keep_order() {
        let path = std::env::temp_dir().join(format!("kprof-behind-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut w = Writer::create(file, Vec::new(), Some(1)).unwrap();
        let round_end = crate::perf_records::finished_round();
        let mut want = Vec::new();
        for (round, behind) in [(0, false), (1, true), (2, true), (3, false), (4, true)] {
            if round > 0 {
                w.behind_round(behind).unwrap();
            }
            for i in 0..(5 + round * 3) {
                let r = record(round * 100 + i);
                w.write_record(&r).unwrap();
                want.push(r);
            }
            if round != 0 {
                w.end_round(&round_end).unwrap();
                want.push(round_end.to_vec());
            }
        }
        w.out.flush().unwrap();
        w.end_round(&round_end).unwrap();
        want.push(round_end.to_vec());
        w.out.flush().unwrap();
        assert_eq!(w.behind_totals().0, 3);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(decoded(&bytes[w.data_offset as usize..]), want);
    }
}
