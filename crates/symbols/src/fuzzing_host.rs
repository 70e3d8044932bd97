//! Entry points of the fuzz targets for what kprofctl reads besides captures: ELF/DWARF
//! symbol files, `perf archive` tarballs and the board's capture listing. Errors are fine;
//! panics, aborts and hangs are bugs.

use crate::elf::SymbolFile;
use crate::unwind::{Place, ProcessUnwinder, UnwindRegs};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// A scratch directory for the files the readers take by path, made once per process below
/// `$KPROF_FUZZ_SCRATCH` (ci/fuzz-smoke points it to a directory it removes), else /dev/shm
/// when there is one (the fuzzers write a file per input), else the temporary directory. It
/// outlives the process: libFuzzer exits without running destructors.
fn scratch() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let parent = match std::env::var_os("KPROF_FUZZ_SCRATCH") {
            Some(dir) => PathBuf::from(dir),
            None if shm.is_dir() => shm.to_path_buf(),
            None => std::env::temp_dir(),
        };
        tempfile::Builder::new()
            .prefix("kprof-fuzz-")
            .tempdir_in(parent)
            .expect("a scratch directory for the fuzz target")
            .keep()
    })
}

/// Writes `bytes` to the scratch file `name` and returns its path.
fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    let mut f = std::fs::File::create(&path).expect("writing the scratch file");
    f.write_all(bytes).expect("writing the scratch file");
    path
}

/// Opens `bytes` as a symbol file and makes the lookups a report makes of it: the symbol,
/// source line and inline frames of addresses (each symbol's start, middle and end, each
/// segment's start), the line table and code bytes of each function with their disassembly,
/// and one unwind step through its CFI over a stack taken from the input's last bytes.
pub fn symbol_file(bytes: &[u8]) {
    let path = scratch_file("symbols.elf", bytes);
    let Ok(file) = SymbolFile::open(&path, None, None) else {
        return;
    };
    let _ = file.symbol_address("_text");
    let mut addrs: Vec<u64> = Vec::new();
    for (start, size) in file.symbol_ranges().take(64) {
        addrs.extend([
            start,
            start.wrapping_add(size / 2),
            start.wrapping_add(size),
        ]);
        let end = start.saturating_add(size.min(4096));
        let _ = file.lines_in(start, end);
        if let Some(code) = file.code(start, end) {
            let _ = crate::disasm::decode(file.arch, code, start, &file.arm_runs(start, end));
        }
    }
    for offset in [0u64, 0x1000, u64::MAX] {
        if let Some(a) = file.offset_to_address(offset) {
            addrs.push(a);
        }
    }
    addrs.push(u64::MAX);
    for &a in &addrs {
        let _ = file.symbol_at(a);
        let _ = file.location(a);
        let _ = file.frames(a);
        let _ = file.contains_placed(a);
    }
    let Some(cfi) = file.cfi() else {
        return;
    };
    let Some(mut unwinder) = ProcessUnwinder::new(file.arch) else {
        return;
    };
    let stack = &bytes[bytes.len().saturating_sub(256)..];
    for &pc in addrs.iter().take(16) {
        let _ = cfi.covers(pc);
        let _ = cfi.return_address_in_lr(pc);
        let regs = UnwindRegs {
            pc,
            sp: 0x7fff_0000,
            fp: 0x7fff_0010,
            lr: Some(pc.wrapping_add(4)),
            // A 32-bit Arm file's walk (DWARF rows, then EHABI) starts from r0-r15.
            arm32: (file.arch == crate::Arch::Arm).then(|| {
                let mut r = [0u32; 16];
                (r[11], r[13], r[14], r[15]) = (
                    0x7fff_0010,
                    0x7fff_0000,
                    pc.wrapping_add(4) as u32,
                    pc as u32,
                );
                crate::exidx::Regs::sampled(r)
            }),
        };
        let _ = unwinder.unwind(&regs, stack, &mut |_| Place::Cfi {
            name: "fuzz".into(),
            avma: 0..u64::MAX,
            base_avma: 0,
            cfi: cfi.clone(),
        });
    }
}

/// What the perf_archive target may unpack per input.
const FUZZ_UNPACK_LIMIT: u64 = 64 << 20;

/// Reads `bytes` as a `perf archive` tarball as `--symbols` does, unpacking its symbol files
/// into a scratch directory. A bzip2 stream (`BZh`) is read as such; other bytes are taken as
/// the tar stream inside, so that the mutations reach the tar headers and not only the
/// bzip2 CRCs.
pub fn perf_archive(bytes: &[u8]) {
    let dir = scratch().join("perf-archive");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let name = Path::new("fuzz.tar.bz2");
    if bytes.starts_with(crate::perf_archive::BZIP2_MAGIC) {
        let reader = bzip2::read::BzDecoder::new(bytes);
        let _ = crate::perf_archive::unpack_members(reader, &dir, name, FUZZ_UNPACK_LIMIT);
    } else {
        let _ = crate::perf_archive::unpack_members(bytes, &dir, name, FUZZ_UNPACK_LIMIT);
    }
    // Nothing may land outside the directory it unpacks to.
    for entry in std::fs::read_dir(scratch()).into_iter().flatten().flatten() {
        let n = entry.file_name();
        assert!(
            n == "perf-archive" || n == "symbols.elf",
            "perf archive member written outside its directory: {n:?}"
        );
    }
}

/// Parses `bytes` as the board's answer to kprofctl's capture listing and checks what
/// kprofctl relies on: ids are non-empty single file names without control characters, each
/// path is listed once and ends with its id and the archive suffix, captures are in the
/// listing's order (by sequence number, then id).
pub fn capture_list(bytes: &[u8]) {
    let listed = kprof_capture::listing::parse(bytes);
    for (i, c) in listed.iter().enumerate() {
        assert!(!c.id.is_empty() && !c.id.contains('/'), "{c:?}");
        assert!(!c.id.chars().any(char::is_control), "{c:?}");
        assert!(
            c.path
                .ends_with(&format!("{}{}", c.id, kprof_capture::ARCHIVE_SUFFIX)),
            "{c:?}"
        );
        assert!(listed[..i].iter().all(|o| o.path != c.path), "{c:?}");
        if i > 0 {
            // Oldest first: unnumbered ids by id, then numbered ones by sequence number.
            let key = |id: &str| (kprof_capture::listing::sequence(id), id.to_owned());
            assert!(key(&listed[i - 1].id) <= key(&c.id), "{listed:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    /// A listing with an old unnumbered id and a numbered one: the harness takes the listing's
    /// order (sequence number first), which fuzz-smoke found the id-order check rejecting
    /// (`fuzz/seeds/capture_list/numbered-after-unnumbered.txt`).
    #[test]
    fn capture_list_listing_numbered_after_unnumbered() {
        super::capture_list(
            b"4590 /d/20261126-135500-4590-abcd.kprof.tar.gz\n\
              10 /d/20261126-135500-1a2b.kprof.tar.gz\n\
              3 /d/19700101-000003-0002-ffff.kprof.tar.gz\n",
        );
        super::capture_list(include_bytes!(
            "../../../fuzz/seeds/capture_list/numbered-after-unnumbered.txt"
        ));
    }
}
