//! Boards in a lab (issue 23's "Must hold"): both QEMU boards up at once, exported by a real
//! labgrid coordinator and two exporters on 127.0.0.1 as places `x86` and `arm`; the `arm`
//! exporter is isolated, so its board is reached through a local OpenSSH sshd as the jump
//! host (the exporter's proxy host name points at it in `~/.ssh/config`).
//!
//! Environment: the x86_64 board as `ci/board/up` prints it (`KPROF_BOARD`,
//! `KPROF_BOARD_SYMBOLS`, `KPROF_BOARD_KEY`, `KPROF_BOARD_KNOWN_HOSTS`, see `board_day.rs`), the
//! aarch64 board the same way under `KPROF_BOARD_ARM*`. Run one at a time, both boards up:
//! `cargo test -p kprofctl --test board_lab -- --ignored --test-threads=1`. One test stops the
//! x86_64 board mid-run and boots it again on the same port (the variables stay valid).

use kprof_test_support::board::{report_json, Board};
use kprof_test_support::labgrid::{network_service_at, Lab};
use kprof_test_support::outcome;
use kprof_test_support::sshd::Sshd;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const KPROFCTL: &str = env!("CARGO_BIN_EXE_kprofctl");

/// The jump host: forwarding allowed (OpenSSH's default, said explicitly), and a log that
/// shows each forwarding.
const JUMP_CONFIG: &str = "AllowTcpForwarding yes\nLogLevel DEBUG1";

/// The two boards, the lab exporting them, and the jump host in front of the isolated one.
/// kprofctl runs with the x86 board's HOME (its known_hosts lists both boards and the jump
/// host; both boards take the same key) and working directory.
struct TwoBoards {
    x86: Board,
    arm: Board,
    jump: Sshd,
    lab: Lab,
}

/// The boards of the environment, checked to be what their variables say.
fn boards() -> (Board, Board) {
    let x86 = Board::from_env(KPROFCTL);
    let arm = Board::from_env_named(KPROFCTL, "KPROF_BOARD_ARM");
    assert_eq!(x86.ssh("uname -m").trim(), "x86_64", "KPROF_BOARD");
    assert_eq!(arm.ssh("uname -m").trim(), "aarch64", "KPROF_BOARD_ARM");
    (x86, arm)
}

/// A jump host letting the boards' key in as root, listed in `board`'s known_hosts.
fn jump_host(board: &Board) -> Sshd {
    let jump = Sshd::start(JUMP_CONFIG);
    jump.authorize(&board.key.with_extension("pub"));
    add_known(
        board,
        &format!("[127.0.0.1]:{} {}", jump.port, jump.host_pub()),
    );
    jump
}

/// Appends `lines` to `board`'s known_hosts.
fn add_known(board: &Board, lines: &str) {
    let path = board.home.path().join(".ssh/known_hosts");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(lines);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Must hold 1: the lab. `None` (said on stderr) when labgrid is not installed outside CI.
fn two_boards() -> Option<TwoBoards> {
    let (x86, arm) = boards();
    let mut lab = Lab::start()?;
    add_known(
        &x86,
        &std::fs::read_to_string(arm.home.path().join(".ssh/known_hosts")).unwrap(),
    );
    let jump = jump_host(&x86);
    lab.export(
        "lab-x86",
        &network_service_at(x86.port),
        false,
        "board/NetworkService",
    );
    lab.place("x86", "lab-x86/board/NetworkService");
    lab.export(
        "lab-arm",
        &network_service_at(arm.port),
        true,
        "board/NetworkService",
    );
    lab.place("arm", "lab-arm/board/NetworkService");
    // The isolated exporter publishes its host's name as the proxy: here the jump host.
    std::fs::write(
        x86.home.path().join(".ssh/config"),
        format!(
            "Host {}\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile {}\n",
            lab.proxy("arm"),
            jump.port,
            x86.key.display()
        ),
    )
    .unwrap();
    Some(TwoBoards {
        x86,
        arm,
        jump,
        lab,
    })
}

impl TwoBoards {
    /// `kprofctl ARGS -i KEY -x COORDINATOR`, as the lab's labgrid user.
    fn kprofctl(&self, args: &[&str]) -> Command {
        let mut cmd = self.x86.kprofctl();
        cmd.args(args).arg("-i").arg(&self.x86.key);
        self.lab.kprofctl(cmd)
    }

    /// `--symbols` of both boards' trees (each image is matched by build-id).
    fn symbols(&self) -> [&std::ffi::OsStr; 4] {
        [
            "--symbols".as_ref(),
            self.x86.symbols.as_os_str(),
            "--symbols".as_ref(),
            self.arm.symbols.as_os_str(),
        ]
    }

    /// A path kprofctl printed, relative to its working directory or absolute.
    fn local(&self, printed: &str) -> PathBuf {
        self.x86.work.path().join(printed)
    }
}

/// How many connections `jump` forwarded to 127.0.0.1:`port` so far.
fn forwards(jump: &Sshd, port: u16) -> usize {
    jump.log()
        .matches(&format!("target 127.0.0.1 port {port}"))
        .count()
}

/// The end-of-run summary line of `target`: what follows `kprofctl: TARGET: `.
fn summary<'a>(err: &'a str, target: &str) -> &'a str {
    let prefix = format!("kprofctl: {target}: ");
    err.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix(&prefix)
                .filter(|rest| rest.starts_with("ok: ") || rest.starts_with("FAILED: "))
        })
        .unwrap_or_else(|| panic!("no summary line for {target}:\n{err}"))
}

/// The local capture of an `ok:` summary line, which must exist.
fn fetched(boards: &TwoBoards, err: &str, target: &str) -> PathBuf {
    let line = summary(err, target);
    let path = line
        .strip_prefix("ok: ")
        .unwrap_or_else(|| panic!("{target} failed: {line}\n{err}"));
    let local = boards.local(path);
    assert!(
        path.ends_with(".kprof.tar.gz") && local.is_file(),
        "{target}: {} not fetched:\n{err}",
        local.display()
    );
    local
}

/// Must hold 1: both places answer `lg:` runs; the isolated one's board is reached through
/// the jump host (its log shows the forwarding to the arm board's port), the other directly
/// (no forwarding to the x86 board's port); each place is released afterwards.
#[test]
#[ignore = "needs both QEMU boards (ci/board/up, ci/board/up --arch aarch64)"]
fn run_labgrid_two_places_isolated_through_jump_host() {
    let Some(t) = two_boards() else {
        return;
    };
    for (place, machine) in [("x86", "x86_64"), ("arm", "aarch64")] {
        let (ok, out, err) = outcome(
            t.kprofctl(&["run", &format!("lg:{place}")])
                .args(["--", "uname", "-m"]),
        );
        assert!(ok, "lg:{place}: {err}");
        assert_eq!(out.lines().next(), Some(machine), "{out}\n{err}");
        assert!(err.contains(&format!("released place {place}")), "{err}");
        assert_eq!(t.lab.holder(place), None);
    }
    assert_eq!(forwards(&t.jump, t.x86.port), 0, "{}", t.jump.log());
    assert_eq!(forwards(&t.jump, t.arm.port), 1, "{}", t.jump.log());
}

/// A capture's time range on its board's clock (`start_time_ns`, `stop_time_ns` of its
/// manifest).
fn time_range(capture: &Path) -> (u64, u64) {
    let out = Command::new("tar")
        .arg("xzOf")
        .arg(capture)
        .arg("manifest.json")
        .output()
        .unwrap();
    assert!(out.status.success(), "no manifest in {}", capture.display());
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ns = |k: &str| m[k].as_u64().unwrap_or_else(|| panic!("no {k}: {m:#}"));
    (ns("start_time_ns"), ns("stop_time_ns"))
}

/// The mychardrv.ko function with the most samples in column `i` of `compare`'s JSON.
fn top_in_module(json: &serde_json::Value, i: usize) -> String {
    json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["image"] == "mychardrv.ko")
        .max_by_key(|f| f["captures"][i]["samples"].as_u64().unwrap_or(0))
        .and_then(|f| f["symbol"].as_str())
        .unwrap_or_else(|| panic!("no mychardrv.ko function in {json:#}"))
        .to_owned()
}

/// Sets `board`'s clock to the host's, within the ssh channel's latency: the manifests'
/// times are the boards' wall clocks, and the aarch64 board has no RTC driver (it boots in
/// 1970), where a lab's boards would run NTP. The host waits for the script to be ready,
/// then sends the next whole second as it starts (busybox `date -s` takes whole seconds).
fn sync_clock(board: &Board) {
    let mut child = board
        .ssh_command("echo ready; read t; date -u -s \"@$t\" >/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim_end(), "ready", "port {}", board.port);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    std::thread::sleep(Duration::from_secs(1) - Duration::from_nanos(now.subsec_nanos().into()));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", now.as_secs() + 1).unwrap();
    drop(stdin);
    assert!(
        child.wait().unwrap().success(),
        "date -s on port {}",
        board.port
    );
}

/// `compare X86 ARM --format json` with both trees.
fn compare_json(t: &TwoBoards, x86: &Path, arm: &Path) -> serde_json::Value {
    let (ok, out, err) = outcome(
        t.x86
            .kprofctl()
            .arg("compare")
            .arg(x86)
            .arg(arm)
            .args(t.symbols())
            .args(["--format", "json", "--limit", "0"]),
    );
    assert!(ok, "compare: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("compare JSON: {e}\n{out}"))
}

/// Must hold 2: `run lg:x86 lg:arm --fetch` of the mychardrv write runs on both boards at
/// once (the captures' time ranges overlap, the boards' clocks set from the host's) and
/// fetches both; `compare` puts
/// char_dev_cache_traverse on top of mychardrv.ko for each board, and each board's report
/// gives it a mychardrv.c line.
#[test]
#[ignore = "needs both QEMU boards (ci/board/up, ci/board/up --arch aarch64)"]
fn run_labgrid_two_boards_overlap_compare_top() {
    let Some(t) = two_boards() else {
        return;
    };
    sync_clock(&t.x86);
    sync_clock(&t.arm);
    // compare takes one event from every capture: the aarch64 board's default is `cycles`
    // (its PMU), the x86_64 board's `cpu-clock`; the software clock is on both.
    let (ok, _, err) = outcome(
        t.kprofctl(&["run", "lg:x86", "lg:arm", "--fetch", "-e", "cpu-clock"])
            .args(t.symbols())
            .arg("--")
            .args(t.x86.workload()),
    );
    assert!(ok, "{err}");
    assert_eq!(err.matches("sha256 verified").count(), 2, "{err}");
    let x86 = fetched(&t, &err, "lg:x86");
    let arm = fetched(&t, &err, "lg:arm");
    let (x_start, x_stop) = time_range(&x86);
    let (a_start, a_stop) = time_range(&arm);
    eprintln!("x86 {x_start}..{x_stop}, arm {a_start}..{a_stop} (ns)");
    assert!(
        x_start < a_stop && a_start < x_stop,
        "not at once: x86 {x_start}..{x_stop}, arm {a_start}..{a_stop} (ns)"
    );

    let json = compare_json(&t, &x86, &arm);
    for (i, (arch, capture, symbols)) in [
        ("x86_64", &x86, &t.x86.symbols),
        ("aarch64", &arm, &t.arm.symbols),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(json["captures"][i]["arch"], arch, "{json:#}");
        assert_eq!(top_in_module(&json, i), "char_dev_cache_traverse", "{arch}");
        let report = report_json(&t.x86, capture, symbols, &["--image", "mychardrv.ko"]);
        let top = &report["functions"][0];
        assert_eq!(top["symbol"], "char_dev_cache_traverse", "{arch}: {top}");
        let file = top["source"]["file"].as_str().unwrap_or_default();
        assert!(file.ends_with("mychardrv.c"), "{arch}: {top}");
        assert!(
            top["source"]["line"].as_u64().unwrap_or(0) > 0,
            "{arch}: {top}"
        );
    }
}

/// `~/.ssh/config` naming the x86 board `x86board`, reached via `ProxyJump kprofjump` (the
/// jump host, its own block).
fn proxyjump_config(board: &Board, jump: &Sshd) {
    std::fs::write(
        board.home.path().join(".ssh/config"),
        format!(
            "Host x86board\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile {key}\n  \
             ProxyJump kprofjump\nHost kprofjump\n  HostName 127.0.0.1\n  Port {}\n  User root\n  \
             IdentityFile {key}\n",
            board.port,
            jump.port,
            key = board.key.display(),
        ),
    )
    .unwrap();
}

/// `run x86board -- true` with `known_hosts` as given: (success, stderr).
fn run_alias(board: &Board, known_hosts: &str) -> (bool, String) {
    std::fs::write(board.home.path().join(".ssh/known_hosts"), known_hosts).unwrap();
    let (ok, _, err) = outcome(board.kprofctl().args(["run", "x86board", "--", "true"]));
    (ok, err)
}

/// Must hold 3: `ProxyJump` through the local sshd in `~/.ssh/config` reaches the x86 board;
/// with the jump host's key unknown, then changed, the run is refused naming the jump host,
/// and nothing is forwarded to the board.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn run_ssh_config_proxyjump_reaches_board_jump_key_checked() {
    let board = Board::from_env(KPROFCTL);
    let jump = jump_host(&board);
    proxyjump_config(&board, &jump);
    let known = std::fs::read_to_string(board.home.path().join(".ssh/known_hosts")).unwrap();
    let (ok, err) = run_alias(&board, &known);
    assert!(ok, "{err}");
    assert_eq!(forwards(&jump, board.port), 1, "{}", jump.log());

    let board_only: String = known
        .lines()
        .filter(|l| !l.starts_with(&format!("[127.0.0.1]:{} ", jump.port)))
        .map(|l| format!("{l}\n"))
        .collect();
    let (ok, err) = run_alias(&board, &board_only);
    assert!(!ok);
    assert!(
        err.contains("jump host 1 of 1 (`kprofjump`) failed") && err.contains("host key not known"),
        "{err}"
    );
    assert!(err.contains(&jump.host_fingerprint()), "{err}");

    // Another server's key listed for the jump host's address: changed, as for a board.
    let other = Sshd::start("");
    let changed = format!("{board_only}[127.0.0.1]:{} {}", jump.port, other.host_pub());
    let (ok, err) = run_alias(&board, &changed);
    assert!(!ok);
    assert!(
        err.contains("jump host 1 of 1 (`kprofjump`) failed") && err.contains("HOST KEY CHANGED"),
        "{err}"
    );
    assert_eq!(forwards(&jump, board.port), 1, "{}", jump.log());
}

/// Brings the x86_64 board back on its port when dropped (a test that stopped it, even a
/// failing one), so that the environment stays valid for the tests after it.
struct BoardBack<'a> {
    board: &'a Board,
    agent: tempfile::TempDir,
}

impl<'a> BoardBack<'a> {
    /// Keeps a copy of the board's agent: `up` rebuilds the agent with cargo unless given
    /// one, and cargo's lock on target/ is held while the tests run.
    fn new(board: &'a Board) -> BoardBack<'a> {
        let agent = tempfile::tempdir().unwrap();
        std::fs::copy(
            board.symbols.join("kprof-agent"),
            agent.path().join("kprof-agent"),
        )
        .expect("kprof-agent in KPROF_BOARD_SYMBOLS");
        BoardBack { board, agent }
    }
}

/// `ci/board/SCRIPT --arch x86_64` with `envs`; whether it succeeded (its output on stderr).
fn board_script(script: &str, envs: &[(&str, &Path)]) -> bool {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ci/board")
        .join(script);
    Command::new(&path)
        .args(["--arch", "x86_64"])
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .success()
}

impl Drop for BoardBack<'_> {
    fn drop(&mut self) {
        let port = self.board.port.to_string();
        let agent = self.agent.path().join("kprof-agent");
        let up = board_script(
            "up",
            &[
                ("KPROF_BOARD_PORT", Path::new(&port)),
                ("KPROF_BOARD_AGENT", &agent),
            ],
        );
        if !up {
            eprintln!("ci/board/up --arch x86_64 failed: the tests after this one lack the board");
        }
    }
}

/// Reads `out` until every one of `targets` printed `TARGET: started`, then the rest of it in
/// the background (the handle gives it); `None` when it ended first.
fn wait_started(
    out: impl std::io::Read + Send + 'static,
    targets: &[&str],
) -> Option<std::thread::JoinHandle<String>> {
    let mut lines = BufReader::new(out).lines();
    let mut waiting: Vec<String> = targets.iter().map(|t| format!("{t}: started")).collect();
    while !waiting.is_empty() {
        match lines.next() {
            Some(Ok(line)) => waiting.retain(|w| line.trim_end() != w),
            _ => return None,
        }
    }
    Some(std::thread::spawn(move || {
        lines.map_while(Result::ok).collect::<Vec<_>>().join("\n")
    }))
}

/// Must hold 4: the x86 board is stopped (QEMU killed) while both boards capture: the arm
/// capture is still fetched and reported, the exit status is 1, and the summary names lg:x86
/// and the lost connection.
#[test]
#[ignore = "needs both QEMU boards (ci/board/up, ci/board/up --arch aarch64)"]
fn run_labgrid_x86_stopped_mid_run_arm_fetched() {
    let Some(t) = two_boards() else {
        return;
    };
    let back = BoardBack::new(&t.x86);
    let workload = format!("echo started; sleep 40; {}", t.arm.workload()[2]);
    let mut child = t
        .kprofctl(&["run", "lg:x86", "lg:arm", "--fetch"])
        .args(t.symbols())
        .args(["--", "sh", "-c", &workload])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let rest = wait_started(child.stdout.take().unwrap(), &["lg:x86", "lg:arm"]);
    let stopped = rest.is_some() && board_script("down", &[]);
    let status = child.wait().unwrap();
    let err = err_reader.join().unwrap();
    let out = rest
        .unwrap_or_else(|| panic!("the workload did not start on both boards:\n{err}"))
        .join()
        .unwrap();
    assert!(stopped, "ci/board/down --arch x86_64 failed");

    assert_eq!(status.code(), Some(1), "{err}");
    let x86 = summary(&err, "lg:x86");
    assert!(
        x86.starts_with("FAILED: ") && x86.contains("connection lost"),
        "{x86}\n{err}"
    );
    let arm = fetched(&t, &err, "lg:arm");
    assert!(
        err.contains("kprofctl: 1 of 2 boards failed: lg:x86"),
        "{err}"
    );
    // kprofctl's own report of the arm capture, then the same from the fetched file.
    assert!(out.contains("char_dev_cache_traverse"), "{out}\n{err}");
    let report = report_json(&t.x86, &arm, &t.arm.symbols, &["--image", "mychardrv.ko"]);
    assert_eq!(
        report["functions"][0]["symbol"], "char_dev_cache_traverse",
        "{report:#}"
    );
    drop(back);
    assert_eq!(t.x86.ssh("uname -m").trim(), "x86_64", "the board is back");
}

/// `run TARGETS -o DIR/captures -- sh -c 'mkdir -p DIR; touch DIR/ran'`: (success, stdout,
/// stderr).
fn run_marking(t: &TwoBoards, targets: &[&str], dir: &str) -> (bool, String, String) {
    let mut args = vec!["run"];
    args.extend(targets);
    let captures = format!("{dir}/captures");
    args.extend(["-o", &captures]);
    let script = format!("mkdir -p {dir}; touch {dir}/ran");
    outcome(t.kprofctl(&args).args(["--", "sh", "-c", &script]))
}

/// Whether `dir` exists on `board`.
fn exists_on(board: &Board, dir: &str) -> bool {
    board
        .ssh(&format!("[ -e {dir} ] && echo there || echo absent"))
        .trim()
        == "there"
}

/// Must hold 5: place `x86` held by another labgrid user: `run lg:x86` is an error naming the
/// place and its holder, and nothing is started on the board (no capture directory, no
/// workload side effect); the place stays theirs. With both places, the arm board's capture
/// is taken and the summary names lg:x86 and its holder.
#[test]
#[ignore = "needs both QEMU boards (ci/board/up, ci/board/up --arch aarch64)"]
fn run_labgrid_place_of_other_user_nothing_started() {
    let Some(t) = two_boards() else {
        return;
    };
    t.lab.place_cmd("kprof-other", "x86", &["acquire"]);
    let holder = t.lab.holder("x86").unwrap();
    assert!(holder.ends_with("/kprof-other"), "{holder}");
    let dir = format!("/tmp/kprof-lab-held-{}", std::process::id());
    let (ok, out, err) = run_marking(&t, &["lg:x86"], &dir);
    assert!(!ok);
    assert_eq!(out, "");
    let refused = format!("place x86 is acquired by {holder}");
    assert!(err.contains(&format!("lg:x86: {refused}")), "{err}");
    assert!(err.contains("nothing was run"), "{err}");
    assert!(!exists_on(&t.x86, &dir));

    let (ok, _, err) = run_marking(&t, &["lg:x86", "lg:arm"], &dir);
    t.arm.ssh(&format!("rm -rf {dir}"));
    assert!(!ok);
    let x86 = summary(&err, "lg:x86");
    assert!(
        x86.starts_with("FAILED: ") && x86.contains(&refused),
        "{err}"
    );
    assert!(summary(&err, "lg:arm").starts_with("ok: "), "{err}");
    assert!(
        err.contains("kprofctl: 1 of 2 boards failed: lg:x86"),
        "{err}"
    );
    assert!(!exists_on(&t.x86, &dir));
    assert_eq!(t.lab.holder("x86"), Some(holder));
    t.lab.place_cmd("kprof-other", "x86", &["release"]);
}
