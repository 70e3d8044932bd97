//! The values of `kprofctl run`'s record options, checked when the command line is read so
//! that a typo fails before any ssh connection. Each displays as `kprof-agent record` takes
//! it, and accepts what the agent accepts.

use std::fmt::{self, Display, Formatter};
use std::num::NonZeroU64;
use std::str::FromStr;

/// `-F HZ`: a sampling frequency, or `max` for the board's `perf_event_max_sample_rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frequency {
    /// Samples per second.
    Hz(NonZeroU64),
    /// The highest the board's kernel allows.
    Max,
}

impl FromStr for Frequency {
    type Err = String;

    fn from_str(s: &str) -> Result<Frequency, String> {
        if s == "max" {
            return Ok(Frequency::Max);
        }
        s.parse()
            .map(Frequency::Hz)
            .map_err(|_| format!("`{s}` is not a frequency in Hz greater than 0 (or `max`)"))
    }
}

impl Display for Frequency {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Frequency::Hz(hz) => write!(f, "{hz}"),
            Frequency::Max => f.write_str("max"),
        }
    }
}

/// `-c PERIOD`: sample every PERIOD events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period(pub NonZeroU64);

impl FromStr for Period {
    type Err = String;

    fn from_str(s: &str) -> Result<Period, String> {
        s.parse()
            .map(Period)
            .map_err(|_| format!("`{s}` is not a period greater than 0"))
    }
}

impl Display for Period {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// `-p PID`: a process id on the board (positive, and within the kernel's `pid_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pid(pub i32);

impl FromStr for Pid {
    type Err = String;

    fn from_str(s: &str) -> Result<Pid, String> {
        match s.parse::<i32>() {
            Ok(pid) if pid > 0 => Ok(Pid(pid)),
            _ => Err(format!("`{s}` is not a process id")),
        }
    }
}

impl Display for Pid {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// `--call-graph MODE`: how the agent records call chains, `fp` or `dwarf[,SIZE]` with perf's
/// meaning and the agent's checks (SIZE a multiple of 8 up to 65528 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame pointers, walked by the board's kernel.
    Fp,
    /// User registers and `stack_size` bytes of user stack per sample, unwound on the host.
    Dwarf {
        /// `None`: the agent's default (8192, as perf).
        stack_size: Option<u32>,
    },
}

use kprof_capture::perf_abi::{self, CallGraphError, CallGraphSpec, MAX_STACK_USER};

impl FromStr for CallGraph {
    type Err = String;

    fn from_str(s: &str) -> Result<CallGraph, String> {
        match perf_abi::parse_call_graph(s) {
            Ok(CallGraphSpec::Fp) => Ok(CallGraph::Fp),
            Ok(CallGraphSpec::Dwarf { stack_size }) => Ok(CallGraph::Dwarf { stack_size }),
            Err(CallGraphError::SizeNotANumber(_) | CallGraphError::SizeOutOfRange(_)) => {
                Err(format!(
                    "`{s}`: the stack size must be a multiple of 8 between 8 and {MAX_STACK_USER} bytes"
                ))
            }
            Err(CallGraphError::NotAMode | CallGraphError::FpTakesNoSize) => Err(format!(
                "`{s}` is not a call graph mode (fp or dwarf[,SIZE])"
            )),
        }
    }
}

impl Display for CallGraph {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            CallGraph::Fp => f.write_str("fp"),
            CallGraph::Dwarf { stack_size: None } => f.write_str("dwarf"),
            CallGraph::Dwarf {
                stack_size: Some(n),
            } => write!(f, "dwarf,{n}"),
        }
    }
}

/// `-C CPUS`: CPU numbers as a list of numbers and ranges, `0,2-3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<u32>);

/// The agent's own bound on one range (procfs::parse_cpu_list): a typo such as `0-40000000`
/// must not turn into a list of millions.
const MAX_RANGE: u32 = 65536;

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<CpuList, String> {
        let invalid = || format!("`{s}` is not a CPU list like 0,2-3");
        let mut cpus = Vec::new();
        for part in s.trim().split(',').filter(|p| !p.is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => {
                    let a: u32 = a.parse().map_err(|_| invalid())?;
                    let b: u32 = b.parse().map_err(|_| invalid())?;
                    if a > b || b - a > MAX_RANGE {
                        return Err(invalid());
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(part.parse().map_err(|_| invalid())?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err(invalid());
        }
        Ok(CpuList(cpus))
    }
}

impl Display for CpuList {
    /// Consecutive CPUs as ranges: `0-3,6`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut rest = self.0.as_slice();
        let mut first = true;
        while let Some(&start) = rest.first() {
            let run = rest
                .iter()
                .zip(start..)
                .take_while(|(&cpu, expected)| cpu == *expected)
                .count();
            let end = rest[run - 1];
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if run == 1 {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            rest = &rest[run..];
        }
        Ok(())
    }
}

/// `--duration SECS`: a positive number of seconds, fractions allowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds(f64);

impl FromStr for Seconds {
    type Err = String;

    fn from_str(s: &str) -> Result<Seconds, String> {
        match s.parse::<f64>() {
            // The agent's bounds: more than 0 and a Duration it can hold.
            Ok(secs) if secs > 0.0 && secs < 1e9 => Ok(Seconds(secs)),
            _ => Err(format!("`{s}` is not a positive number of seconds")),
        }
    }
}

impl Display for Seconds {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hz and `max` parse and display as the agent takes them; 0 and words do not parse.
    #[test]
    fn parse_frequency_hz_max_and_invalid() {
        assert_eq!("999".parse::<Frequency>().unwrap().to_string(), "999");
        assert_eq!("max".parse::<Frequency>(), Ok(Frequency::Max));
        assert_eq!(Frequency::Max.to_string(), "max");
        for bad in ["0", "-5", "fast", "", "1.5"] {
            let err = bad.parse::<Frequency>().unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }

    /// A period is a count greater than 0.
    #[test]
    fn parse_period_positive_only() {
        assert_eq!("10000".parse::<Period>().unwrap().to_string(), "10000");
        assert!("0"
            .parse::<Period>()
            .unwrap_err()
            .contains("greater than 0"));
        assert!("x".parse::<Period>().is_err());
    }

    /// A pid is a positive `pid_t`.
    #[test]
    fn parse_pid_positive_pid_t() {
        assert_eq!("1234".parse::<Pid>(), Ok(Pid(1234)));
        for bad in ["0", "-1", "4294967295", "init"] {
            assert_eq!(
                bad.parse::<Pid>().unwrap_err(),
                format!("`{bad}` is not a process id")
            );
        }
    }

    /// fp and dwarf with or without a size parse and display as the agent takes them; sizes
    /// the agent refuses and other modes fail.
    #[test]
    fn parse_call_graph_modes_and_sizes() {
        assert_eq!("fp".parse::<CallGraph>(), Ok(CallGraph::Fp));
        for ok in ["fp", "dwarf", "dwarf,4096", "dwarf,65528"] {
            assert_eq!(ok.parse::<CallGraph>().unwrap().to_string(), ok);
        }
        for bad in ["dwarf,100", "dwarf,0", "dwarf,65536", "dwarf,x"] {
            let err = bad.parse::<CallGraph>().unwrap_err();
            assert!(err.contains("multiple of 8"), "{err}");
        }
        for bad in ["lbr", "fp,8", "", "dwarf,"] {
            assert!(bad.parse::<CallGraph>().is_err(), "{bad}");
        }
    }

    /// Lists and ranges are sorted, merged and shown as ranges; reversed, huge or empty
    /// ranges fail.
    #[test]
    fn parse_cpu_list_ranges_and_invalid() {
        let cpus: CpuList = "6,0-3,2".parse().unwrap();
        assert_eq!(cpus.0, [0, 1, 2, 3, 6]);
        assert_eq!(cpus.to_string(), "0-3,6");
        assert_eq!("1".parse::<CpuList>().unwrap().to_string(), "1");
        assert_eq!("0,2-3".parse::<CpuList>().unwrap().to_string(), "0,2-3");
        for bad in ["3-1", "a", "", ",", "0-4000000", "1-"] {
            assert_eq!(
                bad.parse::<CpuList>().unwrap_err(),
                format!("`{bad}` is not a CPU list like 0,2-3")
            );
        }
    }

    /// Whole and fractional seconds parse and display unchanged; 0, negative and huge fail.
    #[test]
    fn parse_seconds_fractions_and_invalid() {
        let s: Seconds = "3".parse().unwrap();
        assert_eq!((s.0, s.to_string()), (3.0, "3".to_owned()));
        let s: Seconds = "2.5".parse().unwrap();
        assert_eq!((s.0, s.to_string()), (2.5, "2.5".to_owned()));
        for bad in ["0", "-1", "1e10", "soon", "NaN"] {
            assert_eq!(
                bad.parse::<Seconds>().unwrap_err(),
                format!("`{bad}` is not a positive number of seconds")
            );
        }
    }
}
