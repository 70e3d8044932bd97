//! A real kbuild `.ko` placed at recorded section addresses: every address resolves to the
//! function and line binutils' `addr2line -j SECTION` gives for the section offset.

mod common;

use kprof_symbols::elf::{Placement, SymbolFile};
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::Path;

/// Checks every function of the text sections at several offsets against binutils.
fn check_module(ko: &Path, addr2line: &str) -> usize {
    let place = common::placement(ko);
    check_module_at(
        ko,
        addr2line,
        &place,
        &[".text", ".text.unlikely", ".init.text"],
    )
}

/// [`check_module`] with the sections at `place`, functions in each of `sections`.
fn check_module_at(ko: &Path, addr2line: &str, place: &Placement, sections: &[&str]) -> usize {
    let file = SymbolFile::open(ko, None, Some(place)).expect("loading the module");
    assert!(file.relocatable && file.has_lines && file.has_symbols);
    let data = std::fs::read(ko).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    // A Thumb function's symbol has bit 0 set; its code starts at the even address.
    let thumb_bit = u64::from(obj.architecture() == object::Architecture::Arm);
    let mut checked = 0;
    let mut sections_seen = std::collections::BTreeSet::new();
    for sym in obj
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
    {
        let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        let sec_name = sec.name().unwrap();
        let base = place[sec_name];
        for off in [0, sym.size() / 3, sym.size() / 2, sym.size() - 1] {
            let sec_off = (sym.address() & !thumb_bit) + off;
            let expected = common::binutils_frames_with(addr2line, ko, sec_name, sec_off);
            let got = file.frames(base + sec_off);
            assert_eq!(
                got.len(),
                expected.len(),
                "{sec_name}+{sec_off:#x}: {got:?} vs {expected:?}"
            );
            for (g, (func, path, line)) in got.iter().zip(&expected) {
                let name = g.name.as_deref().unwrap_or("?");
                // binutils names aliases by DWARF; the symbol table may name the outer one
                // `init_module` for `kprof_testmod_init`.
                let alias = matches!(
                    (name, func.as_str()),
                    ("init_module", "kprof_testmod_init")
                        | ("cleanup_module", "kprof_testmod_exit")
                );
                assert!(
                    name == func || alias,
                    "{sec_name}+{sec_off:#x}: function {name} vs {func}"
                );
                assert_eq!(
                    g.line,
                    Some(*line),
                    "{sec_name}+{sec_off:#x} in {func}: line"
                );
                let gf = g.file.as_deref().unwrap_or("");
                assert_eq!(
                    Path::new(gf).file_name(),
                    Path::new(path).file_name(),
                    "{sec_name}+{sec_off:#x}: file"
                );
            }
            checked += 1;
        }
        sections_seen.insert(sec_name.to_string());
    }
    for s in sections {
        assert!(
            sections_seen.contains(*s),
            "test module has no function in {s}: {sections_seen:?}"
        );
    }
    checked
}

/// Addresses in .text, .text.unlikely and .init.text of a kbuild module resolve to binutils' answers.
#[test]
fn resolve_ko_placed_sections_match_binutils() {
    let tmp = tempfile::tempdir().unwrap();
    let ko = common::build_module(tmp.path());
    let n = check_module(&ko, "addr2line");
    assert!(n >= 16, "only {n} addresses checked");
}

/// A module whose .text and .text.unlikely have non-zero sh_addr still resolves by placement.
#[test]
fn resolve_ko_nonzero_sh_addr_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let ko = common::build_module(tmp.path());
    let shifted = tmp.path().join("shifted.ko");
    let st = std::process::Command::new("objcopy")
        .args([
            "--change-section-address",
            ".text=0x4000",
            "--change-section-address",
            ".text.unlikely=0x8000",
        ])
        .arg(&ko)
        .arg(&shifted)
        .status()
        .unwrap();
    assert!(st.success());
    let data = std::fs::read(&shifted).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    assert_eq!(obj.section_by_name(".text").unwrap().address(), 0x4000);
    check_module(&shifted, "addr2line");
}

/// The hot loop of the module resolves to the marked source line, with the inlined helper.
#[test]
fn resolve_ko_hot_line_and_inline_frame() {
    let tmp = tempfile::tempdir().unwrap();
    let ko = common::build_module(tmp.path());
    let src = std::fs::read_to_string(ko.with_file_name("kprof_testmod.c")).unwrap();
    let line_of = |marker: &str| src.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1;
    let (hot, mix) = (line_of("HOT_LINE"), line_of("MIX_LINE"));
    let place = common::placement(&ko);
    let file = SymbolFile::open(&ko, None, Some(&place)).unwrap();
    let (lo, _) = (place[".text"], 0);
    let rows = file.lines_in(lo, lo + 0x1000);
    assert!(
        rows.iter().any(|r| r.2 == hot || r.2 == mix),
        "no line-table row for the hot loop: {rows:?}"
    );
    // Some address of kprof_hot has kprof_mix inlined at the hot line.
    let inlined = rows.iter().any(|r| {
        let f = file.frames(r.0);
        f.len() >= 2
            && f[0].name.as_deref() == Some("kprof_mix")
            && f[0].line == Some(mix)
            && f[1].name.as_deref() == Some("kprof_hot")
            && f[1].line == Some(hot)
            && f[0].inlined
    });
    assert!(
        inlined,
        "no address with kprof_mix inlined into kprof_hot at line {hot}"
    );
}

/// An aarch64 relocatable object laid out like a module (`.text`, `.text.unlikely`,
/// `.init.text`; its DWARF relocated by `R_AARCH64_ABS64`/`ABS32`, as the arm64 board's
/// mychardrv.ko is) resolves to the answers of aarch64 binutils.
#[test]
fn resolve_aarch64_object_placed_sections_match_binutils() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reloc/reloc_test.c");
    let obj = tmp.path().join("reloc_test.o");
    let out = std::process::Command::new("aarch64-linux-gnu-gcc")
        .args(["-O2", "-g", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu, ci/apt-packages.txt)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = std::fs::read(&obj).unwrap();
    let parsed = object::File::parse(&data[..]).unwrap();
    assert_eq!(parsed.architecture(), object::Architecture::Aarch64);
    let debug_relocs: Vec<u32> = parsed
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
        .flat_map(|s| s.relocations().collect::<Vec<_>>())
        .filter_map(|(_, r)| match r.flags() {
            object::RelocationFlags::Elf { r_type } => Some(r_type),
            _ => None,
        })
        .collect();
    for t in [object::elf::R_AARCH64_ABS64, object::elf::R_AARCH64_ABS32] {
        assert!(
            debug_relocs.contains(&t),
            "no relocation type {t} in the DWARF"
        );
    }
    let n = check_module(&obj, "aarch64-linux-gnu-addr2line");
    assert!(n >= 12, "only {n} addresses checked");
}

/// A 32-bit Arm Thumb-2 relocatable object built like a module (`-ffunction-sections`; its
/// DWARF relocated by REL `R_ARM_ABS32` entries whose addends are in the sections) placed in
/// the 32-bit module area resolves to the answers of Arm binutils, inline frames included.
#[test]
fn resolve_arm32_thumb_object_placed_sections_match_binutils() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reloc/reloc_test.c");
    let obj = tmp.path().join("reloc_test.o");
    let out = std::process::Command::new("arm-linux-gnueabihf-gcc")
        .args(["-O2", "-g", "-c", "-mthumb", "-ffunction-sections"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("arm-linux-gnueabihf-gcc (gcc-arm-linux-gnueabihf, ci/apt-packages.txt)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = std::fs::read(&obj).unwrap();
    let parsed = object::File::parse(&data[..]).unwrap();
    assert_eq!(parsed.architecture(), object::Architecture::Arm);
    let debug_relocs: Vec<(u32, bool)> = parsed
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
        .flat_map(|s| s.relocations().collect::<Vec<_>>())
        .filter_map(|(_, r)| match r.flags() {
            object::RelocationFlags::Elf { r_type } => Some((r_type, r.has_implicit_addend())),
            _ => None,
        })
        .collect();
    assert!(
        debug_relocs.contains(&(object::elf::R_ARM_ABS32, true)),
        "no REL R_ARM_ABS32 in the DWARF: {debug_relocs:?}"
    );
    let place = common::placement_at(&obj, 0xbf00_0000, 0xbf80_0000);
    let sections = [".text.reloc_hot", ".text.unlikely.reloc_rare", ".init.text"];
    let n = check_module_at(&obj, "arm-linux-gnueabihf-addr2line", &place, &sections);
    assert!(n >= 12, "only {n} addresses checked");
}
