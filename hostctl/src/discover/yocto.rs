//! Symbol files of a Yocto/OpenEmbedded build directory.
//!
//! What a build leaves where (`WORKDIR` = `TMPDIR/work/<arch>/<recipe>/<version>`):
//! - the kernel's `B` (`WORKDIR/build`, linux-yocto: `WORKDIR/linux-<machine>-<type>-build`):
//!   `vmlinux` with DWARF and the in-tree modules named by `modules.order`;
//! - every recipe's `WORKDIR/image` (`D`, what do_install wrote, before stripping): for kernel
//!   and module recipes `lib/modules/...` holds the unstripped `.ko` files;
//! - `WORKDIR/packages-split/<pkg>-dbg`: split debug info of user space (`.debug` files in
//!   debug-file-directory or `.debug/` style).
//!
//! The kernel is recognised by a directory holding `vmlinux` next to `Module.symvers` or
//! `.config`; a kernel recipe with another `B` is found through `bitbake -e virtual/kernel`
//! (see [`super::yocto_symbol_paths`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::bitbake_env::BitbakeEnv;
use super::{find_modules, kernel_build_modules, read_dir_sorted, subdirs, DiscoverError};

/// Runs `bitbake -e virtual/kernel` in `builddir` if `bitbake` is on `PATH` and returns its
/// variables; `None` when bitbake is not available or fails (the layout walk then decides).
pub fn kernel_env_from_bitbake(builddir: &Path) -> Option<BitbakeEnv> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| d.join("bitbake").is_file())?;
    let out = Command::new("bitbake")
        .args(["-e", "virtual/kernel"])
        .current_dir(builddir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let env = BitbakeEnv::parse(&String::from_utf8_lossy(&out.stdout));
    env.get("B").is_some().then_some(env)
}

/// Symbol paths of the build directory `builddir`, using the kernel recipe's `bitbake -e`
/// variables when given.
pub fn symbol_paths(
    builddir: &Path,
    kernel_env: Option<&BitbakeEnv>,
) -> Result<Vec<PathBuf>, DiscoverError> {
    if !builddir.join("conf").join("local.conf").is_file() {
        return Err(DiscoverError::NotABuildTree {
            path: builddir.to_path_buf(),
            why:
                "no conf/local.conf: not a Yocto build directory (the one oe-init-build-env set up)"
                    .into(),
        });
    }
    let mut out = Vec::new();
    let mut tmpdirs = tmpdirs(builddir)?;
    if let Some(env) = kernel_env {
        if let Some(t) = env.get("TMPDIR") {
            let t = PathBuf::from(t);
            if !tmpdirs.contains(&t) {
                tmpdirs.insert(0, t);
            }
        }
        if let Some(b) = env.get("B") {
            let b = PathBuf::from(b);
            push_kernel_build(&b, &mut out);
        }
    }
    if tmpdirs.is_empty() {
        return Err(DiscoverError::NotABuildTree {
            path: builddir.to_path_buf(),
            why: "no TMPDIR with a work/ directory: nothing has been built here yet".into(),
        });
    }
    for tmp in &tmpdirs {
        for workdir in workdirs(&tmp.join("work"))? {
            scan_workdir(&workdir, &mut out)?;
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(DiscoverError::NotABuildTree {
            path: builddir.to_path_buf(),
            why: format!(
                "no vmlinux, kernel module or -dbg package under {} (not built yet, or removed by rm_work?)",
                tmpdirs.iter().map(|t| t.join("work").display().to_string()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    Ok(out)
}

/// The build's TMPDIRs: `TMPDIR` set in conf/*.conf (with `${TOPDIR}`), else `tmp` and the
/// `tmp-<libc>` directories oe-core's nodistro uses; only those that have a `work/`.
fn tmpdirs(builddir: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    let mut out = Vec::new();
    for conf in ["local.conf", "auto.conf", "site.conf"] {
        let Ok(text) = std::fs::read_to_string(builddir.join("conf").join(conf)) else {
            continue;
        };
        for line in text.lines() {
            let Some(value) = conf_assignment(line, "TMPDIR") else {
                continue;
            };
            let value = value.replace("${TOPDIR}", &builddir.to_string_lossy());
            if !value.contains("${") {
                out.push(PathBuf::from(value));
            }
        }
    }
    for p in read_dir_sorted(builddir)? {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name == "tmp" || name.starts_with("tmp-") {
            out.push(p);
        }
    }
    out.retain(|t| t.join("work").is_dir());
    let mut seen = Vec::new();
    out.retain(|t| {
        let fresh = !seen.contains(t);
        seen.push(t.clone());
        fresh
    });
    Ok(out)
}

/// The value of `NAME = "value"` (or `?=`, `??=`, `:=`) on one configuration line.
fn conf_assignment<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(name)?;
    let rest = rest.trim_start();
    let rest = ["??=", "?=", ":=", "="]
        .iter()
        .find_map(|op| rest.strip_prefix(op))?;
    let rest = rest.trim();
    rest.strip_prefix('"')?.strip_suffix('"')
}

/// `TMPDIR/work/<arch>/<recipe>/<version>` directories.
fn workdirs(work: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    let mut out = Vec::new();
    for arch in subdirs(work)? {
        for recipe in subdirs(&arch)? {
            out.extend(subdirs(&recipe)?);
        }
    }
    Ok(out)
}

/// What one recipe's WORKDIR contributes.
fn scan_workdir(workdir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DiscoverError> {
    // Kernel build directory: `build` (kernel.bbclass) or `linux-*-build` (linux-yocto).
    for d in subdirs(workdir)? {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_kbuild_name =
            name == "build" || (name.starts_with("linux-") && name.ends_with("-build"));
        if is_kbuild_name
            && d.join("vmlinux").is_file()
            && (d.join("Module.symvers").is_file() || d.join(".config").is_file())
        {
            push_kernel_build(&d, out);
        }
    }
    // Unstripped modules as installed by do_install (kernel and module recipes); usrmerge
    // puts them under usr/lib/modules.
    for modules in [
        workdir.join("image/lib/modules"),
        workdir.join("image/usr/lib/modules"),
    ] {
        if modules.is_dir() {
            let mut kos = Vec::new();
            find_modules(&modules, 8, &mut kos)?;
            if !kos.is_empty() {
                out.push(modules);
            }
        }
    }
    // Split debug info of every package of the recipe.
    for pkg in subdirs(&workdir.join("packages-split"))? {
        let is_dbg = pkg
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("-dbg"));
        if is_dbg && !dir_is_empty(&pkg)? {
            out.push(pkg);
        }
    }
    Ok(())
}

fn push_kernel_build(b: &Path, out: &mut Vec<PathBuf>) {
    let vmlinux = b.join("vmlinux");
    if vmlinux.is_file() {
        out.push(vmlinux);
    }
    out.extend(kernel_build_modules(b));
}

fn dir_is_empty(dir: &Path) -> Result<bool, DiscoverError> {
    // A -dbg package without any file (only empty directories) carries nothing.
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for p in read_dir_sorted(&d)? {
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(_) => return Ok(false),
                Err(_) => {}
            }
        }
    }
    Ok(true)
}
