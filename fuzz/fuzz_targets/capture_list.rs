//! Arbitrary bytes as the board's answer to kprofctl's capture listing (`SIZE PATH` lines).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing_host::capture_list(data);
});
