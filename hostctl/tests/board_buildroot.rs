//! The image of a real Buildroot build of `buildroot-external` (issue 35: `ci/buildroot/build`,
//! Buildroot's own `make` with `BR2_PACKAGE_KPROF=y`), booted by `ci/buildroot/up` from
//! Buildroot's generated `start-qemu.sh`, used as a new user would: `kprofctl run`, then
//! `kprofctl fetch --buildroot OUTPUT` and no other symbol option.
//!
//! Environment (printed by `ci/buildroot/up`): `KPROF_BOARD` (root@127.0.0.1:PORT),
//! `KPROF_BOARD_BUILDROOT` (the output directory), `KPROF_BOARD_SYMBOLS`
//! (its `images/kprof-symbols`), `KPROF_BOARD_KEY`, `KPROF_BOARD_KNOWN_HOSTS`. Run one at a
//! time: `cargo test -p kprofctl --test board_buildroot -- --ignored --test-threads=1`.

use kprof_test_support::board::{self, env, Board};
use kprof_test_support::outcome;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Buildroot output directory the board's image was built in.
fn output() -> PathBuf {
    PathBuf::from(env("KPROF_BOARD_BUILDROOT"))
}

/// The checkout's top (the `file://` site Buildroot's download step cloned).
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The board, driven as its user drives it: their ssh key is the default one of their home
/// (`~/.ssh/id_ed25519`), so that `kprofctl run root@board` and `kprofctl fetch` need no `-i`.
fn user_board() -> Board {
    use std::os::unix::fs::PermissionsExt as _;
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let key = board.home.path().join(".ssh/id_ed25519");
    std::fs::copy(&board.key, &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    board
}

/// `kprofctl SUBCOMMAND TARGET` as the user types it (no `-i`: the key is their default one).
fn on_board(board: &Board, sub: &str) -> Command {
    let mut cmd = board.kprofctl();
    cmd.args([sub, &board.target]);
    cmd
}

/// `kprofctl run root@board -- sh -c 'echo 10000 > /dev/mychardrv'` (the user's day, no symbol
/// option), then `kprofctl fetch --buildroot OUTPUT`: the local capture, fetch's stdout and
/// run's stderr.
fn day(board: &Board, extra: &[&str]) -> (PathBuf, String, String) {
    let (ok, out, run_err) = outcome(
        on_board(board, "run")
            .args(extra)
            .arg("--")
            .args(board.workload()),
    );
    assert!(ok, "run failed:\n{run_err}");
    let capture = out.lines().last().unwrap_or_default().trim().to_owned();
    let (ok, summary, err) = outcome(
        board
            .kprofctl()
            .arg("fetch")
            .arg("--buildroot")
            .arg(output()),
    );
    assert!(ok, "fetch --buildroot failed:\n{err}");
    let name = Path::new(&capture).file_name().expect("capture path");
    let local = board
        .captures_here()
        .into_iter()
        .find(|p| p.file_name() == Some(name))
        .expect("fetched capture");
    (local, summary, run_err)
}

/// `kprofctl report CAPTURE --buildroot OUTPUT ARGS... --format json`, parsed, and its stderr.
fn report_json(board: &Board, capture: &Path, args: &[&str]) -> (serde_json::Value, String) {
    board::report_json_buildroot(board, capture, args)
}

/// The `images` entry of a JSON report named `name`.
fn image<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["images"]
        .as_array()
        .expect("images")
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not among the images: {json:#}"))
}

/// Every image of the capture's samples is matched by its build-id to a file of the output
/// directory: none unverified, mismatched, missing or from kallsyms. The vDSO is no file of
/// any build (the kernel makes it; a sample lands there now and then) and is said missing
/// with "no file on disk", as it should.
fn assert_all_images_by_build_id(json: &serde_json::Value) {
    let out = output();
    for image in json["images"].as_array().expect("images") {
        let name = image["name"].as_str().unwrap_or_default();
        if name == "[unwind]" || name == "[unknown]" {
            continue;
        }
        if name == "[vdso]" {
            assert_eq!(image["symbols"]["why"], "no file on disk", "{image:#}");
            continue;
        }
        let symbols = &image["symbols"];
        assert_eq!(symbols["status"], "build-id", "{name}: {image:#}");
        let path = symbols["path"].as_str().unwrap_or_default();
        assert!(
            Path::new(path).starts_with(&out),
            "{name}: symbols from {path}, not from {}",
            out.display()
        );
    }
}

/// Must hold 2: the day with `--buildroot OUTPUT` alone puts char_dev_cache_traverse on top of
/// mychardrv.ko, hottest on a line of its loop in mychardrv.c; the kernel is checked by
/// build-id before the run; every image of the capture is matched by build-id to a file of
/// the output directory.
#[test]
#[ignore = "needs the Buildroot board (ci/buildroot/up)"]
fn buildroot_day_top_function_from_output_dir() {
    let board = user_board();
    let (capture, summary, _) = day(&board, &[]);
    assert!(
        summary.contains("char_dev_cache_traverse"),
        "fetch summary:\n{summary}"
    );
    let (json, err) = report_json(&board, &capture, &["--image", "mychardrv.ko"]);
    assert!(!err.contains("unverified"), "{err}");
    let top = &json["functions"][0];
    assert_eq!(top["image"], "mychardrv.ko", "{json:#}");
    board::check_top_on_loop_line(&board, top);
    let (all, _) = report_json(&board, &capture, &[]);
    assert_all_images_by_build_id(&all);
    let vmlinux = image(&all, "vmlinux");
    assert!(
        vmlinux["symbols"]["path"]
            .as_str()
            .unwrap_or_default()
            .ends_with("vmlinux"),
        "{vmlinux:#}"
    );
}

/// Whether the output directory's .config has `line`.
fn config_has(line: &str) -> bool {
    std::fs::read_to_string(output().join(".config"))
        .unwrap()
        .lines()
        .any(|l| l == line)
}

/// Must hold 2: the callers of char_dev_cache_traverse, recorded with `--call-graph dwarf`,
/// go through mychardrv_write and the kernel's write path (vmlinux with file:line) and libc's
/// write into the shell, Buildroot's busybox, whose frames are named from its unstripped
/// build (`build/busybox-*/busybox_unstripped`; the board's copy is stripped). Busybox's own
/// build flags leave out unwind tables and frame pointers: by default the path ends, marked,
/// at busybox's first frame (`[no unwind info: busybox]`, never a made-up caller); with
/// `BR2_ENABLE_DEBUG` its `.debug_frame` carries it up to the echo builtin.
#[test]
#[ignore = "needs the Buildroot board (ci/buildroot/up)"]
fn buildroot_day_callers_into_the_shell() {
    let board = user_board();
    let (capture, _, _) = day(&board, &["--call-graph", "dwarf"]);
    let (json, _) = report_json(&board, &capture, &["--callers", "char_dev_cache_traverse"]);
    let path = board::heaviest_path(&json["tree"]);
    let at = |wanted: &str| path.iter().position(|f| f == wanted);
    let mut last = 0;
    for wanted in [
        "mychardrv.ko:mychardrv_write",
        "vmlinux:vfs_write",
        "vmlinux:ksys_write",
        "libc.so.6:write",
    ] {
        let i = at(wanted).unwrap_or_else(|| panic!("{wanted} not on {path:#?}"));
        assert!(i > last, "{wanted} out of order in {path:#?}");
        last = i;
    }
    let shell = &path[last + 1..];
    assert!(
        shell
            .first()
            .is_some_and(|f| f.starts_with("busybox:") && !f.ends_with("[unknown]")),
        "no named busybox frame above libc's write: {path:#?}"
    );
    if config_has("BR2_ENABLE_DEBUG=y") {
        assert!(
            shell.iter().any(|f| f == "busybox:echo_main"),
            "BR2_ENABLE_DEBUG: the shell's echo builtin missing from {path:#?}"
        );
    } else {
        assert_eq!(
            path.last().map(String::as_str),
            Some("[unwind]:[no unwind info: busybox]"),
            "{path:#?}"
        );
    }
    let (ok, text, err) = outcome(
        board
            .kprofctl()
            .arg("report")
            .arg(&capture)
            .arg("--buildroot")
            .arg(output())
            .args(["--callers", "char_dev_cache_traverse"]),
    );
    assert!(ok, "{err}");
    assert!(
        text.lines()
            .any(|l| l.contains("vfs_write") && l.contains(".c:")),
        "no file:line on the kernel write path:\n{text}"
    );
}

/// Must hold 2, the documented rebuild loop (docs/buildroot.md): a changed agent checkout
/// named by `KPROF_OVERRIDE_SRCDIR` in the output directory's local.mk, `kprofctl build`
/// (make kprof-rebuild), `kprofctl deploy` of the agent it prints, a capture with it, whose
/// agent image is that build's, matched by its build-id in the output directory. The output
/// directory is put back as it was (local.mk, the pinned agent on target/) afterwards, also
/// on failure.
#[test]
#[ignore = "needs the Buildroot board (ci/buildroot/up)"]
fn buildroot_rebuild_loop_changed_agent() {
    let board = user_board();
    let out = output();
    let _restore = RestoreOutput::new(&out);
    // The change: a marker in the agent's --version line, in a copy of the checkout.
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("rsync")
        .args(["-a", "--exclude", "/target", "--exclude", "/fuzz/target"])
        .arg(format!("{}/", checkout().display()))
        .arg(copy.path())
        .status()
        .expect("rsync");
    assert!(status.success());
    let marker = format!("rebuilt-{}", std::process::id());
    let main_rs = copy.path().join("agent/src/main.rs");
    let text = std::fs::read_to_string(&main_rs).unwrap();
    let changed = text.replacen(
        "\"kprof-agent {}\\n\"",
        &format!("\"kprof-agent {{}} {marker}\\n\""),
        1,
    );
    assert_ne!(
        text, changed,
        "agent/src/main.rs prints no `kprof-agent {{}}\\n`"
    );
    std::fs::write(&main_rs, changed).unwrap();
    let mut local = std::fs::read_to_string(out.join("local.mk")).unwrap_or_default();
    local.push_str(&format!(
        "KPROF_OVERRIDE_SRCDIR = {}\n",
        copy.path().display()
    ));
    std::fs::write(out.join("local.mk"), local).unwrap();

    let (ok, built, err) = outcome(board.kprofctl().arg("build").arg("--dir").arg(&out));
    assert!(ok, "kprofctl build: {err}");
    let agent = PathBuf::from(built.trim());
    let installed = if config_has("BR2_PER_PACKAGE_DIRECTORIES=y") {
        "per-package/kprof/target/usr/bin/kprof-agent"
    } else {
        "target/usr/bin/kprof-agent"
    };
    assert_eq!(agent, out.join(installed), "{built}");
    let (ok, _, err) = outcome(on_board(&board, "deploy").arg("--agent").arg(&agent));
    assert!(ok, "deploy: {err}");
    let version = board.ssh("kprof-agent --version");
    assert!(version.contains(&marker), "{version}");

    let (capture, _, _) = day(&board, &[]);
    let (json, _) = report_json(&board, &capture, &[]);
    let agent_image = image(&json, "kprof-agent");
    // The capture ran the agent of the override build, and its symbols are matched by that
    // build-id in the output directory (the unstripped build or an installed copy).
    let rebuilt = kprof_test_support::readelf_build_id(&agent);
    assert_eq!(agent_image["build_id"], rebuilt.as_str(), "{agent_image:#}");
    assert_eq!(
        agent_image["symbols"]["status"], "build-id",
        "{agent_image:#}"
    );
    assert!(
        Path::new(agent_image["symbols"]["path"].as_str().unwrap_or_default()).starts_with(&out),
        "{agent_image:#}"
    );
}

/// Puts the output directory back after the rebuild loop: local.mk as it was, no
/// `build/kprof-custom`, and the pinned agent reinstalled on target/ (`make kprof-reinstall`),
/// so that the cached build stays what its inputs made.
struct RestoreOutput {
    dir: PathBuf,
    local_mk: Option<String>,
}

impl RestoreOutput {
    fn new(dir: &Path) -> RestoreOutput {
        RestoreOutput {
            dir: dir.to_path_buf(),
            local_mk: std::fs::read_to_string(dir.join("local.mk")).ok(),
        }
    }
}

impl Drop for RestoreOutput {
    /// Best effort, and loud when it fails: a panic here, during a failed test's unwinding,
    /// would abort the whole test binary and hide the other tests' results.
    fn drop(&mut self) {
        let restored = match &self.local_mk {
            Some(text) => std::fs::write(self.dir.join("local.mk"), text),
            None => std::fs::remove_file(self.dir.join("local.mk")).or(Ok(())),
        };
        if let Err(e) = restored {
            eprintln!(
                "RestoreOutput: cannot restore {}/local.mk: {e}",
                self.dir.display()
            );
        }
        let _ = std::fs::remove_dir_all(self.dir.join("build/kprof-custom"));
        let out = Command::new("make")
            .arg("-C")
            .arg(&self.dir)
            .arg("kprof-reinstall")
            .env("FORCE_UNSAFE_CONFIGURE", "1")
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "RestoreOutput: make kprof-reinstall failed; {} still holds the changed \
                 agent: {}",
                self.dir.display(),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("RestoreOutput: cannot run make: {e}"),
        }
    }
}

/// `make -C OUTPUT ARGS` (space-separated) with Buildroot's environment for a root build;
/// (ok, stdout+stderr).
fn make(args: &str) -> (bool, String) {
    let out = Command::new("make")
        .arg("-C")
        .arg(output())
        .args(args.split_whitespace())
        .env("FORCE_UNSAFE_CONFIGURE", "1")
        .output()
        .expect("make");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Must hold 3: `make kprof-rebuild` on the pinned source succeeds and installs the same agent
/// (cargo has nothing to rebuild), still found by build-id in the output directory.
#[test]
#[ignore = "needs a Buildroot output directory (ci/buildroot/up)"]
fn buildroot_make_kprof_rebuild() {
    let agent = output().join("target/usr/bin/kprof-agent");
    let before = kprof_test_support::readelf_build_id(&agent);
    let (ok, log) = make("kprof-rebuild");
    assert!(ok, "make kprof-rebuild:\n{log}");
    assert_eq!(kprof_test_support::readelf_build_id(&agent), before);
}

/// The packages the test build takes from a stand-in source tree (`<PKG>_OVERRIDE_SRCDIR` in
/// the output directory's local.mk, ci/buildroot/sources), as Buildroot names them.
fn stand_in_packages() -> Vec<String> {
    std::fs::read_to_string(output().join("local.mk"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once("_OVERRIDE_SRCDIR"))
        .map(|(var, _)| var.to_lowercase().replace('_', "-"))
        .collect()
}

/// Must hold 3: `make legal-info` lists kprof with the licences of the agent and of the
/// vendored crates compiled into it, copies their licence files (each checked against
/// kprof.hash by Buildroot), and saves the source tarball with the vendored crates.
///
/// Buildroot also checks the licence files of every other package against its .hash; those
/// of the stand-in sources (Debian's, of other versions) may differ, so legal-info runs with
/// `make -k` and every failure must be such a package's, none kprof's or its examples'.
#[test]
#[ignore = "needs a Buildroot output directory (ci/buildroot/up)"]
fn buildroot_legal_info_lists_vendored_crates() {
    let (_, log) = make("-k legal-info");
    let stand_ins = stand_in_packages();
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("ERROR: while checking hashes from package/") {
            let pkg = rest.split('/').next().unwrap_or_default();
            assert!(
                stand_ins.iter().any(|s| s == pkg),
                "legal-info failed for {pkg}, which is no stand-in ({stand_ins:?}):\n{log}"
            );
        }
    }
    let legal = output().join("legal-info");
    let manifest = std::fs::read_to_string(legal.join("manifest.csv")).unwrap();
    let kprof = manifest
        .lines()
        .find(|l| l.starts_with("\"kprof\""))
        .unwrap_or_else(|| panic!("no kprof row in manifest.csv:\n{manifest}"));
    for needle in [
        "MIT or Apache-2.0 (kprof)",
        "BSD-3-Clause (zstd-safe, zstd-sys)",
        "Unlicense or MIT (memchr)",
        "VENDOR/zstd-sys/zstd/LICENSE",
    ] {
        assert!(kprof.contains(needle), "{needle} not in: {kprof}");
    }
    for pkg in ["mychardrv", "mychardrv-writer"] {
        assert!(
            manifest
                .lines()
                .any(|l| l.starts_with(&format!("\"{pkg}\""))),
            "no {pkg} row in manifest.csv"
        );
    }
    let version = kprof
        .split(',')
        .nth(1)
        .unwrap()
        .trim_matches('"')
        .to_owned();
    let licences = legal.join(format!("licenses/kprof-{version}"));
    for file in [
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "VENDOR/zstd-sys/zstd/LICENSE",
        "VENDOR/memchr/UNLICENSE",
    ] {
        assert!(
            licences.join(file).is_file(),
            "{} missing",
            licences.join(file).display()
        );
    }
    let tarball = legal.join(format!(
        "sources/kprof-{version}/kprof-{version}-git4-cargo4.tar.gz"
    ));
    assert!(tarball.is_file(), "{} missing", tarball.display());
}

/// Must hold 6: a build whose kprof.hash names another sha256 for the download tarball stops
/// at Buildroot's hash check with Buildroot's own error, names the tarball, and prints
/// nothing that looks like success. It runs ci/buildroot/build on a copy of the external tree
/// with the broken line, in a scratch output directory with a download dir of its own (hard
/// links to the shared one: Buildroot deletes a download whose hash is wrong).
#[test]
#[ignore = "needs a Buildroot output directory (ci/buildroot/up)"]
fn buildroot_broken_kprof_hash_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let external = scratch.path().join("buildroot-external");
    let status = Command::new("cp")
        .arg("-a")
        .arg(checkout().join("buildroot-external"))
        .arg(&external)
        .status()
        .unwrap();
    assert!(status.success());
    let hash = external.join("package/kprof/kprof.hash");
    let text = std::fs::read_to_string(&hash).unwrap();
    let tarball_line = text
        .lines()
        .find(|l| l.ends_with("-cargo4.tar.gz"))
        .expect("the tarball's line in kprof.hash")
        .to_owned();
    let tarball = tarball_line.split_whitespace().nth(2).unwrap().to_owned();
    let broken = format!("sha256  {}  {tarball}", "0".repeat(64));
    std::fs::write(&hash, text.replace(&tarball_line, &broken)).unwrap();

    let config = std::fs::read_to_string(output().join(".config")).unwrap();
    let shared_dl = config
        .lines()
        .find_map(|l| l.strip_prefix("BR2_DL_DIR=\""))
        .map(|v| PathBuf::from(v.trim_end_matches('"')))
        .expect("BR2_DL_DIR in .config");
    let dl = scratch.path().join("dl");
    let status = Command::new("cp")
        .arg("-al")
        .arg(&shared_dl)
        .arg(&dl)
        .status()
        .unwrap();
    assert!(status.success());
    let shared_tarball = shared_dl.join("kprof").join(&tarball);
    let before = std::fs::read(&shared_tarball).unwrap();

    let out = Command::new(checkout().join("ci/buildroot/build"))
        .args(["--arch", "x86_64", "--external"])
        .arg(&external)
        .arg("--output")
        .arg(scratch.path().join("output"))
        .arg("--dl-dir")
        .arg(&dl)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the build passed:\n{stderr}");
    assert!(stderr.contains(&tarball), "{stderr}");
    assert!(
        stderr.contains("wrong sha256 hash") || stderr.contains("ERROR: while checking hashes"),
        "Buildroot's hash error missing:\n{stderr}"
    );
    assert!(stdout.trim().is_empty(), "printed an output dir: {stdout}");
    assert!(!stderr.contains("buildroot: built"), "{stderr}");
    assert_eq!(std::fs::read(&shared_tarball).unwrap(), before);
}

/// Must hold 1: the kernel Buildroot built has every option of kprof's fragments
/// (`package/kprof/kprof.cfg` and the architecture's), as Buildroot's kconfig step merged them
/// through `KPROF_LINUX_CONFIG_FIXUPS`: an option whose dependencies the board's configuration
/// lacks would be dropped without a word, and the capture would miss what it needs.
#[test]
#[ignore = "needs a Buildroot output directory (ci/buildroot/up)"]
fn buildroot_kernel_config_has_kprof_fragment() {
    let build = output().join("build");
    let kernel = std::fs::read_dir(&build)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("linux-")
                && !name.starts_with("linux-headers")
                && p.join("vmlinux").is_file()
        })
        .expect("a built kernel under build/");
    let config = std::fs::read_to_string(kernel.join(".config")).unwrap();
    let lines: Vec<&str> = config.lines().collect();
    let arch = if lines.contains(&"CONFIG_X86_64=y") {
        "x86"
    } else {
        "arm64"
    };
    let pkg = checkout().join("buildroot-external/package/kprof");
    let mut checked = 0;
    for fragment in ["kprof.cfg".to_string(), format!("kprof-{arch}.cfg")] {
        let text = std::fs::read_to_string(pkg.join(&fragment)).unwrap();
        for line in text.lines() {
            let wanted = line.trim();
            let option = wanted.strip_suffix("=y").or_else(|| {
                wanted
                    .strip_prefix("# ")
                    .and_then(|l| l.strip_suffix(" is not set"))
            });
            let Some(option) = option.filter(|o| o.starts_with("CONFIG_")) else {
                continue;
            };
            if wanted.ends_with("=y") {
                assert!(
                    lines.contains(&wanted),
                    "{fragment}: {wanted} not in {}/.config",
                    kernel.display()
                );
            } else {
                assert!(
                    !lines.contains(&format!("{option}=y").as_str()),
                    "{fragment}: {option} should be off in {}/.config",
                    kernel.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} fragment lines");
}
