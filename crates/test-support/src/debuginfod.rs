//! A real elfutils `debuginfod` (Debian's package) for the tests of issue 22: started
//! on a free 127.0.0.1 port with a database of its own, waited for until it has indexed its
//! paths, killed on drop. Also what a Buildroot user serves from an output dir, and the
//! mount-namespace wrapper that hides the build tree from kprofctl.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the first index may take before the test gives up (a hang, not a measurement).
const INDEX_DEADLINE: Duration = Duration::from_secs(300);

/// One `debuginfod` process and its database directory.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// `http://127.0.0.1:PORT`, as `DEBUGINFOD_URLS` names it.
    pub url: String,
    dir: tempfile::TempDir,
}

impl Server {
    /// `debuginfod SCANNER PATHS -t0 -g0` (one scan, no grooming), returned once indexed.
    /// `scanner` is `-F` (ELF/DWARF files) or `-U` (.deb archives; needs bsdtar).
    pub fn start(scanner: &str, paths: &[PathBuf]) -> Server {
        let mut last_log = String::new();
        // The port is free when probed; another process may take it before debuginfod binds
        // it, so a server that exits at start is retried on another port.
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("log");
            let port = free_port();
            let child = Command::new("debuginfod")
                .arg("-d")
                .arg(dir.path().join("db.sqlite"))
                .args(["-p", &port.to_string(), "-t0", "-g0", scanner])
                .args(paths)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("debuginfod: {e} (install Debian's debuginfod package)")
                });
            let mut server = Server {
                child,
                port,
                url: format!("http://127.0.0.1:{port}"),
                dir,
            };
            if server.wait_indexed(&log) {
                return server;
            }
            last_log = tail(&log);
        }
        panic!("debuginfod did not start:\n{last_log}");
    }

    /// False when the process exited before it answered (its port was taken).
    fn wait_indexed(&mut self, log: &Path) -> bool {
        let deadline = Instant::now() + INDEX_DEADLINE;
        // Twice in a row: a scanner that has just taken the last file off the queue may not
        // count itself busy yet.
        let mut ready = 0;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if metrics(self.port).is_some_and(|m| indexed(&m)) {
                ready += 1;
                if ready == 2 {
                    return true;
                }
            } else {
                ready = 0;
            }
            assert!(
                Instant::now() < deadline,
                "debuginfod on port {} did not finish indexing in {INDEX_DEADLINE:?}:\n{}",
                self.port,
                tail(log)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// The server's log so far (its request lines show what clients asked for).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// `GET /metrics` (Prometheus text), or None while nothing answers.
fn metrics(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The check elfutils' own tests and oe-core's selftest use: every path walked once, no file
/// waiting to be scanned or being scanned.
fn indexed(metrics: &str) -> bool {
    let value = |key: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<f64>().ok())
    };
    value("thread_work_total{role=\"traverse\"}").is_some_and(|v| v >= 1.0)
        && value("thread_work_pending{role=\"scan\"}") == Some(0.0)
        && value("thread_busy{role=\"scan\"}") == Some(0.0)
}

/// What a Buildroot user serves from an output dir (docs/debuginfod.md, Buildroot; the same
/// list as `ci/board/lib.sh` `board_debuginfod_paths`): vmlinux, the other `build/*` package
/// dirs, `images/kprof-symbols/`, `staging/` when present, and `relocated` — copies of every
/// `.ko` under `build/` with their debug sections relocated, made here ([`relocate_modules`]).
pub fn buildroot_paths(out: &Path, relocated: &Path) -> Vec<PathBuf> {
    let ver = std::fs::read_to_string(out.join("kernel-version")).unwrap();
    let kernel = out.join("build").join(format!("linux-{}", ver.trim()));
    let mut paths = vec![kernel.join("vmlinux")];
    let mut builds: Vec<PathBuf> = std::fs::read_dir(out.join("build"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && *p != kernel)
        .collect();
    builds.sort();
    paths.extend(builds);
    // Resolved: Buildroot's staging is a symlink, which debuginfod would index as nothing.
    for p in [out.join("images/kprof-symbols"), out.join("staging")] {
        if p.is_dir() {
            paths.push(std::fs::canonicalize(&p).unwrap());
        }
    }
    relocate_modules(&out.join("build"), relocated);
    paths.push(relocated.to_owned());
    paths
}

/// `eu-strip --reloc-debug-sections-only` copies of every `.ko` under `dir`: debuginfod reads
/// an ET_REL file's DWARF unrelocated and records no usable source path for it
/// (docs/virtual-board.md), so `/source/` of a module needs these.
pub fn relocate_modules(dir: &Path, into: &Path) {
    for ko in files_named(dir, ".ko") {
        let rel = ko.strip_prefix(dir).unwrap();
        let dest = into.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let out = Command::new("eu-strip")
            .arg("--reloc-debug-sections-only")
            .arg("-o")
            .arg(&dest)
            .arg(&ko)
            .output()
            .expect("eu-strip (Debian package elfutils)");
        assert!(
            out.status.success(),
            "eu-strip --reloc-debug-sections-only {}: {}",
            ko.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn files_named(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() && e.file_name().to_string_lossy().ends_with(suffix) {
                found.push(e.path());
            }
        }
    }
    found
}

/// The server half on its own: elfutils' `debuginfod-find ARTIFACT ID [PATH]` (fresh cache)
/// gets a non-empty file from `url`.
pub fn assert_served(url: &str, artifact: &str, id: &str, source: Option<&Path>) {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new("debuginfod-find")
        .env("DEBUGINFOD_URLS", url)
        .env("DEBUGINFOD_CACHE_PATH", cache.path())
        .args([artifact, id])
        .args(source)
        .output()
        .expect("debuginfod-find (Debian package debuginfod)");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success() && std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
        "debuginfod-find {artifact} {id} {source:?} from {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The GNU build-id of an ELF file, per binutils' readelf.
pub fn build_id(elf: &Path) -> String {
    crate::readelf_build_id(elf)
}

/// The first compile unit's `DW_AT_comp_dir` and the directory of its `DW_AT_name` when that
/// is absolute: where the file's sources are (readelf stops being read after the first unit).
pub fn source_dirs(elf: &Path) -> Vec<PathBuf> {
    let mut child = Command::new("readelf")
        .args(["--debug-dump=info", "--dwarf-depth=1"])
        .arg(elf)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut dirs = Vec::new();
    let (mut comp_dir, mut name) = (false, false);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        let value = || line.rsplit_once("): ").map(|(_, v)| v.trim().to_owned());
        if !comp_dir && line.contains("DW_AT_comp_dir") {
            comp_dir = true;
            dirs.extend(value().map(PathBuf::from));
        } else if !name && line.contains("DW_AT_name") {
            name = true;
            if let Some(v) = value().filter(|v| v.starts_with('/')) {
                dirs.extend(Path::new(&v).parent().map(Path::to_owned));
            }
        }
        if comp_dir && name {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(comp_dir, "{}: no DW_AT_comp_dir", elf.display());
    dirs
}

/// The outermost of `dirs`: mounting over a dir already hidden by its parent's tmpfs would
/// fail (it no longer exists there), and is not needed.
pub fn outermost(mut dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    dirs.sort();
    dirs.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if !kept.iter().any(|k| d.starts_with(k)) {
            kept.push(d);
        }
    }
    kept
}

/// `cmd` (program, arguments, environment and working dir kept) run as root in a private
/// mount namespace where each of `hidden` is an empty tmpfs: the process sees none of those
/// files, while everything outside the namespace (the debuginfod server) still does.
pub fn hidden(cmd: &Command, hidden: &[PathBuf]) -> Command {
    const SCRIPT: &str = r#"n=$1; shift
while [ "$n" -gt 0 ]; do mount -t tmpfs -o size=1m,mode=0755 kprof-hidden "$1"; shift; n=$((n - 1)); done
exec "$@""#;
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "--", "sh", "-ec"])
        .arg(SCRIPT)
        .arg("sh")
        .arg(hidden.len().to_string())
        .args(hidden)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}
