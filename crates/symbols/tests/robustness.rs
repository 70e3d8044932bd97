//! Thousands of damaged captures (bit flips, cuts, absurd header fields) through the readers:
//! errors are fine, a panic or an abort fails the test. The same entry points back the
//! cargo-fuzz targets in `fuzz/`.

mod common;

use common::perfdata::{self, Sample};
use std::io::Write;

/// Deterministic xorshift so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// linux-perf-event-reader overflows on some lengths in debug builds; the symbolizer catches
/// that per record. Keep its messages out of the test output, every other panic is printed.
fn quiet_reader_panics() {
    std::panic::set_hook(Box::new(|info| {
        if !info
            .location()
            .is_some_and(|l| l.file().contains("linux-perf-event-reader"))
        {
            eprintln!("{info}");
        }
    }));
}

fn seed_perf() -> Vec<u8> {
    perfdata::write(&seed_samples())
}

fn seed_samples() -> Vec<Sample> {
    (0..64)
        .map(|i| Sample {
            pid: 100 + (i % 3),
            tid: 100 + (i % 3),
            kernel: i % 4 == 0,
            ip: if i % 4 == 0 {
                0xffff_ffff_8100_0000 + i as u64 * 16
            } else {
                0x40_1000 + i as u64 * 8
            },
            callers: vec![0x40_2000, 0x40_3000],
        })
        .collect()
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        1 => b.truncate(rng.below(b.len())),
        2 => {
            // An absurd value in a header field or a record header.
            let at = if rng.below(2) == 0 {
                8 * rng.below(13)
            } else {
                rng.below(b.len().saturating_sub(8))
            };
            let v = [u64::MAX, 1 << 62, 0xffff_ffff, 0, rng.next()][rng.below(5)];
            if at + 8 <= b.len() {
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        _ => {
            let i = rng.below(b.len());
            let n = rng.below(64).min(b.len() - i);
            for x in &mut b[i..i + n] {
                *x = rng.next() as u8;
            }
        }
    }
    b
}

fn gz_tar(perf: &[u8]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(perf.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "perf.data", perf).unwrap();
    let raw = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

/// 3000 damaged perf.data files are read without a panic.
#[test]
fn read_perfdata_mutations_no_panic() {
    quiet_reader_panics();
    let seed = seed_perf();
    kprof_symbols::fuzzing::perf_data(&seed);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        kprof_symbols::fuzzing::perf_data(&mutate(&mut rng, &seed));
    }
}

/// 1500 damaged `-z` perf.data files of each compressed record type (records spanning
/// compressed records) are read without a panic, and so are 1500 damaged pipe-mode streams.
#[test]
fn read_perfdata_compressed_and_pipe_mutations_no_panic() {
    quiet_reader_panics();
    let samples = seed_samples();
    let seeds = [
        perfdata::write_compressed(&samples, &[0.3, 0.61], false),
        perfdata::write_compressed(&samples, &[0.45], true),
        perfdata::write_pipe(&samples),
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for seed in &seeds {
        kprof_symbols::fuzzing::perf_data(seed);
        for _ in 0..1500 {
            kprof_symbols::fuzzing::perf_data(&mutate(&mut rng, seed));
        }
    }
}

/// The `-z` (COMPRESSED and COMPRESSED2) and pipe-mode forms of the seed give all its
/// samples, undamaged, with records cut across compressed records.
#[test]
fn symbolize_perfdata_compressed_and_pipe_all_samples() {
    let samples = seed_samples();
    for (what, bytes) in [
        (
            "compressed",
            perfdata::write_compressed(&samples, &[0.3, 0.61], false),
        ),
        (
            "compressed2",
            perfdata::write_compressed(&samples, &[0.45], true),
        ),
        ("pipe", perfdata::write_pipe(&samples)),
    ] {
        let mut f = tempfile::Builder::new().suffix(".data").tempfile().unwrap();
        f.write_all(&bytes).unwrap();
        let (p, _) = common::symbolize(f.path(), &[]);
        let n: u64 = p.stacks.iter().flat_map(|s| &s.counts).sum();
        assert_eq!(n, 64, "{what}: {n} samples of 64");
        assert!(
            !p.warnings.iter().any(|w| w.contains("damaged")),
            "{what}: {:?}",
            p.warnings
        );
    }
}

/// Records compressed with a type other than zstd (HEADER_COMPRESSED) are not decoded as
/// zstd, and the error says why.
#[test]
fn read_perfdata_compressed_unknown_type_error() {
    let z = perfdata::write_compressed(&seed_samples(), &[], false);
    // `struct { u32 version, type, level, ratio, mmap_len }`, type 2 (not zstd).
    let info: Vec<u8> = [1u32, 2, 1, 5, 4096]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let err = symbolize_error(&add_feature(z, 27, &info));
    assert!(err.contains("unknown type 2"), "{err}");
}

/// A compressed record expanding to 300 MiB (of zeros) is an error, not 300 MiB held in
/// memory by the reader.
#[test]
fn read_perfdata_compressed_huge_expansion_error() {
    let err = symbolize_error(&perfdata::write_zeros_compressed(300 << 20));
    assert!(err.contains("expands past 256 MiB"), "{err}");
}

/// A pipe-mode HEADER_FEATURE record for EVENT_DESC (id 12 in the low 32 bits of a u64, as
/// linux-perf-data reads it) claiming 2^32-1 events is an error, not a huge allocation
/// (cargo-fuzz finding, 2026-11-23).
#[test]
fn read_perfdata_pipe_event_desc_huge_count_error() {
    let pipe = perfdata::write_pipe(&seed_samples());
    // After the 16-byte pipe header and the HEADER_ATTR record.
    let at = 16 + usize::from(u16::from_le_bytes([pipe[22], pipe[23]]));
    let mut feature = Vec::new();
    feature.extend_from_slice(&80u32.to_le_bytes()); // PERF_RECORD_HEADER_FEATURE
    feature.extend_from_slice(&0u16.to_le_bytes());
    feature.extend_from_slice(&24u16.to_le_bytes());
    feature.extend_from_slice(&0xffff_ff00_0000_000cu64.to_le_bytes());
    feature.extend_from_slice(&u32::MAX.to_le_bytes()); // nr
    feature.extend_from_slice(&128u32.to_le_bytes()); // attr_size
    let mut b = pipe[..at].to_vec();
    b.extend_from_slice(&feature);
    b.extend_from_slice(&pipe[at..]);
    let err = symbolize_error(&b);
    assert!(err.contains("feature record"), "{err}");
}

/// 1000 damaged archives (compressed stream and the perf.data inside) are read without a panic.
#[test]
fn read_archive_mutations_no_panic() {
    quiet_reader_panics();
    let seed = seed_perf();
    let archive = gz_tar(&seed);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for i in 0..1000 {
        let bytes = if i % 2 == 0 {
            mutate(&mut rng, &archive)
        } else {
            gz_tar(&mutate(&mut rng, &seed))
        };
        kprof_symbols::fuzzing::archive(&bytes);
    }
}

/// `seed_perf()` with one feature section (perf's `HEADER_*` number `bit`) after the data.
fn with_feature(bit: u32, section: &[u8]) -> Vec<u8> {
    add_feature(seed_perf(), bit, section)
}

/// The perf.data `b` (of no feature sections) with one, perf's `HEADER_*` number `bit`.
fn add_feature(mut b: Vec<u8>, bit: u32, section: &[u8]) -> Vec<u8> {
    let bitmap = 72 + 8 * (bit / 64) as usize;
    let word = u64::from_le_bytes(b[bitmap..bitmap + 8].try_into().unwrap()) | 1 << (bit % 64);
    b[bitmap..bitmap + 8].copy_from_slice(&word.to_le_bytes());
    let offset = b.len() as u64 + 16;
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&(section.len() as u64).to_le_bytes());
    b.extend_from_slice(section);
    b
}

/// The error from symbolizing `bytes` as a bare perf.data.
fn symbolize_error(bytes: &[u8]) -> String {
    let mut f = tempfile::Builder::new().suffix(".data").tempfile().unwrap();
    f.write_all(bytes).unwrap();
    let opts = kprof_symbols::Options {
        symbol_paths: Vec::new(),
        index_store: None,
        source_prefix: Vec::new(),
        ..kprof_symbols::Options::default()
    };
    let mut s = kprof_symbols::Symbolizer::new(opts, &mut |_| {}).unwrap();
    let cap = kprof_symbols::Capture::open(f.path()).unwrap();
    let err = s.symbolize(&cap, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains(&*f.path().to_string_lossy()), "{err}");
    err
}

/// An EVENT_DESC claiming 2^32-1 events in 8 bytes is an error, not a huge allocation
/// (found by the perf_data fuzzer).
#[test]
fn read_perfdata_event_desc_huge_count_error() {
    let mut desc = u32::MAX.to_le_bytes().to_vec();
    desc.extend_from_slice(&128u32.to_le_bytes());
    let err = symbolize_error(&with_feature(12, &desc));
    assert!(err.contains("event description feature section"), "{err}");
}

/// An EVENT_DESC event with 2^32-1 ids or a 4 GB name in a short section is an error.
#[test]
fn read_perfdata_event_desc_huge_ids_error() {
    for (ids, name) in [(u32::MAX, 0u32), (0, u32::MAX)] {
        let mut desc = 1u32.to_le_bytes().to_vec();
        desc.extend_from_slice(&8u32.to_le_bytes());
        desc.extend_from_slice(&[0; 8]);
        desc.extend_from_slice(&ids.to_le_bytes());
        desc.extend_from_slice(&name.to_le_bytes());
        let err = symbolize_error(&with_feature(12, &desc));
        assert!(err.contains("event description feature section"), "{err}");
    }
}

/// A CMDLINE claiming 2^32-1 arguments in 4 bytes is an error, not a 64 GB allocation.
#[test]
fn read_perfdata_cmdline_huge_count_error() {
    let err = symbolize_error(&with_feature(11, &u32::MAX.to_le_bytes()));
    assert!(err.contains("command line feature section"), "{err}");
}

/// An old-style event_types entry whose id list lies past the end of the file is an error.
#[test]
fn read_perfdata_event_type_ids_past_end_error() {
    let mut b = seed_perf();
    // One entry: the attr padded to the header's attr_size (144), then its ids section.
    let mut entry = b[104..248].to_vec();
    entry.extend_from_slice(&8u64.to_le_bytes());
    entry.extend_from_slice(&(1u64 << 62).to_le_bytes());
    let offset = b.len() as u64;
    b[56..64].copy_from_slice(&offset.to_le_bytes());
    b[64..72].copy_from_slice(&(entry.len() as u64).to_le_bytes());
    b.extend_from_slice(&entry);
    let err = symbolize_error(&b);
    assert!(err.contains("event type ids section"), "{err}");
}

/// A sample with a READ block whose call chain length overflows when multiplied by 8 is a
/// damaged record found before the parser sees it (found by the perf_data fuzzer).
#[test]
fn read_perfdata_read_format_callchain_overflow_error() {
    let mut b = seed_perf();
    let sample_type = 104 + 24;
    let t = u64::from_le_bytes(b[sample_type..sample_type + 8].try_into().unwrap());
    b[sample_type..sample_type + 8].copy_from_slice(&(t | 16).to_le_bytes()); // PERF_SAMPLE_READ
                                                                              // First sample: IP, TID, TIME, PERIOD, then an empty READ block where the call chain
                                                                              // count was, so the call chain length is the next word, the context marker 2^64-512.
    let nr = 248 + 8 + 32;
    b[nr..nr + 8].copy_from_slice(&0u64.to_le_bytes());
    let err = symbolize_error(&b);
    assert!(err.contains("call chain longer than its record"), "{err}");
}

/// An AUXTRACE record claiming 2^46 bytes of trace data after it is an error, not an
/// allocation of that size (found by the perf_data fuzzer).
#[test]
fn read_perfdata_auxtrace_huge_size_error() {
    let mut b = seed_perf();
    let mut rec = 71u32.to_le_bytes().to_vec(); // PERF_RECORD_AUXTRACE
    rec.extend_from_slice(&0u16.to_le_bytes());
    rec.extend_from_slice(&48u16.to_le_bytes());
    rec.extend_from_slice(&(1u64 << 46).to_le_bytes()); // size of the trace data
    rec.extend_from_slice(&[0; 32]); // offset, reference, idx, tid, cpu, reserved
    let data_size = u64::from_le_bytes(b[48..56].try_into().unwrap()) + 8 + rec.len() as u64;
    b[48..56].copy_from_slice(&data_size.to_le_bytes());
    // Behind a header-only FINISHED_ROUND record, which the check must step over.
    b.extend_from_slice(&[68, 0, 0, 0, 0, 0, 8, 0]);
    b.extend_from_slice(&rec);
    let err = symbolize_error(&b);
    assert!(err.contains("AUXTRACE record"), "{err}");
}

/// A well-formed CMDLINE and EVENT_DESC still read.
#[test]
fn read_perfdata_valid_features_ok() {
    let mut cmdline = 1u32.to_le_bytes().to_vec();
    cmdline.extend_from_slice(&4u32.to_le_bytes());
    cmdline.extend_from_slice(b"ls\0\0");
    let b = with_feature(11, &cmdline);
    let header =
        kprof_symbols::perf_data::header::check(&mut std::io::Cursor::new(&b), b.len() as u64);
    assert!(header.is_ok(), "{header:?}");
}

/// Sample count and warnings of `bytes` symbolized as a bare perf.data.
fn symbolize_bytes(bytes: &[u8]) -> (u64, kprof_symbols::Profile) {
    let mut f = tempfile::Builder::new().suffix(".data").tempfile().unwrap();
    f.write_all(bytes).unwrap();
    let (p, _) = common::symbolize(f.path(), &[]);
    let n = p.stacks.iter().flat_map(|s| &s.counts).sum();
    (n, p)
}

/// Garbage over the last samples of a file written in one sorting round (no FINISHED_ROUND,
/// as perf writes when it woke up once): the samples before the garbage are all read, the
/// profile says it is damaged, and the feature sections after the data are still read.
#[test]
fn symbolize_perfdata_garbage_at_end_keeps_samples_before() {
    let mut cmdline = 1u32.to_le_bytes().to_vec();
    cmdline.extend_from_slice(&8u32.to_le_bytes());
    cmdline.extend_from_slice(b"./prog\0\0");
    let mut b = with_feature(11, &cmdline);
    let data_off = u64::from_le_bytes(b[40..48].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(b[48..56].try_into().unwrap()) as usize;
    // Each sample record is 80 bytes: the last 16 become garbage.
    for (i, x) in b[data_off + data_len - 16 * 80..data_off + data_len]
        .iter_mut()
        .enumerate()
    {
        *x = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    let (n, p) = symbolize_bytes(&b);
    assert_eq!(n, 48, "{:?}", p.warnings);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("record of unknown type")),
        "{:?}",
        p.warnings
    );
    assert_eq!(p.meta.command.as_deref(), Some("./prog"));
}

/// A record claiming to be shorter than its own header, in a file and in a pipe: the
/// samples before it are read, the rest is damage.
#[test]
fn symbolize_perfdata_short_record_keeps_samples_before() {
    for (what, mut b) in [
        ("file", seed_perf()),
        ("pipe", perfdata::write_pipe(&seed_samples())),
    ] {
        // The 41st sample's size field (the records are 80 bytes, the file's data last).
        let at = b.len() - 24 * 80 + 6;
        b[at..at + 2].copy_from_slice(&4u16.to_le_bytes());
        let (n, p) = symbolize_bytes(&b);
        assert_eq!(n, 40, "{what}: {:?}", p.warnings);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("shorter than its header")),
            "{what}: {:?}",
            p.warnings
        );
    }
}

/// A `-z` file whose last compressed record does not decode: the records of the ones before
/// are read.
#[test]
fn symbolize_perfdata_compressed_bad_last_record_keeps_earlier() {
    let mut b = perfdata::write_compressed(&seed_samples(), &[0.5], false);
    let n = b.len();
    for x in &mut b[n - 40..n - 8] {
        *x = 0xff;
    }
    let (n, p) = symbolize_bytes(&b);
    assert!((20..=32).contains(&n), "{n} samples: {:?}", p.warnings);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("compressed record at offset")),
        "{:?}",
        p.warnings
    );
}
