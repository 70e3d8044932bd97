//! `kprofctl run`: preflight the board, start `kprof-agent record` detached from the ssh
//! session (so a dropped link does not end the capture; `remote::detached` is how), stream
//! its output, stop it on Ctrl-C, and say where the capture is. Several boards at once:
//! [`many`].

mod latency;
mod many;
mod preflight;

use crate::cmd::record_options::{CallGraph, CpuList, Frequency, Period, Pid, Seconds};
use crate::cmd::symbol_args::SymbolArgs;
use crate::remote::detached::{self, Ended, RunDir};
use crate::remote::echo::Echo;
use crate::remote::labgrid::{self, Booking, LabgridArgs};
use crate::remote::{Remote, SshArgs, Target};
use crate::state::State;
use std::path::PathBuf;
use std::sync::Mutex;

/// Arguments of `kprofctl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The board: [user@]host[:port], an ~/.ssh/config alias or lg:PLACE (labgrid). Several
    /// boards run the same capture at once, each line of their output behind the board's name,
    /// and a summary says which failed.
    // The text is clap's help, where brackets mean optional parts, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(value_name = "TARGET", required = true, num_args = 1..)]
    pub targets: Vec<String>,
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
    #[arg(long, conflicts_with = "call_graph")]
    pub no_call_graph: bool,
    /// How to record call chains: `fp` (frame pointers, the default) or `dwarf[,SIZE]` (user
    /// registers and SIZE bytes of user stack per sample, default 8192, unwound on the host
    /// with the images' CFI: for software built without frame pointers).
    #[arg(long, value_name = "MODE")]
    pub call_graph: Option<CallGraph>,
    /// zstd level of perf.data's records on the board, as `perf record -z` (1-22; the agent
    /// compresses at level 1 unless told otherwise).
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u8).range(1..=22),
        conflicts_with = "no_compress"
    )]
    pub compression_level: Option<u8>,
    /// Write perf.data uncompressed on the board: the least agent CPU, the largest archive.
    #[arg(long)]
    pub no_compress: bool,
    /// Also record every context switch with its call chain (the sched:sched_switch
    /// tracepoint), for `kprofctl report --off-cpu`: where threads block and for how long.
    #[arg(long)]
    pub off_cpu: bool,
    /// Also record the lines applications write to ftrace's trace_marker (kprof/marker.h's
    /// kprof_mark, kprof_mark_begin/end), for the timeline, `report --markers` and `--time`
    /// by mark (docs/markers.md).
    #[arg(long)]
    pub markers: bool,
    /// Time every call of these functions (docs/latency.md): a kernel function (`FUNC`,
    /// `MODULE:FUNC`) or a user one (`/usr/bin/PROGRAM:FUNC`, `libc.so.6:FUNC`, resolved
    /// against the host's symbol file with the board file's build-id). The report gives
    /// each one's count, percentiles, histogram and slowest calls with their call paths.
    #[arg(long, value_name = "FUNC", value_delimiter = ',')]
    pub latency: Vec<String>,
    /// Also record where threads wait for locks: kernel lock waits (lock:contention_begin/
    /// end) and futex waits, with their call paths and wait times.
    #[arg(long)]
    pub contention: bool,
    /// Sample nothing: only what --latency, --contention, --off-cpu or --markers record.
    #[arg(long)]
    pub no_sample: bool,
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
    /// Free space the board's capture directory must have for the capture to start (bytes,
    /// or with a K/M/G suffix; the agent's default is 16M, 0 turns the check off).
    #[arg(long, value_name = "SIZE")]
    pub min_free: Option<String>,
    /// Download and report the capture when it is done (as `kprofctl fetch`).
    #[arg(long)]
    pub fetch: bool,
    /// Where `--fetch` stores captures.
    #[arg(long, value_name = "DIR", default_value = super::fetch::DEFAULT_DIR)]
    pub dest: PathBuf,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub lab: LabgridArgs,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// The workload to run on the board and profile while it runs: `-- CMD ARGS...`. Every
    /// argument reaches the board unchanged (quotes, `;`, `$(...)` included).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl RunArgs {
    /// `kprof-agent record` arguments.
    /// `probes` are the `--latency` arguments resolved for the board.
    fn agent_args(&self, probes: &[String]) -> Vec<String> {
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
            ("--min-free", self.min_free.clone()),
        ];
        for (flag, value) in pairs {
            if let Some(v) = value {
                args.extend([flag.to_owned(), v]);
            }
        }
        match self.call_graph {
            _ if self.no_call_graph => {}
            // `-g` rather than `--call-graph fp`: agents older than `--call-graph` take it.
            None | Some(CallGraph::Fp) => args.push("-g".to_owned()),
            Some(dwarf) => args.extend(["--call-graph".to_owned(), dwarf.to_string()]),
        }
        // Attached: the agent's level is optional, as perf's is.
        if let Some(level) = self.compression_level {
            args.push(format!("--compression-level={level}"));
        }
        if self.no_compress {
            args.push("--no-compress".to_owned());
        }
        if self.off_cpu {
            args.push("--off-cpu".to_owned());
        }
        if self.markers {
            args.push("--markers".to_owned());
        }
        args.extend(probes.iter().cloned());
        if self.contention {
            args.push("--contention".to_owned());
        }
        if self.no_sample {
            args.push("--no-sample".to_owned());
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
             (usage: kprofctl run TARGET... [options] -- CMD ARGS...)"
        );
    }
    if args.targets.len() > 1 {
        return many::run(&args);
    }
    // Counting Ctrl-C from before the start, so that one pressed while the agent starts still
    // stops it (instead of killing kprofctl and leaving the capture running unwatched).
    let streamed = capture(&args.targets[0], &args, Echo::Plain, &|| {
        detached::count_interrupts();
    })?;
    // The capture is over: Ctrl-C from here on stops the download or ends kprofctl.
    crate::interrupt::exit_on_press();
    streamed.finish(&args)?;
    Ok(())
}

/// One board's capture, followed until the agent's end: what [`Streamed::finish`] needs.
struct Streamed {
    target: Target,
    remote: Remote,
    run: RunDir,
    ended: Ended,
    /// The labgrid place, held until the capture is fetched.
    _place: Option<Booking>,
}

/// Serializes `.kprof/state.toml`'s read-modify-write between boards capturing at once.
static STATE: Mutex<()> = Mutex::new(());

/// Connects to `spec`, checks the board, starts the agent (calling `starting` just before)
/// and follows its output into `echo` until it ends.
fn capture(
    spec: &str,
    args: &RunArgs,
    echo: Echo,
    starting: &dyn Fn(),
) -> anyhow::Result<Streamed> {
    let (target, place) = labgrid::resolve(spec, &args.lab, &args.ssh)?;
    let remote = Remote::connect(&target, &args.ssh)?;
    let remembered = {
        let _lock = STATE.lock().unwrap_or_else(|e| e.into_inner());
        State::load()?
            .targets
            .get(&target.spec)
            .and_then(|t| t.agent.clone())
    };
    let agent = preflight::preflight(&remote, remembered.as_deref(), args)?;

    // Remember the board before starting, so that `fetch` finds it even if the link drops.
    {
        let _lock = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = State::load()?;
        let entry = state.remember(&target.spec);
        entry.agent = Some(agent.clone());
        if let Some(dir) = &args.output_dir {
            if !entry.capture_dirs.contains(dir) {
                entry.capture_dirs.push(dir.clone());
            }
        }
        state.save()?;
    }
    starting();
    let probes = latency::agent_args(&remote, &agent, &args.latency, &args.symbols)?;
    let run = detached::start(&remote, &agent, &args.agent_args(&probes))?;
    let ended = detached::stream(&remote, &run, echo)?;
    Ok(Streamed {
        target,
        remote,
        run,
        ended,
        _place: place,
    })
}

impl Streamed {
    /// What became of the capture: its path (here with `--fetch`, else on the board), or why
    /// there is none.
    fn finish(&self, args: &RunArgs) -> anyhow::Result<String> {
        let Streamed {
            target,
            remote,
            run,
            ..
        } = self;
        match &self.ended {
            Ended::Exited {
                status: status @ (0 | TRUNCATED),
                last_line,
            } => captured(remote, target, run, args, *status, last_line),
            Ended::Exited { status, .. } => {
                run.remove(remote);
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
                "{target}: connection lost during the capture ({why}); the capture goes on on \
                 the board if it is still up (log in {}): `kprofctl fetch {}` gets it once it \
                 is done",
                run.dir,
                target.spec
            ),
        }
    }
}

/// The agent wrote its archive (complete, or `TRUNCATED` by a write error): the run dir goes,
/// the capture is named and, with `--fetch`, downloaded and reported.
fn captured(
    remote: &Remote,
    target: &Target,
    run: &RunDir,
    args: &RunArgs,
    status: i32,
    last_line: &str,
) -> anyhow::Result<String> {
    run.remove(remote);
    let capture = detached::capture_path(last_line, args.output_dir.as_deref());
    if !capture.starts_with('/') || !capture.ends_with(kprof_capture::ARCHIVE_SUFFIX) {
        anyhow::bail!(
            "{target}: kprof-agent finished but its last line is not a capture path: `{capture}`"
        );
    }
    crate::term::note(format_args!("capture on {target}: {capture}"));
    let mut fetched: Option<PathBuf> = None;
    if args.fetch {
        let fetch = super::fetch::FetchArgs {
            args: vec![target.spec.clone()],
            dest: args.dest.clone(),
            no_report: false,
            capture_dir: Vec::new(),
            ssh: args.ssh.clone(),
            lab: args.lab.clone(),
            symbols: args.symbols.clone(),
        };
        let here = super::fetch::fetch_paths(remote, &fetch, std::slice::from_ref(&capture))?;
        fetched = here.into_iter().next();
    }
    if status == TRUNCATED {
        // The agent said why above; the capture is valid up to where writing failed.
        anyhow::bail!(
            "{target}: the capture is TRUNCATED: writing perf.data on the board failed \
             (see kprof-agent's message above); {capture} holds what was recorded until \
             then{}",
            if args.fetch {
                ""
            } else {
                ": `kprofctl fetch` downloads it"
            }
        );
    }
    match fetched {
        Some(here) => Ok(here.display().to_string()),
        None => {
            crate::term::note("download it with `kprofctl fetch`");
            Ok(capture)
        }
    }
}

/// `kprof-agent record`'s exit status for a capture cut short by a write error (a full disk)
/// whose archive was written all the same.
const TRUNCATED: i32 = 3;

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
            cli.run.agent_args(&[]),
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
        assert_eq!(cli.run.agent_args(&[]), ["record", "--duration", "3"]);
    }

    /// `--call-graph` reaches the agent: fp as `-g` (which every agent takes), dwarf with its
    /// size; it conflicts with `--no-call-graph`.
    #[test]
    fn agent_args_call_graph_passed_through() {
        let args = |extra: &[&str]| {
            Cli::try_parse_from(["x", "b"].iter().chain(extra))
                .unwrap()
                .run
                .agent_args(&[])
        };
        assert_eq!(args(&["--call-graph", "fp"]), ["record", "-g"]);
        assert_eq!(args(&["--off-cpu"]), ["record", "-g", "--off-cpu"]);
        assert_eq!(
            args(&["--markers", "-e", "mychardrv:cache_traverse"]),
            [
                "record",
                "-e",
                "mychardrv:cache_traverse",
                "-g",
                "--markers"
            ]
        );
        assert_eq!(
            args(&["--call-graph", "dwarf"]),
            ["record", "--call-graph", "dwarf"]
        );
        assert_eq!(
            args(&["--call-graph=dwarf,4096"]),
            ["record", "--call-graph", "dwarf,4096"]
        );
        for bad in [
            &["--call-graph", "dwarf,100"][..],
            &["--call-graph", "lbr"],
            &["--call-graph", "dwarf", "--no-call-graph"],
        ] {
            assert!(
                Cli::try_parse_from(["x", "b"].iter().chain(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    /// `--compression-level N` reaches the agent attached (its level is optional, as perf's),
    /// `--no-compress` as it is; they conflict, and a level outside 1-22 is refused.
    #[test]
    fn agent_args_compression_passed_through() {
        let parse = |extra: &[&str]| Cli::try_parse_from(["x", "b"].iter().chain(extra));
        let args = |extra: &[&str]| parse(extra).unwrap().run.agent_args(&[]);
        assert_eq!(
            args(&["--compression-level", "3"]),
            ["record", "-g", "--compression-level=3"]
        );
        assert_eq!(args(&["--no-compress"]), ["record", "-g", "--no-compress"]);
        assert_eq!(args(&[]), ["record", "-g"]);
        for bad in [
            &["--compression-level", "0"][..],
            &["--compression-level", "23"],
            &["--compression-level", "3", "--no-compress"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
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
            cli.run.agent_args(&[]),
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
}
