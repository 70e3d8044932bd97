//! The function symbols of a symbol file: collected from `.symtab` (else `.dynsym`), one
//! name per address chosen as perf chooses it, and the names kept whatever the choice.

use super::placement::SectionAddrs;
use object::{Object, ObjectSection, ObjectSymbol, SectionIndex};
use std::collections::HashMap;

/// Symbols kept by name whatever else is at their address.
const ANCHORS: &[&str] = &["_text", "_stext"];

/// A function symbol as collected, before one name per address is chosen.
#[derive(Debug, Clone)]
pub(super) struct Sym {
    pub(super) start: u64,
    pub(super) size: u64,
    pub(super) name: String,
    /// ELF binding STB_WEAK / STB_GLOBAL: which alias of an address names it.
    pub(super) weak: bool,
    pub(super) global: bool,
}

/// The function symbols of a file by address, one per address, with the names a lookup by
/// name or by alias still needs after the choice.
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    /// Sorted by start, one per address.
    syms: Vec<Sym>,
    /// Address of each of [`ANCHORS`] the file has.
    anchors: HashMap<String, u64>,
    /// Every name of an address that has several (`init_module` and `mymod_init`).
    aliases: HashMap<u64, Vec<String>>,
}

impl SymbolTable {
    /// The table of `syms` as collected, in any order and with aliases.
    pub(super) fn new(mut syms: Vec<Sym>) -> Self {
        // Aliases such as `_text` may be merged away below; KASLR needs them by name.
        let anchors = syms
            .iter()
            .filter(|s| ANCHORS.contains(&s.name.as_str()))
            .map(|s| (s.name.clone(), s.start))
            .collect();
        let aliases = aliases_of(&syms);
        finish_symbols(&mut syms);
        Self {
            syms,
            anchors,
            aliases,
        }
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
        self.anchors
            .get(name)
            .copied()
            .or_else(|| self.syms.iter().find(|s| s.name == name).map(|s| s.start))
    }

    /// The symbol containing `addr`: `(name, start, size)`.
    pub(super) fn at(&self, addr: u64) -> Option<(&str, u64, u64)> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        (addr < s.start.saturating_add(s.size.max(1))).then_some((s.name.as_str(), s.start, s.size))
    }

    /// Start and size of each symbol, by address.
    pub(super) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.syms.iter().map(|s| (s.start, s.size))
    }

    /// Whether `name` is one of several names of the address `start`.
    pub(super) fn is_alias(&self, start: u64, name: &str) -> bool {
        self.aliases
            .get(&start)
            .is_some_and(|names| names.iter().any(|n| n == name))
    }
}

/// The function symbols of `obj` in its executable sections (`.symtab`, else `.dynsym`), at
/// the addresses `section_addr` places them (a relocatable file).
pub(super) fn collect_symbols(obj: &object::File<'_>, section_addr: &SectionAddrs) -> Vec<Sym> {
    let mut syms = Vec::new();
    // By flag, not kind: in a split debug file `.text` is NOBITS but still executable.
    let text_sections: Vec<SectionIndex> = obj
        .sections()
        .filter(|s| {
            matches!(s.flags(), object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0)
        })
        .map(|s| s.index())
        .collect();
    let add = |syms: &mut Vec<Sym>, sym: object::Symbol<'_, '_>| {
        let Some(idx) = sym.section_index() else {
            return;
        };
        let is_func = sym.kind() == object::SymbolKind::Text;
        let in_text = text_sections.contains(&idx);
        if !in_text || !(is_func || sym.kind() == object::SymbolKind::Unknown) {
            return;
        }
        let Ok(name) = sym.name() else { return };
        if name.is_empty()
            || name.starts_with("$x")
            || name.starts_with("$d")
            || name.starts_with(".L")
        {
            return;
        }
        let start = if section_addr.is_empty() {
            sym.address()
        } else {
            match section_addr.get(&idx) {
                Some(Some(base)) => base + sym.address(),
                _ => return,
            }
        };
        let binding = match sym.flags() {
            object::SymbolFlags::Elf { st_info, .. } => st_info >> 4,
            _ => object::elf::STB_GLOBAL,
        };
        syms.push(Sym {
            start,
            size: sym.size(),
            name: name.to_string(),
            weak: binding == object::elf::STB_WEAK,
            global: binding == object::elf::STB_GLOBAL,
        });
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

/// Whether the file has a .symtab with entries (a stripped one has only .dynsym).
pub(super) fn has_symtab(obj: &object::File<'_>) -> bool {
    obj.symbols().next().is_some()
}

/// Every name of each address that has several.
fn aliases_of(syms: &[Sym]) -> HashMap<u64, Vec<String>> {
    let mut by_addr: HashMap<u64, Vec<String>> = HashMap::new();
    for s in syms {
        by_addr.entry(s.start).or_default().push(s.name.clone());
    }
    by_addr.retain(|_, v| v.len() > 1);
    by_addr
}

/// Sorts by address, keeps one symbol per address and gives unsized ones the size up to the
/// next.
fn finish_symbols(syms: &mut Vec<Sym>) {
    // Of the aliases at one address keep the one `perf report` names it by (perf's
    // choose_best_symbol): sized, not weak, global, fewest leading underscores, longest name,
    // then the first in the table — so that both tools agree (`memmove`, not `memcpy`).
    syms.sort_by_key(|s| {
        (
            s.start,
            s.size == 0,
            s.weak,
            !s.global,
            s.name.bytes().take_while(|b| *b == b'_').count(),
            std::cmp::Reverse(s.name.len()),
        )
    });
    syms.dedup_by_key(|s| s.start);
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

    fn sym(start: u64, size: u64, name: &str, binding: u8) -> Sym {
        Sym {
            start,
            size,
            name: name.into(),
            weak: binding == object::elf::STB_WEAK,
            global: binding == object::elf::STB_GLOBAL,
        }
    }

    /// Of the aliases at one address the table keeps perf's choice (sized, not weak, global,
    /// fewest leading underscores, longest); the others stay known as aliases and anchors.
    #[test]
    fn symbol_table_aliases_perf_choice() {
        use object::elf::{STB_GLOBAL, STB_LOCAL, STB_WEAK};
        let t = SymbolTable::new(vec![
            sym(0x100, 0x10, "memcpy", STB_WEAK),
            sym(0x100, 0x10, "__memmove", STB_GLOBAL),
            sym(0x100, 0x10, "memmove", STB_GLOBAL),
            sym(0x100, 0, "memmove_longer_unsized", STB_GLOBAL),
            sym(0x200, 0x8, "helper", STB_LOCAL),
            sym(0x200, 0x8, "_text", STB_GLOBAL),
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
        let t = SymbolTable::new(vec![
            sym(0x300, 0, "last", object::elf::STB_GLOBAL),
            sym(0x100, 0, "first", object::elf::STB_GLOBAL),
        ]);
        assert_eq!(t.ranges().collect::<Vec<_>>(), [(0x100, 0x200), (0x300, 1)]);
        assert_eq!(t.at(0x2ff).map(|s| s.0), Some("first"));
        assert_eq!(t.at(0x301), None);
        assert_eq!(t.at(0xff), None);
    }
}
