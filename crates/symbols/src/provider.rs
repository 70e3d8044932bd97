//! The seam for symbol files that are not on this host's disks: a [`SymbolProvider`] is asked
//! by GNU build-id for what the local places (the build-id index, `~/.debug`,
//! `/usr/lib/debug`, the recorded paths) do not have, and for source files DWARF names that
//! are not on disk. kprofctl plugs its debuginfod client in here; the library itself opens
//! no network connection.
//!
//! Whatever a provider hands back is checked like a local file: a symbol file whose build-id
//! is not the recorded one is not used.

use std::fmt::Debug;
use std::path::PathBuf;

/// Which file of an image a provider is asked for, in debuginfod's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The file with the DWARF (a split `.debug` file or the unstripped binary).
    Debuginfo,
    /// The binary as it ran: `.eh_frame` and the symbol tables a split debug file lacks.
    Executable,
}

/// One file a capture needs, for [`SymbolProvider::prefetch`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Wanted {
    /// Recorded GNU build-id, lowercase hex.
    pub build_id: String,
    /// The image's name, for messages (`vmlinux`, `mychardrv.ko`, `libc.so.6`).
    pub image: String,
    /// Which file.
    pub kind: FileKind,
}

/// A file a provider found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provided {
    /// Where it is now (a cache on this host).
    pub path: PathBuf,
    /// Where it came from, as `kprofctl symbols` shows it (`debuginfod: URL`).
    pub origin: String,
}

/// Why a provider has no file for a request; said in the image's warning (or the annotation's)
/// as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// A place symbol files and sources come from besides this host's disks.
///
/// Called from the symbolizer's thread; a provider that downloads does its own parallelism in
/// [`prefetch`](SymbolProvider::prefetch).
pub trait SymbolProvider: Debug + Send + Sync {
    /// Gets ready for all the files a capture will ask for, at once: the symbolizer calls it
    /// once per capture, before the samples are walked, with every recorded build-id that
    /// the local places do not have.
    fn prefetch(&self, wanted: &[Wanted]);

    /// The file of `kind` with GNU build-id `build_id`; the error says why there is none.
    fn file(&self, build_id: &str, kind: FileKind) -> Result<Provided, Unavailable>;

    /// The text of source file `path` (absolute, as DWARF names it) of the image with
    /// `build_id`.
    fn source(&self, build_id: &str, path: &str) -> Result<String, Unavailable>;

    /// What the provider is, for warnings (`debuginfod (URL ...)`).
    fn name(&self) -> String {
        "a symbol provider".into()
    }

    /// What went wrong on the provider's side during the run (a server that failed, the
    /// build-ids no server had), said once in the report's warnings.
    fn warnings(&self) -> Vec<String>;
}
