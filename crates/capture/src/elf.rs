//! The ELF file header, as the agent (build-ids of mapped files) and kprofctl (can this agent
//! binary run on the board?) both read it: identification, type and machine, and where the
//! program and section header tables are. Bounds-checked: short or malformed input is an
//! error or `None`, never a panic.

use crate::bytes::{u16_at, u32_at, u64_at};

/// The smallest ELF header (32-bit); a 64-bit one is 64 bytes.
pub const MIN_HEADER_LEN: usize = 52;

/// The identification, type and machine of an ELF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfHeader {
    /// `ELFCLASS64`.
    pub is_64: bool,
    /// `ELFDATA2MSB`.
    pub big_endian: bool,
    /// `e_type` (2 executable, 3 shared object or PIE).
    pub e_type: u16,
    /// `e_machine`.
    pub machine: u16,
}

/// Why bytes are not an ELF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfHeaderError {
    /// Shorter than [`MIN_HEADER_LEN`] or without the `\x7fELF` magic.
    NotElf,
    /// `EI_CLASS` neither 1 (32-bit) nor 2 (64-bit): the value.
    Class(u8),
    /// `EI_DATA` neither 1 (little) nor 2 (big endian): the value.
    ByteOrder(u8),
}

/// Where a header table is: `e_phoff`/`e_phentsize`/`e_phnum` or the `e_sh*` ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderTable {
    /// File offset of the first entry.
    pub offset: u64,
    /// Size of one entry.
    pub entsize: u16,
    /// Number of entries.
    pub count: u16,
}

impl ElfHeader {
    /// Reads the identification, `e_type` and `e_machine` from the start of `b`.
    pub fn parse(b: &[u8]) -> Result<ElfHeader, ElfHeaderError> {
        if b.len() < MIN_HEADER_LEN || &b[..4] != b"\x7fELF" {
            return Err(ElfHeaderError::NotElf);
        }
        let is_64 = match b[4] {
            1 => false,
            2 => true,
            c => return Err(ElfHeaderError::Class(c)),
        };
        let big_endian = match b[5] {
            1 => false,
            2 => true,
            d => return Err(ElfHeaderError::ByteOrder(d)),
        };
        // Both within MIN_HEADER_LEN.
        let e_type = u16_at(b, 16, big_endian).ok_or(ElfHeaderError::NotElf)?;
        let machine = u16_at(b, 18, big_endian).ok_or(ElfHeaderError::NotElf)?;
        Ok(ElfHeader {
            is_64,
            big_endian,
            e_type,
            machine,
        })
    }

    /// An address-sized field (`Elf32_Off`/`Elf64_Off`...) at `o32` or `o64` in `b`.
    pub fn word(&self, b: &[u8], o32: usize, o64: usize) -> Option<u64> {
        if self.is_64 {
            u64_at(b, o64, self.big_endian)
        } else {
            u32_at(b, o32, self.big_endian).map(u64::from)
        }
    }

    /// The program header table of the header `b`; `None` when `b` is too short (a 64-bit
    /// header cut at 52 bytes).
    pub fn program_headers(&self, b: &[u8]) -> Option<HeaderTable> {
        let (at_size, at_count) = if self.is_64 { (54, 56) } else { (42, 44) };
        Some(HeaderTable {
            offset: self.word(b, 28, 32)?,
            entsize: u16_at(b, at_size, self.big_endian)?,
            count: u16_at(b, at_count, self.big_endian)?,
        })
    }

    /// The section header table of the header `b`; `None` when `b` is too short.
    pub fn section_headers(&self, b: &[u8]) -> Option<HeaderTable> {
        let (at_size, at_count) = if self.is_64 { (58, 60) } else { (46, 48) };
        Some(HeaderTable {
            offset: self.word(b, 32, 40)?,
            entsize: u16_at(b, at_size, self.big_endian)?,
            count: u16_at(b, at_count, self.big_endian)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, data: u8, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = class;
        b[5] = data;
        b
    }

    /// A 64-bit little-endian header: type, machine and both tables.
    #[test]
    fn parses_64_bit_little_endian() {
        let mut b = header(2, 1, 64);
        b[16] = 3;
        b[18] = 183;
        b[32] = 64; // e_phoff
        b[40] = 0x10; // e_shoff
        b[41] = 0x20;
        b[54] = 56; // e_phentsize
        b[56] = 9; // e_phnum
        b[58] = 64; // e_shentsize
        b[60] = 30; // e_shnum
        let h = ElfHeader::parse(&b).unwrap();
        assert_eq!(
            h,
            ElfHeader {
                is_64: true,
                big_endian: false,
                e_type: 3,
                machine: 183
            }
        );
        let t = |offset, entsize, count| HeaderTable {
            offset,
            entsize,
            count,
        };
        assert_eq!(h.program_headers(&b), Some(t(64, 56, 9)));
        assert_eq!(h.section_headers(&b), Some(t(0x2010, 64, 30)));
        // Cut at the 32-bit size: the identification reads, the tables do not.
        assert_eq!(ElfHeader::parse(&b[..52]), Ok(h));
        assert_eq!(h.program_headers(&b[..52]), None);
        assert_eq!(h.section_headers(&b[..52]), None);
    }

    /// A 32-bit big-endian header.
    #[test]
    fn parses_32_bit_big_endian() {
        let mut b = header(1, 2, 52);
        b[17] = 2;
        b[19] = 8;
        b[31] = 52; // e_phoff
        b[35] = 0x80; // e_shoff
        b[43] = 32; // e_phentsize
        b[45] = 4; // e_phnum
        b[47] = 40; // e_shentsize
        b[49] = 12; // e_shnum
        let h = ElfHeader::parse(&b).unwrap();
        assert_eq!(
            (h.is_64, h.big_endian, h.e_type, h.machine),
            (false, true, 2, 8)
        );
        let p = h.program_headers(&b).unwrap();
        assert_eq!((p.offset, p.entsize, p.count), (52, 32, 4));
        let s = h.section_headers(&b).unwrap();
        assert_eq!((s.offset, s.entsize, s.count), (0x80, 40, 12));
    }

    /// Short input, a wrong magic, class or byte order are refused with the reason.
    #[test]
    fn refuses_what_is_not_elf() {
        assert_eq!(ElfHeader::parse(&[]), Err(ElfHeaderError::NotElf));
        assert_eq!(
            ElfHeader::parse(&header(2, 1, 51)),
            Err(ElfHeaderError::NotElf)
        );
        let mut b = header(2, 1, 64);
        b[0] = 0;
        assert_eq!(ElfHeader::parse(&b), Err(ElfHeaderError::NotElf));
        assert_eq!(
            ElfHeader::parse(&header(3, 1, 64)),
            Err(ElfHeaderError::Class(3))
        );
        assert_eq!(
            ElfHeader::parse(&header(2, 0, 64)),
            Err(ElfHeaderError::ByteOrder(0))
        );
    }
}
