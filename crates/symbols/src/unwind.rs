//! DWARF CFI unwinding of sampled user stacks (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER,
//! `perf record --call-graph dwarf`) with framehop, and the link-register rule for leaf
//! functions on aarch64. 32-bit Arm stacks, which framehop does not unwind, are walked by
//! `crate::exidx`: by an image's DWARF CFI where it has a row for the code (the rows of
//! [`Cfi::row_at`]), else by its EHABI table.
//!
//! Sans-IO (unlike the file-opening parts of the library, docs/architecture.md): a [`Cfi`] is
//! built from the bytes of an ELF file the caller read, a [`ProcessUnwinder`] asks the caller
//! where each address is mapped ([`Place`]). An unwind ends at the root of the stack, where
//! the copied stack runs out ([`End::Truncated`]) or at code without CFI
//! ([`End::NoUnwindInfo`]: the image has none; [`End::Uncovered`]: its CFI has no row for the
//! code there): framehop's guess by
//! frame pointer is never taken for code without CFI, so a path is cut short rather than
//! continued with invented callers.

use crate::arch::Arch;
use crate::exidx::{ExidxError, ExidxTable};
use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, EndianSlice, LittleEndian, Register,
    RegisterRule, UnwindContext, UnwindSection, UnwindTableRow,
};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::HashSet;
use std::ops::Range;
use std::rc::Rc;

/// Register numbers of `arch/*/include/uapi/asm/perf_regs.h`: the bit of each register in
/// `sample_regs_user` / `sample_regs_intr`, and its place among the sampled values.
pub mod perf_regs {
    /// x86_64 `PERF_REG_X86_BP`.
    pub const X86_BP: u64 = 6;
    /// x86_64 `PERF_REG_X86_SP`.
    pub const X86_SP: u64 = 7;
    /// x86_64 `PERF_REG_X86_IP`.
    pub const X86_IP: u64 = 8;
    /// aarch64 `PERF_REG_ARM64_X29` (the frame pointer).
    pub const ARM64_FP: u64 = 29;
    /// aarch64 `PERF_REG_ARM64_LR` (x30).
    pub const ARM64_LR: u64 = 30;
    /// aarch64 `PERF_REG_ARM64_SP`.
    pub const ARM64_SP: u64 = 31;
    /// aarch64 `PERF_REG_ARM64_PC`.
    pub const ARM64_PC: u64 = 32;
    /// 32-bit arm `PERF_REG_ARM_FP` (r11; Thumb code keeps its frame pointer in r7).
    pub const ARM_FP: usize = 11;
}

/// The DWARF number of aarch64's link register x30, the return address column of its CIEs.
const DWARF_ARM64_LR: u16 = 30;
/// Frames of one unwound stack at most: a loop in a corrupt stack ends here.
const MAX_FRAMES: usize = 512;
/// FDEs indexed per section at most (vmlinux has ~100k).
const MAX_FDES: usize = 1 << 21;

/// The registers unwinding starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnwindRegs {
    /// The sampled instruction.
    pub pc: u64,
    /// The stack pointer; the copied stack starts here.
    pub sp: u64,
    /// The frame pointer (rbp, x29).
    pub fp: u64,
    /// The link register (aarch64 x30), when sampled.
    pub lr: Option<u64>,
    /// 32-bit Arm: all of r0-r15 as sampled (the EHABI opcodes read any of them, e.g.
    /// `vsp = r7` in a function with a variable-size frame).
    pub arm32: Option<crate::exidx::Regs>,
}

impl UnwindRegs {
    /// The registers of `arch` from sampled perf registers, `get(perf register number)`;
    /// `None` without PC and SP, or for another architecture.
    pub fn from_perf(arch: Arch, get: impl Fn(u64) -> Option<u64>) -> Option<Self> {
        use perf_regs::*;
        match arch {
            Arch::X86_64 => Some(Self {
                pc: get(X86_IP)?,
                sp: get(X86_SP)?,
                fp: get(X86_BP).unwrap_or(0),
                lr: None,
                arm32: None,
            }),
            Arch::Aarch64 => Some(Self {
                pc: get(ARM64_PC)?,
                sp: get(ARM64_SP)?,
                fp: get(ARM64_FP).unwrap_or(0),
                lr: get(ARM64_LR),
                arm32: None,
            }),
            Arch::Arm => {
                let r = crate::exidx::Regs::from_perf(&get)?;
                let reg = |n| r.get(n).map(u64::from);
                Some(Self {
                    pc: reg(crate::exidx::PC)?,
                    sp: reg(crate::exidx::SP)?,
                    fp: reg(ARM_FP).unwrap_or(0),
                    lr: reg(crate::exidx::LR),
                    arm32: Some(r),
                })
            }
            Arch::Other => None,
        }
    }
}

/// One FDE of the indexed section: the code `[start, end)` it describes and its offset.
#[derive(Debug, Clone, Copy)]
struct Fde {
    start: u64,
    end: u64,
    offset: usize,
}

/// Which section the FDE index is of, and the one framehop's module of the file is given:
/// the one of `.eh_frame` and `.debug_frame` that describes more of the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Indexed {
    EhFrame,
    DebugFrame,
}

/// The unwind sections of one ELF file, as given by a caller that read them.
#[derive(Debug, Clone, Default)]
pub struct CfiSections {
    /// Instruction set of the file.
    pub arch: Option<Arch>,
    /// Address range of `.text`.
    pub text: Option<Range<u64>>,
    /// Address and bytes of `.eh_frame`.
    pub eh_frame: Option<(u64, Vec<u8>)>,
    /// Address and bytes of `.eh_frame_hdr`.
    pub eh_frame_hdr: Option<(u64, Vec<u8>)>,
    /// Bytes of `.debug_frame` (relocated, for a placed `.ko`).
    pub debug_frame: Option<Vec<u8>>,
    /// `(file offset, address, size)` of each PT_LOAD segment: where a mapping's page
    /// offset is in the file's addresses.
    pub segments: Vec<(u64, u64, u64)>,
    /// 32-bit Arm: the EHABI table (`.ARM.exidx` + `.ARM.extab`), or why it does not parse.
    pub exidx: Option<Result<ExidxTable, ExidxError>>,
}

/// The call frame information of one file, indexed: which addresses it covers, the framehop
/// module for a mapping of it, and the rule of a row.
#[derive(Debug)]
pub struct Cfi {
    arch: Arch,
    text: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Rc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Rc<[u8]>)>,
    debug_frame: Option<Rc<[u8]>>,
    segments: Vec<(u64, u64, u64)>,
    indexed: Indexed,
    fdes: Vec<Fde>,
    exidx: Option<Result<ExidxTable, ExidxError>>,
}

impl Cfi {
    /// Indexes the sections; `None` for an architecture other than x86_64, aarch64 and arm,
    /// or without any FDE (on arm: without an FDE and without an EHABI table).
    pub fn new(s: CfiSections) -> Option<Self> {
        let arch = s.arch.filter(|a| *a != Arch::Other)?;
        let range = |addr: u64, len: usize| addr..addr.saturating_add(len as u64);
        let eh_frame = s
            .eh_frame
            .filter(|(_, b)| !b.is_empty())
            .map(|(a, b)| (range(a, b.len()), Rc::<[u8]>::from(b)));
        let eh_frame_hdr = s
            .eh_frame_hdr
            .filter(|(_, b)| !b.is_empty())
            .map(|(a, b)| (range(a, b.len()), Rc::<[u8]>::from(b)));
        let debug_frame = s
            .debug_frame
            .filter(|b| !b.is_empty())
            .map(Rc::<[u8]>::from);
        let mut cfi = Self {
            arch,
            text: s.text,
            eh_frame,
            eh_frame_hdr,
            debug_frame,
            segments: s.segments,
            indexed: Indexed::EhFrame,
            fdes: Vec::new(),
            exidx: s.exidx,
        };
        let bases = cfi.bases();
        if let Some((_, b)) = &cfi.eh_frame {
            let sec = EhFrame::new(&b[..], LittleEndian);
            cfi.fdes = index(&sec, &bases);
        }
        let debug_fdes = cfi.debug_frame.as_ref().map(|b| {
            let mut sec = DebugFrame::new(&b[..], LittleEndian);
            sec.set_address_size(cfi.address_size());
            index(&sec, &bases)
        });
        // framehop takes one section per module. Both are there when code built without
        // unwind tables but with -g (busybox: -fno-asynchronous-unwind-tables) is linked with
        // objects that have them (the C library's start files): the section that describes
        // more of the code wins, and the other's functions end `[no unwind info]`.
        if let Some(debug_fdes) = debug_fdes {
            if covered(&debug_fdes) > covered(&cfi.fdes) {
                cfi.eh_frame = None;
                cfi.eh_frame_hdr = None;
                cfi.fdes = debug_fdes;
                cfi.indexed = Indexed::DebugFrame;
            }
        }
        if cfi.fdes.is_empty() {
            cfi.eh_frame = None;
            cfi.eh_frame_hdr = None;
        }
        (!cfi.fdes.is_empty() || cfi.exidx.is_some()).then_some(cfi)
    }

    /// The CFI of a linked ELF file (an executable, a shared library, vmlinux) from its bytes:
    /// `.eh_frame` with `.eh_frame_hdr`, or `.debug_frame` when that describes more of the
    /// code. `None` when it has none or does not parse.
    pub fn from_elf(data: &[u8]) -> Option<Self> {
        let obj = object::File::parse(data).ok()?;
        Self::new(sections_of(&obj, None))
    }

    /// Instruction set of the file.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Converts a file offset (a mapping's page offset) to an address of the file.
    pub fn offset_to_address(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, _, size)| offset >= *off && offset < off.saturating_add(*size))
            .map(|(off, vaddr, _)| vaddr.wrapping_add(offset - off))
    }

    /// The size of an address in `.debug_frame`, which its CIEs of version 1 do not say.
    fn address_size(&self) -> u8 {
        if self.arch == Arch::Arm {
            4
        } else {
            8
        }
    }

    fn bases(&self) -> BaseAddresses {
        let mut b = BaseAddresses::default();
        if let Some((r, _)) = &self.eh_frame {
            b = b.set_eh_frame(r.start);
        }
        if let Some((r, _)) = &self.eh_frame_hdr {
            b = b.set_eh_frame_hdr(r.start);
        }
        if let Some(t) = &self.text {
            b = b.set_text(t.start);
        }
        b
    }

    fn fde_at(&self, addr: u64) -> Option<Fde> {
        let i = self.fdes.partition_point(|f| f.start <= addr);
        let f = *self.fdes.get(i.checked_sub(1)?)?;
        (addr < f.end).then_some(f)
    }

    /// Whether an FDE of the indexed section (on 32-bit Arm: or an EHABI entry) describes
    /// the code at `addr`.
    pub fn covers(&self, addr: u64) -> bool {
        self.fde_at(addr).is_some()
            || matches!(&self.exidx, Some(Ok(t))
                if u32::try_from(addr).is_ok_and(|a| matches!(t.lookup(a), Ok(Some(_)))))
    }

    /// The return-address column and the row of the indexed section's FDE for the code at
    /// `addr`: `None` when no FDE covers it, `Some(Err)` when its instructions do not parse.
    pub fn row_at(
        &self,
        addr: u64,
    ) -> Option<Result<(Register, UnwindTableRow<usize>), gimli::Error>> {
        let fde = self.fde_at(addr)?;
        let bases = self.bases();
        Some(match self.indexed {
            Indexed::EhFrame => {
                let (_, b) = self.eh_frame.as_ref()?;
                let sec = EhFrame::new(&b[..], LittleEndian);
                row_in(&sec, &bases, fde.offset, addr)
            }
            Indexed::DebugFrame => {
                let b = self.debug_frame.as_ref()?;
                let mut sec = DebugFrame::new(&b[..], LittleEndian);
                sec.set_address_size(self.address_size());
                row_in(&sec, &bases, fde.offset, addr)
            }
        })
    }

    /// 32-bit Arm: the file's EHABI table, or why it does not parse.
    pub fn exidx(&self) -> Option<&Result<ExidxTable, ExidxError>> {
        self.exidx.as_ref()
    }

    /// aarch64: whether the return address of the function at `addr` is still in the link
    /// register there (the row's rule for x30 is unchanged: not saved yet, or a frameless
    /// leaf). `None` when no FDE covers `addr`, the rule does not parse, or on x86_64.
    pub fn return_address_in_lr(&self, addr: u64) -> Option<bool> {
        if self.arch != Arch::Aarch64 {
            return None;
        }
        let (ra, row) = self.row_at(addr)?.ok()?;
        let rule = row.register(ra);
        Some(
            ra == Register(DWARF_ARM64_LR)
                && matches!(rule, RegisterRule::Undefined | RegisterRule::SameValue)
                && matches!(row.cfa(), CfaRule::RegisterAndOffset { .. }),
        )
    }

    /// The framehop module of a mapping of this file at `avma`, whose address 0 is at
    /// `base_avma`.
    fn module(&self, name: &str, avma: Range<u64>, base_avma: u64) -> Module<Rc<[u8]>> {
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, b)| b.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, b)| b.clone()),
            debug_frame: match self.indexed {
                Indexed::DebugFrame => self.debug_frame.clone(),
                Indexed::EhFrame => None,
            },
            ..Default::default()
        };
        Module::new(name.to_string(), avma, base_avma, info)
    }
}

/// The bytes of code the FDEs describe, together (saturating: a corrupt FDE may claim the
/// whole address space).
fn covered(fdes: &[Fde]) -> u64 {
    fdes.iter()
        .fold(0u64, |n, f| n.saturating_add(f.end.saturating_sub(f.start)))
}

/// The FDEs of a section, sorted by start address.
fn index<'a, S: UnwindSection<EndianSlice<'a, LittleEndian>>>(
    sec: &S,
    bases: &BaseAddresses,
) -> Vec<Fde> {
    let mut out = Vec::new();
    let mut entries = sec.entries(bases);
    while out.len() < MAX_FDES {
        match entries.next() {
            Ok(Some(CieOrFde::Fde(partial))) => {
                if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                    let start = fde.initial_address();
                    let end = start.saturating_add(fde.len());
                    if end > start {
                        out.push(Fde {
                            start,
                            end,
                            offset: fde.offset(),
                        });
                    }
                }
            }
            Ok(Some(CieOrFde::Cie(_))) => {}
            Ok(None) | Err(_) => break,
        }
    }
    out.sort_by_key(|f| (f.start, f.end));
    out
}

/// The unwind sections of a parsed ELF file; `debug_frame` replaces its `.debug_frame`
/// (relocated for a placed `.ko`).
pub fn sections_of(obj: &object::File<'_>, debug_frame: Option<Vec<u8>>) -> CfiSections {
    let arch = match obj.architecture() {
        object::Architecture::X86_64 => Arch::X86_64,
        object::Architecture::Aarch64 => Arch::Aarch64,
        object::Architecture::Arm => Arch::Arm,
        _ => Arch::Other,
    };
    let bytes = |name: &str| {
        let sec = obj.section_by_name(name)?;
        let data = sec.uncompressed_data().ok()?;
        // NOBITS (a split debug file's `.eh_frame`) reads as empty.
        (!data.is_empty()).then(|| (sec.address(), data.into_owned()))
    };
    let segments = obj
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then(|| (off, s.address(), size))
        })
        .collect();
    CfiSections {
        arch: obj.is_little_endian().then_some(arch),
        text: obj
            .section_by_name(".text")
            .map(|s| s.address()..s.address().saturating_add(s.size())),
        eh_frame: bytes(".eh_frame"),
        eh_frame_hdr: bytes(".eh_frame_hdr"),
        debug_frame: debug_frame.or_else(|| bytes(".debug_frame").map(|(_, b)| b)),
        segments,
        exidx: ExidxTable::from_object(obj, None).transpose(),
    }
}

/// Where an address of the unwound process is, as the caller knows from the mappings.
#[derive(Debug)]
pub enum Place {
    /// In no executable mapping: not code, the stack is garbage from here.
    Unmapped,
    /// In the image named, which has no unwind information.
    NoCfi(String),
    /// In a mapping `[avma)` of the image named, whose address 0 is at `base_avma`.
    Cfi {
        /// Image name, for the marked frame.
        name: String,
        /// The mapping.
        avma: Range<u64>,
        /// Run-time address of the file's address 0.
        base_avma: u64,
        /// The image's CFI.
        cfi: Rc<Cfi>,
    },
}

/// Why an unwound stack ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// At the root function (its CFI says there is no caller).
    Root,
    /// The copied stack ran out or held no plausible return address.
    Truncated,
    /// At code of the image named, which has no unwind information.
    NoUnwindInfo(String),
    /// At code of the image named that its unwind information does not cover (hand-written
    /// assembly, code built with `-fno-asynchronous-unwind-tables`).
    Uncovered(String),
    /// 32-bit Arm: at code of the image named whose EHABI entry is `EXIDX_CANTUNWIND`. That is
    /// the root in the C library's entry code, but the linker also gives it to every function
    /// built without unwind tables (C without `-funwind-tables`), so only the caller, which
    /// knows the function's name, can tell.
    CantUnwind(String),
}

/// An unwound user stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    /// The sampled PC, then the return addresses, innermost first.
    pub frames: Vec<u64>,
    /// Why it ends.
    pub end: End,
}

enum Inner {
    X86(UnwinderX86_64<Rc<[u8]>>, Box<CacheX86_64>),
    Arm(UnwinderAarch64<Rc<[u8]>>, Box<CacheAarch64>),
    /// 32-bit Arm, by the images' EHABI tables (`crate::exidx::process`).
    Arm32,
}

/// framehop's unwinder of one process, with the mappings added to it so far.
pub struct ProcessUnwinder {
    inner: Inner,
    added: HashSet<u64>,
}

impl std::fmt::Debug for ProcessUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessUnwinder")
            .field("modules", &self.added.len())
            .finish()
    }
}

impl ProcessUnwinder {
    /// An unwinder for a process of `arch`; `None` for an architecture framehop does not do.
    pub fn new(arch: Arch) -> Option<Self> {
        let inner = match arch {
            Arch::X86_64 => Inner::X86(UnwinderX86_64::new(), Box::new(CacheX86_64::new())),
            Arch::Aarch64 => Inner::Arm(UnwinderAarch64::new(), Box::new(CacheAarch64::new())),
            Arch::Arm => Inner::Arm32,
            Arch::Other => return None,
        };
        Some(Self {
            inner,
            added: HashSet::new(),
        })
    }

    /// Unwinds the stack `stack` copied at `regs.sp`, asking `place` where each address is.
    pub fn unwind(
        &mut self,
        regs: &UnwindRegs,
        stack: &[u8],
        place: &mut dyn FnMut(u64) -> Place,
    ) -> Unwound {
        if matches!(self.inner, Inner::Arm32) {
            return crate::exidx::process::unwind(regs, stack, place);
        }
        let sp = regs.sp;
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let mut frames = vec![regs.pc];
        let mut addr = FrameAddress::from_instruction_pointer(regs.pc);
        let mut x86 = UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp);
        let mut arm = UnwindRegsAarch64::new(regs.lr.unwrap_or(0), regs.sp, regs.fp);
        loop {
            let lookup = addr.address_for_lookup();
            let place = place(lookup);
            let unmapped = matches!(place, Place::Unmapped);
            if let Err(end) = self.add_module_of(lookup, place) {
                if unmapped && addr.is_return_address() {
                    frames.pop();
                }
                return Unwound { frames, end };
            }
            if frames.len() >= MAX_FRAMES {
                return Unwound {
                    frames,
                    end: End::Truncated,
                };
            }
            let next = self.step(addr, (&mut x86, &mut arm), &mut read);
            let end = match next {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(a) => {
                        frames.push(ra);
                        addr = a;
                        continue;
                    }
                    None => End::Root,
                },
                Ok(None) => End::Root,
                Err(_) => End::Truncated,
            };
            return Unwound { frames, end };
        }
    }

    /// Makes the module of `lookup`, which `place` describes, known to framehop; the end of
    /// the unwind when it is unmapped or has no CFI covering `lookup`.
    fn add_module_of(&mut self, lookup: u64, place: Place) -> Result<(), End> {
        let (name, avma, base_avma, cfi) = match place {
            Place::Unmapped => return Err(End::Truncated),
            Place::NoCfi(name) => return Err(End::NoUnwindInfo(name)),
            Place::Cfi {
                name,
                avma,
                base_avma,
                cfi,
            } => (name, avma, base_avma, cfi),
        };
        let covered = lookup
            .checked_sub(base_avma)
            .is_some_and(|svma| cfi.covers(svma));
        if !covered || u32::try_from(lookup - base_avma).is_err() {
            return Err(End::Uncovered(name));
        }
        if self.added.insert(avma.start) {
            let m = cfi.module(&name, avma, base_avma);
            match &mut self.inner {
                Inner::X86(u, _) => u.add_module(m),
                Inner::Arm(u, _) => u.add_module(m),
                Inner::Arm32 => {}
            }
        }
        Ok(())
    }

    /// One framehop step from `addr` with the registers of the unwinder's architecture: the
    /// caller's return address, `None` at the root.
    fn step<F: FnMut(u64) -> Result<u64, ()>>(
        &mut self,
        addr: FrameAddress,
        (x86, arm): (&mut UnwindRegsX86_64, &mut UnwindRegsAarch64),
        read: &mut F,
    ) -> Result<Option<u64>, framehop::Error> {
        // framehop 0.15 subtracts unchecked from a CFA that damaged CFI or a garbage
        // frame pointer can put below 8 (`x86_64/dwarf.rs`, `cfa - 8`): that is an
        // overflow panic with debug assertions (a wrapped address in release builds),
        // and ends the unwind here either way.
        let step = crate::quiet_panic::catch_quietly(|| match &mut self.inner {
            Inner::X86(u, c) => u.unwind_frame(addr, x86, c, read),
            Inner::Arm(u, c) => u.unwind_frame(addr, arm, c, read),
            Inner::Arm32 => Ok(None),
        });
        step.unwrap_or_else(|| {
            // The rule cache may hold what the failed step left.
            match &mut self.inner {
                Inner::X86(_, c) => **c = CacheX86_64::new(),
                Inner::Arm(_, c) => **c = CacheAarch64::new(),
                Inner::Arm32 => {}
            }
            Err(framehop::Error::IntegerOverflow)
        })
    }
}

/// The return-address register of the FDE at `offset` of `sec`, and its row for `addr`: the
/// same for `.eh_frame` and `.debug_frame`.
fn row_in<'a, S>(
    sec: &S,
    bases: &BaseAddresses,
    offset: usize,
    addr: u64,
) -> Result<(Register, UnwindTableRow<usize>), gimli::Error>
where
    S: UnwindSection<EndianSlice<'a, LittleEndian>>,
{
    let fde = sec.fde_from_offset(bases, S::Offset::from(offset), |s, b, o| {
        s.cie_from_offset(b, o)
    })?;
    let ra = fde.cie().return_address_register();
    let mut ctx = Box::new(UnwindContext::new());
    let row = fde.unwind_info_for_address(sec, bases, &mut ctx, addr)?;
    Ok((ra, row.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The perf register numbers pick PC, SP, FP (and LR on the Arms) out of sampled values;
    /// 32-bit Arm keeps all of r0-r15.
    #[test]
    fn regs_perf_x86_64_aarch64_arm_mapping() {
        let x86 = UnwindRegs::from_perf(Arch::X86_64, |r| Some(100 + r)).unwrap();
        assert_eq!((x86.pc, x86.sp, x86.fp, x86.lr), (108, 107, 106, None));
        let arm = UnwindRegs::from_perf(Arch::Aarch64, |r| Some(100 + r)).unwrap();
        assert_eq!((arm.pc, arm.sp, arm.fp, arm.lr), (132, 131, 129, Some(130)));
        assert!(UnwindRegs::from_perf(Arch::Aarch64, |r| (r != 32).then_some(1)).is_none());
        assert!(UnwindRegs::from_perf(Arch::Other, |_| Some(1)).is_none());
        let arm = UnwindRegs::from_perf(Arch::Arm, |r| (r < 16).then_some(100 + r)).unwrap();
        assert_eq!((arm.pc, arm.sp, arm.fp, arm.lr), (115, 113, 111, Some(114)));
        assert_eq!(arm.arm32.and_then(|r| r.get(7)), Some(107));
        assert!(UnwindRegs::from_perf(Arch::Arm, |r| (r != 13).then_some(1)).is_none());
    }

    /// Random CFI bytes, registers and stacks end an unwind without a panic and with at
    /// most [`MAX_FRAMES`] frames.
    #[test]
    fn unwind_random_bytes_no_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3000 {
            let len = (next() % 512) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            crate::fuzzing::unwind(&bytes);
            // Also a well-formed CIE/FDE pair with random rules.
            let mut cfi = well_formed_cfi();
            for b in cfi.iter_mut().skip(24) {
                if next() % 4 == 0 {
                    *b = next() as u8;
                }
            }
            let mut input = vec![(round % 2) as u8];
            input.extend_from_slice(&(cfi.len() as u16).to_le_bytes());
            input.extend_from_slice(&cfi);
            input.extend((0..(next() % 300)).map(|_| next() as u8));
            crate::fuzzing::unwind(&input);
        }
    }

    /// x86_64 with `.debug_frame` (CFA = rsp + 16, return address at CFA - 8): two return
    /// addresses read from the copied stack, then the end at a zero return address; an
    /// address outside the FDE ends `[no unwind info]`, one outside the mappings is dropped.
    #[test]
    fn unwind_debug_frame_x86_64_two_frames() {
        let base = 0x40_0000u64;
        let cfi = Rc::new(
            Cfi::new(CfiSections {
                arch: Some(Arch::X86_64),
                debug_frame: Some(well_formed_cfi()),
                segments: vec![(0, 0, 0x2000)],
                ..CfiSections::default()
            })
            .expect("one FDE"),
        );
        assert!(cfi.covers(0x1000) && cfi.covers(0x10ff) && !cfi.covers(0x1100));
        let stack: Vec<u8> = [0, base + 0x1020, 0, base + 0x1030, 0, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let regs = UnwindRegs {
            pc: base + 0x1010,
            sp: 0x7fff_0000,
            fp: 0,
            lr: None,
            arm32: None,
        };
        let mut place = |a: u64| {
            if (base..base + 0x2000).contains(&a) {
                Place::Cfi {
                    name: "demo".into(),
                    avma: base..base + 0x2000,
                    base_avma: base,
                    cfi: cfi.clone(),
                }
            } else {
                Place::Unmapped
            }
        };
        let mut u = ProcessUnwinder::new(Arch::X86_64).unwrap();
        let out = u.unwind(&regs, &stack, &mut place);
        assert_eq!(out.frames, [base + 0x1010, base + 0x1020, base + 0x1030]);
        assert_ne!(out.end, End::Uncovered("demo".into()));

        // The second return address points outside the FDE.
        let stack: Vec<u8> = [0, base + 0x1020, 0, base + 0x1800, 0, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = u.unwind(&regs, &stack, &mut place);
        assert_eq!(out.frames, [base + 0x1010, base + 0x1020, base + 0x1800]);
        assert_eq!(out.end, End::Uncovered("demo".into()));

        // ... or outside every mapping: garbage, dropped, and the path is truncated.
        let stack: Vec<u8> = [0, base + 0x1020, 0, 0x1234_5678, 0, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = u.unwind(&regs, &stack, &mut place);
        assert_eq!(out.frames, [base + 0x1010, base + 0x1020]);
        assert_eq!(out.end, End::Truncated);

        // A stack copy that ends before the first return address.
        let out = u.unwind(&regs, &stack[..8], &mut place);
        assert_eq!(out.frames, [base + 0x1010]);
        assert_eq!(out.end, End::Truncated);
    }

    /// An `.eh_frame` (CIE augmentation "", so absolute 8-byte addresses) with one FDE for
    /// `start..start + len`, return address at CFA - 8, CFA = rsp + 8.
    fn eh_frame_covering(start: u64, len: u64) -> Vec<u8> {
        let mut v = Vec::new();
        let cie = [0, 0, 0, 0, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1, 0, 0];
        v.extend_from_slice(&(cie.len() as u32).to_le_bytes());
        v.extend_from_slice(&cie);
        let mut fde = Vec::new();
        // CIE pointer: from this field back to the CIE's start.
        fde.extend_from_slice(&((v.len() + 4) as u32).to_le_bytes());
        fde.extend_from_slice(&start.to_le_bytes());
        fde.extend_from_slice(&len.to_le_bytes());
        fde.extend_from_slice(&[0, 0, 0, 0]);
        v.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        v.extend_from_slice(&fde);
        v.extend_from_slice(&[0, 0, 0, 0]);
        v
    }

    /// A file with both sections (code built with -g but without unwind tables, linked with
    /// start files that have them: Buildroot's busybox) is indexed by the one that describes
    /// more of its code; the other's code is then not covered.
    #[test]
    fn cfi_both_sections_the_wider_is_used() {
        let both = |eh: Vec<u8>| {
            Cfi::new(CfiSections {
                arch: Some(Arch::X86_64),
                eh_frame: Some((0x3000, eh)),
                debug_frame: Some(well_formed_cfi()),
                segments: vec![(0, 0, 0x4000)],
                ..CfiSections::default()
            })
            .expect("FDEs")
        };
        // .eh_frame: 16 bytes of start code; .debug_frame: 0x1000..0x1100.
        let cfi = both(eh_frame_covering(0x1800, 0x10));
        assert_eq!(cfi.indexed, Indexed::DebugFrame);
        assert!(cfi.covers(0x1010) && !cfi.covers(0x1805));
        assert!(cfi.row_at(0x1010).is_some_and(|r| r.is_ok()));
        // .eh_frame describing more: it stays, as without .debug_frame.
        let cfi = both(eh_frame_covering(0x1800, 0x400));
        assert_eq!(cfi.indexed, Indexed::EhFrame);
        assert!(cfi.covers(0x1805) && !cfi.covers(0x1010));
    }

    /// Fuzzer finding (issue 35's CI): two FDEs claiming most of the address space made the
    /// coverage sum overflow; it saturates.
    #[test]
    fn covered_saturates() {
        let huge = |start| Fde {
            start,
            end: u64::MAX,
            offset: 0,
        };
        assert_eq!(covered(&[huge(1), huge(2)]), u64::MAX);
    }

    /// Fuzzer finding (run 9): a CFA of rbp + 8 with rbp 0x10 - 0x18 made framehop subtract
    /// below zero; the unwind ends instead of panicking.
    #[test]
    fn unwind_fuzz_cfa_below_8_no_panic() {
        let input: &[u8] = &[
            0x00, 0x32, 0x00, 0x10, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x01,
            0x2b, 0x10, 0x0c, 0x06, 0x08, 0x90, 0x01, 0x00, 0x00, 0x1a, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x86, 0x10, 0x0e, 0x00, 0x00, 0x10, 0x10, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        crate::fuzzing::unwind(input);
    }

    /// A `.debug_frame` with one CIE (code align 1, data align -8, RA column 16 / 30) and one
    /// FDE for 0x1000..0x1100 with `def_cfa_offset 16; offset ra, cfa-8`.
    pub(crate) fn well_formed_cfi() -> Vec<u8> {
        let mut v = Vec::new();
        // CIE: length, id 0xffffffff, version 1, aug "", code align 1, data align -8, RA 16
        let cie = [
            0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1, 0, 0,
        ];
        v.extend_from_slice(&(cie.len() as u32).to_le_bytes());
        v.extend_from_slice(&cie);
        let mut fde = Vec::new();
        fde.extend_from_slice(&0u32.to_le_bytes()); // CIE pointer
        fde.extend_from_slice(&0x1000u64.to_le_bytes());
        fde.extend_from_slice(&0x100u64.to_le_bytes());
        fde.extend_from_slice(&[0x0e, 16, 0x90, 1, 0, 0]);
        v.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        v.extend_from_slice(&fde);
        v
    }
}
