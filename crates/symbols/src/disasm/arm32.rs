//! 32-bit Arm disassembly: A32, Thumb-2 (with its IT blocks) and data in code, by the runs
//! the mapping symbols give, printed as objdump prints them (UAL aliases `lsl`, `neg`).

use super::Decoded;
use crate::arch::ArmMode;
use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};
use yaxpeax_arm::armv7::{ConditionCode, InstDecoder, Instruction};

/// 32-bit Arm: each run of `bytes` (at `addr`) decoded in its mode, A32 where no run says.
pub(super) fn decode(bytes: &[u8], addr: u64, runs: &[(u64, ArmMode)]) -> Vec<Decoded> {
    let end = addr.saturating_add(bytes.len() as u64);
    let mut out = Vec::new();
    let first = runs.first().map_or(end, |r| r.0.clamp(addr, end));
    let before = std::iter::once((addr, first, ArmMode::Arm));
    let bounds = runs.iter().enumerate().map(|(i, r)| {
        let to = runs.get(i + 1).map_or(end, |n| n.0);
        (r.0.clamp(addr, end), to.clamp(addr, end), r.1)
    });
    for (from, to, mode) in before.chain(bounds).filter(|(f, t, _)| f < t) {
        let chunk = &bytes[(from - addr) as usize..(to - addr) as usize];
        match mode {
            ArmMode::Arm => decode_a32(chunk, from, &mut out),
            ArmMode::Thumb => decode_t32(chunk, from, &mut out),
            ArmMode::Data => data_words(chunk, from, &mut out),
        }
    }
    out
}

/// A32 words; a tail of fewer than 4 bytes is `(bad)`.
fn decode_a32(bytes: &[u8], addr: u64, out: &mut Vec<Decoded>) {
    // Nonconforming encodings are `(bad)`: yaxpeax-arm 0.5 accepts an LDRD/STRD with Rt = 15
    // and then panics making its Rt + 1 (a fuzzer find: `0x0000ffff`).
    let d = InstDecoder::default().allow_nonconforming(false);
    for (i, word) in bytes.chunks(4).enumerate() {
        let text = match d.decode(&mut U8Reader::new(word)) {
            Ok(inst) if word.len() == 4 => {
                let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                objdump_name(inst.to_string(), Form::a32(w, &inst))
            }
            _ => "(bad)".into(),
        };
        out.push((addr + 4 * i as u64, word.len(), text));
    }
}

/// The length of the Thumb instruction whose first halfword is `hw`: 4 when its top five
/// bits are 0b11101, 0b11110 or 0b11111 (Arm ARM A6.1), else 2.
fn thumb_len(hw: u16) -> usize {
    if hw >> 11 >= 0b11101 {
        4
    } else {
        2
    }
}

/// Thumb-2 instructions of 2 or 4 bytes; a cut one is `(bad)` to the end. The instructions
/// an `IT` makes conditional are shown with their condition, as objdump does.
fn decode_t32(bytes: &[u8], addr: u64, out: &mut Vec<Decoded>) {
    let d = InstDecoder::default_thumb();
    let mut it = ItState::default();
    let mut off = 0usize;
    while off < bytes.len() {
        let rest = &bytes[off..];
        let (len, hw) = match rest {
            [a, b, ..] => {
                let hw = u16::from_le_bytes([*a, *b]);
                (thumb_len(hw).min(rest.len()), hw)
            }
            _ => (rest.len(), 0),
        };
        let inst = &rest[..len];
        let cond = it.next();
        let text = match d.decode(&mut U8Reader::new(inst)) {
            Ok(mut i) if len >= 2 && i.len().to_const() as usize == len => {
                if let Some(c) = cond {
                    in_it_block(&mut i, c);
                }
                let text = objdump_name(i.to_string(), Form::t32(hw, len, &i));
                if len == 2 {
                    it = ItState::of(hw).unwrap_or(it);
                }
                text
            }
            _ => "(bad)".into(),
        };
        out.push((addr + off as u64, len, text));
        off += len;
    }
}

/// The state of an `IT` block: `ITSTATE` of the Arm ARM (A2.5.2), the condition in its top
/// four bits and what follows in the low four; 0 outside a block.
#[derive(Debug, Default, Clone, Copy)]
struct ItState(u8);

impl ItState {
    /// The state an `IT` instruction (`0xbfXY`, mask Y not 0) starts; `None` for any other.
    fn of(hw: u16) -> Option<Self> {
        (hw & 0xff00 == 0xbf00 && hw & 0xf != 0).then_some(Self(hw as u8))
    }

    /// The condition of the next instruction (inside a block), and the state advanced past it.
    fn next(&mut self) -> Option<u8> {
        if self.0 & 0xf == 0 {
            self.0 = 0;
            return None;
        }
        let cond = self.0 >> 4;
        self.0 = if self.0 & 0x7 == 0 {
            0
        } else {
            (self.0 & 0xe0) | ((self.0 << 1) & 0x1f)
        };
        Some(cond)
    }
}

/// An instruction inside an IT block: conditional on `cond`, and a 16-bit one does not set
/// the flags it sets outside (`adds` there is `add<c>`).
fn in_it_block(i: &mut Instruction, cond: u8) {
    i.condition = condition(cond);
    if !i.wide {
        i.s = false;
    }
}

/// The condition code of the 4-bit field `c` (`0b1110`, `0b1111`: always).
fn condition(c: u8) -> ConditionCode {
    use ConditionCode::*;
    const CODES: [ConditionCode; 14] = [EQ, NE, HS, LO, MI, PL, VS, VC, HI, LS, GE, LT, GT, LE];
    CODES.get(usize::from(c)).copied().unwrap_or(AL)
}

/// What the encoding of an instruction says about its name, which its text does not.
#[derive(Debug, Clone, Copy)]
struct Form {
    /// The 16-bit immediate move (A32 `0x03000000`, T32 T3).
    movw: bool,
    /// The 12-bit immediate `addw`/`subw` (T32 T4), objdump's name for them.
    wide_imm: bool,
    /// A Thumb instruction, and a 16-bit one.
    thumb: bool,
    thumb16: bool,
    /// The `nop` objdump names: 16-bit Thumb `mov r8, r8` (0x46c0), A32 `mov r0, r0`.
    nop: bool,
    /// T32 `mov.w rd, rm, SHIFT #n` (T3, `0xea4f`), which yaxpeax names by the shift.
    mov_shift: bool,
    /// Its condition.
    cond: ConditionCode,
}

impl Form {
    /// Of the A32 instruction `word`.
    fn a32(word: u32, inst: &Instruction) -> Self {
        Self {
            movw: word & 0x0ff0_0000 == 0x0300_0000,
            wide_imm: false,
            thumb: false,
            thumb16: false,
            nop: word == 0xe1a0_0000,
            mov_shift: false,
            cond: inst.condition,
        }
    }

    /// Of the Thumb instruction of `len` bytes whose first halfword is `hw`.
    fn t32(hw: u16, len: usize, inst: &Instruction) -> Self {
        Self {
            // MOVW T3: 11110 i 10 0100 imm4; ADDW T4: 11110 i 10 0000 Rn; SUBW T4: ... 1010 Rn.
            movw: len == 4 && hw & 0xfbf0 == 0xf240,
            wide_imm: len == 4 && matches!(hw & 0xfbf0, 0xf200 | 0xf2a0),
            thumb: true,
            thumb16: len == 2,
            nop: len == 2 && hw == 0x46c0,
            mov_shift: len == 4 && hw & 0xffef == 0xea4f,
            cond: inst.condition,
        }
    }
}

/// The name objdump prints: the UAL aliases of [`ual_alias`], and the carry conditions as
/// `cs`/`cc` where yaxpeax says `hs`/`lo` (`bcs`, `movcc`).
fn objdump_name(text: String, form: Form) -> String {
    let text = ual_alias(text, form);
    let carry = match form.cond {
        ConditionCode::HS => "cs",
        ConditionCode::LO => "cc",
        _ => return text,
    };
    let (mnemonic, rest) = text.split_at(text.find(' ').unwrap_or(text.len()));
    let (base, wide) = match mnemonic.strip_suffix(".w") {
        Some(b) => (b, ".w"),
        None => (mnemonic, ""),
    };
    match base.len().checked_sub(2).and_then(|at| base.get(..at)) {
        Some(stem) if base.ends_with("hs") || base.ends_with("lo") => {
            format!("{stem}{carry}{wide}{rest}")
        }
        _ => text,
    }
}

/// The Thumb names objdump (binutils 2.40) prints where yaxpeax's differ: `ldmia`/`stmia`
/// for `ldm`/`stm`, the 32-bit `pop`/`push` as what they are (`ldmia.w sp!`, `stmdb.w sp!`,
/// and `ldr.w`/`str.w` for one register), `add rd, pc, #imm` for the 16-bit `adr`, `nop`.
fn thumb_name(mnemonic: &str, operands: &str, form: Form) -> Option<String> {
    let single = !operands.contains(',');
    let renamed = match mnemonic.split_once('.').map_or(mnemonic, |m| m.0) {
        "ldm" => "ldmia",
        "stm" => "stmia",
        "pop" if !form.thumb16 && single => "ldr",
        "push" if !form.thumb16 && single => "str",
        "pop" if !form.thumb16 => "ldmia",
        "push" if !form.thumb16 => "stmdb",
        "adr" if form.thumb16 => "add",
        _ => return None,
    };
    let wide = if form.thumb16 { "" } else { ".w" };
    Some(format!("{renamed}{wide} {operands}"))
}

/// The UAL name objdump prints instead of yaxpeax's text: in A32 `mov rd, rm, lsl #n` is
/// `lsl rd, rm, #n` (and `lsr`, `asr`, `ror`, `rrx`, by register too), the 16-bit Thumb
/// `rsbs rd, rm, #0` is `negs rd, rm`, the 16-bit immediate move is `movw`, the 12-bit
/// immediate add and subtract are `addw` and `subw`, and [`thumb_name`].
fn ual_alias(text: String, form: Form) -> String {
    let (mnemonic, operands) = text.split_once(' ').unwrap_or((&text, ""));
    if form.nop {
        return "nop".into();
    }
    if form.mov_shift {
        let ops: Vec<&str> = operands.split(", ").collect();
        for kind in ["lsl", "lsr", "asr", "ror"] {
            if let (Some(rest), [rd, rm, n]) = (mnemonic.strip_prefix(kind), &ops[..]) {
                return format!("mov{rest} {rd}, {rm}, {kind} {n}");
            }
        }
    }
    if form.wide_imm {
        for op in ["add", "sub", "adr"] {
            if let Some(rest) = mnemonic.strip_prefix(op) {
                let op = if op == "adr" { "add" } else { op };
                return format!("{op}w{rest} {operands}");
            }
        }
    }
    if form.thumb {
        if let Some(name) = thumb_name(mnemonic, operands, form) {
            return name;
        }
    }
    let ops: Vec<&str> = operands.split(", ").collect();
    if let Some(rest) = mnemonic.strip_prefix("mov") {
        if form.movw {
            return format!("movw{rest} {operands}");
        }
        if let ([rd, rm, shift], false) = (&ops[..], form.thumb) {
            let (rd, rm, shift) = (*rd, *rm, *shift);
            if shift == "rrx" {
                return format!("rrx{rest} {rd}, {rm}");
            }
            if let Some((kind, amount)) = shift.split_once(' ') {
                if ["lsl", "lsr", "asr", "ror"].contains(&kind) {
                    return format!("{kind}{rest} {rd}, {rm}, {amount}");
                }
            }
        }
    }
    if let Some(rest) = mnemonic.strip_prefix("rsb") {
        if let [rd, rm, "#0" | "0x0"] = ops[..] {
            if form.thumb16 {
                return format!("neg{rest} {rd}, {rm}");
            }
        }
    }
    text
}

/// Data in code (`$d`: literal pools, jump tables) in the units objdump shows it in: up to
/// the next 4-byte boundary and the end of the run, 3 bytes split into a 1 and a 2.
fn data_words(bytes: &[u8], addr: u64, out: &mut Vec<Decoded>) {
    let mut off = 0usize;
    while off < bytes.len() {
        let at = addr + off as u64;
        let mut len = (4 - (at & 3) as usize).min(bytes.len() - off);
        if len == 3 {
            len = if at & 1 == 1 { 1 } else { 2 };
        }
        let b = &bytes[off..off + len];
        let text = match *b {
            [a, b, c, d] => format!(".word\t0x{:08x}", u32::from_le_bytes([a, b, c, d])),
            [a, b] => format!(".short\t0x{:04x}", u16::from_le_bytes([a, b])),
            [a] => format!(".byte\t0x{a:02x}"),
            // Not reached: a unit is 1, 2 or 4 bytes.
            _ => "(bad)".into(),
        };
        out.push((at, len, text));
        off += len;
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::ArmMode::{Arm, Data, Thumb};

    /// The address, length and mnemonic of each decoded unit.
    fn listing(bytes: &[u8], addr: u64, runs: &[(u64, ArmMode)]) -> Vec<(u64, usize, String)> {
        decode(bytes, addr, runs)
            .into_iter()
            .map(|(a, l, t)| (a, l, t.split_whitespace().next().unwrap_or("").to_string()))
            .collect()
    }

    /// Thumb: 16- and 32-bit instructions get their lengths, an `ite` block its conditions
    /// (and its 16-bit `subs` loses the `s`), a cut or undefined one is `(bad)`.
    /// Fuzzer find (issue 36's 600 s runs): LDRD/STRD words with Rt = 15 made yaxpeax-arm
    /// panic (`register number out of range`); they are `(bad)` now, real code still decodes.
    #[test]
    fn decode_a32_ldrd_rt15_bad_not_panic() {
        for w in [
            0x0000_ffffu32,
            0x0000_fff1,
            0x0001_ffff,
            0x016f_ffff,
            0x0000_f2ff,
        ] {
            let out = decode(&w.to_le_bytes(), 0x1000, &[]);
            assert_eq!(out[0].2, "(bad)", "{w:#010x}");
        }
        // ldrd r2, r3, [r0]: e1c020d0
        let out = decode(&0xe1c0_20d0u32.to_le_bytes(), 0x1000, &[]);
        assert!(out[0].2.starts_with("ldrd"), "{out:?}");
    }

    #[test]
    fn decode_arm32_thumb_lengths_it_block_bad() {
        // cmp r0, r1; ite gt; subs r0, r0, r1; subs r0, r1, r0; ldr.w ip, [pc, #36];
        // subs r0, r1, r0 (after the block); an undefined 32-bit one; a cut 32-bit one.
        let code = [
            0x88, 0x42, 0xcc, 0xbf, 0x40, 0x1a, 0x08, 0x1a, 0xdf, 0xf8, 0x24, 0xc0, 0x08, 0x1a,
            0xf7, 0xf7, 0xf0, 0xa0, 0xdf, 0xf8,
        ];
        let got = listing(&code, 0x1000, &[(0x1000, Thumb)]);
        let want = [
            (0x1000, 2, "cmp"),
            (0x1002, 2, "ite"),
            (0x1004, 2, "subgt"),
            (0x1006, 2, "suble"),
            (0x1008, 4, "ldr.w"),
            (0x100c, 2, "subs"),
            (0x100e, 4, "(bad)"),
            (0x1012, 2, "(bad)"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(a, l, t)| (*a, *l, t.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    /// Runs switch modes where the mapping symbols say; data is shown in objdump's units,
    /// an A32 word that is no instruction is `(bad)`, a cut one too.
    #[test]
    fn decode_arm32_runs_data_units_bad() {
        // $t: tbb [pc, r0]; $d: 7 bytes of table up to a `$d` at 0x56f; $a: mov r0, r0, lsl #3;
        // an undefined word; two bytes.
        let mut code = vec![0xdf, 0xe8, 0x00, 0xf0];
        code.extend([0x0a, 0x10, 0x17, 0x1d, 0x24, 0x2a, 0x04, 0x00]);
        code.extend([0x80, 0x01, 0xa0, 0xe1, 0xff, 0xff, 0xff, 0xff, 0x1e, 0xff]);
        let runs = [(0x564, Thumb), (0x568, Data), (0x56f, Data), (0x570, Arm)];
        let got = listing(&code, 0x564, &runs);
        let want = [
            (0x564, 4, "tbb"),
            (0x568, 4, ".word"),
            (0x56c, 2, ".short"),
            (0x56e, 1, ".byte"),
            (0x56f, 1, ".byte"),
            (0x570, 4, "lsl"),
            (0x574, 4, "(bad)"),
            (0x578, 2, "(bad)"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(a, l, t)| (*a, *l, t.to_string()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            decode(&code[4..8], 0x568, &[(0x568, Data)])[0].2,
            ".word\t0x1d17100a"
        );
    }

    /// Without runs the bytes are A32, as objdump shows code no mapping symbol covers.
    #[test]
    fn decode_arm32_no_runs_is_arm() {
        let got = listing(&[0x1e, 0xff, 0x2f, 0xe1], 0, &[]);
        assert_eq!(got, [(0, 4, "bx".to_string())]);
    }
}
