//! Must-hold item 4 of issue 2: bad input gives one clear line on stderr, a non-zero exit and
//! no archive (nor any leftover) in the capture dir.

mod common;

use std::path::Path;

use common::*;

/// Runs `record` with `args` into `dir`; checks the failure shape and returns the stderr line.
fn fails(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["record", "--duration", "1", "-o", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = run_agent(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{args:?} succeeded; stderr: {stderr}"
    );
    assert_ne!(out.status.code(), None, "{args:?} died of a signal");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: not exactly one line: {stderr}"
    );
    assert!(stderr.starts_with("kprof-agent: "), "{stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    let left = dir_entries(dir);
    assert!(left.is_empty(), "{args:?} left {left:?} behind");
    assert!(!stderr.contains("panicked"));
    stderr
}

/// Unknown events, hardware events without a PMU, missing commands, unwritable dirs and bad
/// frequencies are all refused cleanly.
#[test]
fn record_cli_bad_input_fails_cleanly() {
    require_root();
    let base = scratch("errors");
    let dir = base.join("caps");
    std::fs::create_dir_all(&dir).unwrap();

    let e = fails(&dir, &["-e", "no-such-event"]);
    assert!(e.contains("`no-such-event`"), "{e}");

    // `cycles` by name on a machine without a PMU: the kernel's reason, not a fallback.
    if !Path::new("/sys/bus/event_source/devices/cpu").exists() {
        let e = fails(&dir, &["-e", "cycles"]);
        assert!(
            e.contains("`cycles`") && e.contains("No such file or directory"),
            "{e}"
        );
    }

    let e = fails(&dir, &["--", "kprof-no-such-command"]);
    assert!(
        e.contains("`kprof-no-such-command`") && e.contains("not found"),
        "{e}"
    );
    let e = fails(&dir, &["--", "/nonexistent/busy"]);
    assert!(e.contains("/nonexistent/busy"), "{e}");
    let not_exec = base.join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let e = fails(&dir, &["--", not_exec.to_str().unwrap()]);
    assert!(
        e.contains("not-executable") && e.contains("Permission denied"),
        "{e}"
    );

    let e = fails(&dir, &["-F", "0"]);
    assert!(e.contains("-F"), "{e}");
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let e = fails(&dir, &["-F", &(max + 1).to_string()]);
    assert!(e.contains("perf_event_max_sample_rate"), "{e}");

    // Unwritable output dirs: below a regular file, and in /proc (even root cannot).
    let file = base.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("caps");
    let out = record(&["--duration", "1"], &under_file, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.lines().count() == 1
            && stderr.contains(under_file.to_str().unwrap()),
        "{stderr}"
    );
    let out = run_agent(&["record", "--duration", "1", "-o", "/proc/kprof-captures"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.lines().count() == 1
            && stderr.contains("/proc/kprof-captures"),
        "{stderr}"
    );
}

/// A capture dir other local users can write to (`-o` a mode 1777 dir like /tmp) is refused
/// before the workload runs, naming the dir and its mode; `list` refuses it the same way.
#[test]
fn record_capture_dir_world_writable_refused() {
    use std::os::unix::fs::PermissionsExt;
    require_root();
    let base = scratch("shared-dir");
    let dir = base.join("shared");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let marker = base.join("ran");
    let e = fails(
        &dir,
        &["--", "sh", "-c", &format!("touch {}", marker.display())],
    );
    assert!(
        e.contains(&format!("{} is writable by group or others", dir.display()))
            && e.contains("mode 1777"),
        "{e}"
    );
    assert!(!marker.exists(), "the workload ran");
    let out = run_agent(&["list", "-o", dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "list accepted it: {stderr}");
    assert!(stderr.contains("is not safe to use"), "{stderr}");
}

/// Issue 36, item 11: `-o` through a symlink another user planted in a sticky shared dir
/// (`/tmp/caps -> /etc` in life) is refused before anything is created (before: `mkdir -p`
/// followed the link, root's capture dir appeared where it pointed, and since that place
/// passed the trust check, the capture was written there).
#[test]
fn record_capture_dir_planted_symlink_refused() {
    use std::os::unix::fs::PermissionsExt;
    require_root();
    let base = scratch("planted-link");
    let victim = base.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = base.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join("caps");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let marker = base.join("ran");
    let e = fails(
        &link.join("sub"),
        &["--", "sh", "-c", &format!("touch {}", marker.display())],
    );
    assert!(
        e.contains(&format!(
            "{} is a symbolic link owned by another user",
            link.display()
        )),
        "{e}"
    );
    assert!(!victim.join("sub").exists(), "created through the link");
    assert!(!marker.exists(), "the workload ran");
}
