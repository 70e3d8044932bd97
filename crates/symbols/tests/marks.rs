//! Marks of a real capture: the perf.data of `kprof-agent record -e cpu-clock -F 200
//! --markers -- ./tm 0.05` (the m-agent branch's agent, Linux 6.18 x86_64, 18 KB), whose
//! program writes `B|PID|phase_x` / `E|PID|phase_x` around three phases and `all done` to
//! ftrace's trace_marker; the agent stored the lines as `ftrace:print` samples with the
//! print format in the tracing data (`perf script` prints them).

use kprof_symbols::profile::{MarkerKind, SpanEdge};
use std::path::Path;

const CAPTURE: &str = "tests/data/marks/agent-markers.perf.data";

/// The seven lines are `ftrace:print` marks in time order with their texts (no newline) and
/// edges, on the program's thread; `ftrace:print` is no event; the spans pair per thread.
#[test]
fn symbolize_perfdata_agent_markers_print_marks_spans() {
    let p = kprof_symbols::symbolize(Path::new(CAPTURE), &[]).unwrap();
    let names: Vec<&str> = p.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["cpu-clock"]);
    let marks: Vec<_> = p
        .meta
        .markers
        .iter()
        .filter_map(|m| match &m.kind {
            MarkerKind::Mark(k) => Some((m.time, k)),
            _ => None,
        })
        .collect();
    let pid = marks[0].1.pid;
    let texts: Vec<&str> = marks.iter().map(|(_, m)| m.text.as_str()).collect();
    let want: Vec<String> = ["a", "b", "c"]
        .iter()
        .flat_map(|x| [format!("B|{pid}|phase_{x}"), format!("E|{pid}|phase_{x}")])
        .chain(["all done".into()])
        .collect();
    assert_eq!(texts, want);
    assert!(marks.windows(2).all(|w| w[0].0 <= w[1].0));
    for (_, m) in &marks {
        assert_eq!((m.event.as_str(), m.tid), ("ftrace:print", pid));
        assert!(m.fields.is_empty() && m.cpu != u32::MAX);
    }
    assert_eq!(marks[0].1.edge, Some(SpanEdge::Begin("phase_a".into())));
    assert_eq!(marks[1].1.edge, Some(SpanEdge::End(Some("phase_a".into()))));
    assert_eq!(marks[6].1.edge, None);
    let thread = p
        .threads
        .iter()
        .find(|t| t.tid == pid)
        .expect("the marking thread");
    assert_eq!(thread.comm, "tm");
    let spans = kprof_symbols::marks::spans(&p);
    let got: Vec<_> = spans
        .iter()
        .map(|s| (s.name.as_str(), Some(s.start), s.end))
        .collect();
    assert_eq!(
        got,
        [
            ("phase_a", Some(marks[0].0), Some(marks[1].0)),
            ("phase_b", Some(marks[2].0), Some(marks[3].0)),
            ("phase_c", Some(marks[4].0), Some(marks[5].0)),
        ]
    );
    assert!(
        !p.warnings.iter().any(|w| w.contains("ftrace:print")),
        "{:?}",
        p.warnings
    );
}
