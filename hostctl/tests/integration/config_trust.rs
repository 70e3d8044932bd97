//! Issue 36, item 1: a `kprof.toml` found by searching up from the working directory is
//! read only when it is the user's (or root's) and nobody else can write it, the search stops
//! at `$HOME`, and the Yocto directory such a file names is never handed to bitbake (which
//! runs Python from its `conf/`): only one named on the command line is.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

/// `TOP/kprof.toml` naming `TOP/build` (a Yocto build directory whose kernel is not where
/// the layout says, which is when kprofctl asks bitbake), a
/// `bitbake` on PATH that leaves a marker when run, and `TOP/a/b` to run kprofctl in.
struct Planted {
    top: tempfile::TempDir,
    bin: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Planted {
    fn new() -> Self {
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let conf = top.path().join("build/conf");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(conf.join("local.conf"), "").unwrap();
        std::fs::write(conf.join("bblayers.conf"), "").unwrap();
        std::fs::create_dir_all(top.path().join("build/tmp/work")).unwrap();
        std::fs::create_dir_all(top.path().join("a/b")).unwrap();
        let planted = Self {
            top,
            bin: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        planted.write_config("[symbols]\nyocto = \"build\"\n");
        let bitbake = planted.bin.path().join("bitbake");
        std::fs::write(
            &bitbake,
            format!("#!/bin/sh\ntouch {}\nexit 1\n", planted.marker().display()),
        )
        .unwrap();
        std::fs::set_permissions(&bitbake, std::fs::Permissions::from_mode(0o755)).unwrap();
        planted
    }

    fn config(&self) -> PathBuf {
        self.top.path().join("kprof.toml")
    }

    fn write_config(&self, text: &str) {
        std::fs::write(self.config(), text).unwrap();
        std::fs::set_permissions(self.config(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    fn marker(&self) -> PathBuf {
        self.bin.path().join("bitbake-ran")
    }

    /// `kprofctl report perf.data` in `TOP/a/b` with no `KPROF_CONFIG`, `HOME` as given.
    fn report(&self, home: &Path, args: &[&str]) -> Output {
        let data = crate::report_common::recorded().join("perf.data");
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let cache = tempfile::tempdir().unwrap();
        crate::report_common::kprofctl_command()
            .arg("report")
            .arg(&data)
            .args(args)
            .current_dir(self.top.path().join("a/b"))
            .env_remove("KPROF_CONFIG")
            .env("HOME", home)
            .env("PATH", path)
            .env("KPROF_CACHE_DIR", cache.path())
            .output()
            .unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A trusted file found by search: read, but its Yocto directory is not handed to bitbake
/// (before: kprofctl ran the `bitbake` first on PATH there); `--yocto DIR` still is. The
/// directory has nothing built, so both reports end in discovery's error.
#[test]
fn config_found_by_search_never_runs_bitbake() {
    let p = Planted::new();
    let out = p.report(p.home.path(), &[]);
    let err = stderr(&out);
    assert!(!p.marker().exists(), "bitbake ran: {err}");
    assert!(
        err.contains("not asking bitbake") && err.contains(&p.config().display().to_string()),
        "{err}"
    );
    assert!(err.contains("no vmlinux, kernel module"), "{err}");
    let build = p.top.path().join("build");
    let out = p.report(p.home.path(), &["--yocto", build.to_str().unwrap()]);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(p.marker().exists(), "--yocto names it: bitbake may run");
}

/// A file others can write, or owned by another user, is ignored with a warning naming it.
#[test]
fn config_untrusted_ignored_named() {
    let p = Planted::new();
    // Proof that a file is read: this one makes the report fail.
    p.write_config("[symbols]\npaths = [\"missing\"]\nbuildrot = 1\n");
    let out = p.report(p.home.path(), &[]);
    assert!(!out.status.success() && stderr(&out).contains("buildrot"));
    std::fs::set_permissions(p.config(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = p.report(p.home.path(), &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let named = format!("ignoring {}", p.config().display());
    assert!(
        err.contains(&named) && err.contains("writable by others (mode 666)"),
        "{err}"
    );
    std::fs::set_permissions(p.config(), std::fs::Permissions::from_mode(0o644)).unwrap();
    // Giving the file to another user needs root (the tests run as root, as CI does).
    if std::fs::metadata(p.config()).unwrap().uid() == 0 {
        std::os::unix::fs::chown(p.config(), Some(65534), None).unwrap();
        let out = p.report(p.home.path(), &[]);
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&named) && err.contains("owned by uid 65534, not you"),
            "{err}"
        );
    }
    assert!(!p.marker().exists());
}

/// The search stops at `$HOME`: a file above it is not read.
#[test]
fn config_above_home_not_read() {
    let p = Planted::new();
    p.write_config("[symbols]\nbuildrot = 1\n");
    let out = p.report(&p.top.path().join("a"), &[]);
    let err = stderr(&out);
    assert!(out.status.success() && !err.contains("kprof.toml"), "{err}");
    let out = p.report(p.top.path(), &[]);
    assert!(
        !out.status.success(),
        "HOME at the file's directory reads it"
    );
}
