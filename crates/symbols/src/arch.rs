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
    /// Anything else: no disassembly.
    Other,
}
