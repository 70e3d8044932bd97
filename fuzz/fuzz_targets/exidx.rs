//! Arbitrary `.ARM.exidx`/`.ARM.extab` bytes, registers and stack through the EHABI unwinder.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::exidx(data);
});
