//! One symbol file (vmlinux, a `.ko`, a user ELF or its split debug file): function symbols,
//! DWARF lines with inline frames, and code bytes for disassembly, all in one address space.
//!
//! A relocatable `.ko` is given a [`Placement`] (section name → load address recorded on the
//! board); its allocated sections are placed there and its `.rela.debug_*` relocations are
//! applied before DWARF is read, so the load addresses of samples are looked up directly.
//! `sh_addr` of a `.ko` is ignored: the module loader ignores it too.

pub use crate::arch::Arch;
use crate::demangle::demangle;
use crate::error::{Error, Result};
use crate::unwind::Cfi;
use kprof_capture::build_id::hex;
use object::{
    Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
    SectionIndex,
};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// DWARF reader type: sections read in place from the mapped file, or, when compressed or
/// relocated (modules), from a reference-counted buffer.
pub type Reader = gimli::EndianReader<gimli::RunTimeEndian, SectionBytes>;

/// The bytes of one DWARF section.
#[derive(Clone)]
pub enum SectionBytes {
    /// A range of a mapped file: uncompressed sections are not copied, which halves the
    /// memory a large debug file costs.
    Mapped {
        /// The mapping of the whole file.
        map: Rc<memmap2::Mmap>,
        /// Offset of the section in the file.
        start: usize,
        /// Length of the section.
        len: usize,
    },
    /// Decompressed or relocated contents.
    Owned(Rc<[u8]>),
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SectionBytes({} bytes)", self.len())
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped { map, start, len } => &map[*start..*start + *len],
            Self::Owned(b) => b,
        }
    }
}

// SAFETY: the bytes live in an `Rc`-owned mapping or buffer that is never moved, resized or
// unmapped while any clone of this value exists, so the slice address is stable across moves
// and clones.
unsafe impl gimli::StableDeref for SectionBytes {}
// SAFETY: as above; a clone shares the same `Rc` and so points at the same bytes.
unsafe impl gimli::CloneStableDeref for SectionBytes {}

/// Section name → load address, for relocatable modules.
pub type Placement = HashMap<String, u64>;

/// Names the kernel's module_init()/module_exit() macros give the driver's own functions.
const MODULE_ENTRY_ALIASES: &[&str] = &["init_module", "cleanup_module"];

/// Symbols kept by name whatever else is at their address.
const ANCHORS: &[&str] = &["_text", "_stext"];

#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    size: u64,
    name: String,
    /// ELF binding STB_WEAK / STB_GLOBAL: which alias of an address names it.
    weak: bool,
    global: bool,
}

/// An executable section: where its bytes are in the file and where they are in memory.
#[derive(Debug, Clone, Copy)]
struct Code {
    addr: u64,
    file_offset: usize,
    len: usize,
}

/// A frame of an address: innermost (inlined) first, outermost (the real function) last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// Function name, demangled; `None` when no symbol covers the address.
    pub name: Option<String>,
    /// Start and size of the outermost function's symbol; `None` for inlined frames.
    pub func_start: Option<u64>,
    /// See `func_start`.
    pub func_size: Option<u64>,
    /// Source file of the address in this frame.
    pub file: Option<String>,
    /// Line of `file`.
    pub line: Option<u32>,
    /// This frame is inlined into the next one.
    pub inlined: bool,
}

/// A loaded symbol file.
pub struct SymbolFile {
    /// The file opened.
    pub path: PathBuf,
    /// Separate file the DWARF came from, when not `path`.
    pub debug_path: Option<PathBuf>,
    /// Its GNU build-id, lowercase hex.
    pub build_id: Option<String>,
    /// Its instruction set.
    pub arch: Arch,
    /// The file had `.debug_line`: lookups give file:line.
    pub has_lines: bool,
    /// The file had a symbol table with functions.
    pub has_symbols: bool,
    /// The file is relocatable (a `.ko`).
    pub relocatable: bool,
    /// The build trees its DWARF names source files in: each compilation unit's
    /// `DW_AT_comp_dir`, and the directory of a unit named outside it.
    pub source_roots: Vec<String>,
    symbols: Vec<Sym>,
    anchors: HashMap<String, u64>,
    /// Every name of an address that has several (`init_module` and `mymod_init`).
    aliases: HashMap<u64, Vec<String>>,
    dwarf: Option<addr2line::Context<Reader>>,
    /// `(file offset, vaddr, file size)` of each PT_LOAD segment.
    segments: Vec<(u64, u64, u64)>,
    code: Vec<Code>,
    map: Rc<memmap2::Mmap>,
    /// Allocated sections of a relocatable file with the address they were placed at and size.
    placed: Vec<(String, u64, u64)>,
    /// The split debug file's mapping, when DWARF came from one.
    debug_map: Option<Rc<memmap2::Mmap>>,
    /// Where a relocatable file's sections were placed.
    placement: Option<Placement>,
    /// The CFI, indexed on first use (vmlinux's `.debug_frame` is large and needed only for
    /// aarch64 leaves).
    cfi: std::cell::OnceCell<Option<Rc<Cfi>>>,
}

impl std::fmt::Debug for SymbolFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolFile")
            .field("path", &self.path)
            .field("build_id", &self.build_id)
            .field("symbols", &self.symbols.len())
            .field("has_lines", &self.has_lines)
            .finish()
    }
}

/// Maps a file read-only.
pub fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the mapping is read-only and private; a symbol file changed underneath us while
    // reporting gives wrong symbols at worst, as with any other reader of it.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

impl SymbolFile {
    /// Loads `path`, with DWARF taken from `debug` when given (a split debug file), placing a
    /// relocatable file's sections as `placement` says.
    pub fn open(path: &Path, debug: Option<&Path>, placement: Option<&Placement>) -> Result<Self> {
        let bad = |p: &Path, why: String| Error::BadElf {
            path: p.to_path_buf(),
            why,
        };
        let map = Rc::new(map_file(path)?);
        let obj = object::File::parse(&map[..]).map_err(|e| bad(path, e.to_string()))?;
        let build_id = obj.build_id().ok().flatten().map(hex);
        let arch = match obj.architecture() {
            object::Architecture::X86_64 => Arch::X86_64,
            object::Architecture::Aarch64 => Arch::Aarch64,
            _ => Arch::Other,
        };
        let relocatable = obj.kind() == object::ObjectKind::Relocatable;
        let empty = Placement::new();
        let placement = if relocatable {
            Some(placement.unwrap_or(&empty))
        } else {
            None
        };
        let section_addr = section_addresses(&obj, placement);

        let mut segments = Vec::new();
        for seg in obj.segments() {
            let (off, size) = seg.file_range();
            if size > 0 {
                segments.push((off, seg.address(), size));
            }
        }
        let mut code = Vec::new();
        let mut placed = Vec::new();
        for sec in obj.sections() {
            let addr = match section_addr.get(&sec.index()) {
                Some(Some(a)) => *a,
                Some(None) => continue,
                None => sec.address(),
            };
            if relocatable && is_alloc(&sec) {
                placed.push((sec.name().unwrap_or("").to_string(), addr, sec.size()));
            }
            if sec.kind() == object::SectionKind::Text {
                if let Some((off, len)) = sec.file_range() {
                    code.push(Code {
                        addr,
                        file_offset: off as usize,
                        len: len as usize,
                    });
                }
            }
        }

        let mut symbols = collect_symbols(&obj, &section_addr);
        let debug_map = match debug {
            Some(d) => Rc::new(map_file(d)?),
            None => map.clone(),
        };
        let debug_obj;
        let dwarf_obj = match debug {
            Some(d) => {
                debug_obj =
                    object::File::parse(&debug_map[..]).map_err(|e| bad(d, e.to_string()))?;
                // A stripped file keeps only .dynsym, a handful of exported names; the split
                // debug file's .symtab has them all, as perf also prefers it.
                if !has_symtab(&obj) || symbols.is_empty() {
                    let full =
                        collect_symbols(&debug_obj, &section_addresses(&debug_obj, placement));
                    if !full.is_empty() {
                        symbols = full;
                    }
                }
                &debug_obj
            }
            None => &obj,
        };
        if !relocatable {
            symbols.extend(plt_symbols(&obj));
        }
        // Aliases such as `_text` may be merged away below; KASLR needs them by name.
        let anchors = symbols
            .iter()
            .filter(|s| ANCHORS.contains(&s.name.as_str()))
            .map(|s| (s.name.clone(), s.start))
            .collect();
        let aliases = aliases_of(&symbols);
        finish_symbols(&mut symbols);
        let has_lines = dwarf_obj.section_by_name(".debug_line").is_some();
        let mut source_roots = Vec::new();
        let dwarf = if dwarf_obj.section_by_name(".debug_info").is_some() {
            let sec_addr = section_addresses(dwarf_obj, placement);
            let d = load_dwarf(dwarf_obj, &debug_map, relocatable.then_some(&sec_addr))
                .map_err(|e| bad(debug.unwrap_or(path), format!("DWARF: {e}")))?;
            source_roots = build_trees(&d);
            Some(
                addr2line::Context::from_dwarf(d)
                    .map_err(|e| bad(debug.unwrap_or(path), format!("DWARF: {e}")))?,
            )
        } else {
            None
        };
        Ok(Self {
            debug_map: debug.map(|_| debug_map.clone()),
            placement: placement.cloned(),
            cfi: std::cell::OnceCell::new(),
            path: path.to_path_buf(),
            debug_path: debug.map(Path::to_path_buf),
            build_id,
            arch,
            has_lines: has_lines && dwarf.is_some(),
            has_symbols: !symbols.is_empty(),
            relocatable,
            source_roots,
            symbols,
            anchors,
            aliases,
            dwarf,
            segments,
            code,
            map: map.clone(),
            placed,
        })
    }

    /// Its call frame information: `.eh_frame` (with `.eh_frame_hdr`), else `.debug_frame`,
    /// of the file or else of its split debug file; a `.ko`'s `.debug_frame` relocated to
    /// where its sections were placed. `None` when it has none.
    pub fn cfi(&self) -> Option<Rc<Cfi>> {
        self.cfi
            .get_or_init(|| {
                let of = |map: &[u8]| {
                    let obj = object::File::parse(map).ok()?;
                    let placement = self
                        .relocatable
                        .then(|| self.placement.clone().unwrap_or_default());
                    let addrs = section_addresses(&obj, placement.as_ref());
                    cfi_of(&obj, &addrs, self.relocatable)
                };
                of(&self.map[..])
                    .or_else(|| self.debug_map.as_ref().and_then(|m| of(&m[..])))
                    .map(Rc::new)
            })
            .clone()
    }

    /// Address of a symbol by name (first match), e.g. `_text` for the KASLR offset.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.anchors.get(name).copied().or_else(|| {
            self.symbols
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.start)
        })
    }

    /// Converts a file offset (from MMAP2 `pgoff`) to an address in this file.
    pub fn offset_to_address(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, _, size)| offset >= *off && offset < off.saturating_add(*size))
            .map(|(off, vaddr, _)| vaddr.wrapping_add(offset - off))
    }

    /// Whether `addr` falls into one of the placed sections.
    pub fn contains_placed(&self, addr: u64) -> bool {
        self.placed
            .iter()
            .any(|(_, a, s)| addr >= *a && addr < a.saturating_add(*s))
    }

    /// The function symbol containing `addr`: `(name, start, size)`.
    pub fn symbol_at(&self, addr: u64) -> Option<(&str, u64, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (addr < s.start.saturating_add(s.size.max(1))).then_some((s.name.as_str(), s.start, s.size))
    }

    /// Start and size of each function symbol, by address.
    pub fn symbol_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.symbols.iter().map(|s| (s.start, s.size))
    }

    /// Source position of one address, without inline expansion.
    pub fn location(&self, addr: u64) -> Option<(String, u32)> {
        let ctx = self.dwarf_at(addr)?;
        let loc = ctx.find_location(addr).ok()??;
        Some((loc.file?.to_string(), loc.line?))
    }

    /// The DWARF context for a lookup of `addr`: none for `u64::MAX`, where addr2line 0.25
    /// overflows computing `addr + 1` (a panic in a build with overflow checks; a hostile
    /// capture can make a sample land there).
    fn dwarf_at(&self, addr: u64) -> Option<&addr2line::Context<Reader>> {
        self.dwarf.as_ref().filter(|_| addr != u64::MAX)
    }

    /// Every line-table row in `[start, end)`: `(address, file, line)`, sorted by address.
    pub fn lines_in(&self, start: u64, end: u64) -> Vec<(u64, String, u32)> {
        let Some(ctx) = self.dwarf.as_ref() else {
            return Vec::new();
        };
        let Ok(iter) = ctx.find_location_range(start, end) else {
            return Vec::new();
        };
        let mut out: Vec<(u64, String, u32)> = iter
            .filter_map(|(addr, _len, loc)| Some((addr, loc.file?.to_string(), loc.line?)))
            .collect();
        out.sort_by_key(|r| r.0);
        out
    }

    /// Code bytes at `[start, end)`, when an executable section covers them.
    pub fn code(&self, start: u64, end: u64) -> Option<&[u8]> {
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
        self.map.get(from..to)
    }

    /// Frames of `addr`, innermost inlined call first, the symbol's own function last.
    pub fn frames(&self, addr: u64) -> Vec<RawFrame> {
        let sym = self.symbol_at(addr);
        let mut out = Vec::new();
        if let Some(ctx) = self.dwarf_at(addr) {
            if let Ok(mut iter) = ctx.find_frames(addr).skip_all_loads() {
                while let Ok(Some(f)) = iter.next() {
                    let name = f
                        .function
                        .as_ref()
                        .and_then(|n| n.raw_name().ok().map(|n| demangle(n.as_ref())));
                    let (file, line) = match &f.location {
                        Some(l) => (l.file.map(str::to_string), l.line),
                        None => (None, None),
                    };
                    out.push(RawFrame {
                        name,
                        func_start: None,
                        func_size: None,
                        file,
                        line,
                        inlined: true,
                    });
                }
            }
        }
        if out.is_empty() {
            let (file, line) = match self.location(addr) {
                Some((f, l)) => (Some(f), Some(l)),
                None => (None, None),
            };
            out.push(RawFrame {
                name: None,
                func_start: None,
                func_size: None,
                file,
                line,
                inlined: false,
            });
        }
        let last = out.last_mut().expect("one frame");
        last.inlined = false;
        if let Some((name, start, size)) = sym {
            // The symbol table names the function as perf does (`foo.isra.0`, and among
            // aliases perf's pick); DWARF names the inlined ones. Exception: the aliases that
            // module_init()/module_exit() create are replaced by the name in the source.
            let dwarf_alias = last.name.take().filter(|d| {
                MODULE_ENTRY_ALIASES.contains(&name)
                    && self
                        .aliases
                        .get(&start)
                        .is_some_and(|names| names.iter().any(|n| n == d))
            });
            last.name = Some(dwarf_alias.unwrap_or_else(|| demangle(name)));
            last.func_start = Some(start);
            last.func_size = Some(size);
        }
        out
    }
}

/// The CFI of `obj`; a relocatable file's `.debug_frame` gets its relocations applied
/// against the placed sections first.
fn cfi_of(
    obj: &object::File<'_>,
    section_addr: &HashMap<SectionIndex, Option<u64>>,
    relocatable: bool,
) -> Option<Cfi> {
    let debug_frame = if relocatable {
        obj.section_by_name(".debug_frame").and_then(|sec| {
            let data = sec.uncompressed_data().ok()?.into_owned();
            relocate(obj, &sec, data, section_addr).ok()
        })
    } else {
        None
    };
    let mut sections = crate::unwind::sections_of(obj, debug_frame);
    if relocatable {
        // An unrelocated `.eh_frame` would describe addresses near 0.
        sections.eh_frame = None;
        sections.eh_frame_hdr = None;
    }
    Cfi::new(sections)
}

fn is_alloc(sec: &object::Section<'_, '_>) -> bool {
    matches!(sec.flags(), object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0)
}

/// For a relocatable file: each section's address (`Some(None)` = allocated but not placed).
/// Empty for executables, whose sections keep their link-time addresses.
fn section_addresses(
    obj: &object::File<'_>,
    placement: Option<&Placement>,
) -> HashMap<SectionIndex, Option<u64>> {
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

fn collect_symbols(
    obj: &object::File<'_>,
    section_addr: &HashMap<SectionIndex, Option<u64>>,
) -> Vec<Sym> {
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

/// `NAME@plt` for each PLT entry, as perf names them (`@plt` for an entry without a symbol,
/// such as glibc's IRELATIVE ones), so that samples in a PLT are named like perf names them
/// rather than `[unknown]`. An entry is matched to its `.rela.plt` relocation by the GOT slot
/// its code loads (the relocations are not in entry order); entries are 16 bytes, in
/// `.plt.sec` when the file has one (x86-64 with IBT), else in `.plt` after its header.
fn plt_symbols(obj: &object::File<'_>) -> Vec<Sym> {
    let arch = obj.architecture();
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
            out.push(Sym {
                start: addr,
                size: 16,
                name: format!("{name}@plt"),
                weak: false,
                global: true,
            });
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

/// Whether the file has a .symtab with entries (a stripped one has only .dynsym).
fn has_symtab(obj: &object::File<'_>) -> bool {
    obj.symbols().next().is_some()
}

fn aliases_of(syms: &[Sym]) -> HashMap<u64, Vec<String>> {
    let mut by_addr: HashMap<u64, Vec<String>> = HashMap::new();
    for s in syms {
        by_addr.entry(s.start).or_default().push(s.name.clone());
    }
    by_addr.retain(|_, v| v.len() > 1);
    by_addr
}

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

/// Loads DWARF; for a relocatable file applies the relocations of each debug section using the
/// section addresses in `reloc`.
/// The build trees of the compilation units: each unit's `DW_AT_comp_dir` (the kernel tree
/// for the kernel and kbuild modules, the package's build directory for user code), and the
/// directory of a unit whose absolute name is outside it (an out-of-tree module: kbuild
/// compiles it in the kernel tree, from the module's own directory).
fn build_trees(d: &gimli::Dwarf<Reader>) -> Vec<String> {
    let text = |r: &Option<Reader>| {
        r.as_ref().and_then(|r| {
            gimli::Reader::to_string_lossy(r)
                .ok()
                .map(|c| c.into_owned())
        })
    };
    let mut roots = std::collections::BTreeSet::new();
    let mut units = d.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = d.unit(header) else { continue };
        let comp_dir = text(&unit.comp_dir).map(|c| c.trim_end_matches('/').to_string());
        let name: Option<String> = text(&unit.name).filter(|n| n.starts_with('/'));
        if let Some(name) = name {
            let inside = comp_dir
                .as_deref()
                .is_some_and(|c| under_root(&name, c).is_some());
            if !inside {
                if let Some(dir) = Path::new(&name).parent() {
                    roots.insert(dir.to_string_lossy().into_owned());
                }
            }
        }
        roots.extend(comp_dir);
    }
    roots.into_iter().filter(|r| r.len() > 1).collect()
}

/// `path` relative to `root`, when it is below it.
pub fn under_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    path.strip_prefix(root)?
        .strip_prefix('/')
        .filter(|rest| !rest.is_empty())
}

fn load_dwarf(
    obj: &object::File<'_>,
    map: &Rc<memmap2::Mmap>,
    reloc: Option<&HashMap<SectionIndex, Option<u64>>>,
) -> std::result::Result<gimli::Dwarf<Reader>, String> {
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> std::result::Result<Reader, String> {
        let Some(sec) = obj.section_by_name(id.name()) else {
            return Ok(Reader::new(SectionBytes::Owned(Rc::from(&[][..])), endian));
        };
        let data: Cow<'_, [u8]> = sec
            .uncompressed_data()
            .map_err(|e| format!("{}: {e}", id.name()))?;
        let data = match reloc {
            Some(addrs) => Cow::Owned(relocate(obj, &sec, data.into_owned(), addrs)?),
            None => data,
        };
        let bytes = match data {
            Cow::Borrowed(b) => match (b.as_ptr() as usize).checked_sub(map.as_ptr() as usize) {
                Some(start) if start + b.len() <= map.len() => SectionBytes::Mapped {
                    map: map.clone(),
                    start,
                    len: b.len(),
                },
                _ => SectionBytes::Owned(Rc::from(b)),
            },
            Cow::Owned(v) => SectionBytes::Owned(v.into()),
        };
        Ok(Reader::new(bytes, endian))
    };
    gimli::Dwarf::load(load)
}

fn relocate(
    obj: &object::File<'_>,
    sec: &object::Section<'_, '_>,
    mut data: Vec<u8>,
    addrs: &HashMap<SectionIndex, Option<u64>>,
) -> std::result::Result<Vec<u8>, String> {
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
    Ok(data)
}
