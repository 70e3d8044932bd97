//! The marks of the profiled system ([`MarkerKind::Mark`]: `trace_marker` lines, tracepoints)
//! for the timeline's mark rows and the Log tab.
//!
//! Marks are embedded as columns (packed integers as in html/pack.rs, and string tables), not
//! as one JSON object each: 10,000 marks of a frame loop must not weigh megabytes. Begin/end
//! marks are paired by [`kprof_symbols::marks::spans`], the pairing `--time NAME` and the
//! Firefox export use; the page only adds the lanes spans are drawn in.

use std::collections::HashMap;

use kprof_symbols::profile::{Mark, MarkerKind, Profile};
use serde_json::{json, Value};

use super::pack::Packed;

/// Most marks a page embeds: past it the page would take seconds to parse and its Log tab
/// would be unusable; the page says how many were left out and `report --markers` lists all.
pub const MAX_MARKS: usize = 200_000;

/// A named span of one thread: a begin mark and the end mark of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Index into [`Marks::threads`].
    pub thread: usize,
    /// The name the begin mark gave.
    pub name: String,
    /// Index of the begin mark.
    pub begin: usize,
    /// Index of the end mark; `None` when the capture ended with the span open.
    pub end: Option<usize>,
    /// Row within the thread's mark row: the lowest one no span open at the same time uses,
    /// so nested and overlapping spans do not cover each other.
    pub lane: u32,
}

/// The profile's marks, in time order, with their threads and spans.
#[derive(Debug, Default)]
pub struct Marks<'p> {
    /// (time in ns since capture start, mark), sorted by time.
    pub marks: Vec<(u64, &'p Mark)>,
    /// Marks past [`MAX_MARKS`], not embedded.
    pub dropped: usize,
    /// Distinct (pid, tid) of the marks, in first-seen order.
    pub threads: Vec<(i32, i32)>,
    /// Per mark: index into `threads`.
    pub thread_of: Vec<usize>,
    /// Begin/end pairs, in order of their begin mark.
    pub spans: Vec<Span>,
}

impl<'p> Marks<'p> {
    /// The marks of `profile` (the first [`MAX_MARKS`] of them), paired.
    pub fn of(profile: &'p Profile) -> Marks<'p> {
        // (time, mark, index in Meta::markers)
        let mut listed: Vec<(u64, &Mark, usize)> = profile
            .meta
            .markers
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match &m.kind {
                MarkerKind::Mark(mark) => Some((m.time, mark, i)),
                _ => None,
            })
            .collect();
        // Stable: marks of one time keep the order they were recorded in (a begin before
        // the end written right after it).
        listed.sort_by_key(|m| m.0);
        let dropped = listed.len().saturating_sub(MAX_MARKS);
        listed.truncate(MAX_MARKS);
        let listed_at: HashMap<usize, usize> =
            listed.iter().enumerate().map(|(at, m)| (m.2, at)).collect();
        let marks: Vec<(u64, &Mark)> = listed.iter().map(|&(t, m, _)| (t, m)).collect();
        let mut ids: HashMap<(i32, i32), usize> = HashMap::new();
        let mut threads = Vec::new();
        let thread_of = marks
            .iter()
            .map(|(_, m)| {
                *ids.entry((m.pid, m.tid)).or_insert_with(|| {
                    threads.push((m.pid, m.tid));
                    threads.len() - 1
                })
            })
            .collect::<Vec<_>>();
        let spans = laned(profile, &listed_at, &thread_of, threads.len());
        Marks {
            marks,
            dropped,
            threads,
            thread_of,
            spans,
        }
    }

    /// The page's `marks` object; `profile` maps mark threads to its threads (for their
    /// command names).
    pub fn to_json(&self, profile: &Profile) -> Value {
        let mut events = Strings::default();
        let mut texts = Strings::default();
        let mut names = Strings::default();
        let (mut time, mut thread, mut cpu, mut event, mut text) = (
            Packed::default(),
            Packed::default(),
            Packed::default(),
            Packed::default(),
            Packed::default(),
        );
        let mut last = 0;
        for (i, &(t, m)) in self.marks.iter().enumerate() {
            time.push(t - last);
            last = t;
            thread.push(self.thread_of[i] as u64);
            cpu.push_signed(if m.cpu == u32::MAX {
                -1
            } else {
                i64::from(m.cpu)
            });
            event.push(events.id(&m.event));
            text.push(texts.id(&m.text));
        }
        let (mut begin, mut end, mut name, mut lane) = (
            Packed::default(),
            Packed::default(),
            Packed::default(),
            Packed::default(),
        );
        for s in &self.spans {
            begin.push(s.begin as u64);
            end.push_signed(s.end.map_or(-1, |e| e as i64));
            name.push(names.id(&s.name));
            lane.push(u64::from(s.lane));
        }
        json!({
            "n": self.marks.len(),
            "dropped": self.dropped,
            "time": time.finish(),
            "thread": thread.finish(),
            "threads": self.threads.iter().map(|&(pid, tid)| json!([pid, tid, profile_thread(profile, pid, tid)])).collect::<Vec<_>>(),
            "cpu": cpu.finish(),
            "event": event.finish(),
            "events": events.list,
            "text": text.finish(),
            "texts": texts.list,
            "spans": {
                "n": self.spans.len(),
                "begin": begin.finish(),
                "end": end.finish(),
                "name": name.finish(),
                "lane": lane.finish(),
                "names": names.list,
            },
        })
    }
}

/// The index in [`Profile::threads`] of the thread `tid` of `pid` (-1 when it has none:
/// a thread that marked but was never sampled has no command name there). The last entry
/// of the tid: a thread that exec'd has one per command name, and the marks come from the
/// program it became (`kprof-agent` forks the workload, which execs `mychardrv-writer`).
fn profile_thread(profile: &Profile, pid: i32, tid: i32) -> i64 {
    profile
        .threads
        .iter()
        .rposition(|t| t.tid == tid && (t.pid == pid || pid < 0))
        .map_or(-1, |i| i as i64)
}

/// The profile's spans whose begin mark is listed, with list indices and a lane each: the
/// lowest lane free of the thread's spans still open at its begin (an end mark left out of
/// the page leaves its span open to the capture end, as an unended one).
fn laned(
    profile: &Profile,
    listed_at: &HashMap<usize, usize>,
    thread_of: &[usize],
    threads: usize,
) -> Vec<Span> {
    // Per thread: (lane, end index) of the spans drawn so far that may still be open.
    let mut open: Vec<Vec<(u32, Option<usize>)>> = vec![Vec::new(); threads];
    let mut spans = Vec::new();
    for s in kprof_symbols::marks::spans(profile) {
        let Some(&begin) = listed_at.get(&s.begin) else {
            continue;
        };
        let end = s.end_marker.and_then(|e| listed_at.get(&e).copied());
        let thread = thread_of[begin];
        let lanes = &mut open[thread];
        lanes.retain(|&(_, e)| e.is_none_or(|e| e > begin));
        let lane = (0..)
            .find(|l| lanes.iter().all(|&(used, _)| used != *l))
            .unwrap_or(0);
        lanes.push((lane, end));
        spans.push(Span {
            thread,
            name: s.name,
            begin,
            end,
            lane,
        });
    }
    spans
}

/// A string table: each distinct string once, referred to by index.
#[derive(Default)]
struct Strings<'a> {
    list: Vec<&'a str>,
    ids: HashMap<&'a str, u64>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u64 {
        let next = self.list.len() as u64;
        *self.ids.entry(s).or_insert_with(|| {
            self.list.push(s);
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kprof_symbols::profile::{Marker, SpanEdge};

    fn mark(time: u64, tid: i32, text: &str, edge: Option<SpanEdge>) -> Marker {
        Marker {
            time,
            kind: MarkerKind::Mark(Mark {
                event: "ftrace:print".to_owned(),
                pid: 100,
                tid,
                cpu: 0,
                text: text.to_owned(),
                fields: Vec::new(),
                edge,
            }),
        }
    }
    fn begin(time: u64, tid: i32, name: &str) -> Marker {
        let text = format!("B|100|{name}");
        mark(time, tid, &text, Some(SpanEdge::Begin(name.to_owned())))
    }
    fn end(time: u64, tid: i32, name: Option<&str>) -> Marker {
        let text = format!("E|100|{}", name.unwrap_or(""));
        mark(
            time,
            tid,
            &text,
            Some(SpanEdge::End(name.map(str::to_owned))),
        )
    }
    fn profile(markers: Vec<Marker>) -> Profile {
        let mut p = Profile::default();
        p.meta.markers = markers;
        p
    }
    /// (thread, name, begin, end, lane) of every span.
    fn spans(m: &Marks) -> Vec<(usize, String, usize, Option<usize>, u32)> {
        m.spans
            .iter()
            .map(|s| (s.thread, s.name.clone(), s.begin, s.end, s.lane))
            .collect()
    }

    /// A thread that exec'd has a profile thread per command name; its marks row is the
    /// last one's, the program that marked (the workload kprof-agent forked and exec'd).
    #[test]
    fn to_json_marks_thread_after_exec_is_last_comm() {
        use kprof_symbols::profile::Thread;
        let mut p = profile(vec![begin(10, 1, "batch 1")]);
        for comm in ["kprof-agent", "mychardrv-write"] {
            p.threads.push(Thread {
                pid: 100,
                tid: 1,
                comm: comm.to_owned(),
            });
        }
        let json = Marks::of(&p).to_json(&p);
        assert_eq!(json["threads"], serde_json::json!([[100, 1, 1]]), "{json}");
    }

    /// Two threads running the same span name at once each close their own: an end pairs
    /// with the begin of its thread, not the latest begin of the name.
    #[test]
    fn pair_marks_same_name_on_two_threads_pairs_per_thread() {
        let p = profile(vec![
            begin(10, 1, "frame"),
            begin(20, 2, "frame"),
            end(30, 1, Some("frame")),
            end(40, 2, Some("frame")),
        ]);
        let m = Marks::of(&p);
        assert_eq!(m.threads, vec![(100, 1), (100, 2)]);
        assert_eq!(
            spans(&m),
            vec![
                (0, "frame".to_owned(), 0, Some(2), 0),
                (1, "frame".to_owned(), 1, Some(3), 0),
            ]
        );
    }

    /// Nested spans take the next lane; an end names the span it closes even when another
    /// opened inside it is still open; a nameless end closes the innermost.
    #[test]
    fn pair_marks_nested_spans_get_lanes_and_close_by_name() {
        let p = profile(vec![
            begin(0, 1, "outer"),
            begin(10, 1, "inner"),
            end(20, 1, Some("outer")),
            begin(30, 1, "next"),
            end(40, 1, None),
            end(50, 1, Some("inner")),
        ]);
        let m = Marks::of(&p);
        assert_eq!(
            spans(&m),
            vec![
                (0, "outer".to_owned(), 0, Some(2), 0),
                (0, "inner".to_owned(), 1, Some(5), 1),
                // Lane 0 is free again once outer closed.
                (0, "next".to_owned(), 3, Some(4), 0),
            ]
        );
    }

    /// An end that closes nothing is no span (the page draws it as a tick); a begin never
    /// closed stays open (drawn to the capture end).
    #[test]
    fn pair_marks_unpaired_end_and_open_begin() {
        let p = profile(vec![
            end(5, 1, Some("orphan")),
            mark(6, 1, "plain", None),
            begin(7, 1, "forever"),
        ]);
        let m = Marks::of(&p);
        assert_eq!(spans(&m), vec![(0, "forever".to_owned(), 2, None, 0)]);
    }

    /// Past [`MAX_MARKS`] the page keeps the first ones in time and counts the rest, so it
    /// can say how many it left out.
    #[test]
    fn pair_marks_past_the_limit_keeps_the_first_and_counts_the_rest() {
        let markers = (0..MAX_MARKS as u64 + 5)
            .rev()
            .map(|t| mark(t, 1, "m", None))
            .collect();
        let p = profile(markers);
        let m = Marks::of(&p);
        assert_eq!((m.marks.len(), m.dropped), (MAX_MARKS, 5));
        assert_eq!(m.marks.last().map(|(t, _)| *t), Some(MAX_MARKS as u64 - 1));
        assert_eq!(Marks::of(&p).to_json(&p)["dropped"], 5);
    }

    /// Marks out of time order are sorted (stable: a begin and an end of the same time keep
    /// their order), and the capture's own markers are not marks.
    #[test]
    fn pair_marks_sorted_by_time_without_capture_markers() {
        let mut markers = vec![
            begin(50, 1, "b"),
            end(50, 1, Some("b")),
            mark(10, 1, "early", None),
        ];
        markers.push(Marker {
            time: 0,
            kind: MarkerKind::WorkloadStart,
        });
        let p = profile(markers);
        let m = Marks::of(&p);
        let times: Vec<u64> = m.marks.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, vec![10, 50, 50]);
        assert_eq!(spans(&m), vec![(0, "b".to_owned(), 1, Some(2), 0)]);
    }
}
