//! Times of the capture: its start, each sample's time and the markers (workload start and
//! exit, lost samples, throttling), read along with the records and made relative to
//! capture start once all are read (records of a file are not strictly in time order).

use super::State;
use crate::profile::{Marker, MarkerKind};
use linux_perf_data::linux_perf_event_reader::{
    Endianness, EventRecord, RawEventRecord, RecordType,
};

/// What the records said about time, in absolute perf-clock nanoseconds.
#[derive(Debug, Default)]
pub(super) struct Clock {
    first: Option<u64>,
    last: Option<u64>,
    /// Markers with absolute times; `None` when their record had no timestamp.
    markers: Vec<(Option<u64>, MarkerKind)>,
    /// Samples without a timestamp (no PERF_SAMPLE_TIME).
    untimed: u64,
    /// On-CPU samples counted, kept in `Profile::samples` or not.
    counted: u64,
    /// The profiled command, from the manifest.
    workload_pid: Option<i32>,
}

impl Clock {
    /// A clock that marks the start and exit of process `workload_pid`.
    pub fn new(workload_pid: Option<i32>) -> Self {
        Self {
            workload_pid,
            ..Self::default()
        }
    }

    /// Takes in a record's timestamp. perf writes 0 on the records it synthesizes for what
    /// existed before recording (mappings, thread names): those have no time.
    pub fn saw(&mut self, time: Option<u64>) -> Option<u64> {
        let t = time.filter(|t| *t != 0)?;
        self.first = Some(self.first.map_or(t, |f| f.min(t)));
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
        Some(t)
    }

    /// The markers a side-band record makes, at `time`.
    pub fn side_band(&mut self, record: &EventRecord<'_>, time: Option<u64>) {
        let kind = match record {
            EventRecord::Comm(c)
                if c.is_execve && Some(c.pid) == self.workload_pid && c.pid == c.tid =>
            {
                MarkerKind::WorkloadStart
            }
            EventRecord::Exit(e) if Some(e.pid) == self.workload_pid && e.pid == e.tid => {
                MarkerKind::WorkloadExit
            }
            EventRecord::Lost(l) => MarkerKind::Lost { samples: l.count },
            EventRecord::Raw(r) if r.record_type == RecordType::LOST_SAMPLES => {
                match lost_samples(r) {
                    Some(samples) => MarkerKind::Lost { samples },
                    None => return,
                }
            }
            _ => return,
        };
        // EXIT carries its time in its body, which a file without sample_id_all still has.
        let time = match record {
            EventRecord::Exit(e) if time.is_none() => self.saw(Some(e.timestamp)),
            _ => time,
        };
        self.markers.push((time, kind));
    }

    /// A mark of the profiled system (a tracepoint sample) at `time`.
    pub fn mark(&mut self, time: Option<u64>, kind: MarkerKind) {
        self.markers.push((time, kind));
    }

    /// A THROTTLE record, whose body has its time.
    pub fn throttled(&mut self, body_time: u64) {
        let t = self.saw(Some(body_time));
        self.markers.push((t, MarkerKind::Throttled));
    }
}

/// The count of a PERF_RECORD_LOST_SAMPLES (`u64 lost`, then the sample_id trailer).
fn lost_samples(r: &RawEventRecord<'_>) -> Option<u64> {
    let body = r.data.as_slice();
    let b: [u8; 8] = body.get(..8)?.try_into().ok()?;
    Some(match r.parse_info.endian {
        Endianness::LittleEndian => u64::from_le_bytes(b),
        Endianness::BigEndian => u64::from_be_bytes(b),
    })
}

impl State<'_> {
    /// Makes the samples' and markers' times relative to capture start and sorts them.
    pub(super) fn finish_times(&mut self) {
        let clock = std::mem::take(&mut self.clock);
        let start = clock.first.unwrap_or(0);
        let meta = &mut self.profile.meta;
        meta.start_ns = clock.first;
        meta.duration_ns = clock.last.unwrap_or(0).saturating_sub(start);
        // An untimed sample holds 0, which stays 0: capture start.
        for s in &mut self.profile.samples {
            s.time = s.time.saturating_sub(start);
        }
        self.profile.samples.sort_by_key(|s| s.time);
        meta.markers = clock
            .markers
            .into_iter()
            .map(|(t, kind)| Marker {
                time: t.unwrap_or(start).saturating_sub(start),
                kind,
            })
            .collect();
        meta.markers.sort_by_key(|m| m.time);
        let n = clock.counted;
        if clock.untimed > 0 && n > 0 {
            let all = if clock.untimed == n {
                "the samples carry no timestamps (recorded without PERF_SAMPLE_TIME)".to_string()
            } else {
                format!("{} of {n} samples carry no timestamp", clock.untimed)
            };
            self.profile.warnings.push(format!(
                "{all}: --time and the timeline place them at capture start"
            ));
        }
    }

    /// Counts an on-CPU sample, and whether it had a timestamp.
    pub(super) fn counted_sample(&mut self, timed: bool) {
        self.clock.counted += 1;
        if !timed {
            self.clock.untimed += 1;
        }
    }
}
