//! The user's day against the QEMU board (`ci/board/up`): issue 4's "Must hold" list.
//!
//! Environment (printed by `ci/board/up`): `KPROF_BOARD` (root@127.0.0.1:PORT),
//! `KPROF_BOARD_SYMBOLS` (vmlinux, unstripped mychardrv.ko, agent), `KPROF_BOARD_KEY` (ssh key
//! for root), optionally `KPROF_BOARD_KNOWN_HOSTS` (default: `known_hosts` next to the key) and
//! `KPROF_BOARD_N` (the mychardrv workload size, default 10000). Run one at a time:
//! `cargo test -p kprofctl --test board_day -- --ignored --test-threads=1`.

use kprof_test_support::board::{self, find, find_file, report_json, Board};
use kprof_test_support::outcome;
use kprof_test_support::proxy::CuttingProxy;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Must hold 1: run the mychardrv write, fetch; the top function of mychardrv.ko is
/// char_dev_cache_traverse at a mychardrv.c line, and its callers go from sh's write through the
/// kernel's write path (vmlinux functions with file:line) into the module.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_day_mychardrv_top_function_and_callers() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let (capture, err) = board.run_capture(&[]);
    assert!(err.contains("matches"), "kernel build-id check:\n{err}");
    assert!(!err.contains("MISMATCH"), "{err}");

    let local = &board::fetch_day(&board, &capture);

    let json = report_json(&board, local, &board.symbols, &["--image", "mychardrv.ko"]);
    let top = &json["functions"][0];
    assert_eq!(top["symbol"], "char_dev_cache_traverse", "{json:#}");
    assert_eq!(top["image"], "mychardrv.ko");
    let file = top["source"]["file"].as_str().unwrap_or_default();
    assert!(file.ends_with("mychardrv.c"), "{top}");
    assert!(top["source"]["line"].as_u64().unwrap_or(0) > 0, "{top}");

    board::check_day_callers(&board, local);
}

/// Must hold 2: with a vmlinux of another build the preflight and the report say the kernel
/// build-id does not match and kallsyms is used.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_wrong_vmlinux_kernel_build_id_mismatch() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    // "Another build": the board's vmlinux with its build-id note altered.
    let other = tempfile::tempdir().unwrap();
    let vmlinux = find_file(&board.symbols, "vmlinux").expect("vmlinux in KPROF_BOARD_SYMBOLS");
    let mut bytes = std::fs::read(&vmlinux).unwrap();
    // The board runs this vmlinux (must-hold 1 checks that): its build-id per binutils.
    let hex = kprof_test_support::readelf_build_id(&vmlinux);
    let id: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let at = find(&bytes, &id).expect("the build-id bytes in vmlinux");
    bytes[at] ^= 0xff;
    std::fs::write(other.path().join("vmlinux"), bytes).unwrap();
    if let Some(ko) = find_file(&board.symbols, "mychardrv.ko") {
        std::fs::copy(ko, other.path().join("mychardrv.ko")).unwrap();
    }

    let (ok, out, err) = outcome(
        board
            .on_board("run")
            .arg("--symbols")
            .arg(other.path())
            .arg("--")
            .args(board.workload()),
    );
    assert!(ok, "{err}");
    assert!(err.contains("KERNEL BUILD-ID MISMATCH"), "{err}");
    let capture = out.lines().last().unwrap().trim().to_owned();
    let id_arg = Path::new(&capture)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".kprof.tar.gz")
        .to_owned();
    let (ok, _, err) = outcome(board.kprofctl().args(["fetch", &id_arg, "--no-report"]));
    assert!(ok, "{err}");
    let local = board
        .work
        .path()
        .join("kprof-captures")
        .join(Path::new(&capture).file_name().unwrap());
    let json = report_json(&board, &local, other.path(), &[]);
    let kernel = json["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| {
            i["kernel"] == true
                && i["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("kernel") || n == "vmlinux")
        })
        .unwrap_or_else(|| panic!("no kernel image in {json:#}"));
    // A wrong vmlinux is a mismatch with both ids (issue 24 item 11), names from kallsyms.
    assert_eq!(kernel["symbols"]["status"], "mismatch", "{kernel}");
    assert!(
        kernel["symbols"]["expected"].is_string() && kernel["symbols"]["found"].is_string(),
        "{kernel}"
    );
    let warnings = json["warnings"].to_string();
    assert!(warnings.contains("kallsyms"), "{warnings}");
    assert!(
        warnings.contains("build-id") || warnings.contains("mismatch"),
        "{warnings}"
    );
}

/// Must hold 3a: the ssh link is cut mid-capture; the capture completes on the board and a
/// later `fetch` gets it whole.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_link_cut_mid_capture_fetch_gets_it_whole() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let proxy = CuttingProxy::start(board.port, None);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let caps = format!("/tmp/kprof-test-cut-{}", std::process::id());
    let mut child = board
        .kprofctl()
        .args(["run", &via, "--accept-new-host-key", "-i"])
        .arg(&board.key)
        .args(["-o", &caps, "--", "sh", "-c"])
        .arg(format!("echo started; {}", board.workload()[2]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Cut as soon as the workload has started on the board.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("started") {
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap();
        assert!(n > 0, "run ended before the workload started");
        seen.extend_from_slice(&buf[..n]);
    }
    proxy.cut();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("connection lost during the capture"), "{err}");

    // The capture goes on without the link: wait until the agent renamed it into place.
    let deadline = Instant::now() + Duration::from_secs(300);
    let (name, size) = loop {
        let listed = board.ssh(&format!(
            "for f in {caps}/*.kprof.tar.gz; do [ -f \"$f\" ] && echo \"$(wc -c < \"$f\") ${{f##*/}}\"; done; true"
        ));
        if let Some((size, name)) = listed.lines().next().and_then(|l| l.split_once(' ')) {
            break (name.to_owned(), size.parse::<u64>().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "the capture never appeared in {caps}"
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let id = name.trim_end_matches(".kprof.tar.gz");
    let (ok, _, err) =
        outcome(
            board
                .on_board("fetch")
                .args([id, "--no-report", "--capture-dir", &caps]),
        );
    assert!(ok, "{err}");
    let local = board.work.path().join("kprof-captures").join(&name);
    assert_eq!(std::fs::metadata(&local).unwrap().len(), size);
    let t = Command::new("tar").arg("tzf").arg(&local).output().unwrap();
    assert!(t.status.success() && String::from_utf8_lossy(&t.stdout).contains("perf.data"));
    board.ssh(&format!("rm -rf {caps}"));
}

/// Must hold 3b: a download cut halfway resumes.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_cut_download_resumes() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let caps = format!("/tmp/kprof-test-resume-{}", std::process::id());
    let (capture, _) = board.run_capture(&["-o", &caps, "-F", "4000"]);
    let size: u64 = board
        .ssh(&format!("wc -c < {capture}"))
        .trim()
        .parse()
        .unwrap();
    let name = Path::new(&capture)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Only this capture: the board's default dir may hold others from earlier tests.
    let id = name.trim_end_matches(".kprof.tar.gz").to_owned();
    // The ssh handshake and listing take a few KiB; cut well inside the archive.
    let proxy = CuttingProxy::start(board.port, Some(16 * 1024 + size / 2));
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let (ok, _, err) = outcome(
        board
            .kprofctl()
            .args([
                "fetch",
                &via,
                &id,
                "--accept-new-host-key",
                "--no-report",
                "--capture-dir",
                &caps,
                "-i",
            ])
            .arg(&board.key),
    );
    assert!(!ok, "the cut download succeeded: {err}");
    assert!(err.contains("again to resume"), "{err}");
    let part = board
        .work
        .path()
        .join(format!("kprof-captures/{name}.part"));
    let cut_at = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert!(cut_at > 0 && cut_at < size, "{cut_at} of {size}");

    let (ok, _, err) =
        outcome(
            board
                .on_board("fetch")
                .args([&id, "--no-report", "--capture-dir", &caps]),
        );
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("at {cut_at} of {size} bytes")),
        "{err}"
    );
    assert!(err.contains("sha256 verified"), "{err}");
    let local = board.work.path().join(format!("kprof-captures/{name}"));
    assert_eq!(std::fs::metadata(&local).unwrap().len(), size);
    board.ssh(&format!("rm -rf {caps}"));
}

/// Must hold 4a: an unknown host key is refused with its fingerprint.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_unknown_host_key_refused() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    std::fs::write(board.home.path().join(".ssh/known_hosts"), "").unwrap();
    let (ok, _, err) = outcome(board.on_board("run").args(["--", "true"]));
    assert!(!ok);
    assert!(
        err.contains("host key not known") && err.contains("SHA256:"),
        "{err}"
    );
    assert!(err.contains(&board.target), "{err}");
}

/// Must hold 4b: a wrong password is a clear error (a throwaway user with a password is added
/// to the board; root there has an empty one, which kprofctl tries first).
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_wrong_password_clear_error() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let hash = Command::new("openssl")
        .args(["passwd", "-6", "-salt", "kproftestsalt", "right-Pass-7"])
        .output()
        .unwrap();
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_owned();
    board.ssh(&format!(
        "grep -q '^kproftest:' /etc/passwd || echo 'kproftest:{hash}:4242:4242::/tmp:/bin/sh' >> /etc/passwd"
    ));
    let target = format!("kproftest@127.0.0.1:{}", board.port);
    let mut cmd = board.kprofctl();
    cmd.args(["fetch", &target, "nope", "--no-report"])
        .env("KPROF_PASSWORD", "wrong");
    let (ok, _, err) = outcome(&mut cmd);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!("kprofctl: {target}: password from $KPROF_PASSWORD refused for user kproftest")
    );
    let mut cmd = board.kprofctl();
    cmd.args(["fetch", &target, "nope", "--no-report"])
        .env("KPROF_PASSWORD", "right-Pass-7");
    let (_, _, err) = outcome(&mut cmd);
    assert!(err.contains("no capture `nope`"), "{err}");
}

/// Must hold 4c: a board without the agent gets a message saying to run `kprofctl deploy`;
/// `deploy` then installs it (ELF machine checked) and reports its version.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_no_agent_deploy_hint_then_deploy() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let agent =
        find_file(&board.symbols, "kprof-agent").expect("kprof-agent in KPROF_BOARD_SYMBOLS");
    board.ssh("for a in /usr/bin/kprof-agent /tmp/kprof-agent; do [ -e $a ] && mv $a $a.hidden-by-test; done; true");
    let restore = || {
        board.ssh("for a in /usr/bin/kprof-agent /tmp/kprof-agent; do [ -e $a.hidden-by-test ] && mv -f $a.hidden-by-test $a; done; true")
    };
    let (ok, _, err) = outcome(board.on_board("run").args(["--", "true"]));
    if ok || !err.contains(&format!("run `kprofctl deploy {}` first", board.target)) {
        restore();
        panic!("no deploy hint: {err}");
    }
    let (ok, out, err) = outcome(board.on_board("deploy").arg("--agent").arg(&agent));
    restore();
    assert!(ok, "{err}");
    assert!(
        out.contains("kprof-agent 0.1.0 installed at /usr/bin/kprof-agent"),
        "{out}"
    );
}

/// Call paths through an image without frame pointers: mychardrv-writer (stripped on the
/// board, -O2 without frame pointers) recorded with `--call-graph dwarf`; the callers of
/// char_dev_cache_traverse go through the kernel's write path and libc's write into the
/// program's write_request ← run_batches ← main.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_day_writer_dwarf_callers_whole_path() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    board::check_writer_dwarf_path(&board);
}

/// Issue 15 must-hold 2: `run --off-cpu` of blocking reads of /dev/mychardrv: reads x
/// read_delay_ms blocked under mychardrv_read, on its kernel read path.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_day_off_cpu_blocking_read() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    board::check_blocking_read(&board);
}

/// A kernel leaf without a frame keeps its immediate caller: char_dev_cache_checksum (no
/// frame-pointer save in its disassembly) is called by mychardrv_write in ≥ 95 % of its
/// samples' chains (ORC unwinder).
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn board_day_frameless_leaf_immediate_caller() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    board::check_frameless_leaf_caller(&board, "objdump", "push   %rbp");
}
