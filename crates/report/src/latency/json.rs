//! The latency and lock-wait report as JSON (docs/json-schema.md, `view: "latency"`).

use std::io::Write;

use kprof_symbols::latency::{Contention, Stats, TimedFunction, WaitGroup};
use kprof_symbols::profile::Profile;
use serde_json::{json, Map, Value};

use super::{frame_names, frames_of, kind_name, thread_of};
use crate::Error;

/// The JSON report: the parts every report has, `view: "latency"`, then `latency` (each
/// timed function with its statistics, histogram and `slowest` slowest calls) and
/// `contention` (the waits by lock and by waiting function); each null when not recorded.
pub fn write_json(p: &Profile, slowest: usize, out: &mut dyn Write) -> Result<(), Error> {
    let mut m = crate::json::base(p);
    m.insert("view".into(), json!("latency"));
    m.insert(
        "latency".into(),
        match &p.latency {
            Some(l) => json!({
                "functions": l.functions.iter().map(|f| function(p, f, slowest)).collect::<Vec<_>>(),
            }),
            None => Value::Null,
        },
    );
    m.insert(
        "contention".into(),
        p.contention
            .as_ref()
            .map_or(Value::Null, |c| contention(p, c)),
    );
    crate::json::finish(m, out)
}

/// `count`, `total_ns`, `mean_ns`, `min_ns`, percentiles, `max_ns`.
fn stats_fields(s: &Stats) -> Map<String, Value> {
    let mut m = Map::new();
    for (k, v) in [
        ("count", s.count),
        ("total_ns", s.total),
        ("mean_ns", s.mean()),
        ("min_ns", s.min),
        ("p50_ns", s.p50),
        ("p90_ns", s.p90),
        ("p99_ns", s.p99),
        ("max_ns", s.max),
    ] {
        m.insert(k.into(), json!(v));
    }
    m
}

/// The frames of a stack as the other JSON views give them (`image`, `symbol`), with the
/// frame's source position and whether it is an inlined call.
pub(crate) fn frames(p: &Profile, stack: u32) -> Value {
    frames_of(p, stack)
        .iter()
        .map(|&fr| {
            let (symbol, image) = frame_names(p, fr);
            let f = p.frames.get(fr);
            json!({
                "image": image,
                "symbol": symbol,
                "file": f.and_then(|f| f.file.as_deref()),
                "line": f.and_then(|f| f.line),
                "inlined": f.is_some_and(|f| f.inlined),
            })
        })
        .collect()
}

/// A call or wait: when, how long, which thread and CPU, and its stack's frames.
fn occurrence(p: &Profile, start: u64, duration: u64, stack: u32, cpu: u32) -> Map<String, Value> {
    let t = thread_of(p, stack);
    let mut m = Map::new();
    m.insert("start_ns".into(), json!(start));
    m.insert("duration_ns".into(), json!(duration));
    m.insert("pid".into(), json!(t.map(|t| t.pid)));
    m.insert("tid".into(), json!(t.map(|t| t.tid)));
    m.insert("comm".into(), json!(t.map(|t| t.comm.as_str())));
    m.insert("cpu".into(), json!((cpu != u32::MAX).then_some(cpu)));
    m.insert("frames".into(), frames(p, stack));
    m
}

fn function(p: &Profile, f: &TimedFunction, slowest: usize) -> Value {
    let stats = f.stats();
    let mut m = stats_fields(&stats);
    m.insert("name".into(), json!(f.name));
    m.insert("kind".into(), json!(kind_name(f.kind)));
    m.insert("hits".into(), json!(f.hits));
    m.insert("lost".into(), json!(f.lost));
    m.insert("unmatched_returns".into(), json!(f.unmatched_returns));
    m.insert("unfinished".into(), json!(f.unfinished));
    m.insert(
        "histogram".into(),
        stats
            .histogram
            .iter()
            .map(|&(low, high, count)| json!({"low_ns": low, "high_ns": high, "count": count}))
            .collect(),
    );
    m.insert(
        "slowest".into(),
        f.slowest(slowest)
            .into_iter()
            .map(|c| {
                let mut o = occurrence(p, c.start, c.duration, c.stack, c.cpu);
                o.insert("depth".into(), json!(c.depth));
                Value::Object(o)
            })
            .collect(),
    );
    Value::Object(m)
}

fn group(p: &Profile, c: &Contention, g: &WaitGroup) -> Value {
    let mut m = stats_fields(&g.stats);
    m.insert("name".into(), json!(g.name));
    m.insert("type".into(), json!(g.kind));
    m.insert(
        "longest".into(),
        super::longest(c, g).map_or(Value::Null, |w| {
            Value::Object(occurrence(p, w.start, w.duration, w.stack, w.cpu))
        }),
    );
    Value::Object(m)
}

fn contention(p: &Profile, c: &Contention) -> Value {
    let total = c
        .waits
        .iter()
        .fold(0u64, |a, w| a.saturating_add(w.duration));
    json!({
        "kernel_locks": c.kernel_locks,
        "futex": c.futex,
        "waits": c.waits.len(),
        "total_ns": total,
        "by_lock": c.by_lock().iter().map(|g| group(p, c, g)).collect::<Vec<_>>(),
        "by_caller": c.by_caller(|s| super::caller(p, s)).iter().map(|g| group(p, c, g)).collect::<Vec<_>>(),
        "unmatched_ends": c.unmatched_ends,
        "unfinished": c.unfinished,
    })
}
