//! Issue 20 item 1 against the QEMU board (`ci/board/up`): another local user of the board
//! plants what the old kprofctl used in `/tmp` (the run directory and its files, a pid file, an
//! agent, the deploy staging file) and root neither writes through it, nor signals it, nor
//! runs it.
//!
//! Environment as in board_day.rs. Each test creates the unprivileged user `kprofevil`, plants
//! as that user, and removes the user and everything planted when it ends, also on failure.
//! `cargo test -p kprofctl --test board_hardening -- --ignored --test-threads=1`.

use kprof_test_support::board::{find_file, Board};
use kprof_test_support::outcome;
use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "kprofevil";
const UID: u32 = 4343;
/// Created only if something of the attacker's runs as root.
const MARKER: &str = "/root/kprof-hardening-ran-as-root";
/// Root's copy of /etc/shadow, put back if a test (of a broken kprofctl) changed it.
const SHADOW_BACKUP: &str = "/root/kprof-hardening-shadow";
const WATCHER_PID: &str = "/root/kprof-hardening-watcher.pid";
const RO_MOUNT: &str = "/root/kprof-hardening-ro";

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The attacker on the board and what it planted; all removed on drop.
struct Attacker<'a> {
    board: &'a Board,
    shadow_sum: String,
    victim: Option<u32>,
    had_run_kprof: bool,
    /// Captures the test's runs wrote on the board.
    captures: std::cell::RefCell<Vec<String>>,
    /// The kprofctl the attacker goes after: its old-style run directories are removed.
    kprofctl_pid: std::cell::RefCell<Option<u32>>,
}

impl<'a> Attacker<'a> {
    /// Adds the user `kprofevil` and notes /etc/shadow's sha256 (backing it up for the drop).
    fn new(board: &'a Board) -> Attacker<'a> {
        board.ssh(&format!(
            "grep -q '^{USER}:' /etc/passwd || echo '{USER}:x:{UID}:{UID}::/tmp:/bin/sh' >> /etc/passwd; \
             cp -p /etc/shadow {SHADOW_BACKUP}; rm -f {MARKER}"
        ));
        Attacker {
            board,
            shadow_sum: board.ssh("sha256sum /etc/shadow"),
            victim: None,
            had_run_kprof: board.ssh("[ -e /run/kprof ] && echo yes; true").trim() == "yes",
            captures: Default::default(),
            kprofctl_pid: Default::default(),
        }
    }

    fn shadow_sum(&self) -> String {
        self.board.ssh("sha256sum /etc/shadow")
    }

    /// Notes the capture path that ends `out` (a run's stdout), if any, for removal.
    fn took(&self, out: &str) {
        let last = out.lines().last().unwrap_or_default().trim();
        if last.starts_with("/var/lib/kprof/captures/") && last.ends_with(".kprof.tar.gz") {
            self.captures.borrow_mut().push(last.to_owned());
        }
    }

    /// `script` as the unprivileged user.
    fn run(&self, script: &str) -> String {
        self.board
            .ssh(&format!("su {USER} -s /bin/sh -c {}", quote(script)))
    }

    /// A root process the attacker would like root to kill (a background job of a
    /// non-interactive shell, SIGINT ignored, as the agent's own is).
    fn start_victim(&mut self) -> u32 {
        let pid: u32 = self
            .board
            .ssh("sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
            .trim()
            .parse()
            .unwrap();
        self.victim = Some(pid);
        pid
    }

    fn victim_alive(&self) -> bool {
        let pid = self.victim.unwrap();
        self.board
            .ssh(&format!(
                "[ \"$(cat /proc/{pid}/cmdline 2>/dev/null | tr '\\0' ' ')\" = 'sleep 600 ' ] && echo alive; true"
            ))
            .trim()
            == "alive"
    }

    /// The old kprofctl's paths, planted: `/tmp/kprof-run-root` mode 777 (the parent of old
    /// run directories; left as it is when an old kprofctl made it first, root's and 0700, as
    /// on a board shared with other kprofctl runs), an agent that marks having run as root at
    /// `/tmp/kprof-agent`, and the deploy staging file `/tmp/kprof-agent.kprof-new` as a
    /// symlink to /etc/shadow.
    fn plant_static(&self) {
        self.run(&format!(
            "[ -e /tmp/kprof-run-root ] || {{ mkdir /tmp/kprof-run-root && chmod 777 /tmp/kprof-run-root; }}; \
             printf '#!/bin/sh\\ntouch {MARKER}\\necho 0.1.0\\n' > /tmp/kprof-agent && \
             chmod 755 /tmp/kprof-agent && ln -s /etc/shadow /tmp/kprof-agent.kprof-new"
        ));
    }

    /// Old run directory names `SECS-PID` for kprofctl's pid and the next `secs` seconds, each
    /// with `out`, `err` and `pid` planted.
    fn plant_ids(&self, kprofctl_pid: u32, secs: u64, pid: u32) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        self.run(&format!(
            "[ -w /tmp/kprof-run-root ] || exit 0; \
             for s in $(seq {} {}); do d=/tmp/kprof-run-root/$s-{kprofctl_pid}; mkdir -p $d; \
             ln -sf /etc/shadow $d/out; ln -sf /etc/shadow $d/err; echo {pid} > $d/pid; done",
            now - 1,
            now + secs
        ));
    }

    /// A loop of the attacker's that takes over every run directory kprofctl (`kprofctl_pid`)
    /// makes under /tmp that it can rename (the old `/tmp/kprof-run-root/SECS-PID`, the new
    /// `/tmp/kprof-run.*`), putting in its place one whose files lead to /etc/shadow and whose
    /// pid file holds `pid`, and plants the same into any such directory it can write. Other
    /// kprofctl runs on the shared board are left alone.
    fn start_watcher(&self, kprofctl_pid: u32, pid: u32) {
        let plant = format!(
            "for f in out err .chunk status.tmp; do ln -sf /etc/shadow \"$d/$f\" 2>/dev/null; done; \
             echo {pid} > \"$d/pid\" 2>/dev/null"
        );
        let script = format!(
            "while :; do for d in /tmp/kprof-run-root/*-{kprofctl_pid} /tmp/kprof-run.*; do \
               [ -d \"$d\" ] && [ ! -L \"$d\" ] || continue; \
               if [ \"$(stat -c %u \"$d\")\" != {UID} ]; then \
                 mv \"$d\" \"$d.taken\" 2>/dev/null && mkdir \"$d\" && chmod 777 \"$d\"; \
               fi; {plant}; \
             done; usleep 20000 2>/dev/null || sleep 1; done"
        );
        let pid = self.run(&format!(
            "setsid sh -c {} </dev/null >/dev/null 2>&1 & echo $!",
            quote(&script)
        ));
        let pid = pid.trim();
        let up = self.board.ssh(&format!(
            "echo {pid} > {WATCHER_PID}; sleep 1; [ -d /proc/{pid} ] && echo up; true"
        ));
        assert_eq!(up.trim(), "up", "the attacker's loop did not start");
        *self.kprofctl_pid.borrow_mut() = Some(kprofctl_pid);
    }

    /// /etc/shadow is byte-identical and nothing of the attacker's ran as root (`log`: what
    /// kprofctl said).
    fn assert_untouched(&self, log: &str) {
        assert_eq!(
            self.shadow_sum(),
            self.shadow_sum,
            "/etc/shadow changed; kprofctl said:\n{log}"
        );
        let ran = self
            .board
            .ssh(&format!("[ -e {MARKER} ] && echo ran; true"));
        assert_eq!(ran.trim(), "", "the planted agent ran as root:\n{log}");
    }
}

impl Drop for Attacker<'_> {
    fn drop(&mut self) {
        let victim = self.victim.map_or(String::new(), |p| {
            format!("[ \"$(cat /proc/{p}/cmdline 2>/dev/null | tr '\\0' ' ')\" = 'sleep 600 ' ] && kill {p}; ")
        });
        let run_kprof = if self.had_run_kprof {
            String::new()
        } else {
            "rm -rf /run/kprof; ".to_owned()
        };
        let captures = self.captures.borrow().join(" ");
        // Only this test's kprofctl's old-style directories: other runs may share the board.
        let mine = self
            .kprofctl_pid
            .borrow()
            .map_or("/nonexistent".to_owned(), |p| {
                format!("/tmp/kprof-run-root/*-{p}")
            });
        // A broken kprofctl leaves its agent writing through the planted files: it and its
        // wrapper go (they are this test's) before /etc/shadow is put back. The attacker's
        // /tmp/kprof-run-root goes, or becomes root's 0700 if other runs put theirs in it.
        self.board.ssh(&format!(
            "[ -s {WATCHER_PID} ] && kill $(cat {WATCHER_PID}) 2>/dev/null; rm -f {WATCHER_PID}; \
             for p in $(ls /proc | grep '^[0-9]*$'); do \
               for m in {mine} {mine}.taken; do \
                 [ \"$(readlink /proc/$p/cwd 2>/dev/null)\" = \"$m\" ] && kill -9 $p; \
               done; \
               [ \"$(stat -c %u /proc/$p 2>/dev/null)\" = {UID} ] && kill -9 $p; \
             done; sleep 1; rm -f {captures}; \
             cmp -s {SHADOW_BACKUP} /etc/shadow || cat {SHADOW_BACKUP} > /etc/shadow; rm -f {SHADOW_BACKUP}; \
             {victim}{run_kprof}\
             grep -q ' {RO_MOUNT} ' /proc/mounts && umount {RO_MOUNT}; rmdir {RO_MOUNT} 2>/dev/null; \
             rm -rf {mine} {mine}.taken; \
             if [ \"$(stat -c %u /tmp/kprof-run-root 2>/dev/null)\" = {UID} ]; then \
               rmdir /tmp/kprof-run-root 2>/dev/null || {{ chown 0:0 /tmp/kprof-run-root; chmod 700 /tmp/kprof-run-root; }}; \
             fi; \
             for f in /tmp/kprof-agent /tmp/kprof-agent.kprof-new; do \
               [ \"$(stat -c %u \"$f\" 2>/dev/null)\" = {UID} ] && rm -f \"$f\"; \
             done; rm -f {MARKER}; \
             for d in /tmp/kprof-run.*; do [ \"$(stat -c %u \"$d\" 2>/dev/null)\" = {UID} ] && rm -rf \"$d\"; done; \
             sed -i '/^{USER}:/d' /etc/passwd; true"
        ));
    }
}

/// Waits for `child` up to `limit` (killing it then); (exited ok, stdout, stderr).
fn wait_for(mut child: Child, limit: Duration) -> (bool, String, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.is_some(),
        "kprofctl did not finish in {limit:?}:\n{err}"
    );
    (status.unwrap().success(), out, err)
}

/// `run` with `workload`, its stdout and stderr piped.
fn spawn_run(board: &Board, workload: &[&str]) -> Child {
    board
        .on_board("run")
        .arg("--symbols")
        .arg(&board.symbols)
        .arg("--")
        .args(workload)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Remembers `/tmp/kprof-agent` as this board's agent, as the old `deploy` did on a read-only
/// root file system.
fn remember_tmp_agent(board: &Board) {
    let dir = board.work.path().join(".kprof");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("state.toml"),
        format!(
            "last_target = \"{t}\"\n[targets.\"{t}\"]\nagent = \"/tmp/kprof-agent\"\n",
            t = board.target
        ),
    )
    .unwrap();
}

/// A user who planted the old run directory (`/tmp/kprof-run-root` mode 777 with `ID/out`,
/// `ID/err` -> /etc/shadow for kprofctl's IDs), takes over run directories as they appear,
/// and planted `/tmp/kprof-agent` (remembered as the agent): `run` skips that agent with a
/// warning naming it, captures with the installed one, /etc/shadow stays byte-identical and
/// nothing planted runs as root.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn run_board_planted_tmp_paths_shadow_untouched() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let attacker = Attacker::new(&board);
    attacker.plant_static();
    remember_tmp_agent(&board);
    // Run dirs of earlier tests (a link-cut run leaves its own for inspection) are not ours.
    let earlier = board.ssh("ls -d /tmp/kprof-run.* 2>/dev/null; true");

    let child = spawn_run(&board, &["sh", "-c", "sleep 3; echo workload done"]);
    // A pid that is not running: the old tail loop ends instead of waiting for ever.
    attacker.start_watcher(child.id(), 999_999);
    attacker.plant_ids(child.id(), 30, 999_999);
    let (ok, out, err) = wait_for(child, Duration::from_secs(180));
    attacker.took(&out);
    attacker.assert_untouched(&err);
    assert!(ok, "run failed:\n{err}");
    assert!(
        err.contains(&format!(
            "warning: {}: not running kprof-agent from /tmp/kprof-agent: /tmp/kprof-agent is \
             owned by uid {UID}, not by root or the login user (uid 0)",
            board.target
        )),
        "{err}"
    );
    assert!(out.contains("workload done"), "{out}");
    assert!(out.trim_end().ends_with(".kprof.tar.gz"), "{out}");
    // The run directory is gone, nothing of root's was taken over.
    let left = board.ssh("ls -d /tmp/kprof-run.* /tmp/kprof-run-root/*.taken 2>/dev/null; true");
    let left: Vec<&str> = left
        .lines()
        .filter(|l| !earlier.lines().any(|e| e == *l))
        .collect();
    assert!(left.is_empty(), "left on the board: {left:?}");
}

/// A user who swaps a pid file naming a root process into every run directory it can reach:
/// Ctrl-C during `run` stops the agent (the capture is written) and the victim lives.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn stop_board_planted_pid_victim_alive() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let mut attacker = Attacker::new(&board);
    attacker.plant_static();
    let victim = attacker.start_victim();

    let child = spawn_run(&board, &["sleep", "60"]);
    attacker.start_watcher(child.id(), victim);
    attacker.plant_ids(child.id(), 30, victim);
    // Ctrl-C once the agent runs (its run directory exists and the workload sleeps).
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let seen = board.ssh(
            "for p in $(pidof sleep); do [ \"$(cat /proc/$p/cmdline | tr '\\0' ' ')\" = 'sleep 60 ' ] && echo $p; done; true",
        );
        if !seen.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(1));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (ok, out, err) = wait_for(child, Duration::from_secs(120));
    attacker.took(&out);
    assert!(
        attacker.victim_alive(),
        "root killed the planted pid:\n{err}"
    );
    attacker.assert_untouched(&err);
    assert!(ok, "run failed:\n{err}");
    assert!(err.contains("stopping the capture"), "{err}");
    assert!(out.trim_end().ends_with(".kprof.tar.gz"), "{out}");
}

/// `deploy` to a read-only install path falls back to /run/kprof/kprof-agent (a 0700
/// directory of root's), not through the planted `/tmp/kprof-agent.kprof-new` ->
/// /etc/shadow, and `run` then uses that agent. On a board whose /run anyone can write (the
/// virtual board's init mounted it 1777 until issue 20; some boards still do), the user gets there first with its
/// own `/run/kprof` and staging symlink: the fallback is refused naming it, and `run` uses the
/// installed agent, never the planted one.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn deploy_board_read_only_install_path_falls_back_to_run_kprof() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let attacker = Attacker::new(&board);
    attacker.plant_static();
    let planted = attacker.run(&format!(
        "mkdir /run/kprof 2>/dev/null && chmod 777 /run/kprof && \
         printf '#!/bin/sh\\ntouch {MARKER}\\necho 0.1.0\\n' > /run/kprof/kprof-agent && \
         chmod 755 /run/kprof/kprof-agent && \
         ln -sf /etc/shadow /run/kprof/kprof-agent.kprof-new && echo planted; true"
    ));
    let planted = planted.trim() == "planted";
    board.ssh(&format!(
        "mkdir -p {RO_MOUNT} && mount -t tmpfs -o ro,mode=755 kprof-ro {RO_MOUNT}"
    ));
    let agent =
        find_file(&board.symbols, "kprof-agent").expect("kprof-agent in KPROF_BOARD_SYMBOLS");
    let (ok, out, err) = outcome(
        board
            .on_board("deploy")
            .arg("--agent")
            .arg(&agent)
            .args(["--install-path", &format!("{RO_MOUNT}/kprof-agent")]),
    );
    attacker.assert_untouched(&err);
    let run = || {
        outcome(
            board
                .on_board("run")
                .arg("--symbols")
                .arg(&board.symbols)
                .args(["--duration", "1"]),
        )
    };
    if planted {
        assert!(!ok, "deploy went through the planted /run/kprof:\n{err}");
        assert!(
            err.contains(&format!(
                "refusing to install kprof-agent in /run/kprof: /run/kprof is owned by uid {UID}"
            )),
            "{err}"
        );
        // The installed agent comes first; the planted one is never run.
        let (ok, out, err) = run();
        attacker.took(&out);
        assert!(ok, "run failed:\n{err}");
        assert!(err.contains("(/usr/bin/kprof-agent)"), "{err}");
        attacker.assert_untouched(&err);
        return;
    }
    assert!(ok, "deploy failed:\n{err}");
    assert!(
        err.contains("installing to /run/kprof/kprof-agent instead"),
        "{err}"
    );
    assert!(out.contains("installed at /run/kprof/kprof-agent"), "{out}");
    let perms = board.ssh("ls -ldn /run/kprof /run/kprof/kprof-agent");
    let modes: Vec<(&str, &str)> = perms
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], f[2])
        })
        .collect();
    assert_eq!(modes, [("drwx------", "0"), ("-rwxr-xr-x", "0")], "{perms}");
    let (ok, out, err) = run();
    attacker.took(&out);
    assert!(ok, "run failed:\n{err}");
    assert!(err.contains("(/run/kprof/kprof-agent)"), "{err}");
    attacker.assert_untouched(&err);
}

/// `deploy --install-path /tmp/kprof-agent` (a world-writable directory) is refused naming
/// /tmp and its mode, with no fallback and nothing written through the planted staging file.
#[test]
#[ignore = "needs the QEMU board (ci/board/up)"]
fn deploy_board_world_writable_install_path_refused() {
    let board = Board::from_env(env!("CARGO_BIN_EXE_kprofctl"));
    let attacker = Attacker::new(&board);
    attacker.plant_static();
    let agent =
        find_file(&board.symbols, "kprof-agent").expect("kprof-agent in KPROF_BOARD_SYMBOLS");
    let (ok, _, err) = outcome(
        board
            .on_board("deploy")
            .arg("--agent")
            .arg(&agent)
            .args(["--install-path", "/tmp/kprof-agent"]),
    );
    attacker.assert_untouched(&err);
    assert!(!ok, "deploy to /tmp succeeded");
    assert!(
        err.contains(
            "refusing to install kprof-agent in /tmp: /tmp is writable by other users (mode drwxrwxrwt)"
        ),
        "{err}"
    );
    assert!(!err.contains("instead"), "fell back: {err}");
    // The planted agent is the attacker's still (not replaced, not run).
    let owner = board.ssh("stat -c %u /tmp/kprof-agent");
    assert_eq!(owner.trim(), UID.to_string());
}
