//! The detached-run protocol: how `kprofctl run` starts `kprof-agent record` on the board so
//! that a dropped ssh link does not end the capture, follows its output, stops it, and finds
//! the capture it wrote.
//!
//! The agent runs under `setsid nohup` in a run directory `/tmp/kprof-run.RANDOM` holding
//! `out`, `err`, `pid` and, once the agent exited, `status`. A board-side shell loop
//! ([`tail_script`]) copies new bytes of `out`/`err` to the ssh channel until `status` exists.
//!
//! Root writes there and kills the pid it reads back, so the directory must be out of other
//! local users' reach: it gets a name no one can guess, is made by `mkdir` (which fails on
//! anything already there, symlinks included) with mode 0700, and every later step (stream,
//! stop, removal) enters it only after [`guard::enter_run_dir`] found it to be that directory.
//! A pid is signalled only while its `/proc/PID/cwd` is the run directory: the agent's.

use std::io::Read as _;
use std::time::{Duration, Instant};

use super::echo::Echo;
use super::{board, guard, shell, Remote};

/// A capture started on the board.
#[derive(Debug)]
pub struct RunDir {
    /// Holds `out`, `err`, `pid` and, once the agent exited, `status`.
    pub dir: String,
}

impl RunDir {
    /// Removes the run directory from the board, best effort (the capture is elsewhere), and
    /// only when it is still the one kprofctl made.
    pub fn remove(&self, remote: &Remote) {
        if let Ok(out) = remote.exec(&remove_script(&self.dir)) {
            if out.status == 253 {
                crate::term::note(format_args!(
                    "{}: {}; left in place",
                    remote.target,
                    out.stderr_str()
                ));
            }
        }
    }
}

/// Removes what is in the (checked) run directory through relative paths, then the directory.
fn remove_script(dir: &str) -> String {
    format!(
        "{}rm -rf ./* ./.[!.]* ./..?* 2>/dev/null; cd / && rmdir {d}",
        guard::enter_run_dir(dir),
        d = shell::quote(dir)
    )
}

/// The board shell that makes a fresh run directory under `/tmp` named `kprof-run.NAME`, starts
/// the agent in it detached, and prints `dir PATH` (its real path) and `pid PID`.
fn launch_script(name: &str, agent_argv: &[String]) -> String {
    // `wait` gives the agent's exit status; `status` appears only once the agent is gone.
    let wrapper = format!(
        "{} </dev/null >out 2>err & echo $! >pid; wait $!; echo $? >status.tmp; mv status.tmp status",
        shell::join(agent_argv)
    );
    // `mkdir` without -p fails on an existing name, a planted symlink included: nothing in
    // the directory was put there by anyone else.
    format!(
        "umask 077; b=$(cd -P /tmp && pwd -P) || exit 1; d=\"$b\"/{n}; \
         mkdir -m 700 \"$d\" || {{ echo \"cannot create the run directory $d\" >&2; exit 1; }}; \
         {RUN}kprof_enter_run_dir \"$d\" || {{ echo \"refusing to use the run directory: $KPROF_WHY\" >&2; exit 253; }}; \
         : >out && : >err || exit 1; echo \"dir $d\"; \
         L=; command -v setsid >/dev/null 2>&1 && L=setsid; \
         command -v nohup >/dev/null 2>&1 && L=\"$L nohup\"; \
         $L sh -c {w} </dev/null >/dev/null 2>&1 & \
         i=0; while [ ! -s pid ] && [ $i -lt 50 ]; do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; \
         echo \"pid $(cat pid)\"",
        n = shell::quote(name),
        RUN = guard::RUN_DIR_FN,
        w = shell::quote(&wrapper)
    )
}

/// Starts the agent in its own session with `nohup`, its output going to files on the board,
/// so that nothing ties it to this ssh connection.
pub fn start(remote: &Remote, agent: &str, agent_args: &[String]) -> anyhow::Result<RunDir> {
    let t = &remote.target;
    let name = format!("kprof-run.{}", guard::random_hex());
    let mut argv = vec![agent.to_owned()];
    argv.extend(agent_args.iter().cloned());
    let out = remote.exec_ok(&launch_script(&name, &argv), "starting kprof-agent")?;
    let field = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let dir = field("dir ");
    if !dir.starts_with('/') {
        anyhow::bail!("{t}: kprof-agent did not start (no run directory in `{out}`)");
    }
    if field("pid ").parse::<u32>().is_err() {
        anyhow::bail!("{t}: kprof-agent did not start (no pid in {dir})");
    }
    Ok(RunDir { dir })
}

/// Whether the run directory is still kprofctl's: an error naming it and what is wrong.
fn check_run_dir(remote: &Remote, dir: &str) -> anyhow::Result<()> {
    let t = &remote.target;
    let out = remote.exec(&format!("{}true", guard::enter_run_dir(dir)))?;
    match out.status {
        0 => Ok(()),
        255 => anyhow::bail!("{t}: the run directory {dir} vanished from the board"),
        _ => anyhow::bail!("{t}: {}", out.stderr_str()),
    }
}

/// How the streaming ended.
#[derive(Debug)]
pub enum Ended {
    /// The agent exited with `status`; `last_line` is its last non-blank stdout line.
    Exited { status: i32, last_line: String },
    /// Ctrl-C twice: kprofctl lets go, the capture goes on.
    Detached,
    /// The ssh link broke (why); the capture goes on.
    LinkLost(String),
}

/// Counts Ctrl-C presses from now on instead of letting them end kprofctl: [`stream`] turns
/// the first into a stop of the agent and the second into detaching.
pub fn count_interrupts() {
    crate::interrupt::count();
}

/// The board-side loop that copies new bytes of `out`/`err` to this channel's stdout/stderr
/// until `status` exists, then exits with the agent's status. It reads the files by offset, so
/// nothing is lost or repeated, and polls a few times a second (its own cost shows up as a few
/// `sh` and `wc` samples in system-wide profiles).
fn tail_script(dir: &str) -> String {
    format!(
        "{enter}o=0; e=0; \
         while :; do \
           [ -e status ] && f=1 || f=0; \
           n=$(wc -c < out); if [ \"$n\" -gt \"$o\" ]; then tail -c +$((o+1)) out > .chunk; k=$(wc -c < .chunk); cat .chunk; o=$((o+k)); fi; \
           n=$(wc -c < err); if [ \"$n\" -gt \"$e\" ]; then tail -c +$((e+1)) err > .chunk; k=$(wc -c < .chunk); cat .chunk >&2; e=$((e+k)); fi; \
           if [ $f = 1 ]; then exit $(cat status); fi; \
           p=$(cat pid 2>/dev/null); if [ -z \"$p\" ] || ! kill -0 \"$p\" 2>/dev/null; then sleep 1; [ -e status ] || exit 254; fi; \
           sleep 0.25 2>/dev/null || sleep 1; \
         done",
        enter = guard::enter_run_dir(dir)
    )
}

/// Copies the agent's output to `echo` until it exits, the link breaks or Ctrl-C detaches.
pub fn stream(remote: &Remote, run: &RunDir, echo: Echo) -> anyhow::Result<Ended> {
    check_run_dir(remote, &run.dir)?;
    let mut ch = remote.channel(&tail_script(&run.dir))?;
    let sess = remote.session();
    sess.set_blocking(false);
    let mut relay = Relay::new(echo);
    let mut buf = vec![0u8; 32 * 1024];
    let mut stops = StopRequests::default();
    let result = loop {
        let (progressed, eof) = match relay.copy(&mut ch, &mut buf) {
            Ok(copied) => copied,
            Err(e) => break Some(Ended::LinkLost(e.to_string())),
        };
        if eof && ch.eof() {
            break None;
        }
        if let Some(ended) = stops.poll(remote, run)? {
            break Some(ended);
        }
        if !progressed {
            if let Err(e) = sess.keepalive_send() {
                if is_link_error(&e) {
                    break Some(Ended::LinkLost(e.message().to_owned()));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    sess.set_blocking(true);
    let last_line = relay.finish();
    if let Some(ended) = result {
        return Ok(ended);
    }
    if ch.wait_close().is_err() {
        return Ok(Ended::LinkLost("the connection closed".into()));
    }
    exited(remote, run, ch.exit_status().unwrap_or(-1), last_line)
}

/// The tail loop's exit status: the agent's, or one of the loop's own (253-255) that say
/// what happened to the run directory.
fn exited(remote: &Remote, run: &RunDir, status: i32, last_line: String) -> anyhow::Result<Ended> {
    let t = &remote.target;
    match status {
        255 => anyhow::bail!("{t}: the run directory {} vanished from the board", run.dir),
        253 => anyhow::bail!(
            "{t}: the run directory {} is no longer the one kprofctl made (see above); \
             the capture goes on on the board",
            run.dir
        ),
        254 => anyhow::bail!(
            "{t}: kprof-agent disappeared without an exit status (killed with its wrapper shell?); \
             its output is in {} on the board",
            run.dir
        ),
        _ => {}
    }
    Ok(Ended::Exited { status, last_line })
}

/// The agent's stdout and stderr copied to `echo`, keeping the last non-blank stdout line (the
/// archive's path).
struct Relay {
    echo: Echo,
    line: Vec<u8>,
    last_line: Vec<u8>,
}

impl Relay {
    fn new(echo: Echo) -> Relay {
        Relay {
            echo,
            line: Vec::new(),
            last_line: Vec::new(),
        }
    }

    /// One non-blocking read of each stream: whether anything came, and whether both are at
    /// their end.
    fn copy(&mut self, ch: &mut ssh2::Channel, buf: &mut [u8]) -> std::io::Result<(bool, bool)> {
        let mut progressed = false;
        let mut eof = [false, false];
        for (i, stream_id) in [0, 1].into_iter().enumerate() {
            match ch.stream(stream_id).read(buf) {
                Ok(0) => eof[i] = true,
                Ok(n) => {
                    progressed = true;
                    if stream_id == 0 {
                        self.stdout(&buf[..n]);
                    } else {
                        self.echo.write(1, &buf[..n]);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok((progressed, eof == [true, true]))
    }

    fn stdout(&mut self, data: &[u8]) {
        self.echo.write(0, data);
        for &b in data {
            if b == b'\n' {
                if !self.line.iter().all(u8::is_ascii_whitespace) {
                    self.last_line = std::mem::take(&mut self.line);
                }
                self.line.clear();
            } else {
                self.line.push(b);
            }
        }
    }

    /// The last non-blank stdout line, also when it had no newline.
    fn finish(mut self) -> String {
        self.echo.flush();
        if !self.line.iter().all(u8::is_ascii_whitespace) {
            self.last_line = self.line;
        }
        String::from_utf8_lossy(&self.last_line).into_owned()
    }
}

/// Ctrl-C while streaming: the first stops the agent (SIGINT, then SIGTERM if it has not
/// reacted in 10 s), the second detaches.
#[derive(Default)]
struct StopRequests {
    seen: usize,
    sent: Option<Instant>,
    term_sent: bool,
}

impl StopRequests {
    /// Acts on Ctrl-C presses since the last call; `Some` when the stream ends here.
    fn poll(&mut self, remote: &Remote, run: &RunDir) -> anyhow::Result<Option<Ended>> {
        let t = &remote.target;
        let sess = remote.session();
        let presses = crate::interrupt::presses();
        if presses > self.seen {
            self.seen = presses;
            if presses >= 2 {
                return Ok(Some(Ended::Detached));
            }
            crate::term::note(format_args!(
                "stopping the capture on {t} (it is kept; Ctrl-C again to detach)"
            ));
            sess.set_blocking(true);
            let sent = send_stop(remote, &run.dir, false);
            sess.set_blocking(false);
            match sent {
                Ok(Some(refused)) => {
                    sess.set_blocking(true);
                    anyhow::bail!("{t}: {refused}; the agent was not signalled");
                }
                Ok(None) => {}
                Err(e) => return Ok(Some(Ended::LinkLost(format!("{e:#}")))),
            }
            self.sent = Some(Instant::now());
        }
        if let Some(at) = self.sent {
            if !self.term_sent && at.elapsed() > Duration::from_secs(10) {
                // The agent did not react to SIGINT (it is inherited ignored by background
                // jobs of some shells): SIGTERM finalizes the same way.
                self.term_sent = true;
                sess.set_blocking(true);
                let _ = send_stop(remote, &run.dir, true);
                sess.set_blocking(false);
            }
        }
        Ok(None)
    }
}

fn is_link_error(e: &ssh2::Error) -> bool {
    matches!(e.code(), ssh2::ErrorCode::Session(-7 | -9 | -13 | -43))
}

/// Signals the agent: SIGINT, as Ctrl-C on the board would, unless the agent inherited SIGINT
/// ignored (shells start background jobs so, and the agent waits for signals on a signalfd,
/// which never sees an ignored one) — then SIGTERM, which it finalizes on the same way.
/// `Ok(Some(why))` when the run directory or its pid file is not kprofctl's: nothing is sent.
fn send_stop(remote: &Remote, dir: &str, term: bool) -> anyhow::Result<Option<String>> {
    let out = remote.exec(&stop_query_script(dir))?;
    if out.status == 253 {
        return Ok(Some(out.stderr_str()));
    }
    let status = out.stdout_str();
    let mut pid = None;
    let mut int_ignored = false;
    for line in status.lines() {
        if let Some(p) = line.strip_prefix("pid ") {
            pid = p.trim().parse::<u32>().ok();
        } else if let Some(mask) = line.strip_prefix("SigIgn:") {
            int_ignored = u64::from_str_radix(mask.trim(), 16)
                .is_ok_and(|m| m & (1 << (libc::SIGINT - 1)) != 0);
        }
    }
    let Some(pid) = pid else {
        return Ok(None); // already finished
    };
    let sig = if term || int_ignored { "TERM" } else { "INT" };
    let out = remote.exec(&kill_script(dir, pid, sig))?;
    Ok((out.status == 253).then(|| out.stderr_str()))
}

/// Shell that keeps `$p` only while it is the agent kprofctl started: a process whose working
/// directory is the (checked) run directory. A pid file naming anything else is ignored.
fn agent_pid_check(dir: &str) -> String {
    format!(
        "[ \"$(readlink /proc/$p/cwd 2>/dev/null)\" = {d} ] || exit 0; ",
        d = shell::quote(dir)
    )
}

/// Prints `pid PID` and its `SigIgn:` line while the agent runs, nothing once it is done.
fn stop_query_script(dir: &str) -> String {
    format!(
        "{enter}[ -e status ] && exit 0; p=$(cat pid 2>/dev/null); \
         case $p in ''|*[!0-9]*) echo \"refusing to signal: the pid file in {shown} holds '$p'\" >&2; exit 253;; esac; \
         {check}echo \"pid $p\"; grep '^SigIgn:' /proc/$p/status; true",
        enter = guard::enter_run_dir(dir),
        shown = dir.replace(['"', '`', '$', '\\'], "?"),
        check = agent_pid_check(dir)
    )
}

/// Sends SIGsig to `pid` if the agent has not finished and `pid` is still the agent.
fn kill_script(dir: &str, pid: u32, sig: &str) -> String {
    format!(
        "{enter}[ -e status ] && exit 0; p={pid}; {check}kill -{sig} $p 2>/dev/null; true",
        enter = guard::enter_run_dir(dir),
        check = agent_pid_check(dir)
    )
}

/// The archive path in the agent's last stdout line. The workload shares that stdout, and when
/// its output does not end with a newline the path follows it on the same line.
pub fn capture_path(last_line: &str, output_dir: Option<&str>) -> String {
    let line = last_line.trim_end();
    let dir = output_dir
        .unwrap_or(board::CAPTURE_DIR)
        .trim_end_matches('/');
    if let Some(at) = line.rfind(&format!("{dir}/")) {
        return line[at..].to_owned();
    }
    // The agent printed its canonical path (e.g. -o through a symlink): the last absolute path.
    match line.rfind(" /").or_else(|| line.rfind("|/")) {
        Some(at) => line[at + 1..].to_owned(),
        None => line[line.find('/').unwrap_or(0)..].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture path is found after workload output that lacks a final newline.
    #[test]
    fn capture_path_after_workload_output() {
        let p = "/var/lib/kprof/captures/a.kprof.tar.gz";
        assert_eq!(capture_path(&format!("{p}\n"), None), p);
        assert_eq!(capture_path(&format!("x|y|{p}"), None), p);
        assert_eq!(
            capture_path("no newline /d/x.kprof.tar.gz", Some("/d/")),
            "/d/x.kprof.tar.gz"
        );
        assert_eq!(
            capture_path("out/real/x.kprof.tar.gz", Some("/link")),
            "/real/x.kprof.tar.gz"
        );
    }

    /// Runs the board-side tail loop with this host's `sh` in a run directory holding
    /// `files`; returns (stdout, stderr, exit code).
    fn tail_locally(files: &[(&str, &str)]) -> (String, String, Option<i32>) {
        // As `start` makes it: 0700, named by its real path.
        let (_dir, real) = private_dir();
        for (name, content) in files {
            std::fs::write(real.join(name), content).unwrap();
        }
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(tail_script(real.to_str().unwrap()))
            .output()
            .unwrap();
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
            out.status.code(),
        )
    }

    /// Once `status` exists, the loop copies `out` and `err` each once and exits with it.
    #[test]
    fn tail_script_finished_run_copies_output_and_status() {
        let pid = std::process::id().to_string();
        let (out, err, code) = tail_locally(&[
            ("out", "line 1\n/var/lib/kprof/captures/a.kprof.tar.gz\n"),
            ("err", "kprof-agent: 10 samples\n"),
            ("pid", &pid),
            ("status", "3\n"),
        ]);
        assert_eq!(out, "line 1\n/var/lib/kprof/captures/a.kprof.tar.gz\n");
        assert_eq!(err, "kprof-agent: 10 samples\n");
        assert_eq!(code, Some(3));
    }

    /// A run directory that is gone is exit 255; an agent gone without a status is 254.
    #[test]
    fn tail_script_missing_dir_or_status_exit_codes() {
        let (_, _, code) = tail_locally(&[]);
        assert_eq!(code, Some(254), "no pid file: the agent is not running");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(tail_script("/nonexistent/kprof-run"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(255));
    }

    use crate::remote::guard::tests::sh;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::{Path, PathBuf};

    /// A 0700 run directory of this user, by its real path.
    fn private_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        (dir, real)
    }

    fn alive(child: &mut std::process::Child) -> bool {
        child.try_wait().unwrap().is_none()
    }

    fn sleeper(cwd: &Path) -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .current_dir(cwd)
            .spawn()
            .unwrap()
    }

    /// The launch makes a new 0700 directory under /tmp, runs the agent in it and prints its
    /// real path and the agent's pid; the agent's status lands in `status`.
    #[test]
    fn launch_script_fresh_private_dir_runs_agent() {
        let name = format!("kprof-run.{}", guard::random_hex());
        let argv: Vec<String> = ["sh", "-c", "echo hello; echo oops >&2; exit 3"]
            .map(String::from)
            .into();
        let (out, err, code) = sh(&launch_script(&name, &argv));
        assert_eq!(code, Some(0), "{err}");
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        let dir = tmp.join(&name);
        assert!(out.contains(&format!("dir {}\n", dir.display())), "{out}");
        assert!(out
            .lines()
            .any(|l| l.starts_with("pid ") && l[4..].parse::<u32>().is_ok()));
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dir.join("status").exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(
            (read("out"), read("err"), read("status")),
            ("hello\n".into(), "oops\n".into(), "3\n".into())
        );
        let (_, err, code) = sh(&remove_script(dir.to_str().unwrap()));
        assert_eq!(code, Some(0), "{err}");
        assert!(!dir.exists());
    }

    /// A name someone planted first (a symlink to a file root would truncate) makes the launch
    /// fail without writing through it.
    #[test]
    fn launch_script_planted_name_refused() {
        let (_keep, victim_dir) = private_dir();
        let victim = victim_dir.join("shadow");
        std::fs::write(&victim, "secret\n").unwrap();
        let name = format!("kprof-run.{}", guard::random_hex());
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        let planted = tmp.join(&name);
        std::os::unix::fs::symlink(&victim_dir, &planted).unwrap();
        let argv: Vec<String> = ["true".to_owned()].into();
        let (out, err, code) = sh(&launch_script(&name, &argv));
        std::fs::remove_file(&planted).unwrap();
        assert_eq!(code, Some(1), "{out}");
        assert!(
            err.contains(&format!(
                "cannot create the run directory {}",
                planted.display()
            )),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
        assert!(!victim_dir.join("out").exists() && !victim_dir.join("pid").exists());
    }

    /// A pid file naming a process that is not the agent (its cwd is not the run directory)
    /// gets no signal and is not reported; the agent (cwd = run directory) is stopped.
    #[test]
    fn kill_script_planted_pid_not_signalled() {
        let (_keep, run) = private_dir();
        let (_keep2, elsewhere) = private_dir();
        let dir = run.to_str().unwrap();
        let mut victim = sleeper(&elsewhere);
        std::fs::write(run.join("pid"), format!("{}\n", victim.id())).unwrap();
        let (out, err, code) = sh(&stop_query_script(dir));
        assert_eq!((out.as_str(), code), ("", Some(0)), "{err}");
        let (_, err, code) = sh(&kill_script(dir, victim.id(), "TERM"));
        assert_eq!(code, Some(0), "{err}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(alive(&mut victim), "the planted pid was signalled");
        let _ = victim.kill();

        let mut agent = sleeper(&run);
        std::fs::write(run.join("pid"), format!("{}\n", agent.id())).unwrap();
        let (out, _, _) = sh(&stop_query_script(dir));
        assert!(
            out.starts_with(&format!("pid {}\nSigIgn:", agent.id())),
            "{out}"
        );
        sh(&kill_script(dir, agent.id(), "TERM"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(&mut agent) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive(&mut agent), "the agent was not stopped");
    }

    /// A pid file that is not a number is refused with the run directory's name; a run
    /// directory others can write is neither read nor removed.
    #[test]
    fn stop_query_script_bad_pid_or_dir_refused() {
        let (_keep, run) = private_dir();
        let dir = run.to_str().unwrap();
        std::fs::write(run.join("pid"), "1 2\n").unwrap();
        let (_, err, code) = sh(&stop_query_script(dir));
        assert_eq!(code, Some(253));
        assert!(
            err.contains(&format!("the pid file in {dir} holds '1 2'")),
            "{err}"
        );
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        for script in [
            stop_query_script(dir),
            remove_script(dir),
            kill_script(dir, 1, "TERM"),
        ] {
            let (_, err, code) = sh(&script);
            assert_eq!(code, Some(253));
            assert!(err.contains(&format!("{dir} has mode drwxrwxrwx")), "{err}");
        }
        assert!(run.join("pid").exists());
    }
}
