//! A damaged record whose size field points past the data section: the reader stops there
//! without an error of its own, so the report must still say the file is damaged.

mod common;

use common::perfdata::{self, Sample};

fn samples() -> Vec<Sample> {
    (0..32)
        .map(|i| Sample {
            pid: 100,
            tid: 100,
            kernel: false,
            ip: 0x40_1000 + i as u64 * 8,
            callers: vec![0x40_2000],
        })
        .collect()
}

fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// Overwrites the header of the first record at or after the middle of the data section with
/// an impossible type and a size that ends just past the section, as random garbage can.
fn damage_middle(b: &mut Vec<u8>) {
    let (off, len) = (u64_at(b, 40), u64_at(b, 48));
    let mut at = off;
    while at < off + len / 2 {
        let size = u16::from_le_bytes([b[at + 6], b[at + 7]]) as usize;
        assert!(size >= 8, "writer produced a record of size {size}");
        at += size;
    }
    let size = (off + len - at + 8 + 7) & !7;
    assert!(
        size <= u16::MAX as usize,
        "seed too large for a u16 record size"
    );
    b[at..at + 4].copy_from_slice(&1_017_450_103u32.to_le_bytes());
    b[at + 6..at + 8].copy_from_slice(&(size as u16).to_le_bytes());
    // Whatever follows the data section (feature sections) must be long enough to read.
    b.extend_from_slice(&[0u8; 64]);
}

/// Samples before the damaged record are kept and a warning names the damage.
#[test]
fn symbolize_perfdata_record_past_section_flagged() {
    let mut bytes = perfdata::write(&samples());
    damage_middle(&mut bytes);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    std::fs::write(&path, &bytes).unwrap();
    let (p, _) = common::symbolize(&path, &[]);
    let samples: u64 = p.stacks.iter().flat_map(|s| &s.counts).sum();
    assert!(
        samples > 0 && samples < 32,
        "{samples} samples kept of 32, expected those before the damage"
    );
    assert!(
        p.warnings.iter().any(|w| w.contains("damaged")),
        "no damage warning in {:?}",
        p.warnings
    );
}
