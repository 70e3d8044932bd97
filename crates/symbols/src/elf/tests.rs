//! [`SymbolFile`] of small C programs built with the system gcc: an executable, its stripped
//! copy with a split debug file, and a relocatable object placed like a module.

use super::*;
use kprof_test_support::cc_in;
use std::process::Command;

const PROGRAM: &str = r#"
int counter;

__attribute__((noinline)) int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i * counter;
    return s;
}

int main(void) {
    return work(10);
}
"#;

/// `PROGRAM` compiled with `flags` in a new directory, as `out` there.
fn build(flags: &[&str], out: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.c"), PROGRAM).unwrap();
    let file = cc_in(dir.path(), flags, "prog.c", out);
    (dir, file)
}

/// Runs a binutils tool, which must succeed.
fn binutils(tool: &str, args: &[&std::ffi::OsStr]) {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} ({e}): install binutils"));
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The file offset of address `addr` of `file`, from the section holding it.
fn file_offset_of(file: &Path, addr: u64) -> u64 {
    let data = std::fs::read(file).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let sec = obj
        .sections()
        .find(|s| addr >= s.address() && addr < s.address() + s.size())
        .expect("a section holds the address");
    sec.file_range().unwrap().0 + (addr - sec.address())
}

/// An executable gives its function symbols, their source lines, its build-id, its
/// architecture, its code bytes and the build tree its DWARF names.
#[test]
fn open_elf_executable_symbols_lines_code() {
    let (dir, file) = build(&["-g", "-O0", "-Wl,--build-id=sha1"], "prog");
    let sf = SymbolFile::open(&file, None, None).unwrap();
    assert!(sf.has_symbols && sf.has_lines && !sf.relocatable);
    assert_eq!(sf.build_id.as_ref().map(String::len), Some(40));
    if cfg!(target_arch = "x86_64") {
        assert_eq!(sf.arch, Arch::X86_64);
    }
    let start = sf.symbol_address("work").expect("work has a symbol");
    let (name, at, size) = sf.symbol_at(start + 1).expect("inside work");
    assert_eq!((name, at), ("work", start));
    assert!(size > 1);
    assert!(sf.symbol_ranges().any(|r| r == (start, size)));
    let (src, line) = sf.location(start).expect("work has a line");
    assert!(src.ends_with("prog.c") && line == 4, "{src}:{line}");
    let frames = sf.frames(start);
    let last = frames.last().unwrap();
    assert_eq!(last.name.as_deref(), Some("work"));
    assert_eq!((last.func_start, last.func_size), (Some(start), Some(size)));
    assert_eq!(
        sf.code(start, start + size).map(<[u8]>::len),
        Some(size as usize)
    );
    assert_eq!(sf.code(start, u64::MAX), None, "no section covers it");
    let tree = dir.path().canonicalize().unwrap();
    assert!(
        sf.source_roots
            .iter()
            .any(|r| Path::new(r).canonicalize().ok().as_deref() == Some(&tree)),
        "{:?}",
        sf.source_roots
    );
    let off = file_offset_of(&file, start);
    assert_eq!(sf.offset_to_address(off), Some(start));
}

/// A stripped executable takes its symbols and lines from its split debug file.
#[test]
fn open_elf_stripped_with_debug_file_symbols_from_it() {
    let (dir, file) = build(&["-g", "-O0"], "prog");
    let debug = dir.path().join("prog.debug");
    binutils(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            file.as_os_str(),
            debug.as_os_str(),
        ],
    );
    binutils("strip", &["--strip-all".as_ref(), file.as_os_str()]);
    let stripped = SymbolFile::open(&file, None, None).unwrap();
    assert_eq!(stripped.symbol_address("work"), None);
    assert!(!stripped.has_lines);
    let sf = SymbolFile::open(&file, Some(&debug), None).unwrap();
    assert_eq!(sf.debug_path.as_deref(), Some(debug.as_path()));
    let start = sf.symbol_address("work").expect("from the debug file");
    assert!(sf.has_lines);
    assert_eq!(sf.location(start).map(|l| l.1), Some(4));
    assert!(
        sf.code(start, start + 4).is_some(),
        "code from the stripped file"
    );
}

/// A relocatable object placed like a module has its symbols, its DWARF lines (relocated
/// `.debug_*`) and its placed sections at the given addresses; unplaced, it has none.
#[test]
fn open_elf_relocatable_placed_sections() {
    let (_dir, file) = build(&["-g", "-O0", "-c"], "prog.o");
    let base = 0xffff_ffff_c000_0000u64;
    let placement = Placement::from([(".text".to_string(), base)]);
    let sf = SymbolFile::open(&file, None, Some(&placement)).unwrap();
    assert!(sf.relocatable);
    let start = sf.symbol_address("work").expect("work placed");
    assert!((base..base + 0x1000).contains(&start), "{start:#x}");
    assert!(sf.contains_placed(start) && !sf.contains_placed(0));
    assert_eq!(sf.location(start).map(|l| l.1), Some(4), "relocated lines");
    assert_eq!(sf.symbol_at(start).map(|s| s.0), Some("work"));
    let unplaced = SymbolFile::open(&file, None, None).unwrap();
    assert!(!unplaced.has_symbols && unplaced.symbol_address("work").is_none());
}

/// A file that is no ELF is a `BadElf` error naming it; a missing one an I/O error naming it.
#[test]
fn open_elf_not_elf_or_missing_error_names_path() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not an ELF file at all").unwrap();
    let e = SymbolFile::open(&junk, None, None).unwrap_err();
    assert!(matches!(e, Error::BadElf { .. }), "{e:?}");
    assert!(e
        .to_string()
        .starts_with(&format!("{}: bad ELF file: ", junk.display())));
    let missing = dir.path().join("missing");
    let e = SymbolFile::open(&missing, None, None).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&missing.display().to_string()));
    let (_d, prog) = build(&["-O0"], "prog");
    let e = SymbolFile::open(&prog, Some(&missing), None).unwrap_err();
    assert!(
        e.to_string().starts_with(&missing.display().to_string()),
        "{e}"
    );
}

/// Damaged compressed DWARF is a `BadElf` error naming the file and the section.
#[test]
fn open_elf_damaged_compressed_dwarf_error_names_section() {
    let (_dir, file) = build(&["-g", "-O0", "-gz=zlib"], "prog");
    let mut data = std::fs::read(&file).unwrap();
    let (off, len) = {
        let obj = object::File::parse(&data[..]).unwrap();
        let sec = obj.section_by_name(".debug_info").expect(".debug_info");
        sec.file_range().unwrap()
    };
    // Past the compression header (24 bytes) and the zlib header: the deflate stream.
    let (from, to) = (off as usize + 26, (off + len) as usize);
    data[from..to].fill(0xff);
    std::fs::write(&file, &data).unwrap();
    let e = SymbolFile::open(&file, None, None).unwrap_err();
    assert!(matches!(e, Error::BadElf { .. }), "{e:?}");
    let want = format!("{}: bad ELF file: DWARF: .debug_info: ", file.display());
    assert!(e.to_string().starts_with(&want), "{e}");
}

/// A shared object whose one function `f` carries `levels` nested `DW_TAG_inlined_subroutine`
/// DIEs (no attributes, two bytes a level), written as assembly and linked by gcc.
pub(crate) fn deep_inline_so(dir: &Path, levels: usize) -> PathBuf {
    let mut s = String::from(
        ".text\n.globl f\n.type f,@function\nf:\n.fill 64,1,0x90\nret\n.size f,.-f\nf_end:\n\
         .section .debug_abbrev,\"\",@progbits\n\
         .uleb128 1\n.uleb128 0x11\n.byte 1\n.uleb128 0x11\n.uleb128 0x01\n.uleb128 0x12\n.uleb128 0x01\n.byte 0,0\n\
         .uleb128 2\n.uleb128 0x2e\n.byte 1\n.uleb128 0x11\n.uleb128 0x01\n.uleb128 0x12\n.uleb128 0x01\n.uleb128 0x03\n.uleb128 0x08\n.byte 0,0\n\
         .uleb128 3\n.uleb128 0x1d\n.byte 1\n.byte 0,0\n\
         .byte 0\n\
         .section .debug_info,\"\",@progbits\n\
         .4byte 2f-1f\n1:\n.2byte 4\n.4byte 0\n.byte 8\n\
         .uleb128 1\n.8byte f\n.8byte f_end\n\
         .uleb128 2\n.8byte f\n.8byte f_end\n.asciz \"f\"\n",
    );
    s.push_str(&format!(".rept {levels}\n.uleb128 3\n.endr\n"));
    s.push_str(&format!(".rept {levels}\n.byte 0\n.endr\n"));
    s.push_str(".byte 0\n.byte 0\n2:\n");
    std::fs::write(dir.join("deep.s"), s).unwrap();
    let out = dir.join("deep.so");
    let status = Command::new("gcc")
        .args(["-shared", "-nostdlib", "-o"])
        .arg(&out)
        .arg(dir.join("deep.s"))
        .status()
        .unwrap();
    assert!(status.success(), "gcc on deep.s");
    out
}

/// Issue 36, item 4: 60,000 nested inlined calls made addr2line recurse once per level until
/// the stack overflowed and the process aborted. The unit is refused before addr2line sees
/// it: `f` still gets its name from the symbol table, and the file counts one unit too deep.
#[test]
fn frames_deep_inline_nesting_refused() {
    let dir = tempfile::tempdir().unwrap();
    let so = deep_inline_so(dir.path(), 60_000);
    let file = SymbolFile::open(&so, None, None).unwrap();
    let f = file.symbol_address("f").expect("f in the symbol table");
    let frames = file.frames(f + 4);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].name.as_deref(), Some("f"));
    assert_eq!(file.declaration(f + 4), None);
    assert_eq!(file.units_too_deep(), 1);
    // Shallow nesting is read as before.
    let shallow = deep_inline_so(dir.path(), 3);
    let file = SymbolFile::open(&shallow, None, None).unwrap();
    let f = file.symbol_address("f").unwrap();
    let _ = file.frames(f + 4);
    assert_eq!(file.units_too_deep(), 0);
}

/// Issue 36, item 10: a symbol file another user owns is read, not mapped: truncating it
/// afterwards (what that user can do at any time) cannot kill the reader with SIGBUS
/// (before: the next access to the mapping did). A FIFO is refused at once.
#[test]
fn map_file_foreign_file_survives_truncation() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (_d, prog) = build(&["-g", "-O1"], "prog");
    let copy = dir.path().join("prog");
    std::fs::copy(&prog, &copy).unwrap();
    if std::fs::metadata(&copy).unwrap().uid() != 0 {
        return; // giving the file to another user needs root (CI runs as root)
    }
    std::os::unix::fs::chown(&copy, Some(65534), None).unwrap();
    let map = map_file(&copy).unwrap();
    let len = map.len();
    std::fs::File::create(&copy).unwrap(); // truncated to 0 bytes
    let sum: u64 = map.iter().map(|&b| u64::from(b)).sum();
    assert!(sum > 0 && map.len() == len);
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = map_file(&fifo).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

/// Where an uprobe goes for a function named by any of its aliases (`libc.so.6:write`, which
/// the symbol table keeps as one of `write`, `__write`, `__libc_write`): the same offset,
/// the file offset of its first instruction.
#[test]
fn function_offset_alias_names_same_offset() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("alias.c"),
        "__attribute__((noinline)) int real_write(int x) { return x + 1; }\n\
         int write_alias(int x) __attribute__((alias(\"real_write\")));\n\
         int main(int c, char **v) { (void)v; return write_alias(c); }\n",
    )
    .unwrap();
    let exe = cc_in(dir.path(), &["-O2", "-g"], "alias.c", "alias");
    let f = SymbolFile::open(&exe, None, None).unwrap();
    let real = f.function_offset("real_write").expect("real_write");
    assert_eq!(f.function_offset("write_alias"), Some(real));
    assert!(!real.1);
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    use object::{Object as _, ObjectSegment as _, ObjectSymbol as _};
    let addr = obj
        .symbols()
        .find(|s| s.name() == Ok("real_write"))
        .unwrap()
        .address();
    let seg = obj
        .segments()
        .find(|s| addr >= s.address() && addr < s.address() + s.size())
        .unwrap();
    assert_eq!(real.0, seg.file_range().0 + (addr - seg.address()));
    assert_eq!(f.function_offset("no_such_function"), None);
}
