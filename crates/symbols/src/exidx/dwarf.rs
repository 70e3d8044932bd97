//! One 32-bit Arm frame's step by DWARF call frame information (`.debug_frame`,
//! `.eh_frame`): what GCC emits with `-g` for C built without `-funwind-tables`, the default
//! of Yocto's and Buildroot's armv7 images, whose functions then have no EHABI entry of their
//! own (the linker covers them with `EXIDX_CANTUNWIND`).
//!
//! A row gives the caller's registers at every instruction, prologue and epilogue included,
//! where an EHABI entry only holds after the prologue: so the walk asks the DWARF rows first,
//! as libunwind does on arm.

use super::exec::{Memory, Regs, LR, PC, SP};
use super::walk::{End, Truncation};
use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow};
use std::fmt;

/// The DWARF call frame information of one image, as the walk uses it.
pub trait DwarfCfi {
    /// The return-address column and the row for the code at file address `addr`: `None`
    /// when no FDE covers it, `Some(Err)` when the FDE's instructions do not parse.
    fn row(&self, addr: u32) -> Option<Result<(Register, UnwindTableRow<usize>), gimli::Error>>;
}

impl DwarfCfi for crate::unwind::Cfi {
    fn row(&self, addr: u32) -> Option<Result<(Register, UnwindTableRow<usize>), gimli::Error>> {
        self.row_at(u64::from(addr))
    }
}

/// Why a row cannot be used: the CFI is damaged, or uses what a 32-bit Arm unwinder of
/// sampled stacks cannot evaluate (DWARF expressions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DwarfError {
    /// The FDE's or CIE's instructions do not parse.
    Parse(gimli::Error),
    /// The CFA or a register is given by a DWARF expression.
    Expression,
    /// The CFA or the return address is in a register other than r0-r15.
    Register(u16),
}

impl fmt::Display for DwarfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DwarfError::Parse(e) => write!(f, "DWARF CFI does not parse: {e}"),
            DwarfError::Expression => f.write_str("DWARF CFI rule is an expression"),
            DwarfError::Register(n) => write!(f, "DWARF CFI names register {n}, not r0-r15"),
        }
    }
}

/// The registers that keep their values across a call when the row says nothing of them:
/// the callee-saved r4-r11 and sp (AAPCS §6.1.1), and lr, which holds the return address
/// until a function saves it.
const PRESERVED: u16 = 0x0ff0 | 1 << SP | 1 << LR;

/// The caller's registers from the row for the code at file address `addr` of `cfi`:
/// `None` when no FDE covers it. On success `regs` are the caller's, its pc the return
/// address (with the Thumb bit of the caller's mode).
pub fn step(
    cfi: &dyn DwarfCfi,
    addr: u32,
    regs: &mut Regs,
    stack: &dyn Memory,
) -> Option<Result<(), End>> {
    let (ra, row) = match cfi.row(addr)? {
        Ok(r) => r,
        Err(e) => return Some(Err(End::BadDwarf(DwarfError::Parse(e)))),
    };
    Some(apply(ra, &row, regs, stack))
}

fn apply(
    ra: Register,
    row: &UnwindTableRow<usize>,
    regs: &mut Regs,
    stack: &dyn Memory,
) -> Result<(), End> {
    let reg = |n: u16| -> Result<usize, End> {
        let n = usize::from(n);
        if n < 16 {
            Ok(n)
        } else {
            Err(End::BadDwarf(DwarfError::Register(n as u16)))
        }
    };
    let known = |r: &Regs, n: usize| {
        r.get(n)
            .ok_or(End::Truncated(Truncation::UnknownRegister(n as u8)))
    };
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let base = known(regs, reg(register.0)?)?;
            // A 32-bit process's addresses wrap at 4 GiB.
            base.wrapping_add(*offset as u32)
        }
        CfaRule::Expression(_) => return Err(End::BadDwarf(DwarfError::Expression)),
    };
    let mut caller = Regs {
        r: regs.r,
        known: regs.known & PRESERVED,
    };
    caller.set(SP, cfa);
    let ra = reg(ra.0)?;
    let mut ra_value = regs.get(ra);
    for (r, rule) in row.registers() {
        // VFP and other registers (d8-d15 are 256-271) play no part in the walk.
        let Ok(n) = reg(r.0) else {
            continue;
        };
        let value = match rule {
            RegisterRule::Undefined => {
                if n == ra {
                    // The outermost frame: its CFI says there is no return address.
                    return Err(End::Root);
                }
                None
            }
            RegisterRule::SameValue => regs.get(n),
            RegisterRule::Offset(off) => {
                let at = cfa.wrapping_add(*off as u32);
                Some(
                    stack
                        .read_u32(at)
                        .ok_or(End::Truncated(Truncation::StackRead(at)))?,
                )
            }
            RegisterRule::ValOffset(off) => Some(cfa.wrapping_add(*off as u32)),
            RegisterRule::Register(from) => reg(from.0).ok().and_then(|f| regs.get(f)),
            RegisterRule::Constant(v) => u32::try_from(*v).ok(),
            RegisterRule::Expression(_) | RegisterRule::ValExpression(_) => {
                return Err(End::BadDwarf(DwarfError::Expression))
            }
            _ => None,
        };
        if n == ra {
            ra_value = value;
        }
        match value {
            Some(v) => caller.set(n, v),
            None => caller.forget(n),
        }
    }
    let pc = ra_value.ok_or(End::Truncated(Truncation::UnknownRegister(ra as u8)))?;
    caller.set(PC, pc);
    *regs = caller;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exidx::StackCopy;

    /// A row of `.debug_frame` as GCC writes it for a Thumb-2 function after
    /// `push {r4, r7, lr}` and `sub sp, #12`: CFA = sp + 24, r4 at CFA-12, r7 at CFA-8, lr at
    /// CFA-4.
    fn gcc_row() -> Vec<u8> {
        let mut cie = vec![];
        cie.extend_from_slice(&0xffff_ffffu32.to_le_bytes()); // CIE id
        cie.extend_from_slice(&[1, 0, 2, 0x7c, 14]); // v1, "", code 2, data -4, ra r14
        cie.extend_from_slice(&[0x0c, 13, 0]); // def_cfa r13+0
        while (cie.len() + 4) % 4 != 0 {
            cie.push(0);
        }
        let mut fde = vec![];
        fde.extend_from_slice(&0u32.to_le_bytes()); // CIE at 0
        fde.extend_from_slice(&0x1000u32.to_le_bytes());
        fde.extend_from_slice(&0x100u32.to_le_bytes());
        // advance 2; def_cfa_offset 12; r4 at cfa-12, r7 at cfa-8, r14 at cfa-4;
        // advance 2; def_cfa_offset 24.
        fde.extend_from_slice(&[0x41, 0x0e, 12, 0x84, 3, 0x87, 2, 0x8e, 1, 0x41, 0x0e, 24]);
        while (fde.len() + 4) % 4 != 0 {
            fde.push(0);
        }
        let mut out = vec![];
        out.extend_from_slice(&(cie.len() as u32).to_le_bytes());
        out.extend_from_slice(&cie);
        out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        out
    }

    fn cfi(debug_frame: Vec<u8>) -> crate::unwind::Cfi {
        crate::unwind::Cfi::new(crate::unwind::CfiSections {
            arch: Some(crate::Arch::Arm),
            debug_frame: Some(debug_frame),
            ..Default::default()
        })
        .expect("an FDE")
    }

    /// Steps from the body of the function: the caller's pc is the saved lr, sp the CFA,
    /// r4 and r7 restored, r0-r3 and r12 unknown, r5 kept.
    #[test]
    fn step_debug_frame_after_prologue_restores_saved() {
        let cfi = cfi(gcc_row());
        let sp = 0x7000_0000u32;
        let words = [0u32, 0, 0, 0x44, 0x77, 0x2001];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut r = [0u32; 16];
        (r[5], r[13], r[14], r[15]) = (5, sp, 0xdead, 0x1008);
        let mut regs = Regs::sampled(r);
        let mem = StackCopy { sp, bytes: &bytes };
        step(&cfi, 0x1008, &mut regs, &mem).unwrap().unwrap();
        assert_eq!(regs.get(PC), Some(0x2001));
        assert_eq!(regs.get(SP), Some(sp + 24));
        assert_eq!(
            (regs.get(4), regs.get(7), regs.get(5)),
            (Some(0x44), Some(0x77), Some(5))
        );
        assert_eq!((regs.get(0), regs.get(12)), (None, None));
        // Before the push, the return address is still in lr.
        let mut regs = Regs::sampled(r);
        regs.set(SP, sp);
        step(&cfi, 0x1000, &mut regs, &mem).unwrap().unwrap();
        assert_eq!((regs.get(PC), regs.get(SP)), (Some(0xdead), Some(sp)));
        // Outside the FDE: not covered.
        assert!(step(&cfi, 0x1100, &mut Regs::sampled(r), &mem).is_none());
        // A stack copy that ends before the saved lr.
        let short = StackCopy {
            sp,
            bytes: &bytes[..20],
        };
        assert_eq!(
            step(&cfi, 0x1008, &mut Regs::sampled(r), &short),
            Some(Err(End::Truncated(Truncation::StackRead(sp + 20))))
        );
    }

    /// Random bytes as `.debug_frame` never panic a step.
    #[test]
    fn step_debug_frame_random_bytes_no_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let base = gcc_row();
        for _ in 0..2000 {
            let mut b = base.clone();
            for _ in 0..4 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let i = (seed as usize) % b.len();
                b[i] = (seed >> 32) as u8;
            }
            let Some(cfi) = crate::unwind::Cfi::new(crate::unwind::CfiSections {
                arch: Some(crate::Arch::Arm),
                debug_frame: Some(b),
                ..Default::default()
            }) else {
                continue;
            };
            let mut regs = Regs::sampled([0x7000_0000; 16]);
            let mem = StackCopy {
                sp: 0x7000_0000,
                bytes: &[0; 64],
            };
            let _ = step(&cfi, 0x1008, &mut regs, &mem);
        }
    }
}
