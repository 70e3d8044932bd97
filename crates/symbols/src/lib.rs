//! Build-id matched symbolization for kprof.
//!
//! Reads a capture (kprof archive or bare perf.data), finds the symbol file of every image by
//! GNU build-id and nothing else, and aggregates samples into a [`profile::Profile`] of resolved
//! stacks that the renderers in `kprofctl` turn into text, JSON, flamegraphs, pprof or HTML.

pub mod discover;
pub mod profile;
