//! GNU build-ids: finding the `NT_GNU_BUILD_ID` note in an ELF note stream and spelling it
//! the way manifests, perf and debuginfod do (lowercase hex).
//!
//! Note streams come from `/sys/kernel/notes`, `/sys/module/NAME/notes/.note.gnu.build-id`
//! and ELF `PT_NOTE` segments or `SHT_NOTE` sections. Everything is bounds-checked: a
//! malformed stream yields `None`, never a panic.

/// `n_type` of the GNU build-id note.
pub const NT_GNU_BUILD_ID: u32 = 3;
/// Build-ids longer than this are not believed (SHA-1 ones are 20 bytes, MD5 ones 16): a
/// manifest with a longer one is refused by readers ([`crate::manifest::MAX_BUILD_ID_DIGITS`]).
const MAX_BUILD_ID: usize = crate::manifest::MAX_BUILD_ID_DIGITS / 2;

/// Finds the GNU build-id in a stream of ELF notes of the given byte order and alignment
/// (4, or 8 for some 64-bit `PT_NOTE` segments; anything else is taken as 4).
pub fn in_notes(data: &[u8], big_endian: bool, align: usize) -> Option<&[u8]> {
    let align = if align == 8 { 8 } else { 4 };
    let rd = |o: usize| crate::bytes::u32_at(data, o, big_endian);
    let up = |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    let mut off = 0usize;
    while off + 12 <= data.len() {
        let namesz = rd(off)? as usize;
        let descsz = rd(off + 4)? as usize;
        let ntype = rd(off + 8)?;
        let name_at = off + 12;
        let desc_at = name_at.checked_add(up(namesz)?)?;
        let next = desc_at.checked_add(up(descsz)?)?;
        let name = data.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = data.get(desc_at..desc_at.checked_add(descsz)?)?;
        if ntype == NT_GNU_BUILD_ID
            && name == b"GNU\0"
            && !desc.is_empty()
            && desc.len() <= MAX_BUILD_ID
        {
            return Some(desc);
        }
        off = next;
    }
    None
}

/// Finds the GNU build-id in a 4-aligned note stream of unknown byte order, such as a
/// board's `/sys/kernel/notes` read by a host of another architecture: little-endian first.
/// Only the tests use it; the readers know their byte order.
#[cfg(test)]
fn in_notes_either_endian(data: &[u8]) -> Option<&[u8]> {
    in_notes(data, false, 4).or_else(|| in_notes(data, true, 4))
}

/// Lowercase hex of a byte string, the spelling of build-ids and digests in captures.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 0x98 bytes of a real x86_64 `/sys/kernel/notes` (GNU, Linux, Xen notes).
    const KERNEL_NOTES: &[u8] = &[
        0x04, 0, 0, 0, 0x14, 0, 0, 0, 0x03, 0, 0, 0, b'G', b'N', b'U', 0, 0x48, 0xdc, 0x54, 0x0c,
        0x8b, 0x76, 0x39, 0x38, 0x04, 0xca, 0x80, 0x88, 0xdb, 0xfa, 0x7d, 0x42, 0x91, 0x1a, 0x94,
        0x44, 0x06, 0, 0, 0, 0x04, 0, 0, 0, 0x01, 0x01, 0, 0, b'L', b'i', b'n', b'u', b'x', 0, 0,
        0, 0, 0, 0, 0, 0x06, 0, 0, 0, 0x1e, 0, 0, 0, 0, 0x01, 0, 0, b'L', b'i', b'n', b'u', b'x',
        0, 0, 0, b'6', b'.', b'1', b'.', b'1', b'0', b'2', b'-', b'1', b'.', b'1', b'8', b'2',
        b'.', b'a', b'm', b'z', b'n', b'2', b'0', b'2', b'3', b'.', b'x', b'8', b'6', b'_', b'6',
        b'4', 0, 0, 0, 0x04, 0, 0, 0, 0x0c, 0, 0, 0, 0x13, 0, 0, 0, b'X', b'e', b'n', 0, 0, 0, 0,
        0x01, 0, 0, 0, 0x01, 0xff, 0xff, 0xff, 0x3f,
    ];

    /// The GNU note is found in a real kernel note stream.
    #[test]
    fn parse_kernel_notes_real_stream() {
        let bid = in_notes(KERNEL_NOTES, false, 4).unwrap();
        assert_eq!(hex(bid), "48dc540c8b76393804ca8088dbfa7d42911a9444");
    }

    /// Any truncation of a note stream is handled without panicking.
    #[test]
    fn parse_notes_truncated_no_panic() {
        for n in 0..KERNEL_NOTES.len() {
            let r = in_notes(&KERNEL_NOTES[..n], false, 4);
            assert!(r.is_none() || n >= 36);
        }
        // A build-id note whose desc size points past the end.
        let mut bad = KERNEL_NOTES[..36].to_vec();
        bad[4] = 0xff;
        assert_eq!(in_notes(&bad, false, 4), None);
    }

    /// A build-id note after another note is found in either byte order; truncated and
    /// garbage streams give `None`.
    #[test]
    fn parse_notes_either_endian_after_other_note() {
        let mut le = Vec::new();
        for (name, kind, desc) in [
            (&b"Xen\0"[..], 1u32, &[1u8, 2, 3][..]),
            (b"GNU\0", 3, &[0xab, 0xcd, 0xef, 0x01]),
        ] {
            le.extend_from_slice(&(name.len() as u32).to_le_bytes());
            le.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            le.extend_from_slice(&kind.to_le_bytes());
            le.extend_from_slice(name);
            le.extend_from_slice(desc);
            while le.len() % 4 != 0 {
                le.push(0);
            }
        }
        let found = |d: &[u8]| in_notes_either_endian(d).map(hex);
        assert_eq!(found(&le).as_deref(), Some("abcdef01"));
        let be: Vec<u8> = le
            .chunks(4)
            .enumerate()
            .flat_map(|(i, c)| {
                // Swap the three header words of each note (offsets 0..12 and 20..32).
                if i < 3 || (5..8).contains(&i) {
                    c.iter().rev().copied().collect::<Vec<_>>()
                } else {
                    c.to_vec()
                }
            })
            .collect();
        assert_eq!(found(&be).as_deref(), Some("abcdef01"));
        assert_eq!(found(&le[..20]), None);
        assert_eq!(found(&[0xff; 64]), None);
    }

    /// 8-aligned streams (64-bit `PT_NOTE` with `p_align` 8) pad name and desc to 8.
    #[test]
    fn parse_notes_align8_padding() {
        let mut d = Vec::new();
        d.extend_from_slice(&4u32.to_le_bytes());
        d.extend_from_slice(&3u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(b"ABC\0\0\0\0\0");
        d.extend_from_slice(&[9, 9, 9, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&4u32.to_le_bytes());
        d.extend_from_slice(&2u32.to_le_bytes());
        d.extend_from_slice(&3u32.to_le_bytes());
        d.extend_from_slice(b"GNU\0\0\0\0\0");
        d.extend_from_slice(&[0xbe, 0xef, 0, 0, 0, 0, 0, 0]);
        assert_eq!(in_notes(&d, false, 8), Some(&[0xbe, 0xef][..]));
    }

    /// Hex is lowercase, two digits a byte, empty for no bytes.
    #[test]
    fn format_hex_lowercase_two_digits() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(hex(&[]), "");
    }
}
