//! Reaching the board through jump hosts (`-J`, `ProxyJump`): a second real OpenSSH sshd is
//! the jump host, logging at DEBUG1 so that each test can tell from its log that the
//! connection went through it (sshd logs every `direct-tcpip` forwarding with its target).

use crate::remote_day::{
    archived_manifest, assert_archive, big_capture, capture_dir, deploy_cmd, fetch_from,
    install_path, run_script, spawn_watched, wait_for,
};
use crate::remote_support::{agent_binary, board, Client, Sshd};
use kprof_test_support::outcome;
use kprof_test_support::proxy::CuttingProxy;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The message `fetch TARGET nope` gives once logged in to the board.
const LOGGED_IN: &str = "no capture `nope`";

/// The jump host's config: forwarding allowed (OpenSSH's default, said explicitly), and
/// logged so that the forwardings show.
const JUMP_CONFIG: &str = "AllowTcpForwarding yes\nLogLevel DEBUG1";

/// A board and a jump host, both letting the client's key in as root, both host keys trusted.
fn lab() -> (Sshd, Sshd, Client) {
    let (board, client) = board();
    let jump = untrusted_jump(&client);
    client.trust(&jump, jump.port);
    (board, jump, client)
}

/// A jump host letting the client's key in, its host key not trusted by the client.
fn untrusted_jump(client: &Client) -> Sshd {
    let jump = Sshd::start(JUMP_CONFIG);
    jump.authorize(&client.pubkey());
    jump
}

/// Whether the jump host forwarded a connection to 127.0.0.1:`port`.
fn forwarded_to(jump: &Sshd, port: u16) -> bool {
    jump.log()
        .contains(&format!("target 127.0.0.1 port {port}"))
}

/// `kprofctl fetch TARGET nope --no-report --capture-dir /nonexistent ARGS`: logs in and
/// fails after, or fails logging in.
fn fetch_nope(client: &Client, target: &str, args: &[&str]) -> Command {
    let mut cmd = client.kprofctl();
    cmd.args(["fetch", target, "nope", "--no-report", "--capture-dir"])
        .arg("/nonexistent")
        .args(args);
    cmd
}

/// [`fetch_nope`] logging in with the client's key file (on every hop).
fn fetch_nope_keyed(client: &Client, target: &str, args: &[&str]) -> Command {
    let mut cmd = fetch_nope(client, target, args);
    cmd.arg("-i").arg(&client.key);
    cmd
}

/// `-J` goes through the jump host (its log shows the forwarding, a direct login does not),
/// two hops chain (the second over the first's channel), and a stopped jump host is an
/// error naming that hop.
#[test]
fn connect_jump_flag_traverses_jump_host() {
    let (board, jump, client) = lab();
    let j = jump.target();
    let (_, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &[]));
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(!forwarded_to(&jump, board.port), "{}", jump.log());

    let (_, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &["-J", &j]));
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(forwarded_to(&jump, board.port), "{}", jump.log());

    let two = format!("{j},{j}");
    let (_, _, err) = outcome(&mut fetch_nope_keyed(
        &client,
        &board.target(),
        &["-J", &two],
    ));
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(forwarded_to(&jump, jump.port), "{}", jump.log());

    drop(jump);
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &["-J", &j]));
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "{}: jump host 1 of 1 (`{j}`) failed: {j}: cannot connect",
            board.target()
        )),
        "{err}"
    );
    assert!(
        !err.contains(LOGGED_IN) && !err.contains("panicked"),
        "{err}"
    );
}

/// `deploy`, `run` and `fetch` all work through `-J`: the agent upload, the live output and
/// the download cross the jump host's channel intact.
#[test]
fn run_fetch_jump_flag_deploy_capture_download() {
    let (board, jump, client) = lab();
    let j = jump.target();
    let dest = install_path(&board);
    let (ok, out, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &board.target(), "-J", &j],
        &agent_binary(),
        &dest,
    ));
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("installed at {}", dest.display())),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        std::fs::read(agent_binary()).unwrap()
    );
    let caps = capture_dir(&board);
    let (ok, out, err) = outcome(&mut run_script(
        &client,
        &["run", &board.target(), "-J", &j],
        &caps,
        "echo through-the-jump",
    ));
    assert!(ok, "{err}");
    assert!(out.starts_with("through-the-jump\n"), "{out}");
    let capture = out.lines().last().unwrap().to_owned();
    assert!(capture.ends_with(".kprof.tar.gz"), "{out}");

    let (ok, _, err) = outcome(&mut fetch_from(
        &client,
        &board.target(),
        &["-J", &j],
        &caps,
    ));
    assert!(ok, "{err}");
    assert!(err.contains("sha256 verified"), "{err}");
    let local = client
        .work
        .path()
        .join("kprof-captures")
        .join(Path::new(&capture).file_name().unwrap());
    assert_eq!(
        std::fs::read(&local).unwrap(),
        std::fs::read(&capture).unwrap()
    );
    assert_archive(&local);
    assert!(forwarded_to(&jump, board.port), "{}", jump.log());
}

/// Writes `~/.ssh/config` naming the board `board`, reached via `ProxyJump gw`, and the jump
/// host `gw`; the key comes from the config's `IdentityFile` for both.
fn proxyjump_config(client: &Client, board: &Sshd, jump: &Sshd) {
    std::fs::write(
        client.home.path().join(".ssh/config"),
        format!(
            "Host board\n  HostName 127.0.0.1\n  Port {}\n  User root\n  ProxyJump gw\n\
             Host gw\n  HostName 127.0.0.1\n  Port {}\n  User root\n\
             Host *\n  IdentityFile ~/board_key\n",
            board.port, jump.port
        ),
    )
    .unwrap();
}

/// `ProxyJump` in `~/.ssh/config`, the hop resolved through the config too (HostName, Port,
/// User, IdentityFile): `deploy`, `run` and `fetch` of the alias go through the jump host.
#[test]
fn run_fetch_proxyjump_config_alias() {
    let (board, jump, client) = lab();
    proxyjump_config(&client, &board, &jump);
    let dest = install_path(&board);
    let (ok, out, err) = outcome(
        client
            .kprofctl()
            .args(["deploy", "board", "--agent"])
            .arg(agent_binary())
            .arg("--install-path")
            .arg(&dest),
    );
    assert!(ok, "{err}");
    assert!(out.contains("installed at"), "{out}");
    assert!(forwarded_to(&jump, board.port), "{}", jump.log());
    let caps = capture_dir(&board);
    let (ok, out, err) = outcome(
        client
            .kprofctl()
            .args(["run", "board", "-e", "cpu-clock", "-o", &caps, "--"])
            .args(["echo", "via-proxyjump"]),
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("via-proxyjump\n"), "{out}");
    let (ok, _, err) =
        outcome(
            client
                .kprofctl()
                .args(["fetch", "board", "--no-report", "--capture-dir", &caps]),
        );
    assert!(ok, "{err}");
    assert!(err.contains("sha256 verified"), "{err}");
    // A jump host the config does not make reachable: -J overrides the config's ProxyJump.
    let nowhere = format!("root@127.0.0.1:{}", crate::remote_support::free_port());
    let (ok, _, err) = outcome(&mut fetch_nope(&client, "board", &["-J", &nowhere]));
    assert!(!ok);
    assert!(
        err.contains(&format!("jump host 1 of 1 (`{nowhere}`) failed")),
        "{err}"
    );
}

/// Host keys are checked on every hop: an unknown jump host is refused naming the hop, with
/// nothing forwarded and nothing written; a trusted jump host in front of an unknown board
/// is refused for the board; `--accept-new-host-key` adds both.
#[test]
fn connect_jump_unknown_host_key_refused_each_hop() {
    let (board, client) = crate::remote_support::untrusted_board();
    let jump = untrusted_jump(&client);
    let j = jump.target();
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &["-J", &j]));
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "jump host 1 of 1 (`{j}`) failed: {j}: host key not known"
        )),
        "{err}"
    );
    assert!(err.contains(&jump.host_fingerprint()), "{err}");
    assert!(err.contains("--accept-new-host-key"), "{err}");
    assert!(!forwarded_to(&jump, board.port), "{}", jump.log());
    assert!(!client.known_hosts().exists());

    client.trust(&jump, jump.port);
    let before = std::fs::read_to_string(client.known_hosts()).unwrap();
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &["-J", &j]));
    assert!(!ok);
    assert!(
        err.contains(&format!("{}: host key not known", board.target())),
        "{err}"
    );
    assert!(err.contains(&board.host_fingerprint()), "{err}");
    assert!(!err.contains("jump host 1 of 1"), "{err}");
    assert_eq!(
        std::fs::read_to_string(client.known_hosts()).unwrap(),
        before
    );

    std::fs::remove_file(client.known_hosts()).unwrap();
    let (_, _, err) = outcome(
        fetch_nope_keyed(&client, &board.target(), &["-J", &j]).arg("--accept-new-host-key"),
    );
    assert!(err.contains(LOGGED_IN), "{err}");
    let known = std::fs::read_to_string(client.known_hosts()).unwrap();
    for port in [jump.port, board.port] {
        assert!(known.contains(&format!("[127.0.0.1]:{port} ")), "{known}");
    }
}

/// A jump host presenting another key than known_hosts lists is refused as changed even with
/// `--accept-new-host-key`, naming the hop; nothing is forwarded and known_hosts is kept.
#[test]
fn connect_jump_changed_host_key_refused_with_accept_new() {
    let (board, client) = board();
    let jump = untrusted_jump(&client);
    let other = Sshd::start("");
    client.trust(&other, jump.port);
    let before = std::fs::read_to_string(client.known_hosts()).unwrap();
    let j = jump.target();
    let (ok, _, err) = outcome(
        fetch_nope_keyed(&client, &board.target(), &["-J", &j]).arg("--accept-new-host-key"),
    );
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "jump host 1 of 1 (`{j}`) failed: {j}: HOST KEY CHANGED"
        )),
        "{err}"
    );
    assert!(err.contains(&jump.host_fingerprint()), "{err}");
    assert!(!forwarded_to(&jump, board.port), "{}", jump.log());
    assert_eq!(
        std::fs::read_to_string(client.known_hosts()).unwrap(),
        before
    );
}

/// `ProxyJump none` in a host's block wins over a later wildcard's `ProxyJump` (first value
/// obtained wins, as in OpenSSH), and `-J none` turns the config's jump off; a host only the
/// wildcard matches does use the wildcard's (unreachable) jump host, which the wildcard
/// excludes (`Host * !deadgw`) so that it is not its own jump host.
#[test]
fn connect_proxyjump_none_overrides_wildcard() {
    let (board, client) = board();
    let dead_port = crate::remote_support::free_port();
    let dead = format!("root@127.0.0.1:{dead_port}");
    std::fs::write(
        client.home.path().join(".ssh/config"),
        format!(
            "Host lan\n  HostName 127.0.0.1\n  Port {}\n  User root\n  ProxyJump none\n\
             Host * !deadgw\n  ProxyJump deadgw\n\
             Host deadgw\n  HostName 127.0.0.1\n  Port {dead_port}\n  User root\n",
            board.port
        ),
    )
    .unwrap();
    let (_, _, err) = outcome(&mut fetch_nope_keyed(&client, "lan", &[]));
    assert!(err.contains(LOGGED_IN), "{err}");
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &[]));
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "jump host 1 of 1 (`deadgw`) failed: {dead}: cannot connect"
        )),
        "{err}"
    );
    let (_, _, err) = outcome(&mut fetch_nope_keyed(
        &client,
        &board.target(),
        &["-J", "none"],
    ));
    assert!(err.contains(LOGGED_IN), "{err}");
}

/// The link to the jump host cut mid-capture: `run` ends with the same "connection lost"
/// error as a direct link cut (no hang, no panic), the capture completes on the board, and a
/// later `fetch` through the jump host gets it whole.
#[test]
fn run_jump_link_cut_capture_completes_fetch_gets_it() {
    let (board, jump, client) = lab();
    let j = jump.target();
    let dest = install_path(&board);
    let (ok, _, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &board.target(), "-J", &j],
        &agent_binary(),
        &dest,
    ));
    assert!(ok, "{err}");
    let caps = capture_dir(&board);
    let proxy = CuttingProxy::start(jump.port, None);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let (child, rx) = spawn_watched(&mut run_script(
        &client,
        &["run", &board.target(), "-J", &via, "--accept-new-host-key"],
        &caps,
        "echo workload-started; sleep 3",
    ));
    let mut seen = Vec::new();
    wait_for(&rx, "workload-started", &mut seen);
    proxy.cut();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("connection lost during the capture"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let deadline = Instant::now() + Duration::from_secs(60);
    let fetched = loop {
        let (ok, _, err) = outcome(&mut fetch_from(
            &client,
            &board.target(),
            &["-J", &j],
            &caps,
        ));
        assert!(ok, "{err}");
        let found = std::fs::read_dir(client.work.path().join("kprof-captures"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|f| f.to_string_lossy().ends_with(".kprof.tar.gz"));
        if let Some(f) = found {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "the capture never appeared: {err}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_archive(&fetched);
    let manifest = archived_manifest(&fetched);
    assert!(
        String::from_utf8_lossy(&manifest).contains("command-exited"),
        "{}",
        String::from_utf8_lossy(&manifest)
    );
}

/// A jump host whose sshd refuses forwarding is an error naming the hop, where it was asked
/// to forward to and the sshd setting that allows it.
#[test]
fn connect_jump_forwarding_refused_names_hop() {
    let (board, client) = board();
    let jump = Sshd::start("AllowTcpForwarding no");
    jump.authorize(&client.pubkey());
    client.trust(&jump, jump.port);
    let j = jump.target();
    let (ok, _, err) = outcome(&mut fetch_nope_keyed(&client, &board.target(), &["-J", &j]));
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "jump host 1 of 1 (`{j}`) failed: {j}: the jump host did not forward to \
             127.0.0.1:{}",
            board.port
        )),
        "{err}"
    );
    assert!(err.contains("AllowTcpForwarding"), "{err}");
    assert!(!err.contains(LOGGED_IN), "{err}");
}

/// A download cut on the link to the jump host keeps its part; the next `fetch` through the
/// jump host resumes from there and verifies the whole file.
#[test]
fn fetch_jump_cut_download_resumes() {
    let (board, jump, client) = lab();
    let (caps, data) = big_capture(&board, 8 << 20);
    let proxy = CuttingProxy::start(jump.port, Some(3 << 20));
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let (ok, _, err) = outcome(&mut fetch_from(
        &client,
        &board.target(),
        &["-J", &via, "--accept-new-host-key"],
        &caps,
    ));
    assert!(!ok);
    assert!(
        err.contains("download of") && err.contains("again to resume"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let dir = client.work.path().join("kprof-captures");
    let cut_at = std::fs::metadata(dir.join("big.kprof.tar.gz.part"))
        .unwrap()
        .len();
    assert!(cut_at > 0 && cut_at < data.len() as u64, "{cut_at}");

    let j = jump.target();
    let (ok, _, err) = outcome(&mut fetch_from(
        &client,
        &board.target(),
        &["-J", &j],
        &caps,
    ));
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("resuming big at {cut_at} of {} bytes", data.len())),
        "{err}"
    );
    assert!(std::fs::read(dir.join("big.kprof.tar.gz")).unwrap() == data);
}

/// Ctrl-C during a capture through a jump host stops the agent on the board and keeps the
/// capture, as on a direct link.
#[test]
fn run_jump_ctrl_c_stops_capture_keeps_it() {
    let (board, jump, client) = lab();
    let j = jump.target();
    let (ok, _, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &board.target(), "-J", &j],
        &agent_binary(),
        &install_path(&board),
    ));
    assert!(ok, "{err}");
    let (child, rx) = spawn_watched(&mut run_script(
        &client,
        &["run", &board.target(), "-J", &j],
        &capture_dir(&board),
        "echo workload-started; sleep 60",
    ));
    let mut seen = Vec::new();
    wait_for(&rx, "workload-started", &mut seen);
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    seen.extend(rx.try_iter());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("stopping the capture"), "{err}");
    let capture = seen.last().cloned().unwrap_or_default();
    assert!(capture.ends_with(".kprof.tar.gz"), "{seen:?}\n{err}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&archived_manifest(Path::new(&capture))).unwrap();
    assert_eq!(manifest["stop_reason"], "signal", "{manifest}");
    assert!(forwarded_to(&jump, board.port), "{}", jump.log());
}

/// Issue 36, item 7: `$KPROF_PASSWORD` is the board's and is never offered to a jump host
/// (before: every hop got it). The jump host here refuses the client's key, so the only
/// password attempts it sees are kprofctl's: the empty password, and nothing else.
#[test]
fn connect_jump_password_env_not_sent_to_jump_host() {
    let (board, client) = board();
    let jump = Sshd::start(JUMP_CONFIG);
    client.trust(&jump, jump.port);
    let j = jump.target();
    let mut cmd = fetch_nope_keyed(&client, &board.target(), &["-J", &j]);
    cmd.env("KPROF_PASSWORD", "the-boards-password")
        .stdin(std::process::Stdio::null());
    let (ok, _, err) = outcome(&mut cmd);
    assert!(!ok);
    assert!(
        err.contains("$KPROF_PASSWORD is the board's: it is never sent to a jump host"),
        "{err}"
    );
    let log = jump.log();
    // sshd logs each password request at DEBUG1; the empty one fails as "Failed none".
    let attempts = log.matches("method password").count();
    assert_eq!(attempts, 1, "only the empty password: {log}");
}
