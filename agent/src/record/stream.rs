//! Ring streaming: one mmap'd ring per CPU (every other event on that CPU redirected into it),
//! drained into the sink whenever the kernel wakes us, until something says stop.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use kprof_capture::manifest::RingDropped;

use super::markers::Markers;
use super::open_events::Opened;
use super::signals::Signals;
use super::sink::Sink;
use super::workload::Workload;
use crate::perf_records;
use crate::procfs;
use crate::ring::Ring;
use crate::sys;
use crate::Error;

/// Why sampling stopped, as the manifest spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    CommandExited,
    Duration,
    /// A terminating signal; 0 when poll itself failed.
    Signal(i32),
    TargetExited,
    /// Writing perf.data failed.
    WriteError,
}

impl Stop {
    /// The manifest's `stop_reason`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Stop::CommandExited => "command-exited",
            Stop::Duration => "duration",
            Stop::Signal(_) => "signal",
            Stop::TargetExited => "target-exited",
            Stop::WriteError => "write-error",
        }
    }
}

/// The mapped rings and the events that write into them.
pub(super) struct Rings {
    rings: Vec<Ring>,
    /// Events redirected into another event's ring; kept open until the end.
    others: Vec<OwnedFd>,
}

impl Rings {
    /// Maps one ring of `pages` pages per CPU and redirects every other event there; takes
    /// the fds out of `opened`.
    pub(super) fn map(opened: &mut [Opened], pages: usize) -> Result<Rings, Error> {
        let mut rings: Vec<Ring> = Vec::new();
        let mut ring_cpu: Vec<u32> = Vec::new();
        let mut others: Vec<OwnedFd> = Vec::new();
        for ev in opened {
            for (cpu, fd) in ev.fds.drain(..) {
                if let Some(k) = ring_cpu.iter().position(|&c| c == cpu) {
                    sys::set_output(fd.as_raw_fd(), rings[k].fd().as_raw_fd()).map_err(|e| {
                        Error::io(format!("cannot share the ring buffer of CPU {cpu}"), e)
                    })?;
                    others.push(fd);
                } else {
                    let ring = Ring::new(fd, pages).map_err(|e| {
                        Error::io(
                            format!("cannot map a {pages}-page ring buffer on CPU {cpu}"),
                            e,
                        )
                    })?;
                    rings.push(ring);
                    ring_cpu.push(cpu);
                }
            }
        }
        Ok(Rings { rings, others })
    }

    fn all_fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.rings
            .iter()
            .map(|r| r.fd().as_raw_fd())
            .chain(self.others.iter().map(|f| f.as_raw_fd()))
    }

    /// Starts sampling on every event.
    pub(super) fn enable(&self) -> Result<(), Error> {
        for fd in self.all_fds() {
            sys::enable(fd).map_err(|e| Error::io("cannot enable sampling", e))?;
        }
        Ok(())
    }

    /// Stops sampling on every event; what is already in the rings can still be drained.
    pub(super) fn disable(&self) {
        for fd in self.all_fds() {
            let _ = sys::disable(fd);
        }
    }

    /// `(id, counter value)` of every event fd, for the counter totals at the end; fds
    /// whose read fails are left out (their event's total is then unknown or partial).
    pub(super) fn counter_values(&self) -> Vec<(u64, u64)> {
        self.all_fds()
            .filter_map(|fd| sys::read_count(fd).ok())
            .map(|(value, id)| (id, value))
            .collect()
    }

    /// Empties every ring without writing anything (after a write error): the `(records,
    /// bytes)` thrown away.
    pub(super) fn discard(&mut self) -> (u64, u64) {
        let (mut records, mut bytes) = (0u64, 0u64);
        for r in self.rings.iter_mut() {
            let _ = r.drain(|rec| -> Result<(), ()> {
                records += 1;
                bytes += rec.len() as u64;
                Ok(())
            });
        }
        (records, bytes)
    }

    /// Ring data dropped for corrupt record headers, all rings together.
    pub(super) fn dropped(&self) -> RingDropped {
        let mut d = RingDropped::default();
        for r in &self.rings {
            let (batches, bytes) = r.dropped();
            d.batches += batches;
            d.bytes += bytes;
        }
        d
    }

    /// Hands every complete record of every ring to the sink, then closes the round.
    pub(super) fn drain(&mut self, sink: &mut Sink) -> io::Result<()> {
        let mut any = 0;
        for r in self.rings.iter_mut() {
            any += r.drain(|rec| sink.handle(rec))?;
        }
        if any > 0 {
            sink.end_round(&perf_records::finished_round())?;
        }
        Ok(())
    }
}

/// The marker lines ftrace holds, then the rings: both in the same round of records (the
/// marker lines are not older than the previous round's samples). A round starting with a
/// ring more than half full is compressed at zstd's fastest level, so that the agent catches
/// up.
pub(super) fn drain_all(
    rings: &mut Rings,
    sink: &mut Sink,
    markers: Option<&mut Markers>,
) -> io::Result<()> {
    sink.behind_round(rings.rings.iter().any(Ring::behind))?;
    if let Some(m) = markers {
        m.read(sink)?;
    }
    rings.drain(sink)
}

/// What ends the capture besides a signal.
pub(super) struct StopWhen<'a> {
    pub(super) signals: &'a Signals,
    pub(super) workload: Option<&'a mut Workload>,
    /// `-p`: stop when this process is gone.
    pub(super) target: Option<i32>,
    /// `--duration`.
    pub(super) deadline: Option<Instant>,
}

/// Streams the rings into the sink until the workload or target exits, the deadline passes or
/// a terminating signal arrives. Write errors end it with the error.
pub(super) fn until_stop(
    rings: &mut Rings,
    sink: &mut Sink,
    mut markers: Option<&mut Markers>,
    mut stop: StopWhen<'_>,
) -> io::Result<Stop> {
    let mut pfds: Vec<libc::pollfd> = rings
        .rings
        .iter()
        .map(|r| r.fd().as_raw_fd())
        .chain([stop.signals.fd().as_raw_fd()])
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        let mut timeout = 500i32;
        if let Some(d) = stop.deadline {
            let left = d.saturating_duration_since(Instant::now());
            timeout = timeout.min(left.as_millis() as i32);
        }
        // SAFETY: pfds is a live array of initialised pollfd structs.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Ok(Stop::Signal(0));
        }
        // A per-task event whose task exited polls as HUP forever: stop polling it (its ring
        // is still drained every pass) so the loop does not spin.
        let n_rings = pfds.len() - 1;
        for p in &mut pfds[..n_rings] {
            if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                p.fd = -1;
            }
        }
        drain_all(rings, sink, markers.as_deref_mut())?;
        if let Some(sig) = stop.signals.take_terminating() {
            return Ok(Stop::Signal(sig));
        }
        if let Some(w) = stop.workload.as_mut() {
            if w.wait(false) {
                return Ok(Stop::CommandExited);
            }
        }
        if let Some(pid) = stop.target {
            if !procfs::process_running(pid) {
                return Ok(Stop::TargetExited);
            }
        }
        if stop.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Stop::Duration);
        }
    }
}
