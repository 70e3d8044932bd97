//! A real OpenSSH server for the tests (feature `sshd`): `/usr/sbin/sshd -D` on a free
//! 127.0.0.1 port with its own host key and config. The integration tests use it as the
//! "board" and as a jump host; the board tests as the jump host in front of a QEMU board.

use crate::free_port;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running sshd; killed on drop.
#[derive(Debug)]
pub struct Sshd {
    /// Its config, host key, `authorized_keys` and `sshd.log`; the tests' fake board installs
    /// the agent and keeps captures below it (in [`crate::system::board_scratch_dir`]).
    pub dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
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
        let dir = tempfile::Builder::new()
            .prefix("sshd-")
            .tempdir_in(crate::system::board_scratch_dir())
            .unwrap();
        let key = dir.path().join(format!("host_{key_type}"));
        keygen(&key, key_type, "test-host");
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

    /// Its public host key, as a `known_hosts` line without the host name.
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

    /// `root@127.0.0.1:PORT`.
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
        std::fs::write(&config, config_text(dir, key, port, extra)).unwrap();
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

/// `extra` first: sshd takes the first value of a keyword, so a test's lines win over these
/// defaults (LogLevel for the jump host tests).
fn config_text(dir: &Path, key: &Path, port: u16, extra: &str) -> String {
    format!(
        "{extra}\nPort {port}\nListenAddress 127.0.0.1\nHostKey {key}\n\
         PidFile {pid}\nAuthorizedKeysFile {auth}\nStrictModes no\n\
         PermitRootLogin yes\nPasswordAuthentication yes\n\
         KbdInteractiveAuthentication no\nUsePAM no\nPubkeyAuthentication yes\n\
         MaxAuthTries 10\nLogLevel ERROR\n",
        key = key.display(),
        pid = dir.join("sshd.pid").display(),
        auth = dir.join("authorized_keys").display(),
    )
}

/// A new key pair of `key_type` (`ssh-keygen -t`) without a passphrase at `key` and
/// `key.pub`.
pub fn keygen(key: &Path, key_type: &str, comment: &str) {
    run_ok(
        Command::new("ssh-keygen")
            .args(["-q", "-t", key_type, "-N", "", "-C", comment, "-f"])
            .arg(key),
    );
}

/// Runs `cmd`, which must succeed (else a panic with its stderr); its output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
