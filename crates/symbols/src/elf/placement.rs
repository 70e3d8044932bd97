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

/// How one relocation computes its value: the kinds the debug sections (and a 32-bit Arm
/// module's `.debug_frame`, `.ARM.exidx`) of a relocatable file carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `S + A` into a field of 32 or 64 bits.
    Absolute(u8),
    /// Arm `R_ARM_REL32`: `S + A - P` into 32 bits.
    ArmRel32,
    /// Arm `R_ARM_PREL31` (`.ARM.exidx`): `S + A - P` into the low 31 bits, bit 31 kept.
    ArmPrel31,
}

impl How {
    /// The rule of `rel`; `None` for the kinds left alone.
    fn of(rel: &object::Relocation, arm: bool) -> Option<Self> {
        use object::{RelocationFlags, RelocationKind};
        match (rel.kind(), rel.size()) {
            (RelocationKind::Absolute, 32) => return Some(Self::Absolute(32)),
            (RelocationKind::Absolute, 64) => return Some(Self::Absolute(64)),
            _ => {}
        }
        // object classifies only R_ARM_ABS32 of the Arm ones.
        match rel.flags() {
            RelocationFlags::Elf { r_type } if arm => match r_type {
                object::elf::R_ARM_REL32 => Some(Self::ArmRel32),
                object::elf::R_ARM_PREL31 => Some(Self::ArmPrel31),
                _ => None,
            },
            _ => None,
        }
    }

    fn width(self) -> usize {
        match self {
            Self::Absolute(64) => 8,
            _ => 4,
        }
    }

    /// The addend a REL relocation keeps in the field itself (`old`), sign-extended.
    fn implicit_addend(self, old: u64) -> i64 {
        match self {
            Self::Absolute(64) => old as i64,
            Self::ArmPrel31 => i64::from(((old as u32) << 1) as i32 >> 1),
            _ => i64::from(old as u32 as i32),
        }
    }

    /// The new contents of the field: `s` the target, `a` the addend, `p` the field's
    /// address, `old` its contents before.
    fn value(self, s: u64, a: i64, p: u64, old: u64) -> u64 {
        let sa = s.wrapping_add(a as u64);
        match self {
            Self::Absolute(_) => sa,
            Self::ArmRel32 => sa.wrapping_sub(p),
            Self::ArmPrel31 => (sa.wrapping_sub(p) & 0x7fff_ffff) | (old & 0x8000_0000),
        }
    }
}

/// The address a relocation of `obj` refers to, with sections at `addrs`; `None` for a
/// target that cannot be resolved.
fn target_address(
    obj: &object::File<'_>,
    target: RelocationTarget,
    addrs: &SectionAddrs,
) -> Option<u64> {
    Some(match target {
        RelocationTarget::Symbol(i) => {
            let sym = obj.symbol_by_index(i).ok()?;
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
        _ => return None,
    })
}

/// The `width`-byte field at `off` of `data`, `None` past its end.
fn read_field(data: &[u8], off: usize, width: usize, little: bool) -> Option<u64> {
    let b = data.get(off..off.checked_add(width)?)?;
    let mut v = [0u8; 8];
    if little {
        v[..width].copy_from_slice(b);
        Some(u64::from_le_bytes(v))
    } else {
        v[8 - width..].copy_from_slice(b);
        Some(u64::from_be_bytes(v))
    }
}

/// Writes the low `width` bytes of `value` at `off` of `data` (checked by [`read_field`]).
fn write_field(data: &mut [u8], off: usize, width: usize, little: bool, value: u64) {
    let Some(dst) = off
        .checked_add(width)
        .and_then(|end| data.get_mut(off..end))
    else {
        return;
    };
    if little {
        dst.copy_from_slice(&value.to_le_bytes()[..width]);
    } else {
        dst.copy_from_slice(&value.to_be_bytes()[8 - width..]);
    }
}

/// Applies the relocations of `sec` to its contents `data`, with symbols and sections at
/// `addrs`: absolute ones of 32 and 64 bits for every architecture, and Arm's pc-relative
/// `R_ARM_REL32` and `R_ARM_PREL31`. A REL relocation (32-bit Arm, i386) takes its addend
/// from the field, a RELA one from the entry. Relocations of other kinds, sizes or targets
/// are left alone, and so are ones that point outside `data`, and pc-relative ones in a
/// section that was not placed: they cannot fail.
pub(super) fn relocate(
    obj: &object::File<'_>,
    sec: &object::Section<'_, '_>,
    mut data: Vec<u8>,
    addrs: &SectionAddrs,
) -> Vec<u8> {
    let little = obj.is_little_endian();
    let arm = obj.architecture() == object::Architecture::Arm;
    // Where the field of a pc-relative relocation is; debug sections sit at 0.
    let place = addrs.get(&sec.index()).copied();
    for (offset, rel) in sec.relocations() {
        let Some(how) = How::of(&rel, arm) else {
            continue;
        };
        let Some(target) = target_address(obj, rel.target(), addrs) else {
            continue;
        };
        let (Ok(off), width) = (usize::try_from(offset), how.width()) else {
            continue;
        };
        let Some(old) = read_field(&data, off, width, little) else {
            continue;
        };
        let p = match (how, place) {
            (How::Absolute(_), _) => 0,
            (_, Some(Some(base))) => base.wrapping_add(offset),
            _ => continue,
        };
        let addend = if rel.has_implicit_addend() {
            how.implicit_addend(old)
        } else {
            rel.addend()
        };
        write_field(
            &mut data,
            off,
            width,
            little,
            how.value(target, addend, p, old),
        );
    }
    data
}
