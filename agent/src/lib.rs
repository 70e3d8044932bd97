//! kprof-agent: system-wide sampling with perf_event_open, written as a standard perf.data
//! inside a capture archive (`ID.kprof.tar.gz`) together with a manifest and kernel symbol
//! snapshots. See `docs/agent.md` and `docs/capture-format.md`.
//!
//! The library holds everything but argument handling so the pieces can be tested alone.

#![warn(missing_docs)]

pub mod archive;
pub mod cli;
pub mod dir_trust;
pub mod elf_build_id;
pub mod elf_id;
pub mod events;
pub mod ftrace_ring;
pub mod gzip;
pub mod info;
pub mod lfs;
pub mod perf_data_writer;
pub mod perf_records;
pub mod probe_spec;
pub mod procfs;
pub mod record;
pub mod ring;
pub mod store;
pub mod sys;
pub mod timefmt;
pub mod zstd_records;

use std::fmt;
use std::io;

/// Version written into manifests and the perf.data VERSION feature.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Everything that can make an agent command fail. Each renders as one line.
#[derive(Debug)]
pub enum Error {
    /// The command line is wrong.
    Usage(String),
    /// The kernel refused to open an event.
    Event {
        /// The event as the user named it.
        event: String,
        /// The errno perf_event_open returned.
        source: io::Error,
    },
    /// An I/O operation on a named thing failed.
    Io {
        /// What was being read or written, phrased for the message.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
    /// Anything else, already phrased for the user.
    Other(String),
}

impl Error {
    /// An [`Error::Io`] about `what`.
    pub fn io(what: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// Exit status for this error: 2 for usage errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// Explains an errno from perf_event_open in the terms a board user can act on.
fn event_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "the kernel has no such event on this machine (no hardware PMU, or the PMU lacks it)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not permitted: run as root or lower /proc/sys/kernel/perf_event_paranoid"
        }
        Some(libc::EINVAL) => "the kernel rejected its settings (period, frequency or event code)",
        Some(libc::EMFILE) => "too many open files: raise `ulimit -n`",
        Some(libc::ESRCH) => "no such process",
        _ => "",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Other(m) => f.write_str(m),
            Error::Event { event, source } => {
                write!(f, "cannot sample event `{event}`: {source}")?;
                match event_hint(source) {
                    "" => Ok(()),
                    h => write!(f, " ({h})"),
                }
            }
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Event { source, .. } | Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
