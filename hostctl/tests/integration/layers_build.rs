//! `kprofctl build` running a real tool (make) in a directory laid out like a Buildroot
//! output directory: success, failure with the log's path, and refusal outside any build.

use std::path::Path;

fn kprofctl(dir: &Path, args: &[&str]) -> std::process::Output {
    crate::report_common::kprofctl_command()
        .arg("build")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run kprofctl")
}

/// A Buildroot-style output directory whose kprof-rebuild target runs the given recipe.
fn buildroot_dir(recipe: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(".config"),
        "BR2_HAVE_DOT_CONFIG=y\nBR2_PACKAGE_KPROF=y\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("Makefile"),
        format!("all:\n\t@echo whole image\nkprof-rebuild:\n\t@echo '>>> kprof 0.1.0 Building'\n\t{recipe}\n"),
    )
    .unwrap();
    d
}

/// Success: make's output is in the log, stdout names the agent `kprof-rebuild` installed.
#[test]
fn build_buildroot_rebuild_succeeds_with_log() {
    let d = buildroot_dir("@echo '>>> kprof 0.1.0 Installing to target'");
    let out = kprofctl(d.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let agent = d.path().join("target/usr/bin/kprof-agent");
    assert_eq!(stdout.trim_end(), agent.display().to_string());
    let log = std::fs::read_to_string(d.path().join("kprof-build.log")).unwrap();
    assert!(log.contains("make kprof-rebuild"), "{log}");
    assert!(
        log.contains(">>> kprof 0.1.0 Installing to target"),
        "{log}"
    );
}

/// With per-package directories the rebuilt agent is in the package's own target directory
/// (the global one is assembled only by a whole `make`).
#[test]
fn build_buildroot_per_package_names_package_target() {
    let d = buildroot_dir("@true");
    let config = d.path().join(".config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("BR2_PER_PACKAGE_DIRECTORIES=y\n");
    std::fs::write(&config, text).unwrap();
    let out = kprofctl(d.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agent = d
        .path()
        .join("per-package/kprof/target/usr/bin/kprof-agent");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        agent.display().to_string()
    );
}

/// --image builds the whole configuration; stdout names the images directory.
#[test]
fn build_buildroot_image_runs_make_all() {
    let d = buildroot_dir("@false");
    let out = kprofctl(d.path(), &["--image"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.trim_end().ends_with("images"), "{stdout}");
    let log = std::fs::read_to_string(d.path().join("kprof-build.log")).unwrap();
    assert!(log.contains("whole image"), "{log}");
}

/// Failure: non-zero exit, the tail of the output and the log's path on stderr.
#[test]
fn build_buildroot_failure_prints_log_path() {
    let d = buildroot_dir("@echo 'error[E0425]: cannot find value `x`' >&2; exit 3");
    let log = d.path().join("custom.log");
    let out = kprofctl(d.path(), &["--log", log.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("full output: {}", log.display())),
        "{stderr}"
    );
    assert!(stderr.contains("error[E0425]"), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("error[E0425]: cannot find value"), "{text}");
}

/// Outside any build tree: one clear error, no log written.
#[test]
fn build_no_build_tree_errors() {
    let d = tempfile::tempdir().unwrap();
    let out = kprofctl(d.path(), &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a Yocto build directory"), "{stderr}");
    assert!(!d.path().join("kprof-build.log").exists());
}
