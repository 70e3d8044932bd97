//! The walk (DWARF CFI, then EHABI) of a sampled 32-bit Arm process, behind [`crate::unwind::ProcessUnwinder`]:
//! the images come from the caller's mappings one address at a time, and the walk's end is
//! told in the terms the other architectures' unwinds use.

use super::exec::StackCopy;
use super::walk::{self, unwind_stack, Images, Truncation};
use crate::unwind::{Cfi, End, Place, UnwindRegs, Unwound};
use std::rc::Rc;

/// The caller's mappings as [`Images`]: each address asked is placed by the caller, and the
/// image found is kept while the walk reads its table.
struct Mapped<'p> {
    place: &'p mut dyn FnMut(u64) -> Place,
    /// The image of the last address placed, and its name.
    image: Option<(String, Rc<Cfi>)>,
    /// The name of the last image placed, with or without a table.
    name: Option<String>,
}

impl Images for Mapped<'_> {
    fn place(&mut self, pc: u32) -> walk::Place<'_> {
        match (self.place)(u64::from(pc)) {
            Place::Unmapped => walk::Place::Unmapped,
            Place::NoCfi(name) => {
                self.name = Some(name);
                walk::Place::NoTable
            }
            Place::Cfi {
                name,
                base_avma,
                cfi,
                ..
            } => {
                self.name = Some(name.clone());
                let (_, cfi) = self.image.insert((name, cfi));
                walk::Place::Dwarf {
                    cfi: &**cfi,
                    // A 32-bit process: its addresses and biases wrap at 4 GiB.
                    bias: base_avma as u32,
                    exidx: cfi.exidx(),
                }
            }
        }
    }
}

/// Unwinds the stack `stack` copied at `regs.sp` by the EHABI tables of the images `place`
/// names. Without the sampled r0-r15 the path is the sampled pc alone, truncated.
pub(crate) fn unwind(
    regs: &UnwindRegs,
    stack: &[u8],
    place: &mut dyn FnMut(u64) -> Place,
) -> Unwound {
    let Some(r) = regs.arm32 else {
        return Unwound {
            frames: vec![regs.pc],
            end: End::Truncated,
        };
    };
    let mem = StackCopy {
        sp: regs.sp as u32,
        bytes: stack,
    };
    let mut images = Mapped {
        place,
        image: None,
        name: None,
    };
    let out = unwind_stack(&r, &mem, &mut images);
    let name = images.name.unwrap_or_default();
    let end = match out.end {
        walk::End::Root => End::Root,
        walk::End::CantUnwind => End::CantUnwind(name),
        walk::End::NoTable | walk::End::BadTable(_) | walk::End::BadDwarf(_) => {
            End::NoUnwindInfo(name)
        }
        walk::End::Uncovered => End::Uncovered(name),
        walk::End::Truncated(Truncation::Unmapped(_)) | walk::End::Truncated(_) => End::Truncated,
    };
    Unwound {
        frames: out.frames.iter().map(|f| u64::from(f.address)).collect(),
        end,
    }
}
