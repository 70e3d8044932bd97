//! Arbitrary bytes as perf.data's HEADER_TRACING_DATA, and RAW payloads decoded with its formats.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::tracing_data(data);
});
