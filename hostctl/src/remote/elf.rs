//! Just enough of an ELF header to tell whether a binary can run on a board: its machine, word
//! size, byte order, and whether it needs a dynamic loader.

/// What the ELF header and program headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfKind {
    pub machine: u16,
    pub is_64: bool,
    pub big_endian: bool,
    /// `PT_INTERP`: the binary needs this loader (and libc) on the board.
    pub interpreter: Option<String>,
}

impl ElfKind {
    /// A readable name such as `x86-64` or `AArch64 (32-bit)`.
    pub fn describe(&self) -> String {
        format!(
            "{}, {}-bit, {} endian",
            machine_name(self.machine),
            if self.is_64 { 64 } else { 32 },
            if self.big_endian { "big" } else { "little" }
        )
    }
}

use kprof_capture::elf::{ElfHeader, ElfHeaderError};

/// Parses the header; the error says why the bytes are not a usable executable.
pub fn parse(bytes: &[u8]) -> Result<ElfKind, String> {
    let h = ElfHeader::parse(bytes).map_err(|e| match e {
        ElfHeaderError::NotElf => "not an ELF file".to_owned(),
        ElfHeaderError::Class(c) => format!("unknown ELF class {c}"),
        ElfHeaderError::ByteOrder(d) => format!("unknown ELF byte order {d}"),
    })?;
    let (is_64, big_endian) = (h.is_64, h.big_endian);
    let u32_at = |off: usize| kprof_capture::bytes::u32_at(bytes, off, big_endian);
    let word_at = |o32: usize, o64: usize| h.word(bytes, o32, o64);
    let e_type = h.e_type;
    if e_type != 2 && e_type != 3 {
        return Err(format!("ELF type {e_type} is not an executable"));
    }
    let machine = h.machine;
    let table = h.program_headers(bytes).ok_or("truncated ELF header")?;
    let (phoff, phentsize, phnum) = (
        table.offset as usize,
        usize::from(table.entsize),
        usize::from(table.count),
    );
    let mut interpreter = None;
    for i in 0..phnum.min(512) {
        let ph = phoff.saturating_add(i.saturating_mul(phentsize));
        let Some(p_type) = u32_at(ph) else { break };
        if p_type != 3 {
            continue;
        }
        let (off, size) = (word_at(ph + 4, ph + 8), word_at(ph + 16, ph + 32));
        let (off, size) = (off.unwrap_or(0) as usize, size.unwrap_or(0) as usize);
        let name = bytes
            .get(off..off.saturating_add(size))
            .map(|b| String::from_utf8_lossy(b).trim_end_matches('\0').to_owned())
            .unwrap_or_else(|| "?".to_owned());
        interpreter = Some(name);
    }
    Ok(ElfKind {
        machine,
        is_64,
        big_endian,
        interpreter,
    })
}

pub const EM_386: u16 = 3;
pub const EM_MIPS: u16 = 8;
pub const EM_PPC: u16 = 20;
pub const EM_PPC64: u16 = 21;
pub const EM_S390: u16 = 22;
pub const EM_ARM: u16 = 40;
pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;
pub const EM_RISCV: u16 = 243;
pub const EM_LOONGARCH: u16 = 258;

pub fn machine_name(machine: u16) -> String {
    match machine {
        EM_386 => "i386".into(),
        EM_MIPS => "MIPS".into(),
        EM_PPC => "PowerPC".into(),
        EM_PPC64 => "PowerPC64".into(),
        EM_S390 => "S/390".into(),
        EM_ARM => "ARM".into(),
        EM_X86_64 => "x86-64".into(),
        EM_AARCH64 => "AArch64".into(),
        EM_RISCV => "RISC-V".into(),
        EM_LOONGARCH => "LoongArch".into(),
        m => format!("machine {m}"),
    }
}

/// The ELF machine and word size that run natively on a board whose `uname -m` is `uname`.
pub fn expected_for_uname(uname: &str) -> Option<(u16, bool)> {
    let u = uname.trim();
    Some(match u {
        "x86_64" | "amd64" => (EM_X86_64, true),
        "i386" | "i486" | "i586" | "i686" => (EM_386, false),
        "aarch64" | "aarch64_be" | "arm64" => (EM_AARCH64, true),
        _ if u.starts_with("arm") => (EM_ARM, false),
        "riscv64" => (EM_RISCV, true),
        "riscv32" => (EM_RISCV, false),
        "mips" | "mipsel" => (EM_MIPS, false),
        "mips64" | "mips64el" => (EM_MIPS, true),
        "ppc" | "ppcle" => (EM_PPC, false),
        "ppc64" | "ppc64le" => (EM_PPC64, true),
        "s390x" => (EM_S390, true),
        "loongarch64" => (EM_LOONGARCH, true),
        _ => return None,
    })
}

/// Why `kind` cannot run on a board with this `uname -m`, or `None` when it can.
pub fn mismatch(kind: &ElfKind, uname: &str) -> Option<String> {
    let (machine, is_64) = expected_for_uname(uname)?;
    if kind.machine == machine && kind.is_64 == is_64 {
        return None;
    }
    Some(format!(
        "it is built for {} but the board is {} ({})",
        kind.describe(),
        uname.trim(),
        machine_name(machine)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's own `/bin/sh` is a dynamic x86-64 executable matching `x86_64`.
    #[test]
    fn parse_elf_host_shell_dynamic_x86_64() {
        let bytes = std::fs::read("/bin/sh").unwrap();
        let kind = parse(&bytes).unwrap();
        assert_eq!(kind.machine, EM_X86_64);
        assert!(kind.is_64 && !kind.big_endian);
        assert!(kind.interpreter.unwrap().contains("ld-linux"));
        assert_eq!(mismatch(&parse(&bytes).unwrap(), "x86_64"), None);
    }

    /// An AArch64 binary is refused for an x86_64 board, and the reason names both.
    #[test]
    fn mismatch_elf_aarch64_on_x86_64_board() {
        let mut bytes = std::fs::read("/bin/sh").unwrap();
        bytes[18..20].copy_from_slice(&EM_AARCH64.to_le_bytes());
        let why = mismatch(&parse(&bytes).unwrap(), "x86_64\n").unwrap();
        assert_eq!(
            why,
            "it is built for AArch64, 64-bit, little endian but the board is x86_64 (x86-64)"
        );
        assert_eq!(expected_for_uname("armv7l"), Some((EM_ARM, false)));
        assert_eq!(expected_for_uname("aarch64"), Some((EM_AARCH64, true)));
    }

    /// Text, truncated headers and relocatable objects are refused.
    #[test]
    fn parse_elf_bad_input_errors() {
        assert_eq!(parse(b"#!/bin/sh\n").unwrap_err(), "not an ELF file");
        let mut bytes = std::fs::read("/bin/sh").unwrap();
        bytes[16] = 1;
        assert!(parse(&bytes).unwrap_err().contains("not an executable"));
        bytes.truncate(60);
        bytes[16] = 2;
        assert!(parse(&bytes).is_ok());
    }
}
