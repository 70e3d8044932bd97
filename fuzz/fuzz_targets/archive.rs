//! Arbitrary bytes as a kprof archive: gzip, tar headers and members, the manifest.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::archive(data);
});
