//! kprof-debuginfod against real servers: Debian's `debuginfod` started on 127.0.0.1 over ELF
//! files built here, `python3 -m http.server`, a listener that never answers, and Debian's
//! `debuginfod-find` sharing the cache.

mod failures;
mod fetch;
mod interop;
mod support;
