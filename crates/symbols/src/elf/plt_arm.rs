//! Names of the PLT entries of 32-bit Arm files (`NAME@plt`), as perf and objdump give them.

use super::symtab::{Names, Sym};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};
use std::collections::HashMap;

/// `NAME@plt` for each entry of `.plt`, matched to its `.rel.plt` relocation by the GOT slot
/// its code loads. An entry is binutils' `add ip, pc, #A; add ip, ip, #B; ldr pc, [ip, #C]!`
/// (or the `--long-plt` form with one more `add`), with a 4-byte Thumb stub (`bx pc`) before
/// it when Thumb code calls it without `blx`; the header before the first entry and anything
/// else is skipped word by word. Little-endian files only, as for the other architectures.
pub(super) fn plt_symbols(obj: &object::File<'_>, names: &mut Names) -> Vec<Sym> {
    if !obj.is_little_endian() {
        return Vec::new();
    }
    let by_slot = jump_slots(obj);
    let Some(plt) = obj.section_by_name(".plt") else {
        return Vec::new();
    };
    let Ok(code) = plt.data() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 12 <= code.len() {
        let addr = plt.address() + off as u64;
        let Some((len, slot)) = plt_entry(&code[off..], addr) else {
            off += 4;
            continue;
        };
        if let Some(name) = by_slot.get(&slot) {
            let name = format!("{name}@plt");
            out.extend(Sym::new(
                addr,
                len as u64,
                names.own(&name),
                &name,
                (false, true),
            ));
        }
        off += len;
    }
    out
}

/// GOT slot → symbol name of each `.rel.plt` entry (REL: `r_offset`, `r_info`, 4 bytes each);
/// an empty name for one without a symbol (`R_ARM_IRELATIVE`).
fn jump_slots(obj: &object::File<'_>) -> HashMap<u64, String> {
    let Some(data) = obj.section_by_name(".rel.plt").and_then(|s| s.data().ok()) else {
        return HashMap::new();
    };
    let dynsym = obj.dynamic_symbol_table();
    let mut by_slot = HashMap::new();
    for entry in data.chunks_exact(8) {
        let word = |at: usize| {
            u32::from_le_bytes([entry[at], entry[at + 1], entry[at + 2], entry[at + 3]])
        };
        let sym = (word(4) >> 8) as usize;
        let name = match (sym, &dynsym) {
            (0, _) | (_, None) => String::new(),
            (i, Some(t)) => t
                .symbol_by_index(object::SymbolIndex(i))
                .ok()
                .and_then(|s| s.name().ok().map(str::to_owned))
                .unwrap_or_default(),
        };
        by_slot.insert(u64::from(word(0)), name);
    }
    by_slot
}

/// The A32 modified immediate of a data-processing instruction: 8 bits rotated right by
/// twice the 4-bit rotation.
fn modified_immediate(insn: u32) -> u32 {
    (insn & 0xff).rotate_right(2 * ((insn >> 8) & 0xf))
}

/// The length of the PLT entry at the start of `code` (at `addr`), with its Thumb stub, and
/// the GOT slot it jumps through; `None` when no entry starts there.
fn plt_entry(code: &[u8], addr: u64) -> Option<(usize, u64)> {
    let word = |at: usize| {
        let b = code.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    // `bx pc` then `nop` or a branch back: the switch to Arm of an old Thumb caller.
    let stub = if word(0)? & 0xffff == 0x4778 { 4 } else { 0 };
    let first = word(stub)?;
    // `add ip, pc, #imm`: pc reads as the instruction's address + 8.
    if first & 0xffff_f000 != 0xe28f_c000 {
        return None;
    }
    let mut slot = (addr as u32)
        .wrapping_add(stub as u32 + 8)
        .wrapping_add(modified_immediate(first));
    let mut at = stub + 4;
    // One `add ip, ip, #imm` (two with --long-plt), then `ldr pc, [ip, #imm]!`.
    while at < stub + 12 && word(at)? & 0xffff_f000 == 0xe28c_c000 {
        slot = slot.wrapping_add(modified_immediate(word(at)?));
        at += 4;
    }
    let ldr = word(at)?;
    if at == stub + 4 || ldr & 0xffff_f000 != 0xe5bc_f000 {
        return None;
    }
    Some((at + 4, u64::from(slot.wrapping_add(ldr & 0xfff))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// binutils' entry forms reach their GOT slot: short, long, after a Thumb stub; other
    /// code, the PLT header and a cut entry are no entry.
    #[test]
    fn plt_entry_arm32_forms() {
        let bytes = |words: &[u32]| {
            words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<_>>()
        };
        // libc.so.6 (armhf): `raise@plt` at 0x1ded8 loads 0x1ded8 + 8 + 0xee000 + 0x12c.
        let short = bytes(&[0xe28f_c600, 0xe28c_caee, 0xe5bc_f12c]);
        assert_eq!(
            plt_entry(&short, 0x1ded8),
            Some((12, 0x1ded8 + 8 + 0xee000 + 0x12c))
        );
        let stub = bytes(&[0xe7fd_4778, 0xe28f_c600, 0xe28c_caee, 0xe5bc_f120]);
        assert_eq!(
            plt_entry(&stub, 0x1dee4),
            Some((16, 0x1dee4 + 12 + 0xee000 + 0x120))
        );
        // --long-plt: add ip, pc, #0x10000000; add ip, ip, #0x200000; add ip, ip, #0x3000.
        let long = bytes(&[0xe28f_c201, 0xe28c_c602, 0xe28c_ca03, 0xe5bc_f004]);
        assert_eq!(
            plt_entry(&long, 0x1000),
            Some((16, 0x1000 + 8 + 0x1000_0000 + 0x20_0000 + 0x3000 + 4))
        );
        // The header: push {lr}; ldr lr, [pc, #4]; add lr, pc, lr; ldr pc, [lr, #8]!
        let header = bytes(&[0xe52d_e004, 0xe59f_e004, 0xe08f_e00e, 0xe5be_f008]);
        assert_eq!(plt_entry(&header, 0), None);
        assert_eq!(plt_entry(&short[..8], 0), None, "cut short");
        let no_add = bytes(&[0xe28f_c600, 0xe5bc_f12c, 0]);
        assert_eq!(plt_entry(&no_add, 0), None);
    }
}
