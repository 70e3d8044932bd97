//! The kprof capture format, shared by `kprof-agent` (writer) and `kprofctl` (reader).
//!
//! A capture is `ID.kprof.tar.gz` holding [`PERF_DATA`], [`MANIFEST`], [`KALLSYMS`] and
//! [`MODULES`]. The manifest schema is documented in `docs/capture-format.md`; bump
//! [`MANIFEST_VERSION`] on any change a reader of the previous version would misread.

#![warn(missing_docs)]

pub mod build_id;
pub mod bytes;
pub mod elf;
pub mod info;
pub mod listing;
pub mod manifest;
pub mod perf_abi;
pub mod time;

pub use manifest::{Manifest, ManifestError};

/// The agent's default capture directory on the board, where kprofctl looks for captures.
pub const CAPTURE_DIR: &str = "/var/lib/kprof/captures";
/// File name suffix of a capture archive.
pub const ARCHIVE_SUFFIX: &str = ".kprof.tar.gz";
/// The standard PERFILE2 file inside the archive.
pub const PERF_DATA: &str = "perf.data";
/// The JSON manifest inside the archive.
pub const MANIFEST: &str = "manifest.json";
/// Snapshot of `/proc/kallsyms` taken while the capture ran.
pub const KALLSYMS: &str = "kallsyms";
/// Snapshot of `/proc/modules` taken while the capture ran.
pub const MODULES: &str = "modules";
/// Value of [`Manifest::schema`].
pub const MANIFEST_SCHEMA: &str = "kprof-capture-manifest";
/// Current manifest version written by the agent.
pub const MANIFEST_VERSION: u32 = 1;
