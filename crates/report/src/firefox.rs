//! `--format firefox`: the Firefox Profiler's processed profile format (JSON), written with
//! `fxprof-processed-profile`, the crate samply writes it with.
//!
//! - One process per pid and one thread track per thread of [`Profile::threads`], named by
//!   its command name, with the samples of the first event at their times (ms since
//!   capture start). `--event` picks which event that is.
//! - Stacks are symbolized already: each frame is a label `function [image] file:line`
//!   (the function's own source position, so a function is one node of the call tree);
//!   kernel frames are in the `Kernel` category, user frames in `User`.
//! - A "CPUs" process with one thread track per CPU ("CPU 3"), the same samples by the CPU
//!   they were taken on, each stack under a `comm (tid)` frame.
//! - A counter track per hardware event: its summed sample periods per millisecond.
//!   Software events (cpu-clock, task-clock, page-faults, ...) get none: the thread tracks'
//!   CPU graph already shows cpu-clock time.
//! - Markers on the profiled command's busiest thread (else the busiest of all): workload
//!   start and exit, lost samples, throttling.
//! - The profiled system's marks on the thread that marked: an instant marker per plain mark
//!   (named by its text) and per tracepoint (named by its event, its fields as text), an
//!   interval marker per span (`B|PID|NAME` to its end, named NAME; from the begin on when the
//!   capture ended first).

mod markers;

use crate::Error;
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    MarkerTiming, ProcessHandle, Profile as Fx, ReferenceTimestamp, SamplingInterval, StackHandle,
    StringHandle, ThreadHandle, Timestamp,
};
use kprof_symbols::profile::{Mark, MarkerKind, Profile, Sample};
use std::collections::HashMap;
use std::io::Write;

/// Counter tracks sum the periods of this many ns: a point per sample would make a
/// 1M-sample capture's file several times larger for a graph no finer on screen.
const COUNTER_BIN_NS: u64 = 1_000_000;

/// Writes the profile as Firefox Profiler JSON.
pub fn write(p: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let fx = build(p)?;
    serde_json::to_writer(&mut *out, &fx)?;
    writeln!(out).map_err(Error::writing("writing the Firefox profile"))?;
    Ok(())
}

/// [`write()`], gzip-compressed: the profiler opens `.json.gz` files as they are, and a
/// profile of a million samples shrinks about tenfold.
pub fn write_gzip(p: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    write(p, &mut gz)?;
    gz.finish()
        .map_err(Error::writing("compressing the Firefox profile"))?;
    Ok(())
}

/// Whether an event counts something a PMU counts (cycles, cache misses, raw events)
/// rather than a kernel software event or a tracepoint, by perf's names of those.
pub fn is_hardware_event(name: &str) -> bool {
    const SOFTWARE: &[&str] = &[
        "cpu-clock",
        "task-clock",
        "page-faults",
        "faults",
        "minor-faults",
        "major-faults",
        "context-switches",
        "cs",
        "cpu-migrations",
        "migrations",
        "alignment-faults",
        "emulation-faults",
        "dummy",
        "bpf-output",
        "cgroup-switches",
    ];
    let base = name.split(['/', ':']).next().unwrap_or(name);
    // `subsystem:event` is a tracepoint; `cycles:u` a hardware event with modifiers.
    let tracepoint = name
        .split_once(':')
        .is_some_and(|(_, m)| !m.is_empty() && !m.chars().all(|c| "ukhGHpPSDIWe".contains(c)));
    !SOFTWARE.contains(&base) && !tracepoint
}

/// The processed profile of `p`.
fn build(p: &Profile) -> Result<Fx, Error> {
    let first = p.events.first().ok_or(Error::NoEvents)?;
    let interval = median_gap(&p.samples).unwrap_or(1_000_000);
    let mut fx = Fx::new(
        &p.meta
            .command
            .clone()
            .unwrap_or_else(|| p.meta.capture.clone()),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos(interval),
    );
    if let Some(os) = &p.meta.os_release {
        fx.set_os_name(&format!("Linux {os}"));
    }
    fx.set_symbolicated(true);
    let kernel = fx.add_category("Kernel", CategoryColor::Orange);
    let user = fx.add_category("User", CategoryColor::Blue);
    let labels = FrameLabels::new(p, &mut fx, kernel, user);
    let t0 = Timestamp::from_nanos_since_reference(0);

    let (threads, processes) = add_threads(p, &mut fx, t0);
    // cpu-clock and task-clock periods are CPU time: the tracks' CPU graph.
    let cpu_time = matches!(
        first.name.split(['/', ':']).next(),
        Some("cpu-clock" | "task-clock")
    );
    let mut stacks: Vec<Option<StackHandle>> = vec![None; p.stacks.len()];
    let mut per_thread = vec![0u64; p.threads.len()];
    for s in p.samples.iter().filter(|s| s.event == 0) {
        let Some(stack) = p.stacks.get(s.stack as usize) else {
            continue;
        };
        let thread = threads[stack.thread];
        let handle = *stacks[s.stack as usize]
            .get_or_insert_with(|| labels.stack(p, &mut fx, thread, None, &stack.frames));
        let delta = if cpu_time {
            CpuDelta::from_nanos(s.period)
        } else {
            CpuDelta::ZERO
        };
        fx.add_sample(thread, at(s.time), Some(handle), delta, 1);
        per_thread[stack.thread] += 1;
    }
    add_cpu_tracks(p, &mut fx, &labels, t0);
    // Markers go on the profiled command's busiest thread, else on the busiest of all.
    let workload = |i: &usize| p.meta.workload_pid.is_none_or(|w| p.threads[*i].pid == w);
    let busiest = |only_workload: bool| {
        (0..p.threads.len())
            .filter(|i| per_thread[*i] > 0 && (!only_workload || workload(i)))
            .max_by_key(|i| per_thread[*i])
    };
    if let Some(i) = busiest(true).or_else(|| busiest(false)) {
        let t = threads[i];
        fx.set_thread_show_markers_in_timeline(t, true);
        fx.add_initial_selected_thread(t);
        for m in &p.meta.markers {
            if matches!(m.kind, MarkerKind::Mark(_)) {
                continue;
            }
            let marker = markers::KprofMarker::new(&mut fx, &m.kind);
            fx.add_marker(t, MarkerTiming::Instant(at(m.time)), marker);
        }
        add_counters(p, &mut fx, processes[&p.threads[i].pid]);
    }
    add_marks(p, &mut fx, &threads);
    Ok(fx)
}

/// The marks on the tracks of the threads that marked them: spans as intervals, the others
/// as instants. A mark of a thread without a track (not in the profile's threads) is left out.
fn add_marks(p: &Profile, fx: &mut Fx, threads: &[ThreadHandle]) {
    // The last track of a (pid, tid): the name it had after an exec.
    let by_id: HashMap<(i32, i32), ThreadHandle> = p
        .threads
        .iter()
        .zip(threads)
        .map(|(t, h)| ((t.pid, t.tid), *h))
        .collect();
    let track = |pid: i32, tid: i32| by_id.get(&(pid, tid)).copied();
    let spans = kprof_symbols::marks::spans(p);
    let mut in_span = vec![false; p.meta.markers.len()];
    for s in &spans {
        in_span[s.begin] = true;
        if let Some(e) = s.end_marker {
            in_span[e] = true;
        }
        let MarkerKind::Mark(begin) = &p.meta.markers[s.begin].kind else {
            continue;
        };
        let Some(t) = track(s.pid, s.tid) else {
            continue;
        };
        let marker = mark_marker(fx, &s.name, begin);
        let timing = match s.end {
            Some(end) => MarkerTiming::Interval(at(s.start), at(end)),
            None => MarkerTiming::IntervalStart(at(s.start)),
        };
        fx.set_thread_show_markers_in_timeline(t, true);
        fx.add_marker(t, timing, marker);
    }
    for (i, m) in p.meta.markers.iter().enumerate() {
        let MarkerKind::Mark(mark) = &m.kind else {
            continue;
        };
        let Some(t) = track(mark.pid, mark.tid).filter(|_| !in_span[i]) else {
            continue;
        };
        let name = if mark.fields.is_empty() {
            &mark.text
        } else {
            &mark.event
        };
        let marker = mark_marker(fx, name, mark);
        fx.set_thread_show_markers_in_timeline(t, true);
        fx.add_marker(t, MarkerTiming::Instant(at(m.time)), marker);
    }
}

fn mark_marker(fx: &mut Fx, name: &str, mark: &Mark) -> markers::MarkMarker {
    markers::MarkMarker {
        name: fx.intern_string(name),
        event: fx.intern_string(&mark.event),
        text: fx.intern_string(&mark.text),
    }
}

fn at(ns: u64) -> Timestamp {
    Timestamp::from_nanos_since_reference(ns)
}

/// The usual time between two samples of the first event: the profile's declared interval.
fn median_gap(samples: &[Sample]) -> Option<u64> {
    let mut gaps: Vec<u64> = samples
        .iter()
        .filter(|s| s.event == 0)
        .take(10_001)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1].time - w[0].time)
        .filter(|g| *g > 0)
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(mid).1)
}

/// A process per pid, a thread track per thread of `p`, in `p.threads` order.
///
/// A process that exec'd has two threads with its pid as tid (the command names before and
/// after): the busier names the process and is its main thread; the other keeps its own name
/// (the profiler names a main thread by its process).
fn add_threads(
    p: &Profile,
    fx: &mut Fx,
    t0: Timestamp,
) -> (Vec<ThreadHandle>, HashMap<i32, ProcessHandle>) {
    let mut samples = vec![0u64; p.threads.len()];
    for s in &p.stacks {
        samples[s.thread] += s.counts.first().copied().unwrap_or(0);
    }
    let mut main: HashMap<i32, usize> = HashMap::new();
    for (i, t) in p.threads.iter().enumerate() {
        if t.tid == t.pid {
            let m = main.entry(t.pid).or_insert(i);
            if samples[i] > samples[*m] {
                *m = i;
            }
        }
    }
    let mut processes: HashMap<i32, ProcessHandle> = HashMap::new();
    let threads = p
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let process = *processes.entry(t.pid).or_insert_with(|| {
                let name = main.get(&t.pid).map_or(&t.comm, |m| &p.threads[*m].comm);
                fx.add_process(name, t.pid as u32, t0)
            });
            let is_main = main.get(&t.pid) == Some(&i);
            let h = fx.add_thread(process, t.tid as u32, t0, is_main);
            fx.set_thread_name(h, &t.comm);
            h
        })
        .collect();
    (threads, processes)
}

/// A "CPUs" process with a track per CPU that has samples of the first event.
fn add_cpu_tracks(p: &Profile, fx: &mut Fx, labels: &FrameLabels, t0: Timestamp) {
    let mut cpus: Vec<u32> = p
        .samples
        .iter()
        .filter(|s| s.event == 0 && s.cpu != u32::MAX)
        .map(|s| s.cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return;
    }
    let process = fx.add_process("CPUs", u32::MAX, t0);
    let tracks: HashMap<u32, ThreadHandle> = cpus
        .iter()
        .map(|c| {
            let h = fx.add_thread(process, u32::MAX - 1 - c, t0, false);
            fx.set_thread_name(h, &format!("CPU {c}"));
            (*c, h)
        })
        .collect();
    let thread_labels: Vec<StringHandle> = p
        .threads
        .iter()
        .map(|t| fx.intern_string(&format!("{} ({})", t.comm, t.tid)))
        .collect();
    let mut stacks: HashMap<(u32, u32), StackHandle> = HashMap::new();
    for s in p.samples.iter().filter(|s| s.event == 0) {
        let (Some(track), Some(stack)) = (tracks.get(&s.cpu), p.stacks.get(s.stack as usize))
        else {
            continue;
        };
        let handle = *stacks.entry((s.cpu, s.stack)).or_insert_with(|| {
            let root = fx.intern_frame(
                *track,
                FrameInfo {
                    frame: Frame::Label(thread_labels[stack.thread]),
                    category_pair: CategoryHandle::OTHER.into(),
                    flags: FrameFlags::empty(),
                },
            );
            let root = fx.intern_stack(*track, None, root);
            labels.stack(p, fx, *track, Some(root), &stack.frames)
        });
        fx.add_sample(*track, at(s.time), Some(handle), CpuDelta::ZERO, 1);
    }
}

/// A counter track per hardware event: summed periods per [`COUNTER_BIN_NS`].
fn add_counters(p: &Profile, fx: &mut Fx, process: ProcessHandle) {
    for (e, ev) in p.events.iter().enumerate() {
        if !is_hardware_event(&ev.name) {
            continue;
        }
        let counter = fx.add_counter(
            process,
            &ev.name,
            "kprof",
            &format!("{}: events counted per ms (summed sample periods)", ev.name),
        );
        let mut bin: Option<(u64, f64, u32)> = None;
        for s in p.samples.iter().filter(|s| s.event as usize == e) {
            let b = s.time / COUNTER_BIN_NS;
            match &mut bin {
                Some((cur, value, n)) if *cur == b => {
                    *value += s.period as f64;
                    *n += 1;
                }
                _ => {
                    if let Some((cur, value, n)) = bin.take() {
                        fx.add_counter_sample(counter, at(cur * COUNTER_BIN_NS), value, n);
                    }
                    bin = Some((b, s.period as f64, 1));
                }
            }
        }
        if let Some((cur, value, n)) = bin {
            fx.add_counter_sample(counter, at(cur * COUNTER_BIN_NS), value, n);
        }
    }
}

/// One label per function of the profile, and the category of its image.
struct FrameLabels {
    functions: Vec<(StringHandle, CategoryPairHandle)>,
}

impl FrameLabels {
    fn new(p: &Profile, fx: &mut Fx, kernel: CategoryHandle, user: CategoryHandle) -> Self {
        let functions = p
            .functions
            .iter()
            .map(|f| {
                let image = &p.images[f.image];
                let mut label = f.name.clone().unwrap_or_else(|| "[unknown]".into());
                label.push_str(&format!(" [{}]", image.name));
                if let Some(file) = &f.file {
                    label.push(' ');
                    label.push_str(p.source_path(file));
                    if let Some(line) = f.line {
                        label.push_str(&format!(":{line}"));
                    }
                }
                // `[unwind]` holds the marked ends of call paths, not code.
                let category = if image.name == "[unwind]" {
                    CategoryHandle::OTHER
                } else if image.kernel {
                    kernel
                } else {
                    user
                };
                (fx.intern_string(&label), category.into())
            })
            .collect();
        Self { functions }
    }

    /// The stack of `frames` (leaf first, as kprof stores them) on `thread`, below `root`.
    fn stack(
        &self,
        p: &Profile,
        fx: &mut Fx,
        thread: ThreadHandle,
        root: Option<StackHandle>,
        frames: &[usize],
    ) -> StackHandle {
        let mut parent = root;
        for f in frames.iter().rev() {
            let (label, category_pair) = self.functions[p.frames[*f].function];
            let frame = fx.intern_frame(
                thread,
                FrameInfo {
                    frame: Frame::Label(label),
                    category_pair,
                    flags: FrameFlags::empty(),
                },
            );
            parent = Some(fx.intern_stack(thread, parent, frame));
        }
        parent.unwrap_or_else(|| {
            let empty = fx.intern_string("[no frames]");
            let frame = fx.intern_frame(
                thread,
                FrameInfo {
                    frame: Frame::Label(empty),
                    category_pair: CategoryHandle::OTHER.into(),
                    flags: FrameFlags::empty(),
                },
            );
            fx.intern_stack(thread, None, frame)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;

    /// PMU events (named, raw, with modifiers) are hardware; perf's software events and
    /// tracepoints are not.
    #[test]
    fn is_hardware_event_names_classified() {
        for hw in [
            "cycles",
            "instructions",
            "r03",
            "L1-dcache-load-misses",
            "cycles:u",
        ] {
            assert!(is_hardware_event(hw), "{hw}");
        }
        for sw in [
            "cpu-clock",
            "cpu-clock/period=100000/",
            "page-faults",
            "task-clock:u",
            "sched:sched_switch",
        ] {
            assert!(!is_hardware_event(sw), "{sw}");
        }
    }

    /// A hardware event's counter track sums its samples' periods per millisecond, with
    /// the number of samples as operations; the software event gets no track.
    #[test]
    fn write_firefox_hardware_event_counter_per_ms() {
        let mut p = fixture::profile();
        p.events[1].name = "cycles".into();
        let sample = |time, event, period| Sample {
            time,
            stack: 0,
            event,
            cpu: 0,
            period,
        };
        p.samples = vec![
            sample(0, 0, 250_000),
            sample(100_000, 1, 1000),
            sample(600_000, 1, 3000),
            sample(1_500_000, 1, 500),
            sample(3_200_000, 1, 700),
        ];
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let fx: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let counters = fx["counters"].as_array().expect("counters");
        assert_eq!(counters.len(), 1, "{counters:?}");
        assert_eq!(counters[0]["name"], "cycles");
        let s = &counters[0]["samples"];
        let values: Vec<f64> = s["count"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(values, vec![4000.0, 500.0, 700.0]);
        let ops: Vec<u64> = s["number"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ops, vec![2, 1, 1]);
    }

    /// Marks go on the marking thread's track: a begin/end pair as one interval marker named
    /// by the span, a plain mark as an instant named by its text, a tracepoint named by its
    /// event, a begin never ended as an interval start; the end mark makes no marker of its
    /// own.
    #[test]
    fn write_firefox_marks_spans_intervals_instants() {
        use kprof_symbols::profile::{Mark, Marker, SpanEdge};
        let mut p = fixture::profile();
        let mark = |time, text: &str, fields: Vec<(String, String)>, edge| Marker {
            time,
            kind: MarkerKind::Mark(Mark {
                event: if fields.is_empty() {
                    "ftrace:print"
                } else {
                    "drv:ev"
                }
                .into(),
                pid: 100,
                tid: 100,
                cpu: 0,
                text: text.into(),
                fields,
                edge,
            }),
        };
        p.meta.markers = vec![
            mark(
                1_000_000,
                "B|100|phase_a",
                vec![],
                Some(SpanEdge::Begin("phase_a".into())),
            ),
            mark(2_000_000, "hello", vec![], None),
            mark(3_000_000, "a=1", vec![("a".into(), "1".into())], None),
            mark(4_000_000, "E|100", vec![], Some(SpanEdge::End(None))),
            mark(
                5_000_000,
                "B|100|open",
                vec![],
                Some(SpanEdge::Begin("open".into())),
            ),
        ];
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let fx: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let t = &fx["threads"][0];
        let m = &t["markers"];
        let s = |v: &serde_json::Value| t["stringArray"][v.as_u64().unwrap() as usize].clone();
        let got: Vec<_> = (0..m["length"].as_u64().unwrap() as usize)
            .filter(|i| m["data"][*i]["type"] == "kprof-mark")
            .map(|i| {
                (
                    s(&m["name"][i]),
                    s(&m["data"][i]["text"]),
                    m["startTime"][i].as_f64(),
                    m["endTime"][i].as_f64(),
                    m["phase"][i].as_u64().unwrap(),
                )
            })
            .collect();
        let j = |v: &str| serde_json::Value::from(v);
        assert_eq!(
            got,
            [
                (j("phase_a"), j("B|100|phase_a"), Some(1.0), Some(4.0), 1),
                // The format writes endTime 0 for what is no interval.
                (j("open"), j("B|100|open"), Some(5.0), Some(0.0), 2),
                (j("hello"), j("hello"), Some(2.0), Some(0.0), 0),
                (j("drv:ev"), j("a=1"), Some(3.0), Some(0.0), 0),
            ]
        );
    }

    /// The gzip form decompresses to the same JSON as the plain one.
    #[test]
    fn write_gzip_firefox_fixture_same_json() {
        let mut p = fixture::profile();
        p.samples = vec![Sample {
            time: 5,
            stack: 1,
            event: 0,
            cpu: 1,
            period: 1000,
        }];
        let (mut plain, mut gz) = (Vec::new(), Vec::new());
        write(&p, &mut plain).unwrap();
        write_gzip(&p, &mut gz).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut back).unwrap();
        assert_eq!(back, plain);
    }

    /// A profile without events is refused, not written empty.
    #[test]
    fn write_firefox_no_events_refused() {
        let p = Profile::default();
        assert!(matches!(write(&p, &mut Vec::new()), Err(Error::NoEvents)));
    }
}
