//! For the unit tests: a hand-built profile, real captures recorded by `perf` (the
//! two-phase one for time windows), and headless Chromium. `capture`, `chromium` and
//! `phases` are also compiled into kprofctl's integration tests (`#[path]`).

pub mod capture;
pub mod chromium;
pub mod fixture;
pub mod phases;
