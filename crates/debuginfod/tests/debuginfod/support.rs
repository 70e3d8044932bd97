//! Real servers for the client tests: Debian's `debuginfod` over ELF files built here with
//! gcc, a `python3 -m http.server` that serves whatever tree it is given, a listener that
//! never answers; and the ELF files themselves, with build-ids the test chooses.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use kprof_debuginfod::{Client, Config};

/// Debian's server.
pub const DEBUGINFOD: &str = "/usr/bin/debuginfod";

/// How long a server may take to start and index a test's few files before the test fails.
const READY_LIMIT: Duration = Duration::from_secs(120);

/// An ELF file built by a test, with its source.
#[derive(Debug, Clone)]
pub struct Elf {
    pub path: PathBuf,
    pub build_id: String,
    /// Absolute path of the C source, as the DWARF names it.
    pub source: String,
}

/// `count` ELF files `NAME-i` in `dir`, each built with gcc -g from its own source, with
/// build-id `TAG` followed by `i` (20 bytes, distinct per tag and index).
pub fn elfs(dir: &Path, name: &str, tag: u8, count: usize) -> Vec<Elf> {
    (0..count)
        .map(|i| {
            let build_id = format!("{tag:02x}{:038x}", i + 1);
            let src = dir.join(format!("{name}-{i}.c"));
            std::fs::write(
                &src,
                format!("int {name}_{i}(int x) {{ return x * {i} + 1; }}\nint main(void) {{ return {name}_{i}(2); }}\n"),
            )
            .unwrap();
            let out = dir.join(format!("{name}-{i}"));
            let flag = format!("-Wl,--build-id=0x{build_id}");
            kprof_test_support::cc(&["-g", "-O0", &flag], &src, &out);
            Elf {
                path: out,
                build_id,
                source: src.to_str().unwrap().to_string(),
            }
        })
        .collect()
}

/// `true` when Debian's `debuginfod` is installed. Without it a test is skipped with a
/// message, except under CI (`CI` set), where ci/setup installs it and its absence fails.
pub fn have_debuginfod() -> bool {
    if Path::new(DEBUGINFOD).exists() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{DEBUGINFOD} is missing under CI: ci/setup installs it (apt-get install debuginfod)"
        );
    }
    eprintln!("skipped: {DEBUGINFOD} is not installed (apt-get install debuginfod)");
    false
}

/// A TCP port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child server process, killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    pub url: String,
    _state: tempfile::TempDir,
}

impl Server {
    /// `debuginfod -F DIR -p PORT -d DB` on 127.0.0.1, once it serves `ready`'s debuginfo.
    pub fn debuginfod(dir: &Path, ready: &[&Elf]) -> Server {
        let state = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = std::fs::File::create(state.path().join("debuginfod.log")).unwrap();
        let child = Command::new(DEBUGINFOD)
            .arg("-F")
            .arg(dir)
            .args(["-p", &port.to_string(), "-d"])
            .arg(state.path().join("db.sqlite"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {DEBUGINFOD}: {e}"));
        let server = Server {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            _state: state,
        };
        let paths: Vec<String> = ready
            .iter()
            .map(|e| format!("/buildid/{}/debuginfo", e.build_id))
            .collect();
        server.wait_until_serving(port, &paths);
        server
    }

    /// `python3 -m http.server` over `root`, once it answers.
    pub fn python(root: &Path) -> Server {
        let state = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 -m http.server: {e}"));
        let server = Server {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            _state: state,
        };
        server.wait_until_serving(port, &["/".to_string()]);
        server
    }

    /// `misbehaving.py` (next to this file) on 127.0.0.1 serving `root`, HTTPS with a
    /// certificate of a new CA (`ca.pem` in [`Server::state`]) when `tls`, once it accepts
    /// connections.
    pub fn misbehaving(root: &Path, tls: bool) -> Server {
        let state = tempfile::tempdir().unwrap();
        let port = free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/debuginfod/misbehaving.py");
        let mut command = Command::new("python3");
        command.arg(script).arg(port.to_string());
        if tls {
            let (cert, key) = tls_certificate(state.path());
            command.arg(cert).arg(key);
        }
        let child = command
            .current_dir(root)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 misbehaving.py: {e}"));
        let scheme = if tls { "https" } else { "http" };
        let server = Server {
            child: Some(child),
            url: format!("{scheme}://127.0.0.1:{port}"),
            _state: state,
        };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < READY_LIMIT,
                "{} does not accept connections",
                server.url
            );
            thread::sleep(Duration::from_millis(100));
        }
        server
    }

    fn wait_until_serving(&self, port: u16, paths: &[String]) {
        let start = Instant::now();
        for path in paths {
            while http_status(port, path) != Some(200) {
                assert!(
                    start.elapsed() < READY_LIMIT,
                    "{} does not serve {path} after {READY_LIMIT:?}",
                    self.url
                );
                thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The server's own files (its database, log, certificate).
    pub fn state(&self) -> &Path {
        self._state.path()
    }

    /// Stops the server; its port then refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A new CA (`dir/ca.pem`) and a certificate it signed for 127.0.0.1; returns the
/// certificate and its key. (webpki refuses a self-signed CA certificate as a server's.)
fn tls_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let openssl = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run openssl ({e}): apt-get install openssl"));
        assert!(
            output.status.success(),
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let days = ["-days", "1"];
    openssl(
        &[
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=kprof test CA",
            ],
            &days[..],
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    );
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "key.pem",
        "-out",
        "cert.csr",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        &[
            &[
                "x509",
                "-req",
                "-in",
                "cert.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
            ],
            &days[..],
            &["-extfile", "ext.cnf", "-out", "cert.pem"],
        ]
        .concat(),
    );
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// The status of `GET path` on 127.0.0.1:`port`, `None` when it cannot be had.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A listener that accepts connections and never answers (a hung server).
pub struct Silent {
    pub url: String,
}

impl Silent {
    pub fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                held.push(stream);
            }
        });
        Silent { url }
    }
}

/// A client of `urls` with its cache in `cache`: timeout 10 s, 4 jobs.
pub fn client(urls: &[&str], cache: &Path) -> Client {
    Client::new(config(urls, cache)).unwrap()
}

pub fn config(urls: &[&str], cache: &Path) -> Config {
    Config {
        urls: urls.iter().map(|u| u.to_string()).collect(),
        cache_dir: cache.to_path_buf(),
        timeout: Duration::from_secs(10),
        max_size: None,
        max_time: None,
        jobs: 4,
    }
}
