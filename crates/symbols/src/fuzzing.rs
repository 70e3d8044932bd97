//! Entry points for the cargo-fuzz targets in `fuzz/` and the robustness tests: read
//! arbitrary bytes as a bare perf.data or as an archive, with no symbol sources.

use crate::{Capture, HostKernel, Options, Symbolizer};
use std::path::{Path, PathBuf};

/// The input size limit under fuzzing: libFuzzer's RSS limit is 2 GiB, and what the limit
/// guards is tested with generated bombs (`tests/hostile_capture.rs`).
const FUZZ_MAX_INPUT: u64 = 64 << 20;

fn run(bytes: &[u8], name: &str) {
    run_with(bytes, name, Options::default());
}

fn run_with(bytes: &[u8], name: &str, opts: Options) {
    let Ok(mut s) = Symbolizer::new(opts, &mut |_| {}) else {
        return;
    };
    if let Ok(cap) = Capture::from_bytes_limited(Path::new(name), bytes, FUZZ_MAX_INPUT) {
        let _ = s.symbolize(&cap, &mut |_| {});
    }
}

/// Splits `b` at a little-endian u32 length prefix (cut to what is there).
fn take_prefixed<'a>(b: &mut &'a [u8]) -> &'a [u8] {
    let Some((len, rest)) = b.split_first_chunk::<4>() else {
        let all = *b;
        *b = &[];
        return all;
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (head, tail) = rest.split_at(len);
    *b = tail;
    head
}

/// Builds a valid `.kprof.tar.gz` of arbitrary members and reads it as `report` does, so
/// that the fuzzer mutates the manifest, kallsyms and perf.data themselves instead of gzip
/// bytes whose CRC rejects nearly every mutation. Input: a flags byte, a u32 length and
/// that many bytes of `manifest.json`, a u32 length and that many bytes of `kallsyms`, then
/// `perf.data`. Flag bit 0: set the manifest's perf_data size and SHA-256 to the member's
/// (when it is a JSON object), so that mutated records get past the digest check; bit 1:
/// no kallsyms member; bit 2: no manifest member. The kernel's release is tried as
/// `vmlinux-RELEASE` under a directory that does not exist, as with `report`.
pub fn archive_members(bytes: &[u8]) {
    let Some((&flags, mut rest)) = bytes.split_first() else {
        return;
    };
    let manifest = take_prefixed(&mut rest);
    let kallsyms = take_prefixed(&mut rest);
    let perf = rest;
    let mut fixed = None;
    if flags & 1 != 0 {
        if let Ok(mut m) = serde_json::from_slice::<serde_json::Value>(manifest) {
            if let Some(p) = m.get_mut("perf_data").and_then(|p| p.as_object_mut()) {
                let sha = <sha2::Sha256 as sha2::Digest>::digest(perf);
                p.insert("size".into(), perf.len().into());
                p.insert("sha256".into(), kprof_capture::build_id::hex(&sha).into());
                fixed = serde_json::to_vec(&m).ok();
            }
        }
    }
    let manifest = fixed.as_deref().unwrap_or(manifest);
    let mut members: Vec<(&str, &[u8])> = Vec::new();
    if flags & 4 == 0 {
        members.push((kprof_capture::MANIFEST, manifest));
    }
    members.push((kprof_capture::PERF_DATA, perf));
    if flags & 2 == 0 {
        members.push((kprof_capture::KALLSYMS, kallsyms));
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        if tar.append_data(&mut h, name, data).is_err() {
            return;
        }
    }
    let Ok(archive) = tar.into_inner().and_then(|gz| gz.finish()) else {
        return;
    };
    let opts = Options {
        host_kernel: Some(HostKernel {
            build_id: None,
            kallsyms: None,
            vmlinux_dir: Some(PathBuf::from("/nonexistent/kprof-fuzz/boot")),
            nodename: None,
        }),
        ..Options::default()
    };
    run_with(&archive, "fuzz.kprof.tar.gz", opts);
}

/// The input of [`archive_members`] for these members, with `flags`.
pub fn archive_members_input(flags: u8, manifest: &[u8], kallsyms: &[u8], perf: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    for part in [manifest, kallsyms] {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(perf);
    out
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
        arm32: None,
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

/// Parses `bytes` as perf.data's HEADER_TRACING_DATA and decodes every format it has against
/// two payloads cut from the same bytes (its start and its second half): errors and missing
/// fields are fine, panics are bugs.
pub fn tracing_data(bytes: &[u8]) {
    if let Ok(td) = crate::tracing_data::parse(bytes) {
        let half = &bytes[bytes.len() / 2..];
        let start = &bytes[..bytes.len().min(64)];
        for f in &td.formats {
            for raw in [half, start] {
                for (_, v) in f.decode(raw, td.big_endian) {
                    let _ = v.to_string();
                }
            }
        }
    }
}

/// The EHABI unwinder on arbitrary tables and stacks: a u16 length and that many bytes of
/// `.ARM.exidx` (at 0x1000), a u16 length and that many bytes of `.ARM.extab` (at 0x2000),
/// 64 bytes of registers r0-r15, then the copied stack. The image is mapped at 0..0x10000;
/// every entry is also decoded.
pub fn exidx(bytes: &[u8]) {
    use crate::exidx::{
        decode, unwind_stack, ExidxSections, ExidxTable, MappedImage, Place, Regs, StackCopy,
    };
    let mut rest = bytes;
    let take16 = |rest: &mut &[u8]| -> Vec<u8> {
        let Some((len, tail)) = rest.split_first_chunk::<2>() else {
            return Vec::new();
        };
        let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
        let (head, tail) = tail.split_at(len);
        *rest = tail;
        head.to_vec()
    };
    let exidx = take16(&mut rest);
    let extab = take16(&mut rest);
    let mut r = [0u32; 16];
    for (i, w) in rest.chunks_exact(4).take(16).enumerate() {
        r[i] = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    }
    let stack = rest.get(64..).unwrap_or_default();
    let Ok(table) = ExidxTable::new(ExidxSections {
        exidx: (0x1000, exidx),
        extab: Some((0x2000, extab)),
        text_end: 0x1_0000,
    }) else {
        return;
    };
    for i in 0..table.len() {
        if let Ok(e) = table.entry(i) {
            for instr in decode(e.kind.ops()) {
                let _ = instr.to_string();
            }
        }
    }
    let mut images = [MappedImage {
        avma: 0..0x1_0000,
        place: Place::Table {
            table: &table,
            bias: 0,
        },
    }];
    let mem = StackCopy {
        sp: r[13],
        bytes: stack,
    };
    let out = unwind_stack(&Regs::sampled(r), &mem, &mut images[..]);
    assert!(out.frames.len() <= crate::exidx::MAX_FRAMES);
}
