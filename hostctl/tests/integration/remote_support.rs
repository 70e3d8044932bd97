//! A real OpenSSH server for the remote tests: `/usr/sbin/sshd -D` on a free 127.0.0.1 port with
//! its own host key and config (this machine is the "board"), plus a client home for kprofctl.

use std::io::Write as _;
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
    extra: String,
}

impl Sshd {
    /// Starts sshd with `extra` config lines. Root logs in with the keys in `authorized_keys`.
    /// sshd takes a keyword's first value: `extra` can set `LogLevel` (`sshd.log`), not the
    /// other lines above it.
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
        let (port, child) = spawn_sshd(dir.path(), &key, extra);
        Sshd {
            dir,
            port,
            child,
            key,
            extra: extra.to_owned(),
        }
    }

    /// Stops sshd and starts it again on another free port with the same host key, config
    /// and authorized keys, as a board that rebooted onto a new forwarded port.
    pub fn restart_on_new_port(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let old = self.port;
        loop {
            let (port, child) = spawn_sshd(self.dir.path(), &self.key, &self.extra);
            if port != old {
                (self.port, self.child) = (port, child);
                return;
            }
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
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

    /// What sshd logged so far (its stderr, at the config's LogLevel).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
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

/// Starts `/usr/sbin/sshd -D` with config in `dir` and host key `key` on a free port; returns
/// the port it answers on.
fn spawn_sshd(dir: &Path, key: &Path, extra: &str) -> (u16, Child) {
    for _ in 0..5 {
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            // `extra` first: sshd takes the first value of a keyword, so a test's lines
            // win over these defaults (LogLevel for the jump host tests).
            format!(
                "{extra}\nPort {port}\nListenAddress 127.0.0.1\nHostKey {key}\n\
                 PidFile {pid}\nAuthorizedKeysFile {auth}\nStrictModes no\n\
                 PermitRootLogin yes\nPasswordAuthentication yes\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nPubkeyAuthentication yes\n\
                 MaxAuthTries 10\nLogLevel ERROR\n",
                key = key.display(),
                pid = dir.join("sshd.pid").display(),
                auth = dir.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        let mut child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("start sshd");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (port, child);
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
        std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
    );
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
