//! The instruction set of a symbol file or of a capture's samples.
//!
//! A leaf module: the ELF reader ([`crate::elf`]) sets it, the unwinder ([`crate::unwind`])
//! and the disassembler choose their rules by it, and neither of those two imports the other
//! for it.

/// Instruction set of a symbol file, for the unwinder and the disassembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86-64.
    X86_64,
    /// 64-bit Arm.
    Aarch64,
    /// 32-bit Arm (ARMv7 and older, `EM_ARM`): Arm and Thumb code, told apart by the
    /// mapping symbols (see [`ArmMode`]).
    Arm,
    /// Anything else: no disassembly.
    Other,
}

/// What the bytes at an address of a 32-bit Arm file are, as its mapping symbols (`$a`,
/// `$t`, `$d`, ELF for the Arm Architecture §5.5.5) or a Thumb function's odd address say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmMode {
    /// A32 instructions (`$a`).
    Arm,
    /// T32 (Thumb-2) instructions (`$t`).
    Thumb,
    /// Data in the code: literal pools, jump tables (`$d`).
    Data,
}
