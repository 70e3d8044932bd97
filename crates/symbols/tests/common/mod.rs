//! Building the test module with kbuild against Debian's linux-headers, and symbolizing a
//! capture with nothing but the given symbol paths.
#![allow(dead_code)]

pub mod perfdata;

use kprof_symbols::elf::Placement;
use kprof_symbols::profile::Profile;
use kprof_symbols::{Capture, Options, Symbolizer};
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The kbuild tree of Debian's `linux-headers-*-amd64` (there is no /lib/modules/*/build for
/// the running kernel of a container or CI machine).
pub fn kbuild_dir() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/src")
        .expect("/usr/src")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("linux-headers-") && n.ends_with("-amd64") && p.join("Makefile").is_file()
        })
        .collect();
    dirs.sort();
    dirs.pop()
        .expect("no /usr/src/linux-headers-*-amd64: apt-get install linux-headers-amd64 (ci/apt-packages.txt)")
}

/// Builds `tests/data/kmod` in a fresh directory under `work` and returns the `.ko`.
pub fn build_module(work: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kmod");
    let dir = work.join("kmod");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["kprof_testmod.c", "Kbuild"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let out = Command::new("make")
        .arg("-C")
        .arg(kbuild_dir())
        .arg(format!("M={}", dir.display()))
        .arg("modules")
        .output()
        .expect("running make");
    assert!(
        out.status.success(),
        "kbuild failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("kprof_testmod.ko")
}

/// `addr2line -f -i -j SECTION OFFSET` of binutils: `(function, file, line)` innermost first.
pub fn binutils_frames(ko: &Path, section: &str, offset: u64) -> Vec<(String, String, u32)> {
    binutils_frames_with("addr2line", ko, section, offset)
}

/// [`binutils_frames`] with another binutils' addr2line (`aarch64-linux-gnu-addr2line`).
pub fn binutils_frames_with(
    addr2line: &str,
    ko: &Path,
    section: &str,
    offset: u64,
) -> Vec<(String, String, u32)> {
    let out = Command::new(addr2line)
        .arg("-e")
        .arg(ko)
        .args(["-f", "-i", "-j", section])
        .arg(format!("{offset:#x}"))
        .output()
        .unwrap_or_else(|e| panic!("running {addr2line} (binutils): {e}"));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(2)
        .map(|c| {
            let (file, line) = c[1].rsplit_once(':').unwrap();
            let line = line.split_whitespace().next().unwrap().parse().unwrap_or(0);
            (c[0].to_string(), file.to_string(), line)
        })
        .collect()
}

/// Sections placed like the module loader does: core sections packed from one base, init
/// sections in their own allocation.
pub fn placement(ko: &Path) -> Placement {
    placement_at(ko, 0xffff_ffff_c0a0_0000, 0xffff_ffff_c0b4_0000)
}

/// [`placement`] with the core sections from `core` and the init sections from `init` (a
/// 32-bit kernel's module area: `0xbf00_0000`).
pub fn placement_at(ko: &Path, mut core: u64, mut init: u64) -> Placement {
    let data = std::fs::read(ko).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let mut p = Placement::new();
    for s in obj.sections() {
        let object::SectionFlags::Elf { sh_flags } = s.flags() else {
            continue;
        };
        if sh_flags & u64::from(object::elf::SHF_ALLOC) == 0 || s.size() == 0 {
            continue;
        }
        let name = s.name().unwrap().to_string();
        let cursor = if name.starts_with(".init") {
            &mut init
        } else {
            &mut core
        };
        let align = s.align().max(1);
        *cursor = (*cursor).div_ceil(align) * align;
        p.insert(name, *cursor);
        *cursor += s.size() + 0x40;
    }
    p
}

/// The test module, built once per test binary into a directory that outlives the tests.
pub fn shared_module() -> &'static Path {
    static KO: OnceLock<PathBuf> = OnceLock::new();
    KO.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kprof-kmod-")
            .tempdir()
            .unwrap()
            .keep();
        build_module(&dir)
    })
}

/// Symbolizes `capture` against `symbols` only (no system paths, no host files, no stored
/// index), returning the symbolizer too for its symbol files.
pub fn symbolize(capture: &Path, symbols: &[PathBuf]) -> (Profile, Symbolizer) {
    let opts = Options {
        symbol_paths: symbols.to_vec(),
        index_store: None,
        source_prefix: vec![],
        ..Options::default()
    };
    let mut s = Symbolizer::new(opts, &mut |_| {}).unwrap();
    let p = s
        .symbolize(&Capture::open(capture).unwrap(), &mut |_| {})
        .unwrap();
    (p, s)
}
