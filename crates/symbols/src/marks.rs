//! The spans of a profile's marks: each `B|PID|NAME` mark paired with the end mark of the same
//! thread that closes it (`E|PID|NAME`, or `E|PID`/`E` closing the innermost open span), as
//! atrace and Perfetto pair them. What `--time NAME`, the Firefox export and the timeline draw.

use crate::profile::{MarkerKind, Profile, SpanEdge};
use std::collections::HashMap;

/// One span of a thread's marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The span's name (`B|PID|NAME`).
    pub name: String,
    /// The thread that marked it.
    pub pid: i32,
    /// Its thread id.
    pub tid: i32,
    /// ns since capture start of the begin mark.
    pub start: u64,
    /// ns since capture start of the end mark; `None` when the capture ended first.
    pub end: Option<u64>,
    /// Index into [`crate::profile::Meta::markers`] of the begin mark.
    pub begin: usize,
    /// Index of the end mark, when there is one.
    pub end_marker: Option<usize>,
}

/// Every span of `p`'s marks, in the order they began. End marks that close nothing are left
/// out (they stay plain marks in the lists).
pub fn spans(p: &Profile) -> Vec<Span> {
    let mut open: HashMap<i32, Vec<usize>> = HashMap::new();
    let mut spans: Vec<Span> = Vec::new();
    for (i, m) in p.meta.markers.iter().enumerate() {
        let MarkerKind::Mark(mark) = &m.kind else {
            continue;
        };
        match &mark.edge {
            Some(SpanEdge::Begin(name)) => {
                open.entry(mark.tid).or_default().push(spans.len());
                spans.push(Span {
                    name: name.clone(),
                    pid: mark.pid,
                    tid: mark.tid,
                    start: m.time,
                    end: None,
                    begin: i,
                    end_marker: None,
                });
            }
            Some(SpanEdge::End(name)) => {
                let Some(stack) = open.get_mut(&mark.tid) else {
                    continue;
                };
                let at = match name {
                    Some(n) => stack.iter().rposition(|s| spans[*s].name == *n),
                    None => stack.len().checked_sub(1),
                };
                if let Some(at) = at {
                    let s = stack.remove(at);
                    spans[s].end = Some(m.time);
                    spans[s].end_marker = Some(i);
                }
            }
            None => {}
        }
    }
    spans
}

/// The first span called `name` that ended (the earliest begin): `(start, end)`.
pub fn first_span(p: &Profile, name: &str) -> Option<(u64, u64)> {
    spans(p)
        .into_iter()
        .filter(|s| s.name == name)
        .find_map(|s| Some((s.start, s.end?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Mark, Marker};

    fn profile(marks: &[(u64, i32, Option<SpanEdge>)]) -> Profile {
        let mut p = Profile::default();
        p.meta.markers = marks
            .iter()
            .map(|(time, tid, edge)| Marker {
                time: *time,
                kind: MarkerKind::Mark(Mark {
                    event: "ftrace:print".into(),
                    pid: 1,
                    tid: *tid,
                    cpu: 0,
                    text: String::new(),
                    fields: Vec::new(),
                    edge: edge.clone(),
                }),
            })
            .collect();
        p
    }

    /// Nested spans pair per thread, a bare end closes the innermost, another thread's end
    /// closes nothing of this one, and a span open at the end has no end.
    #[test]
    fn spans_marks_nested_per_thread() {
        let b = |n: &str| Some(SpanEdge::Begin(n.into()));
        let e = |n: Option<&str>| Some(SpanEdge::End(n.map(Into::into)));
        let p = profile(&[
            (1, 7, b("outer")),
            (2, 7, b("inner")),
            (3, 8, e(Some("outer"))),
            (4, 7, e(None)),
            (5, 7, e(Some("outer"))),
            (6, 8, b("late")),
            (7, 8, None),
        ]);
        let all = spans(&p);
        let got: Vec<_> = all
            .iter()
            .map(|s| (s.name.as_str(), s.tid, s.start, s.end))
            .collect();
        assert_eq!(
            got,
            [
                ("outer", 7, 1, Some(5)),
                ("inner", 7, 2, Some(4)),
                ("late", 8, 6, None)
            ]
        );
        assert_eq!(first_span(&p, "inner"), Some((2, 4)));
        assert_eq!(first_span(&p, "late"), None);
    }
}
