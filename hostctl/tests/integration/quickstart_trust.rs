//! ci/quickstart's known_hosts step (`ci/board/trust`) run twice with a board restart in
//! between, against a real sshd that keeps its host key and comes back on another port, as the
//! virtual board does after `ci/board/down` + `ci/board/up`. The full quickstart (kernel and
//! rootfs build, QEMU boot) is too heavy to run twice in CI; this is the step that broke.

use crate::remote_day::{deploy_cmd, install_path};
use crate::remote_support::{agent_binary, untrusted_board, Client, Sshd};
use kprof_test_support::outcome;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the board's known_hosts file as ci/board/up's `report` does for this boot's port.
fn board_known_hosts(sshd: &Sshd, client: &Client) -> PathBuf {
    let file = client.work.path().join("board-known_hosts");
    std::fs::write(
        &file,
        format!("[127.0.0.1]:{} {}", sshd.port, sshd.host_pub()),
    )
    .unwrap();
    file
}

/// `ci/board/trust FILE` with the client's HOME.
fn trust(client: &Client, board_file: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/board/trust");
    let (ok, _, err) = outcome(
        Command::new(script)
            .arg(board_file)
            .env("HOME", client.home.path())
            .env_remove("KPROF_USER_KNOWN_HOSTS"),
    );
    assert!(ok, "ci/board/trust failed: {err}");
}

/// `kprofctl deploy` as ci/quickstart runs it: no `--accept-new-host-key`.
fn deploy(sshd: &Sshd, client: &Client) {
    let (ok, _, err) = outcome(&mut deploy_cmd(
        client,
        &["deploy", &sshd.target()],
        &agent_binary(),
        &install_path(sshd),
    ));
    assert!(ok, "deploy to {} failed: {err}", sshd.target());
}

/// The trust step then `deploy`, three times, the board restarted on a new port with the same
/// host key in between (the last time with a stale key listed for the new port by some earlier
/// board): every deploy finds the key; a repeated trust adds nothing.
#[test]
fn trust_known_hosts_board_restarted_new_port() {
    let (mut sshd, client) = untrusted_board();
    trust(&client, &board_known_hosts(&sshd, &client));
    deploy(&sshd, &client);

    // ci/test stopped the board; the next quickstart boots it on another port.
    sshd.restart_on_new_port();
    trust(&client, &board_known_hosts(&sshd, &client));
    deploy(&sshd, &client);

    sshd.restart_on_new_port();
    // A board rebuilt with another key once answered on this port.
    let stale = std::fs::read_to_string(client.pubkey()).unwrap();
    let mut listed = std::fs::read_to_string(client.known_hosts()).unwrap();
    listed.push_str(&format!("[127.0.0.1]:{} {stale}", sshd.port));
    std::fs::write(client.known_hosts(), listed).unwrap();
    let board_file = board_known_hosts(&sshd, &client);
    trust(&client, &board_file);
    deploy(&sshd, &client);

    let before = std::fs::read_to_string(client.known_hosts()).unwrap();
    trust(&client, &board_file);
    assert_eq!(
        std::fs::read_to_string(client.known_hosts()).unwrap(),
        before
    );
    let host = format!("[127.0.0.1]:{} ", sshd.port);
    let entries: Vec<&str> = before.lines().filter(|l| l.starts_with(&host)).collect();
    assert_eq!(entries.len(), 1, "{before}");
    assert!(
        sshd.host_pub().starts_with(&entries[0][host.len()..]),
        "{before}"
    );
}
