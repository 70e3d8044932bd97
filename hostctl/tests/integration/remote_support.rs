//! A real OpenSSH server for the remote tests: `/usr/sbin/sshd -D` on a free 127.0.0.1 port with
//! its own host key and config (this machine is the "board"), plus a client home for kprofctl.
#![allow(dead_code)] // board_day uses a part of it too.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running sshd; killed on drop.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
    key: PathBuf,
}

impl Sshd {
    /// Starts sshd with `extra` config lines. Root logs in with the keys in `authorized_keys`.
    pub fn start(extra: &str) -> Sshd {
        Sshd::start_with_host_key("ed25519", extra)
    }

    /// [`Sshd::start`] with one host key of `key_type` (`ssh-keygen -t`) and no other.
    pub fn start_with_host_key(key_type: &str, extra: &str) -> Sshd {
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "the remote tests need OpenSSH's server: apt-get install openssh-server"
        );
        std::fs::create_dir_all("/run/sshd").unwrap();
        // Not under /tmp: kprofctl refuses to install or run the agent in a directory other
        // users can write (or below one), and the tests deploy into this one.
        let dir = tempfile::Builder::new()
            .prefix("sshd-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let key = dir.path().join(format!("host_{key_type}"));
        keygen_type(&key, key_type, "test-host");
        std::fs::write(dir.path().join("authorized_keys"), "").unwrap();
        for _ in 0..5 {
            let port = free_port();
            let config = dir.path().join("sshd_config");
            std::fs::write(
                &config,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {key}\nPidFile {pid}\n\
                     AuthorizedKeysFile {auth}\nStrictModes no\nPermitRootLogin yes\n\
                     PasswordAuthentication yes\nKbdInteractiveAuthentication no\nUsePAM no\n\
                     PubkeyAuthentication yes\nMaxAuthTries 10\nLogLevel ERROR\n{extra}\n",
                    key = key.display(),
                    pid = dir.path().join("sshd.pid").display(),
                    auth = dir.path().join("authorized_keys").display(),
                ),
            )
            .unwrap();
            let mut child = Command::new("/usr/sbin/sshd")
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("sshd.log")).unwrap())
                .spawn()
                .expect("start sshd");
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Sshd {
                        dir,
                        port,
                        child,
                        key,
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "sshd did not start: {}",
            std::fs::read_to_string(dir.path().join("sshd.log")).unwrap_or_default()
        );
    }

    pub fn host_pub(&self) -> String {
        std::fs::read_to_string(self.key.with_extension("pub")).unwrap()
    }

    /// The host key's `SHA256:...` fingerprint per ssh-keygen.
    pub fn host_fingerprint(&self) -> String {
        let out = run_ok(
            Command::new("ssh-keygen")
                .arg("-lf")
                .arg(self.key.with_extension("pub")),
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_owned()
    }

    /// Authorizes a public key for root.
    pub fn authorize(&self, pubkey: &Path) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("authorized_keys"))
            .unwrap();
        f.write_all(&std::fs::read(pubkey).unwrap()).unwrap();
    }

    pub fn target(&self) -> String {
        format!("root@127.0.0.1:{}", self.port)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port the kernel just handed out and released.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A new ed25519 key pair without a passphrase at `key` and `key.pub`.
fn keygen(key: &Path, comment: &str) {
    keygen_type(key, "ed25519", comment);
}

/// A new key pair of `key_type` without a passphrase at `key` and `key.pub`.
fn keygen_type(key: &Path, key_type: &str, comment: &str) {
    run_ok(
        Command::new("ssh-keygen")
            .args(["-q", "-t", key_type, "-N", "", "-C", comment, "-f"])
            .arg(key),
    );
}

/// An sshd that lets the client's key log in as root; the client does not know its host key.
pub fn untrusted_board() -> (Sshd, Client) {
    let sshd = Sshd::start("");
    let client = Client::new();
    sshd.authorize(&client.pubkey());
    (sshd, client)
}

/// [`untrusted_board`] with the client trusting the host key.
pub fn board() -> (Sshd, Client) {
    let (sshd, client) = untrusted_board();
    client.trust(&sshd, sshd.port);
    (sshd, client)
}

/// A local user `name` (no home, /bin/sh), created unless it exists; its password is left as
/// it was.
pub fn throwaway_user(name: &str) {
    let exists = Command::new("id")
        .arg(name)
        .output()
        .unwrap()
        .status
        .success();
    if !exists {
        run_ok(Command::new("useradd").args(["-M", "-d", "/tmp", "-s", "/bin/sh", name]));
    }
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The client side: a HOME with ~/.ssh, a working directory, and a key pair.
pub struct Client {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub key: PathBuf,
}

impl Client {
    pub fn new() -> Client {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".ssh")).unwrap();
        let work = tempfile::tempdir().unwrap();
        let key = home.path().join("board_key");
        keygen(&key, "test-client");
        Client { home, work, key }
    }

    pub fn pubkey(&self) -> PathBuf {
        self.key.with_extension("pub")
    }

    pub fn known_hosts(&self) -> PathBuf {
        self.home.path().join(".ssh/known_hosts")
    }

    /// Lists the server's key for `[127.0.0.1]:port` in known_hosts.
    pub fn trust(&self, sshd: &Sshd, port: u16) {
        let line = format!("[127.0.0.1]:{port} {}", sshd.host_pub());
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.known_hosts())
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }

    /// `kprofctl ARGS` with this HOME and working directory, no ssh-agent, no terminal.
    pub fn kprofctl(&self) -> Command {
        kprof_test_support::kprofctl(
            Path::new(env!("CARGO_BIN_EXE_kprofctl")),
            self.home.path(),
            self.work.path(),
        )
    }

    /// [`Client::kprofctl`] with `ARGS -i KEY`: logs in with the client's key.
    pub fn keyed(&self, args: &[&str]) -> Command {
        let mut cmd = self.kprofctl();
        cmd.args(args).arg("-i").arg(&self.key);
        cmd
    }
}

/// Runs and returns (success, stdout, stderr).
pub fn outcome(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().expect("spawn kprofctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TCP forwarder to `127.0.0.1:to` that cuts both directions once `limit` bytes went from
/// the server to the client, or when [`CuttingProxy::cut`] is called: a link dropping in the
/// middle of a transfer or a capture.
pub struct CuttingProxy {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CuttingProxy {
    pub fn start(to: u16, limit: Option<u64>) -> CuttingProxy {
        CuttingProxy::spawn(to, limit, None)
    }

    /// A proxy that passes at most `bytes_per_sec` from the server to the client: a slow link,
    /// for a download that is still running when the test acts.
    pub fn throttled(to: u16, bytes_per_sec: u64) -> CuttingProxy {
        CuttingProxy::spawn(to, None, Some(bytes_per_sec))
    }

    fn spawn(to: u16, limit: Option<u64>, rate: Option<u64>) -> CuttingProxy {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let cut2 = cut.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    return;
                };
                let sent = Arc::new(AtomicU64::new(0));
                for (from, into, counted) in [
                    (
                        client.try_clone().unwrap(),
                        server.try_clone().unwrap(),
                        false,
                    ),
                    (server, client, true),
                ] {
                    let (cut, sent) = (cut2.clone(), sent.clone());
                    std::thread::spawn(move || {
                        let (mut from, mut into) = (from, into);
                        from.set_read_timeout(Some(Duration::from_millis(50)))
                            .unwrap();
                        let mut buf = [0u8; 16384];
                        let chunk = match (counted, rate) {
                            (true, Some(r)) => (r as usize / 20).clamp(1, buf.len()),
                            _ => buf.len(),
                        };
                        loop {
                            if cut.load(Ordering::SeqCst) {
                                break;
                            }
                            let n = match from.read(&mut buf[..chunk]) {
                                Ok(0) => break,
                                Ok(n) => n,
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) =>
                                {
                                    continue
                                }
                                Err(_) => break,
                            };
                            let mut n = n as u64;
                            if counted {
                                if let Some(limit) = limit {
                                    let before = sent.fetch_add(n, Ordering::SeqCst);
                                    n = n.min(limit.saturating_sub(before));
                                    if before + n >= limit {
                                        let _ = into.write_all(&buf[..n as usize]);
                                        cut.store(true, Ordering::SeqCst);
                                        break;
                                    }
                                }
                            }
                            if into.write_all(&buf[..n as usize]).is_err() {
                                break;
                            }
                            if let (true, Some(r)) = (counted, rate) {
                                std::thread::sleep(Duration::from_secs_f64(n as f64 / r as f64));
                            }
                        }
                        let _ = into.shutdown(std::net::Shutdown::Both);
                        let _ = from.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CuttingProxy { port, cut }
    }

    /// Drops every connection through the proxy now (and any later one).
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The agent binary for tests that run it on the local "board": $KPROF_AGENT, or the one
/// `cargo test --workspace` built next to kprofctl, or a build of it into a side target dir.
pub fn agent_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("KPROF_AGENT") {
        return PathBuf::from(p);
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kprofctl"))
        .parent()
        .unwrap()
        .to_path_buf();
    let next = bin_dir.join("kprof-agent");
    if next.exists() {
        return next;
    }
    // cargo holds the lock of its own target dir while tests run: build in a side one.
    let side = bin_dir.join("remote-tests-agent");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    run_ok(
        Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "kprof-agent", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&side),
    );
    side.join("debug/kprof-agent")
}
