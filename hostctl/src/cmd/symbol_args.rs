//! Options that say where symbol files are, shared by `report`, `symbols`, `diff` and `fetch`.

use std::path::PathBuf;

/// Where to look for symbol files (matched by build-id only).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SymbolArgs {
    /// A symbol file or a directory to index (repeatable): vmlinux, unstripped .ko, ELF, .debug.
    #[arg(long = "symbols", value_name = "PATH")]
    pub symbols: Vec<PathBuf>,
    /// A Yocto build directory (default: $BUILDDIR when set).
    #[arg(long, value_name = "BUILDDIR")]
    pub yocto: Option<PathBuf>,
    /// A Buildroot output directory.
    #[arg(long, value_name = "OUTPUT")]
    pub buildroot: Option<PathBuf>,
    /// Rewrite source paths recorded at build time (repeatable), e.g. /build/linux=/home/me/linux.
    #[arg(long = "source-prefix", value_name = "OLD=NEW")]
    pub source_prefix: Vec<String>,
}
