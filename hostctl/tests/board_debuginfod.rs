//! Issue 22 against the QEMU board: symbols and sources from a real elfutils `debuginfod`
//! (Debian's), with the board's build tree hidden from kprofctl.
//!
//! Each test starts its own server over `KPROF_BOARD_BUILDROOT` (or a `.deb` feed made from
//! it) on a port of its own, and runs kprofctl as root in a private mount namespace where the
//! output dir and the dirs the DWARF names as source dirs are empty tmpfs mounts: kprofctl
//! gets symbols and sources only through `DEBUGINFOD_URLS`, never `--buildroot` or
//! `--symbols`. Environment: as `board_day.rs` (`ci/board/up` prints it) plus
//! `KPROF_BOARD_BUILDROOT`. Needs root, `unshare`, `debuginfod`, `eu-strip`, `bsdtar` (`-U`),
//! `dpkg-deb`. `cargo test -p kprofctl --test board_debuginfod -- --ignored --test-threads=1`.

use kprof_test_support::board::{env, find_file, Board};
use kprof_test_support::debuginfod::{self, assert_served, build_id, hidden, Server};
use kprof_test_support::outcome;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The board, the dirs kprofctl must not see, and the client caches of one test.
struct Day {
    board: Board,
    out: PathBuf,
    hidden: Vec<PathBuf>,
    debuginfod_cache: tempfile::TempDir,
    kprof_cache: tempfile::TempDir,
}

impl Day {
    /// `server_dirs`: the server's own files (relocated copies, a feed), hidden as well.
    fn new(server_dirs: &[&Path]) -> Day {
        assert!(
            is_root(),
            "board_debuginfod needs root (a mount namespace hides the build tree)"
        );
        let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
        let out = PathBuf::from(env("KPROF_BOARD_BUILDROOT"));
        let ko = out.join("build/mychardrv-1.0/mychardrv.ko");
        let vmlinux = find_file(&board.symbols, "vmlinux").expect("vmlinux");
        let mut dirs = vec![out.clone()];
        dirs.extend(debuginfod::source_dirs(&ko));
        dirs.extend(debuginfod::source_dirs(&vmlinux));
        dirs.extend(server_dirs.iter().map(|d| d.to_path_buf()));
        let day = Day {
            board,
            out,
            hidden: debuginfod::outermost(dirs),
            debuginfod_cache: client_cache(),
            kprof_cache: tempfile::tempdir().unwrap(),
        };
        // The namespace really hides them: nothing of the build tree is left to find.
        let mut probe = Command::new("sh");
        probe.args([
            "-c",
            "for f; do [ ! -e \"$f\" ] || { echo \"$f\"; exit 1; }; done",
            "sh",
        ]);
        probe
            .arg(&ko)
            .arg(&vmlinux)
            .arg(ko.with_file_name("mychardrv.c"));
        let (ok, seen, err) = outcome(&mut hidden(&probe, &day.hidden));
        assert!(ok, "still visible in the namespace: {seen}{err}");
        day
    }

    /// kprofctl in the namespace, with only the servers of `urls` and this day's caches.
    fn kprofctl(&self, urls: &str, args: &[&str]) -> (bool, String, String) {
        let mut cmd = self.board.kprofctl();
        self.client_env(&mut cmd, urls);
        cmd.args(args);
        outcome(&mut hidden(&cmd, &self.hidden))
    }

    /// `kprofctl run BOARD -i KEY --fetch -- WORKLOAD` in the namespace.
    fn run_fetch(&self, urls: &str) -> (bool, String, String) {
        let mut cmd = self.board.on_board("run");
        self.client_env(&mut cmd, urls);
        cmd.arg("--fetch").arg("--").args(self.board.workload());
        outcome(&mut hidden(&cmd, &self.hidden))
    }

    fn client_env(&self, cmd: &mut Command, urls: &str) {
        cmd.env("DEBUGINFOD_URLS", urls)
            .env("DEBUGINFOD_CACHE_PATH", self.debuginfod_cache.path())
            .env("KPROF_CACHE_DIR", self.kprof_cache.path())
            // A client that wrongly goes to a stopped server costs 20 s, not elfutils' 90.
            .env("DEBUGINFOD_TIMEOUT", "20")
            .env_remove("DEBUGINFOD_MAXSIZE")
            .env_remove("DEBUGINFOD_MAXTIME")
            .env_remove("XDG_CACHE_HOME");
    }

    fn report_json(&self, urls: &str, capture: &Path, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["report", path_str(capture), "--format", "json"];
        args.extend(extra);
        let (ok, out, err) = self.kprofctl(urls, &args);
        assert!(ok, "report {extra:?}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("report JSON: {e}\n{out}\n{err}"))
    }
}

/// An empty elfutils client cache whose misses stay valid for an hour (`cache_miss_s`, read
/// from the cache dir by every elfutils-compatible client; default 600 s): "no network with the
/// server stopped" must not depend on how fast a loaded machine runs the reports before it.
fn client_cache() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cache_miss_s"), "3600\n").unwrap();
    dir
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// mychardrv.ko's functions as (symbol, samples, source file name, line): what must come out
/// the same from every source of its symbols.
fn module_functions(json: &serde_json::Value) -> Vec<(String, u64, String, u64)> {
    json["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter(|f| f["image"] == "mychardrv.ko")
        .map(|f| {
            let file = f["source"]["file"].as_str().unwrap_or_default();
            (
                f["symbol"].as_str().unwrap_or_default().to_owned(),
                f["samples"].as_u64().unwrap_or(0),
                Path::new(file)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                f["source"]["line"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// No "no server had" warning names one of `images`.
fn assert_resolved(err: &str, images: &[&str]) {
    for line in err.lines().filter(|l| l.contains("no server had")) {
        for image in images {
            assert!(!line.contains(image), "{image} not served:\n{err}");
        }
    }
}

/// Must hold 1: `run --fetch` with the board's output dir only behind `debuginfod -F`: the
/// summary puts char_dev_cache_traverse on top of mychardrv.ko with its mychardrv.c line;
/// `--callers` has kernel frames with file:line; `--annotate` shows mychardrv.c's text, which
/// came through `/buildid/ID/source/PATH`. Must hold 3: the server stopped (its port then
/// held by a listener that must see no connection), the same reports from the cache.
#[test]
#[ignore = "needs the QEMU board (ci/board/up), root and debuginfod"]
fn fetch_debuginfod_build_tree_only_on_server_then_cache_offline() {
    let relocated = tempfile::tempdir().unwrap();
    let day = Day::new(&[relocated.path()]);
    let server = Server::start(
        "-F",
        &debuginfod::buildroot_paths(&day.out, relocated.path()),
    );
    let url = server.url.clone();
    let ko = day.out.join("build/mychardrv-1.0/mychardrv.ko");
    let ko_id = build_id(&ko);
    assert_served(&url, "debuginfo", &ko_id, None);
    assert_served(
        &url,
        "source",
        &ko_id,
        Some(&ko.with_file_name("mychardrv.c")),
    );
    let vmlinux = find_file(&day.board.symbols, "vmlinux").unwrap();
    assert_served(&url, "debuginfo", &build_id(&vmlinux), None);

    let (ok, summary, err) = day.run_fetch(&url);
    assert!(ok, "run --fetch failed:\n{err}\n{}", server.log());
    assert_resolved(&err, &["mychardrv.ko", "vmlinux"]);
    let top = summary
        .lines()
        .skip_while(|l| !l.starts_with("Functions"))
        .find(|l| l.contains(" mychardrv.ko "))
        .unwrap_or_else(|| panic!("no mychardrv.ko function in the summary:\n{summary}\n{err}"));
    assert!(top.contains("char_dev_cache_traverse"), "{summary}");
    assert!(top.contains("mychardrv.c:"), "no source line: {top}");
    let capture = day
        .board
        .captures_here()
        .pop()
        .expect("run --fetch left the capture here");

    let json = day.report_json(&url, &capture, &["--image", "mychardrv.ko"]);
    let functions = module_functions(&json);
    let (symbol, _, file, line) = functions.first().expect("mychardrv.ko functions");
    assert_eq!(symbol, "char_dev_cache_traverse", "{json:#}");
    assert_eq!(file, "mychardrv.c");
    assert!(*line > 0);
    let hot = &json["functions"][0]["hot_line"];
    let line = match hot["line"].as_u64() {
        Some(l)
            if hot["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("mychardrv.c")) =>
        {
            l
        }
        _ => *line,
    };

    let callers = callers_text(&day, &url, &capture);
    let annotate = annotate_text(&day, &url, &capture, line);
    let symbols = symbols_text(&day, &url, &capture);
    assert!(symbols.contains("debuginfod"), "{symbols}");

    // Must hold 3: same reports, no network.
    let port = server.port;
    drop(server);
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("the stopped server's port");
    listener.set_nonblocking(true).unwrap();
    let again = day.report_json(&url, &capture, &["--image", "mychardrv.ko"]);
    assert_eq!(module_functions(&again), functions);
    assert_eq!(callers_text(&day, &url, &capture), callers);
    assert_eq!(annotate_text(&day, &url, &capture, line), annotate);
    let symbols = symbols_text(&day, &url, &capture);
    assert!(symbols.contains("(debuginfod cache)"), "{symbols}");
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, from)) => panic!("kprofctl connected to the stopped server's port (from {from})"),
        Err(e) => panic!("accept: {e}"),
    }
}

/// `--callers char_dev_cache_traverse`: through mychardrv_write and the kernel's write path,
/// whose vmlinux frames carry file:line (vmlinux's DWARF came from the server).
fn callers_text(day: &Day, url: &str, capture: &Path) -> String {
    let (ok, tree, err) = day.kprofctl(
        url,
        &[
            "report",
            path_str(capture),
            "--callers",
            "char_dev_cache_traverse",
        ],
    );
    assert!(ok, "{err}");
    for needle in ["mychardrv_write", "vfs_write", "ksys_write", "mychardrv.ko"] {
        assert!(tree.contains(needle), "`{needle}` missing from:\n{tree}");
    }
    assert!(
        tree.lines()
            .any(|l| l.contains("vfs_write") && l.contains(".c:")),
        "no file:line on the kernel write path:\n{tree}\n{err}"
    );
    tree
}

/// `--annotate char_dev_cache_traverse` shows the text of `line` (its hottest) as it is in the
/// board's mychardrv.c, which kprofctl cannot read: it came through `/source/` into the
/// debuginfod cache (elfutils' `source##…##mychardrv.c` name under the module's build-id).
fn annotate_text(day: &Day, url: &str, capture: &Path, line: u64) -> String {
    let (ok, text, err) = day.kprofctl(
        url,
        &[
            "report",
            path_str(capture),
            "--annotate",
            "char_dev_cache_traverse",
        ],
    );
    assert!(ok, "{err}");
    let src = day.out.join("build/mychardrv-1.0/mychardrv.c");
    let wanted = std::fs::read_to_string(&src).unwrap();
    let wanted = wanted
        .lines()
        .nth(line as usize - 1)
        .unwrap_or_else(|| panic!("{} has no line {line}", src.display()));
    let shown = format!("{line:>6}  {wanted}");
    assert!(
        text.lines().any(|l| l.ends_with(&shown)),
        "line {line} (`{wanted}`) not in the annotation:\n{text}\n{err}"
    );
    let id = build_id(&day.out.join("build/mychardrv-1.0/mychardrv.ko"));
    let cached = std::fs::read_dir(day.debuginfod_cache.path().join(&id))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("source##")
                && n.ends_with("##mychardrv.c")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        });
    assert!(
        cached,
        "mychardrv.c not fetched through /source/ into the cache of {id}"
    );
    text
}

/// `kprofctl symbols CAPTURE`: where each image's symbols came from.
fn symbols_text(day: &Day, url: &str, capture: &Path) -> String {
    let (ok, text, err) = day.kprofctl(url, &["symbols", path_str(capture)]);
    assert!(ok, "{err}");
    text
}

/// Must hold 2: a `.deb` feed as a Yocto build with `package_deb` makes it (oe-core
/// `meta/lib/oe/package.py` `splitdebuginfo`, default `PACKAGE_DEBUG_SPLIT_STYLE`
/// `debug-with-srcpkg`: `objcopy --only-keep-debug` into `.debug/` next to the file, shipped
/// in `${PN}-dbg`), served with `debuginfod -U`: mychardrv.ko resolves to the same functions
/// and lines as from the output dir. The feed holds only `mychardrv-dbg` (no vmlinux: the
/// kernel's frames come from the capture's kallsyms here).
#[test]
#[ignore = "needs the QEMU board (ci/board/up), root, debuginfod and bsdtar"]
fn report_deb_feed_module_resolves_as_from_output_dir() {
    let feed = tempfile::tempdir().unwrap();
    let relocated = tempfile::tempdir().unwrap();
    let day = Day::new(&[feed.path(), relocated.path()]);
    let release = day.board.ssh("uname -r").trim().to_owned();
    build_dbg_deb(&day.out, &release, feed.path());

    // The capture and its reference result, from the output dir served with -F.
    let files = Server::start(
        "-F",
        &debuginfod::buildroot_paths(&day.out, relocated.path()),
    );
    let (ok, _, err) = day.run_fetch(&files.url);
    assert!(ok, "run --fetch failed:\n{err}");
    let capture = day.board.captures_here().pop().expect("the capture");
    let reference = module_functions(&day.report_json(&files.url, &capture, &[]));
    drop(files);
    // Not kallsyms (the capture has the module's names): its DWARF, with lines.
    match reference.first() {
        Some((symbol, _, file, line)) => assert!(
            symbol == "char_dev_cache_traverse" && file == "mychardrv.c" && *line > 0,
            "{reference:?}"
        ),
        None => panic!("no mychardrv.ko function"),
    }

    // A fresh client cache, the feed only.
    let day = Day {
        debuginfod_cache: client_cache(),
        kprof_cache: tempfile::tempdir().unwrap(),
        ..day
    };
    let server = Server::start("-U", &[feed.path().to_owned()]);
    let id = build_id(&day.out.join("build/mychardrv-1.0/mychardrv.ko"));
    assert_served(&server.url, "debuginfo", &id, None);
    let served = format!("/buildid/{id}/debuginfo 200");
    let before = server.log().matches(&served).count();
    let (ok, out, err) = day.kprofctl(
        &server.url,
        &["report", path_str(&capture), "--format", "json"],
    );
    assert!(ok, "{err}\n{}", server.log());
    assert_resolved(&err, &["mychardrv.ko"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(module_functions(&json), reference, "{err}");
    assert!(
        server.log().matches(&served).count() > before,
        "kprofctl did not get the module's debuginfo from the feed:\n{}",
        server.log()
    );
}

/// `FEED/mychardrv-dbg_1.0-r0_ARCH.deb` holding
/// `/lib/modules/RELEASE/extra/.debug/mychardrv.ko`: kbuild's `modules_install` puts an
/// external module in `extra/` (`INSTALL_MOD_DIR ?= extra`, Linux 6.1
/// `scripts/Makefile.modinst`), oe-core's split puts its debug file in `.debug/` beside it.
fn build_dbg_deb(out: &Path, release: &str, feed: &Path) {
    let ko = out.join("build/mychardrv-1.0/mychardrv.ko");
    let header = Command::new("readelf").arg("-h").arg(&ko).output().unwrap();
    let aarch64 = String::from_utf8_lossy(&header.stdout).contains("AArch64");
    let (objcopy, arch) = if aarch64 {
        ("aarch64-linux-gnu-objcopy", "arm64")
    } else {
        ("objcopy", "amd64")
    };
    let root = tempfile::tempdir().unwrap();
    let debug_dir = root
        .path()
        .join(format!("lib/modules/{release}/extra/.debug"));
    std::fs::create_dir_all(&debug_dir).unwrap();
    std::fs::create_dir(root.path().join("DEBIAN")).unwrap();
    std::fs::write(
        root.path().join("DEBIAN/control"),
        format!(
            "Package: mychardrv-dbg\nVersion: 1.0-r0\nArchitecture: {arch}\n\
             Maintainer: kprof tests <kprof@example.invalid>\nSection: devel\n\
             Description: mychardrv - Debugging files\n"
        ),
    )
    .unwrap();
    let status = Command::new(objcopy)
        .arg("--only-keep-debug")
        .arg(&ko)
        .arg(debug_dir.join("mychardrv.ko"))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{objcopy} --only-keep-debug {}",
        ko.display()
    );
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(root.path())
        .arg(feed.join(format!("mychardrv-dbg_1.0-r0_{arch}.deb")))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dpkg-deb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
