//! The remote tests' board: a real OpenSSH server ([`Sshd`] of kprof_test_support, this machine
//! is the "board"), plus a client home for kprofctl.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use kprof_test_support::free_port;
pub use kprof_test_support::sshd::{run_ok, Sshd};

/// A new ed25519 key pair without a passphrase at `key` and `key.pub`.
fn keygen(key: &Path, comment: &str) {
    kprof_test_support::sshd::keygen(key, "ed25519", comment);
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
