//! Entry points for the cargo-fuzz targets in `fuzz/` and the robustness tests: read
//! arbitrary bytes as a bare perf.data or as an archive, with no symbol sources.

use crate::{Capture, Options, Symbolizer};
use std::path::Path;

fn run(bytes: &[u8], name: &str) {
    let Ok(mut s) = Symbolizer::new(Options::default(), &mut |_| {}) else {
        return;
    };
    if let Ok(cap) = Capture::from_bytes(Path::new(name), bytes) {
        let _ = s.symbolize(&cap, &mut |_| {});
    }
}

/// Reads `bytes` as a bare perf.data; errors are fine, panics and aborts are bugs.
pub fn perf_data(bytes: &[u8]) {
    run(bytes, "fuzz.data");
}

/// Reads `bytes` as a kprof archive.
pub fn archive(bytes: &[u8]) {
    run(bytes, "fuzz.kprof.tar.gz");
}

/// Unwinds arbitrary registers and stack bytes with arbitrary CFI: byte 0 picks x86_64 or
/// aarch64, a u16 length and that many bytes of `.debug_frame` follow (describing code at
/// 0x1000.., mapped at 0x40_0000), then 8 bytes each of the PC offset, the frame pointer and
/// the link register, then the copied stack. Ends are fine, panics are bugs.
pub fn unwind(bytes: &[u8]) {
    use crate::elf::Arch;
    use crate::unwind::{Cfi, CfiSections, Place, ProcessUnwinder, UnwindRegs};
    use std::rc::Rc;
    let Some((&arch, rest)) = bytes.split_first() else {
        return;
    };
    let arch = if arch & 1 == 0 {
        Arch::X86_64
    } else {
        Arch::Aarch64
    };
    let Some((len, rest)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (frame, rest) = rest.split_at(len);
    let word = |rest: &mut &[u8]| match rest.split_first_chunk::<8>() {
        Some((w, r)) => {
            *rest = r;
            u64::from_le_bytes(*w)
        }
        None => 0,
    };
    let mut rest = rest;
    let pc_off = word(&mut rest) % 0x2000;
    let fp = word(&mut rest);
    let lr = word(&mut rest);
    let stack = rest;
    let base = 0x40_0000u64;
    let cfi = Cfi::new(CfiSections {
        arch: Some(arch),
        text: Some(0x1000..0x2000),
        debug_frame: Some(frame.to_vec()),
        segments: vec![(0, 0, 0x2000)],
        ..CfiSections::default()
    })
    .map(Rc::new);
    let Some(mut u) = ProcessUnwinder::new(arch) else {
        return;
    };
    let sp = 0x7fff_0000u64;
    let regs = UnwindRegs {
        pc: base + pc_off,
        sp,
        fp,
        lr: Some(lr),
    };
    let _ = cfi.as_ref().map(|c| c.return_address_in_lr(pc_off));
    let out = u.unwind(&regs, stack, &mut |a| {
        if (base..base + 0x2000).contains(&a) {
            match &cfi {
                Some(c) => Place::Cfi {
                    name: "fuzz".into(),
                    avma: base..base + 0x2000,
                    base_avma: base,
                    cfi: c.clone(),
                },
                None => Place::NoCfi("fuzz".into()),
            }
        } else if (0x50_0000..0x60_0000).contains(&a) {
            Place::NoCfi("other".into())
        } else {
            Place::Unmapped
        }
    });
    assert!(!out.frames.is_empty() && out.frames.len() <= 512);
}
