//! Where the bytes of a symbol file are in memory: its PT_LOAD segments (file offset to
//! address), its code sections (for disassembly) and, for a relocatable file, the sections
//! as placed.

use super::placement::{is_alloc, SectionAddrs};
use object::{Object, ObjectSection, ObjectSegment};

/// An executable section: where its bytes are in the file and where they are in memory.
#[derive(Debug, Clone, Copy)]
struct Code {
    addr: u64,
    file_offset: usize,
    len: usize,
}

/// The address layout of one file.
#[derive(Debug, Default)]
pub(super) struct Layout {
    /// `(file offset, vaddr, file size)` of each PT_LOAD segment.
    segments: Vec<(u64, u64, u64)>,
    code: Vec<Code>,
    /// Allocated sections of a relocatable file with the address they were placed at and size.
    placed: Vec<(String, u64, u64)>,
}

impl Layout {
    /// The layout of `obj`, its sections at `section_addr` when it is `relocatable`.
    pub(super) fn of(
        obj: &object::File<'_>,
        section_addr: &SectionAddrs,
        relocatable: bool,
    ) -> Self {
        let mut out = Self::default();
        for seg in obj.segments() {
            let (off, size) = seg.file_range();
            if size > 0 {
                out.segments.push((off, seg.address(), size));
            }
        }
        for sec in obj.sections() {
            let addr = match section_addr.get(&sec.index()) {
                Some(Some(a)) => *a,
                Some(None) => continue,
                None => sec.address(),
            };
            if relocatable && is_alloc(&sec) {
                out.placed
                    .push((sec.name().unwrap_or("").to_string(), addr, sec.size()));
            }
            if sec.kind() == object::SectionKind::Text {
                if let Some((off, len)) = sec.file_range() {
                    out.code.push(Code {
                        addr,
                        file_offset: off as usize,
                        len: len as usize,
                    });
                }
            }
        }
        out
    }

    /// A file offset (from MMAP2 `pgoff`) as an address of the file.
    pub(super) fn offset_to_address(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, _, size)| offset >= *off && offset < off.saturating_add(*size))
            .map(|(off, vaddr, _)| vaddr.wrapping_add(offset - off))
    }

    /// Converts an address of this file to the file offset a PT_LOAD segment maps it from.
    pub(super) fn address_to_offset(&self, addr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(_, vaddr, size)| addr >= *vaddr && addr < vaddr.saturating_add(*size))
            .map(|(off, vaddr, _)| off + (addr - vaddr))
    }

    /// Whether `addr` falls into one of the placed sections.
    pub(super) fn contains_placed(&self, addr: u64) -> bool {
        self.placed
            .iter()
            .any(|(_, a, s)| addr >= *a && addr < a.saturating_add(*s))
    }

    /// The file range of the code at `[start, end)`, when one code section covers it.
    pub(super) fn code_range(&self, start: u64, end: u64) -> Option<std::ops::Range<usize>> {
        let c = self.code.iter().find(|c| {
            start <= end
                && start >= c.addr
                && c.addr
                    .checked_add(c.len as u64)
                    .is_some_and(|c_end| end <= c_end)
        })?;
        // Offsets and sizes come from the file: checked, a bad one is "no code".
        let from = c
            .file_offset
            .checked_add(usize::try_from(start - c.addr).ok()?)?;
        let to = from.checked_add(usize::try_from(end - start).ok()?)?;
        Some(from..to)
    }
}
