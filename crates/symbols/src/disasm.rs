//! Disassembly for `--annotate`: x86-64, AArch64 and 32-bit Arm (A32 and Thumb-2, chosen
//! per mapping symbol) through the yaxpeax decoders.

mod arm32;

use crate::arch::{Arch, ArmMode};
use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};

/// One decoded instruction: address, length and text.
pub type Decoded = (u64, usize, String);

/// Decodes `bytes` starting at `addr`; undecodable bytes become `(bad)` entries of one byte
/// (x86), one word (AArch64, A32) or one instruction (Thumb) so that the listing keeps
/// going. `arm_runs` says where 32-bit Arm code switches between A32, Thumb and data
/// ([`crate::elf::SymbolFile::arm_runs`]); other architectures ignore it.
pub fn decode(arch: Arch, bytes: &[u8], addr: u64, arm_runs: &[(u64, ArmMode)]) -> Vec<Decoded> {
    let mut out = Vec::new();
    let mut off = 0usize;
    match arch {
        Arch::X86_64 => {
            let d = yaxpeax_x86::amd64::InstDecoder::default();
            while off < bytes.len() {
                match d.decode_slice(&bytes[off..]) {
                    Ok(inst) => {
                        let len = (inst.len().to_const() as usize).max(1);
                        out.push((addr + off as u64, len, inst.to_string()));
                        off += len;
                    }
                    Err(_) => {
                        out.push((addr + off as u64, 1, "(bad)".into()));
                        off += 1;
                    }
                }
            }
        }
        Arch::Aarch64 => {
            let d = yaxpeax_arm::armv8::a64::InstDecoder::default();
            while off + 4 <= bytes.len() {
                let mut r = U8Reader::new(&bytes[off..off + 4]);
                let text = match d.decode(&mut r) {
                    Ok(inst) => inst.to_string(),
                    Err(_) => "(bad)".into(),
                };
                out.push((addr + off as u64, 4, text));
                off += 4;
            }
        }
        Arch::Arm => out = arm32::decode(bytes, addr, arm_runs),
        Arch::Other => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known x86-64 and AArch64 encodings decode to their mnemonics.
    #[test]
    fn decode_x86_and_aarch64_known_bytes() {
        // push rbp; mov rbp, rsp; ret
        let x = decode(Arch::X86_64, &[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000, &[]);
        assert_eq!(x.len(), 3);
        assert_eq!(x[1].0, 0x1001);
        assert!(x[0].2.starts_with("push"), "{x:?}");
        assert!(x[2].2.starts_with("ret"), "{x:?}");
        // ret; nop (little-endian words)
        let a = decode(
            Arch::Aarch64,
            &[0xc0, 0x03, 0x5f, 0xd6, 0x1f, 0x20, 0x03, 0xd5],
            0x4000,
            &[],
        );
        assert_eq!(a.len(), 2);
        assert!(a[0].2.starts_with("ret"), "{a:?}");
        assert!(a[1].2.starts_with("nop"), "{a:?}");
    }
}
