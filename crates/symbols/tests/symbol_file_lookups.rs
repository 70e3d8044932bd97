//! Findings of the `symbol_file` fuzz target (fuzz/fuzz_targets/symbol_file.rs), replayed on
//! the target's real seed: lookups at the edges of the address space give "nothing", never a
//! panic (these tests run with overflow checks, as the fuzzer does).

use kprof_symbols::elf::SymbolFile;
use std::path::Path;

fn seed(name: &str) -> SymbolFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds/symbol_file")
        .join(name);
    SymbolFile::open(&path, None, None).expect("the seed opens")
}

/// The source line and frames of address u64::MAX (addr2line 0.25 computed `addr + 1` and
/// overflowed: found by the fuzzer in its first run) are none, in an executable and in a
/// relocatable file; the executable's lookups still work elsewhere.
#[test]
fn lookup_symbol_file_address_max_none() {
    for name in ["x86_64-tiny-g-O1", "x86_64-tiny-g-O1.o"] {
        let f = seed(name);
        assert_eq!(f.location(u64::MAX), None, "{name}");
        assert!(
            f.frames(u64::MAX).iter().all(|fr| fr.file.is_none()),
            "{name}"
        );
    }
    let f = seed("x86_64-tiny-g-O1");
    let start = f.symbol_address("scale").expect("scale");
    let (_, _, size) = f.symbol_at(start).unwrap();
    assert!(f.location(start).is_some());
    assert!(f.code(start, start + size).is_some());
}

/// Code ranges that wrap around or run backwards are "no code".
#[test]
fn code_symbol_file_wrapping_range_none() {
    let f = seed("x86_64-tiny-g-O1");
    assert_eq!(f.code(u64::MAX - 1, 2), None);
    assert_eq!(f.code(u64::MAX, u64::MAX), None);
    let (start, _) = f.symbol_ranges().next().unwrap();
    assert_eq!(f.code(start + 4, start), None);
}
