//! Synthetic PERFILE2 files for the symbolizer's unit tests: attributes, their ids in an
//! EVENT_DESC feature section (where readers take them from, as perf and the agent write
//! them), and a data section the test builds.

/// `perf_event_attr` size the files use.
pub(crate) const ATTR_SIZE: usize = 128;

/// Appends `v` little-endian.
pub(crate) fn u64s(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// One `perf_event_attr`: type, config, period (or frequency), sample_type and the flags word.
pub(crate) fn attr(ty: u32, config: u64, period: u64, sample_type: u64, flags: u64) -> Vec<u8> {
    let mut a = vec![0u8; ATTR_SIZE];
    a[0..4].copy_from_slice(&ty.to_le_bytes());
    a[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    a[8..16].copy_from_slice(&config.to_le_bytes());
    a[16..24].copy_from_slice(&period.to_le_bytes());
    a[24..32].copy_from_slice(&sample_type.to_le_bytes());
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    a
}

/// A PERFILE2 of `attrs` (each with its one id, unnamed) and the records in `data`.
pub(crate) fn file(attrs: &[(Vec<u8>, u64)], data: &[u8]) -> Vec<u8> {
    let attrs_off = 104;
    let mut section = Vec::new();
    let mut desc = Vec::new();
    desc.extend_from_slice(&(attrs.len() as u32).to_le_bytes());
    desc.extend_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    for (a, id) in attrs {
        section.extend_from_slice(a);
        u64s(&mut section, 0); // ids file section: unused, EVENT_DESC has them
        u64s(&mut section, 0);
        desc.extend_from_slice(a);
        desc.extend_from_slice(&1u32.to_le_bytes());
        desc.extend_from_slice(&0u32.to_le_bytes()); // no name
        u64s(&mut desc, *id);
    }
    let data_off = attrs_off + section.len();
    let desc_off = data_off + data.len() + 16;
    let mut out = b"PERFILE2".to_vec();
    for v in [
        104,
        ATTR_SIZE + 16,
        attrs_off,
        section.len(),
        data_off,
        data.len(),
        0,
        0,
    ] {
        u64s(&mut out, v as u64);
    }
    let mut features = [0u8; 32];
    features[1] = 1 << 4; // HEADER_EVENT_DESC, bit 12
    out.extend_from_slice(&features);
    out.extend_from_slice(&section);
    out.extend_from_slice(data);
    u64s(&mut out, desc_off as u64);
    u64s(&mut out, desc.len() as u64);
    out.extend_from_slice(&desc);
    out
}
