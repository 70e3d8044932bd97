//! Does a vmlinux in the local build belong to the kernel the board runs? Like crosstap's check:
//! compare the GNU build-id of `/sys/kernel/notes` with the vmlinux files kprofctl would use.

use crate::cmd::symbol_args::SymbolArgs;
use crate::progress::{self, Counting};
use kprof_symbols::index::BuildIdIndex;
use std::path::PathBuf;

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

/// Compares `board_id` with every ELF the report would index for these symbol options (the
/// shared persistent build-id index of `kprof_symbols`, so the report that follows reuses it).
pub fn check(board_id: Option<&str>, symbols: &SymbolArgs) -> anyhow::Result<KernelMatch> {
    let Some(board) = board_id else {
        return Ok(KernelMatch::BoardHasNoBuildId);
    };
    let opts = symbols.options()?;
    let bar = progress::bar(0, "indexing symbol paths", Counting::Bytes);
    let index = BuildIdIndex::update(&opts.symbol_paths, opts.index_store.as_deref(), &mut |p| {
        if let kprof_symbols::index::Progress::Read { done, total } = p {
            bar.set_length(total);
            bar.set_position(done);
        }
    })?;
    bar.finish_and_clear();
    if let Some((path, _)) = index.by_build_id(board).first() {
        return Ok(KernelMatch::Matches {
            board: board.to_owned(),
            vmlinux: path.to_path_buf(),
        });
    }
    let found: Vec<(PathBuf, Option<String>)> = index
        .by_name("vmlinux")
        .into_iter()
        .map(|(p, e)| (p.to_path_buf(), e.build_id.clone()))
        .collect();
    Ok(if found.is_empty() {
        KernelMatch::NoVmlinux {
            board: board.to_owned(),
        }
    } else {
        KernelMatch::Mismatch {
            board: board.to_owned(),
            found,
        }
    })
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
        std::fs::write(dir.path().join(".config"), "BR2_x86_64=y\n").unwrap();
        // Any ELF with a build-id stands in for vmlinux here: /bin/sh has one on Debian.
        std::fs::copy("/bin/sh", linux.join("vmlinux")).unwrap();
        let id = kprof_test_support::readelf_build_id(&linux.join("vmlinux"));
        let args = SymbolArgs {
            buildroot: Some(dir.path().to_path_buf()),
            ..SymbolArgs::default()
        };
        assert_eq!(
            check(Some(&id), &args).unwrap(),
            KernelMatch::Matches {
                board: id.clone(),
                vmlinux: linux.join("vmlinux")
            }
        );
        let other = check(Some("00ff"), &args).unwrap();
        assert!(other.is_mismatch());
        let msg = other.message("6.1.0");
        assert!(
            msg.contains("KERNEL BUILD-ID MISMATCH") && msg.contains(&id),
            "{msg}"
        );
        let none = check(Some("00ff"), &SymbolArgs::default()).unwrap();
        assert!(matches!(none, KernelMatch::NoVmlinux { .. }));
    }
}
