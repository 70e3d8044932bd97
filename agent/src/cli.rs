//! Hand-written argument parsing (the agent keeps its dependencies few; the syntax follows
//! `perf record`: short options take their value attached or as the next argument).

use std::path::PathBuf;
use std::time::Duration;

use crate::events::{self, EventSpec};
use crate::probe_spec;
pub use crate::probe_spec::LatencyTarget;
use crate::Error;

/// `kprof-agent --help` and the tail of every usage error.
pub const USAGE: &str = "\
usage: kprof-agent record [-e EVENT[,EVENT...]] [-F HZ | -c PERIOD] [-g | --call-graph MODE]
                          [-a | -p PID] [-C CPUS] [--duration SECS] [-o DIR] [--mmap-pages N]
                          [-z | --compression-level[=N] | --no-compress] [--off-cpu]
                          [--markers] [--latency FUNC[,FUNC...]] [--latency-user SPEC]
                          [--contention] [--no-sample] [--min-free SIZE] [--nice N]
                          [-- CMD ARGS...]
       kprof-agent info
       kprof-agent elf-id FILE|LIBRARY|PROGRAM...
       kprof-agent list [-o DIR] [--json]
       kprof-agent rm [-o DIR] ID...

record   sample the whole system (or -p PID) until CMD exits, --duration passes, or
         SIGINT/SIGTERM; the last line printed is the path of the capture archive
  -e EVENT    cpu-clock, task-clock, page-faults, context-switches, cycles, instructions,
              cache-references, cache-misses, branch-misses, L1-dcache-loads, ...,
              rNNNN (raw PMU code); per-event period: r03/period=10000/  (default: cycles,
              else cpu-clock); SUBSYS:EVENT: a tracepoint (sched:sched_process_exec, a
              driver's), every hit with its fields (tracefs: KPROF_TRACEFS)
  -F HZ       sampling frequency (default 4000)      -c PERIOD  fixed sample period
  -g          record call chains (frame pointers)    -a         all CPUs, system-wide (default)
  --call-graph fp|dwarf[,SIZE]   call chains by frame pointers, or user registers and SIZE
              bytes of user stack (default 8192, a multiple of 8 up to 65528) for DWARF unwinding
  -p PID      only this process and its threads      -C CPUS    CPU list, e.g. 0,2-3
  --duration SECS   stop after SECS seconds          -o DIR     capture dir
  --mmap-pages N    ring buffer pages per CPU, a power of two (default 128, 512 with dwarf)
  -z, --compression-level[=N]   zstd-compress perf.data's records while recording, as
              `perf record -z` (N 1-22, default 1; on by default)
  --no-compress     write perf.data's records uncompressed (least CPU, largest archive)
  --off-cpu   also record every context switch (sched:sched_switch with call chains) for
              off-CPU time: where threads block and for how long (tracefs: KPROF_TRACEFS;
              default --mmap-pages 512)
  --markers   also record the lines applications write to tracefs trace_marker (time,
              pid/tid, CPU, text) as ftrace:print samples, read from ftrace's ring buffer;
              sets ftrace's trace_clock to perf and tracing_on to 1 for the capture (both
              put back after) and consumes that buffer (docs/markers.md)
  --latency FUNC[,FUNC...]   time every call of these kernel functions (FUNC or
              MODULE:FUNC): a kprobe at the entry (with call chain) and a kretprobe at the
              return, through perf's kprobe PMU; the kernel removes them when the agent ends,
              however it ends (docs/latency.md)
  --latency-user PATH:OFFSET:BUILD_ID:FUNCTION   the same for a user function, by file
              offset (kprofctl resolves `PROGRAM:FUNC` on the host); an empty BUILD_ID skips
              the check that PATH is the build the offset came from
  --contention   also record kernel lock waits (lock:contention_begin/end) and futex waits
              (syscalls:sys_enter_futex/sys_exit_futex), each with its call chain
  --no-sample   open no sampling event: only --latency, --contention, --off-cpu, --markers
  --min-free SIZE   refuse to start with less free space in the capture dir (default 16M;
              K/M/G suffixes, 0: no check); a capture that fills the disk is stopped and
              sealed truncated (exit status 3)
  --nice N    raise the agent's priority to nice N while it records (default: as
              started); -19 (gatord's) keeps a fully loaded board from starving it of CPU when
              it loses samples; CMD keeps the priority the agent was started with
elf-id   each file's real path and GNU build-id, tab-separated (a library by soname, a
         program by $PATH), for kprofctl's --latency PROGRAM:FUNC
info     board facts as JSON (kernel, build-ids, modules, sysctls, PMU events)
list     captures in the capture dir
rm       delete captures by id
(capture dir default: /var/lib/kprof/captures)";

/// Default ring buffer size per CPU: 512 KiB with 4 KiB pages, room for >100 ms of 4 kHz
/// samples with deep call chains between two wake-ups.
pub const DEFAULT_MMAP_PAGES: usize = 128;
/// Default ring size with `--call-graph dwarf`: each sample carries its stack copy (8 KiB by
/// default), so 512 KiB holds only ~60 samples; 2 MiB per CPU keeps the same ~100 ms of 4 kHz
/// headroom between wake-ups as [`DEFAULT_MMAP_PAGES`] gives frame-pointer samples.
pub const DEFAULT_MMAP_PAGES_DWARF: usize = 512;
/// Samples per second per CPU unless `-F`/`-c` say otherwise (perf's default).
pub const DEFAULT_FREQ: u64 = 4000;
/// The free space a capture dir must have for `record` to start (`--min-free`): room for
/// the kallsyms snapshot (a few MiB), the reserve kept for sealing and some seconds of
/// samples.
pub const DEFAULT_MIN_FREE: u64 = 16 << 20;
/// zstd level of perf.data's records unless told otherwise: level 1, perf's `-z` default. On
/// by default because the archive is what a board stores and sends: 7-8x smaller perf.data
/// for dwarf captures, at less CPU than the gzip pass it replaces (docs/performance.md).
pub const DEFAULT_COMPRESSION: Option<i32> = Some(1);
use kprof_capture::perf_abi::{self, CallGraphError, CallGraphSpec};
pub use kprof_capture::perf_abi::{DEFAULT_STACK_USER, MAX_STACK_USER};

/// How call chains are recorded (`-g`, `--call-graph`), with perf's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// The kernel walks frame pointers, in the kernel and in user space.
    Fp,
    /// The kernel chain, plus the user registers and `stack_size` bytes of user stack for
    /// DWARF (CFI) unwinding on the host.
    Dwarf {
        /// Bytes of user stack copied with each sample.
        stack_size: u32,
    },
}

impl CallGraph {
    /// Parses `fp`, `dwarf` or `dwarf,SIZE` by kprof-capture's rules
    /// ([`perf_abi::parse_call_graph`]); `dwarf` alone is [`DEFAULT_STACK_USER`].
    pub fn parse(v: &str) -> Result<CallGraph, Error> {
        match perf_abi::parse_call_graph(v) {
            Ok(CallGraphSpec::Fp) => Ok(CallGraph::Fp),
            Ok(CallGraphSpec::Dwarf { stack_size }) => Ok(CallGraph::Dwarf {
                stack_size: stack_size.unwrap_or(DEFAULT_STACK_USER),
            }),
            Err(CallGraphError::SizeNotANumber(s)) => Err(usage(format!(
                "option --call-graph: stack size `{s}` is not a number of bytes"
            ))),
            Err(CallGraphError::SizeOutOfRange(n)) => Err(usage(format!(
                "option --call-graph: stack size {n} must be a multiple of 8 \
                 between 8 and {MAX_STACK_USER} bytes"
            ))),
            Err(CallGraphError::FpTakesNoSize) => Err(usage(
                "option --call-graph: `fp` takes no size (fp or dwarf[,SIZE])",
            )),
            Err(CallGraphError::NotAMode) => Err(usage(format!(
                "option --call-graph: `{v}` is not a call graph mode (fp or dwarf[,SIZE])"
            ))),
        }
    }

    /// The manifest's `call_graph`.
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::Fp => "fp",
            CallGraph::Dwarf { .. } => "dwarf",
        }
    }
}

/// Options of `record`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordOpts {
    /// Empty: the default event (cycles, falling back to cpu-clock).
    pub events: Vec<EventSpec>,
    /// `-F HZ`: sampling frequency per CPU.
    pub freq: Option<u64>,
    /// `-c PERIOD`: sample every PERIOD events instead of a frequency.
    pub period: Option<u64>,
    /// `None`: no call chains.
    pub call_graph: Option<CallGraph>,
    /// `-p PID`: that process only (`None`: the whole system, `-a`).
    pub pid: Option<i32>,
    /// `-C CPUS`: only these CPUs (`None`: all online CPUs).
    pub cpus: Option<Vec<u32>>,
    /// `--duration SECS`: stop after this long (`None`: at the workload's exit or a signal).
    pub duration: Option<Duration>,
    /// `-o DIR`: the capture dir.
    pub out_dir: PathBuf,
    /// `--mmap-pages N`: data pages of each per-CPU ring buffer (a power of two).
    pub mmap_pages: usize,
    /// zstd level of perf.data's records; `None`: uncompressed.
    pub compression: Option<i32>,
    /// `-- CMD ARGS...`: the workload started and profiled (empty: none).
    pub command: Vec<String>,
    /// `--off-cpu`: also record context switches (sched:sched_switch).
    pub off_cpu: bool,
    /// `--markers`: also record the lines written to tracefs `trace_marker`, as `ftrace:print`
    /// samples read from ftrace's ring buffer.
    pub markers: bool,
    /// `--latency` and `--latency-user`: the functions to time with entry and return probes.
    pub latency: Vec<LatencyTarget>,
    /// `--contention`: also record lock and futex waits.
    pub contention: bool,
    /// `--no-sample`: no sampling event, only the traced ones.
    pub no_sample: bool,
    /// `--min-free`: bytes the capture dir must have free to start; 0 skips the check.
    pub min_free: u64,
    /// `--nice N`: the agent's nice value while it records (`None`: as started).
    pub nice: Option<i32>,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `record`: sample and write a capture.
    Record(RecordOpts),
    /// `info`: what kprofctl's preflight needs to know of the board, as JSON.
    Info,
    /// `list`: the captures in a capture dir.
    List {
        /// The capture dir (`-o`).
        dir: PathBuf,
        /// `--json`: one JSON document instead of a table.
        json: bool,
    },
    /// `rm ID...`: delete captures.
    Rm {
        /// The capture dir (`-o`).
        dir: PathBuf,
        /// The captures to delete.
        ids: Vec<String>,
    },
    /// `elf-id NAME...`: each name's file and build-id.
    ElfId(Vec<String>),
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// Walks the arguments, yielding `(option, attached value)` pairs and positionals.
struct Args<'a> {
    args: &'a [String],
    i: usize,
}

impl<'a> Args<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let a = self.args.get(self.i)?;
        self.i += 1;
        Some(a)
    }
    fn value(&mut self, opt: &str, attached: Option<&'a str>) -> Result<&'a str, Error> {
        match attached {
            Some(v) => Ok(v),
            None => self
                .next()
                .ok_or_else(|| usage(format!("option {opt} needs a value"))),
        }
    }
    fn rest(&mut self) -> Vec<String> {
        let r = self.args[self.i..].to_vec();
        self.i = self.args.len();
        r
    }
}

/// Splits `-F4000` / `--duration=5` into option and attached value.
fn split_opt(a: &str) -> (&str, Option<&str>) {
    if let Some(long) = a.strip_prefix("--") {
        match long.split_once('=') {
            Some((k, v)) => (&a[..2 + k.len()], Some(v)),
            None => (a, None),
        }
    } else if a.len() > 2 && a.starts_with('-') && a.is_char_boundary(2) {
        (&a[..2], Some(&a[2..]))
    } else {
        (a, None)
    }
}

fn number<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, Error> {
    v.parse()
        .map_err(|_| usage(format!("option {opt}: `{v}` is not a valid number")))
}

/// `16M`, `512K`, `1G` or plain bytes.
fn parse_size(v: &str) -> Option<u64> {
    let (digits, shift) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// A byte count for messages: `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A zstd level as perf takes it.
fn compression_level(opt: &str, v: &str) -> Result<i32, Error> {
    let range = crate::zstd_records::LEVELS;
    match v.parse::<i32>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(usage(format!(
            "option {opt}: `{v}` is not a zstd level ({}-{})",
            range.start(),
            range.end()
        ))),
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, Error> {
    let Some(sub) = args.first() else {
        return Err(usage(format!("missing command\n{USAGE}")));
    };
    let rest = &args[1..];
    match sub.as_str() {
        "record" => Ok(parse_record(rest)?.map_or(Command::Help, Command::Record)),
        "elf-id" if rest.is_empty() => Err(usage("elf-id: name at least one file")),
        "elf-id" => Ok(Command::ElfId(rest.to_vec())),
        "info" => match rest.first() {
            None => Ok(Command::Info),
            Some(a) => Err(usage(format!("info: unexpected argument `{a}`"))),
        },
        "list" | "rm" => {
            let mut it = Args { args: rest, i: 0 };
            let mut dir = PathBuf::from(kprof_capture::CAPTURE_DIR);
            let mut json = false;
            let mut ids = Vec::new();
            while let Some(a) = it.next() {
                let (opt, att) = split_opt(a);
                match opt {
                    "-o" | "--output" => dir = PathBuf::from(it.value(opt, att)?),
                    "--json" if sub == "list" => json = true,
                    "-h" | "--help" => return Ok(Command::Help),
                    "--" => ids.extend(it.rest()),
                    _ if a.starts_with('-') => {
                        return Err(usage(format!("{sub}: unknown option `{a}`")))
                    }
                    _ if sub == "rm" => ids.push(a.to_string()),
                    _ => return Err(usage(format!("list: unexpected argument `{a}`"))),
                }
            }
            if sub == "list" {
                Ok(Command::List { dir, json })
            } else if ids.is_empty() {
                Err(usage("rm: give at least one capture ID"))
            } else {
                Ok(Command::Rm { dir, ids })
            }
        }
        "-h" | "--help" | "help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        other => Err(usage(format!(
            "unknown command `{other}` (record, info, list, rm)"
        ))),
    }
}

/// `None` when help was asked for.
fn parse_record(args: &[String]) -> Result<Option<RecordOpts>, Error> {
    let mut o = RecordOpts {
        events: Vec::new(),
        freq: None,
        period: None,
        call_graph: None,
        pid: None,
        cpus: None,
        duration: None,
        out_dir: PathBuf::from(kprof_capture::CAPTURE_DIR),
        mmap_pages: DEFAULT_MMAP_PAGES,
        compression: DEFAULT_COMPRESSION,
        command: Vec::new(),
        off_cpu: false,
        markers: false,
        latency: Vec::new(),
        contention: false,
        no_sample: false,
        min_free: DEFAULT_MIN_FREE,
        nice: None,
    };
    let mut mmap_pages = None;
    let mut all_cpus = false;
    let mut it = Args { args, i: 0 };
    while let Some(a) = it.next() {
        if a == "--" {
            o.command = it.rest();
            break;
        }
        if !a.starts_with('-') || a == "-" {
            // Like perf: the first non-option starts the command.
            o.command = std::iter::once(a.to_string()).chain(it.rest()).collect();
            break;
        }
        let (opt, att) = split_opt(a);
        match opt {
            "-e" | "--event" => o.events.extend(events::parse_list(it.value(opt, att)?)?),
            "-F" | "--freq" => o.freq = Some(freq(opt, it.value(opt, att)?)?),
            "-c" | "--count" => o.period = Some(number(opt, it.value(opt, att)?)?),
            "-g" if att.is_none() => o.call_graph = Some(CallGraph::Fp),
            "--call-graph" => o.call_graph = Some(CallGraph::parse(it.value(opt, att)?)?),
            "-a" | "--all-cpus" if att.is_none() => all_cpus = true,
            "-p" | "--pid" => o.pid = Some(pid(opt, it.value(opt, att)?)?),
            "-C" | "--cpu" => o.cpus = Some(cpu_list(it.value(opt, att)?)?),
            "--duration" => o.duration = Some(duration(opt, it.value(opt, att)?)?),
            "-o" | "--output" => o.out_dir = PathBuf::from(it.value(opt, att)?),
            "-h" | "--help" => return Ok(None),
            "--off-cpu" if att.is_none() => o.off_cpu = true,
            "--markers" if att.is_none() => o.markers = true,
            "--latency" => o
                .latency
                .extend(probe_spec::parse_kernel_list(it.value(opt, att)?)?),
            "--latency-user" => o.latency.push(probe_spec::parse_user(it.value(opt, att)?)?),
            "--contention" if att.is_none() => o.contention = true,
            "--no-sample" if att.is_none() => o.no_sample = true,
            "--mmap-pages" | "-m" => mmap_pages = Some(pages(opt, it.value(opt, att)?)?),
            // perf's optional value: attached only (`-z3`, `--compression-level=3`).
            "-z" | "--compression-level" => {
                o.compression = Some(match att {
                    None => 1,
                    Some(v) => compression_level(opt, v)?,
                })
            }
            "--no-compress" if att.is_none() => o.compression = None,
            "--min-free" => o.min_free = min_free(it.value(opt, att)?)?,
            "--nice" => o.nice = Some(nice(opt, it.value(opt, att)?)?),
            _ => return Err(usage(format!("record: unknown option `{a}`"))),
        }
    }
    o.mmap_pages = mmap_pages.unwrap_or(match o.call_graph {
        Some(CallGraph::Dwarf { .. }) => DEFAULT_MMAP_PAGES_DWARF,
        // Every context switch is a sample: on a busy board thousands a second, in bursts.
        _ if o.off_cpu || o.contention || !o.latency.is_empty() => DEFAULT_MMAP_PAGES_DWARF,
        _ => DEFAULT_MMAP_PAGES,
    });
    check_record(&o, all_cpus)?;
    Ok(Some(o))
}

/// What the options say only together: exclusive pairs, zero rates.
fn check_record(o: &RecordOpts, all_cpus: bool) -> Result<(), Error> {
    if o.freq.is_some() && o.period.is_some() {
        return Err(usage("options -F and -c are exclusive"));
    }
    if o.freq == Some(0) {
        return Err(usage("option -F: frequency must be greater than 0"));
    }
    if o.period == Some(0) {
        return Err(usage("option -c: period must be greater than 0"));
    }
    if all_cpus && o.pid.is_some() {
        return Err(usage("options -a and -p are exclusive"));
    }
    if o.pid.is_some() && !o.command.is_empty() {
        return Err(usage("-p PID and a command are exclusive"));
    }
    if o.no_sample && !(o.off_cpu || o.markers || o.contention || !o.latency.is_empty()) {
        return Err(usage(
            "--no-sample needs --latency, --latency-user, --contention, --off-cpu or --markers",
        ));
    }
    if o.no_sample && !o.events.is_empty() {
        return Err(usage("--no-sample and -e are exclusive"));
    }
    Ok(())
}

/// `-F N` or `-F max` (the kernel's `perf_event_max_sample_rate`, as perf reads it).
fn freq(opt: &str, v: &str) -> Result<u64, Error> {
    if v == "max" {
        Ok(crate::sys::kernel_sysctl("perf_event_max_sample_rate").unwrap_or(1000) as u64)
    } else {
        number(opt, v)
    }
}

/// `-p PID`: a positive process id.
fn pid(opt: &str, v: &str) -> Result<i32, Error> {
    let pid: i32 = number(opt, v)?;
    if pid <= 0 {
        return Err(usage(format!("option -p: `{v}` is not a process id")));
    }
    Ok(pid)
}

/// `-C LIST`: CPUs as `0,2-3`.
fn cpu_list(v: &str) -> Result<Vec<u32>, Error> {
    crate::procfs::parse_cpu_list(v)
        .ok_or_else(|| usage(format!("option -C: `{v}` is not a CPU list like 0,2-3")))
}

/// `--duration SECS`: positive seconds, fractions allowed.
fn duration(opt: &str, v: &str) -> Result<Duration, Error> {
    let secs: f64 = number(opt, v)?;
    if !(secs > 0.0 && secs < 1e9) {
        return Err(usage(format!(
            "option --duration: `{v}` must be a positive number of seconds"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--mmap-pages N`: a power of two, at most 2^20.
fn pages(opt: &str, v: &str) -> Result<usize, Error> {
    let n: usize = number(opt, v)?;
    if n == 0 || !n.is_power_of_two() || n > 1 << 20 {
        return Err(usage(format!(
            "option --mmap-pages: `{v}` must be a power of two (1, 2, 4, ...)"
        )));
    }
    Ok(n)
}

/// `--min-free SIZE`: bytes, or with a K/M/G suffix.
fn min_free(v: &str) -> Result<u64, Error> {
    parse_size(v).ok_or_else(|| {
        usage(format!(
            "option --min-free: `{v}` is not a size (bytes, or with a K/M/G suffix)"
        ))
    })
}

/// A nice value, -20 (highest priority) to 19.
fn nice(opt: &str, v: &str) -> Result<i32, Error> {
    v.parse::<i32>()
        .ok()
        .filter(|n| (-20..=19).contains(n))
        .ok_or_else(|| {
            usage(format!(
                "option {opt}: `{v}` is not a nice value (-20 to 19)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// `--nice` takes -20 to 19, is unset by default (the agent keeps the priority it was
    /// started with) and refuses anything else naming the option.
    #[test]
    fn parse_record_nice_values() {
        let nice = |a: &str| match parse(&args(a)) {
            Ok(Command::Record(o)) => Ok(o.nice),
            Ok(c) => panic!("{c:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(nice("record -- true"), Ok(None));
        assert_eq!(nice("record --nice -19 -- true"), Ok(Some(-19)));
        assert_eq!(nice("record --nice=-20 -- true"), Ok(Some(-20)));
        for bad in ["record --nice -21", "record --nice 20", "record --nice x"] {
            let e = nice(bad).unwrap_err();
            assert!(
                e.contains("option --nice") && e.contains("not a nice value"),
                "{e}"
            );
        }
    }

    /// `--min-free` takes bytes or K/M/G sizes (0 turns the check off) and refuses anything
    /// else naming the option; it defaults to the documented floor.
    #[test]
    fn parse_record_min_free_sizes() {
        let min_free = |a: &str| match parse(&args(a)) {
            Ok(Command::Record(o)) => Ok(o.min_free),
            Ok(_) => panic!(),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(min_free("record"), Ok(DEFAULT_MIN_FREE));
        assert_eq!(min_free("record --min-free 0"), Ok(0));
        assert_eq!(min_free("record --min-free=512K"), Ok(512 << 10));
        assert_eq!(min_free("record --min-free 2M"), Ok(2 << 20));
        assert_eq!(min_free("record --min-free 4096"), Ok(4096));
        let e = min_free("record --min-free 2X").unwrap_err();
        assert!(e.contains("--min-free") && e.contains("`2X`"), "{e}");
        assert!(min_free("record --min-free 99999999999G").is_err());
    }

    /// The example command line parses into the expected options.
    #[test]
    fn parse_record_full_command_line() {
        let Command::Record(o) =
            parse(&args("record -e cpu-clock -F4000 -g -C 0-1 --duration=2.5 -o /tmp/x --mmap-pages 8 -- ./busy -n 3")).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.events[0].name, "cpu-clock");
        assert_eq!(o.freq, Some(4000));
        assert_eq!(o.call_graph, Some(CallGraph::Fp));
        assert_eq!(o.cpus, Some(vec![0, 1]));
        assert_eq!(o.duration, Some(Duration::from_millis(2500)));
        assert_eq!(o.out_dir, PathBuf::from("/tmp/x"));
        assert_eq!(o.mmap_pages, 8);
        assert_eq!(o.command, args("./busy -n 3"));
        assert!(!o.off_cpu);
        let Command::Record(o) = parse(&args("record --off-cpu -g -- sleep 1")).unwrap() else {
            panic!()
        };
        assert!(o.off_cpu);
        assert!(!o.markers);
        let Command::Record(o) = parse(&args("record --markers -- sleep 1")).unwrap() else {
            panic!()
        };
        assert!(o.markers);
    }

    /// Conflicting or malformed options are usage errors naming the option.
    #[test]
    fn parse_record_bad_options_rejected() {
        for (line, needle) in [
            ("record -F 0", "-F"),
            ("record -F 10 -c 5", "exclusive"),
            ("record -c x", "-c"),
            ("record --mmap-pages 3", "--mmap-pages"),
            ("record -p 0", "-p"),
            ("record -C 5-1", "-C"),
            ("record --duration -1", "--duration"),
            ("record --bogus", "--bogus"),
            ("record -e", "-e"),
            ("record --call-graph dwarf,100", "multiple of 8"),
            ("record --call-graph dwarf,0", "multiple of 8"),
            ("record --call-graph dwarf,65536", "65528"),
            ("record --call-graph dwarf,4k", "not a number"),
            ("record --call-graph fp,8", "no size"),
            ("record --call-graph lbr", "lbr"),
            ("record --call-graph", "needs a value"),
            ("record --compression-level=0", "zstd level (1-22)"),
            ("record -z23", "-z"),
            ("record --compression-level=fast", "--compression-level"),
            ("record --no-compress=1", "--no-compress"),
            ("record --markers=1", "--markers"),
            ("frob", "frob"),
            ("rm", "ID"),
        ] {
            let e = parse(&args(line)).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{line}");
            assert!(e.to_string().contains(needle), "{line}: {e}");
        }
    }

    /// `list` and `rm` take the capture dir and ids.
    #[test]
    fn parse_list_and_rm_arguments() {
        assert_eq!(
            parse(&args("rm -o /d a b")).unwrap(),
            Command::Rm {
                dir: "/d".into(),
                ids: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            parse(&args("list --json")).unwrap(),
            Command::List {
                dir: kprof_capture::CAPTURE_DIR.into(),
                json: true
            }
        );
    }

    /// `--help` asks for help, except inside the workload's own arguments.
    #[test]
    fn parse_help_not_inside_command() {
        assert_eq!(parse(&args("record -g --help")).unwrap(), Command::Help);
        assert_eq!(parse(&args("list -h")).unwrap(), Command::Help);
        let Command::Record(o) = parse(&args("record -g -- ls --help")).unwrap() else {
            panic!()
        };
        assert_eq!(o.command, args("ls --help"));
    }

    /// `--call-graph` takes perf's modes; `-g` means `fp`; dwarf defaults to an 8 KiB stack
    /// and a larger ring unless `--mmap-pages` says otherwise.
    #[test]
    fn parse_record_call_graph_modes() {
        let rec = |line: &str| match parse(&args(line)).unwrap() {
            Command::Record(o) => o,
            c => panic!("{c:?}"),
        };
        let o = rec("record --call-graph dwarf,4096");
        assert_eq!(o.call_graph, Some(CallGraph::Dwarf { stack_size: 4096 }));
        assert_eq!(o.mmap_pages, DEFAULT_MMAP_PAGES_DWARF);
        let o = rec("record --call-graph=dwarf -m 64");
        assert_eq!(o.call_graph, Some(CallGraph::Dwarf { stack_size: 8192 }));
        assert_eq!(o.mmap_pages, 64);
        let o = rec("record --call-graph fp");
        assert_eq!(o.call_graph, Some(CallGraph::Fp));
        assert_eq!(o.mmap_pages, DEFAULT_MMAP_PAGES);
        assert_eq!(rec("record -g").call_graph, Some(CallGraph::Fp));
        assert_eq!(rec("record").call_graph, None);
        assert_eq!(
            rec("record --call-graph dwarf,65528").call_graph,
            Some(CallGraph::Dwarf { stack_size: 65528 })
        );
        // The last one given wins, as in perf.
        assert_eq!(
            rec("record --call-graph dwarf -g").call_graph,
            Some(CallGraph::Fp)
        );
    }

    /// Compression is on at level 1 unless `--no-compress`; `-z`/`--compression-level` take
    /// perf's optional attached level; the last option given wins.
    #[test]
    fn parse_record_compression_levels() {
        let level = |line: &str| match parse(&args(line)).unwrap() {
            Command::Record(o) => o.compression,
            c => panic!("{c:?}"),
        };
        assert_eq!(level("record"), DEFAULT_COMPRESSION);
        assert_eq!(level("record --no-compress"), None);
        assert_eq!(level("record --no-compress -z"), Some(1));
        assert_eq!(level("record -z7"), Some(7));
        assert_eq!(level("record --compression-level=22"), Some(22));
        assert_eq!(level("record -z3 --no-compress"), None);
        let Command::Record(o) = parse(&args("record --compression-level 3")).unwrap() else {
            panic!()
        };
        assert_eq!((o.compression, o.command), (Some(1), args("3")));
    }
}
