//! `kprofctl run`: preflight the board, start `kprof-agent record` detached from the ssh
//! session (so a dropped link does not end the capture), stream its output, stop it on Ctrl-C.

use crate::cmd::record_options::{CpuList, Frequency, Period, Pid, Seconds};
use crate::cmd::symbol_args::SymbolArgs;
use crate::remote::kernel_match;
use crate::remote::{board, shell, Remote, SshArgs, Target};
use crate::state::State;
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Arguments of `kprofctl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The board: [user@]host[:port] or an ~/.ssh/config alias.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Event(s) to sample, as kprof-agent names them (cpu-clock, cycles, r03/period=10000/...).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// Sampling frequency in Hz.
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "HZ",
        conflicts_with = "period"
    )]
    pub freq: Option<Frequency>,
    /// Sample every N events instead.
    #[arg(short = 'c', long = "count", value_name = "PERIOD")]
    pub period: Option<Period>,
    /// Do not record call chains (recorded by default: `--callers` needs them).
    #[arg(long)]
    pub no_call_graph: bool,
    /// Sample this process only instead of the whole system.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pid: Option<Pid>,
    /// CPUs to sample (e.g. 0,2-3).
    #[arg(short = 'C', long = "cpu", value_name = "CPUS")]
    pub cpus: Option<CpuList>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<Seconds>,
    /// Capture directory on the board (default: the agent's, /var/lib/kprof/captures).
    #[arg(short = 'o', long = "output-dir", value_name = "BOARD_DIR")]
    pub output_dir: Option<String>,
    /// Download and report the capture when it is done (as `kprofctl fetch`).
    #[arg(long)]
    pub fetch: bool,
    /// Where `--fetch` stores captures.
    #[arg(long, value_name = "DIR", default_value = super::fetch::DEFAULT_DIR)]
    pub dest: std::path::PathBuf,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// The workload to run on the board and profile while it runs: `-- CMD ARGS...`. Every
    /// argument reaches the board unchanged (quotes, `;`, `$(...)` included).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl RunArgs {
    /// `kprof-agent record` arguments.
    fn agent_args(&self) -> Vec<String> {
        let mut args = vec!["record".to_owned()];
        for e in &self.events {
            args.extend(["-e".to_owned(), e.clone()]);
        }
        let pairs = [
            ("-F", self.freq.map(|v| v.to_string())),
            ("-c", self.period.map(|v| v.to_string())),
            ("-p", self.pid.map(|v| v.to_string())),
            ("-C", self.cpus.as_ref().map(CpuList::to_string)),
            ("--duration", self.duration.map(|v| v.to_string())),
            ("-o", self.output_dir.clone()),
        ];
        for (flag, value) in pairs {
            if let Some(v) = value {
                args.extend([flag.to_owned(), v]);
            }
        }
        if !self.no_call_graph {
            args.push("-g".to_owned());
        }
        if !self.command.is_empty() {
            args.push("--".to_owned());
            args.extend(self.command.iter().cloned());
        }
        args
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.output_dir {
        if !dir.starts_with('/') {
            anyhow::bail!("-o {dir}: the capture directory must be an absolute path on the board");
        }
    }
    if args.command.is_empty() && args.duration.is_none() && args.pid.is_none() {
        eprintln!(
            "kprofctl: no command and no --duration: sampling until Ctrl-C \
             (usage: kprofctl run TARGET [options] -- CMD ARGS...)"
        );
    }
    let target = Target::resolve(&args.target)?;
    let remote = Remote::connect(&target, &args.ssh)?;
    let mut state = State::load()?;
    let remembered = state
        .targets
        .get(&target.spec)
        .and_then(|t| t.agent.clone());
    let agent = preflight(&remote, remembered.as_deref(), &args)?;

    // Remember the board before starting, so that `fetch` finds it even if the link drops.
    let entry = state.remember(&target.spec);
    entry.agent = Some(agent.clone());
    if let Some(dir) = &args.output_dir {
        if !entry.capture_dirs.contains(dir) {
            entry.capture_dirs.push(dir.clone());
        }
    }
    state.save()?;

    // Counting Ctrl-C from before the start, so that one pressed while the agent starts still
    // stops it (instead of killing kprofctl and leaving the capture running unwatched).
    let _ = ctrlc::set_handler(|| {
        INTERRUPTS.fetch_add(1, Ordering::SeqCst);
    });
    let run = start(&remote, &agent, &args.agent_args())?;
    let ended = stream(&remote, &run)?;
    match ended {
        Ended::Exited {
            status: 0,
            last_line,
        } => {
            let _ = remote.exec(&format!("rm -rf {}", shell::quote(&run.dir)));
            let capture = capture_path(&last_line, args.output_dir.as_deref());
            if !capture.starts_with('/') || !capture.ends_with(kprof_capture::ARCHIVE_SUFFIX) {
                anyhow::bail!(
                    "{target}: kprof-agent finished but its last line is not a capture path: `{capture}`"
                );
            }
            eprintln!("kprofctl: capture on {target}: {capture}");
            if args.fetch {
                let fetch = super::fetch::FetchArgs {
                    args: vec![target.spec.clone()],
                    dest: args.dest.clone(),
                    no_report: false,
                    capture_dir: Vec::new(),
                    ssh: args.ssh.clone(),
                    symbols: args.symbols.clone(),
                };
                return super::fetch::fetch_paths(&remote, &fetch, &[capture]);
            }
            eprintln!("kprofctl: download it with `kprofctl fetch`");
            Ok(())
        }
        Ended::Exited { status, .. } => {
            let _ = remote.exec(&format!("rm -rf {}", shell::quote(&run.dir)));
            anyhow::bail!(
                "{target}: kprof-agent failed (exit status {status}); see its messages above"
            )
        }
        Ended::Detached => anyhow::bail!(
            "{target}: detached; the capture goes on on the board (log in {}): \
             `kprofctl fetch` gets it once it is done",
            run.dir
        ),
        Ended::LinkLost(why) => anyhow::bail!(
            "{target}: connection lost during the capture ({why}); the capture goes on on the \
             board (log in {}): `kprofctl fetch {}` gets it once it is done",
            run.dir,
            target.spec
        ),
    }
}

/// The archive path in the agent's last stdout line. The workload shares that stdout, and when
/// its output does not end with a newline the path follows it on the same line.
fn capture_path(last_line: &str, output_dir: Option<&str>) -> String {
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

/// Checks the board before a capture and prints what it found. Returns the agent's path.
fn preflight(remote: &Remote, remembered: Option<&str>, args: &RunArgs) -> anyhow::Result<String> {
    let t = &remote.target;
    let agent =
        board::find_agent(remote, remembered)?.ok_or_else(|| board::no_agent_error(remote))?;
    let version = board::agent_version(remote, &agent)?;
    eprintln!("kprofctl: {t}: {version} ({agent})");
    let ours = env!("CARGO_PKG_VERSION");
    if !version.contains(ours) {
        eprintln!(
            "kprofctl: warning: kprofctl is {ours} but the board's agent says `{version}`: \
             `kprofctl deploy {}` installs the matching one",
            t.spec
        );
    }
    let facts = board::facts(remote)?;
    match facts.perf_event_paranoid {
        Some(p) if p > 1 && facts.uid != Some(0) => eprintln!(
            "kprofctl: warning: {t}: perf_event_paranoid is {p} and the login is not root: \
             kernel samples will be refused (log in as root or set \
             /proc/sys/kernel/perf_event_paranoid to -1)"
        ),
        Some(p) => eprintln!(
            "kprofctl: {t}: perf_event_paranoid {p}, uid {}",
            facts.uid.map_or("?".into(), |u| u.to_string())
        ),
        None => eprintln!(
            "kprofctl: warning: {t}: /proc/sys/kernel/perf_event_paranoid is missing: the kernel \
             may lack CONFIG_PERF_EVENTS"
        ),
    }
    if facts.has_hw_pmu() {
        eprintln!("kprofctl: {t}: PMUs: {}", facts.pmus.join(" "));
    } else {
        eprintln!(
            "kprofctl: {t}: no hardware PMU (event sources: {}): only software events such as \
             cpu-clock can be sampled",
            if facts.pmus.is_empty() {
                "none".to_owned()
            } else {
                facts.pmus.join(" ")
            }
        );
        let hw: Vec<&String> = args
            .events
            .iter()
            .filter(|e| is_hardware_event(e))
            .collect();
        if !hw.is_empty() {
            eprintln!(
                "kprofctl: warning: {t}: {} need a hardware PMU the board does not expose",
                hw.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let matched = kernel_match::check(facts.kernel_build_id().as_deref(), &args.symbols)?;
    let msg = matched.message(&facts.kernel_release);
    if matched.is_mismatch() {
        eprintln!("\nkprofctl: WARNING: {t}: {msg}\n");
    } else {
        eprintln!("kprofctl: {t}: {msg}");
    }
    Ok(agent)
}

fn is_hardware_event(e: &str) -> bool {
    let name = e.split('/').next().unwrap_or(e);
    name.starts_with('r') && name[1..].chars().all(|c| c.is_ascii_hexdigit()) && name.len() > 1
        || matches!(
            name,
            "cycles"
                | "instructions"
                | "cache-references"
                | "cache-misses"
                | "branch-misses"
                | "branches"
                | "branch-instructions"
                | "bus-cycles"
                | "ref-cycles"
        )
        || name.starts_with("L1-")
        || name.starts_with("LLC-")
        || name.starts_with("dTLB-")
        || name.starts_with("iTLB-")
}

/// A capture started on the board.
#[derive(Debug)]
struct RunDir {
    /// Holds `out`, `err`, `pid` and, once the agent exited, `status`.
    dir: String,
}

/// Starts the agent in its own session with `nohup`, its output going to files on the board,
/// so that nothing ties it to this ssh connection.
fn start(remote: &Remote, agent: &str, agent_args: &[String]) -> anyhow::Result<RunDir> {
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
enum Ended {
    Exited { status: i32, last_line: String },
    Detached,
    LinkLost(String),
}

/// Ctrl-C presses since the capture started.
static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

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

fn stream(remote: &Remote, run: &RunDir) -> anyhow::Result<Ended> {
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
        let presses = INTERRUPTS.load(Ordering::SeqCst);
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// Options map to agent flags, call chains are on by default, the command follows `--`.
    #[test]
    fn agent_args_run_options_map_to_record() {
        let cli = Cli::try_parse_from([
            "x",
            "root@b",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-o",
            "/data",
            "--",
            "sh",
            "-c",
            "echo 1 > /dev/mychardrv; $(x)",
        ])
        .unwrap();
        assert_eq!(
            cli.run.agent_args(),
            [
                "record",
                "-e",
                "cpu-clock",
                "-F",
                "999",
                "-o",
                "/data",
                "-g",
                "--",
                "sh",
                "-c",
                "echo 1 > /dev/mychardrv; $(x)"
            ]
        );
        let cli = Cli::try_parse_from(["x", "b", "--no-call-graph", "--duration", "3"]).unwrap();
        assert_eq!(cli.run.agent_args(), ["record", "--duration", "3"]);
    }

    /// A bad record option fails while the command line is read, naming the option and value.
    #[test]
    fn parse_run_invalid_values_name_the_argument() {
        for (args, names) in [
            (["-F", "0"], "--freq <HZ>"),
            (["-c", "none"], "--count <PERIOD>"),
            (["-p", "0"], "--pid <PID>"),
            (["-C", "3-1"], "--cpu <CPUS>"),
            (["--duration", "0"], "--duration <SECS>"),
        ] {
            let err = Cli::try_parse_from(["x", "b"].into_iter().chain(args))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(names) && err.contains(&format!("'{}'", args[1])),
                "{err}"
            );
        }
    }

    /// Typed options reach the agent as it spells them: ranges, `max`, fractions.
    #[test]
    fn agent_args_typed_values_round_trip() {
        let cli = Cli::try_parse_from([
            "x",
            "b",
            "-F",
            "max",
            "-p",
            "42",
            "-C",
            "0,2-3",
            "--duration",
            "2.5",
        ])
        .unwrap();
        assert_eq!(
            cli.run.agent_args(),
            [
                "record",
                "-F",
                "max",
                "-p",
                "42",
                "-C",
                "0,2-3",
                "--duration",
                "2.5",
                "-g"
            ]
        );
    }

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

    /// Hardware event names are told from software ones for the no-PMU warning.
    #[test]
    fn is_hardware_event_names() {
        assert!(is_hardware_event("cycles"));
        assert!(is_hardware_event("r03/period=10000/"));
        assert!(is_hardware_event("L1-dcache-load-misses"));
        assert!(!is_hardware_event("cpu-clock"));
        assert!(!is_hardware_event("raw"));
    }
}
