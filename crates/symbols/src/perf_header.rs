//! Checks a perf.data header against the file size before the reader trusts it.
//!
//! `linux-perf-data` allocates whatever a section header says, so a corrupted size would
//! abort the process with an allocation failure instead of giving an error.

use std::io::{Read, Seek, SeekFrom};

/// `struct perf_file_header` is 104 bytes since perf 3.x.
const HEADER_SIZE: u64 = 104;

/// A `perf_file_section` from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    pub offset: u64,
    pub size: u64,
}

/// The parts of the header the reader relies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub big_endian: bool,
    pub attr_size: u64,
    pub attrs: Section,
    pub data: Section,
    pub event_types: Section,
    /// Number of feature sections.
    pub features: u32,
}

/// Reads and checks the header of a perf.data of `file_len` bytes.
pub fn check(r: &mut (impl Read + Seek), file_len: u64) -> Result<Header, String> {
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
    let u = |i: usize| {
        let b: [u8; 8] = raw[i * 8..i * 8 + 8].try_into().expect("8 bytes");
        if big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
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
    for i in 0..features {
        let mut b = [0u8; 16];
        r.read_exact(&mut b).map_err(|e| e.to_string())?;
        let (o, s) = b.split_at(8);
        let conv = |x: &[u8]| {
            let a: [u8; 8] = x.try_into().expect("8 bytes");
            if big_endian {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        };
        within(
            &format!("feature #{i}"),
            Section {
                offset: conv(o),
                size: conv(s),
            },
        )?;
    }
    Ok(Header {
        big_endian,
        attr_size,
        attrs,
        data,
        event_types,
        features,
    })
}
