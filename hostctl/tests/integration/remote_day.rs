//! deploy, run and fetch against a real local sshd, with the real agent sampling this machine
//! (the "board"): quoting, live output, Ctrl-C, a link cut mid-capture, cut and corrupt
//! downloads. Every capture goes to a per-test directory (`run -o`).

use crate::remote_support::{agent_binary, board, Client, Sshd};
use kprof_test_support::outcome;
use kprof_test_support::proxy::CuttingProxy;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Installs the agent to a per-test path with `deploy`, which remembers it for `run`.
pub(crate) fn deploy(sshd: &Sshd, client: &Client) -> PathBuf {
    deploy_via(sshd, client, &sshd.target())
}

/// [`deploy`] through `target` (a proxy or jump host in front of `sshd`).
pub(crate) fn deploy_via(sshd: &Sshd, client: &Client, target: &str) -> PathBuf {
    let dest = install_path(sshd);
    let (ok, out, err) = outcome(&mut deploy_cmd(
        client,
        &["deploy", target, "--accept-new-host-key"],
        &agent_binary(),
        &dest,
    ));
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("installed at {}", dest.display())),
        "{out}"
    );
    dest
}

/// The per-test path `deploy` installs the agent at.
pub(crate) fn install_path(sshd: &Sshd) -> PathBuf {
    sshd.dir.path().join("bin/kprof-agent")
}

/// `kprofctl ARGS -i KEY --agent AGENT --install-path DEST`.
pub(crate) fn deploy_cmd(client: &Client, args: &[&str], agent: &Path, dest: &Path) -> Command {
    let mut cmd = client.keyed(args);
    cmd.arg("--agent")
        .arg(agent)
        .arg("--install-path")
        .arg(dest);
    cmd
}

/// `kprofctl ARGS -i KEY -e cpu-clock -o CAPS -- sh -c SCRIPT`: a shell workload under `run`.
pub(crate) fn run_script(client: &Client, args: &[&str], caps: &str, script: &str) -> Command {
    let mut cmd = client.keyed(args);
    cmd.args(["-e", "cpu-clock", "-o", caps, "--", "sh", "-c", script]);
    cmd
}

/// `kprofctl fetch TARGET OPTIONS --no-report --capture-dir CAPS -i KEY`.
pub(crate) fn fetch_from(client: &Client, target: &str, options: &[&str], caps: &str) -> Command {
    let mut args = vec!["fetch", target];
    args.extend_from_slice(options);
    args.extend(["--no-report", "--capture-dir", caps]);
    client.keyed(&args)
}

/// The capture archive's manifest.json, as `tar` extracts it.
pub(crate) fn archived_manifest(capture: &Path) -> Vec<u8> {
    Command::new("tar")
        .arg("xzOf")
        .arg(capture)
        .arg("manifest.json")
        .output()
        .unwrap()
        .stdout
}

pub(crate) fn capture_dir(sshd: &Sshd) -> String {
    sshd.dir.path().join("captures").display().to_string()
}

/// Spawns kprofctl with stdout read line by line on a channel.
pub(crate) fn spawn_watched(cmd: &mut Command) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits for a stdout line containing `needle`, keeping every line seen.
pub(crate) fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            let hit = line.contains(needle);
            seen.push(line);
            if hit {
                return;
            }
        }
    }
    panic!("no `{needle}` on stdout; got:\n{}", seen.join("\n"));
}

/// The capture archive lists the agent's files.
pub(crate) fn assert_archive(path: &Path) {
    let out = Command::new("tar").arg("tzf").arg(path).output().unwrap();
    assert!(out.status.success(), "{} is not a tar.gz", path.display());
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains("perf.data") && list.contains("manifest.json"),
        "{list}"
    );
}

/// `deploy` checks the ELF machine against `uname -m`: an AArch64 agent is refused for this
/// x86_64 board and nothing is installed.
#[test]
fn deploy_agent_wrong_machine_refused() {
    let (sshd, client) = board();
    let fake = client.work.path().join("kprof-agent-aarch64");
    let mut bytes = std::fs::read(agent_binary()).unwrap();
    bytes[18..20].copy_from_slice(&183u16.to_le_bytes());
    std::fs::write(&fake, bytes).unwrap();
    let dest = install_path(&sshd);
    let (ok, _, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &sshd.target()],
        &fake,
        &dest,
    ));
    assert!(!ok);
    assert!(
        err.contains("cannot run on") && err.contains("AArch64") && err.contains("x86_64"),
        "{err}"
    );
    assert!(!dest.exists());
}

/// A board without the agent gets a message saying to run `kprofctl deploy`.
#[test]
fn run_agent_missing_says_deploy() {
    assert!(
        !Path::new("/usr/bin/kprof-agent").exists()
            && !Path::new("/run/kprof/kprof-agent").exists(),
        "this test needs a machine without an installed kprof-agent"
    );
    let (sshd, client) = board();
    let (ok, out, err) = outcome(client.keyed(&["run", &sshd.target()]).args(["--", "true"]));
    assert!(!ok);
    assert_eq!(out, "");
    assert!(
        err.contains("kprof-agent is not installed on the board")
            && err.contains(&format!("run `kprofctl deploy {}` first", sshd.target())),
        "{err}"
    );
}

/// `run` passes every argument verbatim, streams the workload's output, ends with the capture
/// path; `fetch` (target remembered) downloads it verified; a second `fetch` finds nothing new.
#[test]
fn run_fetch_local_board_verbatim_args() {
    let (sshd, client) = board();
    let agent = deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let (ok, out, err) = outcome(
        client
            .keyed(&["run", &sshd.target()])
            .args(["-e", "cpu-clock", "-F", "500", "-o", &caps, "--"])
            .args(["printf", "%s|", "it's", "$(id)", "a;b", "\"q\" `x`", "*"]),
    );
    assert!(ok, "{err}");
    // printf's output has no final newline: the agent's path follows it on the same line.
    let prefix = "it's|$(id)|a;b|\"q\" `x`|*|";
    assert!(out.starts_with(prefix), "{out}");
    let capture = out.trim_end()[prefix.len()..].to_owned();
    assert!(
        capture.starts_with(&caps) && capture.ends_with(".kprof.tar.gz"),
        "{out}"
    );
    assert!(
        err.contains(&format!("capture on {}: {capture}", sshd.target())),
        "{err}"
    );
    assert!(err.contains("kprof-agent 0.1.0"), "{err}");
    assert!(err.contains("perf_event_paranoid"), "{err}");
    let state = std::fs::read_to_string(client.work.path().join(".kprof/state.toml")).unwrap();
    assert!(
        state.contains(&agent.display().to_string()) && state.contains(&caps),
        "{state}"
    );

    let (ok, _, err) = outcome(&mut client.keyed(&["fetch", "--no-report"]));
    assert!(ok, "{err}");
    assert!(err.contains("sha256 verified"), "{err}");
    let name = Path::new(&capture).file_name().unwrap();
    let local = client.work.path().join("kprof-captures").join(name);
    assert_eq!(
        std::fs::read(&local).unwrap(),
        std::fs::read(&capture).unwrap()
    );
    assert_archive(&local);
    let (ok, _, err) = outcome(&mut client.keyed(&["fetch", "--no-report"]));
    assert!(ok && err.contains("nothing new"), "{err}");
}

/// Ctrl-C during a capture stops the agent on the board and keeps the capture.
#[test]
fn run_ctrl_c_stops_capture_keeps_it() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let start = Instant::now();
    let (child, rx) = spawn_watched(&mut run_script(
        &client,
        &["run", &sshd.target()],
        &caps,
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
    assert!(
        start.elapsed() < Duration::from_secs(50),
        "the workload was not stopped"
    );
    assert!(err.contains("stopping the capture"), "{err}");
    let capture = seen.last().cloned().unwrap_or_default();
    assert!(capture.ends_with(".kprof.tar.gz"), "{seen:?}\n{err}");
    assert!(err.contains(&format!(": {capture}")), "{err}");
    assert_archive(Path::new(&capture));
    let manifest: serde_json::Value =
        serde_json::from_slice(&archived_manifest(Path::new(&capture))).unwrap();
    assert_eq!(manifest["stop_reason"], "signal", "{manifest}");
}

/// A link cut mid-capture leaves the capture running on the board; a later `fetch` gets it
/// whole once it is done.
#[test]
fn run_link_cut_capture_completes_fetch_gets_it() {
    let (sshd, client) = board();
    let caps = capture_dir(&sshd);
    let proxy = CuttingProxy::start(sshd.port, None);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    deploy_via(&sshd, &client, &via);
    let (child, rx) = spawn_watched(&mut run_script(
        &client,
        &["run", &via, "--accept-new-host-key"],
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

    // The state remembers the proxy target and its capture dir; fetch the same board directly.
    let deadline = Instant::now() + Duration::from_secs(60);
    let fetched = loop {
        let (ok, _, err) = outcome(&mut fetch_from(&client, &sshd.target(), &[], &caps));
        assert!(ok, "{err}");
        let dir = client.work.path().join("kprof-captures");
        let files: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        if let Some(f) = files
            .into_iter()
            .find(|f| f.to_string_lossy().ends_with(".kprof.tar.gz"))
        {
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
    let manifest = String::from_utf8_lossy(&manifest);
    assert!(manifest.contains("command-exited"), "{manifest}");
}

/// A random "capture" file on the board, for the transfer tests.
pub(crate) fn big_capture(sshd: &Sshd, size: usize) -> (String, Vec<u8>) {
    let dir = sshd.dir.path().join("captures");
    std::fs::create_dir_all(&dir).unwrap();
    let mut data = vec![0u8; size];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(dir.join("big.kprof.tar.gz"), &data).unwrap();
    (dir.display().to_string(), data)
}

/// A download cut halfway keeps its part; the next `fetch` resumes from there and verifies.
#[test]
fn fetch_capture_cut_download_resumes() {
    let (sshd, client) = board();
    let (caps, data) = big_capture(&sshd, 8 << 20);
    let proxy = CuttingProxy::start(sshd.port, Some(3 << 20));
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let (ok, _, err) = outcome(&mut fetch_from(
        &client,
        &via,
        &["--accept-new-host-key"],
        &caps,
    ));
    assert!(!ok);
    assert!(
        err.contains("download of") && err.contains("again to resume"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let part = client
        .work
        .path()
        .join("kprof-captures/big.kprof.tar.gz.part");
    let cut_at = std::fs::metadata(&part).unwrap().len();
    assert!(cut_at > 0 && cut_at < data.len() as u64, "{cut_at}");
    // As an older kprofctl left it (0644 by umask): resuming makes it private again.
    std::fs::set_permissions(&part, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();

    let (ok, _, err) = outcome(&mut fetch_from(&client, &sshd.target(), &[], &caps));
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("resuming big at {cut_at} of {} bytes", data.len())),
        "{err}"
    );
    let got = std::fs::read(client.work.path().join("kprof-captures/big.kprof.tar.gz")).unwrap();
    assert!(got == data, "resumed download differs");
    assert!(!part.exists());
    let archive = client.work.path().join("kprof-captures/big.kprof.tar.gz");
    assert_eq!(
        mode(&archive),
        0o600,
        "a resumed 0644 part stays readable by others"
    );
}

/// A partial download that does not match the board's file fails the sha256 check, is
/// discarded, and the next `fetch` gets the file whole.
#[test]
fn fetch_capture_corrupt_partial_discarded() {
    let (sshd, client) = board();
    let (caps, data) = big_capture(&sshd, 1 << 20);
    let dir = client.work.path().join("kprof-captures");
    std::fs::create_dir_all(&dir).unwrap();
    let part = dir.join("big.kprof.tar.gz.part");
    std::fs::write(&part, vec![0u8; 1000]).unwrap();
    let fetch = || outcome(&mut fetch_from(&client, &sshd.target(), &[], &caps));
    let (ok, _, err) = fetch();
    assert!(!ok);
    assert!(
        err.contains("arrived corrupted") && err.contains("discarded"),
        "{err}"
    );
    assert!(!part.exists());
    let (ok, _, err) = fetch();
    assert!(ok, "{err}");
    assert!(std::fs::read(dir.join("big.kprof.tar.gz")).unwrap() == data);
}

/// `run --fetch` downloads the capture and reports it: top functions and the HTML file.
#[test]
fn run_fetch_flag_downloads_and_reports() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let (ok, out, err) = outcome(
        client
            .keyed(&["run", &sshd.target(), "--fetch"])
            .args([
                "-e",
                "cpu-clock",
                "-F",
                "999",
                "-o",
                &caps,
                "--",
                "sh",
                "-c",
            ])
            .arg("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"),
    );
    assert!(ok, "{err}");
    assert!(err.contains("sha256 verified"), "{err}");
    let html = out
        .lines()
        .find_map(|l| l.strip_prefix("HTML report: "))
        .unwrap_or_else(|| panic!("no HTML report line in:\n{out}"));
    assert!(
        html.contains("kprof-captures/") && html.ends_with(".kprof.tar.gz.html"),
        "{html}"
    );
    assert!(
        client.work.path().join(html).exists() || Path::new(html).exists(),
        "{html}"
    );
}

/// Runs `cmd` with umask 022, as a user's shell usually has it: kprofctl's files must not
/// depend on a strict umask to be private.
fn with_umask_022(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: umask is async-signal-safe and touches only the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        })
    }
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Waits until `dir` has a `*.part` file of more than `min` bytes and returns its path.
fn wait_for_part(dir: &Path, min: u64, child: &mut std::process::Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let part = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".part"));
        if let Some(p) = part.filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > min)) {
            return p;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("kprofctl ended ({status}) before a download was under way: {err}");
        }
        assert!(Instant::now() < deadline, "no download started in {dir:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C during a plain `fetch` stops the download: exit status 130, the `.part` (0600 under
/// umask 022) is kept, and the next `fetch` resumes it. A captures directory others can read
/// gets a warning.
#[test]
fn fetch_ctrl_c_keeps_part_exits_130() {
    let (sshd, client) = board();
    let (caps, data) = big_capture(&sshd, 4 << 20);
    let dest = client.work.path().join("kprof-captures");
    std::fs::create_dir(&dest).unwrap();
    std::fs::set_permissions(&dest, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let proxy = CuttingProxy::throttled(sshd.port, 256 << 10);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    let mut child = with_umask_022(&mut fetch_from(
        &client,
        &via,
        &["--accept-new-host-key"],
        &caps,
    ))
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let part = wait_for_part(&dest, 32 << 10, &mut child);
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{:?}: {err}", out.status);
    assert!(
        err.contains("interrupted") && err.contains("resumes"),
        "{err}"
    );
    assert!(err.contains("chmod 700"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let cut_at = std::fs::metadata(&part).unwrap().len();
    assert!(cut_at > 0 && cut_at < data.len() as u64, "{cut_at}");
    assert_eq!(mode(&part), 0o600);

    let (ok, _, err) = outcome(&mut fetch_from(&client, &sshd.target(), &[], &caps));
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("resuming big at {cut_at} of {} bytes", data.len())),
        "{err}"
    );
    let got = dest.join("big.kprof.tar.gz");
    assert!(
        std::fs::read(&got).unwrap() == data,
        "resumed download differs"
    );
    assert_eq!(mode(&got), 0o600);
}

/// Ctrl-C while `run --fetch` downloads the capture stops the download (it was swallowed by
/// the capture's handler): exit 130, the `.part` kept; files and the captures directory made
/// under umask 022 are 0600 and 0700; `fetch` resumes and its HTML report is 0600 too.
#[test]
fn run_fetch_ctrl_c_during_download_exits_130() {
    let (sshd, client) = board();
    let caps = capture_dir(&sshd);
    let proxy = CuttingProxy::throttled(sshd.port, 16 << 10);
    let via = format!("root@127.0.0.1:{}", proxy.port);
    // Only what the board sends is throttled: the upload is not slowed down.
    deploy_via(&sshd, &client, &via);
    let mut cmd = run_script(
        &client,
        &["run", &via, "--fetch"],
        &caps,
        "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
    );
    let mut child = with_umask_022(&mut cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dest = client.work.path().join("kprof-captures");
    let part = wait_for_part(&dest, 0, &mut child);
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{:?}: {err}", out.status);
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(part.exists(), "{err}");
    assert_eq!(mode(&part), 0o600);
    assert_eq!(mode(&dest), 0o700);

    let (ok, out, err) = outcome(with_umask_022(&mut client.keyed(&[
        "fetch",
        &sshd.target(),
        "--capture-dir",
        &caps,
    ])));
    assert!(ok, "{err}");
    assert!(err.contains("resuming"), "{err}");
    let html = out
        .lines()
        .find_map(|l| l.strip_prefix("HTML report: "))
        .unwrap_or_else(|| panic!("no HTML report line in:\n{out}"));
    let html = client.work.path().join(html);
    assert_eq!(mode(&html), 0o600);
    let capture = PathBuf::from(html.to_string_lossy().strip_suffix(".html").unwrap());
    assert_eq!(mode(&capture), 0o600);
    assert_archive(&capture);
}

/// A board whose agent answers `info` with terminal escapes in its version, a PMU name and an
/// event's refusal: `run` prints what it found with the control characters escaped, so a
/// compromised board cannot retitle or clear the user's terminal.
#[test]
fn run_board_info_escapes_printed_escaped() {
    let (sshd, client) = board();
    let dest = deploy(&sshd, &client);
    let real = Command::new(agent_binary()).arg("info").output().unwrap();
    let mut info: serde_json::Value = serde_json::from_slice(&real.stdout).unwrap();
    info["agent_version"] = "0.1.0\u{1b}]0;pwned\u{7}".into();
    info["pmus"]["evil\u{1b}[2J"] = 3.into();
    info["events"]["cpu-clock"] = "refused\u{9b}31m".into();
    let json = dest.with_file_name("info.json");
    std::fs::write(&json, info.to_string()).unwrap();
    std::fs::write(
        &dest,
        format!(
            "#!/bin/sh\ncase $1 in info) cat '{}';; --version) echo kprof-agent 0.1.0;; *) exit 1;; esac\n",
            json.display()
        ),
    )
    .unwrap();
    let caps = capture_dir(&sshd);
    let (_, _, err) = outcome(&mut run_script(
        &client,
        &["run", &sshd.target()],
        &caps,
        "true",
    ));
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{7}') && !err.contains('\u{9b}'),
        "a raw control character reached the terminal: {err:?}"
    );
    assert!(err.contains("kprof-agent 0.1.0\\x1b]0;pwned\\x07"), "{err}");
    assert!(err.contains("evil\\x1b[2J"), "{err}");
    assert!(err.contains("refused\\u{9b}31m"), "{err}");
}
