//! Discovery against small trees laid out like real Yocto and Buildroot builds, created at
//! run time from a description, and a recorded `bitbake -e virtual/kernel`.

use std::path::{Path, PathBuf};

use super::bitbake_env::BitbakeEnv;
use super::{buildroot, yocto, DiscoverError};

/// `bitbake -e virtual/kernel` of oe-core wrynose, qemux86-64, nodistro (an excerpt: the
/// variables discovery reads, their history comments, and a shell function to skip).
const RECORDED_KERNEL_ENV: &str = include_str!("fixtures/bitbake-e-virtual-kernel.txt");
/// The build directory the recording was made in.
const RECORDED_TOPDIR: &str = "/home/bb/check-wrynose/build";

/// Creates `entries` below `root`: a trailing `/` makes a directory, `path = text` a file
/// with that content, a bare path a file with placeholder content.
fn tree(root: &Path, entries: &[&str]) {
    for e in entries {
        let (path, content) = match e.split_once(" = ") {
            Some((p, c)) => (p, c.replace("\\n", "\n")),
            None => (*e, "placeholder".to_string()),
        };
        let full = root.join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&full).unwrap();
        } else {
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, content).unwrap();
        }
    }
}

fn rel(root: &Path, paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

const KWORK: &str = "tmp/work/qemux86_64-oe-linux/linux-yocto/6.18.39+git";
const KBUILD: &str =
    "tmp/work/qemux86_64-oe-linux/linux-yocto/6.18.39+git/linux-qemux86_64-standard-build";

/// A wrynose nodistro build of core-image-minimal with tools-kprof and mychardrv (the work
/// directory names are those of the recorded build).
fn yocto_build(root: &Path, with_kernel_config: bool) {
    tree(
        root,
        &[
            "conf/local.conf = MACHINE ??= \"qemux86-64\"\\nBB_NO_NETWORK = \"1\"\\n",
            "conf/bblayers.conf = BBLAYERS ?= \"/src/oe-core/meta /src/kprof/meta-kprof\"\\n",
            &format!("{KBUILD}/vmlinux"),
            &format!("{KBUILD}/modules.order = drivers/net/dummy.o\\nfs/nfs/nfs.o\\n"),
            &format!("{KBUILD}/drivers/net/dummy.ko"),
            &format!("{KBUILD}/drivers/net/dummy.o"),
            &format!("{KBUILD}/fs/nfs/nfs.ko"),
            &format!("{KWORK}/image/lib/modules/6.18.39-yocto-standard/kernel/drivers/net/dummy.ko"),
            &format!("{KWORK}/image/boot/vmlinux-6.18.39-yocto-standard"),
            &format!("{KWORK}/packages-split/kernel-dbg/"),
            "tmp/work/qemux86_64-oe-linux/mychardrv/1.0/image/lib/modules/6.18.39-yocto-standard/updates/mychardrv.ko",
            "tmp/work/qemux86_64-oe-linux/mychardrv/1.0/packages-split/kernel-module-mychardrv-6.18.39-yocto-standard/lib/modules/6.18.39-yocto-standard/updates/mychardrv.ko",
            "tmp/work/x86-64-v3-oe-linux/kprof-agent/0.1.0/build/target/x86_64-oe-linux-gnu/agent/kprof-agent",
            "tmp/work/x86-64-v3-oe-linux/kprof-agent/0.1.0/packages-split/kprof-agent/usr/bin/kprof-agent",
            "tmp/work/x86-64-v3-oe-linux/kprof-agent/0.1.0/packages-split/kprof-agent-dbg/usr/lib/debug/usr/bin/kprof-agent.debug",
            "tmp/work/x86-64-v3-oe-linux/busybox/1.37.0/packages-split/busybox-dbg/usr/lib/debug/",
            "tmp/work/x86-64-v3-oe-linux/busybox/1.37.0/packages-split/busybox/bin/busybox",
        ],
    );
    if with_kernel_config {
        tree(
            root,
            &[
                &format!("{KBUILD}/.config = CONFIG_KALLSYMS_ALL=y\\n"),
                &format!("{KBUILD}/Module.symvers"),
            ],
        );
    }
}

/// The recording, moved to a build directory at `root`.
fn recorded_env_at(root: &Path) -> BitbakeEnv {
    BitbakeEnv::parse(&RECORDED_KERNEL_ENV.replace(RECORDED_TOPDIR, &root.to_string_lossy()))
}

/// Parsing the recorded `bitbake -e virtual/kernel` yields the kernel's directories.
#[test]
fn parse_bitbake_env_recorded_kernel_variables() {
    let env = BitbakeEnv::parse(RECORDED_KERNEL_ENV);
    assert_eq!(env.get("B"), Some(&*format!("{RECORDED_TOPDIR}/{KBUILD}")));
    assert_eq!(env.get("TMPDIR"), Some(&*format!("{RECORDED_TOPDIR}/tmp")));
    assert_eq!(
        env.get("WORKDIR"),
        Some(&*format!("{RECORDED_TOPDIR}/{KWORK}"))
    );
    assert_eq!(env.get("PN"), Some("linux-yocto"));
    // Shell functions are not variables.
    assert_eq!(env.get("do_compile"), None);
    assert_eq!(env.get("DTC_FLAGS"), None);
}

/// Escaped quotes, dollars and multi-line values come back as bitbake had them.
#[test]
fn parse_bitbake_env_escapes_and_continuations() {
    let text = "# $A\nA=\"say \\\"hi\\\" \\$HOME\"\nexport B=\"one \\\ntwo\"\nf() {\n\tC=\"not a var\"\n}\nD=\"d\"\n";
    let env = BitbakeEnv::parse(text);
    assert_eq!(env.get("A"), Some("say \"hi\" $HOME"));
    assert_eq!(env.get("B"), Some("one\ntwo"));
    assert_eq!(env.get("C"), None);
    assert_eq!(env.get("D"), Some("d"));
    assert_eq!(env.len(), 3);
}

/// Text that is not `bitbake -e` output gives no variables.
#[test]
fn parse_bitbake_env_garbage_is_empty() {
    assert!(BitbakeEnv::parse("ERROR: Nothing PROVIDES 'virtual/kernel'\n").is_empty());
}

/// Without bitbake, the layout alone finds vmlinux, in-tree and out-of-tree modules and -dbg.
#[test]
fn discover_yocto_layout_lists_kernel_modules_dbg() {
    let dir = tempfile::tempdir().unwrap();
    yocto_build(dir.path(), true);
    let found = yocto::symbol_paths(dir.path(), None).unwrap();
    assert_eq!(
        rel(dir.path(), &found),
        vec![
            format!("{KWORK}/image/lib/modules"),
            format!("{KBUILD}/drivers/net/dummy.ko"),
            format!("{KBUILD}/fs/nfs/nfs.ko"),
            format!("{KBUILD}/vmlinux"),
            "tmp/work/qemux86_64-oe-linux/mychardrv/1.0/image/lib/modules".to_string(),
            "tmp/work/x86-64-v3-oe-linux/kprof-agent/0.1.0/packages-split/kprof-agent-dbg"
                .to_string(),
        ]
    );
}

/// With the recorded `bitbake -e`, the kernel's B is used even where the layout would not
/// recognise it (no .config or Module.symvers next to vmlinux).
#[test]
fn discover_yocto_bitbake_env_gives_kernel_b() {
    let dir = tempfile::tempdir().unwrap();
    yocto_build(dir.path(), false);
    let without = rel(dir.path(), &yocto::symbol_paths(dir.path(), None).unwrap());
    assert!(
        !without.contains(&format!("{KBUILD}/vmlinux")),
        "{without:?}"
    );
    let env = recorded_env_at(dir.path());
    let with = rel(
        dir.path(),
        &yocto::symbol_paths(dir.path(), Some(&env)).unwrap(),
    );
    assert!(with.contains(&format!("{KBUILD}/vmlinux")), "{with:?}");
    assert!(
        with.contains(&format!("{KBUILD}/fs/nfs/nfs.ko")),
        "{with:?}"
    );
}

/// TMPDIR set in local.conf relative to TOPDIR is followed.
#[test]
fn discover_yocto_tmpdir_from_local_conf() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            "conf/local.conf = TMPDIR = \"${TOPDIR}/../shared-tmp\"\\n",
            "shared-tmp/work/qemuarm64-poky-linux/mychardrv/1.0/image/lib/modules/6.6.1-yocto-standard/updates/mychardrv.ko",
        ],
    );
    let build = dir.path().join("build");
    std::fs::create_dir_all(build.join("conf")).unwrap();
    std::fs::rename(
        dir.path().join("conf/local.conf"),
        build.join("conf/local.conf"),
    )
    .unwrap();
    let found = yocto::symbol_paths(&build, None).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].ends_with("mychardrv/1.0/image/lib/modules"),
        "{found:?}"
    );
}

/// A directory without conf/local.conf is refused, naming what is missing.
#[test]
fn discover_yocto_not_a_build_dir_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = yocto::symbol_paths(dir.path(), None).unwrap_err();
    assert!(matches!(err, DiscoverError::NotABuildTree { .. }));
    assert!(err.to_string().contains("conf/local.conf"), "{err}");
}

/// A configured build with nothing built says so.
#[test]
fn discover_yocto_nothing_built_errors() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &["conf/local.conf = \\n", "tmp/"]);
    let err = yocto::symbol_paths(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("nothing has been built"), "{err}");
}

/// rm_work leaves work/ without any symbol file: the error says where it looked.
#[test]
fn discover_yocto_rm_work_errors() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            "conf/local.conf = INHERIT += \"rm_work\"\\n",
            "tmp/work/core2-64-poky-linux/busybox/1.37.0/temp/log.do_compile",
        ],
    );
    let err = yocto::symbol_paths(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("rm_work"), "{err}");
}

/// A Buildroot output directory (O=) of kprof_qemu_x86_64_defconfig after `make`.
fn buildroot_output(root: &Path) {
    tree(
        root,
        &[
            ".config = BR2_HAVE_DOT_CONFIG=y\\nBR2_x86_64=y\\nBR2_PACKAGE_KPROF=y\\n",
            "Makefile = # Automatically generated by /src/buildroot/Makefile\\n",
            "build/linux-6.18.7/vmlinux",
            "build/linux-6.18.7/.config = CONFIG_KALLSYMS_ALL=y\\n",
            "build/linux-6.18.7/modules.order = drivers/net/dummy.o\\n",
            "build/linux-6.18.7/drivers/net/dummy.ko",
            "build/linux-headers-6.18.7/Makefile",
            "build/mychardrv-1.0/mychardrv.ko",
            "build/mychardrv-1.0/mychardrv.mod.o",
            "build/kprof-0.1.0/agent/Cargo.toml",
            "build/kprof-0.1.0/target/x86_64-unknown-linux-gnu/release/kprof-agent",
            "build/kprof-0.1.0/target/release/build/serde-1/build-script-build",
            "build/host-e2fsprogs-1.47.3/lib/fake.ko",
            "build/busybox-1.37.0/busybox",
            "build/busybox-1.37.0/busybox_unstripped",
            "build/busybox-1.37.0/libbb/lib.a",
            "build/busybox-1.37.0/applets/applet_tables",
            "build/busybox-1.37.0/scripts/kconfig/lxdialog/lxdialog",
            "build/kprof-0.1.0/target/x86_64-unknown-linux-gnu/debug/kprof-agent",
            "images/bzImage",
            "images/kprof-symbols/vmlinux",
            "images/kprof-symbols/lib/modules/6.18.7/updates/mychardrv.ko",
            "target/lib/modules/6.18.7/updates/mychardrv.ko",
        ],
    );
}

/// Marks `rel` below `root` executable, as a build leaves programs.
fn executable(root: &Path, rel: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let p = root.join(rel);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An output directory yields the export, vmlinux, in-tree and package modules, the agent
/// (release and debug profiles), the executables packages built (the unstripped originals of
/// the target's programs, two levels deep at most, no object files), and the image's files
/// (target/) for user-space ELFs.
#[test]
fn discover_buildroot_output_lists_symbols() {
    let dir = tempfile::tempdir().unwrap();
    buildroot_output(dir.path());
    for exe in [
        "build/busybox-1.37.0/busybox",
        "build/busybox-1.37.0/busybox_unstripped",
        "build/busybox-1.37.0/applets/applet_tables",
        "build/busybox-1.37.0/scripts/kconfig/lxdialog/lxdialog",
    ] {
        executable(dir.path(), exe);
    }
    let found = buildroot::symbol_paths(dir.path()).unwrap();
    assert_eq!(
        rel(dir.path(), &found),
        vec![
            "build/kprof-0.1.0/target/x86_64-unknown-linux-gnu/debug/kprof-agent",
            "build/kprof-0.1.0/target/x86_64-unknown-linux-gnu/release/kprof-agent",
            "build/linux-6.18.7/drivers/net/dummy.ko",
            "build/linux-6.18.7/vmlinux",
            "build/mychardrv-1.0/mychardrv.ko",
            "images/kprof-symbols",
            "build/busybox-1.37.0/applets/applet_tables",
            "build/busybox-1.37.0/busybox",
            "build/busybox-1.37.0/busybox_unstripped",
            "target",
        ]
    );
}

/// The top of an in-tree build (`.config` there, everything in output/) works too.
#[test]
fn discover_buildroot_in_tree_top_uses_output() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            ".config = BR2_HAVE_DOT_CONFIG=y\\n",
            "Makefile",
            "output/build/mychardrv-1.0/mychardrv.ko",
        ],
    );
    let found = buildroot::symbol_paths(dir.path()).unwrap();
    assert_eq!(
        rel(dir.path(), &found),
        vec!["output/build/mychardrv-1.0/mychardrv.ko"]
    );
}

/// Configured but not built: the error says to build.
#[test]
fn discover_buildroot_configured_not_built_errors() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[".config = BR2_HAVE_DOT_CONFIG=y\\n", "Makefile"],
    );
    let err = buildroot::symbol_paths(dir.path()).unwrap_err();
    assert!(err.to_string().contains("nothing was built yet"), "{err}");
}

/// A Linux kernel tree's .config is not a Buildroot configuration.
#[test]
fn discover_buildroot_kernel_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &[".config = CONFIG_PERF_EVENTS=y\\n", "build/"]);
    let err = buildroot::symbol_paths(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("not a Buildroot output directory"),
        "{err}"
    );
}

/// A built tree without any kernel or module output is an error, not an empty list.
#[test]
fn discover_buildroot_no_symbols_errors() {
    let dir = tempfile::tempdir().unwrap();
    tree(
        dir.path(),
        &[
            ".config = BR2_HAVE_DOT_CONFIG=y\\n",
            "build/busybox-1.37.0/busybox",
        ],
    );
    let err = buildroot::symbol_paths(dir.path()).unwrap_err();
    assert!(err.to_string().contains("run make first"), "{err}");
}
