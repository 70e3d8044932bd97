//! For the unit tests: a hand-built profile, a real capture recorded by `perf`, and
//! headless Chromium. `capture` and `chromium` are also compiled into kprofctl's
//! integration tests (`#[path]`).

pub mod capture;
pub mod chromium;
pub mod fixture;
