//! One symbol file (vmlinux, a `.ko`, a user ELF or its split debug file): function symbols,
//! DWARF lines with inline frames, and code bytes for disassembly, all in one address space.
//!
//! A relocatable `.ko` is given a [`Placement`] (section name → load address recorded on the
//! board); its allocated sections are placed there and the relocations of its debug sections
//! (`.rela.debug_*`, or 32-bit Arm's `.rel.debug_*` with the addends in place) are applied
//! before DWARF is read, so the load addresses of samples are looked up directly.
//! `sh_addr` of a `.ko` is ignored: the module loader ignores it too.

mod decl;
mod die_depth;
pub use die_depth::MAX_DIE_DEPTH;
mod dwarf;
mod layout;
mod mapping;
mod placement;
mod plt;
mod plt_arm;
mod symtab;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_arm32;

pub use crate::arch::{Arch, ArmMode};
use crate::demangle::demangle;
use crate::error::{Error, Result};
use crate::unwind::Cfi;
pub use dwarf::{under_root, Reader, SectionBytes};
use kprof_capture::build_id::hex;
use layout::Layout;
use object::{Object, ObjectSection};
pub use placement::Placement;
use placement::{relocate, section_addresses, SectionAddrs};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use symtab::{collect_symbols, has_symtab, Names, SymbolTable};

/// Names the kernel's module_init()/module_exit() macros give the driver's own functions.
const MODULE_ENTRY_ALIASES: &[&str] = &["init_module", "cleanup_module"];

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
    symbols: SymbolTable,
    dwarf: Option<addr2line::Context<Reader>>,
    /// Which units addr2line may parse functions of ([`die_depth`]).
    depth: Option<die_depth::DepthGuard>,
    layout: Layout,
    map: Rc<memmap2::Mmap>,
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

/// A symbol file's bytes, read-only: mapped when only the user (or root) can change the file,
/// else copied into memory. A mapped file that someone truncates kills the reader with
/// SIGBUS at its next access, so a file another user can write (or owns, and so can make
/// writable) is read instead. Only a regular file is opened for reading (`O_NONBLOCK`: a
/// FIFO put where a symbol file was cannot block).
pub fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let (mut file, meta) =
        crate::source_file::open_regular(path).map_err(|e| Error::io(path, e))?;
    if meta.len() == 0 || only_user_can_change(&meta) {
        // SAFETY: the mapping is read-only and private, of a file only this user or root can
        // truncate or rewrite; a change made meanwhile gives wrong symbols at worst.
        return unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e));
    }
    let len = usize::try_from(meta.len())
        .map_err(|_| Error::io(path, std::io::Error::other("too large to read")))?;
    let mut copy = memmap2::MmapMut::map_anon(len).map_err(|e| Error::io(path, e))?;
    std::io::Read::read_exact(&mut file, &mut copy[..]).map_err(|e| Error::io(path, e))?;
    copy.make_read_only().map_err(|e| Error::io(path, e))
}

/// Whether nobody but this user and root can truncate or rewrite the file: owned by one of
/// them and not writable by group or others.
fn only_user_can_change(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    (meta.uid() == euid || meta.uid() == 0) && meta.mode() & 0o022 == 0
}

impl SymbolFile {
    /// Loads `path`, with DWARF taken from `debug` when given (a split debug file), placing a
    /// relocatable file's sections as `placement` says.
    pub fn open(path: &Path, debug: Option<&Path>, placement: Option<&Placement>) -> Result<Self> {
        let map = Rc::new(map_file(path)?);
        let obj = parse(&map, path)?;
        let relocatable = obj.kind() == object::ObjectKind::Relocatable;
        let empty = Placement::new();
        // The module loader ignores a `.ko`'s sh_addr: unplaced, its sections are nowhere.
        let placement = relocatable.then(|| placement.unwrap_or(&empty));
        let section_addr = section_addresses(&obj, placement);
        let layout = Layout::of(&obj, &section_addr, relocatable);
        let debug_map = debug.map(map_file).transpose()?.map(Rc::new);
        let debug_obj = match (debug, &debug_map) {
            (Some(d), Some(m)) => Some(parse(m, d)?),
            _ => None,
        };
        let files = std::iter::once(&map).chain(&debug_map).cloned().collect();
        let names = Names::new(files);
        let symbols = symbols_of(&obj, &section_addr, debug_obj.as_ref(), placement, names);
        let dwarf_obj = debug_obj.as_ref().unwrap_or(&obj);
        let has_lines = dwarf_obj.section_by_name(".debug_line").is_some();
        let dwarf_addr = section_addresses(dwarf_obj, placement);
        let (dwarf, source_roots, depth) = match dwarf::load(
            dwarf_obj,
            debug_map.as_ref().unwrap_or(&map),
            relocatable.then_some(&dwarf_addr),
        ) {
            Ok(Some((context, roots, guard))) => (Some(context), roots, Some(guard)),
            Ok(None) => (None, Vec::new(), None),
            Err(e) => return Err(bad_elf(debug.unwrap_or(path), format!("DWARF: {e}"))),
        };
        Ok(Self {
            debug_map,
            placement: placement.cloned(),
            cfi: std::cell::OnceCell::new(),
            path: path.to_path_buf(),
            debug_path: debug.map(Path::to_path_buf),
            build_id: obj.build_id().ok().flatten().map(hex),
            arch: arch_of(&obj),
            has_lines: has_lines && dwarf.is_some(),
            has_symbols: !symbols.is_empty(),
            relocatable,
            source_roots,
            symbols,
            dwarf,
            depth,
            layout,
            map: map.clone(),
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
        self.symbols.address_of(name)
    }

    /// Converts a file offset (from MMAP2 `pgoff`) to an address in this file.
    pub fn offset_to_address(&self, offset: u64) -> Option<u64> {
        self.layout.offset_to_address(offset)
    }

    /// Where function `name` starts, as an uprobe is placed: the file offset its PT_LOAD
    /// segment maps its first instruction from (a split debug file keeps the segments of
    /// the file it came from), and whether that is Thumb code (32-bit Arm). `None` when no
    /// function symbol has that name or no segment maps it.
    pub fn function_offset(&self, name: &str) -> Option<(u64, bool)> {
        let addr = match self.symbols.address_of(name) {
            Some(a) if self.symbols.in_function(a) => a,
            // The table keeps one name per address (perf's alias choice): `write` is kept as
            // `__libc_write`, which no user types.
            _ => self.alias_address(name)?,
        };
        let thumb = self
            .arm_runs(addr, addr + 2)
            .first()
            .is_some_and(|(_, m)| *m == ArmMode::Thumb);
        Some((self.layout.address_to_offset(addr)?, thumb))
    }

    /// The address of the function symbol `name` in the files' own tables (`.symtab`,
    /// `.dynsym`; `write@@GLIBC_2.2.5` answers `write`), aliases included.
    fn alias_address(&self, name: &str) -> Option<u64> {
        use object::{Object as _, ObjectSymbol as _};
        let maps = std::iter::once(&self.map).chain(self.debug_map.as_ref());
        for map in maps {
            let Ok(obj) = object::File::parse(&map[..]) else {
                continue;
            };
            let found = obj.symbols().chain(obj.dynamic_symbols()).find(|s| {
                s.kind() == object::SymbolKind::Text
                    && s.address() != 0
                    && s.name().is_ok_and(|n| n.split('@').next() == Some(name))
            });
            if let Some(s) = found {
                // A Thumb function's value has bit 0 set; its code starts at the even address.
                return Some(if self.arch == Arch::Arm {
                    s.address() & !1
                } else {
                    s.address()
                });
            }
        }
        None
    }

    /// Whether `addr` falls into one of the placed sections.
    pub fn contains_placed(&self, addr: u64) -> bool {
        self.layout.contains_placed(addr)
    }

    /// The function symbol containing `addr`: `(name, start, size)`.
    pub fn symbol_at(&self, addr: u64) -> Option<(&str, u64, u64)> {
        self.symbols.at(self.code_address(addr))
    }

    /// Whether `addr` is in a function symbol (STT_FUNC), not only after a label.
    pub fn in_function(&self, addr: u64) -> bool {
        self.symbols.in_function(self.code_address(addr))
    }

    /// The instruction `addr` is in, for a lookup: on 32-bit Arm bit 0 cleared, which a
    /// return address into Thumb code (LR) has set; instructions there are 2-byte aligned.
    fn code_address(&self, addr: u64) -> u64 {
        if self.arch == Arch::Arm {
            addr & !1
        } else {
            addr
        }
    }

    /// 32-bit Arm: what the bytes of `[start, end)` are, as `(address, mode)` runs sorted by
    /// address, the first at `start` (mapping symbols, else the Thumb bit of the function
    /// symbol holding `start`, else Arm). Empty for other architectures.
    pub fn arm_runs(&self, start: u64, end: u64) -> Vec<(u64, ArmMode)> {
        if self.arch != Arch::Arm {
            return Vec::new();
        }
        self.symbols.arm_runs(start, end)
    }

    /// Start and size of each function symbol, by address.
    pub fn symbol_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.symbols.ranges()
    }

    /// Source position of one address, without inline expansion.
    pub fn location(&self, addr: u64) -> Option<(String, u32)> {
        let addr = self.code_address(addr);
        let ctx = self.dwarf_at(addr)?;
        let loc = ctx.find_location(addr).ok()??;
        Some((loc.file?.to_string(), loc.line?))
    }

    /// Where the function whose code covers `addr` is declared: its subprogram's
    /// `DW_AT_decl_file`/`decl_line`, which the line of its first instruction is not when
    /// an inlined callee's code comes first.
    pub fn declaration(&self, addr: u64) -> Option<(String, u32)> {
        let addr = self.code_address(addr);
        let ctx = self.dwarf_at(addr)?;
        if !self.functions_readable(addr) {
            return None;
        }
        let unit = ctx.find_dwarf_and_unit(addr).skip_all_loads()?;
        decl::declaration(unit, addr)
    }

    /// The DWARF context for a lookup of `addr`: none for `u64::MAX`, where addr2line 0.25
    /// overflows computing `addr + 1` (a panic in a build with overflow checks; a hostile
    /// capture can make a sample land there).
    fn dwarf_at(&self, addr: u64) -> Option<&addr2line::Context<Reader>> {
        self.dwarf.as_ref().filter(|_| addr != u64::MAX)
    }

    /// Whether addr2line may parse the functions (and their inlined calls) of the units
    /// covering `addr`: not when one nests DIEs deeper than [`die_depth::MAX_DIE_DEPTH`].
    fn functions_readable(&self, addr: u64) -> bool {
        self.depth.as_ref().is_some_and(|g| g.allows(addr))
    }

    /// How many compilation units were found nested too deep to read their functions.
    pub fn units_too_deep(&self) -> usize {
        self.depth.as_ref().map_or(0, |g| g.too_deep())
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
        self.map.get(self.layout.code_range(start, end)?)
    }

    /// Frames of `addr`, innermost inlined call first, the symbol's own function last.
    pub fn frames(&self, addr: u64) -> Vec<RawFrame> {
        let addr = self.code_address(addr);
        let sym = self.symbol_at(addr);
        let mut out = Vec::new();
        if let Some(ctx) = self
            .dwarf_at(addr)
            .filter(|_| self.functions_readable(addr))
        {
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
                MODULE_ENTRY_ALIASES.contains(&name) && self.symbols.is_alias(start, d)
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
fn cfi_of(obj: &object::File<'_>, section_addr: &SectionAddrs, relocatable: bool) -> Option<Cfi> {
    let debug_frame = if relocatable {
        obj.section_by_name(".debug_frame").and_then(|sec| {
            let data = sec.uncompressed_data().ok()?.into_owned();
            Some(relocate(obj, &sec, data, section_addr))
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

/// The ELF of `path`, mapped at `map`.
fn parse<'a>(map: &'a memmap2::Mmap, path: &Path) -> Result<object::File<'a>> {
    object::File::parse(&map[..]).map_err(|e| bad_elf(path, e.to_string()))
}

fn bad_elf(path: &Path, why: String) -> Error {
    Error::BadElf {
        path: path.to_path_buf(),
        why,
    }
}

fn arch_of(obj: &object::File<'_>) -> Arch {
    match obj.architecture() {
        object::Architecture::X86_64 => Arch::X86_64,
        object::Architecture::Aarch64 => Arch::Aarch64,
        object::Architecture::Arm => Arch::Arm,
        _ => Arch::Other,
    }
}

/// The function symbols of `obj`: its own, or its split debug file's `debug_obj` when it is
/// stripped, and its PLT entries. `names` maps `obj`'s file first, `debug_obj`'s second.
fn symbols_of(
    obj: &object::File<'_>,
    section_addr: &SectionAddrs,
    debug_obj: Option<&object::File<'_>>,
    placement: Option<&Placement>,
    mut names: Names,
) -> SymbolTable {
    let mut modes = mapping::ModeMapBuilder::default();
    let mut symbols = collect_symbols(obj, section_addr, &mut names, 0, &mut modes);
    if let Some(debug_obj) = debug_obj {
        // A stripped file keeps only .dynsym, a handful of exported names; the split
        // debug file's .symtab has them all, as perf also prefers it.
        if !has_symtab(obj) || symbols.is_empty() {
            let addrs = section_addresses(debug_obj, placement);
            let full = collect_symbols(debug_obj, &addrs, &mut names, 1, &mut modes);
            if !full.is_empty() {
                symbols = full;
            }
        }
    }
    if obj.kind() != object::ObjectKind::Relocatable {
        symbols.extend(plt::plt_symbols(obj, &mut names));
    }
    SymbolTable::new(symbols, names, modes.finish())
}
