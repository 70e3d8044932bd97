//! kprof's output formats, each rendered from a symbolized [`kprof_symbols::profile::Profile`],
//! and the per-function comparison of two profiles.
//!
//! Every renderer writes to a `dyn Write` and reads nothing else: `kprofctl` decides where the
//! output goes, shows progress and parses arguments.
//!
//! ```
//! use kprof_symbols::profile::Profile;
//!
//! /// The flamegraph of a profile that `kprof_symbols` made, on standard output.
//! fn show(profile: &Profile) -> Result<(), kprof_report::Error> {
//!     kprof_report::flamegraph::write_svg(profile, &mut std::io::stdout())
//! }
//! ```
#![warn(missing_docs)]

pub mod collapsed;
pub mod compare;
pub mod diff;
mod error;
pub mod escape;
pub mod firefox;
pub mod flamegraph;
pub mod html;
pub mod json;
pub mod latency;
pub mod marks;
pub mod off_cpu;
pub mod pprof;
#[cfg(test)]
mod test_support;
pub mod text;

pub use error::Error;
