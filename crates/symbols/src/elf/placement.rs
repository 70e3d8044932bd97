//! Where the sections of a relocatable file (a `.ko`) go: the load addresses recorded on
//! the board, and the relocations of its debug sections applied against them.

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex};
use std::collections::HashMap;

/// Section name → load address, for relocatable modules.
pub type Placement = HashMap<String, u64>;

/// Each section's address in a relocatable file (`None`: allocated but not placed); empty
/// for executables.
pub(crate) type SectionAddrs = HashMap<SectionIndex, Option<u64>>;

pub(super) fn is_alloc(sec: &object::Section<'_, '_>) -> bool {
    matches!(sec.flags(), object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0)
}

/// For a relocatable file: each section's address (`Some(None)` = allocated but not placed).
/// Empty for executables, whose sections keep their link-time addresses.
pub(super) fn section_addresses(
    obj: &object::File<'_>,
    placement: Option<&Placement>,
) -> SectionAddrs {
    let mut out = HashMap::new();
    let Some(placement) = placement else {
        return out;
    };
    for sec in obj.sections() {
        let name = sec.name().unwrap_or("");
        let addr = if is_alloc(&sec) {
            placement.get(name).copied()
        } else {
            // Debug sections refer to each other by offset: they sit at 0.
            Some(0)
        };
        out.insert(sec.index(), addr);
    }
    out
}

/// Applies the absolute relocations of `sec` to its contents `data`, with symbols and
/// sections at `addrs`. Relocations of other kinds, sizes or targets are left alone, and so
/// are ones that point outside `data`: they cannot fail.
pub(super) fn relocate(
    obj: &object::File<'_>,
    sec: &object::Section<'_, '_>,
    mut data: Vec<u8>,
    addrs: &SectionAddrs,
) -> Vec<u8> {
    let little = obj.is_little_endian();
    for (offset, rel) in sec.relocations() {
        let target = match rel.target() {
            RelocationTarget::Symbol(i) => {
                let Ok(sym) = obj.symbol_by_index(i) else {
                    continue;
                };
                match sym.section_index() {
                    Some(si) => match addrs.get(&si) {
                        Some(Some(base)) => base.wrapping_add(sym.address()),
                        // A section that was not loaded (e.g. `.exit.text`): leave it at 0.
                        _ => sym.address(),
                    },
                    None => sym.address(),
                }
            }
            RelocationTarget::Section(si) => addrs.get(&si).copied().flatten().unwrap_or(0),
            RelocationTarget::Absolute => 0,
            _ => continue,
        };
        if rel.kind() != object::RelocationKind::Absolute {
            continue;
        }
        let value = target.wrapping_add(rel.addend() as u64);
        let off = offset as usize;
        match rel.size() {
            64 => {
                let b = if little {
                    value.to_le_bytes()
                } else {
                    value.to_be_bytes()
                };
                if let Some(dst) = off.checked_add(8).and_then(|end| data.get_mut(off..end)) {
                    dst.copy_from_slice(&b);
                }
            }
            32 => {
                let v = value as u32;
                let b = if little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                if let Some(dst) = off.checked_add(4).and_then(|end| data.get_mut(off..end)) {
                    dst.copy_from_slice(&b);
                }
            }
            _ => {}
        }
    }
    data
}
