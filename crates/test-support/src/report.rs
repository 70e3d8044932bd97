//! The renderers' real captures and headless Chromium, for kprof-report's unit tests,
//! kprof-symbols' and kprofctl's integration tests (feature `report`).

pub mod capture;
pub mod chromium;
pub mod phases;
