//! `run TARGET TARGET... -- CMD` against real local sshds (each a "board" sampling this machine
//! with the real agent): both captures taken and fetched, every output line behind its board's
//! name; an unreachable board and a link cut mid-capture fail only their own board, named in
//! the summary and the exit status.

use crate::remote_day::{capture_dir, deploy_via, spawn_watched, wait_for};
use crate::remote_support::{free_port, Client, Sshd};
use kprof_test_support::outcome;
use kprof_test_support::proxy::CuttingProxy;
use std::path::PathBuf;
use std::process::Command;

/// Two sshds that let one client in as root, both host keys trusted.
fn two_boards() -> (Sshd, Sshd, Client) {
    let client = Client::new();
    let boards = [Sshd::start(""), Sshd::start("")];
    for sshd in &boards {
        sshd.authorize(&client.pubkey());
        client.trust(sshd, sshd.port);
    }
    let [a, b] = boards;
    (a, b, client)
}

/// `run TARGETS --fetch -i KEY -e cpu-clock -o CAPS -- sh -c SCRIPT`.
fn run_many(client: &Client, targets: &[&str], caps: &str, script: &str) -> Command {
    let mut cmd = client.keyed(&["run"]);
    cmd.args(targets).args([
        "--fetch",
        "-e",
        "cpu-clock",
        "-o",
        caps,
        "--",
        "sh",
        "-c",
        script,
    ]);
    cmd
}

/// The local capture of `target`'s `ok:` summary line (relative to kprofctl's directory).
fn fetched_of(client: &Client, err: &str, target: &str) -> PathBuf {
    let prefix = format!("kprofctl: {target}: ok: ");
    let path = err
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line: {err}"));
    let path = client.work.path().join(path);
    assert!(path.is_file(), "{} missing", path.display());
    path
}

/// Both boards capture and their captures are fetched as two files; every workload line
/// comes behind its board's name, the summary has one `ok` line per board and a `compare`
/// command line, and the first board named is the one `fetch` asks next.
#[test]
fn run_many_two_boards_fetched_labelled() {
    let (a, b, client) = two_boards();
    let (ta, tb) = (a.target(), b.target());
    deploy_via(&a, &client, &ta);
    deploy_via(&b, &client, &tb);
    let caps = capture_dir(&a);
    let (ok, out, err) = outcome(&mut run_many(
        &client,
        &[&ta, &tb],
        &caps,
        "echo hello from; echo the board >&2",
    ));
    assert!(ok, "{err}");
    for t in [&ta, &tb] {
        assert!(out.contains(&format!("{t}: hello from\n")), "{out}");
        assert!(err.contains(&format!("{t}: the board\n")), "{err}");
    }
    let (fa, fb) = (
        fetched_of(&client, &err, &ta),
        fetched_of(&client, &err, &tb),
    );
    assert_ne!(fa, fb);
    assert!(
        fa.starts_with(client.work.path().join("kprof-captures")),
        "{}",
        fa.display()
    );
    assert!(!err.contains("boards failed"), "{err}");
    // `fetch` without a target asks the first board named.
    let state = std::fs::read_to_string(client.work.path().join(".kprof/state.toml")).unwrap();
    assert!(
        state.contains(&format!("last_target = \"{ta}\"")),
        "{state}"
    );
    let compare = format!(
        "kprofctl compare {} {}",
        rel(&client, &fa),
        rel(&client, &fb)
    );
    assert!(err.contains(&compare), "{err}");
}

/// `path` as kprofctl printed it: relative to its directory.
fn rel(client: &Client, path: &std::path::Path) -> String {
    path.strip_prefix(client.work.path())
        .unwrap()
        .display()
        .to_string()
}

/// A board nobody answers for fails alone: the other's capture is fetched, the summary names
/// the failed board and why, and the exit status is 1.
#[test]
fn run_many_unreachable_board_others_kept() {
    let (a, _b, client) = two_boards();
    let ta = a.target();
    deploy_via(&a, &client, &ta);
    let dead = format!("root@127.0.0.1:{}", free_port());
    let caps = capture_dir(&a);
    let mut cmd = run_many(&client, &[&dead, &ta], &caps, "true");
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    fetched_of(&client, &err, &ta);
    let failed = format!("kprofctl: {dead}: FAILED: ");
    let line = err
        .lines()
        .find(|l| l.starts_with(&failed))
        .unwrap_or_else(|| panic!("no `{failed}` line: {err}"));
    assert!(line.contains("connect"), "{line}");
    assert!(
        err.contains(&format!("1 of 2 boards failed: {dead}")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// The link to one board is cut mid-capture: the other board's capture is fetched, the cut
/// board is named as failed with the lost connection, and the exit status is 1.
#[test]
fn run_many_link_cut_one_board_other_fetched() {
    let (a, b, client) = two_boards();
    let ta = a.target();
    let proxy = CuttingProxy::start(b.port, None);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    deploy_via(&a, &client, &ta);
    deploy_via(&b, &client, &via);
    let caps = capture_dir(&a);
    let (child, rx) = spawn_watched(&mut run_many(
        &client,
        &[&ta, &via],
        &caps,
        "echo workload-started; sleep 3",
    ));
    let mut seen = Vec::new();
    wait_for(&rx, &format!("{via}: workload-started"), &mut seen);
    proxy.cut();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    fetched_of(&client, &err, &ta);
    let failed = format!("kprofctl: {via}: FAILED: ");
    let line = err
        .lines()
        .find(|l| l.starts_with(&failed))
        .unwrap_or_else(|| panic!("no `{failed}` line: {err}"));
    assert!(
        line.contains("connection lost during the capture"),
        "{line}"
    );
    assert!(
        err.contains(&format!("1 of 2 boards failed: {via}")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
