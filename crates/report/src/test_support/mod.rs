//! For the unit tests: a hand-built profile, a real capture recorded by `perf`, and headless
//! Chromium; the last two are kprof-test-support's, shared with kprof-symbols' and kprofctl's
//! integration tests.

pub use kprof_test_support::report::{capture, chromium};
pub mod fixture;
