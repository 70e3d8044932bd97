//! GNU build-ids: from ELF note streams (`/sys/kernel/notes`, `/sys/module/*/notes/*`) and from
//! ELF files' `PT_NOTE` segments (or `SHT_NOTE` sections when a file has no usable segment).
//!
//! Everything read from a file is bounds-checked: a malformed or hostile ELF yields `None`,
//! never a panic or a huge allocation.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

const NT_GNU_BUILD_ID: u32 = 3;
const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
/// Notes bigger than this are not build-id notes worth reading.
const MAX_NOTE_BYTES: u64 = 1 << 20;
const MAX_HEADERS: usize = 4096;

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Finds the GNU build-id in a stream of ELF notes with the given alignment (4 or 8).
pub fn build_id_in_notes(data: &[u8], big_endian: bool, align: usize) -> Option<Vec<u8>> {
    let align = if align == 8 { 8 } else { 4 };
    let rd = |o: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(o..o + 4)?.try_into().ok()?;
        Some(if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
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
        if ntype == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() && desc.len() <= 64 {
            return Some(desc.to_vec());
        }
        if next <= off {
            return None;
        }
        off = next;
    }
    None
}

/// Reads a native-endian note file such as `/sys/kernel/notes`.
pub fn build_id_of_note_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let data = std::fs::read(path)?;
    Ok(build_id_in_notes(&data, cfg!(target_endian = "big"), 4))
}

/// The GNU build-id of an ELF file, `Ok(None)` when it is not ELF or carries none.
pub fn elf_build_id(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let mut f = File::open(path)?;
    Ok(elf_build_id_from(&mut f))
}

struct Ident {
    is64: bool,
    be: bool,
}

impl Ident {
    fn u16(&self, b: &[u8], o: usize) -> Option<u64> {
        let a: [u8; 2] = b.get(o..o + 2)?.try_into().ok()?;
        Some(if self.be {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        } as u64)
    }
    fn u32(&self, b: &[u8], o: usize) -> Option<u64> {
        let a: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(if self.be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        } as u64)
    }
    fn u64(&self, b: &[u8], o: usize) -> Option<u64> {
        let a: [u8; 8] = b.get(o..o + 8)?.try_into().ok()?;
        Some(if self.be {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    /// Reads an address-sized field (`Elf32_Addr`/`Elf64_Off`...).
    fn word(&self, b: &[u8], o32: usize, o64: usize) -> Option<u64> {
        if self.is64 {
            self.u64(b, o64)
        } else {
            self.u32(b, o32)
        }
    }
}

fn read_at<R: Read + Seek>(r: &mut R, off: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_NOTE_BYTES {
        return None;
    }
    r.seek(SeekFrom::Start(off)).ok()?;
    let mut buf = Vec::new();
    r.take(len).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == len).then_some(buf)
}

/// Build-id of an ELF image behind any seekable reader; `None` for anything malformed.
pub fn elf_build_id_from<R: Read + Seek>(r: &mut R) -> Option<Vec<u8>> {
    let eh = read_at(r, 0, 64).or_else(|| read_at(r, 0, 52))?;
    if eh.get(0..4)? != b"\x7fELF" {
        return None;
    }
    let id = Ident {
        is64: match eh[4] {
            1 => false,
            2 => true,
            _ => return None,
        },
        be: match eh[5] {
            1 => false,
            2 => true,
            _ => return None,
        },
    };
    let phoff = id.word(&eh, 28, 32)?;
    let shoff = id.word(&eh, 32, 40)?;
    let (phentsize, phnum) = if id.is64 {
        (id.u16(&eh, 54)?, id.u16(&eh, 56)?)
    } else {
        (id.u16(&eh, 42)?, id.u16(&eh, 44)?)
    };
    let (shentsize, shnum) = if id.is64 {
        (id.u16(&eh, 58)?, id.u16(&eh, 60)?)
    } else {
        (id.u16(&eh, 46)?, id.u16(&eh, 48)?)
    };
    let mut from_segments = || -> Option<Vec<u8>> {
        let min = if id.is64 { 56 } else { 32 };
        if phoff == 0 || phentsize < min || phnum as usize > MAX_HEADERS {
            return None;
        }
        let table = read_at(r, phoff, phentsize.checked_mul(phnum)?)?;
        for i in 0..phnum as usize {
            let p = &table[i * phentsize as usize..];
            if id.u32(p, 0)? as u32 != PT_NOTE {
                continue;
            }
            let (off, filesz, align) = if id.is64 {
                (id.u64(p, 8)?, id.u64(p, 32)?, id.u64(p, 48)?)
            } else {
                (id.u32(p, 4)?, id.u32(p, 16)?, id.u32(p, 28)?)
            };
            if let Some(bid) =
                read_at(r, off, filesz).and_then(|d| build_id_in_notes(&d, id.be, align as usize))
            {
                return Some(bid);
            }
        }
        None
    };
    if let Some(b) = from_segments() {
        return Some(b);
    }
    let min = if id.is64 { 64 } else { 40 };
    if shoff == 0 || shentsize < min || shnum as usize > MAX_HEADERS {
        return None;
    }
    let table = read_at(r, shoff, shentsize.checked_mul(shnum)?)?;
    for i in 0..shnum as usize {
        let s = &table[i * shentsize as usize..];
        if id.u32(s, 4)? as u32 != SHT_NOTE {
            continue;
        }
        let (off, size, align) = if id.is64 {
            (id.u64(s, 24)?, id.u64(s, 32)?, id.u64(s, 48)?)
        } else {
            (id.u32(s, 16)?, id.u32(s, 20)?, id.u32(s, 32)?)
        };
        if let Some(bid) =
            read_at(r, off, size).and_then(|d| build_id_in_notes(&d, id.be, align as usize))
        {
            return Some(bid);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

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
        let bid = build_id_in_notes(KERNEL_NOTES, false, 4).unwrap();
        assert_eq!(hex(&bid), "48dc540c8b76393804ca8088dbfa7d42911a9444");
    }

    /// Any truncation of a note stream is handled without panicking.
    #[test]
    fn parse_notes_truncated_no_panic() {
        for n in 0..KERNEL_NOTES.len() {
            let r = build_id_in_notes(&KERNEL_NOTES[..n], false, 4);
            assert!(r.is_none() || n >= 36);
        }
        // A build-id note whose desc size points past the end.
        let mut bad = KERNEL_NOTES[..36].to_vec();
        bad[4] = 0xff;
        assert_eq!(build_id_in_notes(&bad, false, 4), None);
    }

    /// Builds a minimal ELF with one PT_NOTE segment holding a build-id note.
    fn tiny_elf(is64: bool, be: bool, bid: &[u8]) -> Vec<u8> {
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w64 = |v: u64| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut note = Vec::new();
        note.extend(w32(4));
        note.extend(w32(bid.len() as u32));
        note.extend(w32(3));
        note.extend(b"GNU\0");
        note.extend(bid);
        while note.len() % 4 != 0 {
            note.push(0);
        }
        let ehsize = if is64 { 64 } else { 52 };
        let phentsize = if is64 { 56 } else { 32 };
        let note_off = ehsize + phentsize;
        let mut e = vec![
            0x7f,
            b'E',
            b'L',
            b'F',
            if is64 { 2 } else { 1 },
            if be { 2 } else { 1 },
            1,
        ];
        e.resize(16, 0);
        e.extend(w16(2)); // e_type
        e.extend(w16(if is64 { 62 } else { 3 }));
        e.extend(w32(1));
        if is64 {
            e.extend(w64(0)); // entry
            e.extend(w64(ehsize as u64)); // phoff
            e.extend(w64(0)); // shoff
        } else {
            e.extend(w32(0));
            e.extend(w32(ehsize as u32));
            e.extend(w32(0));
        }
        e.extend(w32(0)); // flags
        e.extend(w16(ehsize as u16));
        e.extend(w16(phentsize as u16));
        e.extend(w16(1)); // phnum
        e.extend(w16(0));
        e.extend(w16(0));
        e.extend(w16(0));
        assert_eq!(e.len(), ehsize);
        if is64 {
            e.extend(w32(PT_NOTE));
            e.extend(w32(4));
            e.extend(w64(note_off as u64));
            e.extend(w64(0));
            e.extend(w64(0));
            e.extend(w64(note.len() as u64));
            e.extend(w64(note.len() as u64));
            e.extend(w64(4));
        } else {
            e.extend(w32(PT_NOTE));
            e.extend(w32(note_off as u32));
            e.extend(w32(0));
            e.extend(w32(0));
            e.extend(w32(note.len() as u32));
            e.extend(w32(note.len() as u32));
            e.extend(w32(4));
            e.extend(w32(4));
        }
        e.extend(note);
        e
    }

    /// 32/64-bit and little/big-endian ELF files all yield their build-id.
    #[test]
    fn parse_elf_build_id_all_classes_and_endians() {
        let bid: Vec<u8> = (1..=20).collect();
        for is64 in [false, true] {
            for be in [false, true] {
                let elf = tiny_elf(is64, be, &bid);
                assert_eq!(
                    elf_build_id_from(&mut Cursor::new(elf)),
                    Some(bid.clone()),
                    "{is64} {be}"
                );
            }
        }
    }

    /// Truncated and corrupted ELF images give `None` instead of panicking.
    #[test]
    fn parse_elf_build_id_malformed_none() {
        let elf = tiny_elf(true, false, &[7; 20]);
        for n in 0..elf.len() {
            let _ = elf_build_id_from(&mut Cursor::new(elf[..n].to_vec()));
        }
        for i in 0..elf.len() {
            let mut bad = elf.clone();
            bad[i] = bad[i].wrapping_add(0x80);
            let _ = elf_build_id_from(&mut Cursor::new(bad));
        }
        assert_eq!(
            elf_build_id_from(&mut Cursor::new(b"not an elf".to_vec())),
            None
        );
    }

    /// A real ELF on this system (the test binary itself) has a build-id readelf would show.
    #[test]
    fn parse_elf_build_id_running_binary() {
        let exe = std::env::current_exe().unwrap();
        let bid = elf_build_id(&exe).unwrap();
        assert!(bid.is_none_or(|b| b.len() >= 8));
    }
}
