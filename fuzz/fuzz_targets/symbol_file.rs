//! Arbitrary bytes as an ELF/DWARF symbol file: `SymbolFile::open` and a report's lookups
//! (symbol, line and inline frames of addresses, line tables, disassembly, one unwind step).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing_host::symbol_file(data);
});
