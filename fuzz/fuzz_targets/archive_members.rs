//! A valid `.kprof.tar.gz` around mutated members: manifest.json, kallsyms and perf.data
//! (input format in `kprof_symbols::fuzzing::archive_members`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::archive_members(data);
});
