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
    let samples: Vec<Sample> = (0..64)
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
        .collect();
    perfdata::write(&samples)
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
