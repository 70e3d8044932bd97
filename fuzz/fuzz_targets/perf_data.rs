//! Arbitrary bytes as a bare perf.data: header checks, record parsing, symbolization.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::perf_data(data);
});
