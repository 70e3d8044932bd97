//! Unwinding of 32-bit Arm user stacks with the EHABI tables `.ARM.exidx` / `.ARM.extab`
//! (ARM IHI 0038, "Exception Handling ABI for the Arm Architecture"), which GCC emits for
//! armv7 code with `-funwind-tables`/`-fexceptions` (and always for C++) and which frame
//! pointers cannot replace on Thumb-2 code; and with DWARF CFI (`.debug_frame` of `-g`)
//! where an image has it ([`DwarfCfi`], tried first: exact at every instruction).
//!
//! Sans-IO like [`crate::unwind`]: an [`ExidxTable`] is built from the bytes of an image the
//! caller read, [`unwind_stack`] asks the caller which image each address is in
//! ([`Images`]) and reads saved registers from the copied user stack ([`Memory`]). A path
//! ends at a root (`EXIDX_CANTUNWIND`, a zero return address), where the copy of the stack
//! ends or a register is unknown ([`End::Truncated`]), or at code without an entry or with a
//! damaged one ([`End::NoTable`], [`End::Uncovered`], [`End::BadTable`]): never with
//! invented frames.
//!
//! Opcodes print as binutils' `readelf -u` prints them ([`Instr`]'s `Display`), which the
//! tests check on cross-built objects.

mod dwarf;
mod exec;
mod opcodes;
pub(crate) mod process;
mod table;
mod walk;

pub use dwarf::{DwarfCfi, DwarfError};
pub use exec::{execute, Memory, Regs, StackCopy, StepError, LR, PC, SP};
pub use opcodes::{decode, Instr, Op};
pub use table::{Entry, EntryKind, ExidxSections, ExidxTable, EXIDX_CANTUNWIND};
pub use walk::{
    unwind_stack, End, Frame, Images, MappedImage, Place, Truncation, Unwound, MAX_FRAMES,
};

/// What is wrong with an EXIDX table or its opcodes. Addresses are the image's file
/// addresses; the fix is the same for all: the table of the image is damaged or was cut
/// when copied, so take `.ARM.exidx`/`.ARM.extab` from the unstripped ELF of the build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExidxError {
    /// `.ARM.exidx` is not a whole number of 8-byte entries.
    #[error(
        "`.ARM.exidx` is {len} bytes, not a whole number of 8-byte entries: the section is \
         truncated (use the image's unstripped ELF from the build)"
    )]
    IndexTruncated {
        /// Its length.
        len: usize,
    },
    /// `.ARM.exidx` has more entries than any image.
    #[error("`.ARM.exidx` is {len} bytes: more than 4M entries, not a real image's table")]
    IndexTooLarge {
        /// Its length.
        len: usize,
    },
    /// An index entry's function word has bit 31 set (it must be a prel31 offset).
    #[error("`.ARM.exidx` entry at {at:#x}: function word {word:#010x} has bit 31 set")]
    BadIndexWord {
        /// Address of the word.
        at: u32,
        /// The word.
        word: u32,
    },
    /// An inline entry with a personality other than 0 (Su16), which does not fit a word.
    #[error(
        "`.ARM.exidx` entry at {at:#x}: inline word {word:#010x} is not a personality 0 \
         (Su16) entry"
    )]
    BadInline {
        /// Address of the word.
        at: u32,
        /// The word.
        word: u32,
    },
    /// An entry points outside `.ARM.extab` (or the image has none).
    #[error(
        "`.ARM.extab` entry at {entry:#x}: word at {addr:#x} is outside `.ARM.extab` \
         (missing or truncated section)"
    )]
    ExtabOutOfRange {
        /// The `.ARM.extab` entry's address.
        entry: u32,
        /// The address read.
        addr: u32,
    },
    /// An `.ARM.extab` entry's word count runs past the end of the section.
    #[error("`.ARM.extab` entry at {at:#x}: {count} more words run past the end of `.ARM.extab`")]
    WordCountPastEnd {
        /// The entry's address.
        at: u32,
        /// The word count.
        count: u32,
    },
    /// An `.ARM.extab` compact entry with a personality index the ABI reserves (3-15).
    #[error("`.ARM.extab` entry at {at:#x}: personality index {index} is reserved")]
    ReservedPersonality {
        /// The entry's address.
        at: u32,
        /// The index.
        index: u8,
    },
    /// An index position past the table.
    #[error("`.ARM.exidx` has no entry {0}")]
    NoSuchEntry(usize),
    /// An opcode that cannot be executed (reserved, spare, iWMMXt, truncated, corrupt).
    #[error("unwind opcode {bytes:02x?} ({what}) cannot be executed")]
    Opcode {
        /// The opcode's bytes.
        bytes: Vec<u8>,
        /// What it is, as `readelf -u` names it.
        what: String,
    },
    /// The ELF file does not parse.
    #[error("bad ELF file: {0}")]
    Elf(String),
}
