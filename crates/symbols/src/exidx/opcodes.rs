//! The unwind opcodes of the Arm EHABI (ARM IHI 0038, "Exception Handling ABI for the Arm
//! Architecture", table 4) decoded into [`Instr`]s, printed as binutils' `readelf -u` prints
//! them.

use std::fmt;

/// What one unwind opcode does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `vsp = vsp + n` (`00xxxxxx`, and `0xb2` with its uleb128).
    VspAdd(u32),
    /// `vsp = vsp - n` (`01xxxxxx`).
    VspSub(u32),
    /// `0x80 0x00`: the function must not be unwound through.
    Refuse,
    /// Pops the core registers of the mask (bit n = rn), lowest register at the lowest address
    /// (`1000iiii iiiiiiii`, `1010xnnn`, `0xb1`).
    Pop(u16),
    /// `vsp = r[n]` (`1001nnnn`).
    VspFromReg(u8),
    /// `0xb0`: the end of the instructions.
    Finish,
    /// VFP registers `d[first]`..=`d[first + count - 1]` popped; `fstmx` when saved by
    /// FSTMFDX (`0xb3`, `0xb8`-`0xbf`), which adds a pad word.
    PopVfp {
        /// The first D register.
        first: u8,
        /// How many D registers.
        count: u8,
        /// FSTMFDX format (one more word).
        fstmx: bool,
    },
    /// `0xb4`: pops the PAC of the return address (Armv8.1-M), one word.
    PopRaAuthCode,
    /// `0xb5`: vsp is the modifier of the PAC check; nothing to undo.
    PacModifier,
    /// `0x9d`, `0x9f`: reserved.
    Reserved,
    /// `0xb1` or `0xc7` with an operand the ABI calls spare.
    Spare,
    /// iWMMXt pops (`0xc0`-`0xc7`): decoded for printing, not executed (no such core in
    /// Linux armv7 userland).
    Wmmx,
    /// An opcode the ABI does not define (`0xb6`, `0xb7`, `0xca`-`0xcf`, `0xd8`-`0xff`).
    Unsupported,
    /// A multi-byte opcode cut off by the end of the bytes.
    Truncated,
    /// A `0xb2` whose uleb128 runs past 9 bytes.
    CorruptVsp,
}

/// One decoded unwind opcode with the bytes it was decoded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instr {
    /// The opcode's bytes (one to ten).
    pub bytes: Vec<u8>,
    /// What it does.
    pub op: Op,
}

/// Decodes all of `bytes`, as `readelf -u` does (it goes on after `finish`).
pub fn decode(bytes: &[u8]) -> Vec<Instr> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let (op, len) = decode_one(&bytes[i..]);
        let end = (i + len).min(bytes.len());
        out.push(Instr {
            bytes: bytes[i..end].to_vec(),
            op,
        });
        i = end;
    }
    out
}

/// The opcode at the start of `b` (not empty) and how many bytes it takes.
fn decode_one(b: &[u8]) -> (Op, usize) {
    let op = b[0];
    let second = b.get(1).copied();
    let two = |f: &dyn Fn(u8) -> Op| match second {
        Some(x) => (f(x), 2),
        None => (Op::Truncated, 1),
    };
    match op {
        0x00..=0x3f => (Op::VspAdd((u32::from(op & 0x3f) << 2) + 4), 1),
        0x40..=0x7f => (Op::VspSub((u32::from(op & 0x3f) << 2) + 4), 1),
        0x80..=0x8f => two(&|x| {
            let mask = (u16::from(op & 0x0f) << 8) | u16::from(x);
            if mask == 0 {
                Op::Refuse
            } else {
                Op::Pop(mask << 4)
            }
        }),
        0x9d | 0x9f => (Op::Reserved, 1),
        0x90..=0x9f => (Op::VspFromReg(op & 0x0f), 1),
        0xa0..=0xaf => {
            let regs = (1u16 << (5 + (op & 0x07))) - 1;
            let lr = if op & 0x08 != 0 { 1 << 14 } else { 0 };
            (Op::Pop((regs & !0x0f) | lr), 1)
        }
        0xb0 => (Op::Finish, 1),
        0xb1 => two(&|x| {
            if x == 0 || x & 0xf0 != 0 {
                Op::Spare
            } else {
                Op::Pop(u16::from(x))
            }
        }),
        0xb2 => decode_uleb_vsp(b),
        0xb3 | 0xc8 | 0xc9 => two(&|x| {
            let base = if op == 0xc8 { 16 } else { 0 };
            Op::PopVfp {
                first: base + (x >> 4),
                count: (x & 0x0f) + 1,
                fstmx: op == 0xb3,
            }
        }),
        0xb4 => (Op::PopRaAuthCode, 1),
        0xb5 => (Op::PacModifier, 1),
        0xb8..=0xbf | 0xd0..=0xd7 => (
            Op::PopVfp {
                first: 8,
                count: (op & 0x07) + 1,
                fstmx: op < 0xc0,
            },
            1,
        ),
        0xc0..=0xc5 => (Op::Wmmx, 1),
        0xc6 | 0xc7 => two(&|x| {
            if op == 0xc7 && (x == 0 || x & 0xf0 != 0) {
                Op::Spare
            } else {
                Op::Wmmx
            }
        }),
        _ => (Op::Unsupported, 1),
    }
}

/// `0xb2` + uleb128: `vsp = vsp + 0x204 + (uleb128 << 2)`; at most 9 bytes of uleb128, as
/// readelf reads.
fn decode_uleb_vsp(b: &[u8]) -> (Op, usize) {
    let mut value: u64 = 0;
    for (i, &byte) in b.iter().enumerate().skip(1).take(9) {
        value |= u64::from(byte & 0x7f) << (7 * (i - 1));
        if byte & 0x80 == 0 {
            let add = value
                .checked_mul(4)
                .and_then(|v| v.checked_add(0x204))
                .and_then(|v| u32::try_from(v).ok());
            return match add {
                Some(n) => (Op::VspAdd(n), i + 1),
                None => (Op::CorruptVsp, i + 1),
            };
        }
    }
    if b.len() > 10 {
        (Op::CorruptVsp, 10)
    } else {
        (Op::Truncated, b.len())
    }
}

/// Writes `pop {rA, rB, ...}` for a core register mask.
fn write_core_pop(f: &mut fmt::Formatter<'_>, mask: u16) -> fmt::Result {
    f.write_str("pop {")?;
    let mut first = true;
    for r in (0..16).filter(|r| mask & (1 << r) != 0) {
        if !first {
            f.write_str(", ")?;
        }
        first = false;
        write!(f, "r{r}")?;
    }
    f.write_str("}")
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::VspAdd(n) => write!(f, "vsp = vsp + {n}"),
            Op::VspSub(n) => write!(f, "vsp = vsp - {n}"),
            Op::Refuse => f.write_str("Refuse to unwind"),
            Op::Pop(mask) => write_core_pop(f, mask),
            Op::VspFromReg(n) => write!(f, "vsp = r{n}"),
            Op::Finish => f.write_str("finish"),
            Op::PopVfp { first, count, .. } => {
                write!(f, "pop {{D{first}")?;
                if count > 1 {
                    write!(f, "-D{}", u32::from(first) + u32::from(count) - 1)?;
                }
                f.write_str("}")
            }
            Op::PopRaAuthCode => f.write_str("pop {ra_auth_code}"),
            Op::PacModifier => f.write_str("vsp as modifier for PAC validation"),
            Op::Reserved => f.write_str("[Reserved]"),
            Op::Spare => f.write_str("[Spare]"),
            Op::Wmmx => f.write_str("iWMMXt pop"),
            Op::Unsupported => f.write_str("[unsupported opcode]"),
            Op::Truncated => f.write_str("[Truncated opcode]"),
            Op::CorruptVsp => f.write_str("corrupt change to vsp"),
        }
    }
}

/// The text of an iWMMXt opcode, as readelf prints it.
fn write_wmmx(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    match bytes {
        [op @ 0xc0..=0xc5] => {
            f.write_str("pop {wR10")?;
            if op & 0x07 != 0 {
                write!(f, "-wR{}", 10 + (op & 0x07))?;
            }
            f.write_str("}")
        }
        [0xc6, x] => {
            write!(f, "pop {{wR{}", x >> 4)?;
            if x & 0x0f != 0 {
                write!(f, "-wR{}", (x >> 4) + (x & 0x0f))?;
            }
            f.write_str("}")
        }
        [0xc7, x] => {
            f.write_str("pop {")?;
            let regs = (0..4).filter(|i| x & (1 << i) != 0);
            for (n, r) in regs.enumerate() {
                let sep = if n == 0 { "" } else { ", " };
                write!(f, "{sep}wCGR{r}")?;
            }
            f.write_str("}")
        }
        _ => f.write_str("iWMMXt pop"),
    }
}

impl fmt::Display for Instr {
    /// `readelf -u`'s line without its two leading spaces: each byte as `0x%02x `, then the
    /// text; the one-byte opcodes other than the FSTMFDX/VPUSH D8 pops have their text
    /// indented by five more spaces, as binutils prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.bytes {
            write!(f, "0x{b:02x} ")?;
        }
        let one_byte_d8 = matches!(self.bytes.first(), Some(0xb8..=0xbf | 0xd0..=0xd7));
        if self.bytes.len() == 1 && !one_byte_d8 && self.op != Op::Truncated {
            f.write_str("     ")?;
        }
        match self.op {
            Op::Wmmx => write_wmmx(f, &self.bytes),
            // readelf says so on stderr, after the bytes.
            Op::CorruptVsp => Ok(()),
            op => write!(f, "{op}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: &[u8]) -> Vec<String> {
        decode(bytes).iter().map(ToString::to_string).collect()
    }

    /// Every opcode class prints as binutils 2.40's `readelf -u` prints it (lines taken
    /// from its output on a hand-written `.unwind_raw` table).
    #[test]
    fn display_opcodes_match_readelf_text() {
        assert_eq!(
            text(&[0x00, 0x3f, 0x40, 0x7f, 0x97]),
            [
                "0x00      vsp = vsp + 4",
                "0x3f      vsp = vsp + 256",
                "0x40      vsp = vsp - 4",
                "0x7f      vsp = vsp - 256",
                "0x97      vsp = r7"
            ]
        );
        assert_eq!(
            text(&[0x80, 0x00, 0x8f, 0xff, 0x84, 0x08]),
            [
                "0x80 0x00 Refuse to unwind",
                "0x8f 0xff pop {r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15}",
                "0x84 0x08 pop {r7, r14}"
            ]
        );
        assert_eq!(
            text(&[0x9d, 0xa0, 0xaf, 0xb0, 0xb1, 0x00, 0xb1, 0x0f]),
            [
                "0x9d      [Reserved]",
                "0xa0      pop {r4}",
                "0xaf      pop {r4, r5, r6, r7, r8, r9, r10, r11, r14}",
                "0xb0      finish",
                "0xb1 0x00 [Spare]",
                "0xb1 0x0f pop {r0, r1, r2, r3}"
            ]
        );
        assert_eq!(
            text(&[0xb2, 0x00, 0xb2, 0x81, 0x01, 0xb3, 0x12, 0xb8, 0xbf, 0xc9, 0x87]),
            [
                "0xb2 0x00 vsp = vsp + 516",
                "0xb2 0x81 0x01 vsp = vsp + 1032",
                "0xb3 0x12 pop {D1-D3}",
                "0xb8 pop {D8}",
                "0xbf pop {D8-D15}",
                "0xc9 0x87 pop {D8-D15}"
            ]
        );
        assert_eq!(
            text(&[0xc0, 0xc5, 0xc6, 0x12, 0xc7, 0x0f, 0xc7, 0x10, 0xc8, 0x12, 0xd0, 0xd8]),
            [
                "0xc0      pop {wR10}",
                "0xc5      pop {wR10-wR15}",
                "0xc6 0x12 pop {wR1-wR3}",
                "0xc7 0x0f pop {wCGR0, wCGR1, wCGR2, wCGR3}",
                "0xc7 0x10 [Spare]",
                "0xc8 0x12 pop {D17-D19}",
                "0xd0 pop {D8}",
                "0xd8      [unsupported opcode]"
            ]
        );
    }

    /// A two-byte opcode or a uleb128 cut off by the end of the bytes decodes as truncated,
    /// a uleb128 of more than 9 bytes as corrupt; neither reads past the end.
    #[test]
    fn decode_opcodes_truncated_and_corrupt() {
        assert_eq!(decode(&[0x84])[0].op, Op::Truncated);
        assert_eq!(decode(&[0xb1])[0].op, Op::Truncated);
        assert_eq!(decode(&[0xb2, 0x80, 0x80])[0].op, Op::Truncated);
        let long = [
            0xb2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(decode(&long)[0].op, Op::CorruptVsp);
        // 0xb2 with a value that does not fit 32 bits.
        let big = [0xb2, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(decode(&big)[0].op, Op::CorruptVsp);
        assert_eq!(decode(&[]), []);
    }
}
