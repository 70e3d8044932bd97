//! Tracepoint samples other than the context switches become marks on the timeline
//! ([`MarkerKind::Mark`]): `ftrace:print` ones (the `trace_marker` lines of `record
//! --markers`) with their text and span edges, others with their decoded fields. They are not
//! sampling events: they count no on-CPU sample and leave [`crate::Profile::events`] at the
//! end.

use super::State;
use crate::profile::{Mark, MarkerKind, SpanEdge};
use crate::tracing_data::{hex_bytes, Format, TracingData};
use linux_perf_data::linux_perf_event_reader::SampleRecord;
use std::collections::HashMap;

/// The event `record --markers` writes the `trace_marker` lines as.
const PRINT_EVENT: &str = "ftrace:print";

/// The mark events of a capture and the formats their payloads are decoded with.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// By event index: the event's format, `None` when the tracing data has none.
    events: HashMap<usize, Option<Format>>,
    big_endian: bool,
}

impl Marks {
    /// Whether event `e` makes marks.
    pub(super) fn is_mark(&self, e: usize) -> bool {
        self.events.contains_key(&e)
    }
}

impl State<'_> {
    /// Makes tracepoint event `e` (attr config `id`) a mark event; a warning when
    /// `tracing` has no format for it.
    pub(super) fn mark_event(&mut self, e: usize, id: u64, tracing: Option<&TracingData>) {
        let name = &self.profile.events[e].name;
        let format = tracing.and_then(|td| {
            let by_name = name
                .split_once(':')
                .and_then(|(sys, ev)| td.format(sys, ev));
            by_name.or_else(|| td.format_by_id(id)).cloned()
        });
        if format.is_none() {
            self.profile.warnings.push(format!(
                "event {name}: the capture's tracing data has no format for it (tracepoint id {id}); its marks show the raw record in hex"
            ));
        }
        self.marks.big_endian = tracing.is_some_and(|t| t.big_endian);
        self.marks.events.insert(e, format);
    }

    /// A sample of mark event `e` at absolute `time`.
    pub(super) fn on_mark(&mut self, s: &SampleRecord<'_>, e: usize, time: Option<u64>) {
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        // The thread is named now, under the name it had when it marked.
        self.stacks.thread(&mut self.profile.threads, pid, tid);
        let raw = s.raw.as_ref().map(|r| r.as_slice().into_owned());
        let format = self.marks.events.get(&e).and_then(Option::as_ref);
        let mut mark = Mark {
            event: self.profile.events[e].name.clone(),
            pid,
            tid,
            cpu: s.cpu.unwrap_or(u32::MAX),
            text: String::new(),
            fields: Vec::new(),
            edge: None,
        };
        match (format, raw) {
            (Some(f), Some(raw)) if is_print(f) => {
                let buf = f
                    .field("buf")
                    .map(|b| b.decode(&raw, self.marks.big_endian));
                let text = buf.map(|b| b.to_string()).unwrap_or_default();
                mark.text = text.strip_suffix('\n').unwrap_or(&text).to_string();
                mark.edge = span_edge(&mark.text);
            }
            (Some(f), Some(raw)) => {
                mark.fields = f
                    .decode(&raw, self.marks.big_endian)
                    .into_iter()
                    .filter(|(f, _)| !f.name.starts_with("common_"))
                    .map(|(f, v)| (f.name.clone(), v.to_string()))
                    .collect();
                mark.text = mark
                    .fields
                    .iter()
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            (None, Some(raw)) => mark.text = hex_bytes(&raw),
            (_, None) => mark.text = "(no raw record)".into(),
        }
        self.clock.mark(time, MarkerKind::Mark(mark));
    }
}

fn is_print(f: &Format) -> bool {
    format!("{}:{}", f.system, f.name) == PRINT_EVENT
}

/// atrace's span edges: `B|PID|NAME` begins NAME; `E|PID|NAME`, `E|PID` and `E` end one.
pub(crate) fn span_edge(text: &str) -> Option<SpanEdge> {
    let mut parts = text.splitn(3, '|');
    let kind = parts.next()?;
    let pid = parts.next();
    if pid.is_some_and(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let name = parts.next().filter(|n| !n.is_empty());
    match (kind, pid, name) {
        ("B", Some(_), Some(n)) => Some(SpanEdge::Begin(n.to_string())),
        ("E", _, n) => Some(SpanEdge::End(n.map(str::to_string))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// atrace's begin/end texts are edges; anything else, and a pid that is no number, is a
    /// plain mark.
    #[test]
    fn span_edge_atrace_texts() {
        assert_eq!(
            span_edge("B|12|frame 12"),
            Some(SpanEdge::Begin("frame 12".into()))
        );
        assert_eq!(
            span_edge("E|12|a|b"),
            Some(SpanEdge::End(Some("a|b".into())))
        );
        assert_eq!(span_edge("E|12"), Some(SpanEdge::End(None)));
        assert_eq!(span_edge("E"), Some(SpanEdge::End(None)));
        for plain in ["B|12", "B|x|name", "hello", "", "C|12|n|3", "Begin", "E|"] {
            assert_eq!(span_edge(plain), None, "{plain}");
        }
    }
}
