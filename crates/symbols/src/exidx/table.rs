//! `.ARM.exidx` (the sorted index: function start, unwind entry) and `.ARM.extab` (the
//! entries too long to be inline) of one image, read from bytes the caller has, with every
//! offset and length checked.

use super::ExidxError;
use object::{Object, ObjectSection, ObjectSegment};

/// `EXIDX_CANTUNWIND`: the function cannot be unwound (a root such as `_start`).
pub const EXIDX_CANTUNWIND: u32 = 1;
/// Entries read at most: a table larger than this is not a real image's.
const MAX_ENTRIES: usize = 1 << 22;
/// `PT_ARM_EXIDX`, the program header of `.ARM.exidx` (kept in a binary without sections).
const PT_ARM_EXIDX: u32 = 0x7000_0001;

/// The unwind sections of one image, as read by the caller (file addresses).
#[derive(Debug, Clone, Default)]
pub struct ExidxSections {
    /// Address and bytes of `.ARM.exidx`.
    pub exidx: (u32, Vec<u8>),
    /// Address and bytes of `.ARM.extab` (none when every entry is inline).
    pub extab: Option<(u32, Vec<u8>)>,
    /// The end of the image's code: the last entry covers up to here.
    pub text_end: u32,
}

/// How a function is unwound, from its index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// `EXIDX_CANTUNWIND`.
    CantUnwind,
    /// A compact model (personality routine `index`: 0 = Su16, 1 = Lu16, 2 = Lu32), inline or
    /// in `.ARM.extab`, with its opcode bytes.
    Compact {
        /// `__aeabi_unwind_cpp_pr<index>`.
        index: u8,
        /// The unwind opcodes.
        ops: Vec<u8>,
    },
    /// A generic personality routine (`__gxx_personality_v0`, `__gcc_personality_v0`) at
    /// `personality`, followed by opcodes in GCC's layout (a word count, then opcode bytes).
    Generic {
        /// Address of the personality routine.
        personality: u32,
        /// The unwind opcodes.
        ops: Vec<u8>,
    },
}

impl EntryKind {
    /// The opcode bytes (none for `CantUnwind`).
    pub fn ops(&self) -> &[u8] {
        match self {
            EntryKind::CantUnwind => &[],
            EntryKind::Compact { ops, .. } | EntryKind::Generic { ops, .. } => ops,
        }
    }
}

/// The entry of the function containing an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Start of the function (file address).
    pub function: u32,
    /// How to unwind it.
    pub kind: EntryKind,
}

/// One parsed index entry: the function start and the second word and its address.
#[derive(Debug, Clone, Copy)]
struct Raw {
    function: u32,
    word: u32,
    word_addr: u32,
}

/// The EXIDX table of one image, sorted by function address.
#[derive(Debug, Clone)]
pub struct ExidxTable {
    entries: Vec<Raw>,
    extab: Option<(u32, Vec<u8>)>,
    text_end: u32,
}

/// `prel31` at `place`: a 31-bit signed offset from the word's own address.
fn prel31(place: u32, word: u32) -> u32 {
    let offset = ((word << 1) as i32) >> 1;
    place.wrapping_add(offset as u32)
}

impl ExidxTable {
    /// Reads the index; an error when `.ARM.exidx` is not whole 8-byte entries, is too
    /// large, or an entry's first word has bit 31 set.
    pub fn new(s: ExidxSections) -> Result<Self, ExidxError> {
        let (addr, bytes) = s.exidx;
        if bytes.len() % 8 != 0 {
            return Err(ExidxError::IndexTruncated { len: bytes.len() });
        }
        if bytes.len() / 8 > MAX_ENTRIES {
            return Err(ExidxError::IndexTooLarge { len: bytes.len() });
        }
        let mut entries = Vec::with_capacity(bytes.len() / 8);
        for (i, e) in bytes.chunks_exact(8).enumerate() {
            let w0 = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let word = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            // `i * 8` fits: the length was bounded above.
            let place = addr.wrapping_add((i * 8) as u32);
            if w0 & 0x8000_0000 != 0 {
                return Err(ExidxError::BadIndexWord {
                    at: place,
                    word: w0,
                });
            }
            entries.push(Raw {
                function: prel31(place, w0),
                word,
                word_addr: place.wrapping_add(4),
            });
        }
        // The linker sorts the index; a damaged one is sorted here so that lookups stay
        // a binary search.
        entries.sort_by_key(|e| e.function);
        Ok(Self {
            entries,
            extab: s.extab,
            text_end: s.text_end,
        })
    }

    /// The EXIDX table of a 32-bit Arm ELF file from its bytes: the `.ARM.exidx` and
    /// `.ARM.extab` sections, or the `PT_ARM_EXIDX` segment of a file without sections.
    /// `Ok(None)` when the file has no EXIDX (another architecture, none emitted, or a split
    /// debug file where it is NOBITS).
    pub fn from_elf(data: &[u8]) -> Result<Option<Self>, ExidxError> {
        let obj = object::File::parse(data).map_err(|e| ExidxError::Elf(e.to_string()))?;
        Self::from_object(&obj, Some(data))
    }

    /// [`ExidxTable::from_elf`] of a parsed file; the `PT_ARM_EXIDX` segment of a file
    /// without sections is read only when its bytes `data` are given.
    pub fn from_object(
        obj: &object::File<'_>,
        data: Option<&[u8]>,
    ) -> Result<Option<Self>, ExidxError> {
        if obj.architecture() != object::Architecture::Arm || !obj.is_little_endian() {
            return Ok(None);
        }
        let section = |name: &str| -> Option<(u32, Vec<u8>)> {
            let sec = obj.section_by_name(name)?;
            let data = sec.uncompressed_data().ok()?;
            let addr = u32::try_from(sec.address()).ok()?;
            (!data.is_empty()).then(|| (addr, data.into_owned()))
        };
        // A split debug file (`objcopy --only-keep-debug`) has `.ARM.exidx` as NOBITS and
        // a PT_ARM_EXIDX header whose file bytes are not the table: the program header is
        // only read in a file without that section.
        let exidx = match obj.section_by_name(".ARM.exidx") {
            Some(_) => section(".ARM.exidx"),
            None => data.and_then(exidx_segment),
        };
        let Some(exidx) = exidx else {
            return Ok(None);
        };
        Self::new(ExidxSections {
            exidx,
            extab: section(".ARM.extab"),
            text_end: text_end(obj),
        })
        .map(Some)
    }

    /// Number of index entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The start addresses of the indexed functions, in order.
    pub fn functions(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().map(|e| e.function)
    }

    /// The entry of the function containing `addr` (file address): the last entry whose
    /// start is at or below it, the last one covering up to the end of the code. `Ok(None)`
    /// before the first entry or past the end of the code; an error when the entry points
    /// outside `.ARM.extab` or runs past its end.
    pub fn lookup(&self, addr: u32) -> Result<Option<Entry>, ExidxError> {
        let i = self.entries.partition_point(|e| e.function <= addr);
        let Some(i) = i.checked_sub(1) else {
            return Ok(None);
        };
        if i + 1 == self.entries.len() && addr >= self.text_end {
            return Ok(None);
        }
        self.entry(i).map(Some)
    }

    /// The entry at `i` of the sorted index, decoded.
    pub fn entry(&self, i: usize) -> Result<Entry, ExidxError> {
        let raw = *self.entries.get(i).ok_or(ExidxError::NoSuchEntry(i))?;
        let kind = match raw.word {
            EXIDX_CANTUNWIND => EntryKind::CantUnwind,
            w if w & 0x8000_0000 != 0 => inline(raw.word_addr, w)?,
            w => self.extab_entry(prel31(raw.word_addr, w))?,
        };
        Ok(Entry {
            function: raw.function,
            kind,
        })
    }

    /// The word of `.ARM.extab` at `addr`, or where the reference is out of it.
    fn extab_word(&self, addr: u32, entry: u32) -> Result<u32, ExidxError> {
        let out = ExidxError::ExtabOutOfRange { entry, addr };
        let (base, bytes) = self.extab.as_ref().ok_or(out.clone())?;
        let off = addr.checked_sub(*base).ok_or(out.clone())? as usize;
        let w = bytes.get(off..off.checked_add(4).ok_or(out.clone())?);
        let w = w.ok_or(out)?;
        Ok(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    }

    /// The `.ARM.extab` entry at `addr`.
    fn extab_entry(&self, addr: u32) -> Result<EntryKind, ExidxError> {
        let first = self.extab_word(addr, addr)?;
        let (kind_of, header, header_addr) = if first & 0x8000_0000 != 0 {
            let index = ((first >> 24) & 0x0f) as u8;
            if index > 2 {
                return Err(ExidxError::ReservedPersonality { at: addr, index });
            }
            (Some(index), first, addr)
        } else {
            let next = addr.wrapping_add(4);
            (None, self.extab_word(next, addr)?, next)
        };
        // Su16 has its three opcode bytes in the first word; Lu16/Lu32 a count of extra
        // words then two; GCC's layout after a generic routine a count then three.
        let (count, mut ops) = match kind_of {
            Some(0) => (0, header.to_be_bytes()[1..].to_vec()),
            Some(_) => ((header >> 16) & 0xff, header.to_be_bytes()[2..].to_vec()),
            None => (header >> 24, header.to_be_bytes()[1..].to_vec()),
        };
        for k in 1..=count {
            let at = header_addr.wrapping_add(4 * k);
            let w = self
                .extab_word(at, addr)
                .map_err(|_| ExidxError::WordCountPastEnd { at: addr, count })?;
            ops.extend_from_slice(&w.to_be_bytes());
        }
        Ok(match kind_of {
            Some(index) => EntryKind::Compact { index, ops },
            None => EntryKind::Generic {
                personality: prel31(addr, first),
                ops,
            },
        })
    }
}

/// An inline compact entry (bit 31 set): only personality 0 fits in one word.
fn inline(at: u32, w: u32) -> Result<EntryKind, ExidxError> {
    let index = ((w >> 24) & 0x0f) as u8;
    if (w >> 24) & 0x70 != 0 || index != 0 {
        return Err(ExidxError::BadInline { at, word: w });
    }
    Ok(EntryKind::Compact {
        index: 0,
        ops: w.to_be_bytes()[1..].to_vec(),
    })
}

/// `.ARM.exidx` from the `PT_ARM_EXIDX` program header, for a file without sections.
fn exidx_segment(data: &[u8]) -> Option<(u32, Vec<u8>)> {
    use object::read::elf::{ElfFile32, ProgramHeader};
    let elf = ElfFile32::<object::LittleEndian>::parse(data).ok()?;
    let endian = elf.endian();
    let ph = elf
        .elf_program_headers()
        .iter()
        .find(|p| p.p_type(endian) == PT_ARM_EXIDX)?;
    let bytes = ph.data(endian, data).ok()?;
    Some((ph.p_vaddr(endian), bytes.to_vec()))
}

/// The end of the highest executable section (or segment): where the last index entry's
/// function ends at the latest.
fn text_end(obj: &object::File<'_>) -> u32 {
    let sections = obj
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .map(|s| s.address().saturating_add(s.size()))
        .max();
    let end = sections.or_else(|| {
        obj.segments()
            .map(|s| s.address().saturating_add(s.size()))
            .max()
    });
    end.map_or(u32::MAX, |e| u32::try_from(e).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prel(from: u32, to: u32) -> u32 {
        to.wrapping_sub(from) & 0x7fff_ffff
    }

    /// A table at 0x1000 of `entries` (function, word relative to nothing: already encoded),
    /// with `.ARM.extab` at 0x2000.
    fn table(entries: &[(u32, u32)], extab: &[u32]) -> Result<ExidxTable, ExidxError> {
        let mut bytes = Vec::new();
        for (i, (f, w)) in entries.iter().enumerate() {
            let at = 0x1000 + 8 * i as u32;
            bytes.extend_from_slice(&prel(at, *f).to_le_bytes());
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let extab = extab.iter().flat_map(|w| w.to_le_bytes()).collect();
        ExidxTable::new(ExidxSections {
            exidx: (0x1000, bytes),
            extab: Some((0x2000, extab)),
            text_end: 0x9000,
        })
    }

    /// Lookups find the last entry at or below the address, nothing before the first
    /// entry or past the end of the code; the kinds of entry decode with their opcodes.
    #[test]
    fn lookup_exidx_entry_kinds() {
        let to_extab = |i: u32, off: u32| prel(0x1000 + 8 * i + 4, 0x2000 + off);
        let t = table(
            &[
                (0x8000, EXIDX_CANTUNWIND),
                (0x8100, 0x80a8_b0b0),
                (0x8200, to_extab(2, 0)),
                (0x8300, to_extab(3, 8)),
            ],
            &[
                0x8101_9784,
                0x08b0_b0b0,
                prel(0x2008, 0x7000),
                0x0102_a8b0,
                0xb0b0_b0b0,
            ],
        )
        .unwrap();
        assert_eq!(t.lookup(0x7fff).unwrap(), None);
        assert_eq!(
            t.lookup(0x8000).unwrap().unwrap().kind,
            EntryKind::CantUnwind
        );
        let e = t.lookup(0x81fe).unwrap().unwrap();
        assert_eq!(e.function, 0x8100);
        assert_eq!(e.kind.ops(), [0xa8, 0xb0, 0xb0]);
        let e = t.lookup(0x8200).unwrap().unwrap();
        assert_eq!(
            e.kind,
            EntryKind::Compact {
                index: 1,
                ops: vec![0x97, 0x84, 0x08, 0xb0, 0xb0, 0xb0]
            }
        );
        let e = t.lookup(0x8fff).unwrap().unwrap();
        assert_eq!(
            e.kind,
            EntryKind::Generic {
                personality: 0x7000,
                ops: vec![0x02, 0xa8, 0xb0, 0xb0, 0xb0, 0xb0, 0xb0]
            }
        );
        assert_eq!(t.lookup(0x9000).unwrap(), None);
    }

    /// Damaged tables are errors, never a panic or a read out of bounds.
    #[test]
    fn parse_exidx_damaged_tables() {
        let bad = ExidxTable::new(ExidxSections {
            exidx: (0x1000, vec![0; 13]),
            ..Default::default()
        });
        assert!(matches!(bad, Err(ExidxError::IndexTruncated { len: 13 })));
        assert!(matches!(table(&[(0x8000, 1)], &[]).map(|_| ()), Ok(())));
        let mut raw = vec![0u8; 8];
        raw[3] = 0x80;
        let bad = ExidxTable::new(ExidxSections {
            exidx: (0x1000, raw),
            ..Default::default()
        });
        assert!(matches!(bad, Err(ExidxError::BadIndexWord { .. })));
        // A pointer far outside `.ARM.extab`, and one 2 bytes before its end.
        let t = table(
            &[
                (0x8000, prel(0x1004, 0x5000)),
                (0x8100, prel(0x100c, 0x2002)),
            ],
            &[0x8000_b0b0],
        )
        .unwrap();
        assert!(matches!(
            t.lookup(0x8000),
            Err(ExidxError::ExtabOutOfRange { .. })
        ));
        assert!(matches!(
            t.lookup(0x8100),
            Err(ExidxError::ExtabOutOfRange { .. })
        ));
        // Lu16 saying 5 more words where there is one; generic with a count of 255.
        let t = table(
            &[
                (0x8000, prel(0x1004, 0x2000)),
                (0x8100, prel(0x100c, 0x2008)),
            ],
            &[0x8105_b0b0, 0, 0, 0xff00_0000],
        )
        .unwrap();
        assert!(matches!(
            t.lookup(0x8000),
            Err(ExidxError::WordCountPastEnd { count: 5, .. })
        ));
        assert!(matches!(
            t.lookup(0x8100),
            Err(ExidxError::WordCountPastEnd { count: 255, .. })
        ));
        // Inline Lu16 (needs more words than fit) and a reserved personality in extab.
        let t = table(
            &[(0x8000, 0x8100_b0b0), (0x8100, prel(0x100c, 0x2000))],
            &[0x8300_b0b0],
        )
        .unwrap();
        assert!(matches!(
            t.lookup(0x8000),
            Err(ExidxError::BadInline { .. })
        ));
        assert!(matches!(
            t.lookup(0x8100),
            Err(ExidxError::ReservedPersonality { index: 3, .. })
        ));
    }
}
