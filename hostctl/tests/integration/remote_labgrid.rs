//! `lg:PLACE` targets against a real labgrid (PyPI's, pinned in ci/pip-packages.txt): a
//! `labgrid-coordinator` and `labgrid-exporter`s on 127.0.0.1 export the local sshd (the
//! "board") as a place's `NetworkService`. Skipped with a message only when labgrid is not
//! installed and `CI` is unset.

use crate::remote_support::{agent_binary, board, free_port, Client, Sshd};
use kprof_test_support::labgrid::{
    labgrid_bin, network_service_at, path_with, wait_until, Lab, USER,
};
use kprof_test_support::outcome;
use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};

/// The message `fetch TARGET nope` gives once logged in.
const LOGGED_IN: &str = "no capture `nope`";

/// `kprofctl ARGS -i KEY -x COORDINATOR` as labgrid user [`USER`].
fn kprofctl(lab: &Lab, client: &Client, args: &[&str]) -> Command {
    lab.kprofctl(client.keyed(args))
}

/// An exporter config with the sshd as `board/NetworkService`.
fn network_service(sshd: &Sshd) -> String {
    network_service_at(sshd.port)
}

/// A lab with `sshd` exported by `exp1` as place `kx86`; `None` when skipped.
fn lab_with_board(sshd: &Sshd) -> Option<Lab> {
    let mut lab = Lab::start()?;
    lab.export(
        "exp1",
        &network_service(sshd),
        false,
        "board/NetworkService",
    );
    lab.place("kx86", "exp1/board/NetworkService");
    Some(lab)
}

/// `deploy lg:kx86` with the agent into the sshd's directory; returns kprofctl's stderr.
fn deploy(lab: &Lab, client: &Client, sshd: &Sshd) -> String {
    deploy_to(lab, client, sshd, "lg:kx86")
}

/// `deploy TARGET` of the agent into the board's own directory; its stderr.
fn deploy_to(lab: &Lab, client: &Client, sshd: &Sshd, target: &str) -> String {
    let dest = sshd.dir.path().join("bin/kprof-agent");
    let mut deploy = kprofctl(lab, client, &["deploy", target]);
    deploy
        .arg("--agent")
        .arg(agent_binary())
        .arg("--install-path")
        .arg(&dest);
    let (ok, out, err) = outcome(&mut deploy);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("installed at {}", dest.display())),
        "{out}"
    );
    err
}

/// The capture directory of the tests' runs (`run -o`).
fn captures(sshd: &Sshd) -> String {
    sshd.dir.path().join("captures").display().to_string()
}

/// `deploy lg:PLACE` installs the agent and `run lg:PLACE -- true` captures on the place's
/// board, each acquiring the free place and releasing it after; `fetch lg:PLACE` downloads the
/// capture, remembered under that name.
#[test]
fn run_labgrid_free_place_acquired_and_released() {
    let (sshd, client) = board();
    let Some(lab) = lab_with_board(&sshd) else {
        return;
    };
    let err = deploy(&lab, &client, &sshd);
    assert!(err.contains("lg:kx86: place kx86 (acquired)"), "{err}");
    assert!(err.contains("released place kx86"), "{err}");
    assert_eq!(lab.holder("kx86"), None);

    let caps = captures(&sshd);
    let (ok, out, err) = outcome(kprofctl(&lab, &client, &["run", "lg:kx86"]).args([
        "-e",
        "cpu-clock",
        "-o",
        &caps,
        "--",
        "true",
    ]));
    assert!(ok, "{err}");
    assert!(out.trim_end().ends_with(".kprof.tar.gz"), "{out}");
    assert!(
        err.contains(&format!(
            "exp1/board/NetworkService/NetworkService: root@127.0.0.1:{}",
            sshd.port
        )),
        "{err}"
    );
    assert!(err.contains("released place kx86"), "{err}");
    assert_eq!(lab.holder("kx86"), None);

    let (ok, _, err) = outcome(&mut kprofctl(
        &lab,
        &client,
        &["fetch", "lg:kx86", "--no-report", "--capture-dir", &caps],
    ));
    assert!(ok, "{err}");
    assert!(err.contains("sha256 verified"), "{err}");
    assert_eq!(lab.holder("kx86"), None);
}

/// Ctrl-C during a capture on `lg:PLACE` stops it as on any board; the place is released.
#[test]
fn run_labgrid_ctrl_c_releases_place() {
    let (sshd, client) = board();
    let Some(lab) = lab_with_board(&sshd) else {
        return;
    };
    deploy(&lab, &client, &sshd);
    let caps = captures(&sshd);
    let mut child = kprofctl(&lab, &client, &["run", "lg:kx86"])
        .args(["-e", "cpu-clock", "-o", &caps, "--", "sh", "-c"])
        .arg("echo workload-started; sleep 60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("workload-started") {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
    }
    assert!(line.contains("workload-started"), "kprofctl ended early");
    assert_eq!(lab.holder("kx86").map(|h| h.ends_with(USER)), Some(true));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("stopping the capture"), "{err}");
    assert!(err.contains("released place kx86"), "{err}");
    assert_eq!(lab.holder("kx86"), None);
}

/// Ctrl-C while kprofctl waits for the board (a port that accepts and never speaks ssh): the
/// place is released before kprofctl exits with 130.
#[test]
fn run_labgrid_ctrl_c_before_capture_releases_place() {
    let client = Client::new();
    let Some(mut lab) = Lab::start() else {
        return;
    };
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    lab.export(
        "exp1",
        &network_service_at(port),
        false,
        "board/NetworkService",
    );
    lab.place("kx86", "exp1/board/NetworkService");
    let mut child = kprofctl(&lab, &client, &["run", "lg:kx86"])
        .args(["--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    silent.set_nonblocking(true).unwrap();
    // Kept open (and silent) so that kprofctl waits in the ssh handshake.
    let mut conn = None;
    let connected = wait_until(
        || {
            if let Ok((c, _)) = silent.accept() {
                conn = Some(c);
            }
            conn.is_some()
        },
        &mut child,
    );
    assert!(connected, "kprofctl never connected to the board");
    assert_eq!(lab.holder("kx86").map(|h| h.ends_with(USER)), Some(true));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(err.contains("released place kx86"), "{err}");
    assert_eq!(lab.holder("kx86"), None);
}

/// A place this user acquired beforehand is used and left acquired.
#[test]
fn fetch_labgrid_own_place_left_acquired() {
    let (sshd, client) = board();
    let Some(lab) = lab_with_board(&sshd) else {
        return;
    };
    lab.place_cmd(USER, "kx86", &["acquire"]);
    let held = lab.holder("kx86").unwrap();
    assert!(held.ends_with(&format!("/{USER}")), "{held}");
    let (ok, _, err) = outcome(&mut kprofctl(
        &lab,
        &client,
        &[
            "fetch",
            "lg:kx86",
            "nope",
            "--no-report",
            "--capture-dir",
            "/nonexistent",
        ],
    ));
    assert!(!ok);
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(
        err.contains("place kx86 (already acquired by you)"),
        "{err}"
    );
    assert!(!err.contains("released"), "{err}");
    assert_eq!(lab.holder("kx86"), Some(held));
}

/// A place another labgrid user holds: an error naming the place and its holder, exit
/// non-zero, no login on the board's sshd; once they release it the same command logs in.
#[test]
fn run_labgrid_other_users_place_refused() {
    let sshd = Sshd::start("LogLevel VERBOSE");
    let client = Client::new();
    sshd.authorize(&client.pubkey());
    client.trust(&sshd, sshd.port);
    let Some(lab) = lab_with_board(&sshd) else {
        return;
    };
    lab.place_cmd("kprof-other", "kx86", &["acquire"]);
    let holder = lab.holder("kx86").unwrap();
    assert!(holder.ends_with("/kprof-other"), "{holder}");
    let (ok, out, err) = outcome(kprofctl(&lab, &client, &["run", "lg:kx86"]).args(["--", "true"]));
    assert!(!ok);
    assert_eq!(out, "");
    assert!(
        err.contains(&format!("lg:kx86: place kx86 is acquired by {holder}")),
        "{err}"
    );
    assert!(err.contains("nothing was run"), "{err}");
    let sshd_log = || std::fs::read_to_string(sshd.dir.path().join("sshd.log")).unwrap();
    assert!(!sshd_log().contains("Accepted"), "{}", sshd_log());
    assert_eq!(lab.holder("kx86"), Some(holder));

    lab.place_cmd("kprof-other", "kx86", &["release"]);
    let (_, _, err) = outcome(&mut kprofctl(
        &lab,
        &client,
        &[
            "fetch",
            "lg:kx86",
            "nope",
            "--no-report",
            "--capture-dir",
            "/nonexistent",
        ],
    ));
    assert!(err.contains(LOGGED_IN), "{err}");
    assert!(
        sshd_log().contains("Accepted publickey for root"),
        "{}",
        sshd_log()
    );
    assert_eq!(lab.holder("kx86"), None);
}

/// A place whose only resource is a serial port: an error saying it has no NetworkService;
/// the place is released.
#[test]
fn run_labgrid_no_network_service_refused() {
    let client = Client::new();
    let Some(mut lab) = Lab::start() else {
        return;
    };
    let yaml = "console:\n  SerialPort:\n    port: /dev/ttyS0\n";
    lab.export("exp1", yaml, false, "console/SerialPort");
    lab.place("kserial", "exp1/console/SerialPort");
    let (ok, _, err) =
        outcome(kprofctl(&lab, &client, &["run", "lg:kserial"]).args(["--", "true"]));
    assert!(!ok);
    assert!(err.contains("place kserial has no NetworkService"), "{err}");
    assert!(err.contains("exp1/console/SerialPort/SerialPort"), "{err}");
    assert!(err.contains("released place kserial"), "{err}");
    assert_eq!(lab.holder("kserial"), None);
}

/// A board behind an isolated exporter is reached through the exporter host as the jump host
/// (here a second real sshd, named by the exporter's proxy host name in `~/.ssh/config`):
/// its log shows the forwarding to the board; the place is released afterwards.
#[test]
fn run_labgrid_isolated_exporter_through_jump_host() {
    let (sshd, client) = board();
    let Some(mut lab) = Lab::start() else {
        return;
    };
    lab.export(
        "exp2",
        &network_service(&sshd),
        true,
        "board/NetworkService",
    );
    lab.place("kiso", "exp2/board/NetworkService");
    // The exporter publishes its host's FQDN as the proxy.
    let proxy = lab.proxy("kiso");
    let jump = Sshd::start("AllowTcpForwarding yes\nLogLevel DEBUG1");
    jump.authorize(&client.pubkey());
    client.trust(&jump, jump.port);
    std::fs::write(
        client.home.path().join(".ssh/config"),
        format!(
            "Host {proxy}\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile {}\n",
            jump.port,
            client.key.display()
        ),
    )
    .unwrap();
    deploy_to(&lab, &client, &sshd, "lg:kiso");
    let caps = captures(&sshd);
    let (ok, _, err) = outcome(kprofctl(&lab, &client, &["run", "lg:kiso"]).args([
        "-e",
        "cpu-clock",
        "-o",
        &caps,
        "--",
        "true",
    ]));
    assert!(
        jump.log()
            .contains(&format!("target 127.0.0.1 port {}", sshd.port)),
        "the exporter host did not forward to the board: {err}"
    );
    assert!(err.contains("released place kiso"), "{err}");
    assert_eq!(lab.holder("kiso"), None);
    assert!(ok, "{err}");
}

/// Without labgrid-client an lg: target says how to install it or where to point kprofctl.
#[test]
fn run_labgrid_client_missing_says_install() {
    let client = Client::new();
    let (ok, _, err) = outcome(
        client
            .keyed(&["run", "lg:kx86"])
            .args(["--", "true"])
            .env("PATH", "/nonexistent")
            .env_remove("KPROF_LABGRID_CLIENT"),
    );
    assert!(!ok);
    assert!(
        err.contains("lg:kx86: labgrid-client is not on PATH"),
        "{err}"
    );
    assert!(
        err.contains("pip install labgrid") && err.contains("KPROF_LABGRID_CLIENT"),
        "{err}"
    );
    let (ok, _, err) = outcome(
        client
            .keyed(&["run", "lg:kx86"])
            .args(["--", "true"])
            .env("KPROF_LABGRID_CLIENT", "/nonexistent/labgrid-client"),
    );
    assert!(!ok);
    assert!(
        err.contains("$KPROF_LABGRID_CLIENT is /nonexistent/labgrid-client"),
        "{err}"
    );
}

/// A coordinator that does not answer: an error naming it and where it came from; nothing
/// else is tried.
#[test]
fn run_labgrid_coordinator_down_named() {
    let Some(bin) = labgrid_bin() else {
        return;
    };
    let client = Client::new();
    let down = format!("127.0.0.1:{}", free_port());
    let (ok, _, err) = outcome(
        client
            .keyed(&["run", "lg:kx86", "-x", &down])
            .args(["--", "true"])
            .env("PATH", path_with(&bin)),
    );
    assert!(!ok);
    assert!(err.contains(&format!("coordinator {down} (-x)")), "{err}");
    assert!(err.contains("Could not connect to coordinator"), "{err}");
    let (ok, _, err) = outcome(
        client
            .keyed(&["run", "lg:kx86"])
            .args(["--", "true"])
            .env("LG_COORDINATOR", &down)
            .env("PATH", path_with(&bin)),
    );
    assert!(!ok);
    assert!(
        err.contains(&format!("coordinator {down} ($LG_COORDINATOR)")),
        "{err}"
    );
}
