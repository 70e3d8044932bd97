//! addr2line parses a function's inlined calls recursively, one call per level of DIE
//! nesting, with no limit: a symbol file with a few hundred KB of nested
//! `DW_TAG_inlined_subroutine`s overflows the stack and aborts kprofctl. Before a lookup that
//! parses functions (inline frames, a declaration), the compilation units whose ranges cover
//! the address are scanned once for their deepest nesting; a unit deeper than
//! [`MAX_DIE_DEPTH`] is not handed to addr2line (its addresses get the symbol table's name
//! and the line table's line, which parse without recursion).

use super::dwarf::Reader;
use std::cell::RefCell;

/// The deepest DIE nesting a unit may have. Real code stays far below (GCC and Clang output
/// of the kernel and of C++ template code nests a few dozen levels); addr2line's recursion
/// uses well under 1 KiB of stack per level, so this fits any thread's stack.
pub const MAX_DIE_DEPTH: isize = 256;

/// The units of one file's DWARF by address, and what their scan found.
pub(super) struct DepthGuard {
    dwarf: gimli::Dwarf<Reader>,
    /// `(begin, end, unit)`: the ranges of each unit's root DIE, sorted.
    ranges: Vec<(u64, u64, usize)>,
    /// `max_end[i]`: the largest `end` of `ranges[..=i]`, so that a lookup stops going back
    /// once nothing earlier can reach the address.
    max_end: Vec<u64>,
    units: Vec<gimli::UnitHeader<Reader>>,
    /// Per unit: `None` until scanned, then whether it nests within [`MAX_DIE_DEPTH`].
    verdict: RefCell<Vec<Option<bool>>>,
}

impl DepthGuard {
    /// Indexes the units of `dwarf` (a second load of the sections addr2line gets: it keeps
    /// its own) by the ranges of their root DIEs; no DIE below a root is read here.
    pub(super) fn new(dwarf: gimli::Dwarf<Reader>) -> Self {
        let mut ranges = Vec::new();
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            let Ok(unit) = dwarf.unit(header.clone()) else {
                continue;
            };
            let index = units.len();
            if let Ok(mut iter) = dwarf.unit_ranges(&unit) {
                while let Ok(Some(r)) = iter.next() {
                    if r.begin < r.end {
                        ranges.push((r.begin, r.end, index));
                    }
                }
            }
            units.push(header);
        }
        ranges.sort_unstable();
        let max_end = ranges
            .iter()
            .scan(0u64, |m, r| {
                *m = (*m).max(r.1);
                Some(*m)
            })
            .collect();
        let verdict = RefCell::new(vec![None; units.len()]);
        Self {
            dwarf,
            ranges,
            max_end,
            units,
            verdict,
        }
    }

    /// Whether addr2line may parse the functions of the units covering `addr`: some unit
    /// covers it, and every one that does nests within [`MAX_DIE_DEPTH`].
    pub(super) fn allows(&self, addr: u64) -> bool {
        let mut covered = false;
        let first_after = self.ranges.partition_point(|r| r.0 <= addr);
        for i in (0..first_after).rev() {
            if self.max_end[i] <= addr {
                break;
            }
            let (_, end, unit) = self.ranges[i];
            if addr < end {
                covered = true;
                if !self.unit_ok(unit) {
                    return false;
                }
            }
        }
        covered
    }

    /// Units over [`MAX_DIE_DEPTH`] found so far (for the warning).
    pub(super) fn too_deep(&self) -> usize {
        self.verdict
            .borrow()
            .iter()
            .filter(|v| **v == Some(false))
            .count()
    }

    fn unit_ok(&self, unit: usize) -> bool {
        if let Some(v) = self.verdict.borrow().get(unit).copied().flatten() {
            return v;
        }
        let ok = self.units.get(unit).is_some_and(|h| self.scan(h));
        if let Some(v) = self.verdict.borrow_mut().get_mut(unit) {
            *v = Some(ok);
        }
        ok
    }

    /// Walks the unit's DIEs (attributes skipped, nothing kept): false when one nests deeper
    /// than [`MAX_DIE_DEPTH`] or the unit does not parse.
    fn scan(&self, header: &gimli::UnitHeader<Reader>) -> bool {
        let Ok(abbrevs) = self.dwarf.abbreviations(header) else {
            return false;
        };
        let Ok(mut entries) = header.entries_raw(&abbrevs, None) else {
            return false;
        };
        while !entries.is_empty() {
            if entries.next_depth() > MAX_DIE_DEPTH {
                return false;
            }
            match entries.read_abbreviation() {
                Ok(Some(abbrev)) => {
                    if entries.skip_attributes(abbrev.attributes()).is_err() {
                        return false;
                    }
                }
                Ok(None) => {}
                Err(_) => return false,
            }
        }
        true
    }
}
