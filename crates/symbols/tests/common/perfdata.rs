//! A minimal PERFILE2 writer for tests: one cpu-clock attribute, SAMPLE records with
//! IP|TID|TIME|PERIOD and optional callchains, no feature sections.

const SAMPLE_IP: u64 = 1;
const SAMPLE_TID: u64 = 2;
const SAMPLE_TIME: u64 = 4;
const SAMPLE_CALLCHAIN: u64 = 32;
const SAMPLE_PERIOD: u64 = 256;
const ATTR_SIZE: usize = 128;

/// One sample: pid/tid, kernel or user, the leaf IP and callers (return addresses).
#[derive(Debug, Clone)]
pub struct Sample {
    pub pid: i32,
    pub tid: i32,
    pub kernel: bool,
    pub ip: u64,
    pub callers: Vec<u64>,
}

fn u64s(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Serializes a perf.data with the given samples.
pub fn write(samples: &[Sample]) -> Vec<u8> {
    let (attr, data) = attr_and_records(samples);
    file(&attr, &data)
}

/// A perf.data with the raw records `before` (side-band records: see [`fork`], [`mmap2`])
/// ahead of the samples.
#[allow(dead_code)]
pub fn write_with(before: &[u8], samples: &[Sample]) -> Vec<u8> {
    let (attr, data) = attr_and_records(samples);
    let mut records = before.to_vec();
    records.extend_from_slice(&data);
    file(&attr, &records)
}

/// A `PERF_RECORD_FORK`: process `pid` forked from `ppid`.
#[allow(dead_code)]
pub fn fork(pid: i32, ppid: i32) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&7u32.to_le_bytes()); // PERF_RECORD_FORK
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&32u16.to_le_bytes());
    for v in [pid, ppid, pid, ppid] {
        r.extend_from_slice(&v.to_le_bytes());
    }
    u64s(&mut r, 0);
    r
}

/// A `PERF_RECORD_MMAP2` of an executable mapping of `path` in `pid`, with a build-id.
#[allow(dead_code)]
pub fn mmap2(pid: i32, start: u64, len: u64, path: &str, build_id: &[u8; 20]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&pid.to_le_bytes());
    u64s(&mut body, start);
    u64s(&mut body, len);
    u64s(&mut body, 0);
    body.push(20); // build_id_size
    body.extend_from_slice(&[0; 3]);
    body.extend_from_slice(build_id);
    body.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
    body.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
    body.extend_from_slice(path.as_bytes());
    body.push(0);
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let mut r = Vec::new();
    r.extend_from_slice(&10u32.to_le_bytes()); // PERF_RECORD_MMAP2
                                               // PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID
    r.extend_from_slice(&(2u16 | 1 << 14).to_le_bytes());
    r.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
    r.extend_from_slice(&body);
    r
}

/// The same perf.data with its records in `PERF_RECORD_COMPRESSED` records, as `perf record
/// -z` writes them: one zstd frame for all, flushed at the end of each record, and the raw
/// records cut at `cuts` (fractions of their length) so that records span compressed records.
/// With `compressed2`, the records are `PERF_RECORD_COMPRESSED2` (perf 6.15 on): a u64 of
/// the zstd data's length, then the data padded to 8 bytes.
#[allow(dead_code)]
pub fn write_compressed(samples: &[Sample], cuts: &[f64], compressed2: bool) -> Vec<u8> {
    let (attr, data) = attr_and_records(samples);
    let mut cctx = zstd_safe::CCtx::create();
    let mut at = 0;
    let mut records = Vec::new();
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|c| (data.len() as f64 * c) as usize)
        .collect();
    ends.push(data.len());
    for end in ends {
        let mut input = zstd_safe::InBuffer::around(&data[at..end]);
        let mut buf = vec![0u8; 1 << 16];
        let mut out = zstd_safe::OutBuffer::around(&mut buf[..]);
        while input.pos() < end - at {
            cctx.compress_stream(&mut out, &mut input).unwrap();
        }
        while cctx.flush_stream(&mut out).unwrap() != 0 {}
        let n = out.pos();
        if compressed2 {
            let padded = n.div_ceil(8) * 8;
            records.extend_from_slice(&83u32.to_le_bytes()); // PERF_RECORD_COMPRESSED2
            records.extend_from_slice(&0u16.to_le_bytes());
            records.extend_from_slice(&((padded + 16) as u16).to_le_bytes());
            u64s(&mut records, n as u64);
            records.extend_from_slice(&buf[..n]);
            records.resize(records.len() + padded - n, 0);
        } else {
            records.extend_from_slice(&81u32.to_le_bytes()); // PERF_RECORD_COMPRESSED
            records.extend_from_slice(&0u16.to_le_bytes());
            records.extend_from_slice(&((n + 8) as u16).to_le_bytes());
            records.extend_from_slice(&buf[..n]);
        }
        at = end;
    }
    file(&attr, &records)
}

/// The same samples in pipe mode (`perf record -o -`): the 16-byte pipe header, the
/// attribute as a HEADER_ATTR record, then the records.
#[allow(dead_code)]
pub fn write_pipe(samples: &[Sample]) -> Vec<u8> {
    let (attr, data) = attr_and_records(samples);
    let mut out = Vec::new();
    out.extend_from_slice(b"PERFILE2");
    u64s(&mut out, 16);
    out.extend_from_slice(&64u32.to_le_bytes()); // PERF_RECORD_HEADER_ATTR
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&((attr.len() + 8) as u16).to_le_bytes());
    out.extend_from_slice(&attr);
    out.extend_from_slice(&data);
    out
}

/// The attribute and the SAMPLE records of `samples`.
fn attr_and_records(samples: &[Sample]) -> (Vec<u8>, Vec<u8>) {
    let sample_type = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN | SAMPLE_PERIOD;
    let mut attr = vec![0u8; ATTR_SIZE];
    attr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    attr[8..16].copy_from_slice(&0u64.to_le_bytes()); // PERF_COUNT_SW_CPU_CLOCK
    attr[16..24].copy_from_slice(&1000u64.to_le_bytes()); // sample_freq
    attr[24..32].copy_from_slice(&sample_type.to_le_bytes());
    attr[40..48].copy_from_slice(&(1u64 << 10).to_le_bytes()); // freq
    let mut data = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let mut body = Vec::new();
        u64s(&mut body, s.ip);
        body.extend_from_slice(&s.pid.to_le_bytes());
        body.extend_from_slice(&s.tid.to_le_bytes());
        u64s(&mut body, 1000 + i as u64);
        u64s(&mut body, 1_000_000);
        let ctx = if s.kernel {
            -128i64 as u64
        } else {
            -512i64 as u64
        };
        u64s(&mut body, 2 + s.callers.len() as u64);
        u64s(&mut body, ctx);
        u64s(&mut body, s.ip);
        for c in &s.callers {
            u64s(&mut body, *c);
        }
        data.extend_from_slice(&9u32.to_le_bytes()); // PERF_RECORD_SAMPLE
        data.extend_from_slice(&(if s.kernel { 1u16 } else { 2u16 }).to_le_bytes());
        data.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        data.extend_from_slice(&body);
    }
    (attr, data)
}

/// A perf.data file of one attribute and the records `data`.
fn file(attr: &[u8], data: &[u8]) -> Vec<u8> {
    let attrs_off = 104u64;
    let attrs_size = (ATTR_SIZE + 16) as u64;
    let data_off = attrs_off + attrs_size;
    let mut out = Vec::new();
    out.extend_from_slice(b"PERFILE2");
    u64s(&mut out, 104);
    u64s(&mut out, attrs_size);
    u64s(&mut out, attrs_off);
    u64s(&mut out, attrs_size);
    u64s(&mut out, data_off);
    u64s(&mut out, data.len() as u64);
    u64s(&mut out, 0);
    u64s(&mut out, 0);
    out.extend_from_slice(&[0u8; 32]);
    out.extend_from_slice(attr);
    u64s(&mut out, 0); // ids section: none
    u64s(&mut out, 0);
    out.extend_from_slice(data);
    out
}

/// A perf.data whose data section is one `PERF_RECORD_COMPRESSED` record of `len` zero
/// bytes (compressed in 1 MiB steps, so `len` need not fit in memory).
#[allow(dead_code)]
pub fn write_zeros_compressed(len: usize) -> Vec<u8> {
    let (attr, _) = attr_and_records(&[]);
    let mut cctx = zstd_safe::CCtx::create();
    let zeros = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 16];
    let mut out = zstd_safe::OutBuffer::around(&mut buf[..]);
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len());
        let mut input = zstd_safe::InBuffer::around(&zeros[..n]);
        while input.pos() < n {
            cctx.compress_stream(&mut out, &mut input).unwrap();
        }
        left -= n;
    }
    while cctx.flush_stream(&mut out).unwrap() != 0 {}
    let n = out.pos();
    let mut records = Vec::new();
    records.extend_from_slice(&81u32.to_le_bytes()); // PERF_RECORD_COMPRESSED
    records.extend_from_slice(&0u16.to_le_bytes());
    records.extend_from_slice(&((n + 8) as u16).to_le_bytes());
    records.extend_from_slice(&buf[..n]);
    file(&attr, &records)
}
