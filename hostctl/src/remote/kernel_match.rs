//! Does a vmlinux in the local build belong to the kernel the board runs? Like crosstap's check:
//! compare the GNU build-id of `/sys/kernel/notes` with the vmlinux files kprofctl would use.

use crate::cmd::symbol_args::SymbolArgs;
use object::{Object as _, ReadCache};
use std::path::{Path, PathBuf};

/// The outcome, worded by [`KernelMatch::message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelMatch {
    /// The board did not give a build-id (no /sys/kernel/notes or no GNU note).
    BoardHasNoBuildId,
    /// No vmlinux was found in the symbol paths.
    NoVmlinux {
        board: String,
    },
    Matches {
        board: String,
        vmlinux: PathBuf,
    },
    /// vmlinux files were found, none with the board's build-id.
    Mismatch {
        board: String,
        found: Vec<(PathBuf, Option<String>)>,
    },
}

impl KernelMatch {
    pub fn is_mismatch(&self) -> bool {
        matches!(self, KernelMatch::Mismatch { .. })
    }

    /// A line (or block, for a mismatch) for the preflight output.
    pub fn message(&self, release: &str) -> String {
        match self {
            KernelMatch::BoardHasNoBuildId => format!(
                "kernel {release}: the board exposes no build-id (/sys/kernel/notes): kernel \
                 symbols cannot be matched to a vmlinux and will come from kallsyms"
            ),
            KernelMatch::NoVmlinux { board } => format!(
                "kernel {release} build-id {board}: no vmlinux in the symbol paths \
                 (--buildroot, --yocto, --symbols): kernel functions will come from kallsyms, \
                 without source lines"
            ),
            KernelMatch::Matches { board, vmlinux } => format!(
                "kernel {release} build-id {board} matches {}",
                vmlinux.display()
            ),
            KernelMatch::Mismatch { board, found } => {
                let mut s = format!(
                    "KERNEL BUILD-ID MISMATCH: the board runs kernel {release} with build-id \
                     {board}, but no local vmlinux has it:"
                );
                for (path, id) in found {
                    s.push_str(&format!(
                        "\n    {} has {}",
                        path.display(),
                        id.as_deref().unwrap_or("no build-id")
                    ));
                }
                s.push_str(
                    "\n  The board does not run the kernel of this build: kernel samples will be \
                     named from kallsyms only, without source lines. Boot the kernel of this \
                     build, or point --symbols/--buildroot/--yocto at the board's build.",
                );
                s
            }
        }
    }
}

/// Compares `board_id` with every vmlinux found through `symbols`.
pub fn check(board_id: Option<&str>, symbols: &SymbolArgs) -> KernelMatch {
    let Some(board) = board_id else {
        return KernelMatch::BoardHasNoBuildId;
    };
    let mut found = Vec::new();
    for path in vmlinux_candidates(symbols) {
        let id = build_id(&path);
        if id.as_deref() == Some(board) {
            return KernelMatch::Matches {
                board: board.to_owned(),
                vmlinux: path,
            };
        }
        found.push((path, id));
    }
    if found.is_empty() {
        KernelMatch::NoVmlinux {
            board: board.to_owned(),
        }
    } else {
        KernelMatch::Mismatch {
            board: board.to_owned(),
            found,
        }
    }
}

/// The GNU build-id of an ELF file, reading only its headers and notes.
pub fn build_id(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let id = obj.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// vmlinux files where the symbol options point: `--symbols` files and directories (searched a
/// few levels deep), Buildroot's `build/linux-*/vmlinux`, Yocto's kernel build and deploy dirs.
pub fn vmlinux_candidates(symbols: &SymbolArgs) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in &symbols.symbols {
        if path.is_file() {
            if is_vmlinux_name(path) {
                out.push(path.clone());
            }
        } else {
            walk(path, 4, &mut out);
        }
    }
    if let Some(br) = &symbols.buildroot {
        for dir in subdirs(&br.join("build"), "linux-") {
            push_file(&dir.join("vmlinux"), &mut out);
        }
        push_file(&br.join("images/vmlinux"), &mut out);
    }
    let yocto = symbols
        .yocto
        .clone()
        .or_else(|| std::env::var_os("BUILDDIR").map(PathBuf::from));
    if let Some(build) = yocto {
        for tmp in subdirs(&build, "tmp") {
            for machine in subdirs(&tmp.join("deploy/images"), "") {
                walk(&machine, 1, &mut out);
            }
            for arch in subdirs(&tmp.join("work"), "") {
                for recipe in subdirs(&arch, "linux-") {
                    for version in subdirs(&recipe, "") {
                        for build_dir in subdirs(&version, "linux-") {
                            push_file(&build_dir.join("vmlinux"), &mut out);
                        }
                    }
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.canonicalize().unwrap_or_else(|_| p.clone())));
    out
}

fn is_vmlinux_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("vmlinux")
        && ![
            ".gz", ".bz2", ".xz", ".lzma", ".zst", ".bin", ".o", ".a", ".lds", ".symvers", ".cmd",
        ]
        .iter()
        .any(|s| name.ends_with(s))
}

fn push_file(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
    }
}

fn subdirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if depth > 0 && !path.is_symlink() {
                walk(&path, depth - 1, out);
            }
        } else if is_vmlinux_name(&path) && path.is_file() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vmlinux-named ELF is matched by its build-id, and another id is a loud mismatch.
    #[test]
    fn check_kernel_build_id_match_and_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let linux = dir.path().join("build/linux-6.1");
        std::fs::create_dir_all(&linux).unwrap();
        // Any ELF with a build-id stands in for vmlinux here: /bin/sh has one on Debian.
        std::fs::copy("/bin/sh", linux.join("vmlinux")).unwrap();
        let id = build_id(&linux.join("vmlinux")).expect("/bin/sh has a build-id");
        let args = SymbolArgs {
            buildroot: Some(dir.path().to_path_buf()),
            ..SymbolArgs::default()
        };
        assert_eq!(
            check(Some(&id), &args),
            KernelMatch::Matches {
                board: id.clone(),
                vmlinux: linux.join("vmlinux")
            }
        );
        let other = check(Some("00ff"), &args);
        assert!(other.is_mismatch());
        let msg = other.message("6.1.0");
        assert!(
            msg.contains("KERNEL BUILD-ID MISMATCH") && msg.contains(&id),
            "{msg}"
        );
        let none = check(Some("00ff"), &SymbolArgs::default());
        assert!(matches!(none, KernelMatch::NoVmlinux { .. }));
    }
}
