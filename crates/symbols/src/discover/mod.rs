//! Where a Yocto build directory or a Buildroot output directory keeps the files that carry
//! symbols: vmlinux, unstripped modules, split debuginfo, unstripped user binaries.
//!
//! Discovery only lists candidate files and directories; the build-id index decides which
//! of them is used.

use std::path::{Path, PathBuf};

/// Errors while looking into a build tree.
#[derive(Debug)]
pub enum DiscoverError {
    /// The directory does not look like the kind of build tree it was given as.
    NotABuildTree { path: PathBuf, why: String },
    /// Reading the tree failed.
    Io { path: PathBuf, source: std::io::Error },
}

impl std::fmt::Display for DiscoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotABuildTree { path, why } => write!(f, "{}: {why}", path.display()),
            Self::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for DiscoverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::NotABuildTree { .. } => None,
        }
    }
}

/// Files and directories of a Yocto build directory (`$BUILDDIR`) that may hold symbols.
pub fn yocto_symbol_paths(builddir: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    Err(DiscoverError::NotABuildTree {
        path: builddir.to_path_buf(),
        why: "Yocto discovery is not written yet".into(),
    })
}

/// Files and directories of a Buildroot output directory that may hold symbols.
pub fn buildroot_symbol_paths(output: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    Err(DiscoverError::NotABuildTree {
        path: output.to_path_buf(),
        why: "Buildroot discovery is not written yet".into(),
    })
}
