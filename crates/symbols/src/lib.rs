//! Build-id matched symbolization for kprof.
//!
//! Reads a capture (kprof archive or bare perf.data), finds the symbol file of every image by
//! GNU build-id and nothing else, and aggregates samples into a [`profile::Profile`] of resolved
//! stacks that the renderers of `kprof-report` turn into text, JSON, flamegraphs, pprof or HTML.
//!
//! ```no_run
//! let profile = kprof_symbols::symbolize("capture.kprof.tar.gz".as_ref(), &["vmlinux".into()])?;
//! for row in kprof_symbols::views::functions(&profile, &kprof_symbols::views::Filter::default()) {
//!     println!("{} {:?}", row.samples[0], profile.functions[row.function].name);
//! }
//! # Ok::<(), kprof_symbols::Error>(())
//! ```

#![warn(missing_docs)]

pub mod annotate;
mod arch;
pub use arch::Arch;
pub mod capture;
pub mod demangle;
mod disasm;
pub mod elf;
mod error;
pub mod exidx;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod fuzzing_host;
pub mod image_warnings;
pub mod index;
pub mod kallsyms;
pub mod latency;
pub mod limits;
pub mod marks;
pub mod off_cpu;
pub mod perf_archive;
pub mod perf_data;
pub mod profile;
pub mod provider;
mod quiet_panic;
pub mod source_file;
pub mod sources;
mod symbolize;
#[cfg(test)]
mod synthetic_perf_data;
pub mod tracing_data;
pub mod unwind;
pub mod views;

pub use capture::Capture;
pub use error::{Error, Result};
pub use profile::Profile;
pub use symbolize::{symbolize, HostKernel, Options, Progress, Symbolizer};
