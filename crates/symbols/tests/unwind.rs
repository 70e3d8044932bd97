//! User stacks of a program built without frame pointers (`tests/data/unwind/unwind_demo.c`,
//! gcc -O2 -g -fomit-frame-pointer), recorded by Debian's `perf record --call-graph dwarf`
//! and `--call-graph fp`, unwound with the `.eh_frame` of the build-id matched files; and the
//! aarch64 link-register rule on objects of aarch64-linux-gnu-gcc.

use kprof_symbols::elf::{Placement, SymbolFile};
use kprof_symbols::profile::Profile;
use kprof_symbols::unwind::Cfi;
use kprof_symbols::{Capture, Options, Symbolizer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A directory kept for the whole test binary.
fn work() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The demo program, built once.
fn demo() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/unwind/unwind_demo.c");
        let bin = work().join("unwind_demo");
        kprof_test_support::cc(&["-O2", "-g", "-fomit-frame-pointer"], &src, &bin);
        bin
    })
}

/// `perf record --call-graph MODE` of the demo for about a second.
fn record(mode: &str) -> PathBuf {
    let out = work().join(format!("{mode}.data"));
    record_program(demo(), mode, &out, "1");
    out
}

/// `perf record --call-graph MODE -o OUT -- PROGRAM ROUNDS` at 2 kHz of cpu-clock.
fn record_program(program: &Path, mode: &str, out: &Path, rounds: &str) {
    run(kprof_test_support::system::perf()
        .args([
            "record",
            "--call-graph",
            mode,
            "-e",
            "cpu-clock",
            "-F",
            "2000",
            "-o",
        ])
        .arg(out)
        .arg("--")
        .arg(program)
        .arg(rounds));
}

fn dwarf_data() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| record("dwarf"))
}

fn fp_data() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| record("fp"))
}

fn symbolize(capture: &Path, symbol_paths: &[PathBuf], host_files: bool) -> Profile {
    let opts = Options {
        symbol_paths: symbol_paths.to_vec(),
        host_files,
        debug_roots: if host_files {
            vec![PathBuf::from("/usr/lib/debug")]
        } else {
            Vec::new()
        },
        ..Options::default()
    };
    let mut s = Symbolizer::new(opts, &mut |_| {}).unwrap();
    s.symbolize(&Capture::open(capture).unwrap(), &mut |_| {})
        .unwrap()
}

/// Function names (with their image) of each stack whose leaf is `leaf`, innermost first,
/// with the stack's sample count.
fn paths_from(p: &Profile, leaf: &str) -> Vec<(Vec<(String, String)>, u64)> {
    p.stacks
        .iter()
        .filter_map(|s| {
            let names: Vec<(String, String)> = s
                .frames
                .iter()
                .map(|f| {
                    let func = &p.functions[p.frames[*f].function];
                    (
                        func.name.clone().unwrap_or_default(),
                        p.images[func.image].name.clone(),
                    )
                })
                .collect();
            (names.first()?.0 == leaf).then(|| (names, s.counts[0]))
        })
        .collect()
}

/// Share of `leaf`'s samples whose next callers are `callers`, and its sample count.
fn share_with_callers(p: &Profile, leaf: &str, callers: &[&str]) -> (f64, u64) {
    let paths = paths_from(p, leaf);
    let total: u64 = paths.iter().map(|(_, n)| n).sum();
    let good: u64 = paths
        .iter()
        .filter(|(names, _)| {
            names.len() > callers.len()
                && names[1..=callers.len()]
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .eq(callers.iter().copied())
        })
        .map(|(_, n)| n)
        .sum();
    (good as f64 / total.max(1) as f64, total)
}

/// `--call-graph dwarf`: hot_leaf's callers are middle ← outer ← main in ≥ 95 % of its
/// samples, as the top path of `perf report`; the qsort comparator is called from libc's
/// qsort.
#[test]
fn unwind_perfdata_dwarf_full_paths() {
    let p = symbolize(dwarf_data(), &[demo().to_path_buf()], true);
    let (share, n) = share_with_callers(&p, "hot_leaf", &["middle", "outer", "main"]);
    eprintln!(
        "hot_leaf: {n} samples, {:.2} % with middle <- outer <- main",
        share * 100.0
    );
    assert!(n > 100, "{n} hot_leaf samples");
    assert!(
        share >= 0.95,
        "{share}: {:?}",
        &paths_from(&p, "hot_leaf")[..3]
    );
    let cmp = paths_from(&p, "cmp_ints");
    let cmp_total: u64 = cmp.iter().map(|(_, n)| n).sum();
    let via_qsort: u64 = cmp
        .iter()
        .filter(|(names, _)| {
            names
                .iter()
                .any(|(f, img)| f.contains("qsort") && img.starts_with("libc"))
                && names.iter().any(|(f, _)| f == "sort_some")
        })
        .map(|(_, n)| n)
        .sum();
    assert!(cmp_total > 0, "no cmp_ints samples");
    assert!(
        via_qsort as f64 >= 0.9 * cmp_total as f64,
        "{via_qsort} of {cmp_total}: {:?}",
        cmp.first()
    );

    // Linux perf's own unwinding (libdw/libunwind) of the same file: its top path of
    // hot_leaf has the same callers.
    let report = run(kprof_test_support::system::perf()
        .args(["report", "--stdio", "--no-children", "-i"])
        .arg(dwarf_data()));
    let lines: Vec<&str> = report.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|l| l.ends_with("---hot_leaf"))
        .unwrap_or_else(|| panic!("no hot_leaf chain in perf report:\n{report}"));
    let perf_path: Vec<&str> = lines[at + 1..]
        .iter()
        .filter(|l| !l.is_empty() && **l != "|")
        .take(3)
        .copied()
        .collect();
    assert_eq!(perf_path, ["middle", "outer", "main"], "{report}");
}

/// `--call-graph fp` of code without frame pointers: the chain after hot_leaf is cut and
/// marked `[truncated]`, never continued with invented callers.
#[test]
fn unwind_perfdata_fp_truncated_marked() {
    let p = symbolize(fp_data(), &[demo().to_path_buf()], true);
    let paths = paths_from(&p, "hot_leaf");
    let total: u64 = paths.iter().map(|(_, n)| n).sum();
    assert!(total > 30, "{total} hot_leaf samples");
    let (full, _) = share_with_callers(&p, "hot_leaf", &["middle", "outer", "main"]);
    assert!(
        full < 0.05,
        "fp chains of -fomit-frame-pointer code were complete: {full}"
    );
    for (names, _) in &paths {
        // Whatever the chain has after the leaf is a real mapped function or the marker.
        assert!(
            names[1..]
                .iter()
                .all(|(f, img)| img != "[unknown]" && !f.is_empty()),
            "{names:?}"
        );
    }
    let (marked, _) = share_with_callers(&p, "hot_leaf", &["[truncated]"]);
    assert!(marked >= 0.9, "{marked}: {:?}", paths.first());
    assert!(p
        .warnings
        .iter()
        .any(|w| w.contains("frame-pointer call chains end in [truncated]")));
}

/// A split debug file (`objcopy --only-keep-debug`, no `.eh_frame` bytes) matches the
/// build-id; the unwind tables are taken from the stripped binary with the same build-id in
/// another directory, and without it the paths end `[no unwind info: IMAGE]`.
#[test]
fn unwind_perfdata_split_debug_eh_frame_from_stripped() {
    let dbg_dir = work().join("split/debug");
    let bin_dir = work().join("split/rootfs");
    std::fs::create_dir_all(&dbg_dir).unwrap();
    std::fs::create_dir_all(&bin_dir).unwrap();
    let debug = dbg_dir.join("unwind_demo.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(demo())
        .arg(&debug));
    run(Command::new("strip")
        .arg("-o")
        .arg(bin_dir.join("unwind_demo"))
        .arg(demo()));
    let data = std::fs::read(&debug).unwrap();
    assert!(
        Cfi::from_elf(&data).is_none(),
        "the debug file has unwind tables"
    );

    let both = symbolize(dwarf_data(), &[dbg_dir.clone(), bin_dir], false);
    let (share, n) = share_with_callers(&both, "hot_leaf", &["middle", "outer", "main"]);
    assert!(n > 100 && share >= 0.95, "{share} of {n}");
    // The symbols came from the debug file.
    let img = both
        .images
        .iter()
        .find(|i| i.name == "unwind_demo")
        .unwrap();
    assert!(
        matches!(&img.symbols, kprof_symbols::profile::SymbolSource::BuildId { path, .. } if path.ends_with("unwind_demo.debug")),
        "{:?}",
        img.symbols
    );

    let debug_only = symbolize(dwarf_data(), &[dbg_dir], false);
    let (marked, _) =
        share_with_callers(&debug_only, "hot_leaf", &["[no unwind info: unwind_demo]"]);
    assert!(marked >= 0.95, "{marked}");
}

/// A program whose `mid` has no FDE (built with -fno-asynchronous-unwind-tables), recorded
/// with `--call-graph dwarf`: hot_leaf's paths end `[no unwind info: IMAGE]` right above
/// mid (its return address names it; its caller cannot be found), and the warning says the image's tables do not cover that code (not that it has none).
#[test]
fn unwind_perfdata_uncovered_code_named() {
    let data_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/unwind");
    let dir = work().join("uncovered");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("uncovered_demo");
    let mid = dir.join("mid.o");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-c"])
        .args([
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
            "-o",
        ])
        .arg(&mid)
        .arg(data_dir.join("uncovered_mid.c")));
    run(Command::new("gcc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(data_dir.join("uncovered_main.c"))
        .arg(&mid));
    let out = dir.join("dwarf.data");
    // Four rounds, about 0.2 s of CPU: one (0.05 s) gave 93 samples at 2 kHz on a loaded
    // 2-core machine, under the 100 the check below needs.
    record_program(&bin, "dwarf", &out, "4");
    let p = symbolize(&out, std::slice::from_ref(&bin), true);
    let (marked, n) =
        share_with_callers(&p, "hot_leaf", &["mid", "[no unwind info: uncovered_demo]"]);
    assert!(n > 100 && marked >= 0.9, "{marked} of {n}");
    let warning = p
        .image_warnings
        .iter()
        .find(|w| w.image == "uncovered_demo")
        .unwrap_or_else(|| panic!("{:?}", p.image_warnings));
    assert!(warning.kind.contains("do not cover"), "{warning:?}");
    assert!(warning.count.unwrap_or(0) >= n * 9 / 10, "{warning:?}");
}

/// Compiles `src` with aarch64-linux-gnu-gcc into `out` with `args`.
fn aarch64_gcc(src: &str, out: &Path, args: &[&str]) {
    let c = out.with_extension("src.c");
    std::fs::write(&c, src).unwrap();
    run(Command::new("aarch64-linux-gnu-gcc")
        .args(["-O2", "-g"])
        .args(args)
        .arg(&c)
        .arg("-o")
        .arg(out));
}

const LR_SRC: &str = r#"
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int with_frame(int x) { return leaf(x) + leaf(x + 1) * 2; }
"#;

/// aarch64: a frameless leaf keeps its return address in x30 (LR) by its CFI; a function that
/// saved x30 (`stp x29, x30`) does not, after the save. Checked on a module-like object's
/// relocated `.debug_frame` and on a linked shared object's `.eh_frame`.
#[test]
fn unwind_cfi_aarch64_leaf_return_address_in_lr() {
    // A relocatable object placed like a module: `.debug_frame` needs its relocations.
    let obj = work().join("lr.o");
    aarch64_gcc(
        LR_SRC,
        &obj,
        &[
            "-c",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    );
    let text = 0xffff_8000_0801_0000u64;
    let mut placement = Placement::new();
    placement.insert(".text".into(), text);
    let f = SymbolFile::open(&obj, None, Some(&placement)).unwrap();
    let cfi = f.cfi().expect("relocated .debug_frame");
    let leaf = f.symbol_address("leaf").unwrap();
    let framed = f.symbol_address("with_frame").unwrap();
    assert!(leaf >= text && framed >= text, "{leaf:#x} {framed:#x}");
    assert_eq!(cfi.return_address_in_lr(leaf), Some(true));
    assert_eq!(cfi.return_address_in_lr(leaf + 4), Some(true));
    // After `stp x29, x30, [sp, #-N]!` (the first instruction) x30 is saved.
    assert_eq!(cfi.return_address_in_lr(framed), Some(true));
    assert_eq!(cfi.return_address_in_lr(framed + 8), Some(false));
    assert_eq!(cfi.return_address_in_lr(text - 4), None);

    // A linked shared object: `.eh_frame` + `.eh_frame_hdr`.
    let so = work().join("liblr.so");
    aarch64_gcc(LR_SRC, &so, &["-shared", "-nostdlib", "-fPIC"]);
    let f = SymbolFile::open(&so, None, None).unwrap();
    let cfi = f.cfi().expect(".eh_frame");
    let leaf = f.symbol_address("leaf").unwrap();
    let framed = f.symbol_address("with_frame").unwrap();
    assert_eq!(cfi.return_address_in_lr(leaf), Some(true));
    assert_eq!(cfi.return_address_in_lr(framed + 8), Some(false));
    assert!(cfi.covers(leaf) && !cfi.covers(0));
}

const ATTR_SIZE: usize = 128;

fn u64s(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u32s(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// One perf record: header (`kind`, `misc`, size) and `body`.
fn perf_record(out: &mut Vec<u8>, kind: u32, misc: u16, body: &[u8]) {
    u32s(out, kind);
    out.extend_from_slice(&misc.to_le_bytes());
    out.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
    out.extend_from_slice(body);
}

/// A cpu-clock attribute (period 1000) with `sample_type` and the aarch64 LR and PC
/// (`bits 30 and 32`) in the register mask at byte `regs_at` (80: `sample_regs_user`,
/// 96: `sample_regs_intr`).
fn lr_pc_attr(sample_type: u64, regs_at: usize) -> Vec<u8> {
    let mut attr = vec![0u8; ATTR_SIZE];
    attr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
    attr[16..24].copy_from_slice(&1000u64.to_le_bytes());
    attr[24..32].copy_from_slice(&sample_type.to_le_bytes());
    attr[regs_at..regs_at + 8].copy_from_slice(&((1u64 << 30) | (1 << 32)).to_le_bytes());
    attr
}

/// A PERFILE2 of `attr` (no ids) and `data`, with `build_ids` records as its HEADER_BUILD_ID
/// feature section when given.
fn perfile2(attr: &[u8], data: &[u8], build_ids: Option<&[u8]>) -> Vec<u8> {
    let attrs_off = 104usize;
    let data_off = attrs_off + ATTR_SIZE + 16;
    let mut out = b"PERFILE2".to_vec();
    for v in [
        104,
        ATTR_SIZE + 16,
        attrs_off,
        ATTR_SIZE + 16,
        data_off,
        data.len(),
        0,
        0,
    ] {
        u64s(&mut out, v as u64);
    }
    let mut features = [0u8; 32];
    if build_ids.is_some() {
        features[0] = 1 << 2; // HEADER_BUILD_ID
    }
    out.extend_from_slice(&features);
    out.extend_from_slice(attr);
    u64s(&mut out, 0); // ids section: none
    u64s(&mut out, 0);
    out.extend_from_slice(data);
    if let Some(ids) = build_ids {
        let ids_off = out.len() + 16;
        u64s(&mut out, ids_off as u64);
        u64s(&mut out, ids.len() as u64);
        out.extend_from_slice(ids);
    }
    out
}

/// A PERFILE2 with one cpu-clock attribute whose samples carry IP, TID, CALLCHAIN and
/// REGS_USER with aarch64's LR and PC (`sample_regs_user` bits 30 and 32, as perf numbers
/// them), one MMAP2 record with a build-id for `exe` at 0x400000, then `samples`:
/// `(user callchain, LR, PC)`.
fn aarch64_fp_perf_data(build_id: &[u8], exe: &Path, samples: &[(Vec<u64>, u64, u64)]) -> Vec<u8> {
    // IP | TID | CALLCHAIN | REGS_USER
    let attr = lr_pc_attr(1 | 2 | 1 << 5 | 1 << 12, 80);

    let mut data = Vec::new();
    let mut body = Vec::new();
    u32s(&mut body, 42);
    u32s(&mut body, 42);
    u64s(&mut body, 0x40_0000);
    u64s(&mut body, 0x1_0000);
    u64s(&mut body, 0);
    body.push(build_id.len() as u8);
    body.extend_from_slice(&[0, 0, 0]);
    let mut id = build_id.to_vec();
    id.resize(20, 0);
    body.extend_from_slice(&id);
    u32s(&mut body, 5); // PROT_READ | PROT_EXEC
    u32s(&mut body, 2); // MAP_PRIVATE
    body.extend_from_slice(exe.to_str().unwrap().as_bytes());
    body.push(0);
    body.resize(body.len().div_ceil(8) * 8, 0);
    // PERF_RECORD_MMAP2, user, PERF_RECORD_MISC_MMAP_BUILD_ID
    perf_record(&mut data, 10, 2 | 1 << 14, &body);
    for (chain, lr, pc) in samples {
        let mut body = Vec::new();
        u64s(&mut body, *pc);
        u32s(&mut body, 42);
        u32s(&mut body, 42);
        u64s(&mut body, chain.len() as u64 + 1);
        u64s(&mut body, -512i64 as u64); // PERF_CONTEXT_USER
        for a in chain {
            u64s(&mut body, *a);
        }
        u64s(&mut body, 2); // PERF_SAMPLE_REGS_ABI_64
        u64s(&mut body, *lr); // bit 30 first
        u64s(&mut body, *pc); // then bit 32
        perf_record(&mut data, 9, 2, &body); // PERF_RECORD_SAMPLE, user
    }
    perfile2(&attr, &data, None)
}

/// The address after the first `bl` in the code of `func`: the return address of its first
/// call.
fn after_first_bl(f: &SymbolFile, func: &str) -> u64 {
    let start = f.symbol_address(func).unwrap();
    (start..start + 0x40)
        .step_by(4)
        .find(|a| {
            f.code(*a, a + 4)
                .is_some_and(|w| u32::from_le_bytes(w.try_into().unwrap()) >> 26 == 0b100101)
        })
        .unwrap_or_else(|| panic!("no bl in {func}"))
        + 4
}

/// aarch64 frame-pointer chains with LR in REGS_USER: a frameless leaf's caller, which the
/// fp chain skips, is inserted from LR; not again when the chain has it; not for a PC
/// where the CFI says x30 was saved (LR is stale there).
#[test]
fn unwind_perfdata_aarch64_fp_leaf_caller_from_lr() {
    let exe = work().join("lrexe");
    let src = "__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n\
        __attribute__((noinline)) int caller_a(int x) { return leaf(x) + leaf(x + 1) * 2; }\n\
        __attribute__((noinline)) int top(int x) { return caller_a(x) + 5; }\n\
        void _start(void) { top(1); for (;;); }\n";
    aarch64_gcc(src, &exe, &["-nostdlib", "-static", "-Wl,--build-id"]);
    let f = SymbolFile::open(&exe, None, None).unwrap();
    let id: Vec<u8> = (0..f.build_id.as_ref().unwrap().len() / 2)
        .map(|i| u8::from_str_radix(&f.build_id.as_ref().unwrap()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let leaf = f.symbol_address("leaf").unwrap();
    let caller_a = f.symbol_address("caller_a").unwrap();
    let ret_in_caller = after_first_bl(&f, "caller_a");
    let ret_in_top = after_first_bl(&f, "top");
    let samples = vec![
        // The fp chain of a leaf without frame record: leaf, then top (caller_a skipped).
        (vec![leaf + 4, ret_in_top], ret_in_caller, leaf + 4),
        // A chain that has caller_a already: nothing inserted twice.
        (
            vec![leaf + 4, ret_in_caller, ret_in_top],
            ret_in_caller,
            leaf + 4,
        ),
        // In caller_a after `stp x29, x30`: LR is not the return address any more.
        (vec![caller_a + 8, ret_in_top], leaf + 8, caller_a + 8),
    ];
    let data = work().join("lr-fp.data");
    std::fs::write(&data, aarch64_fp_perf_data(&id, &exe, &samples)).unwrap();
    let p = symbolize(&data, std::slice::from_ref(&exe), false);
    let mut paths: Vec<Vec<String>> = p
        .stacks
        .iter()
        .flat_map(|s| {
            let names: Vec<String> = s
                .frames
                .iter()
                .map(|f| {
                    p.functions[p.frames[*f].function]
                        .name
                        .clone()
                        .unwrap_or_default()
                })
                .collect();
            std::iter::repeat_n(names, s.counts[0] as usize)
        })
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            vec!["caller_a", "top"],
            vec!["leaf", "caller_a", "top"],
            vec!["leaf", "caller_a", "top"],
        ],
        "{:?}",
        p.warnings
    );
}

/// A PERFILE2 of kernel samples in a module: IP, TID, CALLCHAIN and REGS_INTR with aarch64's
/// LR and PC; a kernel MMAP record of `/lib/modules/x/lrmod.ko` at `base`, its build-id in a
/// HEADER_BUILD_ID feature section; samples `(kernel callchain, LR, PC)`.
fn aarch64_kernel_perf_data(
    build_id: &[u8],
    base: u64,
    samples: &[(Vec<u64>, u64, u64)],
) -> Vec<u8> {
    const KO: &str = "/lib/modules/6.1.0/extra/lrmod.ko";
    let name = |out: &mut Vec<u8>| {
        out.extend_from_slice(KO.as_bytes());
        out.push(0);
        out.resize(out.len().div_ceil(8) * 8, 0);
    };
    // IP | TID | CALLCHAIN | REGS_INTR
    let attr = lr_pc_attr(1 | 2 | 1 << 5 | 1 << 18, 96);

    let mut data = Vec::new();
    let mut body = Vec::new();
    u32s(&mut body, u32::MAX); // pid -1: kernel
    u32s(&mut body, 0);
    u64s(&mut body, base);
    u64s(&mut body, 0x1_0000);
    u64s(&mut body, 0);
    name(&mut body);
    perf_record(&mut data, 1, 1, &body); // PERF_RECORD_MMAP, kernel
    for (chain, lr, pc) in samples {
        let mut body = Vec::new();
        u64s(&mut body, *pc);
        u32s(&mut body, 42);
        u32s(&mut body, 42);
        u64s(&mut body, chain.len() as u64 + 1);
        u64s(&mut body, -128i64 as u64); // PERF_CONTEXT_KERNEL
        for a in chain {
            u64s(&mut body, *a);
        }
        u64s(&mut body, 2); // PERF_SAMPLE_REGS_ABI_64
        u64s(&mut body, *lr);
        u64s(&mut body, *pc);
        perf_record(&mut data, 9, 1, &body); // PERF_RECORD_SAMPLE, kernel
    }
    // HEADER_BUILD_ID: one `struct perf_record_header_build_id`.
    let mut ids = Vec::new();
    let mut body = Vec::new();
    u32s(&mut body, u32::MAX);
    let mut id = build_id.to_vec();
    id.resize(20, 0);
    body.extend_from_slice(&id);
    body.extend_from_slice(&[build_id.len() as u8, 0, 0, 0]);
    name(&mut body);
    // PERF_RECORD_MISC_KERNEL | PERF_RECORD_MISC_BUILD_ID_SIZE
    perf_record(&mut ids, 0, 1 | 1 << 15, &body);

    perfile2(&attr, &data, Some(&ids))
}

/// aarch64 kernel samples with LR and PC in REGS_INTR, in a module whose `.debug_frame` is
/// relocated to where it was loaded: the frameless leaf's caller comes from LR; after the
/// caller saved x30, LR is not used.
#[test]
fn unwind_perfdata_aarch64_kernel_leaf_caller_from_lr() {
    let obj = work().join("lrmod.o");
    let src = "__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n\
        __attribute__((noinline)) int caller_a(int x) { return leaf(x) + leaf(x + 1) * 2; }\n\
        __attribute__((noinline)) int top(int x) { return caller_a(x) + 5; }\n";
    aarch64_gcc(
        src,
        &obj,
        &[
            "-c",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    );
    let ko = work().join("lrmod.ko");
    run(Command::new("aarch64-linux-gnu-ld")
        .args(["-r", "--build-id", "-o"])
        .arg(&ko)
        .arg(&obj));
    let base = 0xffff_8000_7a10_0000u64;
    let mut placement = Placement::new();
    placement.insert(".text".into(), base);
    let f = SymbolFile::open(&ko, None, Some(&placement)).unwrap();
    let hex = f.build_id.clone().unwrap();
    let id: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let leaf = f.symbol_address("leaf").unwrap();
    let caller_a = f.symbol_address("caller_a").unwrap();
    let ret_in_caller = after_first_bl(&f, "caller_a");
    let ret_in_top = after_first_bl(&f, "top");
    let samples = vec![
        (vec![leaf + 4, ret_in_top], ret_in_caller, leaf + 4),
        (vec![caller_a + 8, ret_in_top], leaf + 8, caller_a + 8),
    ];
    let data = work().join("lr-kernel.data");
    std::fs::write(&data, aarch64_kernel_perf_data(&id, base, &samples)).unwrap();
    let p = symbolize(&data, std::slice::from_ref(&ko), false);
    let mut paths: Vec<Vec<String>> = p
        .stacks
        .iter()
        .map(|s| {
            s.frames
                .iter()
                .map(|f| {
                    p.functions[p.frames[*f].function]
                        .name
                        .clone()
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [vec!["caller_a", "top"], vec!["leaf", "caller_a", "top"]],
        "{:?}",
        p.warnings
    );
}
