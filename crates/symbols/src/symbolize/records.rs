//! Record dispatch: what each perf record (sample, comm, fork, mmap, lost) does to the
//! symbolizer's state, and the warnings left when all records are read.

use super::address_space::Mapping;
use super::{Progress, State};
use crate::capture::{Capture, PerfData};
use crate::error::{Error, Result};
use crate::perf_data::{
    Item, Records, PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PROT_EXEC,
};
use crate::profile::Event;
use kprof_capture::build_id::hex;
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, Mmap2FileId, SampleRecord};
use std::io::{Read, Seek};
use std::path::Path;

fn event_name(attr: &linux_perf_data::AttributeDescription, i: usize, capture: &Capture) -> String {
    if let Some(m) = &capture.manifest {
        if let Some(e) = m.events.get(i) {
            return e.name.clone();
        }
    }
    if let Some(n) = &attr.name {
        return n.clone();
    }
    use linux_perf_data::linux_perf_event_reader::PerfEventType;
    match attr.attr.type_ {
        PerfEventType::Software(c) => format!("{c:?}")
            .to_lowercase()
            .replace("cpuclock", "cpu-clock")
            .replace("taskclock", "task-clock"),
        PerfEventType::Hardware(h, _) => format!("{h:?}").to_lowercase(),
        other => format!("{other:?}"),
    }
}

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
    let mut records = Records::open(r, len).map_err(bad)?;
    read_header(st, &records.file, capture).map_err(bad)?;
    let total = records.total;
    let nev = st.profile.events.len();
    let mut samples = 0u64;
    let mut stack_buf: Vec<usize> = Vec::with_capacity(128);
    records.for_each(|item| {
        let (attr_index, record, bytes) = match item {
            Item::Event(attr_index, record, bytes) => (attr_index, record, bytes),
            Item::BuildId(key, id) => {
                st.header_build_ids.insert(key, hex(&id));
                return;
            }
        };
        if samples.is_multiple_of(65536) {
            progress(Progress::Samples {
                bytes: bytes.min(total),
                total,
            });
        }
        if let EventRecord::Sample(s) = &record {
            samples += 1;
            st.on_sample(s, attr_index.min(nev - 1), &mut stack_buf);
        } else {
            st.on_side_band(record);
        }
    });
    progress(Progress::Samples {
        bytes: total,
        total,
    });
    st.finish(records.damaged, samples, &shown).map_err(bad)
}

/// Host facts, events and their names from the header and feature sections.
fn read_header(
    st: &mut State<'_>,
    perf_file: &linux_perf_data::PerfFile,
    capture: &Capture,
) -> std::result::Result<(), String> {
    if let Ok(ids) = perf_file.build_ids() {
        for (k, v) in ids {
            st.header_build_ids.insert(k, hex(&v.build_id));
        }
    }
    if st.profile.meta.hostname.is_none() {
        st.profile.meta.hostname = perf_file.hostname().ok().flatten().map(str::to_string);
        st.profile.meta.os_release = perf_file.os_release().ok().flatten().map(str::to_string);
        st.profile.meta.arch = perf_file.arch().ok().flatten().map(str::to_string);
        st.profile.meta.command = perf_file.cmdline().ok().flatten().map(|v| v.join(" "));
    }
    let attrs = perf_file.event_attributes();
    if attrs.is_empty() {
        return Err("no event attributes".into());
    }
    for (i, a) in attrs.iter().enumerate() {
        st.profile.events.push(Event {
            name: event_name(a, i, capture),
            total_samples: 0,
            total_period: 0,
        });
    }
    Ok(())
}

impl State<'_> {
    /// Resolves a sample's call chain (or its IP) and counts it for event `e`.
    fn on_sample(&mut self, s: &SampleRecord<'_>, e: usize, stack_buf: &mut Vec<usize>) {
        self.profile.events[e].total_samples += 1;
        self.profile.events[e].total_period = self.profile.events[e]
            .total_period
            .saturating_add(s.period.unwrap_or(1));
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        let thread = self.thread(pid, tid);
        stack_buf.clear();
        let mut kernel = matches!(s.cpu_mode, CpuMode::Kernel);
        let push = |st: &mut State<'_>, kernel: bool, addr: u64, stack_buf: &mut Vec<usize>| {
            let frames = if kernel {
                st.resolve_kernel(addr)
            } else {
                st.resolve_user(pid, addr)
            };
            stack_buf.extend(frames.start..frames.end);
        };
        match &s.callchain {
            Some(cc) if !cc.is_empty() => {
                let mut first = true;
                for i in 0..cc.len() {
                    let Some(v) = cc.get(i) else { break };
                    if v >= PERF_CONTEXT_MAX {
                        kernel = v == PERF_CONTEXT_KERNEL;
                        if v != PERF_CONTEXT_KERNEL && v != PERF_CONTEXT_USER {
                            kernel = false;
                        }
                        continue;
                    }
                    // Return addresses point after the call: look up the call itself.
                    let a = if first { v } else { v.saturating_sub(1) };
                    first = false;
                    push(self, kernel, a, stack_buf);
                }
            }
            _ => {
                if let Some(ip) = s.ip {
                    push(self, kernel, ip, stack_buf);
                }
            }
        }
        let nev = self.profile.events.len();
        let idx = self.intern_stack(thread, stack_buf, nev);
        self.profile.stacks[idx].counts[e] += 1;
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
            self.add_kernel_mapping(&path, start, len, pgoff);
        } else if executable {
            self.add_mapping(
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
                    self.procs.remove(&c.pid);
                }
                self.comms.insert(c.tid, name);
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid && !self.procs.contains_key(&f.pid) {
                    if let Some(maps) = self.procs.get(&f.ppid).cloned() {
                        self.procs.insert(f.pid, maps);
                    }
                }
                if let Some(c) = self.comms.get(&f.ptid).cloned() {
                    self.comms.entry(f.tid).or_insert(c);
                }
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
        shown: &Path,
    ) -> std::result::Result<(), String> {
        for (list, what) in [
            (&self.stripped, "stripped (no function symbols; install their -dbg packages or add unstripped files with --symbols)"),
            (&self.no_lines, "without DWARF line info (functions, no source lines)"),
        ] {
            if !list.is_empty() {
                let mut names = list.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
                if list.len() > 8 {
                    names.push_str(&format!(" and {} more", list.len() - 8));
                }
                let n = list.len();
                self.profile.warnings.push(format!("{n} user image(s) {what}: {names}"));
            }
        }
        // perf adds a `dummy` event to system-wide recordings for side-band records only.
        let keep: Vec<usize> = (0..self.profile.events.len())
            .filter(|i| {
                let e = &self.profile.events[*i];
                !(e.total_samples == 0 && e.name.starts_with("dummy"))
            })
            .collect();
        if keep.len() < self.profile.events.len() && !keep.is_empty() {
            self.profile.events = keep
                .iter()
                .map(|i| self.profile.events[*i].clone())
                .collect();
            for s in &mut self.profile.stacks {
                s.counts = keep.iter().map(|i| s.counts[*i]).collect();
            }
        }
        if let Some(why) = damaged {
            if samples == 0 {
                return Err(format!("{why} (no sample could be read)"));
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
