//! [`SymbolFile`] and the disassembler on 32-bit Arm executables (Thumb-2 and Arm) built with
//! Debian's `gcc-arm-linux-gnueabihf`, against what its binutils say (`addr2line`,
//! `objdump -d`, `ld`) and what its symbol table holds; the pc-relative REL relocations of a
//! placed object against what `ld` writes.

use super::*;
use object::ObjectSymbol;
use std::process::Command;

/// The functions of `tests/data/arm32/arm32_prog.c` the checks go through.
const FUNCTIONS: &[&str] = &["traverse", "pick", "distance", "scramble", "main"];

/// Runs `tool` with `args`, which must succeed; its stdout.
fn run(tool: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {tool} ({e}): install gcc-arm-linux-gnueabihf and binutils-arm-linux-gnueabihf (ci/apt-packages.txt)")
    });
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The test program built `-O2 -g` with `mode` (`-mthumb`, `-marm`) in a new directory.
fn build(mode: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/arm32/arm32_prog.c");
    let out = dir.path().join("prog");
    run(
        "arm-linux-gnueabihf-gcc",
        &[
            "-O2".as_ref(),
            "-g".as_ref(),
            mode.as_ref(),
            src.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    );
    (dir, out)
}

/// `(value, size)` of the `STT_FUNC` symbol `name` in the ELF at `path`: the value as the
/// symbol table holds it, bit 0 set for Thumb.
fn symtab_function(path: &Path, name: &str) -> (u64, u64) {
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok(name) && s.kind() == object::SymbolKind::Text)
        .unwrap_or_else(|| panic!("{name} not in the symbol table"));
    (sym.address(), sym.size())
}

/// The number of mapping symbols (`$a`, `$t`, `$d`) in the symbol table of `path`.
fn mapping_symbols(path: &Path) -> usize {
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    obj.symbols()
        .filter(|s| {
            s.name()
                .is_ok_and(|n| mapping::arm_mapping_symbol(n).is_some())
        })
        .count()
}

/// `addr2line -f -i` of `addr`: the function names, innermost first.
fn addr2line_functions(path: &Path, addr: u64) -> Vec<String> {
    let text = run(
        "arm-linux-gnueabihf-addr2line",
        &[
            "-f".as_ref(),
            "-i".as_ref(),
            "-e".as_ref(),
            path.as_os_str(),
            format!("{addr:#x}").as_ref(),
        ],
    );
    text.lines().step_by(2).map(str::to_string).collect()
}

/// `objdump -d` of function `name`: `(address, mnemonic)` of each line.
fn objdump_mnemonics(path: &Path, name: &str) -> Vec<(u64, String)> {
    let text = run(
        "arm-linux-gnueabihf-objdump",
        &[
            "-d".as_ref(),
            format!("--disassemble={name}").as_ref(),
            path.as_os_str(),
        ],
    );
    text.lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let addr = u64::from_str_radix(cols.next()?.trim().strip_suffix(':')?, 16).ok()?;
            let _bytes = cols.next()?;
            Some((addr, cols.next()?.trim().to_string()))
        })
        .collect()
}

/// Checks symbol lookups of the functions of the program built with `mode`.
fn check_lookups(mode: &str, thumb: bool) {
    let (_dir, prog) = build(mode);
    let sf = SymbolFile::open(&prog, None, None).unwrap();
    assert_eq!(sf.arch, Arch::Arm);
    for name in FUNCTIONS {
        let (value, size) = symtab_function(&prog, name);
        assert_eq!(value & 1 == 1, thumb, "{name} at {value:#x} ({mode})");
        let start = value & !1;
        assert_eq!(sf.symbol_address(name), Some(start), "{name} ({mode})");
        // An odd address is a return address into Thumb code (LR): the same function.
        for addr in [start, value, (start + size / 2) & !1, start + size - 2] {
            assert_eq!(
                sf.symbol_at(addr),
                Some((*name, start, size)),
                "{name}+{:#x} ({mode})",
                addr - start
            );
        }
        for addr in [start, (start + size / 2) & !1, start + size - 2] {
            let got: Vec<String> = sf.frames(addr).into_iter().filter_map(|f| f.name).collect();
            assert_eq!(
                got,
                addr2line_functions(&prog, addr),
                "{name}+{:#x} ({mode})",
                addr - start
            );
        }
    }
}

/// In a `-mthumb` executable, function symbols (bit 0 set) are found with it cleared, and
/// their inline frames are addr2line's.
#[test]
fn lookup_arm32_thumb_exe_bit0_cleared() {
    check_lookups("-mthumb", true);
}

/// In a `-marm` executable, function symbols and their inline frames are addr2line's.
#[test]
fn lookup_arm32_arm_exe_matches_addr2line() {
    check_lookups("-marm", false);
}

/// No address of a `-mthumb` or `-marm` executable's code is named by a mapping symbol, in
/// the symbol lookup or in any frame.
#[test]
fn lookup_arm32_exe_no_mapping_symbol_names() {
    for mode in ["-mthumb", "-marm"] {
        let (_dir, prog) = build(mode);
        assert!(
            mapping_symbols(&prog) > 10,
            "{mode}: no mapping symbols to hide"
        );
        let sf = SymbolFile::open(&prog, None, None).unwrap();
        let data = std::fs::read(&prog).unwrap();
        let obj = object::File::parse(&data[..]).unwrap();
        let text = obj.section_by_name(".text").expect(".text");
        let mut named = 0;
        for addr in (text.address()..text.address() + text.size()).step_by(2) {
            let names = sf.frames(addr).into_iter().filter_map(|f| f.name);
            for name in names.chain(sf.symbol_at(addr).map(|s| s.0.to_string())) {
                assert!(!name.starts_with('$'), "{mode}: {addr:#x} named {name}");
                named += 1;
            }
        }
        assert!(named > 100, "{mode}: only {named} names");
    }
}

/// What `objdump -d` and the annotate disassembly both show of one instruction: the
/// mnemonic, without the `.n`/`.w` width qualifier objdump adds to say which encoding of
/// the same instruction was used.
fn mnemonic(text: &str) -> &str {
    let m = text.split_whitespace().next().unwrap_or("");
    m.strip_suffix(".n")
        .or_else(|| m.strip_suffix(".w"))
        .unwrap_or(m)
}

/// Checks the disassembly of the functions of the program built with `mode` against objdump.
fn check_disassembly(mode: &str) {
    let (_dir, prog) = build(mode);
    let sf = SymbolFile::open(&prog, None, None).unwrap();
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for name in FUNCTIONS {
        let (start, size) = sf
            .symbol_at(sf.symbol_address(name).unwrap())
            .map(|s| (s.1, s.2))
            .unwrap();
        let code = sf.code(start, start + size).expect("code bytes");
        let ours: Vec<(u64, String)> =
            crate::disasm::decode(sf.arch, code, start, &sf.arm_runs(start, start + size))
                .into_iter()
                .map(|(a, _, t)| (a, mnemonic(&t).to_string()))
                .collect();
        let theirs: Vec<(u64, String)> = objdump_mnemonics(&prog, name)
            .into_iter()
            .map(|(a, t)| (a, mnemonic(&t).to_string()))
            .collect();
        assert_eq!(
            ours.iter().map(|i| i.0).collect::<Vec<_>>(),
            theirs.iter().map(|i| i.0).collect::<Vec<_>>(),
            "{name} ({mode}): instruction addresses"
        );
        for (o, t) in ours.iter().zip(&theirs) {
            compared += 1;
            if o.1 != t.1 {
                mismatches.push(format!(
                    "{name}+{:#x}: {} vs objdump {}",
                    o.0 - start,
                    o.1,
                    t.1
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{mode}:\n{}", mismatches.join("\n"));
    assert!(compared > 40, "{mode}: only {compared} instructions");
}

/// The annotate disassembly of a `-mthumb` executable (Thumb-2, its data) has objdump's
/// instruction boundaries and mnemonics.
#[test]
fn annotate_arm32_thumb_exe_mnemonics_match_objdump() {
    check_disassembly("-mthumb");
}

/// The annotate disassembly of a `-marm` executable has objdump's mnemonics.
#[test]
fn annotate_arm32_arm_exe_mnemonics_match_objdump() {
    check_disassembly("-marm");
}

/// The object of the test program, built like a module with unwind tables
/// (`-ffunction-sections -funwind-tables -mthumb`), and a copy of it linked by GNU ld with
/// every allocated section at the address `placement` gives it.
fn linked_object() -> (tempfile::TempDir, PathBuf, PathBuf, Placement) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/arm32/arm32_prog.c");
    let obj_path = dir.path().join("prog.o");
    let flags = [
        "-O2",
        "-g",
        "-c",
        "-mthumb",
        "-ffunction-sections",
        "-funwind-tables",
    ];
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(|f| f.as_ref()).collect();
    args.extend([src.as_os_str(), "-o".as_ref(), obj_path.as_os_str()]);
    run("arm-linux-gnueabihf-gcc", &args);
    let data = std::fs::read(&obj_path).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let mut placement = Placement::new();
    let mut script = String::from("SECTIONS {\n");
    let mut cursor = 0x1_0000u64;
    for sec in obj
        .sections()
        .filter(|s| placement::is_alloc(s) && s.size() > 0)
    {
        let name = sec.name().unwrap().to_string();
        script += &format!("  {name} {cursor:#x} : {{ *({name}) }}\n");
        placement.insert(name, cursor);
        cursor = (cursor + sec.size() + 0x40).div_ceil(0x100) * 0x100;
    }
    script += "}\n";
    let ld_script = dir.path().join("place.ld");
    std::fs::write(&ld_script, script).unwrap();
    let linked = dir.path().join("prog.linked");
    run(
        "arm-linux-gnueabihf-ld",
        &[
            "-T".as_ref(),
            ld_script.as_os_str(),
            "--unresolved-symbols=ignore-all".as_ref(),
            "-o".as_ref(),
            linked.as_os_str(),
            obj_path.as_os_str(),
        ],
    );
    (dir, obj_path, linked, placement)
}

/// The REL relocations `R_ARM_REL32` (literal pools) and `R_ARM_PREL31` (`.ARM.exidx`) of a
/// Thumb object placed at chosen addresses give the words GNU ld writes linking it there.
#[test]
fn relocate_arm32_rel32_prel31_match_ld() {
    use object::elf::{R_ARM_PREL31, R_ARM_REL32};
    let (_dir, obj_path, linked, placement) = linked_object();
    let data = std::fs::read(&obj_path).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let linked_data = std::fs::read(&linked).unwrap();
    let linked = object::File::parse(&linked_data[..]).unwrap();
    let addrs = section_addresses(&obj, Some(&placement));
    let word = |b: &[u8], off: usize| u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
    let mut seen = std::collections::BTreeMap::new();
    for sec in obj.sections() {
        let name = sec.name().unwrap();
        let Some(theirs) = linked.section_by_name(name) else {
            continue;
        };
        let theirs = theirs.data().unwrap();
        // ld rewrites some `.ARM.exidx` tables (merging entries): those are not comparable.
        if theirs.len() as u64 != sec.size() {
            continue;
        }
        let ours = relocate(&obj, &sec, sec.data().unwrap().to_vec(), &addrs);
        for (off, rel) in sec.relocations() {
            let object::RelocationFlags::Elf { r_type } = rel.flags() else {
                continue;
            };
            if r_type == R_ARM_REL32 || r_type == R_ARM_PREL31 {
                let off = off as usize;
                assert_eq!(
                    word(&ours, off),
                    word(theirs, off),
                    "{name}+{off:#x}: relocation type {r_type}"
                );
                *seen.entry(r_type).or_insert(0) += 1;
            }
        }
    }
    assert!(
        seen.get(&R_ARM_REL32).is_some_and(|n| *n >= 2) && seen.contains_key(&R_ARM_PREL31),
        "too few relocations compared: {seen:?}"
    );
}

/// Over every function symbol of Debian's armhf `libc.so.6` (Thumb-2, some A32), the
/// annotate disassembly names at least 98 % of objdump's instructions as objdump does, and
/// where it differs it is a `(bad)` (yaxpeax-arm 0.5 decodes no Thumb VFP/coprocessor
/// instruction), a wrong name at most once in a thousand.
#[test]
fn annotate_arm32_libc_mnemonics_agree_with_objdump() {
    let libc = Path::new("/usr/arm-linux-gnueabihf/lib/libc.so.6");
    let sf = SymbolFile::open(libc, None, None).unwrap();
    let listing = run(
        "arm-linux-gnueabihf-objdump",
        &[
            "-d".as_ref(),
            "-j".as_ref(),
            ".text".as_ref(),
            libc.as_os_str(),
        ],
    );
    let mut theirs = std::collections::HashMap::new();
    for l in listing.lines() {
        let mut cols = l.split('\t');
        let addr = cols.next().and_then(|c| c.trim().strip_suffix(':'));
        let Some(addr) = addr.and_then(|c| u64::from_str_radix(c, 16).ok()) else {
            continue;
        };
        if let (Some(_bytes), Some(m)) = (cols.next(), cols.next()) {
            theirs.insert(addr, mnemonic(m.trim()).to_string());
        }
    }
    let (mut same, mut bad, mut wrong) = (0u64, 0u64, Vec::new());
    for (start, size) in sf.symbol_ranges().collect::<Vec<_>>() {
        let Some(code) = sf.code(start, start + size) else {
            continue;
        };
        let runs = sf.arm_runs(start, start + size);
        for (addr, _, text) in crate::disasm::decode(sf.arch, code, start, &runs) {
            match theirs.get(&addr).map(String::as_str) {
                Some(m) if m == mnemonic(&text) => same += 1,
                Some(_) if text == "(bad)" => bad += 1,
                Some(m) => wrong.push(format!("{addr:#x}: {text} vs objdump {m}")),
                None => {}
            }
        }
    }
    let total = same + bad + wrong.len() as u64;
    assert!(total > 100_000, "only {total} instructions compared");
    assert!(same * 100 >= total * 98, "{same} of {total} agree");
    assert!(
        wrong.len() as u64 * 1000 <= total,
        "{} wrong names:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(40)].join("\n")
    );
}

/// Where an uprobe goes (`run --latency PROGRAM:FUNC`): the file offset of the function's first
/// instruction and whether it is Thumb. mychardrv-writer built as armhf toolchains build
/// (Thumb-2) has its timed function (and its caller) in A32, which 32-bit Arm uprobes need,
/// and the rest in Thumb.
#[test]
fn function_offset_arm32_writer_arm_and_thumb() {
    let dir = tempfile::tempdir().unwrap();
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = top.join("examples/mychardrv-writer/mychardrv_writer.c");
    let include = top.join("include");
    let out = dir.path().join("mychardrv-writer");
    run(
        "arm-linux-gnueabihf-gcc",
        &[
            "-O2".as_ref(),
            "-g".as_ref(),
            "-I".as_ref(),
            include.as_os_str(),
            src.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    );
    let f = SymbolFile::open(&out, None, None).unwrap();
    let (value, _) = symtab_function(&out, "pause_between_batches");
    assert_eq!(value & 1, 0, "an A32 function's symbol has bit 0 clear");
    // The text segment maps file offset 0 at address 0 in this PIE.
    assert_eq!(
        f.function_offset("pause_between_batches"),
        Some((value, false))
    );
    let (thumb_value, _) = symtab_function(&out, "write_request");
    assert_eq!(
        thumb_value & 1,
        1,
        "a Thumb function's symbol has bit 0 set"
    );
    assert_eq!(
        f.function_offset("write_request"),
        Some((thumb_value & !1, true))
    );
    assert_eq!(f.function_offset("no_such_function"), None);
}
