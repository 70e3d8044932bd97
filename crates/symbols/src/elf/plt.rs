//! Names of PLT entries (`NAME@plt`), as perf gives them.

use super::symtab::{Names, Sym};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};
use std::collections::HashMap;

/// `NAME@plt` for each PLT entry, as perf names them (`@plt` for an entry without a symbol,
/// such as glibc's IRELATIVE ones), so that samples in a PLT are named like perf names them
/// rather than `[unknown]`. An entry is matched to its `.rela.plt` relocation by the GOT slot
/// its code loads (the relocations are not in entry order); entries are 16 bytes, in
/// `.plt.sec` when the file has one (x86-64 with IBT), else in `.plt` after its header.
pub(super) fn plt_symbols(obj: &object::File<'_>, names: &mut Names) -> Vec<Sym> {
    let arch = obj.architecture();
    if arch == object::Architecture::Arm {
        return super::plt_arm::plt_symbols(obj, names);
    }
    let header = match arch {
        object::Architecture::X86_64 => 16,
        object::Architecture::Aarch64 => 32,
        _ => return Vec::new(),
    };
    if !obj.is_64() || !obj.is_little_endian() {
        return Vec::new();
    }
    let Some(rela) = obj.section_by_name(".rela.plt") else {
        return Vec::new();
    };
    let Ok(relocs) = rela.data() else {
        return Vec::new();
    };
    let dynsym = obj.dynamic_symbol_table();
    let mut by_slot = HashMap::new();
    for entry in relocs.chunks_exact(24) {
        let word = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap_or_default());
        let sym = (word(8) >> 32) as usize;
        let name = match (sym, &dynsym) {
            (0, _) | (_, None) => String::new(),
            (i, Some(t)) => t
                .symbol_by_index(object::SymbolIndex(i))
                .ok()
                .and_then(|s| s.name().ok().map(str::to_owned))
                .unwrap_or_default(),
        };
        by_slot.insert(word(0), name);
    }
    let (sec, first) = match (obj.section_by_name(".plt.sec"), obj.section_by_name(".plt")) {
        (Some(sec), _) => (sec, 0),
        (None, Some(plt)) => (plt, header),
        (None, None) => return Vec::new(),
    };
    let Ok(code) = sec.data() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut off = first as usize;
    while off + 16 <= code.len() {
        let addr = sec.address() + off as u64;
        let slot = match arch {
            object::Architecture::X86_64 => x86_64_plt_slot(&code[off..off + 16], addr),
            _ => aarch64_plt_slot(&code[off..off + 16], addr),
        };
        if let Some(name) = slot.and_then(|s| by_slot.get(&s)) {
            let name = format!("{name}@plt");
            out.extend(Sym::new(addr, 16, names.own(&name), &name, (false, true)));
        }
        off += 16;
    }
    out
}

/// The GOT slot an x86-64 PLT entry jumps through: `jmp *disp(%rip)`, optionally after
/// `endbr64` and with a `bnd` prefix.
fn x86_64_plt_slot(entry: &[u8], addr: u64) -> Option<u64> {
    let mut at = 0;
    if entry.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        at = 4;
    }
    if entry.get(at) == Some(&0xf2) {
        at += 1;
    }
    if entry.get(at..at + 2)? != [0xff, 0x25] {
        return None;
    }
    let disp = i32::from_le_bytes(entry.get(at + 2..at + 6)?.try_into().ok()?);
    Some((addr + at as u64 + 6).wrapping_add_signed(i64::from(disp)))
}

/// The GOT slot an AArch64 PLT entry loads: `adrp x16, PAGE; ldr x17, [x16, #OFF]`.
fn aarch64_plt_slot(entry: &[u8], addr: u64) -> Option<u64> {
    let insn = |i: usize| {
        Some(u32::from_le_bytes(
            entry.get(4 * i..4 * i + 4)?.try_into().ok()?,
        ))
    };
    let (adrp, ldr) = (insn(0)?, insn(1)?);
    if adrp & 0x9f00_0000 != 0x9000_0000 || ldr & 0xffc0_0000 != 0xf940_0000 {
        return None;
    }
    let imm = (((adrp >> 5) & 0x7_ffff) << 2 | (adrp >> 29) & 3) as i64;
    let imm = (imm << 43) >> 43; // sign-extend the 21-bit page count
    let page = (addr & !0xfff).wrapping_add_signed(imm << 12);
    Some(page + u64::from((ldr >> 10) & 0xfff) * 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `jmp *disp(%rip)` reaches its slot from the end of the instruction, after an
    /// `endbr64` and a `bnd` prefix too; other code is no entry.
    #[test]
    fn plt_slot_x86_64_jmp_forms() {
        let disp = 0x2ffau32.to_le_bytes();
        let plain = [0xff, 0x25, disp[0], disp[1], disp[2], disp[3]];
        assert_eq!(x86_64_plt_slot(&plain, 0x1000), Some(0x1000 + 6 + 0x2ffa));
        let mut ibt = vec![0xf3, 0x0f, 0x1e, 0xfa, 0xf2];
        ibt.extend_from_slice(&plain);
        assert_eq!(x86_64_plt_slot(&ibt, 0x1000), Some(0x1000 + 11 + 0x2ffa));
        let back = (-0x20i32).to_le_bytes();
        let backwards = [0xff, 0x25, back[0], back[1], back[2], back[3]];
        assert_eq!(x86_64_plt_slot(&backwards, 0x1000), Some(0x1000 + 6 - 0x20));
        assert_eq!(x86_64_plt_slot(&[0x90; 16], 0x1000), None);
        assert_eq!(x86_64_plt_slot(&[0xff, 0x25, 0], 0x1000), None, "cut short");
    }

    /// `adrp x16, PAGE; ldr x17, [x16, #OFF]` gives PAGE + OFF, pages counted back too.
    #[test]
    fn plt_slot_aarch64_adrp_ldr() {
        let entry = |adrp: u32, ldr: u32| [adrp.to_le_bytes(), ldr.to_le_bytes()].concat();
        // adrp x16, +1 page (immlo = 1); ldr x17, [x16, #24]
        let e = entry(0xb000_0010, 0xf940_0e11);
        assert_eq!(aarch64_plt_slot(&e, 0x10010), Some(0x11000 + 24));
        // adrp x16, -1 page (immhi and immlo all ones); ldr x17, [x16, #0]
        let e = entry(0xf0ff_fff0, 0xf940_0211);
        assert_eq!(aarch64_plt_slot(&e, 0x10010), Some(0xf000));
        assert_eq!(
            aarch64_plt_slot(&entry(0xd503_201f, 0xf940_0211), 0),
            None,
            "nop"
        );
        assert_eq!(aarch64_plt_slot(&[0x10, 0, 0, 0xb0], 0), None, "cut short");
    }
}
