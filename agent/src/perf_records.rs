//! perf record types (`PERF_RECORD_*`): building the ones the agent synthesizes and reading
//! the fields it counts in the ones the kernel writes.

use crate::procfs::MapLine;

/// `PERF_RECORD_MMAP`: a mapping, without the file's identity.
pub const MMAP: u32 = 1;
/// `PERF_RECORD_LOST`: records the kernel dropped because the ring buffer was full.
pub const LOST: u32 = 2;
/// `PERF_RECORD_COMM`: a thread's command name.
pub const COMM: u32 = 3;
/// `PERF_RECORD_THROTTLE`: the kernel throttled an event for interrupting too often.
pub const THROTTLE: u32 = 5;
/// `PERF_RECORD_SAMPLE`.
pub const SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`: a mapping with the file's device, inode and protection.
pub const MMAP2: u32 = 10;
/// `PERF_RECORD_LOST_SAMPLES`: how many samples of one event the kernel dropped.
pub const LOST_SAMPLES: u32 = 13;
/// perf's user-space record that closes a round of ordered events.
pub const FINISHED_ROUND: u32 = 68;

/// `PERF_RECORD_MISC_MMAP_DATA`: the map is not executable.
pub const MISC_MMAP_DATA: u16 = 1 << 13;

/// Size of the `sample_id_all` trailer for TID|TIME|CPU|IDENTIFIER.
pub const ID_TRAILER: usize = 32;

fn header(buf: &mut Vec<u8>, ty: u32, misc: u16) {
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(&misc.to_ne_bytes());
    buf.extend_from_slice(&0u16.to_ne_bytes());
}

/// Pads the string to 8 bytes, appends the zeroed id trailer and fixes the size field.
fn finish(mut buf: Vec<u8>, name: &[u8]) -> Vec<u8> {
    buf.extend_from_slice(name);
    buf.push(0);
    while buf.len() % 8 != 0 {
        buf.push(0);
    }
    // Synthesized records carry an all-zero sample id, as perf's own: id 0 maps to the
    // first event, time 0 delivers them before any sample.
    buf.resize(buf.len() + ID_TRAILER, 0);
    let size = buf.len() as u16;
    buf[6..8].copy_from_slice(&size.to_ne_bytes());
    buf
}

/// `PERF_RECORD_COMM` for an existing thread.
pub fn comm(pid: i32, tid: i32, name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    header(&mut b, COMM, 0);
    b.extend_from_slice(&pid.to_ne_bytes());
    b.extend_from_slice(&tid.to_ne_bytes());
    let name = &name.as_bytes()[..name.len().min(15)];
    finish(b, name)
}

/// `PERF_RECORD_MMAP2` for one file map of an existing process (flagged as data, as the
/// kernel and perf flag them, unless executable).
pub fn mmap2(pid: i32, m: &MapLine) -> Vec<u8> {
    let mut b = Vec::with_capacity(128);
    let data = if m.exec { 0 } else { MISC_MMAP_DATA };
    header(&mut b, MMAP2, crate::perf_data_writer::MISC_USER | data);
    b.extend_from_slice(&pid.to_ne_bytes());
    b.extend_from_slice(&pid.to_ne_bytes());
    b.extend_from_slice(&m.start.to_ne_bytes());
    b.extend_from_slice(&(m.end - m.start).to_ne_bytes());
    b.extend_from_slice(&m.offset.to_ne_bytes());
    b.extend_from_slice(&m.major.to_ne_bytes());
    b.extend_from_slice(&m.minor.to_ne_bytes());
    b.extend_from_slice(&m.inode.to_ne_bytes());
    b.extend_from_slice(&0u64.to_ne_bytes()); // ino_generation: not in /proc
    let bit = |on: bool, b: libc::c_int| if on { b as u32 } else { 0 };
    let prot = bit(m.read, libc::PROT_READ)
        | bit(m.write, libc::PROT_WRITE)
        | bit(m.exec, libc::PROT_EXEC);
    let flags = if m.shared {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE
    } as u32;
    b.extend_from_slice(&prot.to_ne_bytes());
    b.extend_from_slice(&flags.to_ne_bytes());
    finish(b, m.path.as_bytes())
}

/// `PERF_RECORD_MMAP` for kernel images: the kernel (`[kernel.kallsyms]_text`, pgoff = `_text`
/// so perf can compute the KASLR relocation) and each module (`[name]`, pgoff 0).
pub fn kernel_mmap(start: u64, len: u64, pgoff: u64, name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(96);
    header(&mut b, MMAP, crate::perf_data_writer::MISC_KERNEL);
    b.extend_from_slice(&crate::perf_data_writer::HOST_PID.to_ne_bytes());
    b.extend_from_slice(&0i32.to_ne_bytes());
    b.extend_from_slice(&start.to_ne_bytes());
    b.extend_from_slice(&len.to_ne_bytes());
    b.extend_from_slice(&pgoff.to_ne_bytes());
    finish(b, name.as_bytes())
}

/// `PERF_RECORD_FINISHED_ROUND`: everything before it may be sorted and flushed.
pub fn finished_round() -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0..4].copy_from_slice(&FINISHED_ROUND.to_ne_bytes());
    b[6..8].copy_from_slice(&8u16.to_ne_bytes());
    b
}

/// The native-endian `u32` at `off` in `rec`; `None` past its end.
pub fn rd_u32(rec: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(rec.get(off..off + 4)?.try_into().ok()?))
}

/// The native-endian `u64` at `off` in `rec`; `None` past its end.
pub fn rd_u64(rec: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(rec.get(off..off + 8)?.try_into().ok()?))
}

/// What a kernel record means for the per-event counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// One sample of the event with this id.
    Sample {
        /// The event's id (`PERF_SAMPLE_IDENTIFIER`).
        id: u64,
    },
    /// Records or samples of the event with this id lost.
    Lost {
        /// The event's id.
        id: u64,
        /// How many were lost.
        lost: u64,
    },
    /// The event with this id was throttled.
    Throttle {
        /// The event's id.
        id: u64,
    },
    /// Any other record: counts nothing.
    Other,
}

/// Classifies a record from the ring buffer (sample_type has IDENTIFIER first).
pub fn classify(rec: &[u8]) -> Count {
    let ty = rd_u32(rec, 0).unwrap_or(0);
    let trailer_id = || rd_u64(rec, rec.len().wrapping_sub(8)).unwrap_or(0);
    match ty {
        SAMPLE => Count::Sample {
            id: rd_u64(rec, 8).unwrap_or(0),
        },
        LOST => Count::Lost {
            id: rd_u64(rec, 8).unwrap_or(0),
            lost: rd_u64(rec, 16).unwrap_or(0),
        },
        LOST_SAMPLES => Count::Lost {
            id: trailer_id(),
            lost: rd_u64(rec, 8).unwrap_or(0),
        },
        THROTTLE => Count::Throttle {
            id: rd_u64(rec, 16).unwrap_or(0),
        },
        _ => Count::Other,
    }
}

/// Where a sample's user stack copy (`PERF_SAMPLE_STACK_USER`) sits, for the sample types the
/// agent opens events with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackLayout {
    /// Bytes from the record start to the callchain (or what follows when there is none).
    fixed: usize,
    callchain: bool,
    /// Registers in a REGS_USER block whose ABI is not NONE; `None` without REGS_USER.
    regs_user: Option<usize>,
}

impl StackLayout {
    /// `None` when samples carry no stack copy, or fields this layout does not know precede it
    /// (then samples are written as the kernel made them).
    pub fn new(sample_type: u64, regs_user_mask: u64) -> Option<StackLayout> {
        use crate::sys::*;
        let fixed_fields =
            SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD;
        let known = fixed_fields
            | SAMPLE_CALLCHAIN
            | SAMPLE_REGS_USER
            | SAMPLE_STACK_USER
            | SAMPLE_REGS_INTR;
        if sample_type & SAMPLE_STACK_USER == 0 || sample_type & !known != 0 {
            return None;
        }
        Some(StackLayout {
            fixed: 8 + 8 * (sample_type & fixed_fields).count_ones() as usize,
            callchain: sample_type & SAMPLE_CALLCHAIN != 0,
            regs_user: (sample_type & SAMPLE_REGS_USER != 0)
                .then_some(regs_user_mask.count_ones() as usize),
        })
    }

    /// Copies the sample into `out` with its stack copy cut to the bytes the kernel could read
    /// (`dyn_size`, rounded up to 8): the kernel reserves the full requested size and leaves
    /// the rest of it holding old ring contents, which no unwinder reads (perf reads
    /// `dyn_size` bytes) and which compresses badly. Returns false, leaving `out` alone, when
    /// there is nothing to cut or the record does not parse.
    pub fn trim(&self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        let mut off = self.fixed;
        if self.callchain {
            let Some(nr) = rd_u64(rec, off) else {
                return false;
            };
            // try_from, not `as`: on 32-bit a corrupt count above 2^32 must not wrap to a
            // small one that parses.
            off = match usize::try_from(nr)
                .ok()
                .and_then(|n| n.checked_mul(8))
                .and_then(|n| n.checked_add(off + 8))
            {
                Some(o) => o,
                None => return false,
            };
        }
        if let Some(n) = self.regs_user {
            match rd_u64(rec, off) {
                Some(0) => off += 8,
                Some(_) => off += 8 + 8 * n,
                None => return false,
            }
        }
        let Some(size) = rd_u64(rec, off).and_then(|s| usize::try_from(s).ok()) else {
            return false;
        };
        let data = off + 8;
        let Some(dyn_at) = data.checked_add(size) else {
            return false;
        };
        let Some(dyn_size) = rd_u64(rec, dyn_at).and_then(|d| usize::try_from(d).ok()) else {
            return false;
        };
        let keep = dyn_size.div_ceil(8) * 8;
        if size == 0 || keep >= size {
            return false;
        }
        out.clear();
        out.extend_from_slice(&rec[..off]);
        out.extend_from_slice(&(keep as u64).to_ne_bytes());
        out.extend_from_slice(&rec[data..data + keep]);
        out.extend_from_slice(&rec[dyn_at..]);
        let len = out.len() as u16;
        out[6..8].copy_from_slice(&len.to_ne_bytes());
        true
    }
}

/// The file name of a kernel-emitted MMAP2 record with its pid, if the map is a file and
/// executable: the build-ids the capture collects are those of code (data maps, recorded for
/// DWARF unwinding, would otherwise have every mapped data file read at the end).
pub fn mmap2_filename(rec: &[u8]) -> Option<(i32, &[u8])> {
    let misc = u16::from_ne_bytes(rec.get(4..6)?.try_into().ok()?);
    if rd_u32(rec, 0)? != MMAP2 || misc & MISC_MMAP_DATA != 0 {
        return None;
    }
    let pid = rd_u32(rec, 8)? as i32;
    // header 8, pid/tid 8, addr/len/pgoff 24, maj/min/ino/gen 24 (or build-id), prot/flags 8.
    let name = rec.get(72..rec.len().checked_sub(ID_TRAILER)?)?;
    let end = name.iter().position(|&c| c == 0)?;
    Some((pid, &name[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthesized records are 8-aligned, carry their size, and round-trip their file name.
    #[test]
    fn build_mmap2_record_roundtrips_name() {
        let m = crate::procfs::parse_maps_line(
            "00400000-00452000 r-xp 00001000 08:02 173521 /usr/bin/dbus-daemon",
        )
        .unwrap();
        let r = mmap2(77, &m);
        assert_eq!(r.len() % 8, 0);
        assert_eq!(u16::from_ne_bytes([r[6], r[7]]) as usize, r.len());
        let (pid, name) = mmap2_filename(&r).unwrap();
        assert_eq!((pid, name), (77, &b"/usr/bin/dbus-daemon"[..]));
        let ro = crate::procfs::parse_maps_line(
            "00452000-00460000 r--p 00052000 08:02 173521 /usr/bin/dbus-daemon",
        )
        .unwrap();
        let r = mmap2(77, &ro);
        assert_ne!(u16::from_ne_bytes([r[4], r[5]]) & MISC_MMAP_DATA, 0);
        assert_eq!(mmap2_filename(&r), None);
        let c = comm(1, 2, "a-very-long-command-name");
        assert_eq!(c.len() % 8, 0);
        assert_eq!(&c[16..31], b"a-very-long-com");
    }

    /// A dwarf sample's stack copy is cut to its dyn_size, keeping what follows it; full
    /// copies and other sample types are left alone.
    #[test]
    fn trim_sample_stack_user_to_dyn_size() {
        use crate::sys::*;
        let st = SAMPLE_IDENTIFIER
            | SAMPLE_IP
            | SAMPLE_TID
            | SAMPLE_TIME
            | SAMPLE_CPU
            | SAMPLE_PERIOD
            | SAMPLE_CALLCHAIN
            | SAMPLE_REGS_USER
            | SAMPLE_STACK_USER
            | SAMPLE_REGS_INTR;
        let layout = StackLayout::new(st, 0b111).unwrap();
        let sample = |dyn_size: u64| {
            let mut r = Vec::new();
            header(&mut r, SAMPLE, 0);
            for v in [7u64, 0x1000, 1, 2, 0, 1] {
                r.extend_from_slice(&v.to_ne_bytes()); // id, ip, tid, time, cpu, period
            }
            for v in [2u64, 0xa, 0xb] {
                r.extend_from_slice(&v.to_ne_bytes()); // callchain nr=2
            }
            for v in [2u64, 1, 2, 3] {
                r.extend_from_slice(&v.to_ne_bytes()); // regs abi 64, three registers
            }
            r.extend_from_slice(&64u64.to_ne_bytes());
            r.extend((0..64u8).map(|b| b + 1));
            r.extend_from_slice(&dyn_size.to_ne_bytes());
            r.extend_from_slice(&0xfeedu64.to_ne_bytes()); // regs_intr abi
            let len = r.len() as u16;
            r[6..8].copy_from_slice(&len.to_ne_bytes());
            r
        };
        let mut out = Vec::new();
        let full = sample(20);
        assert!(layout.trim(&full, &mut out));
        assert_eq!(out.len(), full.len() - 40);
        assert_eq!(u16::from_ne_bytes([out[6], out[7]]) as usize, out.len());
        let at = 8 + 48 + 24 + 32;
        assert_eq!(rd_u64(&out, at), Some(24));
        assert_eq!(&out[at + 8..at + 32], &full[at + 8..at + 32]);
        assert_eq!(rd_u64(&out, at + 32), Some(20));
        assert_eq!(rd_u64(&out, at + 40), Some(0xfeed));
        assert!(!layout.trim(&sample(64), &mut out));
        assert!(!layout.trim(&full[..60], &mut out));
        assert_eq!(StackLayout::new(st & !SAMPLE_STACK_USER, 0), None);
        assert_eq!(StackLayout::new(st | 1 << 3, 0b111), None); // ADDR precedes it

        // Counts whose low 32 bits are those of the good record (what a 32-bit `as usize`
        // would keep) do not parse: the record is left alone.
        let mut bad_nr = full.clone();
        bad_nr[56..64].copy_from_slice(&((1u64 << 32) | 2).to_ne_bytes());
        assert!(!layout.trim(&bad_nr, &mut out));
        let mut bad_size = full.clone();
        bad_size[at..at + 8].copy_from_slice(&((1u64 << 32) | 64).to_ne_bytes());
        assert!(!layout.trim(&bad_size, &mut out));
    }

    /// LOST, THROTTLE and SAMPLE records are attributed to the id the kernel wrote.
    #[test]
    fn classify_kernel_records_by_id() {
        let mut lost = Vec::new();
        header(&mut lost, LOST, 0);
        lost.extend_from_slice(&42u64.to_ne_bytes());
        lost.extend_from_slice(&1000u64.to_ne_bytes());
        assert_eq!(classify(&lost), Count::Lost { id: 42, lost: 1000 });
        let mut thr = Vec::new();
        header(&mut thr, THROTTLE, 0);
        thr.extend_from_slice(&5u64.to_ne_bytes());
        thr.extend_from_slice(&43u64.to_ne_bytes());
        assert_eq!(classify(&thr), Count::Throttle { id: 43 });
        assert_eq!(classify(&[1, 2]), Count::Other);
    }
}
