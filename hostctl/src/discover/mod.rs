//! Build trees: telling a Yocto build directory or a Buildroot output directory apart (for
//! `kprofctl build`), and where such a tree keeps the files that carry symbols (for
//! `--yocto` and `--buildroot`).
//!
//! Where a Yocto build directory or a Buildroot output directory keeps the files that carry
//! symbols: vmlinux, unstripped modules, split debuginfo, unstripped user binaries.
//!
//! Discovery only lists candidate files and directories; the build-id index decides which
//! of them is used. It reads directory layouts (and, for Yocto, `bitbake -e virtual/kernel`
//! when the layout shows no kernel and bitbake is at hand), never file contents beyond
//! `modules.order`.

pub mod bitbake_env;
pub mod buildroot;
pub mod yocto;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

/// Errors while looking into a build tree.
#[derive(Debug)]
pub enum DiscoverError {
    /// The directory does not look like the kind of build tree it was given as.
    NotABuildTree { path: PathBuf, why: String },
    /// Reading the tree failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for DiscoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotABuildTree { path, why } => write!(f, "{}: {why}", path.display()),
            Self::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

/// The I/O reason is part of the message, so it is not also a `source` (anyhow's `{:#}` would
/// print it twice).
impl std::error::Error for DiscoverError {}

/// A Yocto build directory as oe-init-build-env sets it up (`conf/bblayers.conf` and
/// `conf/local.conf`).
pub fn is_yocto_builddir(d: &Path) -> bool {
    d.join("conf").join("bblayers.conf").is_file() && d.join("conf").join("local.conf").is_file()
}

/// A directory where `make` builds a Buildroot configuration: a `Makefile` and a Buildroot
/// `.config` (the top of an in-tree build, or an `O=` output directory).
pub fn is_buildroot_dir(d: &Path) -> bool {
    d.join("Makefile").is_file() && buildroot::has_br2_config(d)
}

/// Files and directories of a Yocto build directory (`$BUILDDIR`) that may hold symbols.
///
/// The work directory layout finds the kernel's `B` of kernel.bbclass and linux-yocto
/// recipes. Only when it finds no vmlinux is `bitbake -e virtual/kernel` asked for `B` (if
/// `bitbake` is on `PATH` and `bitbake` allows it): that can take minutes when the
/// configuration changed since the last parse, too slow to run on every report.
pub fn yocto_symbol_paths(
    builddir: &Path,
    bitbake: Bitbake,
) -> Result<Vec<PathBuf>, DiscoverError> {
    let found = yocto::symbol_paths(builddir, None);
    let has_vmlinux = |paths: &[PathBuf]| {
        paths
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == "vmlinux"))
    };
    if matches!(&found, Ok(paths) if has_vmlinux(paths)) {
        return found;
    }
    if matches!(&found, Err(DiscoverError::NotABuildTree { .. }))
        && !builddir.join("conf").join("local.conf").is_file()
    {
        return found;
    }
    if let Bitbake::NotFromFoundFile(file) = bitbake {
        crate::term::warning(format_args!(
            "not asking bitbake for the kernel's build directory in {}: it was named by {}, \
             found by search, and bitbake runs code from that directory; pass --yocto {} or \
             KPROF_CONFIG={} to allow it (docs/security.md)",
            builddir.display(),
            file.display(),
            builddir.display(),
            file.display()
        ));
        return found;
    }
    match yocto::kernel_env_from_bitbake(builddir) {
        Some(env) => yocto::symbol_paths(builddir, Some(&env)),
        None => found,
    }
}

/// Whether discovery may run `bitbake` in a Yocto build directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bitbake {
    /// The user named the directory (command line, `$BUILDDIR`, `$KPROF_CONFIG`).
    MayRun,
    /// The directory came from this `kprof.toml`, found by searching up from the working
    /// directory: whoever could write there must not be able to run code as the user.
    NotFromFoundFile(PathBuf),
}

/// Files and directories of a Buildroot output directory that may hold symbols.
pub fn buildroot_symbol_paths(output: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    buildroot::symbol_paths(output)
}

/// Sorted entries of a directory; a missing directory is empty, other errors are errors.
fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(DiscoverError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|source| DiscoverError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        out.push(entry.path());
    }
    out.sort();
    Ok(out)
}

/// Subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    Ok(read_dir_sorted(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect())
}

/// `*.ko` files below `dir`, at most `depth` levels down, sorted; symlinks are not followed.
fn find_modules(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), DiscoverError> {
    for p in read_dir_sorted(dir)? {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() && depth > 0 {
            find_modules(&p, depth - 1, out)?;
        } else if meta.is_file() && p.extension().is_some_and(|e| e == "ko") {
            out.push(p);
        }
    }
    Ok(())
}

/// In-tree modules of a kernel build directory, from its `modules.order` (entries are
/// `drivers/x/y.ko` up to Linux 6.1, `drivers/x/y.o` since 6.2); only those that exist.
fn kernel_build_modules(kbuild: &Path) -> Vec<PathBuf> {
    let Ok(order) = std::fs::read_to_string(kbuild.join("modules.order")) else {
        return Vec::new();
    };
    order
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let l = l.strip_prefix("kernel/").unwrap_or(l);
            let ko = l
                .strip_suffix(".o")
                .map(|s| format!("{s}.ko"))
                .unwrap_or_else(|| l.to_string());
            kbuild.join(ko)
        })
        .filter(|p| p.is_file())
        .collect()
}
