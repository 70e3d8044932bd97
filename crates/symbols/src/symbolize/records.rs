//! Record dispatch: what each perf record (sample, comm, fork, mmap, lost) does to the
//! symbolizer's state, and the warnings left when all records are read.

use super::user_space::Mapping;
use super::{Progress, State};
use crate::capture::{Capture, PerfData};
use crate::error::{Error, Result};
use crate::perf_data::{Item, Records, PROT_EXEC};
use crate::profile::Sample;
use kprof_capture::build_id::hex;
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, Mmap2FileId, SampleRecord};
use std::io::{Read, Seek};

/// Why the records of a perf.data give no profile; the caller names the file
/// ([`Error::BadPerfData`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordsError {
    /// The header has no event attributes, so no sample can be attributed.
    #[error("no event attributes")]
    NoEvents,
    /// The records are damaged before the first sample.
    #[error("{damage} (no sample could be read)")]
    DamagedBeforeSamples {
        /// What the record walk found.
        damage: String,
    },
}

/// Reads the records of the capture's perf.data into `st`.
pub(super) fn read_perf_data(
    st: &mut State<'_>,
    capture: &Capture,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let shown = &capture.path;
    match capture.perf_data() {
        PerfData::File { path, .. } => {
            let file = std::fs::File::open(path).map_err(|e| Error::io(shown, e))?;
            let len = file.metadata().map_err(|e| Error::io(shown, e))?.len();
            read_records(st, file, len, capture, progress)
        }
        PerfData::Bytes(b) => read_records(
            st,
            std::io::Cursor::new(b),
            b.len() as u64,
            capture,
            progress,
        ),
    }
}

/// The record loop: each record to its handler, with progress every 65536 samples.
fn read_records(
    st: &mut State<'_>,
    r: impl Read + Seek,
    len: u64,
    capture: &Capture,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let shown = capture.path.clone();
    let bad = |why: String| Error::BadPerfData {
        path: shown.clone(),
        why,
    };
    let mut records =
        Records::open(r, len, crate::limits::records_budget(capture.max_input)).map_err(bad)?;
    st.read_header(&records.file, capture)
        .map_err(|e| bad(e.to_string()))?;
    st.prefetch();
    let total = records.total;
    let nev = st.profile.events.len();
    let mut samples = 0u64;
    let mut stack_buf: Vec<usize> = Vec::with_capacity(128);
    records.for_each(|item| {
        let (attr_index, record, bytes, time) = match item {
            Item::Event(attr_index, record, bytes, time) => (attr_index, record, bytes, time),
            Item::BuildId(key, id) => {
                st.images.header_build_ids.insert(key, hex(&id));
                return;
            }
        };
        if samples.is_multiple_of(65536) {
            progress(Progress::Samples {
                bytes: bytes.min(total),
                total,
            });
        }
        let time = st.clock.saw(time);
        if let EventRecord::Sample(s) = &record {
            samples += 1;
            st.on_sample(s, attr_index.min(nev - 1), time, &mut stack_buf);
        } else if let EventRecord::Throttle(t) = &record {
            st.throttles[attr_index.min(nev - 1)] += 1;
            st.clock.throttled(t.timestamp);
        } else {
            st.clock.side_band(&record, time);
            st.on_side_band(record);
        }
    });
    progress(Progress::Samples {
        bytes: total,
        total,
    });
    st.finish(records.damaged, samples, capture)
        .map_err(|e| bad(e.to_string()))
}

impl State<'_> {
    /// Resolves a sample's call chain (or its IP) and counts it for event `e`, at absolute
    /// `time` (made relative by `finish_times`).
    fn on_sample(
        &mut self,
        s: &SampleRecord<'_>,
        e: usize,
        time: Option<u64>,
        stack_buf: &mut Vec<usize>,
    ) {
        if self.probes.is_probe(e) {
            self.on_probe(s, e, time, stack_buf);
            return;
        }
        // A mark is no sample: no count, no period, no stack.
        if self.marks.is_mark(e) {
            self.on_mark(s, e, time);
            return;
        }
        // Without PERIOD in the samples, a fixed period is what each one stands for; with
        // neither (frequency mode) the weight is unknown and `period_known` says so.
        let period = s
            .period
            .or(self.fixed_periods.get(e).copied().flatten())
            .unwrap_or(1);
        // A context switch is counted once paired with its thread's switch-in
        // (finish_off_cpu), weighing the ns between them.
        let switch = self.switches.event == Some(e);
        if !switch {
            self.profile.events[e].total_samples += 1;
            self.profile.events[e].total_period =
                self.profile.events[e].total_period.saturating_add(period);
        }
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        let thread = self.stacks.thread(&mut self.profile.threads, pid, tid);
        stack_buf.clear();
        self.sample_frames(s, pid, stack_buf);
        let nev = self.profile.events.len();
        let idx = self
            .stacks
            .intern(&mut self.profile.stacks, thread, stack_buf, nev);
        if switch {
            let raw = s.raw.as_ref().map(|r| r.as_slice());
            self.on_switch(raw.as_deref(), time, s.cpu.unwrap_or(u32::MAX), idx);
            return;
        }
        let stack = &mut self.profile.stacks[idx];
        stack.counts[e] += 1;
        stack.periods[e] = stack.periods[e].saturating_add(period);
        self.counted_sample(time.is_some());
        // The switch event is known once the attributes are read, before any sample.
        if self.skip_sample_records && self.switches.event.is_none() {
            return;
        }
        self.profile.samples.push(Sample {
            time: time.unwrap_or(0),
            // Stack indices fit: interning keys them by u32 too.
            stack: idx as u32,
            event: e as u32,
            cpu: s.cpu.unwrap_or(u32::MAX),
            period,
        });
    }

    /// MMAP and MMAP2 alike: a kernel or module mapping, or an executable user mapping of `pid`
    /// at `(start, len, pgoff)`; MMAP2 may carry the file's build-id.
    fn on_mmap(
        &mut self,
        pid: i32,
        cpu_mode: CpuMode,
        (start, len, pgoff): (u64, u64, u64),
        path: &[u8],
        executable: bool,
        build_id: Option<String>,
    ) {
        let path = String::from_utf8_lossy(path).into_owned();
        if pid == -1 || matches!(cpu_mode, CpuMode::Kernel) {
            self.kernel
                .add_mapping((&path, start, len, pgoff), &self.images.header_build_ids);
        } else if executable {
            self.user.add_mapping(
                pid,
                Mapping {
                    start,
                    end: start.saturating_add(len),
                    pgoff,
                    path: path.into(),
                    build_id,
                    image: None,
                },
            );
        }
    }

    /// Process names, forks, mappings and lost samples.
    fn on_side_band(&mut self, record: EventRecord<'_>) {
        match record {
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                if c.is_execve {
                    self.user.exec(c.pid);
                }
                self.stacks.set_comm(c.tid, name);
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid {
                    self.user.inherit_mappings(f.pid, f.ppid);
                }
                self.stacks.fork(f.ptid, f.tid);
            }
            EventRecord::Mmap(m) => self.on_mmap(
                m.pid,
                m.cpu_mode,
                (m.address, m.length, m.page_offset),
                &m.path.as_slice(),
                m.is_executable,
                None,
            ),
            EventRecord::Mmap2(m) => {
                let build_id = match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(hex(b)),
                    _ => None,
                };
                self.on_mmap(
                    m.pid,
                    m.cpu_mode,
                    (m.address, m.length, m.page_offset),
                    &m.path.as_slice(),
                    m.protection & PROT_EXEC != 0,
                    build_id,
                )
            }
            EventRecord::Lost(l) => {
                self.profile.meta.lost_samples =
                    self.profile.meta.lost_samples.saturating_add(l.count)
            }
            _ => {}
        }
    }

    /// The warnings about what was read; an error when damage left no sample at all.
    fn finish(
        &mut self,
        damaged: Option<String>,
        samples: u64,
        capture: &Capture,
    ) -> Result<(), RecordsError> {
        let shown = &capture.path;
        self.finish_off_cpu();
        self.event_warnings(capture);
        self.unwind_warnings();
        self.drop_dummy_events();
        self.finish_times();
        self.finish_probes(capture);
        if let Some(why) = damaged {
            if samples == 0 {
                return Err(RecordsError::DamagedBeforeSamples { damage: why });
            }
            self.profile.warnings.push(format!(
                "{}: perf.data is damaged ({why}); showing the {samples} samples read before it",
                shown.display()
            ));
        }
        if self.profile.meta.lost_samples > 0 {
            self.profile.warnings.push(format!(
                "the kernel lost {} samples (the ring buffer overflowed): lower the frequency or raise the buffer size",
                self.profile.meta.lost_samples
            ));
        }
        if samples == 0 {
            self.profile
                .warnings
                .push("the capture has no samples".into());
        }
        Ok(())
    }
}
