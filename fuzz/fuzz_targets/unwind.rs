//! Arbitrary registers, stack bytes and `.debug_frame` through the user-stack unwinder.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing::unwind(data);
});
