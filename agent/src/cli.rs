//! Hand-written argument parsing (the agent keeps its dependencies few; the syntax follows
//! `perf record`: short options take their value attached or as the next argument).

use std::path::PathBuf;
use std::time::Duration;

use crate::events::{self, EventSpec};
use crate::Error;

pub const USAGE: &str = "\
usage: kprof-agent record [-e EVENT[,EVENT...]] [-F HZ | -c PERIOD] [-g] [-a | -p PID]
                          [-C CPUS] [--duration SECS] [-o DIR] [--mmap-pages N] [-- CMD ARGS...]
       kprof-agent info
       kprof-agent list [-o DIR] [--json]
       kprof-agent rm [-o DIR] ID...

record   sample the whole system (or -p PID) until CMD exits, --duration passes, or
         SIGINT/SIGTERM; the last line printed is the path of the capture archive
  -e EVENT    cpu-clock, task-clock, page-faults, context-switches, cycles, instructions,
              cache-references, cache-misses, branch-misses, L1-dcache-loads, ...,
              rNNNN (raw PMU code); per-event period: r03/period=10000/  (default: cycles,
              else cpu-clock)
  -F HZ       sampling frequency (default 4000)      -c PERIOD  fixed sample period
  -g          record call chains (frame pointers)    -a         all CPUs, system-wide (default)
  -p PID      only this process and its threads      -C CPUS    CPU list, e.g. 0,2-3
  --duration SECS   stop after SECS seconds          -o DIR     capture dir
  --mmap-pages N    ring buffer pages per CPU, a power of two (default 128)
info     board facts as JSON (kernel, build-ids, modules, sysctls, PMU events)
list     captures in the capture dir
rm       delete captures by id
(capture dir default: /var/lib/kprof/captures)";

/// Default ring buffer size per CPU: 512 KiB with 4 KiB pages, room for >100 ms of 4 kHz
/// samples with deep call chains between two wake-ups.
pub const DEFAULT_MMAP_PAGES: usize = 128;
pub const DEFAULT_FREQ: u64 = 4000;

/// Options of `record`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordOpts {
    /// Empty: the default event (cycles, falling back to cpu-clock).
    pub events: Vec<EventSpec>,
    pub freq: Option<u64>,
    pub period: Option<u64>,
    pub callchain: bool,
    pub pid: Option<i32>,
    pub cpus: Option<Vec<u32>>,
    pub duration: Option<Duration>,
    pub out_dir: PathBuf,
    pub mmap_pages: usize,
    pub command: Vec<String>,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Record(RecordOpts),
    Info,
    List { dir: PathBuf, json: bool },
    Rm { dir: PathBuf, ids: Vec<String> },
    Help,
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

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, Error> {
    let Some(sub) = args.first() else {
        return Err(usage(format!("missing command\n{USAGE}")));
    };
    let rest = &args[1..];
    match sub.as_str() {
        "record" => Ok(parse_record(rest)?.map_or(Command::Help, Command::Record)),
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
        callchain: false,
        pid: None,
        cpus: None,
        duration: None,
        out_dir: PathBuf::from(kprof_capture::CAPTURE_DIR),
        mmap_pages: DEFAULT_MMAP_PAGES,
        command: Vec::new(),
    };
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
            "-F" | "--freq" => {
                let v = it.value(opt, att)?;
                o.freq = Some(if v == "max" {
                    crate::sys::kernel_sysctl("perf_event_max_sample_rate").unwrap_or(1000) as u64
                } else {
                    number(opt, v)?
                });
            }
            "-c" | "--count" => o.period = Some(number(opt, it.value(opt, att)?)?),
            "-g" if att.is_none() => o.callchain = true,
            "-a" | "--all-cpus" if att.is_none() => all_cpus = true,
            "-p" | "--pid" => {
                let v = it.value(opt, att)?;
                let pid: i32 = number(opt, v)?;
                if pid <= 0 {
                    return Err(usage(format!("option -p: `{v}` is not a process id")));
                }
                o.pid = Some(pid);
            }
            "-C" | "--cpu" => {
                let v = it.value(opt, att)?;
                o.cpus = Some(crate::procfs::parse_cpu_list(v).ok_or_else(|| {
                    usage(format!("option -C: `{v}` is not a CPU list like 0,2-3"))
                })?);
            }
            "--duration" => {
                let v = it.value(opt, att)?;
                let secs: f64 = number(opt, v)?;
                if !(secs > 0.0 && secs < 1e9) {
                    return Err(usage(format!(
                        "option --duration: `{v}` must be a positive number of seconds"
                    )));
                }
                o.duration = Some(Duration::from_secs_f64(secs));
            }
            "-o" | "--output" => o.out_dir = PathBuf::from(it.value(opt, att)?),
            "-h" | "--help" => return Ok(None),
            "--mmap-pages" | "-m" => {
                let v = it.value(opt, att)?;
                let n: usize = number(opt, v)?;
                if n == 0 || !n.is_power_of_two() || n > 1 << 20 {
                    return Err(usage(format!(
                        "option --mmap-pages: `{v}` must be a power of two (1, 2, 4, ...)"
                    )));
                }
                o.mmap_pages = n;
            }
            _ => return Err(usage(format!("record: unknown option `{a}`"))),
        }
    }
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
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
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
        assert!(o.callchain);
        assert_eq!(o.cpus, Some(vec![0, 1]));
        assert_eq!(o.duration, Some(Duration::from_millis(2500)));
        assert_eq!(o.out_dir, PathBuf::from("/tmp/x"));
        assert_eq!(o.mmap_pages, 8);
        assert_eq!(o.command, args("./busy -n 3"));
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
}
