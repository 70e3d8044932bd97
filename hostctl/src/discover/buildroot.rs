//! Symbol files of a Buildroot output directory (`O=`, or `output/` of an in-tree build).
//!
//! - `images/kprof-symbols/`: what the kprof package exports (vmlinux, unstripped modules
//!   and agent, laid out like the target) — complete when present;
//! - `build/linux-<version>/vmlinux` and the in-tree modules of its `modules.order`;
//! - `build/<package>-<version>/**/*.ko`: out-of-tree modules (kernel-module packages),
//!   unstripped, as kbuild left them;
//! - the executable files at the top of each other package's build directory and one level
//!   below (`build/busybox-<version>/busybox_unstripped`, a `src/` or `.libs/` of autotools):
//!   the programs and libraries as the package built them, before Buildroot stripped the
//!   copies it installed on the target (Buildroot keeps no other unstripped copy of a
//!   program, and none at all of busybox);
//! - `build/kprof-<version>/target/<triple>/{release,debug}/kprof-agent`, the unstripped agent
//!   (debug with `BR2_ENABLE_DEBUG`);
//! - `staging/` (the sysroot: libraries unstripped) and `target/` (the image's files as the
//!   board has them, stripped but with the same build-ids) for user-space ELFs. The build-id
//!   index prefers a file with DWARF, then one with `.symtab`, so the stripped modules under
//!   `target/lib/modules` never win over the unstripped ones of `build/`.

use std::path::{Path, PathBuf};

use super::{find_modules, kernel_build_modules, read_dir_sorted, subdirs, DiscoverError};

/// Build directories of Linux that are not the kernel itself.
const NOT_THE_KERNEL: &[&str] = &[
    "linux-headers-",
    "linux-firmware-",
    "linux-tools",
    "linux-pam-",
    "linux-atm-",
    "linux-zigbee-",
    "linux-backports-",
];

/// Symbol paths of the Buildroot output directory `output`.
pub fn symbol_paths(output: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    let output = output_dir(output)?;
    let mut out = Vec::new();
    let exported = output.join("images").join("kprof-symbols");
    if exported.is_dir() {
        out.push(exported);
    }
    let build = output.join("build");
    let mut executables = Vec::new();
    for pkg in subdirs(&build)? {
        let name = pkg
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("linux-") && !NOT_THE_KERNEL.iter().any(|p| name.starts_with(p)) {
            let vmlinux = pkg.join("vmlinux");
            if vmlinux.is_file() {
                out.push(vmlinux);
                out.extend(kernel_build_modules(&pkg));
            }
            continue;
        }
        if name.starts_with("host-") || name.starts_with("buildroot-") {
            continue;
        }
        // Out-of-tree modules sit in the package's top directory or a few levels below.
        find_modules(&pkg, 3, &mut out)?;
        if name.starts_with("kprof-") {
            for triple in subdirs(&pkg.join("target"))? {
                for profile in ["release", "debug"] {
                    let agent = triple.join(profile).join("kprof-agent");
                    if agent.is_file() {
                        out.push(agent);
                    }
                }
            }
        } else {
            executables.extend(find_executables(&pkg, 1)?);
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(DiscoverError::NotABuildTree {
            path: output.to_path_buf(),
            why: "no images/kprof-symbols, no built kernel and no kernel module under build/ (run make first)".into(),
        });
    }
    out.extend(executables);
    for user in ["staging", "target"] {
        let dir = output.join(user);
        if dir.is_dir() {
            out.push(dir);
        }
    }
    Ok(out)
}

/// Regular files with an execute bit in `dir` and, `depth` levels down, its subdirectories:
/// the programs and shared libraries a package's build left, without walking its object
/// files (which have none). Sorted; symlinks and `*.ko` are not taken.
fn find_executables(dir: &Path, depth: usize) -> Result<Vec<PathBuf>, DiscoverError> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut out = Vec::new();
    for p in read_dir_sorted(dir)? {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() && depth > 0 {
            out.extend(find_executables(&p, depth - 1)?);
        } else if meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
            && meta.len() > 0
            && p.extension().is_none_or(|e| e != "ko")
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// The output directory: `dir` itself when it has `build/` and a Buildroot `.config`, or
/// `dir/output` for the top of an in-tree build.
fn output_dir(dir: &Path) -> Result<PathBuf, DiscoverError> {
    let is_output = |d: &Path| {
        d.join("build").is_dir() && (has_br2_config(d) || d.parent().is_some_and(has_br2_config))
    };
    if is_output(dir) {
        return Ok(dir.to_path_buf());
    }
    let nested = dir.join("output");
    if is_output(&nested) {
        return Ok(nested);
    }
    let why = if has_br2_config(dir) {
        "Buildroot is configured here but nothing was built yet (no build/ directory)".to_string()
    } else {
        "no .config with BR2_ options and build/ directory: not a Buildroot output directory"
            .to_string()
    };
    Err(DiscoverError::NotABuildTree {
        path: dir.to_path_buf(),
        why,
    })
}

/// True when `dir/.config` is a Buildroot configuration.
pub(super) fn has_br2_config(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(".config"))
        .is_ok_and(|t| t.lines().any(|l| l.starts_with("BR2_")))
}
