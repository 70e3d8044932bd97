//! Arbitrary bytes as a `perf archive` tarball (bzip2, or the tar stream inside it) unpacked
//! as `--symbols perf.data.tar.bz2` does.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kprof_symbols::fuzzing_host::perf_archive(data);
});
