//! The detached-run protocol: how `kprofctl run` starts `kprof-agent record` on the board so
//! that a dropped ssh link does not end the capture, follows its output, stops it, and finds
//! the capture it wrote.
//!
//! The agent runs under `setsid nohup` in a run directory `/tmp/kprof-run-USER/ID` holding
//! `out`, `err`, `pid` and, once the agent exited, `status`. A board-side shell loop
//! ([`tail_script`]) copies new bytes of `out`/`err` to the ssh channel until `status` exists.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use super::{board, shell, Remote};

/// A capture started on the board.
#[derive(Debug)]
pub struct RunDir {
    /// Holds `out`, `err`, `pid` and, once the agent exited, `status`.
    pub dir: String,
}

impl RunDir {
    /// Removes the run directory from the board, best effort: the capture is elsewhere.
    pub fn remove(&self, remote: &Remote) {
        let _ = remote.exec(&format!("rm -rf {}", shell::quote(&self.dir)));
    }
}

/// Starts the agent in its own session with `nohup`, its output going to files on the board,
/// so that nothing ties it to this ssh connection.
pub fn start(remote: &Remote, agent: &str, agent_args: &[String]) -> anyhow::Result<RunDir> {
    let t = &remote.target;
    let id = format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    );
    // Per login user: a directory created 0700 by one user must not block another.
    let dir = format!("/tmp/kprof-run-{}/{id}", t.user);
    let mut argv = vec![agent.to_owned()];
    argv.extend(agent_args.iter().cloned());
    // `wait` gives the agent's exit status; `status` appears only once the agent is gone.
    let wrapper = format!(
        "{} </dev/null >out 2>err & echo $! >pid; wait $!; echo $? >status.tmp; mv status.tmp status",
        shell::join(&argv)
    );
    let launch = format!(
        "umask 077; mkdir -p {d} && cd {d} && : >out && : >err || exit 1; \
         L=; command -v setsid >/dev/null 2>&1 && L=setsid; \
         command -v nohup >/dev/null 2>&1 && L=\"$L nohup\"; \
         $L sh -c {w} </dev/null >/dev/null 2>&1 & \
         i=0; while [ ! -s pid ] && [ $i -lt 50 ]; do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; \
         cat pid",
        d = shell::quote(&dir),
        w = shell::quote(&wrapper)
    );
    let pid = remote.exec_ok(&launch, "starting kprof-agent")?;
    if pid.parse::<u32>().is_err() {
        anyhow::bail!("{t}: kprof-agent did not start (no pid in {dir})");
    }
    Ok(RunDir { dir })
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
        "cd {d} || exit 255; o=0; e=0; \
         while :; do \
           [ -e status ] && f=1 || f=0; \
           n=$(wc -c < out); if [ \"$n\" -gt \"$o\" ]; then tail -c +$((o+1)) out > .chunk; k=$(wc -c < .chunk); cat .chunk; o=$((o+k)); fi; \
           n=$(wc -c < err); if [ \"$n\" -gt \"$e\" ]; then tail -c +$((e+1)) err > .chunk; k=$(wc -c < .chunk); cat .chunk >&2; e=$((e+k)); fi; \
           if [ $f = 1 ]; then exit $(cat status); fi; \
           if ! kill -0 \"$(cat pid)\" 2>/dev/null; then sleep 1; [ -e status ] || exit 254; fi; \
           sleep 0.25 2>/dev/null || sleep 1; \
         done",
        d = shell::quote(dir)
    )
}

/// Copies the agent's output here until it exits, the link breaks or Ctrl-C detaches.
pub fn stream(remote: &Remote, run: &RunDir) -> anyhow::Result<Ended> {
    let t = &remote.target;
    let mut ch = remote.channel(&tail_script(&run.dir))?;
    let sess = remote.session();
    sess.set_blocking(false);
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let mut line = Vec::<u8>::new();
    let mut last_line = Vec::<u8>::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut seen_interrupts = 0;
    let mut stop_sent: Option<Instant> = None;
    let mut term_sent = false;
    let result = 'poll: loop {
        let mut progressed = false;
        let mut eof = [false, false];
        for (i, stream_id) in [0, 1].into_iter().enumerate() {
            match ch.stream(stream_id).read(&mut buf) {
                Ok(0) => eof[i] = true,
                Ok(n) => {
                    progressed = true;
                    let data = &buf[..n];
                    if stream_id == 0 {
                        let _ = stdout.write_all(data);
                        let _ = stdout.flush();
                        for &b in data {
                            if b == b'\n' {
                                if !line.iter().all(u8::is_ascii_whitespace) {
                                    last_line = std::mem::take(&mut line);
                                }
                                line.clear();
                            } else {
                                line.push(b);
                            }
                        }
                    } else {
                        let _ = stderr.write_all(data);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break 'poll Some(Ended::LinkLost(e.to_string())),
            }
        }
        if eof == [true, true] && ch.eof() {
            break None;
        }
        let presses = crate::interrupt::presses();
        if presses > seen_interrupts {
            seen_interrupts = presses;
            if presses >= 2 {
                break Some(Ended::Detached);
            }
            eprintln!(
                "\nkprofctl: stopping the capture on {t} (it is kept; Ctrl-C again to detach)"
            );
            sess.set_blocking(true);
            let sent = send_stop(remote, &run.dir, false);
            sess.set_blocking(false);
            if let Err(e) = sent {
                break Some(Ended::LinkLost(format!("{e:#}")));
            }
            stop_sent = Some(Instant::now());
        }
        if let Some(at) = stop_sent {
            if !term_sent && at.elapsed() > Duration::from_secs(10) {
                // The agent did not react to SIGINT (it is inherited ignored by background
                // jobs of some shells): SIGTERM finalizes the same way.
                term_sent = true;
                sess.set_blocking(true);
                let _ = send_stop(remote, &run.dir, true);
                sess.set_blocking(false);
            }
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
    if let Some(ended) = result {
        return Ok(ended);
    }
    let _ = stderr.flush();
    if !line.iter().all(u8::is_ascii_whitespace) {
        last_line = line;
    }
    if ch.wait_close().is_err() {
        return Ok(Ended::LinkLost("the connection closed".into()));
    }
    let status = ch.exit_status().unwrap_or(-1);
    match status {
        255 => anyhow::bail!("{t}: the run directory {} vanished from the board", run.dir),
        254 => anyhow::bail!(
            "{t}: kprof-agent disappeared without an exit status (killed with its wrapper shell?); \
             its output is in {} on the board",
            run.dir
        ),
        _ => {}
    }
    Ok(Ended::Exited {
        status,
        last_line: String::from_utf8_lossy(&last_line).into_owned(),
    })
}

fn is_link_error(e: &ssh2::Error) -> bool {
    matches!(e.code(), ssh2::ErrorCode::Session(-7 | -9 | -13 | -43))
}

/// Signals the agent: SIGINT, as Ctrl-C on the board would, unless the agent inherited SIGINT
/// ignored (shells start background jobs so, and the agent waits for signals on a signalfd,
/// which never sees an ignored one) — then SIGTERM, which it finalizes on the same way.
fn send_stop(remote: &Remote, dir: &str, term: bool) -> anyhow::Result<()> {
    let d = shell::quote(dir);
    let status = remote.exec_ok(
        &format!("[ -e {d}/status ] && exit 0; p=$(cat {d}/pid) && echo \"pid $p\" && grep '^SigIgn:' /proc/$p/status; true"),
        "looking at kprof-agent",
    )?;
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
        return Ok(()); // already finished
    };
    let sig = if term || int_ignored { "TERM" } else { "INT" };
    remote.exec_ok(
        &format!("[ -e {d}/status ] || kill -{sig} {pid} 2>/dev/null; true"),
        "stopping kprof-agent",
    )?;
    Ok(())
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
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(tail_script(dir.path().to_str().unwrap()))
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
}
