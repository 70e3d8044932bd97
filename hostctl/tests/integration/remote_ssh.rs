//! Logging in to a real OpenSSH server: host key checking, identity files, ~/.ssh/config
//! aliases, passwords. A login is proven by an error only a logged-in kprofctl can give: asking
//! `fetch` for a capture id that does not exist.

use crate::remote_support::{board, run_ok, untrusted_board, Client, Sshd};
use kprof_test_support::outcome;
use kprof_test_support::system::TestUser;
use std::process::Command;

/// The message `fetch TARGET nope` gives once logged in.
const LOGGED_IN: &str = "no capture `nope`";

fn fetch_nope(client: &Client, target: &str) -> Command {
    let mut cmd = client.kprofctl();
    cmd.args([
        "fetch",
        target,
        "nope",
        "--no-report",
        "--capture-dir",
        "/nonexistent",
    ]);
    cmd
}

/// [`fetch_nope`] logging in with the client's key file.
fn fetch_nope_keyed(client: &Client, target: &str) -> Command {
    let mut cmd = fetch_nope(client, target);
    cmd.arg("-i").arg(&client.key);
    cmd
}

/// An unknown host key is refused with its SHA256 fingerprint, and nothing is written.
#[test]
fn connect_ssh_unknown_host_key_refused_with_fingerprint() {
    let (sshd, client) = untrusted_board();
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &sshd.target()));
    assert!(!ok);
    assert!(err.contains("host key not known"), "{err}");
    assert!(err.contains(&sshd.host_fingerprint()), "{err}");
    assert!(err.contains("--accept-new-host-key"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!client.known_hosts().exists());
}

/// `--accept-new-host-key` adds the key as `[127.0.0.1]:PORT`; the next login needs no flag.
#[test]
fn connect_ssh_accept_new_host_key_appends_port_form() {
    let (sshd, client) = untrusted_board();
    let (_, _, err) =
        outcome(fetch_nope_keyed(&client, &sshd.target()).arg("--accept-new-host-key"));
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(err.contains(&sshd.host_fingerprint()), "{err}");
    let known = std::fs::read_to_string(client.known_hosts()).unwrap();
    let expected = format!(
        "[127.0.0.1]:{} {}",
        sshd.port,
        sshd.host_pub()
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert_eq!(known.trim(), expected);
    let (_, _, err) = outcome(&mut fetch_nope_keyed(&client, &sshd.target()));
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// A listed host with another key is refused as changed, even with `--accept-new-host-key`.
#[test]
fn connect_ssh_changed_host_key_always_refused() {
    let (sshd, client) = untrusted_board();
    let other = Sshd::start("");
    // known_hosts lists the other server's key for this server's address.
    client.trust(&other, sshd.port);
    let before = std::fs::read_to_string(client.known_hosts()).unwrap();
    let (ok, _, err) =
        outcome(fetch_nope_keyed(&client, &sshd.target()).arg("--accept-new-host-key"));
    assert!(!ok);
    assert!(err.contains("HOST KEY CHANGED"), "{err}");
    assert!(err.contains(&sshd.host_fingerprint()), "{err}");
    assert!(err.contains("line 1"), "{err}");
    assert_eq!(
        std::fs::read_to_string(client.known_hosts()).unwrap(),
        before
    );
}

/// A board known by its ed25519 key that offers only an RSA key is refused as a changed key
/// (not added as a new one) even with `--accept-new-host-key`, naming the known_hosts line and
/// both key types; known_hosts is left as it was.
#[test]
fn connect_ssh_host_key_type_changed_refused() {
    let sshd = Sshd::start_with_host_key("rsa", "");
    let client = Client::new();
    sshd.authorize(&client.pubkey());
    let ed25519 = Sshd::start("");
    client.trust(&ed25519, sshd.port);
    let before = std::fs::read_to_string(client.known_hosts()).unwrap();
    let (ok, _, err) =
        outcome(fetch_nope_keyed(&client, &sshd.target()).arg("--accept-new-host-key"));
    assert!(!ok, "{err}");
    assert!(err.contains("HOST KEY TYPE CHANGED"), "{err}");
    assert!(
        err.contains(&format!("{} line 1", client.known_hosts().display())),
        "{err}"
    );
    assert!(
        err.contains("ssh-ed25519") && err.contains("ssh-rsa"),
        "{err}"
    );
    assert!(err.contains(&sshd.host_fingerprint()), "{err}");
    assert!(!err.contains(LOGGED_IN), "{err}");
    assert_eq!(
        std::fs::read_to_string(client.known_hosts()).unwrap(),
        before
    );
}

/// Hashed known_hosts entries (`ssh-keygen -H`, Debian's HashKnownHosts) are honoured.
#[test]
fn connect_ssh_hashed_known_hosts_entry() {
    let (sshd, client) = board();
    run_ok(
        Command::new("ssh-keygen")
            .arg("-H")
            .arg("-f")
            .arg(client.known_hosts()),
    );
    let known = std::fs::read_to_string(client.known_hosts()).unwrap();
    assert!(known.starts_with("|1|"), "{known}");
    let (_, _, err) = outcome(&mut fetch_nope_keyed(&client, &sshd.target()));
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// An ~/.ssh/config alias supplies HostName, Port, User and IdentityFile.
#[test]
fn connect_ssh_config_alias_identity_file() {
    let (sshd, client) = board();
    std::fs::write(
        client.home.path().join(".ssh/config"),
        format!(
            "Host myboard\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile ~/board_key\n",
            sshd.port
        ),
    )
    .unwrap();
    let (_, _, err) = outcome(&mut fetch_nope(&client, "myboard"));
    assert!(err.contains(LOGGED_IN), "{err}");
    // Without the config the same key is not found (it is not a default name) and there is no
    // terminal to ask for a password.
    std::fs::remove_file(client.home.path().join(".ssh/config")).unwrap();
    let (ok, _, err) = outcome(&mut fetch_nope(&client, &sshd.target()));
    assert!(!ok);
    assert!(err.contains("no terminal to ask for a password"), "{err}");
    assert!(err.contains(&sshd.target()), "{err}");
}

/// An sshd with `extra` config lines whose host key the client trusts, and the target
/// `USER@127.0.0.1:PORT` for logging in with a password (no key is authorized).
fn password_board(extra: &str, user: &str) -> (Sshd, Client, String) {
    let sshd = Sshd::start(extra);
    let client = Client::new();
    client.trust(&sshd, sshd.port);
    let target = format!("{user}@127.0.0.1:{}", sshd.port);
    (sshd, client, target)
}

/// A wrong password is one clear error naming the user and target; the right one logs in.
#[test]
fn connect_ssh_wrong_password_clear_error() {
    // A throwaway account with a known password: deleted when the test ends, even by a
    // panic, so no account with a known password stays open on the machine.
    let account = TestUser::create("kprofpwtest");
    let (user, password) = (account.name(), "right-Pass-7");
    account.set_password(password);
    let (_sshd, client, target) = password_board("", user);
    let (ok, out, err) = outcome(fetch_nope(&client, &target).env("KPROF_PASSWORD", "wrong"));
    assert!(!ok);
    assert_eq!(out, "");
    assert_eq!(
        err.trim(),
        format!("kprofctl: {target}: password from $KPROF_PASSWORD refused for user {user}")
    );
    let (_, _, err) = outcome(fetch_nope(&client, &target).env("KPROF_PASSWORD", password));
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// An empty password is tried before asking (debug-tweaks and Buildroot boards have one).
#[test]
fn connect_ssh_empty_password_user() {
    let account = TestUser::create("kprofemptytest");
    account.clear_password();
    let (_sshd, client, target) = password_board("PermitEmptyPasswords yes", account.name());
    let (_, _, err) = outcome(&mut fetch_nope(&client, &target));
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// A port nobody listens on is a connection error naming the target.
#[test]
fn connect_ssh_closed_port_names_target() {
    let client = Client::new();
    let port = crate::remote_support::free_port();
    let target = format!("root@127.0.0.1:{port}");
    let (ok, _, err) = outcome(&mut fetch_nope(&client, &target));
    assert!(!ok);
    assert!(
        err.starts_with(&format!("kprofctl: {target}: cannot connect")),
        "{err}"
    );
}

/// A key held by a running ssh-agent logs in with no identity file given.
#[test]
fn connect_ssh_agent_key() {
    let (sshd, client) = board();
    let sock = client.home.path().join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !sock.exists() && start.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let added = Command::new("ssh-add")
        .arg(&client.key)
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    // Move the key away so that only the agent has it.
    std::fs::rename(&client.key, client.home.path().join("moved")).unwrap();
    let (_, _, err) = outcome(fetch_nope(&client, &sshd.target()).env("SSH_AUTH_SOCK", &sock));
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// Issue 36, item 6: a board pinned in a system-wide known_hosts (`GlobalKnownHostsFile`,
/// `/etc/ssh/ssh_known_hosts` by default) with another key is refused as changed, even with
/// `--accept-new-host-key` (before: kprofctl read only `~/.ssh/known_hosts`, took the board
/// for unknown and added the attacker's key); a board covered by a `@cert-authority` line is
/// refused naming it; `ProxyCommand` in the config is an error naming the line.
#[test]
fn connect_ssh_global_known_hosts_and_cert_authority() {
    let (sshd, client) = untrusted_board();
    let other = Sshd::start("");
    let global = client.home.path().join("ssh_known_hosts");
    let pinned = format!("[127.0.0.1]:{} {}", sshd.port, other.host_pub());
    std::fs::write(&global, format!("{pinned}\n")).unwrap();
    let config = client.home.path().join(".ssh/config");
    std::fs::write(
        &config,
        format!("Host *\n  GlobalKnownHostsFile {}\n", global.display()),
    )
    .unwrap();
    let (ok, _, err) =
        outcome(fetch_nope_keyed(&client, &sshd.target()).arg("--accept-new-host-key"));
    assert!(!ok);
    assert!(
        err.contains("HOST KEY CHANGED") && err.contains(&format!("{} line 1", global.display())),
        "{err}"
    );
    assert!(!client.known_hosts().exists(), "nothing added");

    let ca = format!("@cert-authority [127.0.0.1]:* {}", other.host_pub());
    std::fs::write(&global, format!("{ca}\n")).unwrap();
    let (ok, _, err) =
        outcome(fetch_nope_keyed(&client, &sshd.target()).arg("--accept-new-host-key"));
    assert!(!ok);
    assert!(
        err.contains("trusted through host certificates (@cert-authority at"),
        "{err}"
    );
    assert!(!client.known_hosts().exists(), "nothing added");

    std::fs::write(&config, "Host *\n  ProxyCommand nc %h %p\n").unwrap();
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &sshd.target()));
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "{} line 2: ProxyCommand is not supported",
            config.display()
        )),
        "{err}"
    );
}
