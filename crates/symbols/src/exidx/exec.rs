//! Executing decoded unwind opcodes on a register set: one frame's step from a function to
//! its caller, reading the saved registers from the copied stack.

use super::opcodes::{decode, Op};
use super::ExidxError;

/// r13, the stack pointer.
pub const SP: usize = 13;
/// r14, the link register.
pub const LR: usize = 14;
/// r15, the program counter.
pub const PC: usize = 15;

/// The core registers r0-r15 and which of them are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    /// r0-r15.
    pub r: [u32; 16],
    /// Bit n set: `r[n]` holds the register's value (all of them in a sample; in a caller's
    /// frame only what the callee preserves or the opcodes restored).
    pub known: u16,
}

impl Regs {
    /// All sixteen registers known, as sampled (`PERF_SAMPLE_REGS_USER` on arm has r0-r15 in
    /// this order).
    pub fn sampled(r: [u32; 16]) -> Self {
        Self { r, known: 0xffff }
    }

    /// The registers of a perf sample: `get(n)` is sampled register n of arm's
    /// `perf_regs.h` (`PERF_REG_ARM_R0`..`R10` = 0..10, FP = 11, IP = 12, SP = 13, LR = 14,
    /// PC = 15), `None` when not sampled (unknown here). `None` without PC and SP.
    pub fn from_perf(get: impl Fn(u64) -> Option<u64>) -> Option<Self> {
        let mut regs = Self {
            r: [0; 16],
            known: 0,
        };
        for n in 0..16 {
            // A 32-bit process's registers are zero-extended into perf's u64 values.
            if let Some(v) = get(n as u64).and_then(|v| u32::try_from(v).ok()) {
                regs.set(n, v);
            }
        }
        (regs.get(PC).is_some() && regs.get(SP).is_some()).then_some(regs)
    }

    /// The register, when known.
    pub fn get(&self, n: usize) -> Option<u32> {
        (n < 16 && self.known & (1 << n) != 0).then(|| self.r[n])
    }

    pub(crate) fn set(&mut self, n: usize, v: u32) {
        self.r[n] = v;
        self.known |= 1 << n;
    }

    /// Marks r`n` unknown (a caller-saved register in a caller's frame).
    pub(crate) fn forget(&mut self, n: usize) {
        self.known &= !(1 << n);
    }
}

/// Reads the unwound process's memory: the copy of its user stack.
pub trait Memory {
    /// The little-endian word at `addr`, `None` outside what was copied.
    fn read_u32(&self, addr: u32) -> Option<u32>;
}

/// The user stack copied from `sp` upwards (`PERF_SAMPLE_STACK_USER`).
#[derive(Debug, Clone, Copy)]
pub struct StackCopy<'a> {
    /// The address of `bytes[0]`: the sampled sp.
    pub sp: u32,
    /// The copy.
    pub bytes: &'a [u8],
}

impl Memory for StackCopy<'_> {
    fn read_u32(&self, addr: u32) -> Option<u32> {
        let off = addr.checked_sub(self.sp)? as usize;
        let w = self.bytes.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    }
}

impl<F: Fn(u32) -> Option<u32>> Memory for F {
    fn read_u32(&self, addr: u32) -> Option<u32> {
        self(addr)
    }
}

/// How executing a function's opcodes ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// `0x80 0x00`: the function refuses to be unwound.
    Refused,
    /// A saved register is outside the copied stack (at this address).
    StackRead(u32),
    /// An opcode uses a register whose value in this frame is unknown.
    UnknownRegister(u8),
    /// The opcodes are not executable (reserved, spare, iWMMXt, truncated, corrupt).
    BadOpcode(ExidxError),
}

/// Runs the opcode bytes `ops` on `regs`, the registers of the function's frame: on return
/// `regs` are the caller's, with r15 the return address (r14 when r15 was not popped) and
/// r13 the final vsp. Registers the opcodes do not restore keep their values: on Arm the
/// callee preserves r4-r11 and r13, and the rest are the caller's own concern, so r0-r3, r12
/// and r14 become unknown.
pub fn execute(ops: &[u8], regs: &mut Regs, mem: &dyn Memory) -> Result<(), StepError> {
    let mut vsp = regs.get(SP).ok_or(StepError::UnknownRegister(13))?;
    let entry_known = regs.known;
    let mut popped: u16 = 0;
    for instr in decode(ops) {
        match instr.op {
            Op::Finish => break,
            Op::VspAdd(n) => vsp = vsp.wrapping_add(n),
            Op::VspSub(n) => vsp = vsp.wrapping_sub(n),
            Op::Refuse => return Err(StepError::Refused),
            Op::Pop(mask) => {
                vsp = pop_core(mask, vsp, regs, mem)?;
                popped |= mask;
            }
            Op::VspFromReg(n) => {
                vsp = regs
                    .get(usize::from(n))
                    .ok_or(StepError::UnknownRegister(n))?;
            }
            Op::PopVfp { count, fstmx, .. } => {
                let words = 2 * u32::from(count) + u32::from(fstmx);
                vsp = skip_words(vsp, words, mem)?;
            }
            Op::PopRaAuthCode => vsp = skip_words(vsp, 1, mem)?,
            Op::PacModifier => {}
            _ => {
                return Err(StepError::BadOpcode(ExidxError::Opcode {
                    bytes: instr.bytes,
                    what: instr.op.to_string(),
                }))
            }
        }
    }
    let ra = if popped & (1 << PC) != 0 {
        regs.r[PC]
    } else {
        regs.get(LR).ok_or(StepError::UnknownRegister(14))?
    };
    // Caller-saved registers hold nothing of the caller's after the call.
    let clobbered: u16 = 0x000f | (1 << 12) | (1 << LR);
    regs.known = (entry_known & !clobbered) | (popped & !(1 << PC));
    regs.set(SP, vsp);
    regs.set(PC, ra);
    Ok(())
}

/// Pops the core registers of `mask` from `vsp` upwards; r13 popped takes effect after the
/// whole pop (ABI remark b). Returns the new vsp.
fn pop_core(mask: u16, mut vsp: u32, regs: &mut Regs, mem: &dyn Memory) -> Result<u32, StepError> {
    let mut new_sp = None;
    for n in (0..16).filter(|n| mask & (1 << n) != 0) {
        let v = mem.read_u32(vsp).ok_or(StepError::StackRead(vsp))?;
        if n == SP {
            new_sp = Some(v);
        } else {
            regs.set(n, v);
        }
        vsp = vsp.wrapping_add(4);
    }
    Ok(new_sp.unwrap_or(vsp))
}

/// Skips `words` saved words (VFP registers the host does not track), checking that they
/// were copied: a frame whose saves run past the copy is truncated there.
fn skip_words(vsp: u32, words: u32, mem: &dyn Memory) -> Result<u32, StepError> {
    let end = vsp.wrapping_add(4 * words);
    if words > 0 {
        let last = end.wrapping_sub(4);
        mem.read_u32(last).ok_or(StepError::StackRead(last))?;
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// perf's register numbers are r0-r15 in order; unsampled ones are unknown, and PC and
    /// SP are required.
    #[test]
    fn regs_perf_arm_mapping() {
        let regs = Regs::from_perf(|n| (n != 3).then_some(0x100 + n)).unwrap();
        assert_eq!(
            (regs.get(0), regs.get(13), regs.get(15)),
            (Some(0x100), Some(0x10d), Some(0x10f))
        );
        assert_eq!(regs.get(3), None);
        assert!(Regs::from_perf(|n| (n != 15).then_some(1)).is_none());
        assert!(Regs::from_perf(|n| Some(1 << 32 | n)).is_none());
    }

    /// `vsp = r7; pop {r3}; pop {r4, r7, r14}`: the registers come from r7 upwards and pc is
    /// the popped r14; r0-r3 and r12 are unknown afterwards.
    #[test]
    fn execute_opcodes_vsp_from_r7_pops() {
        let bytes = stack(&[0, 0, 0x33, 0x44, 0x77, 0x1235, 0xdead]);
        let mem = StackCopy {
            sp: 0x1000,
            bytes: &bytes,
        };
        let mut r = [0u32; 16];
        r[7] = 0x1008;
        r[SP] = 0x1000;
        let mut regs = Regs::sampled(r);
        execute(&[0x97, 0xb1, 0x08, 0x84, 0x09, 0xb0], &mut regs, &mem).unwrap();
        assert_eq!(regs.get(PC), Some(0x1235));
        assert_eq!(regs.get(SP), Some(0x1018));
        assert_eq!((regs.get(4), regs.get(7)), (Some(0x44), Some(0x77)));
        assert_eq!(
            (regs.get(3), regs.get(0), regs.get(12)),
            (Some(0x33), None, None)
        );
        // The popped r14 is the return address, not the caller's lr.
        assert_eq!(regs.get(LR), Some(0x1235));
    }

    /// A leaf (`finish` only) returns to lr with sp unchanged; in the caller's frame lr is
    /// unknown, so the same step again fails instead of inventing a caller.
    #[test]
    fn execute_opcodes_leaf_then_unknown_lr() {
        let mem = StackCopy { sp: 0, bytes: &[] };
        let mut r = [0u32; 16];
        r[SP] = 0x2000;
        r[LR] = 0x4001;
        let mut regs = Regs::sampled(r);
        execute(&[0xb0, 0xb0, 0xb0], &mut regs, &mem).unwrap();
        assert_eq!((regs.get(PC), regs.get(SP)), (Some(0x4001), Some(0x2000)));
        assert_eq!(
            execute(&[0xb0], &mut regs, &mem),
            Err(StepError::UnknownRegister(14))
        );
    }

    /// Popping r13 sets vsp after the whole pop; pops and VFP saves past the copy are stack
    /// reads out of range; iWMMXt and spare opcodes are errors.
    #[test]
    fn execute_opcodes_sp_pop_and_out_of_range() {
        let bytes = stack(&[0x3000, 0x5001]);
        let mem = StackCopy {
            sp: 0x1000,
            bytes: &bytes,
        };
        let mut regs = Regs::sampled([0x1000; 16]);
        // pop {r13, r14}
        execute(&[0x86, 0x00], &mut regs, &mem).unwrap();
        assert_eq!((regs.get(SP), regs.get(PC)), (Some(0x3000), Some(0x5001)));
        let mut regs = Regs::sampled([0x1000; 16]);
        assert_eq!(
            execute(&[0xa8, 0xa8], &mut regs, &mem),
            Err(StepError::StackRead(0x1008))
        );
        let mut regs = Regs::sampled([0x1000; 16]);
        assert_eq!(
            execute(&[0xc9, 0x81], &mut regs, &mem),
            Err(StepError::StackRead(0x100c))
        );
        for bad in [&[0xc0][..], &[0xb1, 0x00], &[0x9d], &[0x84], &[0xff]] {
            let mut regs = Regs::sampled([0x1000; 16]);
            let e = execute(bad, &mut regs, &mem);
            assert!(matches!(e, Err(StepError::BadOpcode(_))), "{bad:x?}: {e:?}");
        }
    }
}
