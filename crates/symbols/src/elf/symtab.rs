//! The function symbols of a symbol file: collected from `.symtab` (else `.dynsym`), one
//! name per address chosen as perf chooses it, and the names kept whatever the choice.

use super::mapping::{arm_mapping_symbol, is_mapping_symbol, ModeMap, ModeMapBuilder};
use super::placement::SectionAddrs;
use crate::arch::ArmMode;
use object::{Object, ObjectSection, ObjectSymbol, SectionIndex};
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

/// Symbols kept by name whatever else is at their address.
const ANCHORS: &[&str] = &["_text", "_stext"];

/// [`Name::src`] of a name the table holds itself.
const OWN: u8 = u8::MAX;

/// Where a symbol's name is: a string table of one of the mapped files, or the table's own
/// text. Names are read in place: copied, the string tables of `libLLVM` or
/// `librustc_driver` cost tens of MB.
#[derive(Debug, Clone, Copy)]
pub(super) struct Name {
    src: u8,
    off: u32,
    len: u32,
}

/// The text of the names: the mapped files, and the names no file holds (PLT entries).
#[derive(Debug, Default)]
pub(super) struct Names {
    files: Vec<Rc<memmap2::Mmap>>,
    own: String,
}

impl Names {
    /// Names in `files` (indexed by the `src` given to [`Names::add`]).
    pub(super) fn new(files: Vec<Rc<memmap2::Mmap>>) -> Self {
        Self {
            files,
            own: String::new(),
        }
    }

    /// `name`, read from file `src`: a reference when it lies in that file, else a copy.
    /// `None` only past 4 GiB of copied names.
    pub(super) fn add(&mut self, src: u8, name: &str) -> Option<Name> {
        if let Some(file) = self.files.get(usize::from(src)) {
            let off = (name.as_ptr() as usize).checked_sub(file.as_ptr() as usize);
            if let Some(off) = off.filter(|o| o + name.len() <= file.len()) {
                if let (Ok(off), Ok(len)) = (u32::try_from(off), u32::try_from(name.len())) {
                    return Some(Name { src, off, len });
                }
            }
        }
        self.own(name)
    }

    /// A copy of `name`, for a name no file holds.
    pub(super) fn own(&mut self, name: &str) -> Option<Name> {
        let off = u32::try_from(self.own.len()).ok()?;
        let len = u32::try_from(name.len()).ok()?;
        self.own.push_str(name);
        Some(Name { src: OWN, off, len })
    }

    fn bytes(&self, n: Name) -> &[u8] {
        let all: &[u8] = match n.src {
            OWN => self.own.as_bytes(),
            i => self.files.get(usize::from(i)).map_or(&[], |f| &f[..]),
        };
        let at = n.off as usize;
        all.get(at..at + n.len as usize).unwrap_or(&[])
    }

    /// The text of `n`; empty if the file no longer holds UTF-8 there.
    fn get(&self, n: Name) -> &str {
        std::str::from_utf8(self.bytes(n)).unwrap_or("")
    }
}

/// A function symbol as collected, before one name per address is chosen.
#[derive(Debug, Clone)]
pub(super) struct Sym {
    pub(super) start: u64,
    pub(super) size: u64,
    pub(super) name: Name,
    /// ELF binding STB_WEAK / STB_GLOBAL: which alias of an address names it.
    pub(super) weak: bool,
    pub(super) global: bool,
    /// Leading underscores of the name, for perf's choice among aliases.
    pub(super) underscores: u8,
    /// 32-bit Arm: a Thumb function (bit 0 of its symbol's value, cleared in `start`).
    pub(super) thumb: bool,
    /// An ELF function symbol (STT_FUNC), not a label (STT_NOTYPE, such as a linker
    /// script's `__entry_text_start`).
    pub(super) func: bool,
}

impl Sym {
    /// A symbol named `name` (in `names`), `None` when the name could not be stored.
    pub(super) fn new(
        start: u64,
        size: u64,
        name: Option<Name>,
        text: &str,
        (weak, global): (bool, bool),
    ) -> Option<Self> {
        let underscores = text.bytes().take_while(|b| *b == b'_').count();
        Some(Self {
            start,
            size,
            name: name?,
            weak,
            global,
            underscores: u8::try_from(underscores).unwrap_or(u8::MAX),
            thumb: false,
            func: false,
        })
    }
}

/// The function symbols of a file by address, one per address, with the names a lookup by
/// name or by alias still needs after the choice.
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    /// Sorted by start, one per address.
    syms: Vec<Sym>,
    names: Names,
    /// Address of each of [`ANCHORS`] the file has.
    anchors: HashMap<String, u64>,
    /// Every name of an address that has several (`init_module` and `mymod_init`).
    aliases: HashMap<u64, Vec<Name>>,
    /// 32-bit Arm: the mapping symbols of the code sections.
    modes: ModeMap,
}

impl SymbolTable {
    /// The table of `syms` as collected (names in `names`), in any order and with aliases,
    /// with the mapping symbols `modes` of a 32-bit Arm file.
    pub(super) fn new(mut syms: Vec<Sym>, names: Names, modes: ModeMap) -> Self {
        // Aliases such as `_text` may be merged away below; KASLR needs them by name.
        let anchors = syms
            .iter()
            .map(|s| (names.get(s.name), s.start))
            .filter(|(n, _)| ANCHORS.contains(n))
            .map(|(n, start)| (n.to_string(), start))
            .collect();
        sort_by_choice(&mut syms);
        let aliases = aliases_of(&syms);
        finish_symbols(&mut syms);
        Self {
            syms,
            names,
            anchors,
            aliases,
            modes,
        }
    }

    /// 32-bit Arm: what the bytes of `[start, end)` are, as `(address, mode)` runs sorted
    /// by address, the first at `start`: from the mapping symbols, else (a file with
    /// `.dynsym` only) from the Thumb bit of the function symbol holding `start`, else Arm.
    pub(super) fn arm_runs(&self, start: u64, end: u64) -> Vec<(u64, ArmMode)> {
        let mut runs = self.modes.runs(start, end);
        if runs.first().is_some_and(|r| r.0 == start) {
            return runs;
        }
        let i = self.syms.partition_point(|s| s.start <= start);
        let thumb = i
            .checked_sub(1)
            .and_then(|i| self.syms.get(i))
            .is_some_and(|s| s.thumb && start < s.start.saturating_add(s.size.max(1)));
        let mode = if thumb { ArmMode::Thumb } else { ArmMode::Arm };
        runs.insert(0, (start, mode));
        runs
    }

    /// How many addresses have a symbol.
    pub(super) fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether the file has no function symbol.
    pub(super) fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Address of a symbol by name (an anchor, else the first kept symbol of that name).
    pub(super) fn address_of(&self, name: &str) -> Option<u64> {
        self.anchors.get(name).copied().or_else(|| {
            self.syms
                .iter()
                .find(|s| self.names.bytes(s.name) == name.as_bytes())
                .map(|s| s.start)
        })
    }

    /// The symbol containing `addr`: `(name, start, size)`.
    pub(super) fn at(&self, addr: u64) -> Option<(&str, u64, u64)> {
        let s = self.containing(addr)?;
        Some((self.names.get(s.name), s.start, s.size))
    }

    /// Whether the symbol containing `addr` is a function symbol (STT_FUNC), not a label.
    pub(super) fn in_function(&self, addr: u64) -> bool {
        self.containing(addr).is_some_and(|s| s.func)
    }

    fn containing(&self, addr: u64) -> Option<&Sym> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        (addr < s.start.saturating_add(s.size.max(1))).then_some(s)
    }

    /// Start and size of each symbol, by address.
    pub(super) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.syms.iter().map(|s| (s.start, s.size))
    }

    /// Whether `name` is one of several names of the address `start`.
    pub(super) fn is_alias(&self, start: u64, name: &str) -> bool {
        self.aliases.get(&start).is_some_and(|names| {
            names
                .iter()
                .any(|n| self.names.bytes(*n) == name.as_bytes())
        })
    }
}

/// The function symbols of `obj` in its executable sections (`.symtab`, else `.dynsym`), at
/// the addresses `section_addr` places them (a relocatable file); names from file `src` of
/// `names`. A 32-bit Arm file's mapping symbols go to `modes`, its Thumb functions lose
/// bit 0 of their address (as perf, gdb and addr2line look them up).
pub(super) fn collect_symbols(
    obj: &object::File<'_>,
    section_addr: &SectionAddrs,
    names: &mut Names,
    src: u8,
    modes: &mut ModeMapBuilder,
) -> Vec<Sym> {
    let arm = obj.architecture() == object::Architecture::Arm;
    let mut syms = Vec::new();
    // By flag, not kind: in a split debug file `.text` is NOBITS but still executable.
    let text_sections: Vec<SectionIndex> = obj
        .sections()
        .filter(|s| {
            matches!(s.flags(), object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0)
        })
        .map(|s| s.index())
        .collect();
    let mut add = |syms: &mut Vec<Sym>, sym: object::Symbol<'_, '_>| {
        let Some(idx) = sym.section_index() else {
            return;
        };
        let is_func = sym.kind() == object::SymbolKind::Text;
        let in_text = text_sections.contains(&idx);
        if !in_text || !(is_func || sym.kind() == object::SymbolKind::Unknown) {
            return;
        }
        let Ok(name) = sym.name() else { return };
        let Some(base) = placed_base(section_addr, idx) else {
            return;
        };
        if arm {
            if let Some(mode) = arm_mapping_symbol(name) {
                if let Some(range) = section_range(obj, section_addr, idx, base) {
                    modes.add(range, base.wrapping_add(sym.address()), mode);
                }
                return;
            }
        }
        if name.is_empty() || is_mapping_symbol(name) || name.starts_with(".L") {
            return;
        }
        let thumb = arm && is_func && sym.address() & 1 == 1;
        let start = base.wrapping_add(sym.address() & !u64::from(thumb));
        let binding = match sym.flags() {
            object::SymbolFlags::Elf { st_info, .. } => st_info >> 4,
            _ => object::elf::STB_GLOBAL,
        };
        let flags = (
            binding == object::elf::STB_WEAK,
            binding == object::elf::STB_GLOBAL,
        );
        let at = names.add(src, name);
        syms.extend(Sym::new(start, sym.size(), at, name, flags).map(|s| Sym {
            thumb,
            func: is_func,
            ..s
        }));
    };
    for s in obj.symbols() {
        add(&mut syms, s);
    }
    if syms.is_empty() {
        for s in obj.dynamic_symbols() {
            add(&mut syms, s);
        }
    }
    syms
}

/// Where the addresses of section `idx` start: 0 in a file that is not placed (its
/// symbols' values are addresses), else the section's placed address; `None` when it was
/// not placed.
fn placed_base(section_addr: &SectionAddrs, idx: SectionIndex) -> Option<u64> {
    if section_addr.is_empty() {
        return Some(0);
    }
    section_addr.get(&idx).copied().flatten()
}

/// The addresses section `idx` of `obj` covers: its own, or where it was placed (`base`,
/// from [`placed_base`]) in a placed file, whose `sh_addr` means nothing.
fn section_range(
    obj: &object::File<'_>,
    section_addr: &SectionAddrs,
    idx: SectionIndex,
    base: u64,
) -> Option<Range<u64>> {
    let sec = obj.section_by_index(idx).ok()?;
    let start = if section_addr.is_empty() {
        sec.address()
    } else {
        base
    };
    Some(start..start.saturating_add(sec.size()))
}

/// Whether the file has a .symtab with entries (a stripped one has only .dynsym).
pub(super) fn has_symtab(obj: &object::File<'_>) -> bool {
    obj.symbols().next().is_some()
}

/// Sorts by address and, of the aliases at one address, puts first the one `perf report`
/// names it by (perf's choose_best_symbol): sized, not weak, global, fewest leading
/// underscores, longest name, then the first in the table — so that both tools agree
/// (`memmove`, not `memcpy`).
fn sort_by_choice(syms: &mut [Sym]) {
    syms.sort_by_key(|s| {
        (
            s.start,
            s.size == 0,
            s.weak,
            !s.global,
            s.underscores,
            std::cmp::Reverse(s.name.len),
        )
    });
}

/// Every name of each address that has several, from symbols sorted by address.
fn aliases_of(sorted: &[Sym]) -> HashMap<u64, Vec<Name>> {
    sorted
        .chunk_by(|a, b| a.start == b.start)
        .filter(|run| run.len() > 1)
        .map(|run| (run[0].start, run.iter().map(|s| s.name).collect()))
        .collect()
}

/// Keeps the first symbol per address of the sorted `syms` and gives unsized ones the size
/// up to the next.
fn finish_symbols(syms: &mut Vec<Sym>) {
    syms.dedup_by_key(|s| s.start);
    syms.shrink_to_fit();
    for i in 0..syms.len() {
        if syms[i].size == 0 {
            let next = syms.get(i + 1).map(|n| n.start);
            syms[i].size = next.map(|n| n - syms[i].start).unwrap_or(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `(start, size, name, binding)` symbols, names held by the table.
    fn table(syms: &[(u64, u64, &str, u8)]) -> SymbolTable {
        let mut names = Names::default();
        let syms = syms
            .iter()
            .map(|(start, size, name, binding)| {
                let flags = (
                    *binding == object::elf::STB_WEAK,
                    *binding == object::elf::STB_GLOBAL,
                );
                Sym::new(*start, *size, names.own(name), name, flags).unwrap()
            })
            .collect();
        SymbolTable::new(syms, names, ModeMap::default())
    }

    /// Of the aliases at one address the table keeps perf's choice (sized, not weak, global,
    /// fewest leading underscores, longest); the others stay known as aliases and anchors.
    #[test]
    fn symbol_table_aliases_perf_choice() {
        use object::elf::{STB_GLOBAL, STB_LOCAL, STB_WEAK};
        let t = table(&[
            (0x100, 0x10, "memcpy", STB_WEAK),
            (0x100, 0x10, "__memmove", STB_GLOBAL),
            (0x100, 0x10, "memmove", STB_GLOBAL),
            (0x100, 0, "memmove_longer_unsized", STB_GLOBAL),
            (0x200, 0x8, "helper", STB_LOCAL),
            (0x200, 0x8, "_text", STB_GLOBAL),
        ]);
        assert_eq!(t.at(0x105), Some(("memmove", 0x100, 0x10)));
        assert_eq!(t.at(0x200).map(|s| s.0), Some("_text"));
        assert_eq!(t.address_of("_text"), Some(0x200), "an anchor");
        assert_eq!(t.address_of("helper"), None, "merged away, no anchor");
        assert!(t.is_alias(0x100, "memcpy") && !t.is_alias(0x200, "memcpy"));
        assert_eq!(t.len(), 2);
    }

    /// An unsized symbol reaches to the next one; the last one covers one byte.
    #[test]
    fn symbol_table_unsized_to_next() {
        let t = table(&[
            (0x300, 0, "last", object::elf::STB_GLOBAL),
            (0x100, 0, "first", object::elf::STB_GLOBAL),
        ]);
        assert_eq!(t.ranges().collect::<Vec<_>>(), [(0x100, 0x200), (0x300, 1)]);
        assert_eq!(t.at(0x2ff).map(|s| s.0), Some("first"));
        assert_eq!(t.at(0x301), None);
        assert_eq!(t.at(0xff), None);
    }
}
