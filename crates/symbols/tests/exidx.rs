//! The EHABI unwinder (`kprof_symbols::exidx`) against the truth: its decoding of every
//! `.ARM.exidx` entry of objects cross-built with Debian's arm-linux-gnueabihf-gcc against
//! binutils' `readelf -u`, and its unwinding of a static program's stack (run under
//! qemu-arm-static) against the return addresses the program itself recorded. Then damaged
//! tables and stacks, which must end the path, never extend it with garbage.
//!
//! Needs gcc-arm-linux-gnueabihf, binutils-arm-linux-gnueabihf, libc6-dev-armhf-cross and
//! qemu-user-static (`ci/apt-packages.txt`); a missing tool fails the test.

use kprof_symbols::exidx::{
    decode, unwind_stack, End, EntryKind, ExidxError, ExidxSections, ExidxTable, MappedImage,
    Place, Regs, StackCopy, Truncation, Unwound,
};
use object::{Object, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const GCC: &str = "arm-linux-gnueabihf-gcc";
const READELF: &str = "arm-linux-gnueabihf-readelf";
const QEMU: &str = "qemu-arm-static";

/// A directory kept for the whole test binary.
fn work() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/exidx")
        .join(name)
}

/// Runs `cmd`, which must succeed; its stdout. A missing program fails with the package
/// that has it.
fn run(cmd: &mut Command, package: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {:?} ({e}): install {package} (apt-get install {package}; \
             ci/apt-packages.txt lists it)",
            cmd.get_program()
        )
    });
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Cross-compiles `src` into `out` with `flags`.
fn cross_cc(flags: &[&str], src: &Path, out: &Path) -> PathBuf {
    run(
        Command::new(GCC).args(flags).arg("-o").arg(out).arg(src),
        "gcc-arm-linux-gnueabihf",
    );
    out.to_path_buf()
}

/// One entry of `readelf -u`: the function address, whether it is `[cantunwind]`, and the
/// opcode lines (without their two leading spaces, trailing blanks trimmed).
#[derive(Debug)]
struct ReadelfEntry {
    addr: u32,
    cantunwind: bool,
    personality: Option<u32>,
    ops: Vec<String>,
}

/// `readelf -u PATH`'s entries. Its exit status is not looked at: it fails after printing
/// the table when an opcode is corrupt (a uleb128 too long), which `opcodes.s` has on
/// purpose.
fn readelf_u(path: &Path) -> Vec<ReadelfEntry> {
    let out = Command::new(READELF)
        .arg("-u")
        .arg(path)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {READELF} ({e}): install binutils-arm-linux-gnueabihf")
        });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Unwind section '.ARM.exidx'"),
        "{READELF} -u {}: no unwind section printed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut out: Vec<ReadelfEntry> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("0x") {
            let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
            out.push(ReadelfEntry {
                addr: u32::from_str_radix(&hex, 16).unwrap(),
                cantunwind: line.ends_with("[cantunwind]"),
                personality: None,
                ops: Vec::new(),
            });
        } else if let (Some(p), Some(e)) = (
            line.strip_prefix("  Personality routine: 0x"),
            out.last_mut(),
        ) {
            let hex: String = p.chars().take_while(char::is_ascii_hexdigit).collect();
            e.personality = u32::from_str_radix(&hex, 16).ok();
        } else if let (Some(op), Some(e)) = (line.strip_prefix("  0x"), out.last_mut()) {
            e.ops.push(format!("0x{}", op.trim_end()));
        }
    }
    out
}

/// Decodes every entry of the EXIDX table of `path` and compares it with `readelf -u`'s;
/// the number of entries whose opcodes were compared.
fn compare_with_readelf(path: &Path) -> usize {
    let table = ExidxTable::from_elf(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_else(|| panic!("{}: no .ARM.exidx", path.display()));
    let truth = readelf_u(path);
    let ours: Vec<u32> = table.functions().collect();
    let theirs: Vec<u32> = truth.iter().map(|e| e.addr).collect();
    assert_eq!(ours, theirs, "{}: function addresses", path.display());
    let mut compared = 0;
    for (i, t) in truth.iter().enumerate() {
        let entry = table
            .entry(i)
            .unwrap_or_else(|e| panic!("{}: entry {i} at {:#x}: {e}", path.display(), t.addr));
        assert_eq!(
            entry.kind == EntryKind::CantUnwind,
            t.cantunwind,
            "{}: entry at {:#x}: {entry:?}",
            path.display(),
            t.addr
        );
        if let Some(p) = t.personality {
            assert!(
                matches!(entry.kind, EntryKind::Generic { personality, .. } if personality == p),
                "{}: entry at {:#x}: {entry:?}, readelf's personality {p:#x}",
                path.display(),
                t.addr
            );
        }
        if t.ops.is_empty() {
            continue;
        }
        let ours: Vec<String> = decode(entry.kind.ops())
            .iter()
            .map(|i| i.to_string().trim_end().to_string())
            .collect();
        assert_eq!(ours, t.ops, "{}: entry at {:#x}", path.display(), t.addr);
        compared += 1;
    }
    compared
}

/// `-O2 -g` objects of GCC, Arm and Thumb-2, with and without frame pointers, whose functions
/// cover the opcode classes GCC emits (leaf, r4-r11 + lr pushes, `vsp = r7`/`r11` for
/// alloca and VLAs, `0xb2` large frames, `0xc9` VFP d8-d15 saves), and static programs with
/// `-fexceptions` cleanups (`__gcc_personality_v0`, also glibc's): each entry decodes as
/// `readelf -u` prints it, generic personality routines at the address it names.
#[test]
fn decode_exidx_gcc_objects_match_readelf() {
    let vfp = ["-mfpu=vfpv3-d16", "-mfloat-abi=hard"];
    let link = [
        "-shared",
        "-nostdlib",
        "-fPIC",
        "-O2",
        "-g",
        "-funwind-tables",
    ];
    let mut total = 0;
    for mode in ["-marm", "-mthumb"] {
        for fp in [&[][..], &["-DFP", "-fno-omit-frame-pointer"][..]] {
            let name = format!("shapes{mode}{}.so", if fp.is_empty() { "" } else { "-fp" });
            let mut flags: Vec<&str> = link.iter().chain(&vfp).copied().collect();
            flags.push(mode);
            flags.extend_from_slice(fp);
            let so = cross_cc(&flags, &data("shapes.c"), &work().join(name));
            let n = compare_with_readelf(&so);
            assert!(n >= 8, "{}: {n} entries compared", so.display());
            total += n;
        }
        let flags = ["-static", "-O2", "-g", "-fexceptions", mode];
        let exe = cross_cc(
            &flags,
            &data("cleanup.c"),
            &work().join(format!("cleanup{mode}")),
        );
        total += compare_with_readelf(&exe);
    }
    assert!(total >= 232, "{total} entries compared");
}

/// Every opcode byte class, including those GCC never emits (iWMMXt, reserved, spare,
/// unsupported, a truncated one, a uleb128 too long), from `.unwind_raw`: as `readelf -u`.
#[test]
fn decode_exidx_every_opcode_matches_readelf() {
    let so = cross_cc(
        &["-shared", "-nostdlib"],
        &data("opcodes.s"),
        &work().join("opcodes.so"),
    );
    assert!(compare_with_readelf(&so) >= 15);
}

/// What the static program of `chain.c` recorded in its innermost function.
#[derive(Debug, Clone)]
struct Dump {
    regs: [u32; 16],
    /// The return addresses of c, b, a and main, innermost first.
    ras: [u32; 4],
    stack: Vec<u8>,
}

/// Builds `chain.c` statically (`-O2 -g -funwind-tables`, `mode`) and runs it under
/// qemu-arm-static: the binary and its dump.
fn chain(mode: &str) -> (PathBuf, Dump) {
    chain_built(mode, true)
}

/// [`chain`], with or without `-funwind-tables`: without, its own functions have no EHABI
/// entry (the linker covers them with glibc's `EXIDX_CANTUNWIND`), only `.debug_frame`, as
/// Yocto's and Buildroot's armv7 packages are built.
fn chain_built(mode: &str, unwind_tables: bool) -> (PathBuf, Dump) {
    // Several tests use the same build in parallel: it is built and run once, so that no
    // test reads a binary or a dump another is rewriting.
    type Built = Vec<(String, PathBuf, Dump)>;
    static BUILT: std::sync::Mutex<Built> = std::sync::Mutex::new(Vec::new());
    let key = format!("{mode}{}", if unwind_tables { "" } else { "-no-tables" });
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe, dump)) = built.iter().find(|(k, _, _)| *k == key) {
        return (exe.clone(), dump.clone());
    }
    let (exe, dump) = build_and_run_chain(&key, mode, unwind_tables);
    built.push((key, exe.clone(), dump.clone()));
    (exe, dump)
}

/// [`chain_built`]'s work: the build and the run under qemu-arm-static.
fn build_and_run_chain(key: &str, mode: &str, unwind_tables: bool) -> (PathBuf, Dump) {
    let exe = work().join(format!("chain{key}"));
    let mut flags = vec![
        "-static",
        mode,
        "-O2",
        "-g",
        "-mfpu=vfpv3-d16",
        "-mfloat-abi=hard",
    ];
    if unwind_tables {
        flags.push("-funwind-tables");
    }
    cross_cc(&flags, &data("chain.c"), &exe);
    let out = work().join(format!("chain{key}.dump"));
    run(Command::new(QEMU).arg(&exe).arg(&out), "qemu-user-static");
    let b = std::fs::read(&out).unwrap();
    let words: Vec<u32> = b
        .chunks_exact(4)
        .take(21)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    let len = words[20] as usize;
    assert_eq!(b.len(), 84 + len, "dump size");
    let dump = Dump {
        regs: words[..16].try_into().unwrap(),
        ras: words[16..20].try_into().unwrap(),
        stack: b[84..].to_vec(),
    };
    (exe, dump)
}

/// The name of the function symbol at or below `addr` (mapping symbols `$a`/`$t`/`$d`
/// skipped).
fn function_at(exe: &[u8], addr: u32) -> Option<String> {
    let obj = object::File::parse(exe).unwrap();
    obj.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| Some((s.address() & !1, s.name().ok()?)))
        .filter(|(start, name)| *start <= u64::from(addr) && !name.starts_with('$'))
        .max_by_key(|(start, _)| *start)
        .map(|(_, name)| name.to_string())
}

fn unwind_dump(table: &ExidxTable, dump: &Dump, stack: &[u8]) -> Unwound {
    let mut images = [MappedImage {
        avma: 0..u32::MAX,
        place: Place::Table { table, bias: 0 },
    }];
    let mem = StackCopy {
        sp: dump.regs[13],
        bytes: stack,
    };
    unwind_stack(&Regs::sampled(dump.regs), &mem, &mut images[..])
}

/// Unwinds the dump of `chain.c` built with `mode`: exactly the recorded return addresses
/// (Thumb bit as the mode of the caller), then libc's frames down to `_start`, whose
/// `EXIDX_CANTUNWIND` ends the path. Then every shorter copy of the stack gives a prefix of
/// that path, ended as truncated.
fn unwind_chain(mode: &str) {
    let (exe, dump) = chain(mode);
    let bytes = std::fs::read(&exe).unwrap();
    let table = ExidxTable::from_elf(&bytes).unwrap().unwrap();
    let full = unwind_dump(&table, &dump, &dump.stack);
    let names: Vec<_> = full
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| function_at(&bytes, f.address - u32::from(i > 0)))
        .collect();
    let raw: Vec<u32> = full
        .frames
        .iter()
        .map(|f| f.address | u32::from(f.thumb))
        .collect();
    assert_eq!(full.frames[0].address, dump.regs[15] & !1, "{names:?}");
    assert_eq!(raw.get(1..5), Some(&dump.ras[..]), "{names:?}");
    assert_eq!(
        names.get(..4).map(|n| n.to_vec()),
        Some(vec![
            Some("c".to_string()),
            Some("b".to_string()),
            Some("a".to_string()),
            Some("main".to_string()),
        ])
    );
    assert_eq!(full.end, End::CantUnwind, "{names:?}");
    assert_eq!(
        names.last().unwrap().as_deref(),
        Some("_start"),
        "{names:?}"
    );
    for cut in (0..dump.stack.len()).step_by(4) {
        let part = unwind_dump(&table, &dump, &dump.stack[..cut]);
        assert!(
            full.frames.starts_with(&part.frames),
            "cut at {cut}: {part:?} is not a prefix of {full:?}"
        );
        if part.frames.len() < full.frames.len() {
            assert!(
                matches!(part.end, End::Truncated(Truncation::StackRead(_))),
                "cut at {cut}: {:?}",
                part.end
            );
        }
    }
}

/// `-mthumb` (Thumb-2, Yocto's armv7 default): main → a (r4-r10, d8-d9) → b (1200-byte
/// frame) → c (VLA, `vsp = r7`), unwound from c's registers and stack copy.
#[test]
fn unwind_exidx_static_thumb_chain() {
    unwind_chain("-mthumb");
}

/// The same program in Arm state (`vsp = r11`), calling Thumb-2 glibc.
#[test]
fn unwind_exidx_static_arm_chain() {
    unwind_chain("-marm");
}

/// glibc's own entries in a static Thumb-2 program (hundreds, hand-written assembly with
/// `EXIDX_CANTUNWIND` among them) decode as `readelf -u` prints them.
#[test]
fn decode_exidx_static_glibc_matches_readelf() {
    let (exe, _) = chain("-mthumb");
    let n = compare_with_readelf(&exe);
    assert!(n >= 100, "{n} entries compared");
}

const TEXT: u32 = 0x8000;
const EXIDX: u32 = 0x1000;
const EXTAB: u32 = 0x2000;
const SP: u32 = 0x7000_0000;

/// A one-image process: `.ARM.exidx` at [`EXIDX`] of `(function, second word)` entries
/// (`Err` of the word: a prel31 to that `.ARM.extab` offset), `.ARM.extab` at [`EXTAB`],
/// code from [`TEXT`] to `TEXT + 0x1000`.
fn sections(entries: &[(u32, Result<u32, u32>)], extab: &[u32]) -> ExidxSections {
    let prel = |from: u32, to: u32| to.wrapping_sub(from) & 0x7fff_ffff;
    let mut exidx = Vec::new();
    for (i, (f, w)) in entries.iter().enumerate() {
        let at = EXIDX + 8 * i as u32;
        let word = w.unwrap_or_else(|off| prel(at + 4, EXTAB + off));
        exidx.extend_from_slice(&prel(at, *f).to_le_bytes());
        exidx.extend_from_slice(&word.to_le_bytes());
    }
    ExidxSections {
        exidx: (EXIDX, exidx),
        extab: Some((EXTAB, extab.iter().flat_map(|w| w.to_le_bytes()).collect())),
        text_end: TEXT + 0x1000,
    }
}

/// Unwinds from pc `TEXT + 0x10` (lr = `TEXT + 0x105`, sp = [`SP`]) over `stack`.
fn walk(table: &Result<ExidxTable, ExidxError>, stack: &[u32]) -> Unwound {
    let place = match table {
        Ok(table) => Place::Table { table, bias: 0 },
        Err(e) => Place::Damaged(e),
    };
    let mut images = [MappedImage {
        avma: TEXT..TEXT + 0x1000,
        place,
    }];
    let bytes: Vec<u8> = stack.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut r = [0u32; 16];
    (r[13], r[14], r[15]) = (SP, TEXT + 0x105, TEXT + 0x10);
    let mem = StackCopy {
        sp: SP,
        bytes: &bytes,
    };
    unwind_stack(&Regs::sampled(r), &mem, &mut images[..])
}

/// The frames of an unwind as addresses.
fn addrs(u: &Unwound) -> Vec<u32> {
    u.frames.iter().map(|f| f.address).collect()
}

/// `.ARM.extab` words, the second function's index word, and whether the end is right.
type Case = (&'static [u32], Result<u32, u32>, fn(&End) -> bool);

/// A good first function (`pop {r4, r14}`, inline) then a damaged second one: each damage
/// ends the path after the first return address with its own end, never a frame more.
#[test]
fn unwind_exidx_bad_tables_end_path() {
    // f0 at TEXT pops {r4, lr}: returns to TEXT+0x105 (Thumb) in f1 at TEXT+0x100.
    let stack = [4, TEXT + 0x105, 0x44, 0x55, TEXT + 0x201, 0, 0];
    let f0 = (TEXT, Ok(0x80a8_b0b0));
    let good = ExidxTable::new(sections(&[f0, (TEXT + 0x100, Ok(1))], &[]));
    let u = walk(&good, &stack);
    assert_eq!(
        (addrs(&u), u.end),
        (vec![TEXT + 0x10, TEXT + 0x104], End::CantUnwind)
    );
    assert!(u.frames[1].thumb && !u.frames[0].thumb);

    // Truncated `.ARM.exidx`: the image's table is unusable from the first frame.
    let mut s = sections(&[f0, (TEXT + 0x100, Ok(1))], &[]);
    s.exidx.1.truncate(13);
    let u = walk(&ExidxTable::new(s), &stack);
    assert_eq!(addrs(&u), [TEXT + 0x10]);
    assert_eq!(u.end, End::BadTable(ExidxError::IndexTruncated { len: 13 }));

    let cases: [Case; 4] = [
        // prel31 pointing outside `.ARM.extab`.
        (&[0x8000_b0b0], Err(0x40), |e| {
            matches!(e, End::BadTable(ExidxError::ExtabOutOfRange { .. }))
        }),
        // Lu16 with a word count past the end of `.ARM.extab`.
        (&[0x8103_b0b0, 0xb0b0_b0b0], Err(0), |e| {
            matches!(
                e,
                End::BadTable(ExidxError::WordCountPastEnd { count: 3, .. })
            )
        }),
        // Unknown opcodes (0xff, then iWMMXt 0xc0).
        (&[0x8000_ffb0], Err(0), |e| {
            matches!(e, End::BadTable(ExidxError::Opcode { .. }))
        }),
        // `pop {r4-r11, r14}` from a stack that holds two more words.
        (
            &[0x8000_afb0],
            Err(0),
            |e| matches!(e, End::Truncated(Truncation::StackRead(a)) if *a == SP + 28),
        ),
    ];
    for (extab, word, ok) in cases {
        let t = ExidxTable::new(sections(&[f0, (TEXT + 0x100, word)], extab));
        let u = walk(&t, &stack);
        assert_eq!(addrs(&u), [TEXT + 0x10, TEXT + 0x104], "{extab:x?}: {u:?}");
        assert!(ok(&u.end), "{extab:x?}: {:?}", u.end);
    }
}

/// Stacks that would loop or lead nowhere: a return address outside every mapping is
/// dropped; a caller whose sp is not above its callee's, a function that needs an unknown
/// lr, an address before the first entry and a zero return address end the path.
#[test]
fn unwind_exidx_bad_stacks_end_path() {
    let f0 = (TEXT, Ok(0x80a8_b0b0)); // pop {r4, r14}
    let leaf = (TEXT + 0x100, Ok(0x80b0_b0b0)); // finish: pc = lr, sp unchanged
    let t = ExidxTable::new(sections(&[f0, leaf], &[]));
    let u = walk(&t, &[4, 0x1234_5679]);
    assert_eq!(
        (addrs(&u), u.end),
        (
            vec![TEXT + 0x10],
            End::Truncated(Truncation::Unmapped(0x1234_5678))
        )
    );
    // f1 is frameless but not the sampled frame: lr there is the return address f0 popped,
    // so f1 "returns" to itself with the same sp.
    let u = walk(&t, &[4, TEXT + 0x105]);
    assert_eq!(u.end, End::Truncated(Truncation::SpNotIncreasing));
    assert_eq!(addrs(&u), [TEXT + 0x10, TEXT + 0x104]);
    // f0 pops pc itself (`pop {r15}`): lr in f1 is not known, and no caller is invented.
    let t = ExidxTable::new(sections(&[(TEXT, Ok(0x8088_00b0)), leaf], &[]));
    let u = walk(&t, &[TEXT + 0x105]);
    assert_eq!(u.end, End::Truncated(Truncation::UnknownRegister(14)));
    assert_eq!(addrs(&u), [TEXT + 0x10, TEXT + 0x104]);
    // f1: `vsp = r4; pop {r14}` with r4 below the sp f0 left: the stack goes backwards.
    let t = ExidxTable::new(sections(&[f0, (TEXT + 0x100, Ok(0x8094_8400))], &[]));
    let u = walk(&t, &[SP, TEXT + 0x105]);
    assert_eq!(u.end, End::Truncated(Truncation::SpNotIncreasing));
    assert_eq!(addrs(&u), [TEXT + 0x10, TEXT + 0x104]);
    // Before the first entry.
    let t = ExidxTable::new(sections(&[(TEXT + 0x80, Ok(1))], &[]));
    let u = walk(&t, &[]);
    assert_eq!((addrs(&u), u.end), (vec![TEXT + 0x10], End::Uncovered));
    // A zero return address is the root.
    let t = ExidxTable::new(sections(&[f0], &[]));
    let u = walk(&t, &[4, 0]);
    assert_eq!((addrs(&u), u.end), (vec![TEXT + 0x10], End::Root));
}

/// Random bytes as tables and stacks, and random damage to a real static binary's tables,
/// never panic and never give more than the frame limit.
#[test]
fn unwind_exidx_random_tables_no_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let len = (next() % 600) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        kprof_symbols::fuzzing::exidx(&bytes);
    }
    let (exe, dump) = chain("-mthumb");
    let bytes = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let (exidx, extab) = (section(&obj, ".ARM.exidx"), section(&obj, ".ARM.extab"));
    for round in 0..300 {
        let mut s = ExidxSections {
            exidx: exidx.clone(),
            extab: Some(extab.clone()),
            text_end: u32::MAX,
        };
        let target = if round % 2 == 0 {
            &mut s.exidx.1
        } else {
            &mut s.extab.as_mut().unwrap().1
        };
        for _ in 0..8 {
            let i = (next() as usize) % target.len();
            target[i] = next() as u8;
        }
        if let Ok(table) = ExidxTable::new(s) {
            let u = unwind_dump(&table, &dump, &dump.stack);
            assert!(u.frames.len() <= kprof_symbols::exidx::MAX_FRAMES, "{u:?}");
        }
    }
}

fn section(obj: &object::File<'_>, name: &str) -> (u32, Vec<u8>) {
    use object::ObjectSection;
    let s = obj.section_by_name(name).unwrap();
    (s.address() as u32, s.data().unwrap().to_vec())
}

/// `strip` keeps `.ARM.exidx`/`.ARM.extab` (allocated sections): the stripped binary gives
/// the same table as the unstripped one. A split debug file (`objcopy --only-keep-debug`)
/// has them as NOBITS: no table, rather than the bytes its program header points at.
#[test]
fn parse_exidx_stripped_and_debug_files() {
    let (exe, _) = chain("-mthumb");
    let stripped = work().join("chain-stripped");
    let debug = work().join("chain.debug");
    let binutils = "binutils-arm-linux-gnueabihf";
    run(
        Command::new("arm-linux-gnueabihf-strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&exe),
        binutils,
    );
    run(
        Command::new("arm-linux-gnueabihf-objcopy")
            .arg("--only-keep-debug")
            .arg(&exe)
            .arg(&debug),
        binutils,
    );
    let table = |p: &Path| ExidxTable::from_elf(&std::fs::read(p).unwrap()).unwrap();
    let full = table(&exe).unwrap();
    let strip = table(&stripped).expect("strip keeps .ARM.exidx");
    assert!(full.len() > 100);
    assert!(full.functions().eq(strip.functions()));
    assert!((0..full.len()).all(|i| full.entry(i) == strip.entry(i)));
    assert!(table(&debug).is_none());
    // readelf decodes fewer entries there: without symbols it cannot tell a generic
    // personality routine is GCC's.
    assert!(compare_with_readelf(&stripped) >= 100);
}

/// The image's `Cfi` as the symbolizer builds it, with or without its `.debug_frame`.
fn process_cfi(bytes: &[u8], debug_frame: bool) -> std::rc::Rc<kprof_symbols::unwind::Cfi> {
    use kprof_symbols::unwind::{sections_of, Cfi};
    let obj = object::File::parse(bytes).unwrap();
    let mut s = sections_of(&obj, None);
    if !debug_frame {
        s.debug_frame = None;
    }
    std::rc::Rc::new(Cfi::new(s).expect("the image's CFI"))
}

/// Unwinds `dump` with `ProcessUnwinder`, the one image `cfi` mapped over the whole space.
fn process_unwind(
    cfi: &std::rc::Rc<kprof_symbols::unwind::Cfi>,
    dump: &Dump,
    stack: &[u8],
) -> kprof_symbols::unwind::Unwound {
    use kprof_symbols::unwind::{self, ProcessUnwinder, UnwindRegs};
    use kprof_symbols::Arch;
    let regs = UnwindRegs::from_perf(Arch::Arm, |n| {
        dump.regs.get(n as usize).map(|&v| u64::from(v))
    })
    .unwrap();
    let mut u = ProcessUnwinder::new(Arch::Arm).expect("an unwinder for 32-bit Arm");
    u.unwind(&regs, stack, &mut |_| unwind::Place::Cfi {
        name: "chain".into(),
        avma: 0..u64::from(u32::MAX),
        base_avma: 0,
        cfi: cfi.clone(),
    })
}

/// The same Thumb-2 dump through what the symbolizer calls for every `--call-graph dwarf`
/// sample: `UnwindRegs::from_perf` of perf's arm register numbers, the image's `Cfi` (its
/// EHABI table alone: `.debug_frame` left out, which would be asked first) and
/// `ProcessUnwinder`. The frames are the recorded return addresses with the Thumb bit
/// cleared, and `_start` ends the path as a root.
#[test]
fn unwind_process_static_thumb_chain_as_symbolizer() {
    use kprof_symbols::unwind;
    use kprof_symbols::Arch;
    let (exe, dump) = chain("-mthumb");
    let bytes = std::fs::read(&exe).unwrap();
    let cfi = process_cfi(&bytes, false);
    assert_eq!(cfi.arch(), Arch::Arm);
    let out = process_unwind(&cfi, &dump, &dump.stack);
    let ras: Vec<u64> = dump.ras.iter().map(|&r| u64::from(r & !1)).collect();
    assert_eq!(out.frames.get(1..5), Some(&ras[..]), "{out:?}");
    assert_eq!(out.end, unwind::End::CantUnwind("chain".into()), "{out:?}");
    let last = *out.frames.last().unwrap() as u32;
    assert_eq!(function_at(&bytes, last - 1).as_deref(), Some("_start"));
    // Without a stack copy the path is the sampled pc and stops, truncated.
    let short = process_unwind(&cfi, &dump, &[]);
    assert_eq!(short.end, unwind::End::Truncated, "{short:?}");
}

/// A static program built as Yocto's and Buildroot's armv7 packages are (`-O2 -g`, no
/// `-funwind-tables`, Thumb-2 and Arm): its own functions have no EHABI entry of their own,
/// only `.debug_frame`. The walk takes c → b → a → main from the DWARF rows, exactly the
/// recorded return addresses, then glibc's EHABI entries down to `_start`. Every shorter
/// stack copy gives a prefix of that path, ended as truncated.
#[test]
fn unwind_process_debug_frame_no_unwind_tables_chain() {
    use kprof_symbols::unwind;
    for mode in ["-mthumb", "-marm"] {
        let (exe, dump) = chain_built(mode, false);
        let bytes = std::fs::read(&exe).unwrap();
        let cfi = process_cfi(&bytes, true);
        let table = ExidxTable::from_elf(&bytes).unwrap().unwrap();
        let c = table.lookup(dump.regs[15] & !1).unwrap().unwrap();
        assert_eq!(
            c.kind,
            EntryKind::CantUnwind,
            "{mode}: c has no entry of its own"
        );
        let full = process_unwind(&cfi, &dump, &dump.stack);
        let ras: Vec<u64> = dump.ras.iter().map(|&r| u64::from(r & !1)).collect();
        assert_eq!(full.frames.get(1..5), Some(&ras[..]), "{mode}: {full:?}");
        let last = *full.frames.last().unwrap() as u32;
        assert_eq!(
            function_at(&bytes, last - 1).as_deref(),
            Some("_start"),
            "{mode}"
        );
        assert_eq!(full.end, unwind::End::CantUnwind("chain".into()), "{mode}");
        for cut in (0..dump.stack.len()).step_by(4) {
            let part = process_unwind(&cfi, &dump, &dump.stack[..cut]);
            assert!(
                full.frames.starts_with(&part.frames),
                "{mode}: cut at {cut}: {part:?} is not a prefix of {full:?}"
            );
            if part.frames.len() < full.frames.len() {
                assert_eq!(part.end, unwind::End::Truncated, "{mode}: cut at {cut}");
            }
        }
    }
}

/// The same program with only its EHABI table (the `.debug_frame` of the build not at
/// hand): c's entry is the linker's `EXIDX_CANTUNWIND`, so the path is c alone and ends as
/// `CantUnwind`, which the symbolizer shows as a root only in the C library's entry code,
/// never the invented end of a complete path.
#[test]
fn unwind_process_exidx_only_no_unwind_tables_stops_at_cantunwind() {
    use kprof_symbols::unwind;
    let (exe, dump) = chain_built("-mthumb", false);
    let bytes = std::fs::read(&exe).unwrap();
    let out = process_unwind(&process_cfi(&bytes, false), &dump, &dump.stack);
    assert_eq!(out.frames, [u64::from(dump.regs[15] & !1)], "{out:?}");
    assert_eq!(out.end, unwind::End::CantUnwind("chain".into()));
}
