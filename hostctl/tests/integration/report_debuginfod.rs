//! `kprofctl report` and `symbols` when the workload's symbols are only on a debuginfod server
//! (Debian's real `debuginfod`, started here): fetched and shown with their origin, used again
//! from the cache with the server gone, a file with another build-id refused, and a dead or
//! silent server costing one warning while the report still comes.

use crate::report_common::{compile, kprofctl_env, source};
use kprof_test_support::debuginfod::{build_id, Server};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// A perf.data of `hotloop` whose binary has left the recorded place: only `served` has it.
struct Moved {
    capture: tempfile::TempDir,
    served: tempfile::TempDir,
    build_id: String,
}

impl Moved {
    fn perf_data(&self) -> String {
        self.capture.path().join("perf.data").display().to_string()
    }
}

fn moved() -> Moved {
    moved_built(|out| compile(out, false))
}

fn moved_built(build: impl Fn(&Path)) -> Moved {
    let capture = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    build(&capture.path().join("hotloop"));
    record_hotloop(capture.path());
    let build_id = build_id(&capture.path().join("hotloop"));
    std::fs::rename(
        capture.path().join("hotloop"),
        served.path().join("hotloop"),
    )
    .unwrap();
    Moved {
        capture,
        served,
        build_id,
    }
}

/// `perf record` of `dir/hotloop` into `dir/perf.data`; `-N`: perf's own build-id cache
/// (~/.debug) would be a local copy of the binary.
fn record_hotloop(dir: &Path) {
    let out = kprof_test_support::system::perf()
        .current_dir(dir)
        .args(["record", "-N", "-e", "cpu-clock", "-c", "250000", "-g"])
        .args(["-o", "perf.data", "./hotloop", "6"])
        .output()
        .expect("running perf (Debian's linux-perf)");
    assert!(out.status.success(), "perf record: {out:?}");
}

/// kprofctl with only `DEBUGINFOD_URLS` (and a private debuginfod cache) for symbols.
fn with_servers(urls: &str, cache: &Path, args: &[&str]) -> Output {
    let home = cache.join("home");
    std::fs::create_dir_all(&home).unwrap();
    kprofctl_env(
        args,
        &[
            ("DEBUGINFOD_URLS", urls),
            (
                "DEBUGINFOD_CACHE_PATH",
                cache.join("debuginfod").to_str().unwrap(),
            ),
            ("DEBUGINFOD_TIMEOUT", "3"),
            ("HOME", home.to_str().unwrap()),
        ],
    )
}

fn top_function(v: &serde_json::Value) -> (String, String) {
    let f = &v["functions"][0];
    (
        f["image"].as_str().unwrap_or_default().to_string(),
        f["symbol"].as_str().unwrap_or_default().to_string(),
    )
}

/// The top function is one of hotloop's loops, with a source line in `hotloop.c` (DWARF
/// came from somewhere): its image and name.
fn assert_hot_loop_with_source(v: &serde_json::Value) -> (String, String) {
    let (image, name) = top_function(v);
    assert_eq!(image, "hotloop");
    assert!(name.ends_with("_loop"), "top function {name}");
    assert!(
        v["functions"][0]["source"]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("hotloop.c")),
        "{}",
        v["functions"][0]
    );
    (image, name)
}

/// `report PERF_DATA --format json` with `urls`, which must succeed: the JSON and stderr.
fn report_json_err(urls: &str, cache: &Path, perf_data: &str) -> (serde_json::Value, String) {
    let out = with_servers(urls, cache, &["report", perf_data, "--format", "json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

fn report_json(urls: &str, cache: &Path, perf_data: &str) -> serde_json::Value {
    report_json_err(urls, cache, perf_data).0
}

/// Symbols only on the server: the report names the hot loop with its source line, `symbols`
/// says the file came from the server, and with the server gone the cache answers.
#[test]
fn report_debuginfod_symbols_only_on_server_resolved() {
    let m = moved();
    // HOME is private: the other tests' `perf record` put the same build (same source, flags
    // and working directory) into the real ~/.debug.
    let cache = tempfile::tempdir().unwrap();
    let local = report_json("", cache.path(), &m.perf_data());
    assert_eq!(
        top_function(&local).1,
        "[unknown]",
        "the binary is still found without a server"
    );
    let server = Server::start("-F", &[m.served.path().to_path_buf()]);
    let out = with_servers(&server.url, cache.path(), &["symbols", &m.perf_data()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("(debuginfod: {})", server.url)),
        "{text}"
    );
    let v = report_json(&server.url, cache.path(), &m.perf_data());
    let (image, name) = assert_hot_loop_with_source(&v);
    assert!(
        server.log().contains(&m.build_id),
        "the server was not asked: {}",
        server.log()
    );
    drop(server);
    // Same cache, no server: the same answer, from the cache.
    let again = report_json("http://127.0.0.1:9", cache.path(), &m.perf_data());
    assert_eq!(top_function(&again), (image, name));
    // --offline: the cache, and no server asked (it would be a warning naming it).
    let out = with_servers(
        "http://127.0.0.1:9",
        cache.path(),
        &["symbols", &m.perf_data(), "--offline"],
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:9"),
        "{out:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(debuginfod cache)"), "{text}");
}

/// A server that refuses connections: one warning naming it, the report still comes.
#[test]
fn report_debuginfod_server_down_one_warning() {
    let m = moved();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let cache = tempfile::tempdir().unwrap();
    let out = with_servers(&url, cache.path(), &["report", &m.perf_data()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).is_empty());
    let naming: Vec<&str> = err.lines().filter(|l| l.contains(&url)).collect();
    assert_eq!(naming.len(), 1, "one warning for the server: {err}");
    assert!(naming[0].contains("not asked again"), "{err}");
}

/// A server that accepts and never answers: the report comes after DEBUGINFOD_TIMEOUT with
/// one warning naming the server.
#[test]
fn report_debuginfod_silent_server_times_out() {
    let m = moved();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    // Accepts every connection and keeps it open, answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let out = with_servers(&url, cache.path(), &["report", &m.perf_data()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let naming: Vec<&str> = err.lines().filter(|l| l.contains(&url)).collect();
    assert_eq!(naming.len(), 1, "one warning for the server: {err}");
}

/// A misconfigured server (a plain HTTP server over a `buildid/` tree) serving another
/// build's binary for the recorded build-id: refused with both ids, not used, not cached.
#[test]
fn report_debuginfod_wrong_build_id_refused() {
    let m = moved();
    let tree = tempfile::tempdir().unwrap();
    let dir = tree.path().join("buildid").join(&m.build_id);
    std::fs::create_dir_all(&dir).unwrap();
    let other = dir.join("debuginfo");
    compile(&other, true);
    let other_id = build_id(&other);
    assert_ne!(other_id, m.build_id);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = HttpServer(
        Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(tree.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    http.wait_listening(port);
    let cache = tempfile::tempdir().unwrap();
    let (v, err) = report_json_err(&url, cache.path(), &m.perf_data());
    assert_eq!(top_function(&v).1, "[unknown]", "the wrong file was used");
    assert!(
        err.lines()
            .any(|l| l.contains(&other_id) && l.contains(&m.build_id) && l.contains("refused")),
        "{err}"
    );
    let cached = cache
        .path()
        .join("debuginfod")
        .join(&m.build_id)
        .join("debuginfo");
    assert!(
        std::fs::metadata(&cached).map_or(true, |md| md.len() == 0),
        "the refused file was cached: {}",
        cached.display()
    );
}

struct HttpServer(std::process::Child);

impl HttpServer {
    fn wait_listening(&mut self, port: u16) {
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("python3 -m http.server did not listen on {port}");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A binary without DWARF on the server (debuginfod serves it as `executable` only, its
/// `debuginfo` is a 404): its symbol table names the hot loop, as perf would name it from the
/// file itself, and no "no server had" warning is given for it.
#[test]
fn report_debuginfod_executable_only_names_functions() {
    let m = moved_built(|out| {
        kprof_test_support::cc(&["-O1", "-fno-omit-frame-pointer"], &source(), out);
    });
    let server = Server::start("-F", &[m.served.path().to_path_buf()]);
    let cache = tempfile::tempdir().unwrap();
    let (v, err) = report_json_err(&server.url, cache.path(), &m.perf_data());
    let (image, name) = top_function(&v);
    assert_eq!(image, "hotloop");
    assert!(name.ends_with("_loop"), "top function {name}: {err}");
    assert!(
        !err.lines()
            .any(|l| l.contains("no server had") && l.contains(&m.build_id)),
        "{err}"
    );
}

/// Issue 36, item 14: a program recorded here and stripped in place (its build-id kept), its
/// debuginfo only on the server: the stripped file matches by build-id, and the server is
/// still asked for its debuginfo, as perf and gdb ask (before: only vmlinux and the vDSO
/// were asked for, and the report warned "install their -dbg packages"). With a server that
/// does not have it, the warning names the image and the servers asked.
#[test]
fn report_debuginfod_stripped_local_file_asks_server() {
    let capture = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    let exe = capture.path().join("hotloop");
    compile(&exe, false);
    record_hotloop(capture.path());
    let id = build_id(&exe);
    std::fs::copy(&exe, served.path().join("hotloop")).unwrap();
    let strip = Command::new("strip")
        .arg("--strip-all")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(strip.status.success(), "{strip:?}");
    assert_eq!(build_id(&exe), id, "strip keeps the build-id");
    let perf_data = capture.path().join("perf.data").display().to_string();

    let server = Server::start("-F", &[served.path().to_path_buf()]);
    let cache = tempfile::tempdir().unwrap();
    let v = report_json(&server.url, cache.path(), &perf_data);
    assert_hot_loop_with_source(&v);
    assert!(
        server.log().contains(&format!("/buildid/{id}/debuginfo")),
        "the server was not asked for the stripped file's debuginfo: {}",
        server.log()
    );
    drop(server);

    // A server with another build only (one that indexes nothing never reports ready).
    let elsewhere = tempfile::tempdir().unwrap();
    compile(&elsewhere.path().join("hotloop"), true);
    let other = Server::start("-F", &[elsewhere.path().to_path_buf()]);
    let (_, err) = report_json_err(&other.url, tempfile::tempdir().unwrap().path(), &perf_data);
    let asked = format!("(asked {}): ", other.url);
    assert!(
        err.lines().any(|l| l.contains("no server had")
            && l.contains(&asked)
            && l.contains(&format!("hotloop ({id})"))),
        "{err}"
    );
}

/// Issue 36, item 8: a run asks the servers for at most `KPROF_DEBUGINFOD_MAX_FILES` files
/// (a capture picks its build-ids: thousands of downloads before); the rest are named in one
/// warning, and the report still comes.
#[test]
fn report_debuginfod_file_count_capped() {
    let m = moved();
    let server = Server::start("-F", &[m.served.path().to_path_buf()]);
    let cache = tempfile::tempdir().unwrap();
    let home = cache.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = kprofctl_env(
        &["report", &m.perf_data(), "--format", "json"],
        &[
            ("DEBUGINFOD_URLS", &server.url),
            (
                "DEBUGINFOD_CACHE_PATH",
                cache.path().join("debuginfod").to_str().unwrap(),
            ),
            ("HOME", home.to_str().unwrap()),
            ("KPROF_DEBUGINFOD_MAX_FILES", "1"),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("file(s) not asked: a run asks for at most 1 (KPROF_DEBUGINFOD_MAX_FILES=1"),
        "{err}"
    );
    let asked = server.log().matches("GET /buildid/").count();
    assert_eq!(asked, 1, "{}", server.log());
}
