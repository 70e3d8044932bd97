//! The marks of a profile ([`MarkerKind::Mark`]: `trace_marker` lines, tracepoints) as the
//! text and JSON reports list them: those in the profile's `--time` window, in time order,
//! with the name of the thread that marked.

use kprof_symbols::profile::{Mark, MarkerKind, Profile, SpanEdge};
use serde_json::{json, Value};
use std::collections::HashMap;

/// One mark as listed.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// ns since capture start.
    pub time: u64,
    /// The mark.
    pub mark: &'a Mark,
    /// The marking thread's command name, when a sample or mark named it.
    pub comm: Option<&'a str>,
}

/// The marks in `p`'s window ([`kprof_symbols::profile::Meta::window`], `[start, end)`).
pub fn listed(p: &Profile) -> Vec<Listed<'_>> {
    let w = p.meta.window;
    let inside =
        |t: u64| w.is_none_or(|w| w.start.is_none_or(|a| t >= a) && w.end.is_none_or(|b| t < b));
    let comms = comms(p);
    p.meta
        .markers
        .iter()
        .filter_map(|m| match &m.kind {
            MarkerKind::Mark(mark) if inside(m.time) => Some(Listed {
                time: m.time,
                mark,
                comm: comms.get(&(mark.pid, mark.tid)).copied(),
            }),
            _ => None,
        })
        .collect()
}

/// Each thread's name by (pid, tid): its last one (after an exec), looked up once per mark.
pub fn comms(p: &Profile) -> HashMap<(i32, i32), &str> {
    p.threads
        .iter()
        .map(|t| ((t.pid, t.tid), t.comm.as_str()))
        .collect()
}

/// `comm/pid/tid`, `?` for what was not recorded.
pub fn thread_label(l: &Listed<'_>) -> String {
    format!("{}/{}/{}", l.comm.unwrap_or("?"), l.mark.pid, l.mark.tid)
}

/// A mark as `markers[]` of the JSON report (docs/json-schema.md).
pub fn to_json(l: &Listed<'_>) -> Value {
    let m = l.mark;
    let edge = match &m.edge {
        Some(SpanEdge::Begin(n)) => json!({"begin": n}),
        Some(SpanEdge::End(n)) => json!({"end": n}),
        None => Value::Null,
    };
    json!({
        "time_ns": l.time,
        "cpu": (m.cpu != u32::MAX).then_some(m.cpu),
        "pid": m.pid,
        "tid": m.tid,
        "comm": l.comm,
        "event": m.event,
        "text": m.text,
        "fields": m.fields.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
        "edge": edge,
    })
}
