//! The frame walk: from the sampled registers through the EXIDX tables of the images the
//! return addresses fall in, to the root or to where the unwind information stops.

use super::dwarf::{self, DwarfCfi, DwarfError};
use super::exec::{execute, Memory, Regs, StepError, PC, SP};
use super::table::{EntryKind, ExidxTable};
use super::ExidxError;
use std::fmt;
use std::ops::Range;

/// Frames of one unwound stack at most: a loop in a corrupt stack ends here.
pub const MAX_FRAMES: usize = 512;

/// Where an address of the unwound process is, as the caller knows from its mappings.
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    /// In no executable mapping.
    Unmapped,
    /// In an image without `.ARM.exidx`.
    NoTable,
    /// In an image whose `.ARM.exidx` does not parse.
    Damaged(&'a ExidxError),
    /// In an image with an EXIDX table, loaded at `bias` (run-time address minus file
    /// address).
    Table {
        /// The image's table.
        table: &'a ExidxTable,
        /// Its load bias.
        bias: u32,
    },
    /// In an image with DWARF CFI, loaded at `bias`: its rows are used where an FDE covers
    /// the code, its EHABI table (`exidx`, if any) elsewhere.
    Dwarf {
        /// The image's CFI.
        cfi: &'a dyn DwarfCfi,
        /// Its load bias.
        bias: u32,
        /// Its EHABI table, or why it does not parse.
        exidx: Option<&'a Result<ExidxTable, ExidxError>>,
    },
}

impl fmt::Debug for dyn DwarfCfi + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DwarfCfi")
    }
}

/// Maps a code address of the process to its image.
pub trait Images {
    /// The image `pc` is in. `&mut`: an implementation may load what it returns on demand and
    /// keep it; the walk holds a place only until it asks for the next.
    fn place(&mut self, pc: u32) -> Place<'_>;
}

/// One executable mapping of an image: its run-time addresses and what the image has.
#[derive(Debug, Clone)]
pub struct MappedImage<'a> {
    /// Run-time addresses of the mapping.
    pub avma: Range<u32>,
    /// The image's table and bias, [`Place::NoTable`] or [`Place::Damaged`].
    pub place: Place<'a>,
}

impl Images for [MappedImage<'_>] {
    fn place(&mut self, pc: u32) -> Place<'_> {
        self.iter()
            .find(|m| m.avma.contains(&pc))
            .map_or(Place::Unmapped, |m| m.place)
    }
}

/// One frame: a code address and the instruction set it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The sampled pc, or a return address, with the Thumb bit cleared.
    pub address: u32,
    /// The code there is Thumb: bit 0 of the return address (of the sampled pc, which perf
    /// records without it, so `false` there: the sampled frame's mode is not needed).
    pub thumb: bool,
}

impl Frame {
    fn of(pc: u32) -> Self {
        Self {
            address: pc & !1,
            thumb: pc & 1 != 0,
        }
    }
}

/// Why a path is cut short of the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Truncation {
    /// A saved register at this address is outside the copied stack.
    StackRead(u32),
    /// The opcodes need a register (r0-r15) whose value in this frame is unknown.
    UnknownRegister(u8),
    /// The caller's sp is not above the callee's: a loop or garbage.
    SpNotIncreasing,
    /// More than [`MAX_FRAMES`] frames.
    TooManyFrames,
    /// A code address in no mapping (a return address there is garbage, dropped from the
    /// path).
    Unmapped(u32),
}

/// Why an unwound path ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// At a function its table says cannot be unwound (`EXIDX_CANTUNWIND`, "refuse to
    /// unwind"): a root such as `_start` or a thread's entry.
    CantUnwind,
    /// At a zero return address: the outermost frame by convention.
    Root,
    /// At code of an image without `.ARM.exidx`.
    NoTable,
    /// At code its image's `.ARM.exidx` does not cover.
    Uncovered,
    /// At a damaged entry or opcode.
    BadTable(ExidxError),
    /// At DWARF CFI that is damaged or cannot be evaluated.
    BadDwarf(DwarfError),
    /// Where the copied stack or the known registers run out.
    Truncated(Truncation),
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            End::CantUnwind => f.write_str("[root: EXIDX_CANTUNWIND]"),
            End::Root => f.write_str("[root]"),
            End::NoTable => f.write_str("[no unwind info: no .ARM.exidx]"),
            End::Uncovered => f.write_str("[no unwind info: not covered by .ARM.exidx]"),
            End::BadTable(e) => write!(f, "[no unwind info: {e}]"),
            End::BadDwarf(e) => write!(f, "[no unwind info: {e}]"),
            End::Truncated(Truncation::StackRead(a)) => {
                write!(f, "[truncated: {a:#x} is past the copied stack]")
            }
            End::Truncated(Truncation::UnknownRegister(n)) => {
                write!(f, "[truncated: r{n} unknown in this frame]")
            }
            End::Truncated(Truncation::SpNotIncreasing) => {
                f.write_str("[truncated: sp not increasing]")
            }
            End::Truncated(Truncation::TooManyFrames) => {
                write!(f, "[truncated: more than {MAX_FRAMES} frames]")
            }
            End::Truncated(Truncation::Unmapped(a)) => {
                write!(f, "[truncated: return address {a:#x} is not mapped]")
            }
        }
    }
}

/// An unwound user stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    /// The sampled pc, then the return addresses, innermost first.
    pub frames: Vec<Frame>,
    /// Why it ends.
    pub end: End,
}

/// Unwinds from the sampled registers `regs` (r0-r15 of `PERF_SAMPLE_REGS_USER`) through
/// the tables of `images`, reading saved registers from `stack` (the copy of
/// `PERF_SAMPLE_STACK_USER`, from the sampled sp up).
pub fn unwind_stack<I: Images + ?Sized>(
    regs: &Regs,
    stack: &dyn Memory,
    images: &mut I,
) -> Unwound {
    let mut regs = *regs;
    let mut frames = vec![Frame::of(regs.r[PC])];
    // The sampled pc is the instruction; a return address is after the call, whose last
    // byte is what belongs to the caller's function (a call to a noreturn function can be
    // the last instruction).
    let mut lookup = regs.r[PC] & !1;
    let end = loop {
        if frames.len() >= MAX_FRAMES {
            break End::Truncated(Truncation::TooManyFrames);
        }
        let sp = regs.r[SP];
        let stepped = match images.place(lookup) {
            Place::Table { table, bias } => {
                step(&mut regs, table, lookup.wrapping_sub(bias), stack)
            }
            Place::Dwarf { cfi, bias, exidx } => {
                let addr = lookup.wrapping_sub(bias);
                match dwarf::step(cfi, addr, &mut regs, stack) {
                    Some(r) => r,
                    None => match exidx {
                        Some(Ok(table)) => step(&mut regs, table, addr, stack),
                        Some(Err(e)) => Err(End::BadTable(e.clone())),
                        None => Err(End::Uncovered),
                    },
                }
            }
            Place::NoTable => Err(End::NoTable),
            Place::Damaged(e) => Err(End::BadTable(e.clone())),
            Place::Unmapped => {
                // A return address there is garbage and leaves the path; a sampled pc
                // there (JIT code, a vDSO the caller did not map) stays.
                let at = if frames.len() > 1 {
                    frames.pop()
                } else {
                    frames.last().copied()
                };
                break End::Truncated(Truncation::Unmapped(at.map_or(0, |f| f.address)));
            }
        };
        if let Err(end) = stepped {
            break end;
        }
        if regs.r[PC] & !1 == 0 {
            break End::Root;
        }
        // The caller's sp is above the callee's, or the same only for the sampled frame
        // (a leaf that has not moved sp).
        let new_sp = regs.r[SP];
        if new_sp < sp || (new_sp == sp && frames.len() > 1) {
            break End::Truncated(Truncation::SpNotIncreasing);
        }
        let ra = regs.r[PC];
        frames.push(Frame::of(ra));
        lookup = (ra & !1).wrapping_sub(1);
    };
    Unwound { frames, end }
}

/// One frame's step at file address `addr` of `table`: the caller's registers in `regs`,
/// or the end of the path.
fn step(regs: &mut Regs, table: &ExidxTable, addr: u32, stack: &dyn Memory) -> Result<(), End> {
    let entry = match table.lookup(addr) {
        Ok(Some(e)) => e,
        Ok(None) => return Err(End::Uncovered),
        Err(e) => return Err(End::BadTable(e)),
    };
    if entry.kind == EntryKind::CantUnwind {
        return Err(End::CantUnwind);
    }
    execute(entry.kind.ops(), regs, stack).map_err(|e| match e {
        StepError::Refused => End::CantUnwind,
        StepError::StackRead(a) => End::Truncated(Truncation::StackRead(a)),
        StepError::UnknownRegister(n) => End::Truncated(Truncation::UnknownRegister(n)),
        StepError::BadOpcode(e) => End::BadTable(e),
    })
}
